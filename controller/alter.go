package controller

import (
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
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

// DecideAlterPartition decides a leader's AlterPartition request: each
// partition's ISR change (AlterPartition) or, for a new ISR without the
// leader itself, its resignation (Resign: the leader cannot serve the
// partition). From version 3 each ISR member carries the broker epoch the
// leader saw it at (-1: unknown), and a member whose registration has
// changed since is INELIGIBLE_REPLICA for that partition.
//
// Batching: a leader back from a restart sends hundreds of partitions at
// once, and a quorum round trip each kept the decision loop (and every
// request behind it) busy for seconds. Changes to distinct partitions are
// independent, so one round decides as many as it can against one image
// and proposes them together; a partition named again ends the round, so
// that it is decided against the image with its earlier change applied
// (and is then stale: INVALID_UPDATE_VERSION, unless it carried the new
// partition epoch). A failed proposal fails every partition of its round.
//
// The answer gives each accepted partition's leader, leader epoch, ISR and
// partition epoch from the image after the last round.
func DecideAlterPartition(req *kmsg.AlterPartitionRequest) Decision {
	a := &alterPartition{req: req, resp: req.ResponseKind().(*kmsg.AlterPartitionResponse)}
	for _, rt := range req.Topics {
		st := kmsg.NewAlterPartitionResponseTopic()
		st.TopidID = rt.TopicID
		a.resp.Topics = append(a.resp.Topics, st)
	}
	return a
}

// alterPartition is the state of DecideAlterPartition's rounds.
//
// Invariant: resp.Topics[i].Partitions answers req.Topics[i].Partitions[:n]
// for the partitions decided so far; next is the first undecided one.
type alterPartition struct {
	req  *kmsg.AlterPartitionRequest
	resp *kmsg.AlterPartitionResponse
	next struct{ topic, part int }
	done bool
	// round is the partitions the last round accepted, as indexes into
	// resp: [topic, partition].
	round [][2]int
	// resigned are the accepted resignations, as indexes into resp.
	resigned [][2]int
}

func (a *alterPartition) Next(img *Image) ([]Record, bool) {
	if a.done {
		return nil, false
	}
	type key struct {
		topic [16]byte
		index int32
	}
	seen := map[key]bool{}
	var recs []Record
	a.round = a.round[:0]
	for ; a.next.topic < len(a.req.Topics); a.next.topic, a.next.part = a.next.topic+1, 0 {
		ti, rt := a.next.topic, a.req.Topics[a.next.topic]
		for ; a.next.part < len(rt.Partitions); a.next.part++ {
			rp := rt.Partitions[a.next.part]
			k := key{rt.TopicID, rp.Partition}
			if seen[k] {
				return recs, true
			}
			seen[k] = true
			sp := kmsg.NewAlterPartitionResponseTopicPartition()
			sp.Partition = rp.Partition
			r, resign := a.decide(img, rt.TopicID, rp, &sp)
			a.resp.Topics[ti].Partitions = append(a.resp.Topics[ti].Partitions, sp)
			if sp.ErrorCode != 0 {
				continue
			}
			at := [2]int{ti, len(a.resp.Topics[ti].Partitions) - 1}
			recs = append(recs, r...)
			a.round = append(a.round, at)
			if resign {
				a.resigned = append(a.resigned, at)
			}
		}
	}
	a.done = true
	return recs, true
}

// decide decides one partition into sp's error code; resign reports a
// resignation.
func (a *alterPartition) decide(img *Image, topicID [16]byte, rp kmsg.AlterPartitionRequestTopicPartition,
	sp *kmsg.AlterPartitionResponseTopicPartition) (recs []Record, resign bool) {
	isr := rp.NewISR
	if a.req.Version >= 3 {
		isr = nil
		for _, m := range rp.NewEpochISR {
			if bs, ok := img.Broker(m.BrokerID); ok && m.BrokerEpoch != -1 && bs.Epoch != m.BrokerEpoch {
				sp.ErrorCode = kerr.IneligibleReplica.Code
			}
			isr = append(isr, m.BrokerID)
		}
		if sp.ErrorCode != 0 {
			return nil, false
		}
	}
	if slices.Contains(isr, a.req.BrokerID) {
		recs, sp.ErrorCode = AlterPartition(img, a.req.BrokerID, a.req.BrokerEpoch, topicID, rp.Partition,
			rp.LeaderEpoch, rp.PartitionEpoch, isr)
		return recs, false
	}
	recs, sp.ErrorCode = Resign(img, a.req.BrokerID, a.req.BrokerEpoch, topicID, rp.Partition,
		rp.LeaderEpoch, rp.PartitionEpoch)
	return recs, true
}

func (a *alterPartition) Proposed(code int16) {
	if code == 0 {
		return
	}
	for _, at := range a.round {
		a.resp.Topics[at[0]].Partitions[at[1]].ErrorCode = code
	}
}

func (a *alterPartition) Answer(img *Image) (kmsg.Response, []Note) {
	for i := range a.resp.Topics {
		rt := &a.resp.Topics[i]
		for j := range rt.Partitions {
			sp := &rt.Partitions[j]
			if p, ok := img.Partition(rt.TopidID, sp.Partition); ok && sp.ErrorCode == 0 {
				sp.LeaderID, sp.LeaderEpoch, sp.ISR, sp.PartitionEpoch = p.Leader, p.LeaderEpoch, p.ISR, p.PartitionEpoch
			}
		}
	}
	var notes []Note
	for _, at := range a.resigned {
		if sp := a.resp.Topics[at[0]].Partitions[at[1]]; sp.ErrorCode == 0 {
			notes = append(notes, warn("leader resigned a partition it cannot serve", "broker", a.req.BrokerID, "partition", sp.Partition))
		}
	}
	return a.resp, notes
}
