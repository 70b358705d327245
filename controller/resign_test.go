package controller

import (
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
)

func TestResign(t *testing.T) {
	c := newCluster(t)
	c.brokers("", "", "")
	id := c.create("t", 1, 3).ID
	p, _ := c.img.Partition(id, 0)
	leader := p.Leader
	epoch := c.epoch(leader)

	// Stale epochs are refused before anything changes.
	if _, code := Resign(c.img, leader, epoch, id, 0, p.LeaderEpoch+1, p.PartitionEpoch); code != kerr.FencedLeaderEpoch.Code {
		t.Fatalf("stale leader epoch: code %d", code)
	}
	if _, code := Resign(c.img, leader, epoch, id, 0, p.LeaderEpoch, p.PartitionEpoch-1); code != kerr.InvalidUpdateVersion.Code {
		t.Fatalf("stale partition epoch: code %d", code)
	}
	other := p.ISR[0]
	if other == leader {
		other = p.ISR[1]
	}
	if _, code := Resign(c.img, other, c.epoch(other), id, 0, p.LeaderEpoch, p.PartitionEpoch); code != kerr.NotLeaderForPartition.Code {
		t.Fatalf("non-leader: code %d", code)
	}

	recs, code := Resign(c.img, leader, epoch, id, 0, p.LeaderEpoch, p.PartitionEpoch)
	if code != 0 {
		t.Fatalf("resign: code %d", code)
	}
	c.apply(recs...)
	q, _ := c.img.Partition(id, 0)
	if q.Leader == leader || q.Leader == -1 || slices.Contains(q.ISR, leader) || q.LeaderEpoch != p.LeaderEpoch+1 {
		t.Fatalf("after resign: %+v (was %+v)", q, p)
	}

	// The last ISR member cannot hand over: leader -1, ISR kept.
	c2 := newCluster(t)
	c2.brokers("")
	id2 := c2.create("solo", 1, 1).ID
	p2, _ := c2.img.Partition(id2, 0)
	recs, code = Resign(c2.img, p2.Leader, c2.epoch(p2.Leader), id2, 0, p2.LeaderEpoch, p2.PartitionEpoch)
	if code != 0 {
		t.Fatalf("solo resign: code %d", code)
	}
	c2.apply(recs...)
	q2, _ := c2.img.Partition(id2, 0)
	if q2.Leader != -1 || !slices.Equal(q2.ISR, p2.ISR) {
		t.Fatalf("solo after resign: %+v", q2)
	}
}

func TestElectPreferredFor(t *testing.T) {
	c := newCluster(t)
	c.brokers("", "", "")
	tp := c.create("t", 3, 3)
	// Move partition 0's leadership off its preferred replica.
	p0 := c.part(tp, 0)
	other := p0.Replicas[1]
	c.apply(NewRecord(ChangePartition{TopicID: tp.ID, Partition: 0, Leader: &other}))
	// Partition 1's preferred replica leaves the ISR.
	p1 := c.part(tp, 1)
	isr := slices.DeleteFunc(slices.Clone(p1.ISR), func(id int32) bool { return id == p1.Replicas[0] })
	newLeader := isr[0]
	c.apply(NewRecord(ChangePartition{TopicID: tp.ID, Partition: 1, ISR: &isr, Leader: &newLeader}))

	recs, codes := ElectPreferredFor(c.img, "t", []int32{0, 1, 2, 7})
	if codes[0] != 0 || codes[1] != kerr.PreferredLeaderNotAvailable.Code || codes[2] != kerr.ElectionNotNeeded.Code ||
		codes[7] != kerr.UnknownTopicOrPartition.Code || len(recs) != 1 {
		t.Fatalf("codes %v, %d records", codes, len(recs))
	}
	c.apply(recs...)
	if got := c.part(tp, 0); got.Leader != p0.Replicas[0] || got.LeaderEpoch != p0.LeaderEpoch+2 {
		t.Fatalf("partition 0 after election: %+v", got)
	}
}
