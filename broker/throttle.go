package broker

import (
	"math"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/fjordlog/fjord/broker/replica"
)

// Replication throttles (Kafka's replication quotas, KIP-73), which keep a
// partition move from starving the brokers' other traffic:
//
//   - leader side: a leader sends a follower of a throttled partition that
//     is out of the ISR at most leader.replication.throttled.rate bytes per
//     second, summed over all such followers; the partitions are throttled
//     where the topic's leader.replication.throttled.replicas lists
//     "partition:<this broker>" (or is "*");
//   - follower side: a follower out of the ISR fetches at most
//     follower.replication.throttled.rate bytes per second for the
//     partitions whose follower.replication.throttled.replicas lists
//     "partition:<this broker>" (or "*").
//
// A replica in the ISR is never throttled: holding it back would hold back
// the high watermark, and so every acks=all producer. A throttled
// partition over its quota is left out of the fetch (its response carries
// no records and no error; the follower asks again), never failed.
//
// The rates come from the metadata image (a dynamic config for this broker
// id, then the cluster default, as Kafka layers them), then this broker's
// static config, then Long.MAX_VALUE (no cap). The quota is a token bucket
// holding at most one second of bytes: what is sent beyond the rate over a
// one-second window waits until the window allows it. A response may
// overshoot by one fetch (the bucket goes negative and the debt is paid
// before the next one), which is how Kafka's quota behaves too.

// Topic config keys of the throttles (the rates are broker keys: keys.go).
const (
	leaderThrottledReplicas   = "leader.replication.throttled.replicas"
	followerThrottledReplicas = "follower.replication.throttled.replicas"
)

// replThrottles are this broker's two quotas.
type replThrottles struct {
	leader, follower replQuota
	// lists caches parsed throttled-replica lists by their text (a topic's
	// config value), so the fetch path parses each value once.
	lists sync.Map // string → throttledList
}

// replQuota is a token bucket of bytes.
type replQuota struct {
	mu struct {
		sync.Mutex
		rate  int64   // bytes/s the bucket was last filled at
		avail float64 // bytes that may go now; negative: debt
		last  time.Time
	}
}

// exceeded reports whether the quota at rate (bytes/s) is spent at now.
func (q *replQuota) exceeded(now time.Time, rate int64) bool {
	if rate == math.MaxInt64 {
		return false
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	q.refillLocked(now, rate)
	return q.mu.avail <= 0
}

// record counts n bytes sent (or fetched) under the quota.
func (q *replQuota) record(now time.Time, rate int64, n int) {
	if rate == math.MaxInt64 || n <= 0 {
		return
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	q.refillLocked(now, rate)
	q.mu.avail -= float64(n)
}

// REQUIRES: q.mu held.
func (q *replQuota) refillLocked(now time.Time, rate int64) {
	if q.mu.last.IsZero() || rate != q.mu.rate {
		// A new rate starts with a full second of it (and forgives debt
		// run up at another rate).
		q.mu.rate, q.mu.avail, q.mu.last = rate, float64(rate), now
		return
	}
	if el := now.Sub(q.mu.last).Seconds(); el > 0 {
		q.mu.avail = min(q.mu.avail+el*float64(rate), float64(rate))
	}
	q.mu.last = now
}

// throttledList is a parsed leader/follower.replication.throttled.replicas
// value: every replica ("*"), or a set of partition:broker pairs.
type throttledList struct {
	all   bool
	pairs map[[2]int32]bool
}

func (l throttledList) has(partition, broker int32) bool {
	return l.all || l.pairs[[2]int32{partition, broker}]
}

// parseThrottledList parses "*" or "p:b,p:b,..." (spaces allowed around
// items). ok is false for anything else.
func parseThrottledList(v string) (throttledList, bool) {
	v = strings.TrimSpace(v)
	if v == "*" {
		return throttledList{all: true}, true
	}
	l := throttledList{pairs: map[[2]int32]bool{}}
	if v == "" {
		return l, true
	}
	for _, item := range strings.Split(v, ",") {
		ps, bs, ok := strings.Cut(strings.TrimSpace(item), ":")
		if !ok {
			return throttledList{}, false
		}
		p, err1 := strconv.ParseInt(strings.TrimSpace(ps), 10, 32)
		b, err2 := strconv.ParseInt(strings.TrimSpace(bs), 10, 32)
		if err1 != nil || err2 != nil || p < 0 || b < 0 {
			return throttledList{}, false
		}
		l.pairs[[2]int32{int32(p), int32(b)}] = true
	}
	return l, true
}

// checkThrottledList validates a throttled-replicas topic config value.
func checkThrottledList(v string) error {
	if _, ok := parseThrottledList(v); !ok {
		return errThrottledList(v)
	}
	return nil
}

type errThrottledList string

func (e errThrottledList) Error() string {
	return strconv.Quote(string(e)) + ` is not "*" or a list of partition:broker pairs`
}

// throttled reports whether the topic config key (a throttled-replicas
// list) names partition on broker. An unparsable value throttles nothing
// (validation refuses one; an image could hold one written by other code).
func (th *replThrottles) throttled(configs map[string]string, key string, partition, broker int32) bool {
	v, ok := configs[key]
	if !ok {
		return false
	}
	if l, ok := th.lists.Load(v); ok {
		return l.(throttledList).has(partition, broker)
	}
	l, _ := parseThrottledList(v)
	th.lists.Store(v, l)
	return l.has(partition, broker)
}

// replRate is a throttle's rate for this broker as the running
// configuration has it (dynamic for this broker, then the cluster
// default, then static; dynconfig.go); MaxInt64 when there is no cap.
func replRate(rate int64) int64 {
	if rate > 0 {
		return rate
	}
	return math.MaxInt64
}

// leaderThrottle decides, for a follower's fetch of partition of t led
// here, whether it is throttled and, if so, whether the leader's quota
// lets it have data now. It returns the rate to record the bytes sent at
// (0: not throttled).
func (b *Broker) leaderThrottle(t *topic, partition, follower int32, v *replica.View, now time.Time) (rate int64, withhold bool) {
	if t == nil || t.meta == nil || !b.throttles.throttled(t.meta.Configs, leaderThrottledReplicas, partition, b.cfg.NodeID) {
		return 0, false
	}
	for _, id := range v.ISR {
		if id == follower {
			return 0, false
		}
	}
	rate = replRate(b.live().LeaderReplicationThrottledRate)
	if rate == math.MaxInt64 {
		return 0, false
	}
	return rate, b.throttles.leader.exceeded(now, rate)
}

var _ replica.FollowerThrottle = fetchHost{}

// FollowerThrottle is replica.FollowerThrottle: this broker's follower
// quota for partitions out of the ISR that the topic lists.
func (h fetchHost) FollowerThrottle(p *replica.Partition) (rate int64, withhold bool) {
	b := h.b
	v := p.View()
	if v.InISR {
		return 0, false
	}
	t := b.lookup(p.Topic)
	if t == nil || t.meta == nil || t.meta.ID != p.TopicID ||
		!b.throttles.throttled(t.meta.Configs, followerThrottledReplicas, p.Index, b.cfg.NodeID) {
		return 0, false
	}
	rate = replRate(b.live().FollowerReplicationThrottledRate)
	if rate == math.MaxInt64 {
		return 0, false
	}
	return rate, b.throttles.follower.exceeded(time.Now(), rate)
}

// FollowerFetchedBytes is replica.FollowerThrottle: n bytes fetched for a
// throttled partition at rate.
func (h fetchHost) FollowerFetchedBytes(rate int64, n int) {
	h.b.throttles.follower.record(time.Now(), rate, n)
}
