package quorum

import (
	"errors"
	"testing"
	"testing/cryptotest"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
)

// hostile are messages a peer could send that a legitimate member never
// does, built against a quorum of three in which leader leads and follower
// follows; each names the member it targets. The comment of Member.check
// says which panic each one reaches.
func hostile(n *network, leader, follower uint64) []struct {
	name string
	to   uint64
	m    raftpb.Message
} {
	fm := n.members[follower]
	term := fm.Term()
	last, _ := n.logs[follower].LastIndex()
	lastTerm, _ := n.logs[follower].Term(last)
	from := leader
	other := uint64(3)
	if other == leader || other == follower {
		other = 2
		if other == leader || other == follower {
			other = 1
		}
	}
	return []struct {
		name string
		to   uint64
		m    raftpb.Message
	}{
		{"heartbeat commit past the log", follower, raftpb.Message{Type: raftpb.MsgHeartbeat, From: from, To: follower, Term: term, Commit: 1000000}},
		{"heartbeat higher term commit past the log", follower, raftpb.Message{Type: raftpb.MsgHeartbeat, From: other, To: follower, Term: term + 100, Commit: 1000000}},
		{"append conflicting with committed", follower, raftpb.Message{Type: raftpb.MsgApp, From: from, To: follower, Term: term, Index: last, LogTerm: lastTerm,
			Entries: []raftpb.Entry{{Index: 1, Term: term}}}},
		{"append with a gap", follower, raftpb.Message{Type: raftpb.MsgApp, From: from, To: follower, Term: term, Index: last, LogTerm: lastTerm,
			Entries: []raftpb.Entry{{Index: last + 5, Term: term}}}},
		{"empty proposal", leader, raftpb.Message{Type: raftpb.MsgProp, From: follower, To: leader}},
		{"proposal with a bad conf change", leader, raftpb.Message{Type: raftpb.MsgProp, From: follower, To: leader,
			Entries: []raftpb.Entry{{Type: raftpb.EntryConfChange, Data: []byte{0xff, 0xff, 0xff}}}}},
		{"read index without context", leader, raftpb.Message{Type: raftpb.MsgReadIndex, From: follower, To: leader}},
		{"snapshot with a bad conf state", follower, raftpb.Message{Type: raftpb.MsgSnap, From: from, To: follower, Term: term,
			Snapshot: &raftpb.Snapshot{Metadata: raftpb.SnapshotMetadata{Index: last + 10, Term: term,
				ConfState: raftpb.ConfState{Voters: []uint64{follower}, Learners: []uint64{follower}}}}}},
		{"proposal that does not decode", leader, raftpb.Message{Type: raftpb.MsgProp, From: follower, To: leader,
			Entries: []raftpb.Entry{{Data: []byte("junk")}}}},
		{"proposal with a term", leader, raftpb.Message{Type: raftpb.MsgProp, From: follower, To: leader, Term: term + 100,
			Entries: []raftpb.Entry{{Data: reg(5)}}}},
		{"append without a term", follower, raftpb.Message{Type: raftpb.MsgApp, From: other, To: follower, Index: last, LogTerm: lastTerm}},
		{"apply response from the network", follower, raftpb.Message{Type: raftpb.MsgStorageApplyResp, From: raft.LocalApplyThread, To: follower,
			Entries: []raftpb.Entry{{Index: 1000000, Term: term}}}},
	}
}

// TestStepRefusesHostileMessages: each message above makes etcd raft
// panic when stepped unguarded (or, for the last ones, breaks the quorum
// without a panic). Step refuses it with ErrRefused, the member's term,
// leader and log stay as they were, and the quorum goes on committing.
func TestStepRefusesHostileMessages(t *testing.T) {
	for i := range hostile(newNetwork(t, 1, []uint64{1, 2, 3}, nil), 1, 2) {
		cryptotest.SetGlobalRandom(t, 21)
		n := newNetwork(t, 1, []uint64{1, 2, 3}, nil)
		l := n.waitLeader()
		n.commit(reg(1))
		f := uint64(1)
		if f == l {
			f = 2
		}
		h := hostile(n, l, f)[i]
		t.Run(h.name, func(t *testing.T) {
			m := n.members[h.to]
			term, lead := m.Term(), m.Leader()
			last, _ := n.logs[h.to].LastIndex()
			if err := m.Step(h.m); !errors.Is(err, ErrRefused) {
				t.Fatalf("Step: %v, want ErrRefused", err)
			}
			if _, _, err := m.Ready(); err != nil {
				t.Fatalf("Ready after a refused message: %v", err)
			}
			if got, _ := n.logs[h.to].LastIndex(); m.Term() != term || m.Leader() != lead || got != last {
				t.Fatalf("term %d leader %d last %d, was %d %d %d", m.Term(), m.Leader(), got, term, lead, last)
			}
			n.commit(reg(2))
		})
	}
}
