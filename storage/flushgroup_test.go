package storage

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/rs/zerolog"
)

func TestKernelAtLeast(t *testing.T) {
	for _, c := range []struct {
		release string
		want    bool
	}{
		{"6.18.44-fc-v857", true}, {"5.8.0", true}, {"5.10.0-23-amd64", true}, {"5.7.19", false},
		{"4.19.0", false}, {"5.8", true}, {"5.8-rc1", true}, {"6", false}, {"", false}, {"x.y", false},
	} {
		if got := kernelAtLeast(c.release, 5, 8); got != c.want {
			t.Errorf("kernelAtLeast(%q) = %v", c.release, got)
		}
	}
}

// countingFS is the OS file system counting fdatasyncs and syncfs calls.
type countingFS struct {
	osFS
	syncData, syncFS atomic.Int32
}

type countingFile struct {
	osFile
	fs *countingFS
}

func (c *countingFS) OpenFile(name string, flag int, perm os.FileMode) (File, error) {
	f, err := os.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return countingFile{osFile{f}, c}, nil
}

func (f countingFile) SyncData() error { f.fs.syncData.Add(1); return f.osFile.SyncData() }

func (c *countingFS) SyncFileSystem(f File) error {
	c.syncFS.Add(1)
	return c.osFS.SyncFileSystem(f)
}

// FlushGroup makes every log durable with one syncfs (where the kernel
// reports write-back errors through it) instead of an fdatasync per log,
// and tells each log's error apart.
func TestFlushGroup(t *testing.T) {
	fs := &countingFS{}
	cfg := testConfig()
	cfg.FS = fs
	dir := t.TempDir()
	var logs []*Log
	for i := range 20 {
		l := openLog(t, filepath.Join(dir, "p"+strconv.Itoa(i)), cfg)
		appendOpts(t, l, batchOpts{N: 3}, 1)
		logs = append(logs, l)
	}
	clean := openLog(t, filepath.Join(dir, "clean"), cfg) // nothing to flush
	fs.syncData.Store(0)
	errs := FlushGroup(append(append(logs, clean), logs[0])) // logs[0] named twice
	for i, err := range errs {
		if err != nil {
			t.Fatalf("log %d: %v", i, err)
		}
	}
	for i, l := range logs {
		if l.DurableOffset() != l.EndOffset() || l.EndOffset() != 3 {
			t.Fatalf("log %d: durable %d end %d", i, l.DurableOffset(), l.EndOffset())
		}
	}
	if syncfsReportsErrors() {
		if fs.syncFS.Load() != 1 || fs.syncData.Load() != 0 {
			t.Fatalf("%d syncfs and %d fdatasyncs for 20 logs on one file system", fs.syncFS.Load(), fs.syncData.Load())
		}
	} else if fs.syncData.Load() != 20 {
		t.Fatalf("without syncfs: %d fdatasyncs for 20 logs", fs.syncData.Load())
	}
	// Nothing new: nothing synced.
	fs.syncFS.Store(0)
	fs.syncData.Store(0)
	FlushGroup(logs)
	if fs.syncFS.Load()+fs.syncData.Load() != 0 {
		t.Fatal("a group with nothing to flush synced")
	}
	// A failed log keeps its error, the others flush.
	appendOpts(t, logs[1], batchOpts{N: 1}, 2)
	appendOpts(t, logs[2], batchOpts{N: 1}, 2)
	logs[1].mu.Lock()
	logs[1].mu.failed = errors.New("boom")
	logs[1].mu.Unlock()
	errs = FlushGroup(logs[1:3])
	if errs[0] == nil || errs[1] != nil || logs[2].DurableOffset() != 4 || logs[1].DurableOffset() != 3 {
		t.Fatalf("errs %v, durable %d %d", errs, logs[1].DurableOffset(), logs[2].DurableOffset())
	}
}

// On a file system without syncfs (MemFS) each log syncs its own segments,
// and a crash keeps what FlushGroup made durable.
func TestFlushGroupFallback(t *testing.T) {
	fs := NewMemFS()
	cfg := testConfig()
	cfg.FS = fs
	var logs []*Log
	for i := range 5 {
		l, err := Open("/d/p"+strconv.Itoa(i), cfg, zerolog.Nop())
		if err != nil {
			t.Fatal(err)
		}
		appendOpts(t, l, batchOpts{N: 2}, 1)
		logs = append(logs, l)
	}
	for i, err := range FlushGroup(logs) {
		if err != nil {
			t.Fatalf("log %d: %v", i, err)
		}
	}
	img := fs.CrashClone(nil)
	cfg.FS = img
	for i := range 5 {
		l, err := Open("/d/p"+strconv.Itoa(i), cfg, zerolog.Nop())
		if err != nil {
			t.Fatal(err)
		}
		if l.EndOffset() != 2 {
			t.Fatalf("log %d after a crash: end %d", i, l.EndOffset())
		}
		l.Close()
	}
}
