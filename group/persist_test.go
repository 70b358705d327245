package group

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// A Stable group survives Snapshot → encode → decode → Restore: the same
// members, generation, leader and assignments, and its members' heartbeats
// at that generation are accepted without a rebalance.
func TestSnapshotRestore(t *testing.T) {
	cfg := Config{InitialRebalanceDelayMs: 0}
	g := NewGroup("g", cfg)
	join := func(id string, inst *string) *kmsg.JoinGroupRequest {
		r := kmsg.NewPtrJoinGroupRequest()
		r.SetVersion(5)
		r.Group, r.MemberID, r.InstanceID, r.ProtocolType = "g", id, inst, "consumer"
		r.SessionTimeoutMillis, r.RebalanceTimeoutMillis = 10000, 10000
		r.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range", Metadata: []byte("sub-" + id)}}
		return r
	}
	inst := "static-1"
	var replies []Reply
	replies = append(replies, g.Join(0, join("", &inst), JoinMeta{ClientID: "c"}, "a")...)
	replies = append(replies, g.Tick(0)...)
	var leader string
	var gen int32
	for _, r := range replies {
		if jr, ok := r.Resp.(*kmsg.JoinGroupResponse); ok && jr.ErrorCode == 0 {
			leader, gen = jr.MemberID, jr.Generation
		}
	}
	if leader == "" {
		t.Fatalf("no join response: %+v", replies)
	}
	sync := kmsg.NewPtrSyncGroupRequest()
	sync.SetVersion(3)
	sync.Group, sync.MemberID, sync.Generation, sync.InstanceID = "g", leader, gen, &inst
	sync.GroupAssignment = []kmsg.SyncGroupRequestGroupAssignment{{MemberID: leader, MemberAssignment: []byte("assign")}}
	g.Sync(1, sync, "s")
	if g.State() != "Stable" {
		t.Fatalf("state %s", g.State())
	}
	snap := g.Snapshot(5)
	var decoded kmsg.GroupMetadataValue
	if err := decoded.ReadFrom(snap.AppendTo(nil)); err != nil {
		t.Fatal(err)
	}
	r := Restore("g", cfg, &decoded, 100)
	if err := r.checkInvariants(); err != nil {
		t.Fatal(err)
	}
	if r.State() != "Stable" || r.Generation() != gen || r.NumMembers() != 1 || r.Protocol() != "range" {
		t.Fatalf("restored %s gen %d members %d protocol %s", r.State(), r.Generation(), r.NumMembers(), r.Protocol())
	}
	hb := kmsg.NewPtrHeartbeatRequest()
	hb.SetVersion(3)
	hb.Group, hb.MemberID, hb.Generation, hb.InstanceID = "g", leader, gen, &inst
	if resp := r.Heartbeat(200, hb); resp.ErrorCode != 0 {
		t.Fatalf("heartbeat after restore: %d", resp.ErrorCode)
	}
	d := r.Describe()
	if len(d.Members) != 1 || string(d.Members[0].MemberAssignment) != "assign" {
		t.Fatalf("describe after restore: %+v", d)
	}
	// Sessions go on after a restore: silence still evicts.
	r.Tick(200 + 10000)
	if r.NumMembers() != 0 {
		t.Fatal("silent restored member not evicted")
	}
	// A snapshot without a leader among the members restores Empty.
	bad := decoded
	other := "nobody"
	bad.Leader = &other
	if e := Restore("g", cfg, &bad, 0); e.State() != "Empty" || e.Generation() != gen {
		t.Fatalf("inconsistent snapshot restored as %s gen %d", e.State(), e.Generation())
	}
}
