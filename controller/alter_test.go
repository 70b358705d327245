package controller

import (
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
)

func TestAlterPartition(t *testing.T) {
	c := newCluster(t)
	c.brokers("", "", "")
	c.apply(NewRecord(RegisterBroker{ID: 4})) // registered, fenced
	tp := c.create("t", 1, 3)
	p := c.part(tp, 0)
	leader := p.Leader
	var follower int32
	for _, r := range p.Replicas {
		if r != leader {
			follower = r
			break
		}
	}
	le, pe, ep := p.LeaderEpoch, p.PartitionEpoch, c.epoch(leader)
	shrunk := slices.DeleteFunc(slices.Clone(p.ISR), func(b int32) bool { return b == follower })

	for _, tc := range []struct {
		name       string
		broker     int32
		brokerEp   int64
		topic      [16]byte
		part       int32
		le, pe     int32
		isr        []int32
		wantCode   int16
		wantRecord bool
	}{
		{"stale broker epoch", leader, ep - 1, tp.ID, 0, le, pe, shrunk, kerr.StaleBrokerEpoch.Code, false},
		{"unregistered broker", 9, 1, tp.ID, 0, le, pe, shrunk, kerr.StaleBrokerEpoch.Code, false},
		{"unknown topic", leader, ep, [16]byte{0xee}, 0, le, pe, shrunk, kerr.UnknownTopicID.Code, false},
		{"unknown partition", leader, ep, tp.ID, 1, le, pe, shrunk, kerr.UnknownTopicOrPartition.Code, false},
		{"stale leader epoch", leader, ep, tp.ID, 0, le - 1, pe, shrunk, kerr.FencedLeaderEpoch.Code, false},
		{"future leader epoch", leader, ep, tp.ID, 0, le + 1, pe, shrunk, kerr.FencedLeaderEpoch.Code, false},
		{"not leader", follower, c.epoch(follower), tp.ID, 0, le, pe, shrunk, kerr.NotLeaderForPartition.Code, false},
		{"stale partition epoch", leader, ep, tp.ID, 0, le, pe + 1, shrunk, kerr.InvalidUpdateVersion.Code, false},
		{"empty isr", leader, ep, tp.ID, 0, le, pe, nil, kerr.InvalidRequest.Code, false},
		{"isr without leader", leader, ep, tp.ID, 0, le, pe, []int32{follower}, kerr.InvalidRequest.Code, false},
		{"isr outside replicas", leader, ep, tp.ID, 0, le, pe, []int32{leader, 7}, kerr.InvalidRequest.Code, false},
		{"duplicate isr", leader, ep, tp.ID, 0, le, pe, []int32{leader, leader}, kerr.InvalidRequest.Code, false},
		{"unchanged", leader, ep, tp.ID, 0, le, pe, p.ISR, 0, false},
	} {
		recs, code := AlterPartition(c.img, tc.broker, tc.brokerEp, tc.topic, tc.part, tc.le, tc.pe, tc.isr)
		if code != tc.wantCode || (len(recs) > 0) != tc.wantRecord {
			t.Errorf("%s: code %d, %d records; want %d", tc.name, code, len(recs), tc.wantCode)
		}
	}

	// Accepted with the current epochs: the ISR shrinks, the partition
	// epoch is bumped, the leader epoch is not.
	recs, code := AlterPartition(c.img, leader, ep, tp.ID, 0, le, pe, shrunk)
	if code != 0 || len(recs) != 1 {
		t.Fatalf("accept: %d %v", code, recs)
	}
	// Only the committed change counts: before it applies, nothing changed.
	if got := c.part(tp, 0); !slices.Equal(got.ISR, p.ISR) {
		t.Fatal("decision changed the image")
	}
	c.apply(recs...)
	got := c.part(tp, 0)
	if !slices.Equal(got.ISR, shrunk) || got.PartitionEpoch != pe+1 || got.LeaderEpoch != le || got.Leader != leader {
		t.Fatalf("after shrink: %+v", got)
	}
	// The same request replayed is stale.
	if _, code := AlterPartition(c.img, leader, ep, tp.ID, 0, le, pe, shrunk); code != kerr.InvalidUpdateVersion.Code {
		t.Fatalf("replay: code %d", code)
	}
	// Expanding back with the new epoch works; a fenced broker cannot join.
	if _, code := AlterPartition(c.img, leader, ep, tp.ID, 0, le, pe+1, append(slices.Clone(shrunk), 4)); code != kerr.InvalidRequest.Code {
		t.Fatalf("broker 4 is not a replica: code %d", code)
	}
	c.apply(NewRecord(FenceBroker{ID: follower, Epoch: c.epoch(follower)}))
	if _, code := AlterPartition(c.img, leader, ep, tp.ID, 0, le, pe+1, p.ISR); code != kerr.IneligibleReplica.Code {
		t.Fatalf("fenced follower: code %d", code)
	}
	c.apply(NewRecord(UnfenceBroker{ID: follower, Epoch: c.epoch(follower)}))
	recs, code = AlterPartition(c.img, leader, ep, tp.ID, 0, le, pe+1, p.ISR)
	if code != 0 {
		t.Fatalf("expand: code %d", code)
	}
	c.apply(recs...)
	if got := c.part(tp, 0); !slices.Equal(got.ISR, p.ISR) || got.PartitionEpoch != pe+2 {
		t.Fatalf("after expand: %+v", got)
	}
}
