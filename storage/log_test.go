package storage

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/rand"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/fjordlog/fjord/storage/recordbatch"
)

// sameBatch reports whether a stored batch is the appended one, allowing for
// the broker-owned base offset and leader epoch.
func sameBatch(t *testing.T, stored, orig []byte, wantBase int64, wantEpoch int32) {
	t.Helper()
	if len(stored) != len(orig) {
		t.Fatalf("stored batch is %d bytes, appended %d", len(stored), len(orig))
	}
	if got := recordbatch.BaseOffset(stored); got != wantBase {
		t.Fatalf("stored base offset %d, want %d", got, wantBase)
	}
	if got := int32(binary.BigEndian.Uint32(stored[12:])); got != wantEpoch {
		t.Fatalf("stored leader epoch %d, want %d", got, wantEpoch)
	}
	if !bytes.Equal(stored[8:12], orig[8:12]) || !bytes.Equal(stored[16:], orig[16:]) {
		t.Fatalf("stored batch differs from the appended one beyond base offset and leader epoch")
	}
}

type appended struct {
	orig       []byte
	base, last int64
}

// fill appends n batches of varying shape and returns them.
func fill(t *testing.T, l *Log, n int, now int64) []appended {
	t.Helper()
	var out []appended
	for i := range n {
		c := allCodecs[i%len(allCodecs)]
		o := batchOpts{N: 1 + i%4, ValueSize: 20 + (i*37)%150, Codec: c.Codec, Xerial: c.Xerial, BaseTS: now + int64(i)*10}
		b := buildBatch(t, o)
		orig := bytes.Clone(b)
		res, err := appendRaw(l, b, now+int64(i))
		if err != nil {
			t.Fatalf("append %d: %v", i, err)
		}
		out = append(out, appended{orig, res.BaseOffset, res.LastOffset})
	}
	return out
}

func TestEmptyLog(t *testing.T) {
	l := openLog(t, t.TempDir(), testConfig())
	if l.StartOffset() != 0 || l.EndOffset() != 0 || l.DurableOffset() != 0 || l.Size() != 0 {
		t.Fatalf("empty log: start %d end %d durable %d size %d", l.StartOffset(), l.EndOffset(), l.DurableOffset(), l.Size())
	}
	if b, err := l.Read(0, 1000, 0, nil); err != nil || len(b) != 0 {
		t.Fatalf("Read(0) on empty log: %d bytes, %v", len(b), err)
	}
	if b, err := l.Read(0, 1000, math.MaxInt64, nil); err != nil || len(b) != 0 {
		t.Fatalf("Read(0, no limit) on empty log: %d bytes, %v", len(b), err)
	}
	_, err := l.Read(1, 1000, math.MaxInt64, nil)
	wantErrIs(t, err, ErrOffsetOutOfRange)
	if _, _, ok, err := l.MaxTimestamp(); ok || err != nil {
		t.Fatalf("MaxTimestamp on empty log: ok %v err %v", ok, err)
	}
	if _, _, ok, err := l.OffsetForTimestamp(0, math.MaxInt64); ok || err != nil {
		t.Fatalf("OffsetForTimestamp on empty log: ok %v err %v", ok, err)
	}
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	if got := filesWithExt(t, l.dir, ".log"); len(got) != 1 || got[0] != "00000000000000000000.log" {
		t.Fatalf("segment files %v", got)
	}
}

func TestAppendReadRoundTrip(t *testing.T) {
	l := openLog(t, t.TempDir(), testConfig())
	batches := fill(t, l, 60, 1_000_000)
	next := int64(0)
	for i, a := range batches {
		info, _ := recordbatch.ParseHeader(a.orig)
		if a.base != next || a.last != next+int64(info.Records)-1 {
			t.Fatalf("batch %d: offsets [%d, %d], want base %d and %d records", i, a.base, a.last, next, info.Records)
		}
		next = a.last + 1
	}
	if l.EndOffset() != next || l.StartOffset() != 0 {
		t.Fatalf("end %d start %d, want end %d", l.EndOffset(), l.StartOffset(), next)
	}
	got := readAll(t, l, 0)
	if len(got) != len(batches) {
		t.Fatalf("read %d batches, appended %d", len(got), len(batches))
	}
	var size int64
	for i, b := range got {
		sameBatch(t, b, batches[i].orig, batches[i].base, 7)
		if recordbatch.LastOffset(b) != batches[i].last {
			t.Fatalf("batch %d last offset %d, want %d", i, recordbatch.LastOffset(b), batches[i].last)
		}
		if _, err := recordbatch.Validate(b, 0); err != nil {
			t.Fatalf("stored batch %d does not validate: %v", i, err)
		}
		size += int64(len(b))
	}
	if l.Size() != size {
		t.Fatalf("Size %d, want %d", l.Size(), size)
	}
	// One Read with room for everything returns everything, byte-identical to
	// the file.
	all, err := l.Read(0, 1<<30, l.EndOffset(), nil)
	if err != nil {
		t.Fatal(err)
	}
	file := segmentBytes(t, filepath.Join(l.dir, "00000000000000000000.log"))
	if !bytes.Equal(all, file) {
		t.Fatalf("Read of the whole log (%d bytes) differs from the .log file (%d bytes)", len(all), len(file))
	}
}

func TestAppendKeepsLeaderEpoch(t *testing.T) {
	l := openLog(t, t.TempDir(), testConfig())
	for i, ep := range []int32{0, 5, -1, math.MaxInt32} {
		b := buildBatch(t, batchOpts{LeaderEpoch: 99})
		info, err := recordbatch.Validate(b, 0)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := l.Append(b, info, ep, 1); err != nil {
			t.Fatal(err)
		}
		got, err := l.Read(int64(i), 1, l.EndOffset(), nil)
		if err != nil {
			t.Fatal(err)
		}
		if e := int32(binary.BigEndian.Uint32(got[12:])); e != ep || recordbatch.BaseOffset(got) != int64(i) {
			t.Fatalf("stored epoch %d base %d, want %d, %d", e, recordbatch.BaseOffset(got), ep, i)
		}
	}
}

func TestReadEveryOffsetReturnsContainingBatch(t *testing.T) {
	cfg := testConfig()
	cfg.IndexIntervalBytes = 300
	l := openLog(t, t.TempDir(), cfg)
	batches := fill(t, l, 40, 1)
	for _, a := range batches {
		for off := a.base; off <= a.last; off++ {
			got, err := l.Read(off, 1, l.EndOffset(), nil)
			if err != nil {
				t.Fatalf("Read(%d): %v", off, err)
			}
			bs := splitBatches(t, got)
			if len(bs) != 1 {
				t.Fatalf("Read(%d, maxBytes 1) returned %d batches", off, len(bs))
			}
			sameBatch(t, bs[0], a.orig, a.base, 7)
		}
	}
}

func TestReadMaxBytes(t *testing.T) {
	l := openLog(t, t.TempDir(), testConfig())
	big := appendOpts(t, l, batchOpts{N: 5, ValueSize: 2000}, 1)
	small := appendOpts(t, l, batchOpts{N: 2}, 1)
	third := appendOpts(t, l, batchOpts{N: 3}, 1)
	all, err := l.Read(0, 1<<20, l.EndOffset(), nil)
	if err != nil {
		t.Fatal(err)
	}
	bs := splitBatches(t, all)
	if len(bs) != 3 {
		t.Fatalf("%d batches", len(bs))
	}
	bigLen, smallLen, thirdLen := len(bs[0]), len(bs[1]), len(bs[2])
	for _, c := range []struct {
		off      int64
		maxBytes int
		want     []int // batch lengths
	}{
		{0, -1, []int{bigLen}},
		{0, 0, []int{bigLen}},
		{0, 1, []int{bigLen}},
		{0, recordbatch.HeaderLen, []int{bigLen}},
		{0, 100, []int{bigLen}},
		{0, bigLen - 1, []int{bigLen}},
		{0, bigLen, []int{bigLen}},
		{0, bigLen + smallLen - 1, []int{bigLen}},
		{0, bigLen + smallLen, []int{bigLen, smallLen}},
		{0, bigLen + smallLen + thirdLen, []int{bigLen, smallLen, thirdLen}},
		{2, 1, []int{bigLen}},
		{small.BaseOffset, 1, []int{smallLen}},
		{small.LastOffset, smallLen + thirdLen - 1, []int{smallLen}},
		{third.BaseOffset + 2, 1 << 20, []int{thirdLen}},
	} {
		got, err := l.Read(c.off, c.maxBytes, l.EndOffset(), nil)
		if err != nil {
			t.Fatalf("Read(%d, %d): %v", c.off, c.maxBytes, err)
		}
		var lens []int
		for _, b := range splitBatches(t, got) {
			lens = append(lens, len(b))
		}
		if fmt.Sprint(lens) != fmt.Sprint(c.want) {
			t.Errorf("Read(%d, maxBytes %d) returned batches %v, want %v", c.off, c.maxBytes, lens, c.want)
		}
	}
	_ = big
}

func TestReadStopsBeforeLimit(t *testing.T) {
	l := openLog(t, t.TempDir(), testConfig())
	for range 5 {
		appendOpts(t, l, batchOpts{N: 3}, 1) // offsets 0-2, 3-5, ... 12-14
	}
	for _, c := range []struct {
		off, limit int64
		wantLasts  []int64
	}{
		{0, 15, []int64{2, 5, 8, 11, 14}},
		{0, 9, []int64{2, 5, 8}},
		{0, 10, []int64{2, 5, 8}}, // limit inside batch 9-11: that batch is held back
		{0, 12, []int64{2, 5, 8, 11}},
		{4, 9, []int64{5, 8}},
		{0, 2, nil}, // the first batch ends at or past the limit
		{0, 3, []int64{2}},
		{9, 9, nil},
		{9, 3, nil},
		{14, 14, nil},
		{15, 15, nil},
		{15, 100, nil},
	} {
		got, err := l.Read(c.off, 1<<20, c.limit, nil)
		if err != nil {
			t.Fatalf("Read(%d, limit %d): %v", c.off, c.limit, err)
		}
		var lasts []int64
		for _, b := range splitBatches(t, got) {
			lasts = append(lasts, recordbatch.LastOffset(b))
		}
		if fmt.Sprint(lasts) != fmt.Sprint(c.wantLasts) {
			t.Errorf("Read(%d, limit %d) returned batches ending %v, want %v", c.off, c.limit, lasts, c.wantLasts)
		}
	}
}

func TestReadOutOfRange(t *testing.T) {
	l := openLog(t, t.TempDir(), testConfig())
	fill(t, l, 5, 1)
	end := l.EndOffset()
	for _, off := range []int64{-1, math.MinInt64, end + 1, end + 1000, math.MaxInt64} {
		_, err := l.Read(off, 100, math.MaxInt64, nil)
		wantErrIs(t, err, ErrOffsetOutOfRange)
	}
	if b, err := l.Read(end, 100, math.MaxInt64, nil); err != nil || len(b) != 0 {
		t.Fatalf("Read(end) = %d bytes, %v; want nothing", len(b), err)
	}
}

func TestSegmentRollBySize(t *testing.T) {
	cfg := testConfig()
	cfg.SegmentBytes = 1000
	cfg.IndexIntervalBytes = 150
	dir := t.TempDir()
	l := openLog(t, dir, cfg)
	batches := fill(t, l, 50, 1)

	logs := filesWithExt(t, dir, ".log")
	if len(logs) < 5 {
		t.Fatalf("only %d segments for %d bytes with segment.bytes 1000", len(logs), l.Size())
	}
	// Each segment is named by its first batch's base offset, has both index
	// files, and stays within segment.bytes.
	firstBases := map[int64]bool{}
	var bases []int64
	for _, name := range logs {
		stem := strings.TrimSuffix(name, ".log")
		if len(stem) != 20 {
			t.Fatalf("segment name %q is not 20 digits", name)
		}
		base, err := strconv.ParseInt(stem, 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		if fmt.Sprintf("%020d", base) != stem {
			t.Fatalf("segment name %q is not zero-padded", name)
		}
		bases = append(bases, base)
		if name == logs[len(logs)-1] {
			activeIndexToDisk(t, dir) // the active segment's live in memory
		}
		for _, ext := range []string{".index", ".timeindex"} {
			if _, err := os.Stat(filepath.Join(dir, stem+ext)); err != nil {
				t.Fatalf("segment %s has no %s: %v", stem, ext, err)
			}
		}
		data := segmentBytes(t, filepath.Join(dir, name))
		if name != logs[len(logs)-1] && fileSize(t, filepath.Join(dir, name)) != int64(len(data)) {
			t.Fatalf("inactive segment %s is %d bytes on disk for %d bytes of batches", name, fileSize(t, filepath.Join(dir, name)), len(data))
		}
		if len(data) > int(cfg.SegmentBytes) {
			t.Fatalf("segment %s is %d bytes > segment.bytes %d", name, len(data), cfg.SegmentBytes)
		}
		bs := splitBatches(t, data)
		if len(bs) == 0 || recordbatch.BaseOffset(bs[0]) != base {
			t.Fatalf("segment %s does not start with a batch at its base", name)
		}
		firstBases[base] = true
		checkIndexFiles(t, dir, base, data, cfg.IndexIntervalBytes)
	}
	// Consecutive segments are contiguous, and each roll happened only when
	// the next batch would not fit.
	for i := 0; i+1 < len(bases); i++ {
		size := segmentSize(t, filepath.Join(dir, logs[i]))
		var nextLen int
		for _, a := range batches {
			if a.base == bases[i+1] {
				nextLen = len(a.orig)
			}
		}
		if size+int64(nextLen) <= cfg.SegmentBytes {
			t.Fatalf("segment %d rolled at %d bytes though the next batch (%d bytes) fit", bases[i], size, nextLen)
		}
	}
	got := readAll(t, l, 0)
	if len(got) != len(batches) {
		t.Fatalf("read %d batches across segments, want %d", len(got), len(batches))
	}
	for i, b := range got {
		sameBatch(t, b, batches[i].orig, batches[i].base, 7)
	}
	// A read never crosses a segment boundary.
	for _, base := range bases {
		data, err := l.Read(base, 1<<30, l.EndOffset(), nil)
		if err != nil {
			t.Fatal(err)
		}
		bs := splitBatches(t, data)
		for _, b := range bs[1:] {
			if firstBases[recordbatch.BaseOffset(b)] {
				t.Fatalf("Read(%d) crossed into segment %d", base, recordbatch.BaseOffset(b))
			}
		}
	}
	// Every offset, through the index.
	for _, a := range batches {
		for off := a.base; off <= a.last; off++ {
			data, err := l.Read(off, 1, l.EndOffset(), nil)
			if err != nil {
				t.Fatal(err)
			}
			sameBatch(t, splitBatches(t, data)[0], a.orig, a.base, 7)
		}
	}
}

// checkIndexFiles verifies a segment's .index and .timeindex against its
// .log: entry sizes, every offset entry naming a batch boundary and that
// batch's last offset, index density, and time entries tracking the running
// maximum timestamp.
func checkIndexFiles(t *testing.T, dir string, base int64, logData []byte, interval int32) {
	t.Helper()
	activeIndexToDisk(t, dir)
	ob, err := os.ReadFile(segmentPath(dir, base, ".index"))
	if err != nil {
		t.Fatal(err)
	}
	tb, err := os.ReadFile(segmentPath(dir, base, ".timeindex"))
	if err != nil {
		t.Fatal(err)
	}
	if len(ob)%8 != 0 || len(tb)%12 != 0 {
		t.Fatalf("segment %d: index sizes %d/%d are not multiples of 8/12", base, len(ob), len(tb))
	}
	lastAt := map[int64]int64{} // batch position -> last offset
	var pos int64
	// The time index has Kafka's shape: where the offset index has an
	// entry, the largest timestamp so far if it grew since the last time
	// entry; and, last, the segment's largest timestamp.
	indexed := map[int64]bool{} // relative offsets the offset index names
	for i := range len(ob) / 8 {
		indexed[int64(int32(binary.BigEndian.Uint32(ob[i*8:])))] = true
	}
	var maxTS, maxRel int64 = -1, -1
	var wantTimes [][2]int64
	noteTime := func() {
		if n := len(wantTimes); maxTS >= 0 && (n == 0 || wantTimes[n-1][0] < maxTS) {
			wantTimes = append(wantTimes, [2]int64{maxTS, maxRel})
		}
	}
	var sinceIndex int64
	bs := splitBatches(t, logData)
	wantMinEntries := 0
	for _, b := range bs {
		lastAt[pos] = recordbatch.LastOffset(b)
		info, _ := recordbatch.ParseHeader(b)
		if info.MaxTimestamp > maxTS {
			maxTS, maxRel = info.MaxTimestamp, recordbatch.LastOffset(b)-base
		}
		if indexed[recordbatch.LastOffset(b)-base] {
			noteTime()
		}
		sinceIndex += int64(len(b))
		if sinceIndex >= int64(interval) {
			wantMinEntries++
			sinceIndex = 0
		}
		pos += int64(len(b))
	}
	n := len(ob) / 8
	if n == 0 && len(bs) > 0 {
		t.Fatalf("segment %d: empty offset index", base)
	}
	if n < wantMinEntries {
		t.Fatalf("segment %d: %d index entries for %d bytes at interval %d", base, n, len(logData), interval)
	}
	for i := range n {
		rel := int64(int32(binary.BigEndian.Uint32(ob[i*8:])))
		p := int64(int32(binary.BigEndian.Uint32(ob[i*8+4:])))
		last, ok := lastAt[p]
		if !ok {
			t.Fatalf("segment %d index entry %d: position %d is not a batch boundary", base, i, p)
		}
		if last-base != rel {
			t.Fatalf("segment %d index entry %d: relative offset %d, batch at %d ends at %d", base, i, rel, p, last-base)
		}
	}
	noteTime()
	if len(tb)/12 != len(wantTimes) {
		t.Fatalf("segment %d: %d time index entries, want %d", base, len(tb)/12, len(wantTimes))
	}
	for i, w := range wantTimes {
		ts := int64(binary.BigEndian.Uint64(tb[i*12:]))
		rel := int64(int32(binary.BigEndian.Uint32(tb[i*12+8:])))
		if ts != w[0] || rel != w[1] {
			t.Fatalf("segment %d time entry %d = (%d, %d), want (%d, %d)", base, i, ts, rel, w[0], w[1])
		}
	}
}

func TestIndexFileEntries(t *testing.T) {
	for _, interval := range []int32{1, 200, 4096} {
		t.Run(fmt.Sprint(interval), func(t *testing.T) {
			cfg := testConfig()
			cfg.IndexIntervalBytes = interval
			dir := t.TempDir()
			l := openLog(t, dir, cfg)
			// Timestamps that go up and down, so the time index must skip
			// batches that do not raise the maximum.
			for i, ts := range []int64{100, 300, 200, 300, 400, 50, 401, 1000, 999} {
				appendOpts(t, l, batchOpts{N: 1 + i%3, BaseTS: ts, TSDeltas: []int64{0, -5, 2}}, 1)
			}
			fill(t, l, 30, 2000)
			if err := l.Flush(); err != nil {
				t.Fatal(err)
			}
			data := segmentBytes(t, filepath.Join(dir, "00000000000000000000.log"))
			checkIndexFiles(t, dir, 0, data, interval)
			if interval == 1 {
				if got, want := fileSize(t, segmentPath(dir, 0, ".index")), int64(8*len(splitBatches(t, data))); got != want {
					t.Fatalf(".index is %d bytes, want one 8-byte entry per batch (%d)", got, want)
				}
			}
		})
	}
}

func TestSegmentRollByTime(t *testing.T) {
	cfg := testConfig()
	cfg.SegmentMs = 100
	dir := t.TempDir()
	l := openLog(t, dir, cfg)
	var bases []int64
	for i, now := range []int64{10_000, 10_050, 10_099, 10_100, 10_150, 10_300, 10_301, 10_500} {
		res := appendOpts(t, l, batchOpts{N: 2, BaseTS: now}, now)
		if i == 0 || now == 10_100 || now == 10_300 || now == 10_500 {
			bases = append(bases, res.BaseOffset)
		}
	}
	var want []string
	for _, b := range bases {
		want = append(want, fmt.Sprintf("%020d.log", b))
	}
	if got := filesWithExt(t, dir, ".log"); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("segments %v, want %v", got, want)
	}
	if got := readAll(t, l, 0); len(got) != 8 {
		t.Fatalf("read %d batches, want 8", len(got))
	}
}

// TestNoRollOnFirstAppendAfterReopen: restarting the broker must not by
// itself roll the active segment (segment.ms counts from the segment's first
// append, not from the process start).
func TestNoRollOnFirstAppendAfterReopen(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig() // segment.ms 7 days, segment.bytes 1 GiB
	l := openLog(t, dir, cfg)
	now := int64(1_700_000_000_000)
	appendOpts(t, l, batchOpts{N: 3}, now)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l = openLog(t, dir, cfg)
	appendOpts(t, l, batchOpts{N: 3}, now+1000)
	if got := filesWithExt(t, dir, ".log"); len(got) != 1 {
		t.Fatalf("regression: first append after reopen rolled a new segment 1s after the previous append (segments %v): openSegment leaves segment.firstAppend zero (segment.go), so shouldRoll (log.go:319) computes now - time.Time{}.UnixMilli() >= segment.ms", got)
	}
}

func TestFlushAdvancesDurable(t *testing.T) {
	l := openLog(t, t.TempDir(), testConfig())
	appendOpts(t, l, batchOpts{N: 4}, 1)
	if l.DurableOffset() != 0 || l.EndOffset() != 4 {
		t.Fatalf("before Flush: durable %d end %d", l.DurableOffset(), l.EndOffset())
	}
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	if l.DurableOffset() != l.EndOffset() {
		t.Fatalf("after Flush: durable %d end %d", l.DurableOffset(), l.EndOffset())
	}
	if err := l.Flush(); err != nil { // nothing to do
		t.Fatal(err)
	}
	// Across a roll both segments are covered.
	cfg := testConfig()
	cfg.SegmentBytes = 200
	l2 := openLog(t, t.TempDir(), cfg)
	fill(t, l2, 10, 1)
	if err := l2.Flush(); err != nil {
		t.Fatal(err)
	}
	if l2.DurableOffset() != l2.EndOffset() {
		t.Fatalf("after Flush across rolls: durable %d end %d", l2.DurableOffset(), l2.EndOffset())
	}
}

func TestConcurrentFlush(t *testing.T) {
	cfg := testConfig()
	cfg.SegmentBytes = 4000
	l := openLog(t, t.TempDir(), cfg)
	const writers, perWriter, flushers = 8, 40, 16
	var wg sync.WaitGroup
	errc := make(chan error, writers*perWriter+flushers*100)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range perWriter {
				b := buildBatch(t, batchOpts{N: 1 + i%3, ValueSize: 30})
				if _, err := appendRaw(l, b, int64(w*1000+i)); err != nil {
					errc <- err
					return
				}
				if i%4 == 0 {
					before := l.EndOffset()
					if err := l.Flush(); err != nil {
						errc <- err
						return
					}
					if d := l.DurableOffset(); d < before {
						errc <- fmt.Errorf("Flush returned with durable %d < end %d seen before the call", d, before)
					}
				}
			}
		}()
	}
	for range flushers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 100 {
				before := l.EndOffset()
				if err := l.Flush(); err != nil {
					errc <- err
					return
				}
				if d := l.DurableOffset(); d < before || d > l.EndOffset() {
					errc <- fmt.Errorf("durable %d outside [%d, %d]", d, before, l.EndOffset())
				}
			}
		}()
	}
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Fatal(err)
	}
	// Many goroutines flushing at once, with nothing appended between: all
	// return, and everything is durable.
	appendOpts(t, l, batchOpts{N: 2}, 1)
	var wg2 sync.WaitGroup
	start := make(chan struct{})
	errs := make([]error, 64)
	for i := range errs {
		wg2.Add(1)
		go func() {
			defer wg2.Done()
			<-start
			errs[i] = l.Flush()
		}()
	}
	close(start)
	wg2.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	if l.DurableOffset() != l.EndOffset() {
		t.Fatalf("durable %d != end %d after concurrent flushes", l.DurableOffset(), l.EndOffset())
	}
	if got := readAll(t, l, 0); len(got) != writers*perWriter+1 {
		t.Fatalf("read %d batches, want %d", len(got), writers*perWriter+1)
	}
}

// TestConcurrentReadersDuringAppends runs readers, time queries and flushes
// against a writer that rolls segments, under the race detector.
func TestConcurrentReadersDuringAppends(t *testing.T) {
	// Regression: at b8d6794 publishActive rewrote the shared view slices in
	// place while Read/OffsetForTimestamp indexed them after RUnlock.
	cfg := testConfig()
	cfg.SegmentBytes = 3000
	cfg.IndexIntervalBytes = 200
	l := openLog(t, t.TempDir(), cfg)
	done := make(chan struct{})
	var wg sync.WaitGroup
	errc := make(chan error, 100)
	for r := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewSource(int64(r)))
			for {
				select {
				case <-done:
					return
				default:
				}
				end := l.EndOffset()
				if end == 0 {
					continue
				}
				off := rng.Int63n(end)
				data, err := l.Read(off, rng.Intn(4000), end, nil)
				if err != nil {
					errc <- fmt.Errorf("Read(%d): %v", off, err)
					return
				}
				if len(data) == 0 {
					errc <- fmt.Errorf("Read(%d) below end %d returned nothing", off, end)
					return
				}
				var bs [][]byte
				for b := data; len(b) > 0; {
					n := int(binary.BigEndian.Uint32(b[8:])) + 12
					bs = append(bs, b[:n])
					b = b[n:]
				}
				if recordbatch.BaseOffset(bs[0]) > off || recordbatch.LastOffset(bs[0]) < off {
					errc <- fmt.Errorf("Read(%d) began with batch [%d, %d]", off, recordbatch.BaseOffset(bs[0]), recordbatch.LastOffset(bs[0]))
					return
				}
				for _, b := range bs {
					if err := recordbatch.CheckCRC(b); err != nil {
						errc <- err
						return
					}
				}
				if _, _, _, err := l.OffsetForTimestamp(rng.Int63n(2000), end); err != nil {
					errc <- err
					return
				}
				if _, _, _, err := l.MaxTimestamp(); err != nil {
					errc <- err
					return
				}
				l.Size()
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-done:
				return
			default:
			}
			if err := l.Flush(); err != nil {
				errc <- err
				return
			}
		}
	}()
	for i := range 300 {
		appendOpts(t, l, batchOpts{N: 1 + i%5, ValueSize: 50, BaseTS: int64(i)}, int64(i))
	}
	close(done)
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Fatal(err)
	}
}

func TestClosedLog(t *testing.T) {
	l := openLog(t, t.TempDir(), testConfig())
	appendOpts(t, l, batchOpts{}, 1)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	_, err := appendRaw(l, buildBatch(t, batchOpts{}), 1)
	wantErrIs(t, err, ErrClosed)
	_, err = l.DeleteOldSegments(1)
	wantErrIs(t, err, ErrClosed)
	if _, err := l.Read(0, 100, 1, nil); err == nil {
		t.Log("Read after Close returned no error")
	}
}

func TestLogAppendTime(t *testing.T) {
	for _, c := range allCodecs {
		t.Run(c.Name, func(t *testing.T) {
			cfg := testConfig()
			cfg.LogAppendTime = true
			l := openLog(t, t.TempDir(), cfg)
			appendOpts(t, l, batchOpts{N: 2, BaseTS: 500}, 600)
			b := buildBatch(t, batchOpts{N: 3, BaseTS: 100, Codec: c.Codec, Xerial: c.Xerial})
			orig := bytes.Clone(b)
			res, err := appendRaw(l, b, 12345)
			if err != nil {
				t.Fatal(err)
			}
			if res.LogAppendTime != 12345 {
				t.Fatalf("result LogAppendTime %d", res.LogAppendTime)
			}
			data, err := l.Read(res.BaseOffset, 1, l.EndOffset(), nil)
			if err != nil {
				t.Fatal(err)
			}
			stored := splitBatches(t, data)[0]
			if err := recordbatch.CheckCRC(stored); err != nil {
				t.Fatalf("stored LogAppendTime batch: %v", err)
			}
			info, err := recordbatch.Validate(stored, 0)
			if err != nil {
				t.Fatal(err)
			}
			attrs := binary.BigEndian.Uint16(stored[21:])
			if attrs&0x08 == 0 || !info.LogAppendTimed || info.MaxTimestamp != 12345 || info.BaseTimestamp != 100 || info.Codec != c.Codec {
				t.Fatalf("stored batch attrs %#x info %+v", attrs, info)
			}
			// Only the timestamp type, max timestamp and CRC changed.
			if !bytes.Equal(stored[23:35], orig[23:35]) || !bytes.Equal(stored[43:], orig[43:]) {
				t.Fatal("LogAppendTime changed more than attributes, maxTimestamp and CRC")
			}
			// Every record of a LogAppendTime batch has the append time: the
			// first of them is the answer.
			if off, ts, ok, err := l.MaxTimestamp(); err != nil || !ok || ts != 12345 || off != res.BaseOffset {
				t.Fatalf("MaxTimestamp = %d, %d, %v, %v; want %d, 12345", off, ts, ok, err, res.BaseOffset)
			}
			if off, ts, ok, err := l.OffsetForTimestamp(601, math.MaxInt64); err != nil || !ok || off != res.BaseOffset || ts != 12345 {
				t.Fatalf("OffsetForTimestamp(601) = %d, %d, %v, %v; want %d at 12345", off, ts, ok, err, res.BaseOffset)
			}
			if _, _, ok, _ := l.OffsetForTimestamp(12346, math.MaxInt64); ok {
				t.Fatal("OffsetForTimestamp past the append time found something")
			}
		})
	}
}

// tsRecord is one appended record's offset and timestamp, for brute-force
// timestamp lookups.
type tsRecord struct{ off, ts int64 }

func bruteForceTS(recs []tsRecord, target, limit int64) (int64, int64, bool) {
	for _, r := range recs {
		if r.off >= limit {
			break
		}
		if r.ts >= target {
			return r.off, r.ts, true
		}
	}
	return 0, 0, false
}

func TestOffsetForTimestamp(t *testing.T) {
	for _, interval := range []int32{1, 300, 1 << 20} {
		t.Run(fmt.Sprint(interval), func(t *testing.T) {
			cfg := testConfig()
			cfg.SegmentBytes = 2500
			cfg.IndexIntervalBytes = interval
			l := openLog(t, t.TempDir(), cfg)
			rng := rand.New(rand.NewSource(int64(interval)))
			var recs []tsRecord
			ts := int64(10_000)
			for i := range 80 {
				n := 1 + rng.Intn(6)
				deltas := make([]int64, n)
				for j := range deltas {
					deltas[j] = int64(rng.Intn(40)) - 5 // not monotonic within a batch
				}
				if i%7 == 3 {
					ts -= 300 // a batch older than the previous ones
				} else {
					ts += int64(rng.Intn(60))
				}
				c := allCodecs[i%len(allCodecs)]
				res := appendOpts(t, l, batchOpts{N: n, BaseTS: ts, TSDeltas: deltas, Codec: c.Codec, Xerial: c.Xerial, ValueSize: 30}, 1)
				for j := range n {
					recs = append(recs, tsRecord{res.BaseOffset + int64(j), ts + deltas[j]})
				}
			}
			if len(filesWithExt(t, l.dir, ".log")) < 3 {
				t.Fatal("want several segments")
			}
			check := func(target, limit int64) {
				t.Helper()
				off, rts, ok, err := l.OffsetForTimestamp(target, limit)
				if err != nil {
					t.Fatalf("OffsetForTimestamp(%d, %d): %v", target, limit, err)
				}
				wo, wts, wok := bruteForceTS(recs, target, limit)
				if ok != wok || off != wo || rts != wts {
					t.Fatalf("OffsetForTimestamp(%d, limit %d) = (%d, %d, %v), want (%d, %d, %v)", target, limit, off, rts, ok, wo, wts, wok)
				}
			}
			end := l.EndOffset()
			for target := int64(9_000); target < ts+200; target += 7 {
				check(target, end)
			}
			for _, r := range recs {
				check(r.ts, end)
				check(r.ts+1, end)
			}
			check(math.MinInt64, end)
			check(math.MaxInt64, end)
			// Limits at batch boundaries.
			for _, b := range readAll(t, l, 0) {
				check(10_500, recordbatch.BaseOffset(b))
				check(10_000, recordbatch.LastOffset(b)+1)
			}
		})
	}
}

// TestOffsetForTimestampInsideBatch: the answer is a record, not a batch.
func TestOffsetForTimestampInsideBatch(t *testing.T) {
	for _, c := range allCodecs {
		l := openLog(t, t.TempDir(), testConfig())
		appendOpts(t, l, batchOpts{N: 2, BaseTS: 500}, 1)
		appendOpts(t, l, batchOpts{N: 4, BaseTS: 1000, TSDeltas: []int64{0, 10, 5, 20}, Codec: c.Codec, Xerial: c.Xerial}, 1)
		for _, q := range []struct{ target, off, ts int64 }{
			{1, 0, 500}, {500, 0, 500}, {502, 2, 1000}, {1000, 2, 1000}, {1001, 3, 1010},
			{1006, 3, 1010}, {1010, 3, 1010}, {1011, 5, 1020}, {1020, 5, 1020},
		} {
			off, ts, ok, err := l.OffsetForTimestamp(q.target, l.EndOffset())
			if err != nil || !ok || off != q.off || ts != q.ts {
				t.Fatalf("%s: OffsetForTimestamp(%d) = %d, %d, %v, %v; want %d, %d", c.Name, q.target, off, ts, ok, err, q.off, q.ts)
			}
		}
		if _, _, ok, err := l.OffsetForTimestamp(1021, l.EndOffset()); ok || err != nil {
			t.Fatalf("%s: OffsetForTimestamp past every record: ok %v err %v", c.Name, ok, err)
		}
	}
}

// TestOffsetForTimestampRespectsLimitInsideBatch: "the first record at or
// after ts below limit" must not return a record at or past limit, even when
// limit falls inside a batch.
func TestOffsetForTimestampRespectsLimitInsideBatch(t *testing.T) {
	l := openLog(t, t.TempDir(), testConfig())
	appendOpts(t, l, batchOpts{N: 3, BaseTS: 1000}, 1) // offsets 0,1,2 at 1000,1001,1002
	off, ts, ok, err := l.OffsetForTimestamp(1001, 1)
	if err != nil {
		t.Fatal(err)
	}
	if ok {
		t.Fatalf("regression: OffsetForTimestamp(1001, limit 1) returned offset %d (ts %d), at or past limit: query.go:39 compares only the batch base offset with limit, then returns any matching record of that batch", off, ts)
	}
}

// TestMaxTimestamp: ListOffsets MAX_TIMESTAMP answers the offset of the
// first record carrying the largest timestamp (KIP-734, KAFKA-16310), across
// segments, codecs, and record timestamps that are not monotonic.
func TestMaxTimestamp(t *testing.T) {
	cfg := testConfig()
	cfg.SegmentBytes = 400
	l := openLog(t, t.TempDir(), cfg)
	var wantOff, wantTS int64 = -1, -1
	for i, ts := range []int64{100, 5000, 300, 4999, 7000, 6999, 20, 7000} {
		c := allCodecs[i%len(allCodecs)]
		// Records at ts-2, ts, ts-1, ts: the maximum first appears at delta 1.
		res := appendOpts(t, l, batchOpts{N: 4, BaseTS: ts - 2, TSDeltas: []int64{0, 2, 1, 2}, ValueSize: 40, Codec: c.Codec, Xerial: c.Xerial}, 1)
		if ts > wantTS {
			wantOff, wantTS = res.BaseOffset+1, ts
		}
		off, got, ok, err := l.MaxTimestamp()
		if err != nil || !ok || got != wantTS || off != wantOff {
			t.Fatalf("after batch %d: MaxTimestamp = %d, %d, %v, %v; want offset %d ts %d", i, off, got, ok, err, wantOff, wantTS)
		}
	}
	if len(filesWithExt(t, l.dir, ".log")) < 3 {
		t.Fatal("want several segments")
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l = openLog(t, l.dir, cfg)
	if off, got, ok, err := l.MaxTimestamp(); err != nil || !ok || got != wantTS || off != wantOff {
		t.Fatalf("after reopen: MaxTimestamp = %d, %d, %v, %v; want offset %d ts %d", off, got, ok, err, wantOff, wantTS)
	}
}

// TestReadIntoBuffer: Read uses the caller's buffer when it is large enough,
// allocates otherwise, and the result never depends on what the buffer held.
func TestReadIntoBuffer(t *testing.T) {
	l := openLog(t, t.TempDir(), testConfig())
	batches := fill(t, l, 12, 1)
	want, err := l.Read(0, 1<<20, l.EndOffset(), nil)
	if err != nil {
		t.Fatal(err)
	}
	big := bytes.Repeat([]byte{0xAA}, len(want)+100)
	got, err := l.Read(0, 1<<20, l.EndOffset(), big)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("Read into a dirty buffer returned different bytes")
	}
	if &got[0] != &big[0] {
		t.Fatal("Read did not use a buffer large enough for the result")
	}
	small := make([]byte, 10)
	got, err = l.Read(0, 1<<20, l.EndOffset(), small)
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("Read with a small buffer: %v", err)
	}
	if !bytes.Equal(small, make([]byte, 10)) && &got[0] == &small[0] {
		t.Fatal("Read wrote past a small buffer")
	}
	// The oversized-first-batch path, into a buffer.
	bigBatch := appendOpts(t, l, batchOpts{N: 3, ValueSize: 5000}, 1)
	buf := make([]byte, 0, 64<<10)
	got, err = l.Read(bigBatch.BaseOffset, 100, l.EndOffset(), buf)
	if err != nil {
		t.Fatal(err)
	}
	bs := splitBatches(t, got)
	if len(bs) != 1 || recordbatch.BaseOffset(bs[0]) != bigBatch.BaseOffset || recordbatch.CheckCRC(bs[0]) != nil {
		t.Fatalf("oversized batch into a buffer: %d batches", len(bs))
	}
	// Every offset, reusing one buffer: each result is right even though the
	// buffer still holds the previous one.
	reuse := make([]byte, 0, 1<<20)
	for _, a := range batches {
		r, err := l.Read(a.base, 1, l.EndOffset(), reuse)
		if err != nil {
			t.Fatal(err)
		}
		sameBatch(t, r, a.orig, a.base, 7)
	}
}

func TestDeleteLog(t *testing.T) {
	parent := t.TempDir()
	dir := filepath.Join(parent, "topic-0")
	l, err := Open(dir, testConfig(), nopLogger())
	if err != nil {
		t.Fatal(err)
	}
	fill(t, l, 5, 1)
	if err := l.Delete(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("log directory survives Delete: %v", err)
	}
	if _, err := os.Stat(dir + DeletedSuffix); !os.IsNotExist(err) {
		t.Fatalf("renamed directory survives Delete: %v", err)
	}
	_, err = appendRaw(l, buildBatch(t, batchOpts{}), 1)
	wantErrIs(t, err, ErrClosed)
	// A deletion interrupted by a crash is finished at start-up; other
	// directories are left alone.
	if err := os.MkdirAll(filepath.Join(parent, "t-1"+DeletedSuffix, "x"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(parent, "t-2"), 0o755); err != nil {
		t.Fatal(err)
	}
	RemoveDeletedDirs(parent)
	if _, err := os.Stat(filepath.Join(parent, "t-1"+DeletedSuffix)); !os.IsNotExist(err) {
		t.Fatal("interrupted deletion not finished")
	}
	if _, err := os.Stat(filepath.Join(parent, "t-2")); err != nil {
		t.Fatal("RemoveDeletedDirs removed a live directory")
	}
}

// TestSnapshotsKept: rolls and closes write producer snapshots; only the
// newest two stay.
func TestSnapshotsKept(t *testing.T) {
	cfg := testConfig()
	cfg.SegmentBytes = 300
	l := openLog(t, t.TempDir(), cfg)
	for i := range 30 {
		appendOpts(t, l, batchOpts{Idempotent: true, PID: 1, Seq: int32(i), ValueSize: 100}, 1)
	}
	if n := len(filesWithExt(t, l.dir, ".log")); n < 5 {
		t.Fatalf("setup: %d segments", n)
	}
	if snaps := filesWithExt(t, l.dir, ".snapshot"); len(snaps) != 2 || baseOf(t, snaps[1]) != baseOf(t, filesWithExt(t, l.dir, ".log")[len(filesWithExt(t, l.dir, ".log"))-1]) {
		t.Fatalf("snapshots %v", snaps)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if snaps := filesWithExt(t, l.dir, ".snapshot"); len(snaps) != 2 || baseOf(t, snaps[1]) != 30 {
		t.Fatalf("snapshots after Close %v", snaps)
	}
}

// TestTimeIndexSparse: the time index takes an entry where the offset
// index does (every index.interval.bytes), not one per batch whose
// timestamp rises (nearly every batch: 12 bytes of memory each for the
// life of the segment, found by a one-hour soak), and still answers time
// lookups and MaxTimestamp exactly, before and after a restart and a
// truncation.
func TestTimeIndexSparse(t *testing.T) {
	cfg := testConfig()
	cfg.FS = NewMemFS()
	cfg.IndexIntervalBytes = 4096
	l := openLog(t, "/logs/topic-0", cfg)
	const batches = 2000
	for i := range batches {
		appendOpts(t, l, batchOpts{N: 1, ValueSize: 20, BaseTS: 1000 + int64(i)}, int64(i))
	}
	s := l.active()
	if n, offs := len(s.ix.times), len(s.ix.offs); n > offs {
		t.Fatalf("%d time index entries for %d batches and %d offset index entries", n, batches, offs)
	}
	check := func(l *Log, end int64) {
		t.Helper()
		for _, ts := range []int64{0, 1000, 1001, 1500, 1000 + end - 1} {
			off, rts, ok, err := l.OffsetForTimestamp(ts, l.EndOffset())
			want := max(ts-1000, 0)
			if err != nil || !ok || off != want || rts != 1000+want {
				t.Fatalf("OffsetForTimestamp(%d) = %d, %d, %v, %v; want offset %d", ts, off, rts, ok, err, want)
			}
		}
		if _, _, ok, _ := l.OffsetForTimestamp(1000+end, l.EndOffset()); ok {
			t.Fatalf("OffsetForTimestamp past the largest timestamp found a record")
		}
		off, ts, ok, err := l.MaxTimestamp()
		if err != nil || !ok || off != end-1 || ts != 1000+end-1 {
			t.Fatalf("MaxTimestamp = %d, %d, %v, %v; want %d, %d", off, ts, ok, err, end-1, 1000+end-1)
		}
	}
	check(l, batches)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l = openLog(t, "/logs/topic-0", cfg) // clean: the index files are trusted
	check(l, batches)
	if err := l.Truncate(1234); err != nil {
		t.Fatal(err)
	}
	check(l, 1234)
}
