package quorum

import (
	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
)

// Log is a member's durable raft log: raft.Storage for reads, plus the
// writes a Member makes. The method set is raft.MemoryStorage's plus Save,
// which is exactly what *raftlog.Storage (pebble) has, so it is a Log;
// MemoryLog is for tests.
type Log interface {
	raft.Storage

	// Save durably stores, in this order, a snapshot received from the
	// leader (when not raft.IsEmptySnap: it replaces the whole log), the
	// entries (an entry at index i replaces i and every later entry), and
	// the hard state (when not raft.IsEmptyHardState). It returns only when
	// all of it is durable: the Member sends messages only afterwards.
	Save(hs raftpb.HardState, ents []raftpb.Entry, snap raftpb.Snapshot) error

	// CreateSnapshot makes the snapshot at applied index i, with
	// configuration cs and the given data, the log's snapshot (Snapshot
	// returns it from now on). It does not compact.
	CreateSnapshot(i uint64, cs *raftpb.ConfState, data []byte) (raftpb.Snapshot, error)

	// Compact discards the entries at indexes ≤ compactIndex (which must
	// be > FirstIndex()-1, else raft.ErrCompacted, and ≤ the applied
	// index).
	Compact(compactIndex uint64) error
}

// MemoryLog is a Log over raft.MemoryStorage, for tests. Its "durability"
// is the lifetime of the value: a Member rebuilt over the same MemoryLog
// models a restart.
type MemoryLog struct {
	*raft.MemoryStorage
}

// NewMemoryLog returns an empty MemoryLog.
func NewMemoryLog() *MemoryLog { return &MemoryLog{raft.NewMemoryStorage()} }

// Save implements Log.
func (l *MemoryLog) Save(hs raftpb.HardState, ents []raftpb.Entry, snap raftpb.Snapshot) error {
	if !raft.IsEmptySnap(snap) {
		if err := l.ApplySnapshot(snap); err != nil {
			return err
		}
	}
	if err := l.Append(ents); err != nil {
		return err
	}
	if !raft.IsEmptyHardState(hs) {
		return l.SetHardState(hs)
	}
	return nil
}
