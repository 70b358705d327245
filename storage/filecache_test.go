package storage

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fjordlog/fjord/storage/recordbatch"
)

// cacheFiles writes n files of distinct contents under a temp dir and
// returns handles to them in c, and their contents.
func cacheFiles(t *testing.T, c *FileCache, n int) ([]*cachedFile, [][]byte) {
	t.Helper()
	dir := t.TempDir()
	var hs []*cachedFile
	var data [][]byte
	for i := range n {
		p := filepath.Join(dir, fmt.Sprintf("%03d.log", i))
		b := bytes.Repeat([]byte{byte('a' + i%26)}, 100+i)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		hs = append(hs, c.handle(OSFS, p))
		data = append(data, b)
	}
	return hs, data
}

func readVia(t testing.TB, h *cachedFile, n int) []byte {
	t.Helper()
	f, err := h.acquire()
	if err != nil {
		t.Fatalf("acquire %s: %v", h.path, err)
	}
	defer h.release()
	b := make([]byte, n)
	if _, err := f.ReadAt(b, 0); err != nil {
		t.Fatalf("read %s: %v", h.path, err)
	}
	return b
}

func TestFileCacheCapacity(t *testing.T) {
	c := NewFileCache(4)
	hs, data := cacheFiles(t, c, 10)
	for round := range 3 {
		for i, h := range hs {
			if got := readVia(t, h, len(data[i])); !bytes.Equal(got, data[i]) {
				t.Fatalf("round %d file %d: read %q, want %q", round, i, got[:8], data[i][:8])
			}
			if st := c.Stats(); st.Open > 4 {
				t.Fatalf("round %d file %d: %d files open, capacity 4", round, i, st.Open)
			}
		}
	}
	st := c.Stats()
	// Cycling through 10 files with room for 4 reopens each every round.
	if st.Opens != 30 || st.Evictions != 26 || st.Open != 4 {
		t.Fatalf("stats %+v, want 30 opens, 26 evictions, 4 open", st)
	}
	for _, h := range hs {
		h.drop()
	}
	if st := c.Stats(); st.Open != 0 {
		t.Fatalf("%d files open after every handle was dropped", st.Open)
	}
}

// A pinned file is never closed for the capacity: the cache goes over it
// while the pins last and comes back under it when they end.
func TestFileCachePinnedNotClosed(t *testing.T) {
	c := NewFileCache(2)
	hs, data := cacheFiles(t, c, 5)
	files := make([]File, len(hs))
	for i, h := range hs {
		f, err := h.acquire()
		if err != nil {
			t.Fatal(err)
		}
		files[i] = f
	}
	if st := c.Stats(); st.Open != 5 || st.Evictions != 0 {
		t.Fatalf("stats with 5 pins: %+v, want 5 open and no eviction", st)
	}
	for i, f := range files {
		b := make([]byte, len(data[i]))
		if _, err := f.ReadAt(b, 0); err != nil || !bytes.Equal(b, data[i]) {
			t.Fatalf("pinned file %d unreadable: %v", i, err)
		}
	}
	for _, h := range hs {
		h.release()
	}
	if st := c.Stats(); st.Open != 2 {
		t.Fatalf("%d open after the pins ended, capacity 2", st.Open)
	}
	// The two most recently released stayed open: reading them opens
	// nothing.
	before := c.Stats().Opens
	readVia(t, hs[3], 1)
	readVia(t, hs[4], 1)
	if got := c.Stats().Opens; got != before {
		t.Fatalf("reading the two most recently used files opened %d files", got-before)
	}
}

// A segment removed while cached: readers holding it (or reaching it
// during the grace period) read the file as it was, nothing reopens its
// name, and its descriptor goes at the drop.
func TestFileCacheRetiredFile(t *testing.T) {
	c := NewFileCache(8)
	hs, data := cacheFiles(t, c, 2)
	h := hs[0]
	f, err := h.acquire() // a reader in the middle of a read
	if err != nil {
		t.Fatal(err)
	}
	s := &segment{h: h}
	s.keepOpen()
	// The name now names another file (compaction renames over it).
	if err := os.WriteFile(h.path+".new", []byte("other file"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(h.path+".new", h.path); err != nil {
		t.Fatal(err)
	}
	b := make([]byte, len(data[0]))
	if _, err := f.ReadAt(b, 0); err != nil || !bytes.Equal(b, data[0]) {
		t.Fatalf("pinned reader of a retired file: %v", err)
	}
	h.release()
	// A later reader during the grace period gets the old file too.
	if got := readVia(t, h, len(data[0])); !bytes.Equal(got, data[0]) {
		t.Fatalf("reader during the grace period got %q", got)
	}
	// Retired files are not evicted for the capacity either.
	for range 20 {
		readVia(t, hs[1], 1)
	}
	if st := c.Stats(); st.Open != 2 {
		t.Fatalf("%d open, want the retired file and the other", st.Open)
	}
	h.drop()
	if st := c.Stats(); st.Open != 1 {
		t.Fatalf("%d open after the drop, want 1", st.Open)
	}
	if _, err := h.acquire(); !errors.Is(err, errFileRetired) {
		t.Fatalf("acquire after the drop: %v, want errFileRetired", err)
	}
	// A drop while pinned closes at the last release.
	f, err = hs[1].acquire()
	if err != nil {
		t.Fatal(err)
	}
	hs[1].drop()
	if _, err := f.ReadAt(make([]byte, 1), 0); err != nil {
		t.Fatalf("pinned file closed by a drop: %v", err)
	}
	hs[1].release()
	if st := c.Stats(); st.Open != 0 {
		t.Fatalf("%d open after every handle was dropped and released", st.Open)
	}
}

// Many readers at once over more files than the capacity: every read
// sees its file's bytes, and once they are done the cache is within its
// capacity. Run with -race.
func TestFileCacheConcurrentReaders(t *testing.T) {
	c := NewFileCache(3)
	hs, data := cacheFiles(t, c, 12)
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewSource(int64(g)))
			for range 500 {
				i := rng.Intn(len(hs))
				f, err := hs[i].acquire()
				if err != nil {
					errs <- err
					return
				}
				b := make([]byte, len(data[i]))
				_, err = f.ReadAt(b, 0)
				hs[i].release()
				if err != nil || !bytes.Equal(b, data[i]) {
					errs <- fmt.Errorf("file %d: %v, equal %v", i, err, bytes.Equal(b, data[i]))
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if st := c.Stats(); st.Open > 3 || st.Evictions == 0 {
		t.Fatalf("stats after the readers: %+v, want at most 3 open and evictions", st)
	}
}

// Logs sharing one small cache: sealed segments give their descriptors
// back, every batch reads back right through reopened files, and after a
// clean close and reopen the logs serve the same bytes.
func TestLogsShareFileCache(t *testing.T) {
	const logs, capacity = 4, 6
	c := NewFileCache(capacity)
	cfg := DefaultConfig()
	cfg.SegmentBytes = 2048
	cfg.Files = c
	root := t.TempDir()
	var ls []*Log
	var want [][]appended
	for i := range logs {
		l := openLog(t, filepath.Join(root, fmt.Sprint(i)), cfg)
		ls = append(ls, l)
		want = append(want, fill(t, l, 40, 400))
	}
	for i, l := range ls {
		if n := l.SegmentCount(); n < 5 {
			t.Fatalf("log %d has %d segments; the test needs sealed ones", i, n)
		}
	}
	check := func(what string, ls []*Log) {
		t.Helper()
		for round := range 2 {
			for i, l := range ls {
				got := readAll(t, l, 0)
				if len(got) != len(want[i]) {
					t.Fatalf("%s, round %d: log %d read %d batches, want %d", what, round, i, len(got), len(want[i]))
				}
				for k, b := range want[i] {
					sameBatch(t, got[k], b.orig, b.base, 7)
				}
				// The active segments are pinned (one each); the rest
				// of the capacity serves the sealed ones.
				if st := c.Stats(); st.Open > capacity {
					t.Fatalf("%s: %d files open, capacity %d", what, st.Open, capacity)
				}
			}
		}
	}
	check("live", ls)
	if c.Stats().Evictions == 0 {
		t.Fatalf("no eviction: the test does not exercise reopening")
	}
	for _, l := range ls {
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if st := c.Stats(); st.Open != 0 {
		t.Fatalf("%d files open after every log closed", st.Open)
	}
	var again []*Log
	for i := range logs {
		again = append(again, openLog(t, filepath.Join(root, fmt.Sprint(i)), cfg))
	}
	// Open read every sealed segment once; they stay open only as far as
	// the capacity goes.
	if st := c.Stats(); st.Open > capacity {
		t.Fatalf("%d files open after reopening %d logs, capacity %d", st.Open, logs, capacity)
	}
	check("reopened", again)
}

// A log on a cache of two files, read at random offsets by several
// readers while it takes appends, rolls, and deletes its oldest segments
// (retention by size), and truncations cut it back above what readers
// read (a high watermark, as in the broker): every read either returns
// whole batches starting with the one holding the offset, or says the
// offset is gone (below the start); no other error, no wrong bytes, no
// descriptor left open. Run with -race.
func TestFileCacheUnderRetentionAndReads(t *testing.T) {
	c := NewFileCache(2)
	cfg := DefaultConfig()
	cfg.SegmentBytes = 1024
	cfg.RetentionBytes = 6 * 1024
	cfg.FileDeleteDelay = 20 * time.Millisecond // retired files close while readers still run
	cfg.Files = c
	l := openLog(t, t.TempDir(), cfg)
	fill(t, l, 20, 1000)
	var hw atomic.Int64 // readers stay below it; truncations above it
	hw.Store(l.EndOffset())

	stop := make(chan struct{})
	errs := make(chan error, 8)
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewSource(int64(g)))
			for {
				select {
				case <-stop:
					return
				default:
				}
				start, end := l.StartOffset(), hw.Load()
				if end <= start {
					continue
				}
				off := start + rng.Int63n(end-start)
				b, err := l.Read(off, 512, end, nil)
				if errors.Is(err, ErrOffsetOutOfRange) {
					continue // deleted or truncated meanwhile
				}
				if err != nil {
					errs <- fmt.Errorf("read %d in [%d, %d): %w", off, start, end, err)
					return
				}
				if len(b) == 0 {
					continue // truncated below off meanwhile, or a gap
				}
				if recordbatch.BaseOffset(b) > off || recordbatch.LastOffset(b) < off {
					errs <- fmt.Errorf("read %d returned batch [%d, %d]", off, recordbatch.BaseOffset(b), recordbatch.LastOffset(b))
					return
				}
				if err := recordbatch.CheckCRC(b[:recordbatch.Length(b)]); err != nil {
					errs <- fmt.Errorf("read %d: %w", off, err)
					return
				}
			}
		}()
	}
	for round := range 30 {
		fill(t, l, 5, 2000+int64(round)*100)
		if _, err := l.DeleteOldSegments(time.Now().UnixMilli()); err != nil {
			t.Fatalf("retention: %v", err)
		}
		if round%10 == 9 {
			if err := l.Truncate(l.EndOffset() - 3); err != nil {
				t.Fatalf("truncate: %v", err)
			}
		}
		if err := l.Flush(); err != nil {
			t.Fatal(err)
		}
		hw.Store(l.EndOffset() - 5)
	}
	close(stop)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if l.StartOffset() == 0 {
		t.Fatalf("retention deleted nothing: the test does not exercise removal")
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond) // the grace period of the last removals
	if st := c.Stats(); st.Open != 0 {
		t.Fatalf("%d files open after the log closed and the grace periods ended", st.Open)
	}
}
