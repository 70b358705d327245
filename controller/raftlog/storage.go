// Package raftlog is durable storage for an etcd raft node
// (go.etcd.io/raft/v3), backed by a pebble key/value store.
//
// [Storage] implements [raft.Storage] (the read side raft itself uses) and
// the write side an application needs after every Ready: [Storage.Save]
// persists one Ready's HardState, entries and snapshot atomically in a
// single synced pebble batch, so the "persist before send" rule from the
// etcd raft README holds: once Save returns, the state survives a crash.
// The finer-grained writers ([Storage.Append], [Storage.SetHardState],
// [Storage.ApplySnapshot], [Storage.CreateSnapshot], [Storage.Compact])
// have the same semantics as raft.MemoryStorage, except that the cases where
// MemoryStorage panics (out-of-bound indexes, gaps) return errors instead.
//
// # Key layout
//
// All keys live in one pebble database owned by the Storage. The first byte
// of each key is a prefix naming the record; values are protobuf-encoded
// raftpb messages (Marshal/Unmarshal) except the snapshot payload.
//
//	0x01                      HardState         raftpb.HardState
//	0x02                      snapshot metadata raftpb.SnapshotMetadata
//	0x03                      snapshot data     raw bytes (absent when empty)
//	0x04                      truncation point  raftpb.Entry{Index, Term} only
//	0x10 + uint64 BE index    log entry         raftpb.Entry
//
// The truncation point is MemoryStorage's "dummy entry" ents[0]: the index
// and term of the last entry discarded by Compact or covered by
// ApplySnapshot. FirstIndex is its Index+1, and Term(truncation.Index) is
// answered from it, though no entry key exists for that index. A missing
// key reads as the zero value, so a fresh database is an empty log whose
// truncation point is {Index: 0, Term: 0}, like raft.NewMemoryStorage.
// Big-endian indexes make pebble's key order equal log order, so the last
// entry is found with one reverse seek on Open.
//
// # Errors
//
// raft compares storage errors with ==, so raft.ErrCompacted,
// raft.ErrUnavailable and raft.ErrSnapOutOfDate are returned unwrapped
// wherever MemoryStorage would return them. Every other error (I/O,
// decoding, out-of-bound arguments, use after Close) is wrapped with
// context and starts with "raftlog:".
package raftlog

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	"github.com/cockroachdb/pebble"
	"github.com/cockroachdb/pebble/vfs"
	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
)

// Key prefixes; see the package comment.
const (
	prefixHardState  byte = 0x01
	prefixSnapMeta   byte = 0x02
	prefixSnapData   byte = 0x03
	prefixTruncation byte = 0x04
	prefixEntry      byte = 0x10
)

var (
	keyHardState  = []byte{prefixHardState}
	keySnapMeta   = []byte{prefixSnapMeta}
	keySnapData   = []byte{prefixSnapData}
	keyTruncation = []byte{prefixTruncation}
	// entryKeysEnd is the exclusive upper bound of all entry keys.
	entryKeysEnd = []byte{prefixEntry + 1}
)

// ErrClosed is returned by every method called after Close.
var ErrClosed = errors.New("raftlog: storage is closed")

// entryKey returns the key of the log entry at index i.
func entryKey(i uint64) []byte {
	k := make([]byte, 9)
	k[0] = prefixEntry
	binary.BigEndian.PutUint64(k[1:], i)
	return k
}

// entryIndex decodes an entry key produced by entryKey.
func entryIndex(k []byte) (uint64, error) {
	if len(k) != 9 || k[0] != prefixEntry {
		return 0, fmt.Errorf("raftlog: malformed entry key %x", k)
	}
	return binary.BigEndian.Uint64(k[1:]), nil
}

// state is the in-memory cache of everything small that Storage keeps in
// pebble. It is replaced as a whole after each successful batch commit.
type state struct {
	hardState raftpb.HardState
	snapMeta  raftpb.SnapshotMetadata
	// truncIndex/truncTerm are the truncation point (MemoryStorage's dummy
	// entry): FirstIndex() == truncIndex+1.
	truncIndex, truncTerm uint64
	// lastIndex is the index of the last entry, or truncIndex when the log
	// holds no entries.
	lastIndex uint64
}

// Storage is a pebble-backed raft.Storage. It is safe for concurrent use;
// mutating methods serialise with each other and with reads.
//
// Invariants (hold between calls, both on disk and in the cache):
//   - st mirrors the values stored under the hard state, snapshot metadata
//     and truncation keys, and the highest entry key (or truncIndex when
//     there is none); it is updated only after the batch that changes the
//     disk state has committed, so a failed write leaves both unchanged.
//   - st.truncIndex <= st.lastIndex.
//   - entry keys exist for exactly the indexes truncIndex+1 ..= lastIndex;
//     every entry value decodes to an Entry whose Index equals its key.
//   - snapshot data is stored under keySnapData only when non-empty.
//   - every committed batch is written with pebble.Sync.
type Storage struct {
	mu     sync.RWMutex
	db     *pebble.DB // nil after Close
	st     state
	closed bool
}

var _ raft.Storage = (*Storage)(nil)

// Open opens (creating if necessary) the raft log stored in dir. What it
// creates is private to the process's user (privateFS).
func Open(dir string) (*Storage, error) {
	return OpenFS(dir, nil)
}

// OpenFS is Open on the file system fs; nil is the operating system's,
// as Open. Tests give pebble's strict in-memory file system
// (vfs.NewStrictMem), whose ResetToSyncedState is what a power loss
// leaves.
func OpenFS(dir string, fs vfs.FS) (*Storage, error) {
	if fs == nil {
		fs = privateFS{vfs.Default}
	}
	return open(dir, &pebble.Options{FS: fs})
}

// open is Open with caller-provided pebble options (tests use a
// crash-simulating in-memory file system).
func open(dir string, opts *pebble.Options) (*Storage, error) {
	if opts.Logger == nil {
		opts.Logger = quietLogger{}
	}
	if opts.FS != nil {
		if err := mkdirAllDurable(opts.FS, dir); err != nil {
			return nil, fmt.Errorf("raftlog: create %q: %w", dir, err)
		}
	}
	db, err := pebble.Open(dir, opts)
	if err != nil {
		return nil, fmt.Errorf("raftlog: open pebble at %q: %w", dir, err)
	}
	s := &Storage{db: db}
	if err := s.load(); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("raftlog: open %q: %w", dir, err)
	}
	return s, nil
}

// mkdirAllDurable creates dir and its missing parents, each made durable
// in its parent. pebble creates a missing directory without syncing its
// parent, and syncs only the directory itself after creating its files,
// so on a file system that keeps no more than POSIX promises (pebble's
// strict MemFS does not) a power loss right after the first start could
// take the whole log, votes included, with the directory's name.
// Directories that exist cost one Stat each on the way up.
func mkdirAllDurable(fs vfs.FS, dir string) error {
	dir = filepath.Clean(dir)
	var created []string
	for d := dir; ; d = filepath.Dir(d) {
		if _, err := fs.Stat(d); err == nil {
			break
		} else if !errors.Is(err, os.ErrNotExist) {
			return err
		}
		created = append(created, d)
		if parent := filepath.Dir(d); parent == d {
			break
		}
	}
	if len(created) == 0 {
		return nil
	}
	if err := fs.MkdirAll(dir, dirMode); err != nil {
		return err
	}
	// Outermost first: a name is durable before anything below it needs it.
	for i := len(created) - 1; i >= 0; i-- {
		parent := filepath.Dir(created[i])
		d, err := fs.OpenDir(parent)
		if err != nil {
			return err
		}
		err = d.Sync()
		if cerr := d.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return fmt.Errorf("sync directory %s: %w", parent, err)
		}
	}
	return nil
}

// quietLogger drops pebble's informational logging but keeps fatal errors
// fatal.
type quietLogger struct{}

func (quietLogger) Infof(string, ...interface{}) {}
func (quietLogger) Fatalf(format string, args ...interface{}) {
	pebble.DefaultLogger.Fatalf(format, args...)
}

// load fills s.st from disk.
func (s *Storage) load() error {
	var st state
	if _, err := s.getProto(keyHardState, &st.hardState); err != nil {
		return err
	}
	if _, err := s.getProto(keySnapMeta, &st.snapMeta); err != nil {
		return err
	}
	var trunc raftpb.Entry
	if _, err := s.getProto(keyTruncation, &trunc); err != nil {
		return err
	}
	st.truncIndex, st.truncTerm = trunc.Index, trunc.Term
	st.lastIndex = st.truncIndex

	it, err := s.db.NewIter(&pebble.IterOptions{
		LowerBound: entryKey(0),
		UpperBound: entryKeysEnd,
	})
	if err != nil {
		return fmt.Errorf("raftlog: new iterator: %w", err)
	}
	defer it.Close()
	if it.First() {
		first, err := entryIndex(it.Key())
		if err != nil {
			return err
		}
		if first != st.truncIndex+1 {
			return fmt.Errorf("raftlog: corrupt log: first entry %d does not follow truncation point %d",
				first, st.truncIndex)
		}
		if !it.Last() {
			return fmt.Errorf("raftlog: find last entry: %w", it.Error())
		}
		last, err := entryIndex(it.Key())
		if err != nil {
			return err
		}
		st.lastIndex = last
	}
	if err := it.Error(); err != nil {
		return fmt.Errorf("raftlog: scan entries: %w", err)
	}
	s.st = st
	return nil
}

// Close closes the underlying database. Further calls return ErrClosed.
func (s *Storage) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	err := s.db.Close()
	s.db = nil
	if err != nil {
		return fmt.Errorf("raftlog: close: %w", err)
	}
	return nil
}

type unmarshaler interface{ Unmarshal([]byte) error }

// getProto reads key into m. A missing key leaves m untouched and reports
// false.
func (s *Storage) getProto(key []byte, m unmarshaler) (bool, error) {
	v, closer, err := s.db.Get(key)
	if errors.Is(err, pebble.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("raftlog: get %x: %w", key, err)
	}
	defer closer.Close()
	if err := m.Unmarshal(v); err != nil {
		return false, fmt.Errorf("raftlog: decode %x: %w", key, err)
	}
	return true, nil
}

// ---- raft.Storage (read side) ----

// InitialState implements raft.Storage.
func (s *Storage) InitialState() (raftpb.HardState, raftpb.ConfState, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return raftpb.HardState{}, raftpb.ConfState{}, ErrClosed
	}
	return s.st.hardState, s.st.snapMeta.ConfState, nil
}

// FirstIndex implements raft.Storage.
func (s *Storage) FirstIndex() (uint64, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return 0, ErrClosed
	}
	return s.st.truncIndex + 1, nil
}

// LastIndex implements raft.Storage.
func (s *Storage) LastIndex() (uint64, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return 0, ErrClosed
	}
	return s.st.lastIndex, nil
}

// Term implements raft.Storage. Like MemoryStorage it answers for
// [FirstIndex()-1, LastIndex()], returning raft.ErrCompacted below and
// raft.ErrUnavailable above that range.
func (s *Storage) Term(i uint64) (uint64, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return 0, ErrClosed
	}
	return s.termLocked(i)
}

func (s *Storage) termLocked(i uint64) (uint64, error) {
	if i < s.st.truncIndex {
		return 0, raft.ErrCompacted
	}
	if i > s.st.lastIndex {
		return 0, raft.ErrUnavailable
	}
	if i == s.st.truncIndex {
		return s.st.truncTerm, nil
	}
	var e raftpb.Entry
	ok, err := s.getProto(entryKey(i), &e)
	if err != nil {
		return 0, fmt.Errorf("raftlog: term %d: %w", i, err)
	}
	if !ok {
		return 0, fmt.Errorf("raftlog: corrupt log: entry %d missing (first %d, last %d)",
			i, s.st.truncIndex+1, s.st.lastIndex)
	}
	return e.Term, nil
}

// Entries implements raft.Storage: entries [lo, hi), limited to maxSize
// bytes of encoded entries but always at least one entry. It returns
// raft.ErrCompacted when lo <= FirstIndex()-1 and raft.ErrUnavailable when
// the log holds no entries. hi > LastIndex()+1 (a MemoryStorage panic) is
// an error. The returned slice is freshly allocated.
func (s *Storage) Entries(lo, hi, maxSize uint64) ([]raftpb.Entry, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return nil, ErrClosed
	}
	if lo <= s.st.truncIndex {
		return nil, raft.ErrCompacted
	}
	if hi > s.st.lastIndex+1 {
		return nil, fmt.Errorf("raftlog: entries [%d, %d): hi out of bound, last index %d",
			lo, hi, s.st.lastIndex)
	}
	if s.st.lastIndex == s.st.truncIndex {
		return nil, raft.ErrUnavailable
	}
	if lo > hi {
		return nil, fmt.Errorf("raftlog: entries [%d, %d): lo > hi", lo, hi)
	}
	ents := make([]raftpb.Entry, 0, min(hi-lo, 64))
	if lo == hi {
		return ents, nil
	}
	it, err := s.db.NewIter(&pebble.IterOptions{
		LowerBound: entryKey(lo),
		UpperBound: entryKey(hi),
	})
	if err != nil {
		return nil, fmt.Errorf("raftlog: entries [%d, %d): new iterator: %w", lo, hi, err)
	}
	defer it.Close()
	var size uint64
	next := lo
	limited := false
	for ok := it.First(); ok; ok = it.Next() {
		idx, err := entryIndex(it.Key())
		if err != nil {
			return nil, err
		}
		if idx != next {
			return nil, fmt.Errorf("raftlog: corrupt log: expected entry %d, found %d", next, idx)
		}
		v, err := it.ValueAndErr()
		if err != nil {
			return nil, fmt.Errorf("raftlog: read entry %d: %w", idx, err)
		}
		var e raftpb.Entry
		if err := e.Unmarshal(v); err != nil {
			return nil, fmt.Errorf("raftlog: decode entry %d: %w", idx, err)
		}
		if e.Index != idx {
			return nil, fmt.Errorf("raftlog: corrupt log: key %d holds entry %d", idx, e.Index)
		}
		size += uint64(e.Size())
		if len(ents) > 0 && size > maxSize {
			limited = true
			break
		}
		ents = append(ents, e)
		next++
	}
	if err := it.Error(); err != nil {
		return nil, fmt.Errorf("raftlog: entries [%d, %d): %w", lo, hi, err)
	}
	if !limited && next != hi {
		return nil, fmt.Errorf("raftlog: corrupt log: entries [%d, %d) stop at %d", lo, hi, next)
	}
	return ents, nil
}

// Snapshot implements raft.Storage: the most recent snapshot (the zero
// Snapshot if none was created or applied).
func (s *Storage) Snapshot() (raftpb.Snapshot, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return raftpb.Snapshot{}, ErrClosed
	}
	snap := raftpb.Snapshot{Metadata: s.st.snapMeta}
	v, closer, err := s.db.Get(keySnapData)
	switch {
	case errors.Is(err, pebble.ErrNotFound):
	case err != nil:
		return raftpb.Snapshot{}, fmt.Errorf("raftlog: read snapshot data: %w", err)
	default:
		snap.Data = append([]byte(nil), v...)
		_ = closer.Close()
	}
	return snap, nil
}

// ---- write side ----

// txn accumulates one batch plus the state it will produce.
type txn struct {
	b  *pebble.Batch
	st state
}

func (s *Storage) begin() (*txn, error) {
	if s.closed {
		return nil, ErrClosed
	}
	return &txn{b: s.db.NewBatch(), st: s.st}, nil
}

// commit writes the batch with Sync and, on success, publishes its state.
func (s *Storage) commit(t *txn, what string) error {
	defer t.b.Close()
	if t.b.Empty() {
		s.st = t.st
		return nil
	}
	if err := t.b.Commit(pebble.Sync); err != nil {
		return fmt.Errorf("raftlog: %s: commit: %w", what, err)
	}
	s.st = t.st
	return nil
}

type marshaler interface{ Marshal() ([]byte, error) }

func (t *txn) setProto(key []byte, m marshaler) error {
	v, err := m.Marshal()
	if err != nil {
		return fmt.Errorf("raftlog: encode %x: %w", key, err)
	}
	if err := t.b.Set(key, v, nil); err != nil {
		return fmt.Errorf("raftlog: batch set %x: %w", key, err)
	}
	return nil
}

func (t *txn) setTruncation(index, term uint64) error {
	t.st.truncIndex, t.st.truncTerm = index, term
	return t.setProto(keyTruncation, &raftpb.Entry{Index: index, Term: term})
}

// deleteEntries deletes entry keys for indexes [from, to).
func (t *txn) deleteEntries(from, to uint64) error {
	if from >= to {
		return nil
	}
	if err := t.b.DeleteRange(entryKey(from), entryKey(to), nil); err != nil {
		return fmt.Errorf("raftlog: batch delete entries [%d, %d): %w", from, to, err)
	}
	return nil
}

func (t *txn) setHardState(hs raftpb.HardState) error {
	t.st.hardState = hs
	return t.setProto(keyHardState, &hs)
}

func (t *txn) append(entries []raftpb.Entry) error {
	if len(entries) == 0 {
		return nil
	}
	for i := range entries {
		if want := entries[0].Index + uint64(i); entries[i].Index != want {
			return fmt.Errorf("raftlog: append: entries not contiguous: position %d has index %d, want %d",
				i, entries[i].Index, want)
		}
	}
	first := t.st.truncIndex + 1
	last := entries[0].Index + uint64(len(entries)) - 1
	if last < first {
		return nil // everything is already compacted
	}
	if first > entries[0].Index {
		entries = entries[first-entries[0].Index:]
	}
	if entries[0].Index > t.st.lastIndex+1 {
		return fmt.Errorf("raftlog: append: missing log entry [last: %d, append at: %d]",
			t.st.lastIndex, entries[0].Index)
	}
	// Truncate the conflicting suffix that the new entries do not overwrite.
	if err := t.deleteEntries(last+1, t.st.lastIndex+1); err != nil {
		return err
	}
	for i := range entries {
		if err := t.setProto(entryKey(entries[i].Index), &entries[i]); err != nil {
			return err
		}
	}
	t.st.lastIndex = last
	return nil
}

func (t *txn) applySnapshot(snap raftpb.Snapshot) error {
	if t.st.snapMeta.Index >= snap.Metadata.Index {
		return raft.ErrSnapOutOfDate
	}
	if err := t.setSnapshot(snap.Metadata, snap.Data); err != nil {
		return err
	}
	if err := t.b.DeleteRange(entryKey(0), entryKeysEnd, nil); err != nil {
		return fmt.Errorf("raftlog: batch delete all entries: %w", err)
	}
	t.st.lastIndex = snap.Metadata.Index
	return t.setTruncation(snap.Metadata.Index, snap.Metadata.Term)
}

func (t *txn) setSnapshot(meta raftpb.SnapshotMetadata, data []byte) error {
	t.st.snapMeta = meta
	if err := t.setProto(keySnapMeta, &meta); err != nil {
		return err
	}
	var err error
	if len(data) == 0 {
		err = t.b.Delete(keySnapData, nil)
	} else {
		err = t.b.Set(keySnapData, data, nil)
	}
	if err != nil {
		return fmt.Errorf("raftlog: batch write snapshot data: %w", err)
	}
	return nil
}

// SetHardState durably saves the HardState.
func (s *Storage) SetHardState(hs raftpb.HardState) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, err := s.begin()
	if err != nil {
		return err
	}
	if err := t.setHardState(hs); err != nil {
		t.b.Close()
		return err
	}
	return s.commit(t, "set hard state")
}

// Append durably appends entries to the log, like MemoryStorage.Append:
// entries at or below the truncation point are ignored, and any existing
// entries from entries[0].Index on are replaced (a conflicting suffix
// beyond the new last entry is deleted). Appending past LastIndex()+1, or
// non-contiguous entries, is an error.
func (s *Storage) Append(entries []raftpb.Entry) error {
	if len(entries) == 0 {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	t, err := s.begin()
	if err != nil {
		return err
	}
	if err := t.append(entries); err != nil {
		t.b.Close()
		return err
	}
	return s.commit(t, "append")
}

// ApplySnapshot replaces the whole log with snap: all entries are dropped
// and the truncation point becomes the snapshot's index and term. The
// HardState is left alone. It returns raft.ErrSnapOutOfDate unless snap is
// newer than the current snapshot.
func (s *Storage) ApplySnapshot(snap raftpb.Snapshot) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, err := s.begin()
	if err != nil {
		return err
	}
	if err := t.applySnapshot(snap); err != nil {
		t.b.Close()
		return err
	}
	return s.commit(t, "apply snapshot")
}

// CreateSnapshot records a snapshot at index i with the given data; cs
// replaces the stored ConfState when non-nil. It does not compact the log.
// It returns raft.ErrSnapOutOfDate if i is not newer than the current
// snapshot, raft.ErrCompacted if i's term is no longer known, and an error
// if i > LastIndex().
func (s *Storage) CreateSnapshot(i uint64, cs *raftpb.ConfState, data []byte) (raftpb.Snapshot, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return raftpb.Snapshot{}, ErrClosed
	}
	if i <= s.st.snapMeta.Index {
		return raftpb.Snapshot{}, raft.ErrSnapOutOfDate
	}
	if i > s.st.lastIndex {
		return raftpb.Snapshot{}, fmt.Errorf("raftlog: snapshot %d is out of bound lastindex(%d)",
			i, s.st.lastIndex)
	}
	term, err := s.termLocked(i)
	if err != nil {
		return raftpb.Snapshot{}, err
	}
	meta := s.st.snapMeta
	meta.Index, meta.Term = i, term
	if cs != nil {
		meta.ConfState = *cs
	}
	t, err := s.begin()
	if err != nil {
		return raftpb.Snapshot{}, err
	}
	if err := t.setSnapshot(meta, data); err != nil {
		t.b.Close()
		return raftpb.Snapshot{}, err
	}
	if err := s.commit(t, "create snapshot"); err != nil {
		return raftpb.Snapshot{}, err
	}
	return raftpb.Snapshot{Metadata: meta, Data: data}, nil
}

// Compact discards all entries up to and including compactIndex, which
// becomes the truncation point (its term is kept for Term). It returns
// raft.ErrCompacted if compactIndex <= FirstIndex()-1 and an error if
// compactIndex > LastIndex(). The application must not compact past its
// applied index.
func (s *Storage) Compact(compactIndex uint64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrClosed
	}
	if compactIndex <= s.st.truncIndex {
		return raft.ErrCompacted
	}
	if compactIndex > s.st.lastIndex {
		return fmt.Errorf("raftlog: compact %d is out of bound lastindex(%d)", compactIndex, s.st.lastIndex)
	}
	term, err := s.termLocked(compactIndex)
	if err != nil {
		return err
	}
	t, err := s.begin()
	if err != nil {
		return err
	}
	if err := t.deleteEntries(t.st.truncIndex+1, compactIndex+1); err != nil {
		t.b.Close()
		return err
	}
	if err := t.setTruncation(compactIndex, term); err != nil {
		t.b.Close()
		return err
	}
	return s.commit(t, "compact")
}

// Save durably persists one Ready's state in a single synced pebble batch:
// first snap (if not empty, as ApplySnapshot), then hs (if not empty, as
// SetHardState), then entries (as Append). Either all of it is persisted or
// none; once Save returns nil the state survives a crash, so messages of the
// same Ready may be sent. Errors are wrapped (use errors.Is for
// raft.ErrSnapOutOfDate).
func (s *Storage) Save(hs raftpb.HardState, entries []raftpb.Entry, snap raftpb.Snapshot) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, err := s.begin()
	if err != nil {
		return err
	}
	if err := s.fillSave(t, hs, entries, snap); err != nil {
		t.b.Close()
		return fmt.Errorf("raftlog: save: %w", err)
	}
	return s.commit(t, "save")
}

func (s *Storage) fillSave(t *txn, hs raftpb.HardState, entries []raftpb.Entry, snap raftpb.Snapshot) error {
	if !raft.IsEmptySnap(snap) {
		if err := t.applySnapshot(snap); err != nil {
			return err
		}
	}
	if !raft.IsEmptyHardState(hs) {
		if err := t.setHardState(hs); err != nil {
			return err
		}
	}
	return t.append(entries)
}
