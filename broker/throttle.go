package broker

import (
	"time"

	"github.com/fjordlog/fjord/broker/partitions"
	"github.com/fjordlog/fjord/broker/quota"
	"github.com/fjordlog/fjord/broker/replica"
)

// Replication throttles (Kafka's replication quotas, KIP-73): the
// broker's side. broker/quota holds the token buckets and decides; here
// the topic's throttled-replica lists, the ISR and the rates are looked
// up. The leader side covers a follower's fetch of a partition whose
// leader.replication.throttled.replicas lists "partition:<this broker>"
// (or is "*"); the follower side this broker's fetches of partitions that
// follower.replication.throttled.replicas lists. A throttled partition
// over its quota is left out of the fetch (its response carries no
// records and no error; the follower asks again), never failed.
//
// The rates are the running configuration's (a dynamic config for this
// broker id, then the cluster default, as Kafka layers them, then this
// broker's static config; broker/config/dynamic.go); 0 is no cap.

// LeaderThrottle is the leader side as a follower's fetch reads it (the
// Fetch handler, broker/partitions, checks it per partition).
func (h partitionsHost) LeaderThrottle() partitions.LeaderThrottle {
	return partitions.LeaderThrottle{Quotas: &h.b.throttles, NodeID: h.b.cfg.NodeID, Rate: h.b.live().LeaderReplicationThrottledRate}
}

var _ replica.FollowerThrottle = fetchHost{}

// FollowerThrottle is replica.FollowerThrottle: this broker's follower
// quota for partitions out of the ISR that the topic lists.
func (h fetchHost) FollowerThrottle(p *replica.Partition) (rate int64, withhold bool) {
	b := h.b
	inISR, listed := p.View().InISR, false
	if !inISR { // an ISR member is never throttled: spare the lookup
		t := b.replicas.Topic(p.Topic)
		listed = t != nil && t.ID == p.TopicID &&
			b.throttles.Listed(t.Configs, quota.FollowerReplicas, p.Index, b.cfg.NodeID)
	}
	return b.throttles.Follower.Check(time.Now(), listed, inISR, b.live().FollowerReplicationThrottledRate)
}

// FollowerFetchedBytes is replica.FollowerThrottle: n bytes fetched for a
// throttled partition at rate.
func (h fetchHost) FollowerFetchedBytes(rate int64, n int) {
	h.b.throttles.Follower.Record(time.Now(), rate, n)
}
