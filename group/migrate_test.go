package group

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The classic group's side of KIP-848's online migration: Migration
// describes every member (all its protocols and its assignment, sharing
// nothing with the group), Abandon answers parked requests
// REBALANCE_IN_PROGRESS and ends the group, and a group restored from a
// downgrade's GroupMetadataValue rebalances on Rebalance.
func TestMigration(t *testing.T) {
	g := NewGroup("g", Config{InitialRebalanceDelayMs: 0})
	join := func(member string, token any) []Reply {
		req := kmsg.NewPtrJoinGroupRequest()
		req.Version = 3
		req.Group, req.MemberID, req.ProtocolType = "g", member, "consumer"
		req.SessionTimeoutMillis, req.RebalanceTimeoutMillis = 10000, 20000
		req.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "cooperative-sticky", Metadata: []byte{1}}, {Name: "range", Metadata: []byte{2}}}
		return g.Join(0, req, JoinMeta{ClientID: "c", ClientHost: "/h"}, token)
	}
	r := join("", "a")
	jr := r[0].Resp.(*kmsg.JoinGroupResponse)
	sync := kmsg.NewPtrSyncGroupRequest()
	sync.Version = 3
	sync.Group, sync.MemberID, sync.Generation = "g", jr.MemberID, jr.Generation
	sync.GroupAssignment = []kmsg.SyncGroupRequestGroupAssignment{{MemberID: jr.MemberID, MemberAssignment: []byte{9}}}
	g.Sync(0, sync, "sync")

	mg := g.Migration()
	if mg.Generation != 1 || mg.ProtocolType != "consumer" || mg.Protocol != "cooperative-sticky" || len(mg.Members) != 1 {
		t.Fatalf("migration: %+v", mg)
	}
	m := mg.Members[0]
	if m.ID != jr.MemberID || len(m.Protocols) != 2 || m.SessionTimeoutMs != 10000 || m.RebalanceTimeoutMs != 20000 || string(m.Assignment) != "\x09" {
		t.Fatalf("member: %+v", m)
	}
	m.Assignment[0] = 7
	if g.members[jr.MemberID].assignment[0] != 9 {
		t.Fatal("Migration shares the assignment with the group")
	}

	// A second member parks its join (the leader has not rejoined).
	if r := join("", "b"); len(r) != 0 {
		t.Fatalf("join parked: %+v", r)
	}
	replies := g.Abandon()
	if len(replies) != 1 || replies[0].Token != "b" || replies[0].Resp.(*kmsg.JoinGroupResponse).ErrorCode != kerr.RebalanceInProgress.Code {
		t.Fatalf("abandon replies: %+v", replies)
	}
	if g.State() != "Dead" {
		t.Fatalf("after Abandon: %s", g.State())
	}

	// A downgrade's record restores a Stable group; Rebalance starts a
	// rebalance at its generation, with the downgrade as its cause.
	v := kmsg.NewGroupMetadataValue()
	v.Version, v.ProtocolType, v.Generation = 3, "consumer", 7
	p, l := "range", "m1"
	v.Protocol, v.Leader = &p, &l
	v.Members = []kmsg.GroupMetadataValueMember{{MemberID: "m1", ClientID: "c", SessionTimeoutMillis: 10000, RebalanceTimeoutMillis: 20000, Subscription: []byte{2}}}
	d := Restore("g", Config{}, &v, 100)
	if d.State() != "Stable" {
		t.Fatalf("restored: %s", d.State())
	}
	d.Rebalance(100)
	if d.State() != "PreparingRebalance" || d.Generation() != 7 {
		t.Fatalf("after Rebalance: %s generation %d", d.State(), d.Generation())
	}
	if tl := d.Timeline(); len(tl) != 1 || tl[0].Cause != CauseDowngrade {
		t.Fatalf("timeline: %+v", tl)
	}
	hb := kmsg.NewPtrHeartbeatRequest()
	hb.Group, hb.MemberID, hb.Generation = "g", "m1", 7
	if r := d.Heartbeat(200, hb); r.ErrorCode != kerr.RebalanceInProgress.Code {
		t.Fatalf("heartbeat after the downgrade: %d", r.ErrorCode)
	}
}
