package storage

import (
	"os"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/fjordlog/fjord/storage/recordbatch"
)

// syncCountFS is a MemFS that counts the syncs (fsync and fdatasync) of
// segment files.
type syncCountFS struct {
	*MemFS
	n *atomic.Int32
}

type syncCountFile struct {
	File
	n *atomic.Int32
}

func (f syncCountFile) SyncData() error { f.n.Add(1); return f.File.SyncData() }
func (f syncCountFile) Sync() error     { f.n.Add(1); return f.File.Sync() }

func (fs syncCountFS) OpenFile(name string, flag int, perm os.FileMode) (File, error) {
	f, err := fs.MemFS.OpenFile(name, flag, perm)
	if err != nil || !isSegmentLog(name) {
		return f, err
	}
	return syncCountFile{f, fs.n}, nil
}

func isSegmentLog(name string) bool { return len(name) > 4 && name[len(name)-4:] == ".log" }

// startSyncData makes /logs, with the regular file SyncAtStart syncs
// through (the broker's meta.properties), durably.
func startSyncData(t *testing.T, fs FS) {
	t.Helper()
	if err := MkdirAllDurable(fs, "/logs"); err != nil {
		t.Fatal(err)
	}
	if err := WriteFileSyncFS(fs, "/logs/meta.properties", []byte("node.id=1\n")); err != nil {
		t.Fatal(err)
	}
}

// TestKillRestartSyncsOnce: after a kill -9 (the same MemFS, opened again:
// the page cache survives) the recovered log cuts its preallocated zero
// tail without a sync of its own, then syncs its active segment once,
// which makes its end and the cut durable: a power cut then keeps the end
// the restarted log counted as durable.
func TestKillRestartSyncsOnce(t *testing.T) {
	mem := NewMemFS()
	var n atomic.Int32
	fs := syncCountFS{mem, &n}
	startSyncData(t, fs)
	cfg := testConfig()
	cfg.FS = fs
	l := openLog(t, "/logs/topic-0", cfg)
	for i := range 5 {
		appendOpts(t, l, batchOpts{N: 3, ValueSize: 40, BaseTS: 1000 + int64(i)}, int64(i))
	}
	// No Flush, no Close: the process dies.
	if synced, err := SyncAtStart(fs, "/logs"); !synced || err != nil {
		t.Fatalf("SyncAtStart: %v, %v", synced, err)
	}
	before := n.Load()
	l2 := openLog(t, "/logs/topic-0", cfg)
	if got := n.Load() - before; got != 1 {
		t.Errorf("the unclean Open synced its segment %d times, want 1 (the zero tail's cut needs none)", got)
	}
	durable := l2.DurableOffset()
	if durable != 15 {
		t.Fatalf("after the kill: durable %d, want 15", durable)
	}
	cfg.FS = mem.CrashClone(nil)
	if end := openLog(t, "/logs/topic-0", cfg).EndOffset(); end != durable {
		t.Fatalf("a power cut after the restart: end %d, want the %d counted durable", end, durable)
	}
}

// TestStartSyncKeepsDirectoryName: two kills in a row. The first lands
// between a partition directory's creation and its parent's sync; the
// restart lays down the log's first segment and the second lands before
// Open syncs the parent. The next start finds a log begun, syncs its
// directory before the first change, and appends and flushes: the
// records are durable in a directory whose own name is not. A start-up
// sync makes the name durable; without one, a power cut takes the whole
// log, acknowledged records and all.
func TestStartSyncKeepsDirectoryName(t *testing.T) {
	for _, startSync := range []bool{true, false} {
		mem := NewMemFS()
		startSyncData(t, mem)
		// What the two dead processes left: the directory, unsynced in
		// /logs, and an empty first segment in it.
		if err := mem.MkdirAll("/logs/topic-0", DirMode); err != nil {
			t.Fatal(err)
		}
		f, err := mem.OpenFile(segmentPath("/logs/topic-0", 0, ".log"), os.O_RDWR|os.O_CREATE|os.O_EXCL, FileMode)
		if err != nil {
			t.Fatal(err)
		}
		f.Close()
		cfg := testConfig()
		cfg.FS = mem
		if startSync {
			if synced, err := SyncAtStart(mem, "/logs"); !synced || err != nil {
				t.Fatalf("SyncAtStart: %v, %v", synced, err)
			}
		}
		l := openLog(t, "/logs/topic-0", cfg)
		appendOpts(t, l, batchOpts{N: 4, ValueSize: 40, BaseTS: 1000}, 0)
		if err := l.Flush(); err != nil {
			t.Fatal(err)
		}
		cfg.FS = mem.CrashClone(nil)
		end := openLog(t, "/logs/topic-0", cfg).EndOffset()
		switch {
		case startSync && end != 4:
			t.Errorf("with the start-up sync, a power cut left the log at %d, want 4", end)
		case !startSync && end != 0:
			// The window this closes, as MemFS models it: if this fails,
			// Open has started syncing the parent, and the test no longer
			// shows what the start-up sync adds.
			t.Errorf("without the start-up sync the log survived at %d: the test no longer reaches the window", end)
		}
	}
}

// TestDamagedCutDurable: recovery cuts a damaged batch (not zeros); the
// log is closed cleanly with nothing written after; the power goes. The
// cut must have been durable: the clean-shutdown marker is, and a clean
// open walks headers without checking CRCs, so a damaged batch that came
// back would be served. Both ways to such a cut: an unclean open of the
// active segment, and a clean open whose index check finds damage in a
// sealed segment. The batches carry no timestamp (maxTimestamp -1), as a
// batch may, so the empty indexes the clean close writes agree with the
// damaged batch if it returns: only the cut's own sync keeps it out.
func TestDamagedCutDurable(t *testing.T) {
	// damage flips the last byte of the segment's first batch: recovery
	// cuts the whole segment, so its log ends empty there and Open has no
	// active segment left to sync, which would make the cut durable by
	// the way.
	damage := func(t *testing.T, mem *MemFS, path string) {
		t.Helper()
		f, err := mem.OpenFile(path, os.O_RDWR, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		hdr := make([]byte, recordbatch.HeaderLen)
		if _, err := f.ReadAt(hdr, 0); err != nil {
			t.Fatal(err)
		}
		info, err := recordbatch.ParseHeader(hdr)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.WriteAt([]byte{0xEE}, int64(info.Bytes)-1); err != nil {
			t.Fatal(err)
		}
		if err := f.Sync(); err != nil {
			t.Fatal(err)
		}
	}
	t.Run("active", func(t *testing.T) {
		mem := NewMemFS()
		fs := NewErrorFS(mem, Fault{Op: OpAlloc, Err: syscall.EOPNOTSUPP}) // no zero tail
		cfg := testConfig()
		cfg.FS = fs
		l := openLog(t, "/logs/t-0", cfg)
		noTS := int64(-1)
		appendOpts(t, l, batchOpts{N: 3, ValueSize: 40, BaseTS: 1000, MaxTS: &noTS}, 1000)
		if err := l.Flush(); err != nil {
			t.Fatal(err)
		}
		// The process dies; its one batch is damaged.
		damage(t, mem, segmentPath("/logs/t-0", 0, ".log"))
		cutStaysCut(t, mem, cfg)
	})
	t.Run("sealed", func(t *testing.T) {
		mem := NewMemFS()
		cfg := testConfig()
		cfg.FS = mem
		cfg.SegmentBytes = 600
		l := openLog(t, "/logs/t-0", cfg)
		noTS := int64(-1)
		for i := range 8 {
			appendOpts(t, l, batchOpts{N: 3, ValueSize: 40, BaseTS: 1000 + int64(i), MaxTS: &noTS}, 1000+int64(i))
		}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		if bases, _, err := listSegments(mem, "/logs/t-0"); err != nil || len(bases) < 2 {
			t.Fatal("one segment: nothing sealed to damage")
		}
		damage(t, mem, segmentPath("/logs/t-0", 0, ".log"))
		// An index that does not fit sends the clean open to check the
		// segment batch by batch.
		ix, err := mem.OpenFile(segmentPath("/logs/t-0", 0, ".index"), os.O_RDWR, 0)
		if err != nil {
			t.Fatal(err)
		}
		if err := ix.Truncate(3); err != nil {
			t.Fatal(err)
		}
		ix.Sync()
		ix.Close()
		cutStaysCut(t, mem, cfg)
	})
}

// cutStaysCut opens /logs/t-0, whose recovery must cut it to nothing,
// closes it cleanly and cuts the power: the log must still be empty.
func cutStaysCut(t *testing.T, mem *MemFS, cfg Config) {
	t.Helper()
	l := openLog(t, "/logs/t-0", cfg)
	if end := l.EndOffset(); end != 0 {
		t.Fatalf("recovery left the log at %d, want 0", end)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	cfg.FS = mem.CrashClone(nil)
	if end := openLog(t, "/logs/t-0", cfg).EndOffset(); end != 0 {
		t.Errorf("after a clean close and a power cut the log ends at %d: what recovery cut is back", end)
	}
}

// TestSyncAtStartNothingToCover: a data directory without logs needs no
// sync; a file system without syncfs says so.
func TestSyncAtStartNothingToCover(t *testing.T) {
	mem := NewMemFS()
	startSyncData(t, mem)
	if synced, err := SyncAtStart(mem, "/logs"); synced || err != nil {
		t.Errorf("no logs: %v, %v; want false, nil", synced, err)
	}
	if err := mem.MkdirAll("/logs/topic-0", DirMode); err != nil {
		t.Fatal(err)
	}
	if synced, err := SyncAtStart(NewErrorFS(mem), "/logs"); synced || err != ErrNoSyncFS {
		t.Errorf("a file system without syncfs: %v, %v; want false, ErrNoSyncFS", synced, err)
	}
}

// TestZeroCutNotSynced: a cut that starts at a zero header is not synced,
// and need not be. Here the zeros hide whole, valid batches behind them
// (zeroed damage at the segment's start): recovery cuts everything, the
// log closes cleanly with nothing written, and the power goes, bringing
// the zeros and the batches back under the clean-shutdown marker. Every
// open stops at the zeros again: nothing behind them is served.
func TestZeroCutNotSynced(t *testing.T) {
	mem := NewMemFS()
	var n atomic.Int32
	fs := syncCountFS{mem, &n}
	cfg := testConfig()
	cfg.FS = fs
	l := openLog(t, "/logs/t-0", cfg)
	noTS := int64(-1) // the empty indexes of the closed log agree with any batch
	for i := range 3 {
		appendOpts(t, l, batchOpts{N: 3, ValueSize: 40, BaseTS: 1000 + int64(i), MaxTS: &noTS}, 1000)
	}
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	// The process dies; the first batch's header is zeroed.
	f, err := mem.OpenFile(segmentPath("/logs/t-0", 0, ".log"), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(make([]byte, recordbatch.HeaderLen), 0); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	f.Close()
	before := n.Load()
	l2 := openLog(t, "/logs/t-0", cfg)
	if got := n.Load() - before; got != 0 {
		t.Errorf("the open synced the segment %d times: the zero cut was synced", got)
	}
	if end := l2.EndOffset(); end != 0 {
		t.Fatalf("recovery left the log at %d, want 0", end)
	}
	if err := l2.Close(); err != nil {
		t.Fatal(err)
	}
	cfg.FS = mem.CrashClone(nil)
	if _, err := cfg.FS.Stat(segmentPath("/logs/t-0", 0, ".log")); err != nil {
		t.Fatal(err)
	}
	if fi, _ := cfg.FS.Stat(segmentPath("/logs/t-0", 0, ".log")); fi.Size() == 0 {
		t.Fatal("the cut became durable: the test shows nothing")
	}
	if end := openLog(t, "/logs/t-0", cfg).EndOffset(); end != 0 {
		t.Errorf("after a clean close and a power cut the log ends at %d: batches behind the zeros came back", end)
	}
}
