package storage

import (
	"bytes"
	"encoding/binary"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/fjordlog/fjord/storage/recordbatch"
)

// indexedLog writes n single-record batches of 512-byte values, a
// millisecond apart from ts0, to a log of small segments (many sealed
// ones, each with many index entries) whose sealed indexes go through c.
func indexedLog(t *testing.T, dir string, c *IndexCache, n int) (*Log, Config) {
	t.Helper()
	cfg := testConfig()
	cfg.SegmentBytes = 64 << 10
	cfg.IndexIntervalBytes = 1024
	cfg.Indexes = c
	l := openLog(t, dir, cfg)
	for i := range n {
		appendOpts(t, l, batchOpts{N: 1, ValueSize: 512, BaseTS: ts0 + int64(i)}, int64(i))
	}
	if l.SegmentCount() < 5 {
		t.Fatalf("%d segments, want several sealed ones", l.SegmentCount())
	}
	return l, cfg
}

const ts0 = 1_700_000_000_000

// checkLookups reads every offset on its own and looks up timestamps
// across the log: each must find its own record, whatever the cache holds.
func checkLookups(t *testing.T, l *Log, n int) {
	t.Helper()
	for off := int64(0); off < int64(n); off += 7 {
		data, err := l.Read(off, 1, l.EndOffset(), nil)
		if err != nil {
			t.Fatalf("Read(%d): %v", off, err)
		}
		bs := splitBatches(t, data)
		if len(bs) == 0 || recordbatch.BaseOffset(bs[0]) != off {
			t.Fatalf("Read(%d) began at another batch", off)
		}
	}
	for i := int64(0); i < int64(n); i += 13 {
		off, ts, ok, err := l.OffsetForTimestamp(ts0+i, l.EndOffset())
		if err != nil || !ok || off != i || ts != ts0+i {
			t.Fatalf("OffsetForTimestamp(%d) = %d, %d, %v, %v; want offset %d", ts0+i, off, ts, ok, err, i)
		}
	}
	if off, ts, ok, err := l.MaxTimestamp(); err != nil || !ok || off != int64(n-1) || ts != ts0+int64(n-1) {
		t.Fatalf("MaxTimestamp = %d, %d, %v, %v", off, ts, ok, err)
	}
}

// TestIndexCacheBounded: sealed segments' indexes are held within the
// cache's budget, loaded back from their files as lookups need them, and
// every lookup finds its record whether the index was held or loaded;
// before and after a restart, and into a sealed segment a truncation
// makes active again.
func TestIndexCacheBounded(t *testing.T) {
	const n = 1200 // about 10 segments of 64 KiB
	dir := t.TempDir()
	c := NewIndexCache(600) // about one segment's indexes
	l, cfg := indexedLog(t, dir, c, n)
	checkLookups(t, l, n)
	st := c.Stats()
	if st.Misses == 0 || st.Evictions == 0 || st.Unreadable != 0 {
		t.Fatalf("stats %+v: want loads and evictions, no unreadable files", st)
	}
	if st.Entries != 1 {
		t.Fatalf("stats %+v: the cache holds %d indexes, want the one last used", st, st.Entries)
	}
	// Sealed segments hold nothing themselves.
	for _, s := range l.segments()[:l.SegmentCount()-1] {
		if st := s.pub.Load(); !st.onDisk || st.offs != nil || st.times != nil {
			t.Fatalf("sealed segment %d holds its indexes", s.base)
		}
	}

	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if c.Stats().Entries != 0 {
		t.Fatal("a closed log's indexes stay cached")
	}
	l = openLog(t, dir, cfg)
	checkLookups(t, l, n)

	// A truncation into a sealed segment whose index is not cached: the
	// segment becomes the active one again and takes new batches.
	segs := l.segments()
	mid := segs[len(segs)/2]
	c.drop(mid)
	cut := mid.base + 5
	if err := l.Truncate(cut); err != nil {
		t.Fatal(err)
	}
	for i := cut; i < int64(n); i++ {
		appendOpts(t, l, batchOpts{N: 1, ValueSize: 512, BaseTS: ts0 + i}, i)
	}
	checkLookups(t, l, n)
	if got := len(readAll(t, l, 0)); got != n {
		t.Fatalf("%d batches after the truncation and appends, want %d", got, n)
	}
}

// TestIndexCacheUnreadableFiles: a sealed segment whose index files are
// gone or do not match its log is read by scanning from its start, with
// the same answers, and the load is counted and tried once.
func TestIndexCacheUnreadableFiles(t *testing.T) {
	const n = 800
	c := NewIndexCache(1 << 20)
	l, _ := indexedLog(t, t.TempDir(), c, n)
	segs := l.segments()
	gone, wrong := segs[1], segs[2]
	if err := os.Remove(segmentPath(l.dir, gone.base, ".index")); err != nil {
		t.Fatal(err)
	}
	// wrong's last offset entry names the next offset at its batch's
	// position: well-formed and in order, but not this log.
	b, err := os.ReadFile(segmentPath(l.dir, wrong.base, ".index"))
	if err != nil || len(b) < 2*offsetEntryLen {
		t.Fatalf("read index: %v (%d bytes)", err, len(b))
	}
	b[len(b)-5]++
	if err := os.WriteFile(segmentPath(l.dir, wrong.base, ".index"), b, 0o600); err != nil {
		t.Fatal(err)
	}
	// And a time index that is well-formed but ends short of the
	// segment's largest timestamp: its last entry names the segment's
	// first timestamp at its last offset, which would make
	// OffsetForTimestamp skip most of the segment.
	late := segs[3]
	ti := binary.BigEndian.AppendUint64(nil, uint64(ts0+late.base))
	ti = binary.BigEndian.AppendUint32(ti, uint32(late.next-1-late.base))
	if err := os.WriteFile(segmentPath(l.dir, late.base, ".timeindex"), ti, 0o600); err != nil {
		t.Fatal(err)
	}
	c.drop(gone) // as if evicted: the next lookup reads the files
	c.drop(wrong)
	c.drop(late)
	checkLookups(t, l, n)
	if st := c.Stats(); st.Unreadable != 3 {
		t.Fatalf("stats %+v: want the three segments' files found unusable", st)
	}
	before := c.Stats().Misses
	checkLookups(t, l, n)
	if after := c.Stats(); after.Unreadable != 3 || after.Misses != before {
		t.Fatalf("stats %+v after a second pass (misses before %d): an unusable index was loaded again", after, before)
	}
}

// FuzzSealedIndex: whatever a sealed segment's index files hold (they come
// from the disk), every read finds its own batch, with no error: a wrong
// index costs a scan, never a wrong answer or a report of damage (which
// would make a leader resign and a follower cut its log).
func FuzzSealedIndex(f *testing.F) {
	const n = 300
	dir := f.TempDir()
	cfg := testConfig()
	cfg.SegmentBytes = 64 << 10
	cfg.IndexIntervalBytes = 1024
	c := NewIndexCache(1 << 20)
	cfg.Indexes = c
	l, err := Open(dir, cfg, zerolog.Nop())
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { l.Close() })
	for i := range n {
		b := buildBatch(f, batchOpts{N: 1 + i%3, ValueSize: 300, BaseTS: ts0 + int64(i)})
		if _, err := appendRaw(l, b, int64(i)); err != nil {
			f.Fatal(err)
		}
	}
	sealed := l.segments()[0]
	ixPath, tiPath := segmentPath(dir, sealed.base, ".index"), segmentPath(dir, sealed.base, ".timeindex")
	goodIx, err := os.ReadFile(ixPath)
	if err != nil {
		f.Fatal(err)
	}
	goodTi, err := os.ReadFile(tiPath)
	if err != nil {
		f.Fatal(err)
	}
	want := map[int64]int64{} // offset -> base offset of its batch
	for _, b := range readAll(f, l, 0) {
		for o := recordbatch.BaseOffset(b); o <= recordbatch.LastOffset(b); o++ {
			want[o] = recordbatch.BaseOffset(b)
		}
	}
	f.Add(goodIx, goodTi)
	f.Add(goodIx[:len(goodIx)/2], goodTi[:0])
	f.Add([]byte{0, 0, 0, 3, 0, 0, 0, 5}, []byte{})
	// Well-formed, its last entry right, its first naming a position
	// inside a batch.
	inside := bytes.Clone(goodIx)
	inside[7]++
	f.Add(inside, goodTi)
	// One entry within a header of the segment's end (a load read past it).
	nearEnd := binary.BigEndian.AppendUint32(binary.BigEndian.AppendUint32(nil, 0), uint32(sealed.pub.Load().size-10))
	f.Add(nearEnd, goodTi)
	f.Fuzz(func(t *testing.T, ix, ti []byte) {
		if err := os.WriteFile(ixPath, ix, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(tiPath, ti, 0o600); err != nil {
			t.Fatal(err)
		}
		c.drop(sealed) // the first read loads these files
		for off := int64(0); off < sealed.next; off++ {
			data, err := l.Read(off, 1, l.EndOffset(), nil)
			if err != nil {
				t.Fatalf("Read(%d): %v", off, err)
			}
			bs := splitBatches(t, data)
			if len(bs) == 0 || recordbatch.BaseOffset(bs[0]) != want[off] {
				t.Fatalf("Read(%d) did not begin with its batch at %d", off, want[off])
			}
		}
	})
}

// TestIndexLoadRacesTruncation: a lookup reads a sealed segment's index
// files while a truncation makes the segment active again and appends roll
// it anew; what the lookup read (the old files, or half old and half new)
// is its own, never cached over the indexes the roll installed, nor
// counted as unusable files.
func TestIndexLoadRacesTruncation(t *testing.T) {
	const n = 1200
	efs := NewErrorFS(nil)
	cfg := testConfig()
	cfg.SegmentBytes = 64 << 10
	cfg.IndexIntervalBytes = 1024
	cfg.FS = efs
	c := NewIndexCache(1 << 20)
	cfg.Indexes = c
	l := openLog(t, t.TempDir(), cfg)
	for i := range n {
		appendOpts(t, l, batchOpts{N: 1, ValueSize: 512, BaseTS: ts0 + int64(i)}, int64(i))
	}
	segs := l.segments()
	s := segs[len(segs)-3]
	c.drop(s)
	// The lookup reads .index, then stalls opening .timeindex.
	efs.Add(Fault{Op: OpOpen, Path: segmentPath(l.dir, s.base, ".timeindex"), Delay: 300 * time.Millisecond, Times: 1})
	done := make(chan error, 1)
	go func() {
		_, _, _, err := l.OffsetForTimestamp(ts0+s.base+3, l.EndOffset())
		done <- err
	}()
	time.Sleep(50 * time.Millisecond)
	cut := s.base + 5
	if err := l.Truncate(cut); err != nil {
		t.Fatal(err)
	}
	// Other batches from the cut: the files the roll writes differ from
	// the old ones (positions, timestamps).
	for i := cut; l.segments()[len(l.segments())-1] == s; i++ {
		appendOpts(t, l, batchOpts{N: 1, ValueSize: 700, BaseTS: ts0 + 1_000_000 + i}, i)
	}
	if err := <-done; err != nil {
		t.Fatalf("the racing lookup: %v", err)
	}
	if st := c.Stats(); st.Unreadable != 0 {
		t.Fatalf("stats %+v: a load that raced the truncation counted the files unusable", st)
	}
	c.mu.Lock()
	el, ok := c.m[s]
	c.mu.Unlock()
	if !ok {
		t.Fatal("the roll's indexes are not cached")
	}
	st := s.pub.Load()
	offs, times, err := s.loadIndexes(st.size, st.maxTS)
	if err != nil {
		t.Fatal(err)
	}
	e := el.Value.(*indexEntry)
	if len(e.offs) != len(offs) || (len(offs) > 0 && e.offs[len(offs)-1] != offs[len(offs)-1]) || len(e.times) > len(times) {
		t.Fatalf("cached %d offset entries, the files %d: the racing load's were kept", len(e.offs), len(offs))
	}
}

// TestIndexCacheWarnsOnce: with a budget of 0 nothing is cached, so every
// lookup of a segment with unusable index files loads them again; the
// warning is still written once for that segment, not once per read.
func TestIndexCacheWarnsOnce(t *testing.T) {
	const n = 800
	dir := t.TempDir()
	l, cfg := indexedLog(t, dir, NewIndexCache(1<<20), n)
	gone := l.segments()[1].base
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(segmentPath(dir, gone, ".index")); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	c := NewIndexCache(0)
	cfg.Indexes = c
	r, err := Open(dir, cfg, zerolog.New(&out))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	// Open may rebuild a missing index file (it checks the files it can);
	// take the file away again from the sealed segment as it serves.
	os.Remove(segmentPath(dir, gone, ".index"))
	out.Reset()
	checkLookups(t, r, n)
	checkLookups(t, r, n)
	st := c.Stats()
	if st.Unreadable < 2 {
		t.Fatalf("stats %+v: want the segment's files loaded and found unusable more than once", st)
	}
	if got := strings.Count(out.String(), "index files are unusable"); got != 1 {
		t.Fatalf("%d warnings for one segment's unusable files (%d loads), want 1:\n%s", got, st.Unreadable, out.String())
	}
}
