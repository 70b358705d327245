package controller

import (
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
)

// AlterPartition decides a leader's ISR change (Kafka's AlterPartition,
// KIP-497/KIP-841). The leader proposes newISR together with the leader
// epoch and partition epoch it last saw; only a proposal made against the
// current state is accepted, and only the committed change counts: the
// leader keeps using its old ISR until it sees the new partition epoch.
//
// Checks, in order:
//
//  1. brokerEpoch is brokerID's current epoch, else STALE_BROKER_EPOCH (a
//     request from a previous incarnation of the broker);
//  2. the topic id is known (UNKNOWN_TOPIC_ID) and the partition exists
//     (UNKNOWN_TOPIC_OR_PARTITION);
//  3. leaderEpoch is the current one, else FENCED_LEADER_EPOCH (a deposed
//     leader learns it is stale);
//  4. brokerID is the current leader, else NOT_LEADER_OR_FOLLOWER;
//  5. partitionEpoch is the current one, else INVALID_UPDATE_VERSION (the
//     same request replayed after it was applied lands here);
//  6. newISR is non-empty, distinct, within the replicas and contains the
//     leader, else INVALID_REQUEST; every member is a registered, unfenced
//     broker, else INELIGIBLE_REPLICA.
//
// On success it returns one ChangePartition (which bumps the partition
// epoch), or a ChangeReplicas when the new ISR completes a reassignment,
// or no record if newISR equals the current ISR; the caller answers
// from the partition state once the record, if any, is committed.
func AlterPartition(img *Image, brokerID int32, brokerEpoch int64, topicID [16]byte, partition int32,
	leaderEpoch, partitionEpoch int32, newISR []int32) ([]Record, int16) {
	if b, ok := img.Broker(brokerID); !ok || b.Epoch != brokerEpoch {
		return nil, kerr.StaleBrokerEpoch.Code
	}
	if img.TopicByID(topicID) == nil {
		return nil, kerr.UnknownTopicID.Code
	}
	p, ok := img.Partition(topicID, partition)
	switch {
	case !ok:
		return nil, kerr.UnknownTopicOrPartition.Code
	case leaderEpoch != p.LeaderEpoch:
		return nil, kerr.FencedLeaderEpoch.Code
	case brokerID != p.Leader:
		return nil, kerr.NotLeaderForPartition.Code // NOT_LEADER_OR_FOLLOWER
	case partitionEpoch != p.PartitionEpoch:
		return nil, kerr.InvalidUpdateVersion.Code
	case len(newISR) == 0 || dup(newISR) || !slices.Contains(newISR, p.Leader):
		return nil, kerr.InvalidRequest.Code
	}
	for _, r := range newISR {
		if !slices.Contains(p.Replicas, r) {
			return nil, kerr.InvalidRequest.Code
		}
		if !img.live(r) {
			return nil, kerr.IneligibleReplica.Code
		}
	}
	// An ISR that now covers a reassignment's target completes it in the
	// same change (reassign.go).
	grown := p
	grown.ISR = slices.Clone(newISR)
	if done, ok := completed(grown, img.live); ok {
		return []Record{changeReplicasRecord(topicID, partition, done)}, 0
	}
	if sameSet(newISR, p.ISR) {
		return nil, 0
	}
	isr := slices.Clone(newISR)
	return []Record{NewRecord(ChangePartition{TopicID: topicID, Partition: partition, ISR: &isr})}, 0
}

// sameSet reports whether a and b (each without duplicates) hold the same ids.
func sameSet(a, b []int32) bool {
	if len(a) != len(b) {
		return false
	}
	for _, x := range a {
		if !slices.Contains(b, x) {
			return false
		}
	}
	return true
}

// Resign decides a leader's request to give up leading a partition it
// cannot serve (its replica failed to open in time: the broker's forced
// exit from becoming leader). The checks are AlterPartition's 1-5. The new
// leader is the first other live ISR member in replica order, and the
// resigning broker leaves the ISR. If no other member is eligible the
// partition keeps its ISR (the resigning broker is the only one known to
// hold every committed record) and gets leader -1: never an unclean
// election.
func Resign(img *Image, brokerID int32, brokerEpoch int64, topicID [16]byte, partition int32,
	leaderEpoch, partitionEpoch int32) ([]Record, int16) {
	if b, ok := img.Broker(brokerID); !ok || b.Epoch != brokerEpoch {
		return nil, kerr.StaleBrokerEpoch.Code
	}
	if img.TopicByID(topicID) == nil {
		return nil, kerr.UnknownTopicID.Code
	}
	p, ok := img.Partition(topicID, partition)
	switch {
	case !ok:
		return nil, kerr.UnknownTopicOrPartition.Code
	case leaderEpoch != p.LeaderEpoch:
		return nil, kerr.FencedLeaderEpoch.Code
	case brokerID != p.Leader:
		return nil, kerr.NotLeaderForPartition.Code
	case partitionEpoch != p.PartitionEpoch:
		return nil, kerr.InvalidUpdateVersion.Code
	}
	live := func(id int32) bool { return id != brokerID && img.live(id) }
	next := p
	next.ISR = slices.DeleteFunc(slices.Clone(p.ISR), func(id int32) bool { return id == brokerID })
	leader := electFromISR(next, live)
	c := ChangePartition{TopicID: topicID, Partition: partition, Leader: &leader}
	if leader != -1 {
		c.ISR = &next.ISR
	}
	return []Record{NewRecord(c)}, 0
}
