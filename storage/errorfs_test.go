package storage

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/rs/zerolog"
)

// TestErrorFSRules: a fault fails the calls it matches, by operation and
// path, after After of them and for Times of them, with its error (EIO by
// default); other calls pass.
func TestErrorFSRules(t *testing.T) {
	mem := NewMemFS()
	if err := mem.MkdirAll("/d", DirMode); err != nil {
		t.Fatal(err)
	}
	e := NewErrorFS(mem, Fault{Op: OpSync, Path: "a.log", After: 1, Times: 2}, Fault{Op: OpWrite, Path: "b", Err: syscall.ENOSPC})
	a, err := e.OpenFile("/d/a.log", os.O_CREATE|os.O_RDWR, FileMode)
	if err != nil {
		t.Fatal(err)
	}
	var got []bool
	for range 4 {
		got = append(got, a.SyncData() == nil)
	}
	if want := []bool{true, false, false, true}; !slicesEqual(got, want) {
		t.Errorf("syncs of a.log passed %v, want %v", got, want)
	}
	if err := a.Sync(); err != nil {
		t.Errorf("a fifth sync: %v", err)
	}
	b, err := e.OpenFile("/d/b", os.O_CREATE|os.O_RDWR, FileMode)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.WriteAt([]byte("x"), 0); !errors.Is(err, syscall.ENOSPC) {
		t.Errorf("write to b: %v, want ENOSPC", err)
	}
	if err := b.SyncData(); err != nil {
		t.Errorf("sync of b: %v", err)
	}
	if _, err := a.WriteAt([]byte("x"), 0); err != nil {
		t.Errorf("write to a.log: %v", err)
	}
	if n := e.Failed(); n != 3 {
		t.Errorf("failed %d calls, want 3", n)
	}
}

func slicesEqual(a, b []bool) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestSyncFailureStopsTheLog: an fdatasync that fails is reported by
// Flush, and the log takes no more appends (fsyncgate: the page cache can
// no longer be trusted); after a power loss right then, every batch
// acknowledged before the failure comes back whole.
func TestSyncFailureStopsTheLog(t *testing.T) {
	for seed := range uint64(4) {
		mem := NewMemFS()
		e := NewErrorFS(mem)
		cfg := testConfig()
		cfg.FS = e
		const dir = "/logs/t-0"
		l, err := Open(dir, cfg, zerolog.Nop())
		if err != nil {
			t.Fatal(err)
		}
		for i := range 3 {
			if _, err := appendRaw(l, buildBatch(t, batchOpts{N: 1 + i}), 1); err != nil {
				t.Fatal(err)
			}
		}
		if err := l.Flush(); err != nil {
			t.Fatal(err)
		}
		var acked [][]byte // as stored, acknowledged
		for _, b := range readAll(t, l, 0) {
			acked = append(acked, bytes.Clone(b))
		}
		e.Add(Fault{Op: OpSync, Path: ".log"})
		if _, err := appendRaw(l, buildBatch(t, batchOpts{N: 2}), 1); err != nil {
			t.Fatal(err)
		}
		if err := l.Flush(); !errors.Is(err, syscall.EIO) {
			t.Fatalf("Flush with a failing fdatasync: %v, want EIO", err)
		}
		if _, err := appendRaw(l, buildBatch(t, batchOpts{N: 1}), 1); err == nil {
			t.Fatal("the log took an append after a failed fdatasync")
		}
		img := mem.CrashClone(rand.New(rand.NewPCG(seed, 7)))
		l.Close()
		cfg.FS = img
		re, err := Open(dir, cfg, zerolog.Nop())
		if err != nil {
			t.Fatalf("image %d: reopen: %v", seed, err)
		}
		got := readAll(t, re, 0)
		if len(got) < len(acked) {
			t.Fatalf("image %d: %d batches after the crash, %d were acknowledged", seed, len(got), len(acked))
		}
		for i, b := range acked {
			if !bytes.Equal(got[i], b) {
				t.Fatalf("image %d: acknowledged batch %d came back changed", seed, i)
			}
		}
		re.Close()
	}
}

// TestPartitionMetadataFaults: each step of replacing partition.metadata
// that fails is reported, and neither the live directory nor a power loss
// right after it shows anything but the old topic id or the new one.
func TestPartitionMetadataFaults(t *testing.T) {
	const dir = "/logs/topic-0"
	const oldID, newID = "AAAAAAAAAAAAAAAAAAAAAA", "BBBBBBBBBBBBBBBBBBBBBB"
	for _, f := range []Fault{
		{Op: OpOpen, Path: PartitionMetadataFile},
		{Op: OpWrite, Path: PartitionMetadataFile},
		{Op: OpSync, Path: PartitionMetadataFile},
		{Op: OpRename, Path: PartitionMetadataFile},
		{Op: OpSyncDir, Path: dir},
	} {
		for seed := range uint64(4) {
			mem := NewMemFS()
			if err := WritePartitionMetadata(mem, dir, oldID); err != nil {
				t.Fatal(err)
			}
			e := NewErrorFS(mem, f)
			if err := WritePartitionMetadata(e, dir, newID); !errors.Is(err, syscall.EIO) {
				t.Fatalf("%s failing: WritePartitionMetadata = %v, want EIO", f.Op, err)
			}
			for what, fs := range map[string]FS{"live": mem, "crash image": mem.CrashClone(rand.New(rand.NewPCG(seed, 3)))} {
				id, err := ReadPartitionMetadata(fs, dir)
				if err != nil || (id != oldID && id != newID) {
					t.Fatalf("%s failing, %s: partition.metadata reads %q, %v", f.Op, what, id, err)
				}
			}
		}
	}
}

// TestErrorFSStall: a fault with a Delay stalls the syncs it fires on,
// for its After and Times, then lets them run (no error, nothing failed);
// other paths and operations pass; Clear removes it. A log whose fsync is
// stalled shows it in SyncStalledFor until the sync returns, and nothing
// it wrote is lost.
func TestErrorFSStall(t *testing.T) {
	const delay = 150 * time.Millisecond
	mem := NewMemFS()
	if err := mem.MkdirAll("/d", DirMode); err != nil {
		t.Fatal(err)
	}
	e := NewErrorFS(mem, Fault{Op: OpSync, Path: "a.log", After: 1, Times: 1, Delay: delay})
	a, err := e.OpenFile("/d/a.log", os.O_CREATE|os.O_RDWR, FileMode)
	if err != nil {
		t.Fatal(err)
	}
	var stalled []bool
	for range 3 {
		start := time.Now()
		if err := a.SyncData(); err != nil {
			t.Fatalf("a stalled sync failed: %v", err)
		}
		stalled = append(stalled, time.Since(start) >= delay)
	}
	// Only the lower bound is certain: a sync that was not stalled may
	// still be slow on a busy machine, so only the stalled one is checked.
	if !stalled[1] {
		t.Errorf("the second sync of a.log returned before the %v stall", delay)
	}
	if n := e.Failed(); n != 0 {
		t.Errorf("a stall counted %d failed calls, want 0", n)
	}

	// A log on a stalling disk: SyncStalledFor grows while its flush hangs.
	e.Clear()
	cfg := testConfig()
	cfg.FS = e
	l, err := Open("/logs/s-0", cfg, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if _, err := appendRaw(l, buildBatch(t, batchOpts{N: 2}), 1); err != nil {
		t.Fatal(err)
	}
	release := make(chan struct{})
	e.Add(Fault{Op: OpSync, Path: "s-0/", Times: 1, Delay: 400 * time.Millisecond})
	done := make(chan error, 1)
	go func() { done <- l.Flush(); close(release) }()
	seen := false
	for !seen {
		select {
		case <-release:
			t.Fatal("the stalled flush returned before SyncStalledFor showed it")
		default:
		}
		seen = l.SyncStalledFor(time.Now().UnixMilli()) > 0
		time.Sleep(5 * time.Millisecond)
	}
	if err := <-done; err != nil {
		t.Fatalf("stalled flush: %v", err)
	}
	if d := l.SyncStalledFor(time.Now().UnixMilli()); d != 0 {
		t.Errorf("SyncStalledFor after the flush returned = %v, want 0", d)
	}
	if got, want := l.DurableOffset(), l.EndOffset(); got != want {
		t.Errorf("durable %d after the stalled flush, want the end %d", got, want)
	}
	if l.Failed() != nil {
		t.Errorf("a stall failed the log: %v", l.Failed())
	}
}

// TestLogFail: a log told to fail (the broker's answer to EIO on a write
// it undid) takes no more appends and says why; closed and opened again,
// it takes them, with what it held kept.
func TestLogFail(t *testing.T) {
	cfg := testConfig()
	cfg.FS = NewMemFS()
	const dir = "/logs/f-0"
	l, err := Open(dir, cfg, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := appendRaw(l, buildBatch(t, batchOpts{N: 2}), 1); err != nil {
		t.Fatal(err)
	}
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	l.Fail(syscall.EIO)
	l.Fail(syscall.ENOSPC) // the first reason stays
	if err := l.Failed(); !errors.Is(err, syscall.EIO) {
		t.Fatalf("Failed = %v, want EIO", err)
	}
	if _, err := appendRaw(l, buildBatch(t, batchOpts{N: 1}), 1); !errors.Is(err, syscall.EIO) {
		t.Fatalf("append to a failed log: %v, want EIO", err)
	}
	l.Close()
	re, err := Open(dir, cfg, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	defer re.Close()
	if re.Failed() != nil || re.EndOffset() != 2 {
		t.Fatalf("reopened: failed %v, end %d; want nil, 2", re.Failed(), re.EndOffset())
	}
	if _, err := appendRaw(re, buildBatch(t, batchOpts{N: 1}), 1); err != nil {
		t.Fatalf("append after reopening: %v", err)
	}
}
