package controller

import (
	"errors"
	"fmt"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Partition reassignment (KIP-455): moving a partition's replicas to other
// brokers without losing what they hold.
//
// A move of a partition from its replicas R to a target T goes grow, catch
// up, shrink:
//
//  1. AlterPartitionReassignments (Reassign) makes the replicas T followed
//     by R \ T, Adding = T \ R, Removing = R \ T; ISR, leader and leader
//     epoch stay. Every broker placed in the replicas creates its replica
//     (broker/replicamgr/publish.go), and the new ones follow the leader from outside
//     the ISR.
//  2. The leader asks, through AlterPartition, for each new replica to join
//     the ISR once it has caught up (the same rule as any out-of-sync
//     follower; broker/replica). Only an ISR member ever leads, so a
//     replica that has not caught up can never become leader.
//  3. When the ISR covers T, the controller completes the move in one
//     record: replicas T, ISR ∩ T, Adding and Removing cleared, and, if the
//     leader is not in T, leadership to the first live member of T (which is
//     in the ISR, so it has every committed record). The removed brokers
//     unassign their replicas and delete their copies.
//
// Completion is derived from the image alone (CompleteReassignments), so a
// controller that takes over in the middle of a move finishes it; the
// active controller checks on every AlterPartition and every tick.
//
// Leader epoch: bumped only when the leader changes, as for every other
// partition change here. Kafka also bumps it at completion to fence the
// removed replicas' fetches; a Fjord leader ignores fetches from brokers
// outside the replicas (broker/replica followerFetched) and counts only
// ISR members of its own assignment in the high watermark, so a removed
// replica can neither hold the high watermark back nor push it, and a bump
// would only make the remaining followers reconcile for nothing.
//
// A new target for a partition already moving is decided against the
// original replicas O = Replicas \ Adding: Adding = T \ O, Removing = O \ T,
// and a replica added by the earlier move but not in T is dropped at once
// (from the ISR too). So a cancellation, which is a move back to O, always
// restores the assignment the first move started from (Kafka's
// ReplicationControlManager instead takes the current replicas as the
// base, so re-targeting twice can make a cancellation keep earlier
// additions). Dropping replicas never empties the ISR: a change that would
// (the ISR holds only replicas being dropped) needs an unclean election
// and is refused with INVALID_REPLICA_ASSIGNMENT, as Kafka refuses a
// cancellation with unclean election disabled.
//
// Order: a cancellation restores O in the order it has in Replicas (the
// earlier target's order, then the removed ones), as Kafka does; the
// preferred leader may therefore differ from before the move.

// Reassigning reports whether a reassignment of p is in progress.
func (p Partition) Reassigning() bool { return len(p.Adding) > 0 || len(p.Removing) > 0 }

// Target is the replica list p ends with: Replicas without Removing, in
// order. The caller owns the slice.
func (p Partition) Target() []int32 { return minus(p.Replicas, p.Removing) }

// Original is the replica list before the reassignment in progress (the one
// a cancellation restores): Replicas without Adding, in order. The caller
// owns the slice.
func (p Partition) Original() []int32 { return minus(p.Replicas, p.Adding) }

// minus returns a without the members of b, in a's order; nil if empty.
func minus(a, b []int32) []int32 {
	var out []int32
	for _, x := range a {
		if !slices.Contains(b, x) {
			out = append(out, x)
		}
	}
	return out
}

// checkReassignment verifies the reassignment invariants of Partition.
func (p *Partition) checkReassignment() error {
	if !p.Reassigning() {
		if p.Adding != nil || p.Removing != nil {
			return errors.New("empty non-nil adding or removing")
		}
		return nil
	}
	if dup(p.Adding) || dup(p.Removing) {
		return fmt.Errorf("duplicate adding %v or removing %v", p.Adding, p.Removing)
	}
	for _, r := range p.Adding {
		if !slices.Contains(p.Replicas, r) || slices.Contains(p.Removing, r) {
			return fmt.Errorf("adding %v not disjoint from removing %v within replicas %v", p.Adding, p.Removing, p.Replicas)
		}
	}
	for _, r := range p.Removing {
		if !slices.Contains(p.Replicas, r) {
			return fmt.Errorf("removing %v not within replicas %v", p.Removing, p.Replicas)
		}
	}
	target := p.Target()
	if len(target) == 0 || len(p.Original()) == 0 {
		return fmt.Errorf("replicas %v leave an empty target or original (adding %v, removing %v)", p.Replicas, p.Adding, p.Removing)
	}
	// The target comes first: its first replica is the preferred leader.
	if !slices.Equal(p.Replicas[:len(target)], target) {
		return fmt.Errorf("replicas %v do not start with the target %v", p.Replicas, target)
	}
	return nil
}

// nilIfEmpty clones ids, giving nil for an empty list (so an image's
// slices compare equal however they were built).
func nilIfEmpty(ids []int32) []int32 {
	if len(ids) == 0 {
		return nil
	}
	return slices.Clone(ids)
}

func (img *Image) changeReplicas(b ChangeReplicas) error {
	t := img.topics[b.TopicID]
	if t == nil || b.Partition < 0 || int(b.Partition) >= len(t.Partitions) {
		return fmt.Errorf("%w: change replicas %x-%d: unknown", ErrNotApplicable, b.TopicID, b.Partition)
	}
	p := t.Partitions[b.Partition]
	p.Replicas, p.ISR = slices.Clone(b.Replicas), slices.Clone(b.ISR)
	p.Adding, p.Removing = nilIfEmpty(b.Adding), nilIfEmpty(b.Removing)
	if b.Leader != p.Leader {
		p.Leader = b.Leader
		p.LeaderEpoch++
	}
	p.PartitionEpoch++
	if err := p.check(); err != nil {
		return fmt.Errorf("%w: change replicas %q-%d: %v", ErrNotApplicable, t.Name, b.Partition, err)
	}
	img.setPartition(t, b.Partition, p)
	return nil
}

// changeReplicasRecord is the record that takes a partition to next's
// replicas, adding, removing, ISR and leader.
func changeReplicasRecord(topicID [16]byte, partition int32, next Partition) Record {
	return NewRecord(ChangeReplicas{TopicID: topicID, Partition: partition,
		Replicas: slices.Clone(next.Replicas), Adding: nilIfEmpty(next.Adding), Removing: nilIfEmpty(next.Removing),
		ISR: slices.Clone(next.ISR), Leader: next.Leader})
}

// completed returns p with its reassignment completed, if it can be: its
// ISR covers the target, and the leader is in the target or a live member
// of the target can take over (then the first such, in target order). The
// ISR keeps its order, without the removed replicas.
func completed(p Partition, live func(int32) bool) (Partition, bool) {
	if !p.Reassigning() {
		return p, false
	}
	target := p.Target()
	for _, r := range target {
		if !slices.Contains(p.ISR, r) {
			return p, false
		}
	}
	next := p
	next.Replicas = target
	next.ISR = minus(p.ISR, p.Removing)
	next.Adding, next.Removing = nil, nil
	if p.Leader != -1 && !slices.Contains(target, p.Leader) {
		next.Leader = electFromISR(next, live)
		if next.Leader == -1 {
			return p, false // keep the working leader until a target member can lead
		}
	}
	return next, true
}

// Reassignment is one partition of an AlterPartitionReassignments request.
type Reassignment struct {
	Topic     string
	Partition int32
	Target    []int32 // nil: cancel the reassignment in progress
}

// ReassignResult is the outcome for one Reassignment: a Kafka error code
// and message.
type ReassignResult struct {
	ErrorCode int16
	Message   string
}

// Reassign decides an AlterPartitionReassignments request: the records to
// propose (at most one ChangeReplicas per partition, in request order) and
// one result per reassignment. Errors, as Kafka: UNKNOWN_TOPIC_OR_PARTITION
// for a partition that does not exist; INVALID_REPLICA_ASSIGNMENT for an
// empty target, duplicate brokers, an unregistered broker, or a change that
// would need an unclean election; NO_REASSIGNMENT_IN_PROGRESS for
// cancelling nothing; INVALID_REQUEST for a partition named twice. A target
// equal to the current replicas of an idle partition changes nothing; one
// that needs no new replica in sync completes at once. With allowRFChange
// false (AlterPartitionReassignments v1, KIP-1101), a target whose size
// differs from the original replicas' is INVALID_REPLICATION_FACTOR.
func Reassign(img *Image, rs []Reassignment, allowRFChange bool) ([]Record, []ReassignResult) {
	type key struct {
		topic string
		p     int32
	}
	seen := map[key]int{}
	for _, r := range rs {
		seen[key{r.Topic, r.Partition}]++
	}
	out := make([]ReassignResult, len(rs))
	var recs []Record
	for i, r := range rs {
		res := &out[i]
		if seen[key{r.Topic, r.Partition}] > 1 {
			res.ErrorCode, res.Message = kerr.InvalidRequest.Code, fmt.Sprintf("partition %s-%d appears more than once in the request", r.Topic, r.Partition)
			continue
		}
		t := img.Topic(r.Topic)
		if t == nil || r.Partition < 0 || int(r.Partition) >= len(t.Partitions) {
			res.ErrorCode, res.Message = kerr.UnknownTopicOrPartition.Code, fmt.Sprintf("partition %s-%d does not exist", r.Topic, r.Partition)
			continue
		}
		p := t.Partitions[r.Partition]
		if !allowRFChange && r.Target != nil && len(r.Target) != len(p.Original()) {
			res.ErrorCode, res.Message = kerr.InvalidReplicationFactor.Code,
				fmt.Sprintf("partition %s-%d: the target has %d replicas, the partition %d, and replication factor changes are not allowed", r.Topic, r.Partition, len(r.Target), len(p.Original()))
			continue
		}
		next, changed, code, msg := reassignOne(img, p, r.Target)
		if code != nil {
			res.ErrorCode, res.Message = code.Code, fmt.Sprintf("partition %s-%d: %s", r.Topic, r.Partition, msg)
			continue
		}
		if changed {
			recs = append(recs, changeReplicasRecord(t.ID, r.Partition, next))
		}
	}
	return recs, out
}

// reassignOne decides one partition's new target (nil: cancel) and
// returns the partition state to write, whether it differs from p, or an
// error.
func reassignOne(img *Image, p Partition, target []int32) (Partition, bool, *kerr.Error, string) {
	orig := p.Original()
	if target == nil {
		if !p.Reassigning() {
			return p, false, kerr.NoReassignmentInProgress, "no reassignment is in progress"
		}
		target = orig
	} else {
		switch {
		case len(target) == 0:
			return p, false, kerr.InvalidReplicaAssignment, "the target replica list is empty"
		case len(target) > 32767:
			return p, false, kerr.InvalidReplicaAssignment, "the target replica list is too long"
		case dup(target):
			return p, false, kerr.InvalidReplicaAssignment, fmt.Sprintf("the target replicas %v hold a broker twice", target)
		}
		for _, b := range target {
			if _, ok := img.Broker(b); !ok {
				return p, false, kerr.InvalidReplicaAssignment, fmt.Sprintf("broker %d in the target replicas %v is not registered", b, target)
			}
		}
	}
	next := p
	// Drop the replicas an earlier move added that this target does not
	// want.
	drop := minus(p.Adding, target)
	next.ISR = minus(p.ISR, drop)
	if len(next.ISR) == 0 {
		return p, false, kerr.InvalidReplicaAssignment, fmt.Sprintf("every in-sync replica %v is one the change drops; that would need an unclean leader election", p.ISR)
	}
	next.Adding = minus(target, orig)
	next.Removing = minus(orig, target)
	next.Replicas = append(slices.Clone(target), next.Removing...)
	if p.Leader != -1 && slices.Contains(drop, p.Leader) {
		if next.Leader = electFromISR(next, img.live); next.Leader == -1 {
			return p, false, kerr.InvalidReplicaAssignment, fmt.Sprintf("the leader %d is dropped and no other live in-sync replica can lead", p.Leader)
		}
	}
	if done, ok := completed(next, img.live); ok {
		next = done
	}
	changed := !slices.Equal(next.Replicas, p.Replicas) || !slices.Equal(next.ISR, p.ISR) ||
		!slices.Equal(next.Adding, p.Adding) || !slices.Equal(next.Removing, p.Removing) || next.Leader != p.Leader
	return next, changed, nil, ""
}

// CompleteReassignments returns a ChangeReplicas for every partition whose
// reassignment can complete (its ISR covers its target), by topic name then
// partition. The active controller runs it on every tick, so completion
// never depends on having seen the AlterPartition that made it possible
// (a new controller finishes the moves its predecessor started).
func CompleteReassignments(img *Image) []Record {
	var out []Record
	forEachPartition(img, func(t *Topic, p int32, pt Partition) {
		if next, ok := completed(pt, img.live); ok {
			out = append(out, changeReplicasRecord(t.ID, p, next))
		}
	})
	return out
}

// OngoingReassignment is one partition being reassigned, as
// ListPartitionReassignments reports it.
type OngoingReassignment struct {
	Partition                  int32
	Replicas, Adding, Removing []int32
}

// ListReassignments returns the reassignments in progress of the named
// partitions of topic (all of them when partitions is nil). Unknown topics
// and partitions and idle partitions are left out, as Kafka does.
func ListReassignments(img *Image, topic string, partitions []int32) []OngoingReassignment {
	t := img.Topic(topic)
	if t == nil {
		return nil
	}
	if partitions == nil {
		for p := range t.Partitions {
			partitions = append(partitions, int32(p))
		}
	}
	var out []OngoingReassignment
	for _, p := range partitions {
		if p < 0 || int(p) >= len(t.Partitions) || !t.Partitions[p].Reassigning() {
			continue
		}
		pt := t.Partitions[p]
		out = append(out, OngoingReassignment{Partition: p, Replicas: slices.Clone(pt.Replicas),
			Adding: slices.Clone(pt.Adding), Removing: slices.Clone(pt.Removing)})
	}
	return out
}

// ReassigningTopics returns the names of the topics with a reassignment in
// progress, sorted.
func ReassigningTopics(img *Image) []string {
	var out []string
	for _, t := range img.Topics() {
		if slices.ContainsFunc(t.Partitions, Partition.Reassigning) {
			out = append(out, t.Name)
		}
	}
	return out
}

// DecideAlterPartitionReassignments decides an
// AlterPartitionReassignments (Reassign) in one round: the partitions
// that pass change together or not at all. Replication factor changes
// are allowed before version 1 and when the request allows them.
func DecideAlterPartitionReassignments(req *kmsg.AlterPartitionAssignmentsRequest) Decision {
	resp := req.ResponseKind().(*kmsg.AlterPartitionAssignmentsResponse)
	var (
		recs    []Record
		results []ReassignResult
	)
	return oneRound(func(img *Image) []Record {
		var rs []Reassignment
		for _, rt := range req.Topics {
			for _, rp := range rt.Partitions {
				rs = append(rs, Reassignment{Topic: rt.Topic, Partition: rp.Partition, Target: rp.Replicas})
			}
		}
		recs, results = Reassign(img, rs, req.Version < 1 || req.AllowReplicationFactorChange)
		return recs
	}, func(_ *Image, code int16) (kmsg.Response, []Note) {
		i := 0
		for _, rt := range req.Topics {
			st := kmsg.NewAlterPartitionAssignmentsResponseTopic()
			st.Topic = rt.Topic
			for _, rp := range rt.Partitions {
				sp := kmsg.NewAlterPartitionAssignmentsResponseTopicPartition()
				sp.Partition = rp.Partition
				if r := results[i]; r.ErrorCode != 0 {
					sp.ErrorCode, sp.ErrorMessage = r.ErrorCode, kmsg.StringPtr(r.Message)
				} else {
					sp.ErrorCode = code
				}
				i++
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
		if len(recs) == 0 || code != 0 {
			return resp, nil
		}
		return resp, []Note{info("partition reassignments changed", "partitions", len(recs))}
	})
}

// DecideListPartitionReassignments answers a ListPartitionReassignments
// from the image, proposing nothing: every reassigning partition, or
// those of the named ones (a topic named with no partitions names none).
func DecideListPartitionReassignments(req *kmsg.ListPartitionReassignmentsRequest) Decision {
	resp := req.ResponseKind().(*kmsg.ListPartitionReassignmentsResponse)
	return oneRound(func(*Image) []Record { return nil }, func(img *Image, _ int16) (kmsg.Response, []Note) {
		type ask struct {
			topic      string
			partitions []int32
		}
		var asks []ask
		if req.Topics == nil {
			for _, name := range ReassigningTopics(img) {
				asks = append(asks, ask{topic: name})
			}
		} else {
			for _, rt := range req.Topics {
				ps := rt.Partitions
				if ps == nil {
					ps = []int32{} // named with no partitions: none
				}
				asks = append(asks, ask{rt.Topic, ps})
			}
		}
		for _, a := range asks {
			ongoing := ListReassignments(img, a.topic, a.partitions)
			if len(ongoing) == 0 {
				continue
			}
			st := kmsg.NewListPartitionReassignmentsResponseTopic()
			st.Topic = a.topic
			for _, o := range ongoing {
				sp := kmsg.NewListPartitionReassignmentsResponseTopicPartition()
				sp.Partition, sp.Replicas = o.Partition, o.Replicas
				sp.AddingReplicas, sp.RemovingReplicas = o.Adding, o.Removing
				if sp.AddingReplicas == nil {
					sp.AddingReplicas = []int32{}
				}
				if sp.RemovingReplicas == nil {
					sp.RemovingReplicas = []int32{}
				}
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
		return resp, nil
	})
}
