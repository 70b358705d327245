package controller

import (
	"reflect"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
)

// assigned creates topic name with one partition on replicas rs (leader
// rs[0], every replica in sync) on a cluster of n live brokers.
func assigned(t *testing.T, n int, name string, rs ...int32) (*cluster, *Topic) {
	t.Helper()
	c := newCluster(t)
	c.brokers(make([]string, n)...)
	res := CreateTopics(c.img, []TopicSpec{{Name: name, Partitions: -1, RF: -1, Assignment: map[int32][]int32{0: rs}}}, Defaults{}, c.ids(1))
	if res[0].ErrorCode != 0 {
		t.Fatalf("create: %d %s", res[0].ErrorCode, res[0].Message)
	}
	c.apply(res[0].Records...)
	return c, c.img.Topic(name)
}

// reassign applies a one-partition reassignment and fails on an error.
func (c *cluster) reassign(topic string, p int32, target []int32) {
	c.t.Helper()
	recs, res := Reassign(c.img, []Reassignment{{Topic: topic, Partition: p, Target: target}}, true)
	if res[0].ErrorCode != 0 {
		c.t.Fatalf("reassign %s-%d to %v: %d %s", topic, p, target, res[0].ErrorCode, res[0].Message)
	}
	c.apply(recs...)
}

// alter applies the leader's AlterPartition to isr and fails on an error.
func (c *cluster) alter(tp *Topic, p int32, isr ...int32) {
	c.t.Helper()
	pt := c.part(tp, p)
	recs, code := AlterPartition(c.img, pt.Leader, c.epoch(pt.Leader), tp.ID, p, pt.LeaderEpoch, pt.PartitionEpoch, isr)
	if code != 0 {
		c.t.Fatalf("alter %v: code %d", isr, code)
	}
	c.apply(recs...)
}

// state is the part of a partition the tests compare.
type state struct {
	Replicas, ISR, Adding, Removing []int32
	Leader                          int32
}

func stateOf(p Partition) state {
	return state{p.Replicas, p.ISR, p.Adding, p.Removing, p.Leader}
}

func wantState(t *testing.T, what string, p Partition, want state) {
	t.Helper()
	if got := stateOf(p); !reflect.DeepEqual(got, want) {
		t.Fatalf("%s:\n got %+v\nwant %+v", what, got, want)
	}
}

// TestReassignMove: [1 2 3] led by 1 to [2 3 4]: grow, catch up, then the
// AlterPartition that puts 4 in the ISR completes the move and moves the
// leadership off 1 (which leaves) to 2, the first of the target.
func TestReassignMove(t *testing.T) {
	c, tp := assigned(t, 4, "t", 1, 2, 3)
	before := c.part(tp, 0)
	c.reassign("t", 0, []int32{2, 3, 4})
	p := c.part(tp, 0)
	wantState(t, "growing", p, state{[]int32{2, 3, 4, 1}, []int32{1, 2, 3}, []int32{4}, []int32{1}, 1})
	if p.LeaderEpoch != before.LeaderEpoch || p.PartitionEpoch != before.PartitionEpoch+1 {
		t.Fatalf("epochs %d/%d, want %d/%d", p.LeaderEpoch, p.PartitionEpoch, before.LeaderEpoch, before.PartitionEpoch+1)
	}
	if got := ListReassignments(c.img, "t", nil); len(got) != 1 || !slices.Equal(got[0].Adding, []int32{4}) ||
		!slices.Equal(got[0].Removing, []int32{1}) || !slices.Equal(got[0].Replicas, []int32{2, 3, 4, 1}) {
		t.Fatalf("listed %+v", got)
	}
	if got := ReassigningTopics(c.img); !slices.Equal(got, []string{"t"}) {
		t.Fatalf("reassigning topics %v", got)
	}
	if recs := CompleteReassignments(c.img); len(recs) != 0 {
		t.Fatalf("completed before 4 is in sync: %v", recs)
	}
	// The same target again changes nothing.
	if recs, res := Reassign(c.img, []Reassignment{{Topic: "t", Target: []int32{2, 3, 4}}}, true); len(recs) != 0 || res[0].ErrorCode != 0 {
		t.Fatalf("repeated target: %v %+v", recs, res)
	}

	c.alter(tp, 0, 1, 2, 3, 4)
	p = c.part(tp, 0)
	wantState(t, "completed", p, state{[]int32{2, 3, 4}, []int32{2, 3, 4}, nil, nil, 2})
	if p.LeaderEpoch != before.LeaderEpoch+1 {
		t.Fatalf("leader epoch %d, want %d", p.LeaderEpoch, before.LeaderEpoch+1)
	}
	if got := ListReassignments(c.img, "t", nil); len(got) != 0 {
		t.Fatalf("listed after completion: %+v", got)
	}
	if got := ReassigningTopics(c.img); len(got) != 0 {
		t.Fatalf("reassigning topics %v", got)
	}
}

// TestReassignLeaderStays: the leader is in the target, so it keeps leading
// at the same leader epoch.
func TestReassignLeaderStays(t *testing.T) {
	c, tp := assigned(t, 4, "t", 1, 2, 3)
	le := c.part(tp, 0).LeaderEpoch
	c.reassign("t", 0, []int32{1, 2, 4})
	c.alter(tp, 0, 1, 2, 3, 4)
	p := c.part(tp, 0)
	wantState(t, "completed", p, state{[]int32{1, 2, 4}, []int32{1, 2, 4}, nil, nil, 1})
	if p.LeaderEpoch != le {
		t.Fatalf("leader epoch %d, want %d", p.LeaderEpoch, le)
	}
}

// TestReassignAtOnce: targets that need no new replica in sync complete in
// the request's own record.
func TestReassignAtOnce(t *testing.T) {
	for _, tc := range []struct {
		name   string
		target []int32
		want   state
	}{
		{"reorder", []int32{3, 2, 1}, state{[]int32{3, 2, 1}, []int32{1, 2, 3}, nil, nil, 1}},
		{"shrink", []int32{2, 3}, state{[]int32{2, 3}, []int32{2, 3}, nil, nil, 2}},
		{"shrink keeping the leader", []int32{3, 1}, state{[]int32{3, 1}, []int32{1, 3}, nil, nil, 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, tp := assigned(t, 4, "t", 1, 2, 3)
			c.reassign("t", 0, tc.target)
			wantState(t, tc.name, c.part(tp, 0), tc.want)
		})
	}
	c, _ := assigned(t, 4, "t", 1, 2, 3)
	if recs, res := Reassign(c.img, []Reassignment{{Topic: "t", Target: []int32{1, 2, 3}}}, true); len(recs) != 0 || res[0].ErrorCode != 0 {
		t.Fatalf("unchanged target: %v %+v", recs, res)
	}
}

// TestReassignGrow: adding a replica (RF 2 to 3) completes once it is in
// sync; nothing is removed.
func TestReassignGrow(t *testing.T) {
	c, tp := assigned(t, 3, "t", 1, 2)
	c.reassign("t", 0, []int32{1, 2, 3})
	wantState(t, "growing", c.part(tp, 0), state{[]int32{1, 2, 3}, []int32{1, 2}, []int32{3}, nil, 1})
	c.alter(tp, 0, 1, 2, 3)
	wantState(t, "completed", c.part(tp, 0), state{[]int32{1, 2, 3}, []int32{1, 2, 3}, nil, nil, 1})
}

// TestReassignCancel: a cancellation restores the original replicas and
// drops the added ones from the ISR; an added replica that leads hands the
// leadership to an original in-sync one.
func TestReassignCancel(t *testing.T) {
	c, tp := assigned(t, 5, "t", 1, 2, 3)
	c.reassign("t", 0, []int32{4, 5, 3})
	c.alter(tp, 0, 1, 2, 3, 4) // 4 caught up, 5 not yet
	wantState(t, "half way", c.part(tp, 0), state{[]int32{4, 5, 3, 1, 2}, []int32{1, 2, 3, 4}, []int32{4, 5}, []int32{1, 2}, 1})
	recs, codes := ElectPreferredFor(c.img, "t", []int32{0})
	if codes[0] != 0 {
		t.Fatalf("preferred election: %d", codes[0])
	}
	c.apply(recs...)
	le := c.part(tp, 0).LeaderEpoch
	if c.part(tp, 0).Leader != 4 {
		t.Fatalf("leader %d, want 4", c.part(tp, 0).Leader)
	}

	c.reassign("t", 0, nil)
	p := c.part(tp, 0)
	wantState(t, "cancelled", p, state{[]int32{3, 1, 2}, []int32{1, 2, 3}, nil, nil, 3})
	if p.LeaderEpoch != le+1 {
		t.Fatalf("leader epoch %d, want %d", p.LeaderEpoch, le+1)
	}
	// Nothing left to cancel.
	if recs, res := Reassign(c.img, []Reassignment{{Topic: "t"}}, true); len(recs) != 0 || res[0].ErrorCode != kerr.NoReassignmentInProgress.Code {
		t.Fatalf("cancel of nothing: %v %+v", recs, res)
	}
}

// TestReassignCancelUnclean: when only added replicas are in sync, a
// cancellation would need an unclean election and is refused.
func TestReassignCancelUnclean(t *testing.T) {
	c, tp := assigned(t, 5, "t", 1, 2, 3)
	c.reassign("t", 0, []int32{4, 5})
	c.alter(tp, 0, 1, 2, 3, 4)
	four := int32(4)
	c.apply(NewRecord(ChangePartition{TopicID: tp.ID, Partition: 0, ISR: &[]int32{4}, Leader: &four}))
	before := c.part(tp, 0)
	recs, res := Reassign(c.img, []Reassignment{{Topic: "t"}}, true)
	if len(recs) != 0 || res[0].ErrorCode != kerr.InvalidReplicaAssignment.Code {
		t.Fatalf("unclean cancel: %v %+v", recs, res)
	}
	// A new target that drops 4, the only in-sync replica, likewise.
	recs, res = Reassign(c.img, []Reassignment{{Topic: "t", Target: []int32{5, 1}}}, true)
	if len(recs) != 0 || res[0].ErrorCode != kerr.InvalidReplicaAssignment.Code {
		t.Fatalf("unclean re-target: %v %+v", recs, res)
	}
	wantState(t, "unchanged", c.part(tp, 0), stateOf(before))
}

// TestReassignRetarget: a new target for a moving partition is decided
// against the original replicas; the earlier addition it does not want is
// dropped, and a cancellation still restores the original.
func TestReassignRetarget(t *testing.T) {
	c, tp := assigned(t, 5, "t", 1, 2, 3)
	c.reassign("t", 0, []int32{2, 3, 4})
	c.reassign("t", 0, []int32{2, 3, 5})
	wantState(t, "re-targeted", c.part(tp, 0), state{[]int32{2, 3, 5, 1}, []int32{1, 2, 3}, []int32{5}, []int32{1}, 1})
	c.reassign("t", 0, nil)
	wantState(t, "cancelled", c.part(tp, 0), state{[]int32{2, 3, 1}, []int32{1, 2, 3}, nil, nil, 1})
}

// TestReassignLeaderFails: the leader dies mid-move; the new leader (from
// the ISR) carries the move to completion.
func TestReassignLeaderFails(t *testing.T) {
	c, tp := assigned(t, 4, "t", 1, 2, 3)
	c.reassign("t", 0, []int32{2, 3, 4})
	l := NewLiveness()
	recs, code := l.Shutdown(c.img, 1, c.epoch(1), 0)
	if code != 0 {
		t.Fatalf("shutdown: %d", code)
	}
	c.apply(recs...)
	wantState(t, "leader gone", c.part(tp, 0), state{[]int32{2, 3, 4, 1}, []int32{2, 3}, []int32{4}, []int32{1}, 2})
	c.alter(tp, 0, 2, 3, 4)
	wantState(t, "completed", c.part(tp, 0), state{[]int32{2, 3, 4}, []int32{2, 3, 4}, nil, nil, 2})
}

// TestCompleteFromImage: completion is derived from the image alone, so a
// controller that did not see the ISR grow (a failover) still completes.
func TestCompleteFromImage(t *testing.T) {
	c, tp := assigned(t, 4, "t", 1, 2, 3)
	c.reassign("t", 0, []int32{2, 3, 4})
	c.apply(NewRecord(ChangePartition{TopicID: tp.ID, Partition: 0, ISR: &[]int32{1, 2, 3, 4}}))
	recs := CompleteReassignments(c.img)
	if len(recs) != 1 {
		t.Fatalf("records %v", recs)
	}
	c.apply(recs...)
	wantState(t, "completed", c.part(tp, 0), state{[]int32{2, 3, 4}, []int32{2, 3, 4}, nil, nil, 2})
	if recs := CompleteReassignments(c.img); len(recs) != 0 {
		t.Fatalf("completed twice: %v", recs)
	}
}

func TestReassignErrors(t *testing.T) {
	c, _ := assigned(t, 4, "t", 1, 2, 3)
	c.apply(NewRecord(RegisterBroker{ID: 7})) // registered, fenced: a valid target
	for _, tc := range []struct {
		name string
		rs   []Reassignment
		want int16
	}{
		{"unknown topic", []Reassignment{{Topic: "nope", Target: []int32{1}}}, kerr.UnknownTopicOrPartition.Code},
		{"unknown partition", []Reassignment{{Topic: "t", Partition: 1, Target: []int32{1}}}, kerr.UnknownTopicOrPartition.Code},
		{"negative partition", []Reassignment{{Topic: "t", Partition: -1, Target: []int32{1}}}, kerr.UnknownTopicOrPartition.Code},
		{"empty target", []Reassignment{{Topic: "t", Target: []int32{}}}, kerr.InvalidReplicaAssignment.Code},
		{"duplicate broker", []Reassignment{{Topic: "t", Target: []int32{1, 2, 2}}}, kerr.InvalidReplicaAssignment.Code},
		{"unregistered broker", []Reassignment{{Topic: "t", Target: []int32{1, 2, 9}}}, kerr.InvalidReplicaAssignment.Code},
		{"cancel nothing", []Reassignment{{Topic: "t"}}, kerr.NoReassignmentInProgress.Code},
		{"partition twice", []Reassignment{{Topic: "t", Target: []int32{1}}, {Topic: "t", Target: []int32{2}}}, kerr.InvalidRequest.Code},
	} {
		recs, res := Reassign(c.img, tc.rs, true)
		if len(recs) != 0 || res[0].ErrorCode != tc.want || res[0].Message == "" {
			t.Errorf("%s: %v %+v, want code %d", tc.name, recs, res, tc.want)
		}
	}
	recs, res := Reassign(c.img, []Reassignment{{Topic: "t", Target: []int32{1, 2, 7}}}, true)
	if res[0].ErrorCode != 0 || len(recs) != 1 {
		t.Fatalf("fenced target broker: %v %+v", recs, res)
	}
	// Replication factor changes refused when the request says so (v1).
	recs, res = Reassign(c.img, []Reassignment{{Topic: "t", Target: []int32{1, 2}}}, false)
	if res[0].ErrorCode != kerr.InvalidReplicationFactor.Code || len(recs) != 0 {
		t.Fatalf("rf change not allowed: %v %+v", recs, res)
	}
	if recs, res = Reassign(c.img, []Reassignment{{Topic: "t", Target: []int32{2, 3, 4}}}, false); res[0].ErrorCode != 0 || len(recs) != 1 {
		t.Fatalf("same rf, not allowed to change: %v %+v", recs, res)
	}
}

// TestApplyChangeReplicasInvariants: records that break the reassignment
// invariants never apply.
func TestApplyChangeReplicasInvariants(t *testing.T) {
	c, tp := assigned(t, 4, "t", 1, 2, 3)
	cr := func(replicas, adding, removing, isr []int32, leader int32) Record {
		return NewRecord(ChangeReplicas{TopicID: tp.ID, Replicas: replicas, Adding: adding, Removing: removing, ISR: isr, Leader: leader})
	}
	for _, r := range []Record{
		cr([]int32{2, 3, 4, 1}, []int32{5}, []int32{1}, []int32{1, 2, 3}, 1),    // adding outside replicas
		cr([]int32{2, 3, 4, 1}, []int32{4}, []int32{4}, []int32{1, 2, 3}, 1),    // adding and removing overlap
		cr([]int32{1, 2, 3, 4}, []int32{4}, []int32{1}, []int32{1, 2, 3}, 1),    // target not first
		cr([]int32{1, 2}, nil, []int32{1, 2}, []int32{1, 2}, 1),                 // empty target
		cr([]int32{1, 2}, []int32{1, 2}, nil, []int32{1, 2}, 1),                 // empty original
		cr([]int32{2, 3, 4, 1}, []int32{4, 4}, []int32{1}, []int32{1, 2, 3}, 1), // duplicate adding
		cr([]int32{2, 3, 4}, nil, nil, []int32{1, 2}, 1),                        // ISR outside replicas
		NewRecord(ChangeReplicas{TopicID: tp.ID, Partition: 1, Replicas: []int32{1}, ISR: []int32{1}, Leader: 1}),
	} {
		applyErr(t, c.img, r)
	}
}
