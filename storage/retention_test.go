package storage

import (
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/fjordlog/fjord/storage/recordbatch"
)

// segInfo is a segment as seen from outside: base offset and .log size.
type segInfo struct {
	base, size int64
}

func segmentsOf(t *testing.T, dir string) []segInfo {
	t.Helper()
	var out []segInfo
	for _, name := range filesWithExt(t, dir, ".log") {
		out = append(out, segInfo{baseOf(t, name), segmentSize(t, filepath.Join(dir, name))})
	}
	return out
}

// timedLog builds a log of segments each holding batches with timestamps
// segTS[i] (one roll per segment via segment.ms).
func timedLog(t *testing.T, cfg Config, segTS [][]int64) *Log {
	t.Helper()
	cfg.SegmentMs = 1000
	l := openLog(t, t.TempDir(), cfg)
	now := int64(1_000_000)
	for _, tss := range segTS {
		for _, ts := range tss {
			appendOpts(t, l, batchOpts{N: 2, BaseTS: ts, ValueSize: 50}, now)
		}
		now += 1000 // next append rolls
	}
	if got := len(segmentsOf(t, l.dir)); got != len(segTS) {
		t.Fatalf("setup: %d segments, want %d", got, len(segTS))
	}
	return l
}

func checkDeleted(t *testing.T, l *Log, before []segInfo, n int) {
	t.Helper()
	after := segmentsOf(t, l.dir)
	if len(after) != len(before)-n {
		t.Fatalf("%d segments left, want %d", len(after), len(before)-n)
	}
	for _, s := range before[:n] {
		for _, ext := range []string{".log", ".index", ".timeindex"} {
			if _, err := os.Stat(segmentPath(l.dir, s.base, ext)); !os.IsNotExist(err) {
				t.Fatalf("deleted segment %d still has its %s file (%v)", s.base, ext, err)
			}
		}
	}
	if n == 0 {
		return
	}
	start := before[n].base
	if l.StartOffset() != start {
		t.Fatalf("start offset %d, want %d (base of the oldest remaining segment)", l.StartOffset(), start)
	}
	for _, off := range []int64{0, start - 1} {
		_, err := l.Read(off, 1000, l.EndOffset(), nil)
		wantErrIs(t, err, ErrOffsetOutOfRange)
	}
	data, err := l.Read(start, 1, l.EndOffset(), nil)
	if err != nil || recordbatch.BaseOffset(data) != start {
		t.Fatalf("Read(start %d): %v", start, err)
	}
	var size int64
	for _, s := range after {
		size += s.size
	}
	if l.Size() != size {
		t.Fatalf("Size %d, want %d", l.Size(), size)
	}
	if got := readAll(t, l, start); len(got) == 0 {
		t.Fatal("nothing readable after retention")
	}
}

func TestRetentionByTime(t *testing.T) {
	cfg := testConfig()
	cfg.RetentionMs = 10_000
	// Segment max timestamps: 1100, 2100, 5000, 3000 (out of order), 9000.
	l := timedLog(t, cfg, [][]int64{{1000, 1100}, {2000, 1500, 2099}, {5000}, {3000}, {9000}})
	before := segmentsOf(t, l.dir)
	end := l.EndOffset()
	n, err := l.DeleteOldSegments(11_000)
	if err != nil || n != 0 {
		t.Fatalf("now 11000: deleted %d, %v", n, err)
	}
	// First segment's max timestamp is 1101 (2 records from 1100).
	n, err = l.DeleteOldSegments(11_101)
	if err != nil || n != 0 {
		t.Fatalf("now 11101 (age == retention.ms): deleted %d, %v", n, err)
	}
	n, err = l.DeleteOldSegments(11_102)
	if err != nil || n != 1 {
		t.Fatalf("now 11102: deleted %d, %v; want 1", n, err)
	}
	checkDeleted(t, l, before, 1)
	// Second segment max 2100; third 5001 blocks the fourth (3001) even
	// though the fourth is older: retention deletes a prefix.
	n, err = l.DeleteOldSegments(14_000)
	if err != nil || n != 1 {
		t.Fatalf("now 14000: deleted %d, %v; want 1", n, err)
	}
	checkDeleted(t, l, before, 2)
	// Far in the future every inactive segment is expired; the active one
	// stays.
	n, err = l.DeleteOldSegments(1 << 40)
	if err != nil || n != 2 {
		t.Fatalf("far future: deleted %d, %v; want 2", n, err)
	}
	checkDeleted(t, l, before, 4)
	if l.EndOffset() != end {
		t.Fatalf("end offset moved: %d -> %d", end, l.EndOffset())
	}
	n, err = l.DeleteOldSegments(math.MaxInt64)
	if err != nil || n != 0 {
		t.Fatalf("active segment deleted: %d, %v", n, err)
	}
	// The log goes on: append, reopen, same start.
	res := appendOpts(t, l, batchOpts{N: 2}, 2_000_000)
	if res.BaseOffset != end {
		t.Fatalf("append after retention at %d, want %d", res.BaseOffset, end)
	}
	start := l.StartOffset()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l2 := openLog(t, l.dir, cfg)
	if l2.StartOffset() != start || l2.EndOffset() != end+2 {
		t.Fatalf("after reopen start %d end %d, want %d %d", l2.StartOffset(), l2.EndOffset(), start, end+2)
	}
	_, err = l2.Read(start-1, 100, l2.EndOffset(), nil)
	wantErrIs(t, err, ErrOffsetOutOfRange)
}

func TestRetentionBySize(t *testing.T) {
	cfg := testConfig()
	cfg.SegmentBytes = 800
	l := openLog(t, t.TempDir(), cfg)
	fill(t, l, 60, 1)
	before := segmentsOf(t, l.dir)
	if len(before) < 6 {
		t.Fatalf("setup: %d segments", len(before))
	}
	var total int64
	for _, s := range before {
		total += s.size
	}
	// Keep at least 3 segments' worth: oldest segments go while what
	// remains without them is still >= retention.bytes.
	var last3 int64
	for _, s := range before[len(before)-3:] {
		last3 += s.size
	}
	cfg.RetentionBytes = last3
	l.SetConfig(cfg)
	n, err := l.DeleteOldSegments(0)
	if err != nil {
		t.Fatal(err)
	}
	want := 0
	rem := total
	for i := 0; i < len(before)-1 && rem-before[i].size >= cfg.RetentionBytes; i++ {
		rem -= before[i].size
		want++
	}
	if n != want || n != len(before)-3 {
		t.Fatalf("deleted %d segments, want %d (= %d of %d)", n, want, len(before)-3, len(before))
	}
	checkDeleted(t, l, before, n)
	if l.Size() < cfg.RetentionBytes {
		t.Fatalf("size %d fell below retention.bytes %d", l.Size(), cfg.RetentionBytes)
	}
	// One byte more than the remaining size: nothing more goes.
	cfg.RetentionBytes = l.Size() - segmentsOf(t, l.dir)[0].size + 1
	l.SetConfig(cfg)
	if n, err := l.DeleteOldSegments(0); err != nil || n != 0 {
		t.Fatalf("deleted %d, %v; want 0", n, err)
	}
	// retention.bytes 0: every inactive segment.
	cfg.RetentionBytes = 0
	l.SetConfig(cfg)
	before = segmentsOf(t, l.dir)
	n, err = l.DeleteOldSegments(0)
	if err != nil || n != len(before)-1 {
		t.Fatalf("retention.bytes 0: deleted %d, %v; want %d", n, err, len(before)-1)
	}
	checkDeleted(t, l, before, n)
	if got := segmentsOf(t, l.dir); len(got) != 1 || got[0].size == 0 {
		t.Fatalf("active segment gone or emptied: %v", got)
	}
}

func TestRetentionDisabled(t *testing.T) {
	cfg := testConfig() // retention.ms and retention.bytes -1
	cfg.SegmentBytes = 500
	l := openLog(t, t.TempDir(), cfg)
	fill(t, l, 30, 1)
	segs := len(segmentsOf(t, l.dir))
	if n, err := l.DeleteOldSegments(math.MaxInt64); err != nil || n != 0 {
		t.Fatalf("deleted %d, %v", n, err)
	}
	if len(segmentsOf(t, l.dir)) != segs || l.StartOffset() != 0 {
		t.Fatal("segments lost")
	}
}

func TestRetentionSingleSegmentNeverDeleted(t *testing.T) {
	cfg := testConfig()
	cfg.RetentionMs = 0
	cfg.RetentionBytes = 0
	l := openLog(t, t.TempDir(), cfg)
	fill(t, l, 5, 1)
	if n, err := l.DeleteOldSegments(math.MaxInt64); err != nil || n != 0 {
		t.Fatalf("deleted %d, %v", n, err)
	}
	if len(readAll(t, l, 0)) != 5 {
		t.Fatal("active segment's batches lost")
	}
}

func TestRetentionAndQueries(t *testing.T) {
	cfg := testConfig()
	cfg.RetentionMs = 1000
	l := timedLog(t, cfg, [][]int64{{100}, {200}, {50_000}, {300}})
	if n, err := l.DeleteOldSegments(10_000); err != nil || n != 2 {
		t.Fatalf("deleted %d, %v", n, err)
	}
	start := l.StartOffset()
	off, ts, ok, err := l.OffsetForTimestamp(0, l.EndOffset())
	if err != nil || !ok || off != start || ts != 50_000 {
		t.Fatalf("OffsetForTimestamp(0) after retention = %d, %d, %v, %v; want %d", off, ts, ok, err, start)
	}
	if off, ts, ok, err := l.MaxTimestamp(); err != nil || !ok || ts != 50_001 || off != start+1 {
		t.Fatalf("MaxTimestamp after retention = %d, %d, %v, %v; want %d", off, ts, ok, err, start+1)
	}
	// Deleting segments must not disturb the flush bookkeeping.
	appendOpts(t, l, batchOpts{}, 5_000_000)
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	if l.DurableOffset() != l.EndOffset() {
		t.Fatal("durable != end")
	}
}
