package storage

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fjordlog/fjord/storage/recordbatch"
	"github.com/fjordlog/fjord/storage/recordbatch/batchtest"
	"github.com/rs/zerolog"
)

// crashCopy copies an open log's directory as it is on disk right now: what
// a crash would leave (no clean-shutdown marker, indexes as written so far).
func crashCopy(t *testing.T, l *Log) string {
	t.Helper()
	dst := filepath.Join(t.TempDir(), "crashed")
	copyDir(t, l.dir, dst)
	if _, err := os.Stat(filepath.Join(dst, cleanShutdownFile)); err == nil {
		t.Fatal("an open log has a clean-shutdown marker")
	}
	return dst
}

// idemLog appends n idempotent batches of 3 records for producer 77 (epoch
// 0, sequences from 0), compressed with each codec in turn, and returns
// them.
func idemLog(t *testing.T, l *Log, n int) []appended {
	t.Helper()
	return idemLogCodecs(t, l, n, true)
}

// idemLogCodecs is idemLog, with the codecs in turn or, without codecs,
// none: a compressor's buffers, allocated for every batch, made 20,000
// batches take four minutes under the race detector.
func idemLogCodecs(t *testing.T, l *Log, n int, codecs bool) []appended {
	t.Helper()
	var out []appended
	for i := range n {
		o := batchOpts{N: 3, ValueSize: 60, Idempotent: true, PID: 77, Seq: int32(3 * i), BaseTS: 10_000 + int64(i)*10}
		if codecs {
			o.Codec = allCodecs[i%len(allCodecs)].Codec
		}
		b := buildBatch(t, o)
		orig := bytes.Clone(b)
		res, err := appendRaw(l, b, 10_000+int64(i))
		if err != nil {
			t.Fatalf("append %d: %v", i, err)
		}
		if res.Duplicate {
			t.Fatalf("append %d: duplicate", i)
		}
		out = append(out, appended{orig, res.BaseOffset, res.LastOffset})
	}
	return out
}

// retry appends a copy of an earlier appended batch.
func retry(t *testing.T, l *Log, a appended) (AppendResult, error) {
	t.Helper()
	return appendRaw(l, bytes.Clone(a.orig), 1)
}

func checkReadsMatch(t *testing.T, l *Log, batches []appended) {
	t.Helper()
	got := readAll(t, l, l.StartOffset())
	if len(got) != len(batches) {
		t.Fatalf("read %d batches, want %d", len(got), len(batches))
	}
	for i, b := range got {
		sameBatch(t, b, batches[i].orig, batches[i].base, 7)
		if err := recordbatch.CheckCRC(b); err != nil {
			t.Fatal(err)
		}
	}
}

func TestCleanShutdownMarker(t *testing.T) {
	dir := t.TempDir()
	l := openLog(t, dir, testConfig())
	appendOpts(t, l, batchOpts{}, 1)
	if _, err := os.Stat(filepath.Join(dir, cleanShutdownFile)); err == nil {
		t.Fatal("marker present while open")
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, cleanShutdownFile)); err != nil {
		t.Fatalf("no marker after Close: %v", err)
	}
	if snaps := filesWithExt(t, dir, ".snapshot"); len(snaps) == 0 || snaps[len(snaps)-1] != fmt.Sprintf("%020d.snapshot", 1) {
		t.Fatalf("snapshots after Close: %v", snaps)
	}
	os.WriteFile(filepath.Join(dir, "00000000000000000001.snapshot.tmp"), []byte("junk"), 0o644)
	l = openLog(t, dir, testConfig())
	if _, err := os.Stat(filepath.Join(dir, cleanShutdownFile)); err == nil {
		t.Fatal("marker still present after reopen")
	}
	if len(filesWithExt(t, dir, ".tmp")) != 0 {
		t.Fatal("temp files survive Open")
	}
}

func TestReopenClean(t *testing.T) {
	cfg := testConfig()
	cfg.SegmentBytes = 1500
	cfg.IndexIntervalBytes = 250
	dir := t.TempDir()
	l := openLog(t, dir, cfg)
	batches := idemLog(t, l, 25)
	end, start, size := l.EndOffset(), l.StartOffset(), l.Size()
	type tsq struct {
		off, ts int64
		ok      bool
	}
	var queries []tsq
	for target := int64(9_990); target < 10_300; target += 3 {
		off, ts, ok, err := l.OffsetForTimestamp(target, end)
		if err != nil {
			t.Fatal(err)
		}
		queries = append(queries, tsq{off, ts, ok})
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	segs := filesWithExt(t, dir, ".log")
	if len(segs) < 3 {
		t.Fatalf("want several segments, have %v", segs)
	}
	l = openLog(t, dir, cfg)
	if l.EndOffset() != end || l.StartOffset() != start || l.Size() != size || l.DurableOffset() != end {
		t.Fatalf("after reopen: end %d start %d size %d durable %d; before: %d %d %d", l.EndOffset(), l.StartOffset(), l.Size(), l.DurableOffset(), end, start, size)
	}
	checkReadsMatch(t, l, batches)
	i := 0
	for target := int64(9_990); target < 10_300; target += 3 {
		off, ts, ok, err := l.OffsetForTimestamp(target, end)
		if err != nil || (tsq{off, ts, ok}) != queries[i] {
			t.Fatalf("OffsetForTimestamp(%d) after reopen = %d, %d, %v, %v; before %+v", target, off, ts, ok, err, queries[i])
		}
		i++
	}
	// Producer state survived: each of the last five batches is still a
	// duplicate, and the next sequence is accepted.
	for _, a := range batches[len(batches)-5:] {
		res, err := retry(t, l, a)
		if err != nil || !res.Duplicate || res.BaseOffset != a.base || res.LastOffset != a.last {
			t.Fatalf("retry of [%d, %d] after reopen: %+v, %v", a.base, a.last, res, err)
		}
	}
	if l.EndOffset() != end {
		t.Fatal("a duplicate was appended")
	}
	_, err := appendRaw(l, buildBatch(t, batchOpts{Idempotent: true, PID: 77, Seq: 3*25 + 1}), 1)
	wantErrIs(t, err, ErrOutOfOrderSeq)
	res := appendOpts(t, l, batchOpts{Idempotent: true, PID: 77, Seq: 3 * 25}, 10_500)
	if res.BaseOffset != end || res.Duplicate {
		t.Fatalf("next append after reopen: %+v", res)
	}
	for _, s := range segs {
		base := int64(0)
		fmt.Sscanf(s, "%020d.log", &base)
		data := segmentBytes(t, filepath.Join(dir, s))
		checkIndexFiles(t, dir, base, data, cfg.IndexIntervalBytes)
	}
}

// TestReopenKeepsMaxTimestamp: MaxTimestamp answers the same before and after
// a clean restart.
func TestReopenKeepsMaxTimestamp(t *testing.T) {
	cfg := testConfig()
	cfg.SegmentBytes = 600
	dir := t.TempDir()
	l := openLog(t, dir, cfg)
	// The largest timestamp is in a 4-record batch of the first segment.
	appendOpts(t, l, batchOpts{N: 4, BaseTS: 90_000, ValueSize: 50}, 1)
	appendOpts(t, l, batchOpts{N: 4, BaseTS: 99_990, ValueSize: 50}, 1) // max 99_993 at offsets 4-7
	for range 6 {
		appendOpts(t, l, batchOpts{N: 2, BaseTS: 50_000, ValueSize: 100}, 1)
	}
	off, ts, ok, err := l.MaxTimestamp()
	if err != nil || !ok || ts != 99_993 || off != 7 {
		t.Fatalf("MaxTimestamp = %d, %d, %v, %v; want offset 7", off, ts, ok, err)
	}
	if len(filesWithExt(t, dir, ".log")) < 2 {
		t.Fatal("want the maximum in an inactive segment")
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l = openLog(t, dir, cfg)
	off2, ts2, ok2, err := l.MaxTimestamp()
	if err != nil {
		t.Fatal(err)
	}
	if off2 != off || ts2 != ts || ok2 != ok {
		t.Fatalf("MaxTimestamp before a clean restart = (offset %d, ts %d), after = (offset %d, ts %d): Append/scan and openSegment's trusted path (time index) must record the same maxTSOffset", off, ts, off2, ts2)
	}
}

// lastBatchPos returns the position and length of the last batch in a .log
// file.
func lastBatchPos(t *testing.T, path string) (int64, int) {
	t.Helper()
	data := segmentBytes(t, path)
	bs := splitBatches(t, data)
	last := bs[len(bs)-1]
	return int64(len(data) - len(last)), len(last)
}

func activeSegmentPath(t *testing.T, dir string) string {
	t.Helper()
	logs := filesWithExt(t, dir, ".log")
	return filepath.Join(dir, logs[len(logs)-1])
}

func truncateFile(t *testing.T, path string, size int64) {
	t.Helper()
	if err := os.Truncate(path, size); err != nil {
		t.Fatal(err)
	}
}

func mutateFile(t *testing.T, path string, f func([]byte) []byte) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, f(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

// checkRecoveredTo opens a crashed copy and checks it recovered exactly the
// first keep batches, that the segment file was cut to them, and that
// appending (including producer 77's next sequence) continues right after.
func checkRecoveredTo(t *testing.T, dir string, cfg Config, batches []appended, keep int) *Log {
	t.Helper()
	l := openLog(t, dir, cfg)
	wantEnd := batches[keep-1].last + 1
	if l.EndOffset() != wantEnd || l.DurableOffset() != wantEnd {
		t.Fatalf("recovered end %d durable %d, want %d", l.EndOffset(), l.DurableOffset(), wantEnd)
	}
	checkReadsMatch(t, l, batches[:keep])
	var total int64
	for _, a := range batches[:keep] {
		total += int64(len(a.orig))
	}
	if l.Size() != total {
		t.Fatalf("recovered size %d, want %d", l.Size(), total)
	}
	// The lost batch, retried by its producer, is new again.
	if keep < len(batches) {
		res, err := retry(t, l, batches[keep])
		if err != nil || res.Duplicate || res.BaseOffset != wantEnd {
			t.Fatalf("retry of the lost batch: %+v, %v; want appended at %d", res, err, wantEnd)
		}
		got, err := l.Read(wantEnd, 1, l.EndOffset(), nil)
		if err != nil {
			t.Fatal(err)
		}
		sameBatch(t, got, batches[keep].orig, wantEnd, 7)
	}
	return l
}

func TestRecoveryTornTail(t *testing.T) {
	cfg := testConfig()
	cfg.SegmentBytes = 2000
	cfg.IndexIntervalBytes = 1 // index every batch, so the last entry points at the torn batch
	src := openLog(t, t.TempDir(), cfg)
	batches := idemLog(t, src, 14)
	active := filepath.Base(activeSegmentPath(t, src.dir))
	pos, n := lastBatchPos(t, filepath.Join(src.dir, active))
	for _, cut := range []int{1, 8, 11, 12, 20, 60, 61, 62, n / 2, n - 1} {
		t.Run(fmt.Sprint(cut), func(t *testing.T) {
			dir := crashCopy(t, src)
			truncateFile(t, filepath.Join(dir, active), pos+int64(cut))
			l := checkRecoveredTo(t, dir, cfg, batches, len(batches)-1)
			if got := segmentSize(t, filepath.Join(dir, active)); got != pos && got != pos+int64(n) {
				t.Fatalf("segment file is %d bytes after recovery and one append, want %d (or %d if the append rolled)", got, pos+int64(n), pos)
			}
			checkIndexFiles(t, dir, baseOf(t, active), segmentBytes(t, filepath.Join(dir, active)), cfg.IndexIntervalBytes)
			l.Close()
			// And recovery is stable across another crash-free restart.
			l2 := openLog(t, dir, cfg)
			if l2.EndOffset() != batches[len(batches)-1].last+1 {
				t.Fatalf("end after second open %d", l2.EndOffset())
			}
		})
	}
	t.Run("at boundary", func(t *testing.T) {
		dir := crashCopy(t, src)
		truncateFile(t, filepath.Join(dir, active), pos)
		checkRecoveredTo(t, dir, cfg, batches, len(batches)-1)
	})
	t.Run("intact", func(t *testing.T) {
		dir := crashCopy(t, src)
		l := checkRecoveredTo(t, dir, cfg, batches, len(batches))
		for _, a := range batches[len(batches)-5:] {
			res, err := retry(t, l, a)
			if err != nil || !res.Duplicate || res.BaseOffset != a.base {
				t.Fatalf("retry after crash: %+v, %v", res, err)
			}
		}
	})
}

func baseOf(t *testing.T, name string) int64 {
	t.Helper()
	var base int64
	if _, err := fmt.Sscanf(name, "%020d", &base); err != nil {
		t.Fatal(err)
	}
	return base
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestRecoveryWholeActiveSegmentTorn cuts into the active segment's only
// batch, leaving an empty segment.
func TestRecoveryWholeActiveSegmentTorn(t *testing.T) {
	cfg := testConfig()
	cfg.SegmentBytes = 600
	src := openLog(t, t.TempDir(), cfg)
	batches := idemLog(t, src, 6)
	active := activeSegmentPath(t, src.dir)
	bs := splitBatches(t, segmentBytes(t, active))
	if len(bs) != 1 {
		t.Skipf("setup: active segment has %d batches", len(bs))
	}
	dir := crashCopy(t, src)
	truncateFile(t, filepath.Join(dir, filepath.Base(active)), 30)
	checkRecoveredTo(t, dir, cfg, batches, len(batches)-1)
}

func TestRecoveryFlippedByte(t *testing.T) {
	for _, compacted := range []bool{false, true} {
		t.Run(fmt.Sprintf("compacted=%v", compacted), func(t *testing.T) { testRecoveryFlippedByte(t, compacted) })
	}
}

func testRecoveryFlippedByte(t *testing.T, compacted bool) {
	cfg := testConfig()
	cfg.Compacted = compacted
	src := openLog(t, t.TempDir(), cfg)
	batches := idemLog(t, src, 6)
	active := filepath.Base(activeSegmentPath(t, src.dir))
	pos, n := lastBatchPos(t, filepath.Join(src.dir, active))
	var baseOffsetBug string
	for i := range n {
		if compacted && i >= batchtest.OffLength {
			break // only the base offset is judged differently in a compacted log
		}
		dir := crashCopy(t, src)
		mutateFile(t, filepath.Join(dir, active), func(b []byte) []byte { b[pos+int64(i)] ^= 0x20; return b })
		l, err := Open(dir, cfg, nopLogger())
		if err != nil {
			t.Fatalf("flip at %d: Open: %v", i, err)
		}
		switch {
		case i >= batchtest.OffLeaderEpoch && i < batchtest.OffMagic:
			// The leader epoch is not under the CRC: the batch survives.
			if l.EndOffset() != batches[len(batches)-1].last+1 {
				t.Fatalf("flip in leader epoch byte %d: end %d", i, l.EndOffset())
			}
		case i < batchtest.OffLength:
			// The base offset is not under the CRC either. A log that is
			// never compacted has no gaps: any other base offset than its
			// end is damage. In a compacted log gaps are legal, so recovery
			// can only refuse a base offset going backwards or past the
			// segment's int32 relative offsets (plausibleBase); a flip that
			// still goes forward within them is taken as a gap, as in Kafka.
			lastB := batches[len(batches)-1]
			flipped := lastB.base ^ 0x20<<(8*(7-i))
			want := lastB.base // cut before the batch
			if refused := flipped < lastB.base || flipped+(lastB.last-lastB.base) > maxRelOffset; compacted && !refused {
				want = flipped + (lastB.last - lastB.base) + 1
			}
			if i < 4 && want != lastB.base {
				t.Fatalf("setup: flip at byte %d should be refused", i)
			}
			if l.EndOffset() != want && baseOffsetBug == "" {
				baseOffsetBug = fmt.Sprintf("flipping byte %d of the last batch's base offset (to %d): recovered end offset %d, want %d", i, flipped, l.EndOffset(), want)
			}
		default:
			if l.EndOffset() != batches[len(batches)-1].base {
				t.Fatalf("flip at byte %d: recovered end %d, want %d (cut before the corrupt batch)", i, l.EndOffset(), batches[len(batches)-1].base)
			}
			if got := fileSize(t, filepath.Join(dir, active)); got != pos {
				t.Fatalf("flip at byte %d: segment is %d bytes, want cut to %d", i, got, pos)
			}
			checkReadsMatch(t, l, batches[:len(batches)-1])
		}
		l.Close()
	}
	if baseOffsetBug != "" {
		t.Fatalf("recovery misjudges a batch whose base offset (not covered by the CRC) is corrupt: %s. segment.scan (plausibleBase and the contiguity check, segment.go) must refuse a base other than the log end in a log that is not compacted; in a compacted one, a base below the previous batch's end or past the segment's int32 relative offsets", baseOffsetBug)
	}
}

// TestRecoveryFlippedByteEarlierBatch: corruption in an earlier batch of the
// active segment cuts everything from it on.
func TestRecoveryFlippedByteEarlierBatch(t *testing.T) {
	cfg := testConfig()
	src := openLog(t, t.TempDir(), cfg)
	batches := idemLog(t, src, 8)
	dir := crashCopy(t, src)
	var pos int
	for _, a := range batches[:3] {
		pos += len(a.orig)
	}
	mutateFile(t, filepath.Join(dir, "00000000000000000000.log"), func(b []byte) []byte { b[pos+70] ^= 1; return b })
	checkRecoveredTo(t, dir, cfg, batches, 3)
}

func TestRecoveryGarbageTail(t *testing.T) {
	cfg := testConfig()
	cfg.SegmentBytes = 1500
	src := openLog(t, t.TempDir(), cfg)
	batches := idemLog(t, src, 10)
	active := filepath.Base(activeSegmentPath(t, src.dir))
	rng := rand.New(rand.NewSource(3))
	validHeader := buildBatch(t, batchOpts{N: 2})[:recordbatch.HeaderLen]
	binary.BigEndian.PutUint64(validHeader, uint64(batches[len(batches)-1].last+1))
	tails := map[string][]byte{
		"zeros 1":                 make([]byte, 1),
		"zeros 12":                make([]byte, 12),
		"zeros 61":                make([]byte, 61),
		"zeros 4096":              make([]byte, 4096),
		"zeros 100000":            make([]byte, 100_000),
		"random":                  func() []byte { b := make([]byte, 500); rng.Read(b); return b }(),
		"header only":             validHeader,
		"header and part of body": append(bytes.Clone(validHeader), 1, 2, 3),
		"copy of last batch":      bytes.Clone(batches[len(batches)-1].orig), // base offset 0 < end
	}
	for name, tail := range tails {
		t.Run(name, func(t *testing.T) {
			dir := crashCopy(t, src)
			path := filepath.Join(dir, active)
			data := segmentBytes(t, path)
			before := int64(len(data))
			mutateFile(t, path, func([]byte) []byte { return append(bytes.Clone(data), tail...) })
			checkRecoveredTo(t, dir, cfg, batches, len(batches))
			if got := fileSize(t, path); got != before {
				t.Fatalf("segment %d bytes after recovery, want %d", got, before)
			}
		})
	}
	// Garbage after a clean shutdown (the file changed behind our back) is
	// cut too.
	t.Run("after clean close", func(t *testing.T) {
		dir := crashCopy(t, src)
		l := openLog(t, dir, cfg)
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		mutateFile(t, filepath.Join(dir, active), func(b []byte) []byte { return append(b, make([]byte, 300)...) })
		checkRecoveredTo(t, dir, cfg, batches, len(batches))
	})
}

func corruptIndexes(t *testing.T, dir string, how func(ext string, old []byte) []byte) {
	t.Helper()
	for _, ext := range []string{".index", ".timeindex"} {
		for _, name := range filesWithExt(t, dir, ext) {
			path := filepath.Join(dir, name)
			nb := how(ext, mustRead(t, path))
			if nb == nil {
				if err := os.Remove(path); err != nil {
					t.Fatal(err)
				}
				continue
			}
			if err := os.WriteFile(path, nb, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// checkIndexesRebuilt checks that every segment's index files are again
// exactly what the log implies, and that reads and time queries agree with
// the reference answers.
func checkIndexesRebuilt(t *testing.T, l *Log, cfg Config, batches []appended, ref func(int64) (int64, int64, bool)) {
	t.Helper()
	checkReadsMatch(t, l, batches)
	for _, a := range batches {
		for off := a.base; off <= a.last; off++ {
			data, err := l.Read(off, 1, l.EndOffset(), nil)
			if err != nil {
				t.Fatalf("Read(%d): %v", off, err)
			}
			sameBatch(t, data, a.orig, a.base, 7)
		}
	}
	for target := int64(9_990); target < 10_200; target++ {
		off, ts, ok, err := l.OffsetForTimestamp(target, l.EndOffset())
		wo, wts, wok := ref(target)
		if err != nil || off != wo || ts != wts || ok != wok {
			t.Fatalf("OffsetForTimestamp(%d) = %d, %d, %v, %v; want %d, %d, %v", target, off, ts, ok, err, wo, wts, wok)
		}
	}
	if _, ts, _, _ := l.MaxTimestamp(); ts != 10_000+int64(len(batches)-1)*10+2 {
		t.Fatalf("MaxTimestamp ts %d", ts)
	}
	for _, name := range filesWithExt(t, l.dir, ".log") {
		checkIndexFiles(t, l.dir, baseOf(t, name), segmentBytes(t, filepath.Join(l.dir, name)), cfg.IndexIntervalBytes)
	}
}

func TestRecoveryRebuildsIndexes(t *testing.T) {
	cfg := testConfig()
	cfg.SegmentBytes = 1500
	cfg.IndexIntervalBytes = 200
	src := openLog(t, t.TempDir(), cfg)
	batches := idemLog(t, src, 20)
	var recs []tsRecord
	for i, a := range batches {
		for j := range 3 {
			recs = append(recs, tsRecord{a.base + int64(j), 10_000 + int64(i)*10 + int64(j)})
		}
	}
	ref := func(target int64) (int64, int64, bool) { return bruteForceTS(recs, target, math.MaxInt64) }
	rng := rand.New(rand.NewSource(9))
	corruptions := []struct {
		name string
		how  func(ext string, old []byte) []byte
	}{
		{"deleted", func(string, []byte) []byte { return nil }},
		{"partial entry", func(_ string, old []byte) []byte { return append(old, 1, 2, 3) }},
		{"all 0xff", func(_ string, old []byte) []byte { return bytes.Repeat([]byte{0xff}, len(old)) }},
		{"random garbage", func(_ string, old []byte) []byte {
			b := make([]byte, len(old))
			rng.Read(b)
			return b
		}},
		{"entries past the log", func(ext string, old []byte) []byte {
			if ext == ".timeindex" {
				return old
			}
			return binary.BigEndian.AppendUint32(binary.BigEndian.AppendUint32(bytes.Clone(old), 1<<20), 1<<30)
		}},
		{"out of order", func(_ string, old []byte) []byte {
			if len(old) < 24 {
				return append(old, old...)
			}
			return append(bytes.Clone(old[len(old)/2:]), old[:len(old)/2]...)
		}},
	}
	for _, clean := range []bool{true, false} {
		for _, c := range corruptions {
			t.Run(fmt.Sprintf("clean=%v/%s", clean, c.name), func(t *testing.T) {
				dir := crashCopy(t, src)
				if clean {
					l := openLog(t, dir, cfg)
					if err := l.Close(); err != nil {
						t.Fatal(err)
					}
				}
				corruptIndexes(t, dir, c.how)
				l := openLog(t, dir, cfg)
				if l.EndOffset() != batches[len(batches)-1].last+1 {
					t.Fatalf("end %d", l.EndOffset())
				}
				checkIndexesRebuilt(t, l, cfg, batches, ref)
			})
		}
	}
}

// TestRecoveryPlausibleTimeIndexGarbage: a .timeindex whose content is
// well-formed (whole entries, increasing) but does not describe the log must
// not be trusted: the time index feeds ListOffsets and time retention.
func TestRecoveryPlausibleTimeIndexGarbage(t *testing.T) {
	cfg := testConfig()
	cfg.SegmentBytes = 1500
	cfg.RetentionMs = 1_000_000
	src := openLog(t, t.TempDir(), cfg)
	idemLog(t, src, 20)
	if err := src.Close(); err != nil {
		t.Fatal(err)
	}
	var problems []string
	for _, garbageTS := range []int64{1, 1 << 50} {
		problems = append(problems, plausibleTimeIndex(t, src.dir, cfg, garbageTS)...)
	}
	if len(problems) > 0 {
		t.Fatalf("regression: a well-formed but wrong .timeindex is trusted after a clean shutdown: loadIndexFiles (index.go) validates time entries only for order, never against the segment (the first entry is not checked at all, rel is not bounded by the segment), and openSegment (segment.go) takes maxTS from it for inactive segments. Effects: %q", problems)
	}
}

// plausibleTimeIndex replaces every .timeindex of a copy of srcDir with the
// single entry (ts, 0) and reports what goes wrong.
func plausibleTimeIndex(t *testing.T, srcDir string, cfg Config, ts int64) []string {
	dir := filepath.Join(t.TempDir(), "copy")
	copyDir(t, srcDir, dir)
	for _, name := range filesWithExt(t, dir, ".timeindex") {
		entry := binary.BigEndian.AppendUint32(binary.BigEndian.AppendUint64(nil, uint64(ts)), 0)
		if err := os.WriteFile(filepath.Join(dir, name), entry, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	l := openLog(t, dir, cfg)
	defer l.Close()
	var problems []string
	pfx := fmt.Sprintf("entry (ts %d, rel 0): ", ts)
	if off, rts, ok, err := l.OffsetForTimestamp(10_000, l.EndOffset()); err != nil || !ok || off != 0 || rts != 10_000 {
		problems = append(problems, pfx+fmt.Sprintf("OffsetForTimestamp(10000) = (%d, %d, %v, %v), want (0, 10000, true)", off, rts, ok, err))
	}
	if _, mts, _, _ := l.MaxTimestamp(); mts != 10_192 {
		problems = append(problems, pfx+fmt.Sprintf("MaxTimestamp ts %d, want 10192", mts))
	}
	// Every record is 10_000-10_192 ms old at now=10_500: nothing expires;
	// at now=10^7 everything but the active segment has.
	if n, err := l.DeleteOldSegments(10_500); err != nil || n != 0 {
		problems = append(problems, pfx+fmt.Sprintf("DeleteOldSegments(now=10500, retention.ms 1e6) deleted %d segments of fresh data (%v)", n, err))
	}
	segs := len(filesWithExt(t, dir, ".log"))
	if n, err := l.DeleteOldSegments(10_000_000); err != nil || n != segs-1 {
		problems = append(problems, pfx+fmt.Sprintf("DeleteOldSegments(now=1e7, retention.ms 1e6) deleted %d of %d expired segments (%v)", n, segs-1, err))
	}
	return problems
}

// TestRecoveryShortIndexFiles: an inactive segment whose .index/.timeindex
// came back empty or shortened (a damaged file, a copy, or a crash before
// b8d6794 started syncing them at roll) must not be trusted: the indexes do
// not cover the segment.
func TestRecoveryShortIndexFiles(t *testing.T) {
	cfg := testConfig()
	cfg.SegmentBytes = 1500
	cfg.IndexIntervalBytes = 200
	src := openLog(t, t.TempDir(), cfg)
	batches := idemLog(t, src, 20)
	var recs []tsRecord
	for i, a := range batches {
		for j := range 3 {
			recs = append(recs, tsRecord{a.base + int64(j), 10_000 + int64(i)*10 + int64(j)})
		}
	}
	var problems []string
	for _, clean := range []bool{true, false} {
		for _, keep := range []int{0, 1} { // entries kept in each index file
			dir := crashCopy(t, src)
			if clean {
				l := openLog(t, dir, cfg)
				if err := l.Close(); err != nil {
					t.Fatal(err)
				}
			}
			corruptIndexes(t, dir, func(ext string, old []byte) []byte {
				n := 8
				if ext == ".timeindex" {
					n = 12
				}
				return old[:min(len(old), keep*n)]
			})
			l := openLog(t, dir, cfg)
			for _, target := range []int64{9_990, 10_011, 10_100, 10_150} {
				off, ts, ok, err := l.OffsetForTimestamp(target, l.EndOffset())
				wo, wts, wok := bruteForceTS(recs, target, math.MaxInt64)
				if err != nil || off != wo || ts != wts || ok != wok {
					problems = append(problems, fmt.Sprintf("clean=%v, %d entries kept: OffsetForTimestamp(%d) = (%d, %d, %v), want (%d, %d, %v)", clean, keep, target, off, ts, ok, wo, wts, wok))
					break
				}
			}
			checkReadsMatch(t, l, batches)
			l.Close()
		}
	}
	if len(problems) > 0 {
		t.Fatalf("regression: empty or shortened index files of a non-empty inactive segment are trusted (loadIndexFiles accepts them; Open recovers only the active segment, and only after an unclean shutdown), so OffsetForTimestamp skips segments whose time index does not reach their records (query.go:19). %q", problems)
	}
}

// TestRecoveryProducerStateWithoutSnapshots: the producer table is a
// function of the log; with every snapshot gone it is rebuilt by replay.
func TestRecoveryProducerStateWithoutSnapshots(t *testing.T) {
	cfg := testConfig()
	cfg.SegmentBytes = 1200
	for _, clean := range []bool{true, false} {
		t.Run(fmt.Sprintf("clean=%v", clean), func(t *testing.T) {
			src := openLog(t, t.TempDir(), cfg)
			batches := idemLog(t, src, 15)
			// A second producer that bumped its epoch part way.
			appendOpts(t, src, batchOpts{Idempotent: true, PID: 88, Epoch: 0, Seq: 0}, 1)
			appendOpts(t, src, batchOpts{Idempotent: true, PID: 88, Epoch: 1, Seq: 0, N: 2}, 1)
			dir := crashCopy(t, src)
			if clean {
				l := openLog(t, dir, cfg)
				if err := l.Close(); err != nil {
					t.Fatal(err)
				}
			}
			snaps := filesWithExt(t, dir, ".snapshot")
			if len(snaps) == 0 {
				t.Fatal("setup: no snapshots to delete")
			}
			for _, s := range snaps {
				os.Remove(filepath.Join(dir, s))
			}
			l := openLog(t, dir, cfg)
			for _, a := range batches[len(batches)-5:] {
				res, err := retry(t, l, a)
				if err != nil || !res.Duplicate || res.BaseOffset != a.base || res.LastOffset != a.last {
					t.Fatalf("retry of [%d, %d]: %+v, %v", a.base, a.last, res, err)
				}
			}
			_, err := appendRaw(l, buildBatch(t, batchOpts{Idempotent: true, PID: 77, Seq: 3*15 + 3}), 1)
			wantErrIs(t, err, ErrOutOfOrderSeq)
			_, err = appendRaw(l, buildBatch(t, batchOpts{Idempotent: true, PID: 88, Epoch: 0, Seq: 1}), 1)
			wantErrIs(t, err, ErrInvalidEpoch)
			res, err := appendRaw(l, buildBatch(t, batchOpts{Idempotent: true, PID: 88, Epoch: 1, Seq: 0, N: 2}), 1)
			if err != nil || !res.Duplicate {
				t.Fatalf("retry of producer 88's epoch-1 batch: %+v, %v", res, err)
			}
			end := l.EndOffset()
			res = appendOpts(t, l, batchOpts{Idempotent: true, PID: 77, Seq: 3 * 15}, 1)
			if res.Duplicate || res.BaseOffset != end {
				t.Fatalf("next batch: %+v", res)
			}
		})
	}
}

// TestRecoveryCorruptSnapshot: a damaged snapshot is ignored and the state
// rebuilt from the log.
func TestRecoveryCorruptSnapshot(t *testing.T) {
	cfg := testConfig()
	src := openLog(t, t.TempDir(), cfg)
	batches := idemLog(t, src, 8)
	if err := src.Close(); err != nil {
		t.Fatal(err)
	}
	for _, mut := range []struct {
		name string
		f    func([]byte) []byte
	}{
		{"flipped", func(b []byte) []byte { b[len(b)/2] ^= 1; return b }},
		{"truncated", func(b []byte) []byte { return b[:len(b)-5] }},
		{"empty", func([]byte) []byte { return nil }},
		{"wrong version", func(b []byte) []byte { b[4] = 9; return b }},
	} {
		t.Run(mut.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "d")
			copyDir(t, src.dir, dir)
			for _, s := range filesWithExt(t, dir, ".snapshot") {
				mutateFile(t, filepath.Join(dir, s), mut.f)
			}
			l := openLog(t, dir, cfg)
			for _, a := range batches[len(batches)-5:] {
				res, err := retry(t, l, a)
				if err != nil || !res.Duplicate || res.BaseOffset != a.base {
					t.Fatalf("retry of [%d, %d]: %+v, %v", a.base, a.last, res, err)
				}
			}
		})
	}
}

// TestRecoveryTruncatedBehindSnapshot: a clean close writes a snapshot at
// the end offset; if the log is later cut below that offset (a corrupt batch
// found by recovery), the snapshot describes batches that are gone and must
// not be used.
func TestRecoveryTruncatedBehindSnapshot(t *testing.T) {
	cfg := testConfig()
	dir := t.TempDir()
	l := openLog(t, dir, cfg)
	batches := idemLog(t, l, 6)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l = openLog(t, dir, cfg)
	// Crash later, with batch 3 (before the snapshot at the old end) damaged.
	crashed := crashCopy(t, l)
	var pos int
	for _, a := range batches[:3] {
		pos += len(a.orig)
	}
	mutateFile(t, filepath.Join(crashed, "00000000000000000000.log"), func(b []byte) []byte { b[pos+40] ^= 0xff; return b })
	r := checkRecoveredTo(t, crashed, cfg, batches, 3)
	// Batches 4 and 5 are gone; their sequences must be accepted again in
	// order, not reported as duplicates of vanished offsets.
	res, err := retry(t, r, batches[4])
	if err != nil || res.Duplicate {
		t.Fatalf("retry of batch 4 after batch 3 was re-appended: %+v, %v", res, err)
	}
	if snaps := filesWithExt(t, crashed, ".snapshot"); len(snaps) > 0 {
		for _, s := range snaps {
			if baseOf(t, s) > r.EndOffset() {
				t.Fatalf("snapshot %s beyond the log end %d survives", s, r.EndOffset())
			}
		}
	}
}

// TestRecoveryInactiveSegmentTorn: a sealed segment found torn (a roll
// fsyncs it, so this is damage, not a crash) is cut without error, what
// survived is served, and the log ends there.
func TestRecoveryInactiveSegmentTorn(t *testing.T) {
	cfg := testConfig()
	cfg.SegmentBytes = 1000
	src := openLog(t, t.TempDir(), cfg)
	idemLog(t, src, 12)
	logs := filesWithExt(t, src.dir, ".log")
	if len(logs) < 3 {
		t.Fatal("want several segments")
	}
	dir := crashCopy(t, src)
	first := filepath.Join(dir, logs[0])
	truncateFile(t, first, fileSize(t, first)-10)
	l := openLog(t, dir, cfg)
	// The log ends at the tear: the segments after it are gone too, so no
	// hole is left behind a log that looks whole.
	if second := baseOf(t, logs[1]); l.EndOffset() >= second {
		t.Fatalf("end %d, want below the second segment's base %d", l.EndOffset(), second)
	}
	if got := filesWithExt(t, dir, ".log"); len(got) != 1 {
		t.Fatalf("segments after recovery: %v, want the torn one only", got)
	}
	data, err := l.Read(0, 1<<20, l.EndOffset(), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range splitBatches(t, data) {
		if err := recordbatch.CheckCRC(b); err != nil {
			t.Fatal(err)
		}
	}
	if got := fileSize(t, first); got >= fileSize(t, filepath.Join(src.dir, logs[0])) {
		t.Fatalf("torn inactive segment not cut: %d bytes", got)
	}
}

func nopLogger() zerolog.Logger { return zerolog.Nop() }

// TestRecoveryBaseOffsetOverflow: the base offset is not under the CRC, so a
// single damaged field can claim any offset. A last batch stored at
// MaxInt64-1 (3 records) makes recovery compute a negative end offset; Open
// must refuse that batch (cut it off), not crash. Open runs in a child
// process because the failure mode is a fatal stack overflow.
func TestRecoveryBaseOffsetOverflow(t *testing.T) {
	if dir := os.Getenv("FJORD_STORAGE_OPEN_CHILD"); dir != "" {
		l, err := Open(dir, testConfig(), zerolog.Nop())
		if err != nil {
			fmt.Println("open error:", err)
			os.Exit(3)
		}
		fmt.Println("end offset", l.EndOffset())
		if l.EndOffset() != 3 {
			os.Exit(4)
		}
		l.Close()
		os.Exit(0)
	}
	cfg := testConfig()
	src := openLog(t, t.TempDir(), cfg)
	appendOpts(t, src, batchOpts{N: 3}, 1)
	appendOpts(t, src, batchOpts{N: 3}, 1)
	dir := crashCopy(t, src)
	pos, _ := lastBatchPos(t, filepath.Join(dir, "00000000000000000000.log"))
	mutateFile(t, filepath.Join(dir, "00000000000000000000.log"), func(b []byte) []byte {
		binary.BigEndian.PutUint64(b[pos:], math.MaxInt64-1)
		return b
	})
	cmd := exec.Command(os.Args[0], "-test.run=^TestRecoveryBaseOffsetOverflow$", "-test.timeout=5s")
	cmd.Env = append(os.Environ(), "FJORD_STORAGE_OPEN_CHILD="+dir)
	out, err := cmd.CombinedOutput()
	if err != nil {
		how := "child failed"
		switch {
		case bytes.Contains(out, []byte("stack overflow")):
			how = "fatal stack overflow"
		case bytes.Contains(out, []byte("test timed out")):
			how = "Open did not return within 5s"
		}
		if bytes.Contains(out, []byte("storage.Open(")) && bytes.Count(out, []byte("storage.Open(")) > 3 {
			how += ", stack full of recursive Open calls (`return Open(dir, cfg, log)` in log.go)"
		}
		t.Fatalf("regression: Open of a segment whose last batch's base offset field (not under the CRC) reads MaxInt64-1, 3 records: %s (%v). segment.scan accepts any base offset >= next, so next = base+lastOffsetDelta+1 overflows to a negative end offset; Open then finds snapshot offset -1 > end (`if snapAt > last.next`), deletes the snapshots and calls itself again (`return Open(dir, cfg, log)`), forever", how, err)
	}
}

// damagedSealedLog writes 12 batches into segments of 500 bytes, closes
// the log cleanly and flips a byte in the records of the second batch of
// the second segment. It returns the log's directory, the batches, the
// segment files and the index of the damaged batch.
func damagedSealedLog(t *testing.T, cfg Config) (dir string, batches []appended, logs []string, bad int) {
	t.Helper()
	cfg.SegmentBytes = 500 // a few batches per segment
	dir = t.TempDir()
	src := openLog(t, dir, cfg)
	batches = idemLog(t, src, 12)
	src.Close()
	logs = filesWithExt(t, dir, ".log")
	if len(logs) < 3 {
		t.Fatalf("want at least 3 segments, have %v", logs)
	}
	segBase := baseOf(t, logs[1])
	bad = -1
	for i, a := range batches {
		if a.base == segBase {
			bad = i + 1 // the second batch of the segment
		}
	}
	if bad <= 0 || bad >= len(batches) || batches[bad].base >= baseOf(t, logs[2]) {
		t.Fatalf("no second batch in segment %d", segBase)
	}
	mutateFile(t, filepath.Join(dir, logs[1]), func(b []byte) []byte { b[len(batches[bad-1].orig)+70] ^= 1; return b })
	return dir, batches, logs, bad
}

// TestReadRefusesCorruptSealedSegment: a clean open trusts sealed
// segments (only their tail after the last index entry is walked), so a
// byte flipped in one is found by the read path instead: batches before the
// bad one are served, the bad one never; Read at it reports where the log
// stops being trustworthy, and truncating there leaves a clean log that
// appends continue.
func TestReadRefusesCorruptSealedSegment(t *testing.T) {
	cfg := testConfig()
	cfg.SegmentBytes = 500
	cfg.IndexIntervalBytes = 1 // every batch indexed: open walks only the last
	dir, batches, logs, bad := damagedSealedLog(t, cfg)
	segBase := baseOf(t, logs[1])

	l := openLog(t, dir, cfg)
	if l.EndOffset() != batches[len(batches)-1].last+1 {
		t.Fatalf("end %d: a clean open was not expected to look at a sealed segment", l.EndOffset())
	}
	// A read spanning the bad batch stops before it.
	data, err := l.Read(segBase, 1<<20, l.EndOffset(), nil)
	if err != nil {
		t.Fatalf("Read(%d): %v", segBase, err)
	}
	if got := splitBatches(t, data); len(got) != 1 || recordbatch.LastOffset(got[0]) != batches[bad-1].last {
		t.Fatalf("Read(%d) returned %d batches, want only the one before the corrupt batch", segBase, len(got))
	}
	// A read starting at it fails, and says where.
	for _, off := range []int64{batches[bad].base, batches[bad].last} {
		_, err := l.Read(off, 1<<20, l.EndOffset(), nil)
		var ce *CorruptLogError
		if !errors.As(err, &ce) || !errors.Is(err, ErrCorruptLog) {
			t.Fatalf("Read(%d) = %v, want a *CorruptLogError", off, err)
		}
		if ce.Offset != off || ce.Segment != segBase {
			t.Fatalf("Read(%d): %+v", off, ce)
		}
	}
	if err := l.Truncate(batches[bad].base); err != nil {
		t.Fatal(err)
	}
	if l.EndOffset() != batches[bad].base {
		t.Fatalf("end after truncate %d, want %d", l.EndOffset(), batches[bad].base)
	}
	checkReadsMatch(t, l, batches[:bad])
	appendOpts(t, l, batchOpts{N: 2, ValueSize: 10}, 20_000)
	if l.EndOffset() != batches[bad].base+2 {
		t.Fatalf("append after truncate: end %d", l.EndOffset())
	}
}

// TestRecoveryDamagedSealedSegmentEndsTheLog: when recovery does find a
// sealed segment damaged (here its index is gone, so it is scanned with
// CRCs), the log ends at the damage: the later segments go too, so no hole
// is left that would pass for a whole log.
func TestRecoveryDamagedSealedSegmentEndsTheLog(t *testing.T) {
	cfg := testConfig()
	cfg.SegmentBytes = 500
	dir, batches, logs, bad := damagedSealedLog(t, cfg)
	removeFile(t, dir, strings.TrimSuffix(logs[1], ".log")+".index")
	l := checkRecoveredTo(t, dir, cfg, batches, bad)
	if got := filesWithExt(t, dir, ".log"); len(got) != 2 {
		t.Fatalf("segments after recovery: %v, want the first two", got)
	}
	l.Close()
	// The next open finds the log as left: the damage's batches gone, the
	// retried batch (checkRecoveredTo appends it) in their place.
	l = openLog(t, dir, cfg)
	if l.EndOffset() != batches[bad].last+1 {
		t.Fatalf("reopened end %d, want %d", l.EndOffset(), batches[bad].last+1)
	}
	checkReadsMatch(t, l, batches[:bad+1])
}

// TestOpenTrustsGoodIndexes: opening (clean or not) walks a sealed
// segment's tail only and keeps its index files; it once rebuilt every
// index, CRC-scanning every segment, on every start.
func TestOpenTrustsGoodIndexes(t *testing.T) {
	cfg := testConfig()
	cfg.SegmentBytes = 500
	for _, clean := range []bool{true, false} {
		dir := t.TempDir()
		src := openLog(t, dir, cfg)
		idemLog(t, src, 12)
		if clean {
			src.Close()
		} else {
			dir = crashCopy(t, src)
		}
		logs := filesWithExt(t, dir, ".log")
		old := time.Unix(1_000_000, 0)
		for _, name := range filesWithExt(t, dir, ".index") {
			if err := os.Chtimes(filepath.Join(dir, name), old, old); err != nil {
				t.Fatal(err)
			}
		}
		l := openLog(t, dir, cfg)
		for _, name := range logs[:len(logs)-1] {
			ix := strings.TrimSuffix(name, ".log") + ".index"
			st, err := os.Stat(filepath.Join(dir, ix))
			if err != nil {
				t.Fatal(err)
			}
			if !st.ModTime().Equal(old) {
				t.Fatalf("clean=%v: sealed segment %s's index was rewritten at open", clean, ix)
			}
		}
		l.Close()
	}
}

// TestOpenNewDirectoryDurable: a partition directory that Open creates must
// survive a power loss once data in it is acknowledged. Syncing the
// directory (as creating a segment does) makes the names in it durable, not
// its own name in its parent; without the parent's sync, POSIX lets a crash
// lose the whole partition, acknowledged records and all (TestCrashRecovery
// found it; ext4 usually commits the name with the next fsync anyway).
//
// The broker makes the directory itself (to write partition.metadata)
// before Open: Open must cover that case too.
func TestOpenNewDirectoryDurable(t *testing.T) {
	for _, made := range []string{"by Open", "by the caller"} {
		t.Run(made, func(t *testing.T) {
			fs := NewMemFS()
			if made == "by the caller" {
				if err := fs.MkdirAll("/data/logs", 0o755); err != nil {
					t.Fatal(err)
				}
				fs.SyncDir("/")
				fs.SyncDir("/data")
				if err := fs.MkdirAll("/data/logs/topic-0", 0o755); err != nil {
					t.Fatal(err)
				}
			}
			cfg := testConfig()
			cfg.FS = fs
			l := openLog(t, "/data/logs/topic-0", cfg)
			appendOpts(t, l, batchOpts{N: 3}, 1)
			if err := l.Flush(); err != nil {
				t.Fatal(err)
			}
			cfg.FS = fs.CrashClone(nil)
			l2 := openLog(t, "/data/logs/topic-0", cfg)
			if l2.EndOffset() != 3 {
				t.Fatalf("regression: after a crash the log ends at %d, want 3: the partition directory (made %s) was never synced into its parent, so its own name was not durable", l2.EndOffset(), made)
			}
		})
	}
}

// syncDirFailsFS is a MemFS whose directory syncs fail.
type syncDirFailsFS struct{ *MemFS }

func (syncDirFailsFS) SyncDir(dir string) error {
	return &os.PathError{Op: "sync", Path: dir, Err: syscall.EIO}
}

// TestOpenCleanMarkerRemovalDurable: Open after a clean shutdown removes
// the clean-shutdown marker and must know the removal is durable before it
// takes appends (or truncates); otherwise a crash may bring the marker
// back, and the next Open would trust the active segment's index and skip
// the CRC checks of its tail. Until the log changes, a marker that comes
// back tells the truth, so Open itself does not wait for the removal.
func TestOpenCleanMarkerRemovalDurable(t *testing.T) {
	fs := NewMemFS()
	cfg := testConfig()
	cfg.FS = fs
	l := openLog(t, "/data/topic-0", cfg)
	appendOpts(t, l, batchOpts{N: 3}, 1)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	cfg.FS = syncDirFailsFS{fs}
	l2, err := Open("/data/topic-0", cfg, zerolog.Nop())
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	defer l2.Close()
	if _, err := appendRaw(l2, buildBatch(t, batchOpts{N: 1}), 2); !errors.Is(err, syscall.EIO) {
		t.Fatalf("regression: an append to a log whose clean-shutdown marker could not durably be removed: %v, want the sync's error", err)
	}
	if err := l2.Truncate(1); !errors.Is(err, syscall.EIO) {
		t.Fatalf("regression: a truncation of a log whose clean-shutdown marker could not durably be removed: %v, want the sync's error", err)
	}
	if l2.EndOffset() != 3 {
		t.Fatalf("the log changed: end %d, want 3", l2.EndOffset())
	}
}

// TestReopenReplayHeldBounded: opening a log replays the batches after
// its producer snapshot into the producer state; what the open holds for
// that is bounded by those batches, not by the active segment. A soak's
// nodes peaked at 100-250 MiB at each restart, 90 bytes for every batch
// of a 1 GiB active segment, though a clean shutdown's snapshot left
// nothing to replay, and a crash's replay has no rebuild to wait for.
func TestReopenReplayHeldBounded(t *testing.T) {
	const n = 20_000 // about 1.8 MB held before (and twice that allocated)
	allocated := func(open func() *Log) uint64 {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		l := open()
		runtime.ReadMemStats(&after)
		if got := l.EndOffset(); got != 3*n {
			t.Fatalf("reopened log ends at %d, want %d", got, 3*n)
		}
		return after.TotalAlloc - before.TotalAlloc
	}
	dir := t.TempDir()
	l := openLog(t, dir, testConfig())
	idemLogCodecs(t, l, n, false) // what replay holds is per batch, whatever its codec
	crashed := crashCopy(t, l)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	clean := allocated(func() *Log { return openLog(t, dir, testConfig()) })
	crash := allocated(func() *Log { return openLog(t, crashed, testConfig()) })
	t.Logf("%d batches in the active segment: a clean open allocated %d KiB, an open after a crash %d KiB", n, clean>>10, crash>>10)
	for what, got := range map[string]uint64{"clean": clean, "after a crash": crash} {
		if got > 1<<20 {
			t.Errorf("an open (%s) allocated %d KiB for %d batches: it holds every batch it replays", what, got>>10, n)
		}
	}
}
