package raftlog

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand"
	"testing"

	"github.com/cockroachdb/pebble"
	"github.com/cockroachdb/pebble/vfs"
	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
)

// memCall runs f, converting a MemoryStorage panic into panicked=true.
func memCall(f func() error) (err error, panicked bool) {
	defer func() {
		if r := recover(); r != nil {
			panicked = true
		}
	}()
	return f(), false
}

func randData(rng *rand.Rand) []byte {
	n := rng.Intn(4) * rng.Intn(60)
	if n == 0 && rng.Intn(2) == 0 {
		return nil
	}
	b := make([]byte, n)
	rng.Read(b)
	return b
}

func randConfState(rng *rand.Rand) raftpb.ConfState {
	var cs raftpb.ConfState
	for i := range rng.Intn(4) {
		cs.Voters = append(cs.Voters, uint64(i+1))
	}
	if rng.Intn(3) == 0 {
		cs.Learners = []uint64{9}
	}
	return cs
}

func randEntries(rng *rand.Rand, start uint64, n int) []raftpb.Entry {
	ents := make([]raftpb.Entry, n)
	term := uint64(rng.Intn(5) + 1)
	for i := range ents {
		ents[i] = raftpb.Entry{Index: start + uint64(i), Term: term, Data: randData(rng)}
		if rng.Intn(10) == 0 {
			ents[i].Type = raftpb.EntryConfChange
		}
		if rng.Intn(4) == 0 {
			term++
		}
	}
	return ents
}

// TestDifferential drives raftlog.Storage and raft.MemoryStorage with the
// same random operations and compares every read method after each step.
// Where MemoryStorage panics, raftlog must return an error and (checked by
// the next comparison) leave its state unchanged. The raftlog storage is
// also closed and reopened from disk now and then.
func TestDifferential(t *testing.T) {
	for seed := int64(1); seed <= 6; seed++ {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			rng := rand.New(rand.NewSource(seed))
			dir := t.TempDir()
			s := openT(t, dir)
			defer func() { closeT(t, s) }()
			ms := raft.NewMemoryStorage()
			checkSame(t, ms, s, true, rng)

			for step := range 400 {
				first, _ := ms.FirstIndex()
				last, _ := ms.LastIndex()
				snap, _ := ms.Snapshot()
				snapIdx := snap.Metadata.Index
				var op string
				var want, got error
				var panicked bool
				switch r := rng.Intn(100); {
				case r < 45: // Append, sometimes overlapping or past the end
					lo := int64(first) - 3
					if lo < 1 {
						lo = 1
					}
					start := uint64(lo + rng.Int63n(int64(last)+3-lo))
					ents := randEntries(rng, start, rng.Intn(6))
					op = fmt.Sprintf("Append(%s)", fmtEntries(ents))
					want, panicked = memCall(func() error { return ms.Append(ents) })
					got = s.Append(ents)
				case r < 60: // SetHardState
					hs := raftpb.HardState{Term: uint64(rng.Intn(10)), Vote: uint64(rng.Intn(3)), Commit: uint64(rng.Intn(int(last) + 1))}
					op = fmt.Sprintf("SetHardState(%+v)", hs)
					want, panicked = memCall(func() error { return ms.SetHardState(hs) })
					got = s.SetHardState(hs)
				case r < 75: // CreateSnapshot
					i := snapIdx + 1
					if last >= snapIdx {
						i = snapIdx + uint64(rng.Int63n(int64(last-snapIdx)+2))
					}
					if snapIdx > 0 && rng.Intn(5) == 0 {
						i = snapIdx - uint64(rng.Intn(2))
					}
					var cs *raftpb.ConfState
					if rng.Intn(2) == 0 {
						c := randConfState(rng)
						cs = &c
					}
					data := randData(rng)
					op = fmt.Sprintf("CreateSnapshot(%d, %v, %dB)", i, cs, len(data))
					if i > snapIdx && i < first-1 {
						// MemoryStorage indexes out of range and corrupts
						// its snapshot before panicking; raftlog must report
						// ErrCompacted.
						if _, err := s.CreateSnapshot(i, cs, data); err != raft.ErrCompacted {
							t.Fatalf("step %d %s: error %v, want ErrCompacted", step, op, err)
						}
						break
					}
					var wsnap, gsnap raftpb.Snapshot
					want, panicked = memCall(func() (err error) {
						wsnap, err = ms.CreateSnapshot(i, cs, data)
						return err
					})
					gsnap, got = s.CreateSnapshot(i, cs, data)
					if !panicked && (!bytes.Equal(mustMarshal(t, &gsnap.Metadata), mustMarshal(t, &wsnap.Metadata)) ||
						!bytes.Equal(gsnap.Data, wsnap.Data)) {
						t.Fatalf("step %d %s = %+v, want %+v", step, op, gsnap, wsnap)
					}
				case r < 85: // ApplySnapshot, sometimes out of date
					idx := uint64(rng.Int63n(int64(last) + 6))
					if rng.Intn(2) == 0 {
						idx = snapIdx + uint64(rng.Intn(8))
					}
					snap := raftpb.Snapshot{
						Metadata: raftpb.SnapshotMetadata{Index: idx, Term: uint64(rng.Intn(9) + 1), ConfState: randConfState(rng)},
						Data:     randData(rng),
					}
					op = fmt.Sprintf("ApplySnapshot(%d/%d)", snap.Metadata.Index, snap.Metadata.Term)
					want, panicked = memCall(func() error { return ms.ApplySnapshot(snap) })
					got = s.ApplySnapshot(snap)
				default: // Compact, sometimes below/above bounds
					lo := int64(first) - 2
					if lo < 0 {
						lo = 0
					}
					i := uint64(lo + rng.Int63n(int64(last)+2-lo))
					op = fmt.Sprintf("Compact(%d)", i)
					want, panicked = memCall(func() error { return ms.Compact(i) })
					got = s.Compact(i)
				}
				if panicked {
					if got == nil {
						t.Fatalf("step %d %s: MemoryStorage panics, raftlog returned nil", step, op)
					}
				} else if got != want {
					t.Fatalf("step %d %s: error %v, want %v", step, op, got, want)
				}
				if rng.Intn(40) == 0 {
					closeT(t, s)
					s = openT(t, dir)
				}
				checkSame(t, ms, s, step%25 == 0, rng)
			}
		})
	}
}

// fill performs a fixed mix of writes on both storages.
func fill(t *testing.T, ms *raft.MemoryStorage, s *Storage) {
	t.Helper()
	rng := rand.New(rand.NewSource(42))
	ents := randEntries(rng, 1, 30)
	do := func(what string, want, got error) {
		t.Helper()
		if want != nil || got != nil {
			t.Fatalf("%s: mem %v, raftlog %v", what, want, got)
		}
	}
	do("append", ms.Append(ents), s.Append(ents))
	hs := raftpb.HardState{Term: 7, Vote: 2, Commit: 25}
	do("hardstate", ms.SetHardState(hs), s.SetHardState(hs))
	cs := raftpb.ConfState{Voters: []uint64{1, 2, 3}}
	_, err1 := ms.CreateSnapshot(20, &cs, []byte("state@20"))
	_, err2 := s.CreateSnapshot(20, &cs, []byte("state@20"))
	do("snapshot", err1, err2)
	do("compact", ms.Compact(15), s.Compact(15))
	over := randEntries(rng, 27, 2) // truncates 29 and 30
	do("append-conflict", ms.Append(over), s.Append(over))
}

func TestReopenKeepsEverything(t *testing.T) {
	dir := t.TempDir()
	s := openT(t, dir)
	ms := raft.NewMemoryStorage()
	fill(t, ms, s)
	checkSame(t, ms, s, true, nil)
	closeT(t, s)

	if _, err := s.LastIndex(); !errors.Is(err, ErrClosed) {
		t.Fatalf("LastIndex after Close: %v, want ErrClosed", err)
	}
	if err := s.Append([]raftpb.Entry{{Index: 29, Term: 9}}); !errors.Is(err, ErrClosed) {
		t.Fatalf("Append after Close: %v, want ErrClosed", err)
	}

	s = openT(t, dir)
	defer closeT(t, s)
	checkSame(t, ms, s, true, nil)
	// And it keeps working after reopen.
	more := []raftpb.Entry{{Index: 29, Term: 9, Data: []byte("x")}, {Index: 30, Term: 9}}
	if err := ms.Append(more); err != nil {
		t.Fatal(err)
	}
	if err := s.Append(more); err != nil {
		t.Fatal(err)
	}
	checkSame(t, ms, s, true, nil)
}

// TestCrashAfterSave writes with Save and then simulates a crash: pebble runs
// on a strict in-memory file system that, on ResetToSyncedState, forgets
// everything not fsynced. The Close happens while syncs are ignored, so it
// contributes nothing durable.
func TestCrashAfterSave(t *testing.T) {
	fs := vfs.NewStrictMem()
	opts := func() *pebble.Options { return &pebble.Options{FS: fs} }
	// Creating "db" itself is outside pebble's responsibility (it does not
	// sync the parent directory), so make the directory durable first.
	must(t, fs.MkdirAll("db", 0o755))
	root, err := fs.OpenDir("")
	must(t, err)
	must(t, root.Sync())
	must(t, root.Close())
	s, err := open("db", opts())
	must(t, err)
	ms := raft.NewMemoryStorage()
	rng := rand.New(rand.NewSource(7))

	// Ready 1: hard state + entries.
	ents := randEntries(rng, 1, 10)
	hs := raftpb.HardState{Term: 2, Vote: 1, Commit: 3}
	if err := s.Save(hs, ents, raftpb.Snapshot{}); err != nil {
		t.Fatal(err)
	}
	must(t, ms.SetHardState(hs))
	must(t, ms.Append(ents))
	// Ready 2: a snapshot from the leader, followed by entries.
	snap := raftpb.Snapshot{
		Metadata: raftpb.SnapshotMetadata{Index: 20, Term: 3, ConfState: raftpb.ConfState{Voters: []uint64{1, 2}}},
		Data:     []byte("snapshot-data"),
	}
	ents = randEntries(rng, 21, 5)
	hs = raftpb.HardState{Term: 3, Vote: 2, Commit: 20}
	if err := s.Save(hs, ents, snap); err != nil {
		t.Fatal(err)
	}
	must(t, ms.ApplySnapshot(snap))
	must(t, ms.SetHardState(hs))
	must(t, ms.Append(ents))
	// Ready 3: entries only, overwriting a suffix.
	ents = randEntries(rng, 24, 4)
	if err := s.Save(raftpb.HardState{}, ents, raftpb.Snapshot{}); err != nil {
		t.Fatal(err)
	}
	must(t, ms.Append(ents))

	// Control: an unsynced write must be lost by the simulated crash.
	if err := s.db.Set([]byte{0xff}, []byte("unsynced"), pebble.NoSync); err != nil {
		t.Fatal(err)
	}

	fs.SetIgnoreSyncs(true)
	_ = s.Close()
	fs.ResetToSyncedState()
	fs.SetIgnoreSyncs(false)

	s, err = open("db", opts())
	if err != nil {
		t.Fatal(err)
	}
	defer closeT(t, s)
	checkSame(t, ms, s, true, nil)
	if _, closer, err := s.db.Get([]byte{0xff}); err == nil {
		closer.Close()
		t.Fatal("unsynced write survived the simulated crash; the crash simulation is not effective")
	}
}

// TestCrashAfterFirstSaveInNewDir: the first Save in a directory Open
// created (with its parents) survives a power loss. pebble does not sync
// the parent of the directory it creates, so without Open's own
// mkdirAllDurable the directory's name, and with it every vote and entry,
// would be lost on a file system that keeps only what was synced.
func TestCrashAfterFirstSaveInNewDir(t *testing.T) {
	fs := vfs.NewStrictMem()
	const dir = "/data/__cluster_metadata-0/raft"
	s, err := open(dir, &pebble.Options{FS: fs})
	must(t, err)
	hs := raftpb.HardState{Term: 4, Vote: 2, Commit: 1}
	ents := randEntries(rand.New(rand.NewSource(3)), 1, 3)
	must(t, s.Save(hs, ents, raftpb.Snapshot{}))

	fs.SetIgnoreSyncs(true)
	_ = s.Close()
	fs.ResetToSyncedState()
	fs.SetIgnoreSyncs(false)

	s, err = open(dir, &pebble.Options{FS: fs})
	must(t, err)
	defer closeT(t, s)
	got, _, err := s.InitialState()
	must(t, err)
	if got.Term != hs.Term || got.Vote != hs.Vote {
		t.Fatalf("after a power loss the hard state is %+v, want %+v: the synced Save was lost", got, hs)
	}
	if last, err := s.LastIndex(); err != nil || last != 3 {
		t.Fatalf("after a power loss LastIndex = %d, %v; want 3", last, err)
	}
}

func TestSaveIsAtomicOnError(t *testing.T) {
	s := openT(t, t.TempDir())
	defer closeT(t, s)
	ms := raft.NewMemoryStorage()
	snap := raftpb.Snapshot{Metadata: raftpb.SnapshotMetadata{Index: 5, Term: 1}}
	must(t, s.Save(raftpb.HardState{Term: 1, Commit: 5}, nil, snap))
	must(t, ms.ApplySnapshot(snap))
	must(t, ms.SetHardState(raftpb.HardState{Term: 1, Commit: 5}))
	// An out-of-date snapshot fails the whole Save: hard state and entries
	// of the same call must not be written.
	err := s.Save(raftpb.HardState{Term: 9, Commit: 6}, []raftpb.Entry{{Index: 6, Term: 9}}, snap)
	if !errors.Is(err, raft.ErrSnapOutOfDate) {
		t.Fatalf("Save with old snapshot: %v, want ErrSnapOutOfDate", err)
	}
	// So does a gap in the entries.
	err = s.Save(raftpb.HardState{Term: 9, Commit: 6}, []raftpb.Entry{{Index: 8, Term: 9}}, raftpb.Snapshot{})
	if err == nil {
		t.Fatal("Save with a gap succeeded")
	}
	checkSame(t, ms, s, true, nil)
}

func TestEntriesMaxSize(t *testing.T) {
	s := openT(t, t.TempDir())
	defer closeT(t, s)
	ms := raft.NewMemoryStorage()
	var ents []raftpb.Entry
	for i := uint64(1); i <= 8; i++ {
		ents = append(ents, raftpb.Entry{Index: i, Term: 1, Data: bytes.Repeat([]byte{'a'}, int(i)*10)})
	}
	must(t, ms.Append(ents))
	must(t, s.Append(ents))

	size := func(es []raftpb.Entry) (n uint64) {
		for _, e := range es {
			n += uint64(e.Size())
		}
		return n
	}
	// maxSize 0 and 1 still return one entry; exact prefix sizes are
	// inclusive; one byte less drops the last entry.
	for _, tc := range []struct {
		max  uint64
		want int
	}{
		{0, 1}, {1, 1},
		{size(ents[:2]) - 1, 1}, {size(ents[:2]), 2},
		{size(ents[:5]), 5}, {size(ents[:5]) + 1, 5},
		{size(ents), 8}, {1 << 30, 8},
	} {
		got, err := s.Entries(1, 9, tc.max)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != tc.want || !entriesEqual(got, ents[:tc.want]) {
			t.Errorf("Entries(1, 9, %d) returned %d entries, want %d", tc.max, len(got), tc.want)
		}
		checkEntries(t, ms, s, 1, 9, tc.max)
		checkEntries(t, ms, s, 3, 7, tc.max)
	}
	// The returned slice is the caller's: appending must not disturb storage.
	got, _ := s.Entries(1, 3, 1<<30)
	_ = append(got[:1], raftpb.Entry{Index: 99})
	checkEntries(t, ms, s, 1, 9, 1<<30)
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
