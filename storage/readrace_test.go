package storage

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/fjordlog/fjord/storage/recordbatch"
)

// hookFS is an FS whose .log files call hook (once, when set) at the start
// of the skip+1st ReadAt from then on: a read that has found its position
// through the index, and not read those bytes yet.
type hookFS struct {
	FS
	mu   sync.Mutex
	skip int
	hook func()
}

func (h *hookFS) OpenFile(name string, flag int, perm os.FileMode) (File, error) {
	f, err := h.FS.OpenFile(name, flag, perm)
	if err != nil || !strings.HasSuffix(name, ".log") {
		return f, err
	}
	return &hookFile{File: f, fs: h}, nil
}

type hookFile struct {
	File
	fs *hookFS
}

func (f *hookFile) ReadAt(p []byte, off int64) (int, error) {
	f.fs.mu.Lock()
	hook := f.fs.hook
	if hook != nil && f.fs.skip > 0 {
		f.fs.skip--
		hook = nil
	} else {
		f.fs.hook = nil
	}
	f.fs.mu.Unlock()
	if hook != nil {
		hook()
	}
	return f.File.ReadAt(p, off)
}

// TestReadRacingTruncation: a read locates its batch, then (before it
// reads the bytes) the log is truncated below it and other batches are
// appended in its place, as a follower does on finding a divergence. The
// bytes it then reads do not parse where the old index said a batch
// starts. That is the cut, not damage: the read looks again and returns
// the log as it now is, and never a CorruptLogError (which would send the
// replica into a damage repair).
func TestReadRacingTruncation(t *testing.T) {
	// skip 0: the cut lands before the read walks the headers from its
	// index entry; skip 1: after that, before it reads the batches.
	for _, skip := range []int{0, 1} {
		t.Run(fmt.Sprintf("skip%d", skip), func(t *testing.T) { readRacingTruncation(t, skip) })
	}
}

func readRacingTruncation(t *testing.T, skip int) {
	fs := &hookFS{FS: NewMemFS()}
	cfg := testConfig()
	cfg.FS = fs
	cfg.IndexIntervalBytes = 1 // every batch indexed
	l := openLog(t, "/race", cfg)
	for i := range 10 {
		appendAt(t, l, batchOpts{N: 3, ValueSize: 40, BaseTS: int64(i)}, 1)
	}
	// Offsets 0-29 in batches of 3. The leader's log from 12 on, in
	// batches of 5 with longer values: no batch boundary where the old
	// ones were.
	var newer []byte
	for base := int64(12); base < 32; base += 5 {
		newer = append(newer, storedBatch(t, batchOpts{N: 5, ValueSize: 97, BaseTS: base}, base, 2)...)
	}
	fs.mu.Lock()
	fs.skip = skip
	fs.hook = func() {
		if err := l.Truncate(12); err != nil {
			t.Errorf("truncate: %v", err)
		}
		if err := l.AssignEpoch(2, 12); err != nil {
			t.Errorf("epoch: %v", err)
		}
		if _, err := l.AppendReplica(newer); err != nil {
			t.Errorf("append: %v", err)
		}
	}
	fs.mu.Unlock()
	data, err := l.Read(18, 1<<20, l.EndOffset(), nil)
	fs.mu.Lock()
	fired := fs.hook == nil
	fs.mu.Unlock()
	if !fired {
		t.Fatal("the read did not meet the truncation")
	}
	if errors.Is(err, ErrCorruptLog) {
		t.Fatalf("a read racing a truncation reported damage: %v", err)
	}
	if err != nil {
		t.Fatalf("read: %v", err)
	}
	if len(data) == 0 || recordbatch.BaseOffset(data) != 17 || recordbatch.PartitionLeaderEpoch(data) != 2 {
		t.Fatalf("read from 18 after the truncation: %d bytes, first batch at %d epoch %d; want the new batch at 17, epoch 2", len(data), recordbatch.BaseOffset(data), recordbatch.PartitionLeaderEpoch(data))
	}
	for b := data; len(b) > 0; {
		info, err := recordbatch.ParseHeader(b)
		if err != nil || info.Bytes > len(b) {
			t.Fatalf("torn batch in the result: %v", err)
		}
		if err := recordbatch.CheckCRC(b[:info.Bytes]); err != nil {
			t.Fatalf("batch at %d: %v", recordbatch.BaseOffset(b), err)
		}
		b = b[info.Bytes:]
	}
}
