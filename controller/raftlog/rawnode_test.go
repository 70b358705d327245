package raftlog

import (
	"fmt"
	"testing"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
)

// node is a single-member raft.RawNode driven over a raftlog.Storage, with a
// trivial state machine recording applied normal entries.
type node struct {
	t       *testing.T
	s       *Storage
	rn      *raft.RawNode
	applied []string // data of applied, non-empty normal entries
	lastApp uint64   // index of the last applied entry
	cs      raftpb.ConfState
}

func newNode(t *testing.T, s *Storage, applied uint64) *node {
	t.Helper()
	rn, err := raft.NewRawNode(&raft.Config{
		ID:              1,
		ElectionTick:    10,
		HeartbeatTick:   1,
		Storage:         s,
		MaxSizePerMsg:   1 << 20,
		MaxInflightMsgs: 256,
		Applied:         applied,
	})
	if err != nil {
		t.Fatalf("NewRawNode: %v", err)
	}
	return &node{t: t, s: s, rn: rn, lastApp: applied}
}

// drain processes Ready in the canonical order until none is pending:
// persist (Save) → send messages → apply committed entries → Advance.
func (n *node) drain() {
	n.t.Helper()
	for n.rn.HasReady() {
		rd := n.rn.Ready()
		if err := n.s.Save(rd.HardState, rd.Entries, rd.Snapshot); err != nil {
			n.t.Fatalf("Save: %v", err)
		}
		for _, m := range rd.Messages {
			// A single-member group has nobody to talk to.
			n.t.Fatalf("unexpected message %s to %d", m.Type, m.To)
		}
		for _, e := range rd.CommittedEntries {
			switch e.Type {
			case raftpb.EntryNormal:
				if len(e.Data) > 0 {
					n.applied = append(n.applied, string(e.Data))
				}
			case raftpb.EntryConfChange:
				var cc raftpb.ConfChange
				if err := cc.Unmarshal(e.Data); err != nil {
					n.t.Fatalf("conf change at %d: %v", e.Index, err)
				}
				n.cs = *n.rn.ApplyConfChange(cc)
			default:
				n.t.Fatalf("unexpected entry type %s", e.Type)
			}
			if e.Index != n.lastApp+1 {
				n.t.Fatalf("applied %d after %d", e.Index, n.lastApp)
			}
			n.lastApp = e.Index
		}
		n.rn.Advance(rd)
	}
}

func (n *node) campaign() {
	n.t.Helper()
	if err := n.rn.Campaign(); err != nil {
		n.t.Fatalf("Campaign: %v", err)
	}
	n.drain()
	if st := n.rn.Status(); st.RaftState != raft.StateLeader {
		n.t.Fatalf("after campaign: state %s, want leader", st.RaftState)
	}
}

func (n *node) propose(from, to int) {
	n.t.Helper()
	for i := from; i < to; i++ {
		if err := n.rn.Propose(fmt.Appendf(nil, "p%d", i)); err != nil {
			n.t.Fatalf("Propose %d: %v", i, err)
		}
		if i%7 == 0 {
			n.drain() // mix batched and one-by-one Readies
		}
	}
	n.drain()
}

func wantApplied(t *testing.T, got []string, n int) {
	t.Helper()
	if len(got) != n {
		t.Fatalf("applied %d proposals, want %d", len(got), n)
	}
	for i, d := range got {
		if d != fmt.Sprintf("p%d", i) {
			t.Fatalf("applied[%d] = %q, want p%d", i, d, i)
		}
	}
}

func TestRawNodeRestart(t *testing.T) {
	dir := t.TempDir()

	// Life 1: bootstrap, elect, propose 100 entries.
	s := openT(t, dir)
	n := newNode(t, s, 0)
	if err := n.rn.Bootstrap([]raft.Peer{{ID: 1}}); err != nil {
		t.Fatalf("Bootstrap: %v", err)
	}
	n.drain()
	n.campaign()
	n.propose(0, 100)
	wantApplied(t, n.applied, 100)
	hs, _, _ := s.InitialState()
	if hs.Commit != n.lastApp {
		t.Fatalf("persisted commit %d, applied %d", hs.Commit, n.lastApp)
	}
	committed1 := hs.Commit
	closeT(t, s)

	// Life 2: reopen; with Applied 0 raft replays every committed entry from
	// storage (including the bootstrap conf change), then the node is elected
	// again and new proposals continue.
	s = openT(t, dir)
	hs, _, err := s.InitialState()
	must(t, err)
	if hs.Commit != committed1 {
		t.Fatalf("reopened commit %d, want %d", hs.Commit, committed1)
	}
	n = newNode(t, s, 0)
	n.drain()
	wantApplied(t, n.applied, 100)
	if n.lastApp != committed1 {
		t.Fatalf("replayed up to %d, want %d", n.lastApp, committed1)
	}
	if len(n.cs.Voters) != 1 || n.cs.Voters[0] != 1 {
		t.Fatalf("conf state after replay %+v, want voter 1", n.cs)
	}
	n.campaign()
	n.propose(100, 120)
	wantApplied(t, n.applied, 120)

	// Snapshot and compact, then life 3: restart from the snapshot.
	snapIdx := n.lastApp
	if _, err := s.CreateSnapshot(snapIdx, &n.cs, []byte(fmt.Sprint(len(n.applied)))); err != nil {
		t.Fatalf("CreateSnapshot: %v", err)
	}
	if err := s.Compact(snapIdx - 5); err != nil {
		t.Fatalf("Compact: %v", err)
	}
	closeT(t, s)

	s = openT(t, dir)
	defer closeT(t, s)
	_, cs, err := s.InitialState()
	must(t, err)
	if len(cs.Voters) != 1 || cs.Voters[0] != 1 {
		t.Fatalf("InitialState ConfState %+v, want voter 1", cs)
	}
	snap, err := s.Snapshot()
	must(t, err)
	if snap.Metadata.Index != snapIdx || string(snap.Data) != "120" {
		t.Fatalf("snapshot %d %q, want %d \"120\"", snap.Metadata.Index, snap.Data, snapIdx)
	}
	if fi, _ := s.FirstIndex(); fi != snapIdx-4 {
		t.Fatalf("FirstIndex %d, want %d", fi, snapIdx-4)
	}
	// Restore the state machine from the snapshot and tell raft where it is.
	n = newNode(t, s, snapIdx)
	n.cs = cs
	for i := range 120 {
		n.applied = append(n.applied, fmt.Sprintf("p%d", i))
	}
	n.drain()
	n.campaign()
	n.propose(120, 150)
	wantApplied(t, n.applied, 150)
	ents, err := s.Entries(snapIdx-4, n.lastApp+1, 1<<30)
	must(t, err)
	if last := ents[len(ents)-1]; string(last.Data) != "p149" {
		t.Fatalf("last stored entry %q, want p149", last.Data)
	}
}
