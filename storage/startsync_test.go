package storage

import (
	"os"
	"sync/atomic"
	"testing"

	"github.com/rs/zerolog"
)

// dataSyncCountFS is a MemFS that counts the syncs (fsync and fdatasync)
// of segment files.
type dataSyncCountFS struct {
	*MemFS
	n *atomic.Int32
}

type dataSyncCountFile struct {
	File
	n *atomic.Int32
}

func (f dataSyncCountFile) SyncData() error { f.n.Add(1); return f.File.SyncData() }
func (f dataSyncCountFile) Sync() error     { f.n.Add(1); return f.File.Sync() }

func (fs dataSyncCountFS) OpenFile(name string, flag int, perm os.FileMode) (File, error) {
	f, err := fs.MemFS.OpenFile(name, flag, perm)
	if err != nil || !isSegmentLog(name) {
		return f, err
	}
	return dataSyncCountFile{f, fs.n}, nil
}

func isSegmentLog(name string) bool { return len(name) > 4 && name[len(name)-4:] == ".log" }

// startSyncData writes the regular file SyncAtStart syncs through, as the
// broker's meta.properties is, and makes it durable.
func startSyncData(t *testing.T, fs FS) {
	t.Helper()
	if err := MkdirAllDurable(fs, "/logs"); err != nil {
		t.Fatal(err)
	}
	if err := WriteFileSyncFS(fs, "/logs/meta.properties", []byte("node.id=1\n")); err != nil {
		t.Fatal(err)
	}
}

// TestStartSyncAfterKill: a kill -9 (the same MemFS, opened again: the
// page cache survives), then a start-up sync, then a power cut. The
// restarted log's end is durable without an fdatasync of its own: the one
// syncfs covers it.
func TestStartSyncAfterKill(t *testing.T) {
	mem := NewMemFS()
	var n atomic.Int32
	fs := dataSyncCountFS{mem, &n}
	startSyncData(t, fs)
	cfg := testConfig()
	cfg.FS = fs
	l := openLog(t, "/logs/topic-0", cfg)
	for i := range 5 {
		appendOpts(t, l, batchOpts{N: 3, ValueSize: 40, BaseTS: 1000 + int64(i)}, int64(i))
	}
	// No Flush, no Close: the process dies.
	ss, err := SyncAtStart(fs, "/logs")
	if err != nil || ss == nil {
		t.Fatalf("SyncAtStart: %v, %v", ss, err)
	}
	cfg.StartSync = ss
	before := n.Load()
	l2 := openLog(t, "/logs/topic-0", cfg)
	if got := n.Load() - before; got != 0 {
		t.Errorf("the covered unclean Open synced its segment %d times, want 0", got)
	}
	durable := l2.DurableOffset()
	if durable != 15 {
		t.Fatalf("after the kill: durable %d, want 15", durable)
	}
	cfg.FS = mem.CrashClone(nil)
	cfg.StartSync = nil
	if end := openLog(t, "/logs/topic-0", cfg).EndOffset(); end < durable {
		t.Fatalf("a power cut after the restart lost [%d, %d), counted durable", end, durable)
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
			ss, err := SyncAtStart(mem, "/logs")
			if err != nil || ss == nil {
				t.Fatalf("SyncAtStart: %v, %v", ss, err)
			}
			cfg.StartSync = ss
		}
		l := openLog(t, "/logs/topic-0", cfg)
		appendOpts(t, l, batchOpts{N: 4, ValueSize: 40, BaseTS: 1000}, 0)
		if err := l.Flush(); err != nil {
			t.Fatal(err)
		}
		cfg.FS, cfg.StartSync = mem.CrashClone(nil), nil
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

// TestStartSyncCoversOnce: a log opened a second time in the same process
// may hold writes of this process that nothing synced, so its unclean
// Open syncs its segment itself; so does a log created after the sync.
func TestStartSyncCoversOnce(t *testing.T) {
	mem := NewMemFS()
	var n atomic.Int32
	fs := dataSyncCountFS{mem, &n}
	startSyncData(t, fs)
	cfg := testConfig()
	cfg.FS = fs
	if _, err := Open("/logs/topic-0", cfg, zerolog.Nop()); err != nil { // there before the sync
		t.Fatal(err)
	}
	ss, err := SyncAtStart(fs, "/logs")
	if err != nil || ss == nil {
		t.Fatalf("SyncAtStart: %v, %v", ss, err)
	}
	cfg.StartSync = ss
	for _, dir := range []string{"/logs/topic-0", "/logs/topic-1"} {
		l, err := Open(dir, cfg, zerolog.Nop()) // the first Open in this process
		if err != nil {
			t.Fatal(err)
		}
		appendOpts(t, l, batchOpts{N: 2, ValueSize: 40, BaseTS: 1000}, 0)
		// The process lives on: it drops the log without closing it (a
		// close that failed), and opens it again.
		before := n.Load()
		l2 := openLog(t, dir, cfg)
		if n.Load() == before {
			t.Errorf("%s: the second unclean Open in this process synced nothing", dir)
		}
		cfg2 := cfg
		cfg2.FS, cfg2.StartSync = mem.CrashClone(nil), nil
		if end := openLog(t, dir, cfg2).EndOffset(); end < l2.DurableOffset() {
			t.Errorf("%s: a power cut lost [%d, %d)", dir, end, l2.DurableOffset())
		}
	}
}

// TestSyncAtStartNothingToCover: a data directory without logs needs no
// sync, and one that cannot be synced leaves every log to sync its own.
func TestSyncAtStartNothingToCover(t *testing.T) {
	mem := NewMemFS()
	startSyncData(t, mem)
	if ss, err := SyncAtStart(mem, "/logs"); ss != nil || err != nil {
		t.Errorf("no logs: %v, %v; want nil, nil", ss, err)
	}
	if err := mem.MkdirAll("/logs/topic-0", DirMode); err != nil {
		t.Fatal(err)
	}
	noSyncFS := NewErrorFS(mem) // forwards no SyncFileSystem
	if ss, err := SyncAtStart(noSyncFS, "/logs"); ss != nil || err == nil {
		t.Errorf("a file system without syncfs: %v, %v; want nil and an error", ss, err)
	}
}
