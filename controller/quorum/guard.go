package quorum

import (
	"errors"
	"fmt"
	"math"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/confchange"
	"go.etcd.io/raft/v3/raftpb"
	"go.etcd.io/raft/v3/tracker"
)

// ErrRefused marks a peer's message that Step refused without handing it
// to raft: one no legitimate member sends, and that would make etcd raft
// panic (killing the process) or corrupt its state.
var ErrRefused = errors.New("quorum: message refused")

func refused(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrRefused, fmt.Sprintf(format, args...))
}

// check refuses a peer's message that etcd raft (v3.6) does not validate
// before acting on it. etcd raft trusts its transport: it panics on an
// inconsistent message rather than dropping it, and over a network port
// that turns one packet into a dead node. Each rule below is a panic found
// in raft.go, log.go and read_only.go and reproduced by guard_test.go; a
// legitimate member never sends such a message, so refusing it changes
// nothing for a healthy quorum.
//
// Checked and left to raft (no panic, or only an authenticated voter can
// send it and voters are trusted with the log anyway): votes, vote
// responses, heartbeat responses, append responses (an acknowledgement
// past the leader's log is stored in the progress but never commits, since
// a commit needs the leader's own entry at that index), MsgTransferLeader,
// MsgTimeoutNow, MsgForgetLeader, snapshot data Fjord cannot decode (the
// member stops with an error, see Ready) and entries of a well-formed
// append whose records do not decode (likewise).
func (m *Member) check(msg raftpb.Message) error {
	// Messages raft generates for itself (MsgHup, MsgBeat, storage
	// acknowledgements...) never cross the network. RawNode refuses them
	// unless From is raft's local append or apply thread, which a peer can
	// write too (an MsgStorageApplyResp past the commit index panics).
	if raft.IsLocalMsg(msg.Type) {
		return refused("local message %s from the network", msg.Type)
	}
	// raft.Step treats a message without a term as local and skips every
	// term check; it sends only proposals and read-index requests without
	// one, and those always without one (raft.go, send).
	termless := msg.Type == raftpb.MsgProp || msg.Type == raftpb.MsgReadIndex
	if termless != (msg.Term == 0) {
		return refused("%s with term %d", msg.Type, msg.Term)
	}
	switch msg.Type {
	case raftpb.MsgHeartbeat:
		// A leader sends a follower min(match, committed) as the heartbeat's
		// commit index, where match is the highest index the follower
		// acknowledged in the leader's term, and a follower acknowledges
		// only entries it persisted (Ready saves before the response goes
		// out) and that match the leader's log, so the leader never
		// truncates them. Anything larger is forged, or the follower lost
		// its log; raft's commitTo panics on it either way ("tocommit(%d)
		// is out of range").
		last, err := m.log.LastIndex()
		if err != nil {
			return fmt.Errorf("quorum: %w", err)
		}
		if msg.Commit > last {
			return refused("heartbeat from %d commits %d, past the last persisted index %d", msg.From, msg.Commit, last)
		}
	case raftpb.MsgApp:
		// raft assumes the entries follow Index one by one with terms that
		// never decrease and never pass the leader's (a "log slice"; its
		// own validation is a TODO in handleAppendEntries): out of order
		// entries panic in maybeAppend.
		if uint64(len(msg.Entries)) > math.MaxUint64-msg.Index {
			return refused("append past the last index")
		}
		prev := msg.LogTerm
		for i, e := range msg.Entries {
			if e.Index != msg.Index+1+uint64(i) || e.Term < prev {
				return refused("append from %d: entry (%d, term %d) does not follow (%d, term %d)", msg.From, e.Index, e.Term, msg.Index+uint64(i), prev)
			}
			if err := knownEntryType(e.Type); err != nil {
				return err
			}
			prev = e.Term
		}
		if prev > msg.Term {
			return refused("append from %d at term %d carries term %d", msg.From, msg.Term, prev)
		}
	case raftpb.MsgSnap:
		if msg.Snapshot != nil {
			if err := checkConfState(msg.Snapshot.Metadata); err != nil {
				return refused("snapshot from %d: %v", msg.From, err)
			}
		}
	case raftpb.MsgProp:
		// A follower forwards a proposal to the leader; the leader appends
		// it to the log as is, so it is judged as Propose judges a local
		// one. raft panics on an empty proposal and on a conf change that
		// does not unmarshal, and a record that does not decode would stop
		// every member once committed.
		if len(msg.Entries) == 0 {
			return refused("empty proposal from %d", msg.From)
		}
		for _, e := range msg.Entries {
			var err error
			switch e.Type {
			case raftpb.EntryNormal:
				err = checkProposal(e.Data)
			case raftpb.EntryConfChange:
				var cc raftpb.ConfChange
				err = cc.Unmarshal(e.Data)
			case raftpb.EntryConfChangeV2:
				var cc raftpb.ConfChangeV2
				err = cc.Unmarshal(e.Data)
			default:
				err = knownEntryType(e.Type)
			}
			if err != nil {
				return refused("proposal from %d: %v", msg.From, err)
			}
		}
	case raftpb.MsgReadIndex:
		// The leader keys the request by its first entry (read_only.go).
		if len(msg.Entries) != 1 {
			return refused("read index from %d with %d entries", msg.From, len(msg.Entries))
		}
	}
	return nil
}

func knownEntryType(t raftpb.EntryType) error {
	switch t {
	case raftpb.EntryNormal, raftpb.EntryConfChange, raftpb.EntryConfChangeV2:
		return nil
	}
	return refused("entry type %v", t)
}

// checkConfState replays what raft's restore does with a snapshot's
// configuration, on a scratch tracker: restore panics when
// confchange.Restore fails or its result is not the configuration given
// (e.g. an id both voter and learner).
func checkConfState(md raftpb.SnapshotMetadata) error {
	trk := tracker.MakeProgressTracker(1, 0)
	cfg, prs, err := confchange.Restore(confchange.Changer{Tracker: trk, LastIndex: md.Index}, md.ConfState)
	if err != nil {
		return err
	}
	trk.Config, trk.Progress = cfg, prs
	return md.ConfState.Equivalent(trk.ConfState())
}
