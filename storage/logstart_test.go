package storage

import (
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/fjordlog/fjord/storage/recordbatch"
	"github.com/rs/zerolog"
)

// startLog is a log of three segments of four 5-record batches each:
// offsets [0, 20), [20, 40), [40, 60), the last one active.
func startLog(t *testing.T, dir string) *Log {
	t.Helper()
	cfg := testConfig()
	cfg.SegmentMs = 1000
	l := openLog(t, dir, cfg)
	now := int64(1_000_000)
	for seg := 0; seg < 3; seg++ {
		for i := 0; i < 4; i++ {
			appendOpts(t, l, batchOpts{N: 5, BaseTS: now, ValueSize: 20}, now)
		}
		now += 1000
	}
	if l.SegmentCount() != 3 || l.EndOffset() != 60 {
		t.Fatalf("setup: %d segments ending at %d", l.SegmentCount(), l.EndOffset())
	}
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	return l
}

func TestAdvanceStartOffset(t *testing.T) {
	dir := t.TempDir()
	l := startLog(t, dir)

	moved, err := l.AdvanceStartOffset(23) // inside the second segment's first batch
	if err != nil || !moved {
		t.Fatalf("AdvanceStartOffset(23) = %v, %v", moved, err)
	}
	if got := l.StartOffset(); got != 23 {
		t.Fatalf("start %d, want 23", got)
	}
	if got := segmentsOf(t, dir); len(got) != 2 || got[0].base != 20 {
		t.Fatalf("segments %v: the first (wholly below 23) must go, the second stay", got)
	}
	if _, err := l.Read(22, 1<<20, 60, nil); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Fatalf("Read(22) below the start: %v, want ErrOffsetOutOfRange", err)
	}
	data, err := l.Read(23, 1<<20, 60, nil)
	if err != nil || len(data) == 0 || recordbatch.BaseOffset(data) != 20 {
		t.Fatalf("Read(23): %d bytes, %v; want the batch at 20 that holds 23", len(data), err)
	}
	if off, _, ok, err := l.OffsetForTimestamp(0, 60); err != nil || !ok || off != 23 {
		t.Fatalf("OffsetForTimestamp(0) = %d, %v, %v; want 23 (nothing below the start)", off, ok, err)
	}

	// Backwards is a no-op; past the end is refused.
	if moved, err := l.AdvanceStartOffset(10); err != nil || moved {
		t.Fatalf("AdvanceStartOffset(10) = %v, %v; want a no-op", moved, err)
	}
	if _, err := l.AdvanceStartOffset(61); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Fatalf("AdvanceStartOffset(61) past the end: %v", err)
	}

	// Retention never takes the start back to a segment boundary below it.
	l.SetConfig(func() Config { c := testConfig(); c.SegmentMs = 1000; c.RetentionBytes = 1; return c }())
	if n, err := l.DeleteOldSegments(2_000_000); err != nil || n != 1 {
		t.Fatalf("retention deleted %d segments (%v), want 1", n, err)
	}
	if got := l.StartOffset(); got != 40 {
		t.Fatalf("start after retention %d, want 40", got)
	}
	if _, err := l.AdvanceStartOffset(47); err != nil {
		t.Fatal(err)
	}
	l.SetConfig(func() Config { c := testConfig(); c.SegmentMs = 1000; return c }())

	// A crash (no Close) keeps the start: the file was durable first.
	crashed := filepath.Join(t.TempDir(), "crashed")
	copyDir(t, dir, crashed)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{dir, crashed} {
		r := openLog(t, d, testConfig())
		if r.StartOffset() != 47 || r.EndOffset() != 60 {
			t.Fatalf("%s reopened at [%d, %d), want [47, 60)", d, r.StartOffset(), r.EndOffset())
		}
		if _, err := r.Read(46, 1<<20, 60, nil); !errors.Is(err, ErrOffsetOutOfRange) {
			t.Fatalf("%s: Read(46) after reopening: %v", d, err)
		}
		r.Close()
	}
}

func TestAdvanceStartOffsetToEnd(t *testing.T) {
	dir := t.TempDir()
	l := startLog(t, dir)
	if _, err := l.AdvanceStartOffset(60); err != nil {
		t.Fatal(err)
	}
	// The active segment stays, emptied of readable records; appends go on.
	if got := segmentsOf(t, dir); len(got) != 1 || got[0].base != 40 {
		t.Fatalf("segments %v, want only the active one", got)
	}
	if data, err := l.Read(60, 1<<20, 60, nil); err != nil || len(data) != 0 {
		t.Fatalf("Read(60) = %d bytes, %v", len(data), err)
	}
	res := appendOpts(t, l, batchOpts{N: 2}, 2_000_000)
	if res.BaseOffset != 60 {
		t.Fatalf("append after moving the start to the end went to %d", res.BaseOffset)
	}
	l.Close()
	r := openLog(t, dir, testConfig())
	if r.StartOffset() != 60 || r.EndOffset() != 62 {
		t.Fatalf("reopened at [%d, %d), want [60, 62)", r.StartOffset(), r.EndOffset())
	}
}

func TestTruncateBelowMovedStart(t *testing.T) {
	dir := t.TempDir()
	l := startLog(t, dir)
	if _, err := l.AdvanceStartOffset(43); err != nil {
		t.Fatal(err)
	}
	// The batch [40, 45) holds both the start and the cut: it goes whole,
	// and the log is empty at 40 with its start there too.
	if err := l.Truncate(44); err != nil {
		t.Fatal(err)
	}
	if l.StartOffset() != 40 || l.EndOffset() != 40 {
		t.Fatalf("after truncating inside the start's batch: [%d, %d), want [40, 40)", l.StartOffset(), l.EndOffset())
	}
	appendOpts(t, l, batchOpts{N: 5}, 2_000_000)
	l.Close()
	r := openLog(t, dir, testConfig())
	// The appended records are readable again: the file went down with the start.
	if r.StartOffset() != 40 || r.EndOffset() != 45 {
		t.Fatalf("reopened at [%d, %d), want [40, 45)", r.StartOffset(), r.EndOffset())
	}
}

// A follower restarted at a leader start that lies inside a batch takes
// that batch whole, from its base, and keeps the start.
func TestAppendReplicaBelowStart(t *testing.T) {
	leader := startLog(t, t.TempDir())
	if _, err := leader.AdvanceStartOffset(23); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	f := openLog(t, dir, testConfig())
	if err := f.TruncateFullyAndStartAt(23); err != nil {
		t.Fatal(err)
	}
	data, err := leader.Read(23, 1<<20, 60, nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := f.AppendReplica(data)
	if err != nil || res.FirstOffset != 20 {
		t.Fatalf("AppendReplica: first %d, %v; want the batch at 20", res.FirstOffset, err)
	}
	if f.StartOffset() != 23 || f.EndOffset() != 40 {
		t.Fatalf("follower at [%d, %d), want [23, 40)", f.StartOffset(), f.EndOffset())
	}
	if got := segmentsOf(t, dir); len(got) != 1 || got[0].base != 20 {
		t.Fatalf("follower segments %v, want one at 20", got)
	}
	if _, err := f.Read(22, 1<<20, 40, nil); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Fatalf("Read(22) on the follower: %v", err)
	}
	// A batch overlapping a non-empty log is still refused.
	if _, err := f.AppendReplica(data); err != nil {
		t.Fatalf("refetching the same batches: %v", err) // skipped, not an error
	}
	if err := f.Flush(); err != nil {
		t.Fatal(err)
	}
	crashed := filepath.Join(t.TempDir(), "crashed")
	copyDir(t, dir, crashed)
	r := openLog(t, crashed, testConfig())
	if r.StartOffset() != 23 || r.EndOffset() != 40 {
		t.Fatalf("crashed follower reopened at [%d, %d), want [23, 40)", r.StartOffset(), r.EndOffset())
	}
}

func TestLogStartFilePastEnd(t *testing.T) {
	dir := t.TempDir()
	l := startLog(t, dir)
	l.Close()
	if err := writeLogStart(OSFS, dir, 70); err != nil {
		t.Fatal(err)
	}
	r := openLog(t, dir, testConfig())
	if r.StartOffset() != 70 || r.EndOffset() != 70 {
		t.Fatalf("opened at [%d, %d), want an empty log at 70", r.StartOffset(), r.EndOffset())
	}
	if res := appendOpts(t, r, batchOpts{N: 1}, 2_000_000); res.BaseOffset != 70 {
		t.Fatalf("append went to %d, want 70", res.BaseOffset)
	}
}

func TestLogStartFileDamaged(t *testing.T) {
	dir := t.TempDir()
	l := startLog(t, dir)
	if _, err := l.AdvanceStartOffset(45); err != nil {
		t.Fatal(err)
	}
	l.Close()
	path := filepath.Join(dir, logStartFile)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	b[8] ^= 1
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	// Unreadable: the log starts at its first segment (records come back,
	// none is lost).
	r := openLog(t, dir, testConfig())
	if r.StartOffset() != 40 || r.EndOffset() != 60 {
		t.Fatalf("opened at [%d, %d), want [40, 60)", r.StartOffset(), r.EndOffset())
	}
}

func TestLogStartCodec(t *testing.T) {
	for _, off := range []int64{0, 1, 23, 1 << 40, maxBaseOffset} {
		got, err := decodeLogStart(encodeLogStart(off))
		if err != nil || got != off {
			t.Fatalf("round trip %d: %d, %v", off, got, err)
		}
	}
	bad := encodeLogStart(-5)
	if _, err := decodeLogStart(bad); !errors.Is(err, errBadLogStart) {
		t.Fatalf("negative offset: %v", err)
	}
	if _, err := decodeLogStart(encodeLogStart(7)[:16]); !errors.Is(err, errBadLogStart) {
		t.Fatalf("short file: %v", err)
	}
}

// FuzzDecodeLogStart: any bytes decode to an error or to an offset that
// encodes back to the same bytes; nothing panics.
func FuzzDecodeLogStart(f *testing.F) {
	f.Add(encodeLogStart(0))
	f.Add(encodeLogStart(123456))
	f.Add([]byte("FJLS"))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		off, err := decodeLogStart(b)
		if err != nil {
			return
		}
		if off < 0 || string(encodeLogStart(off)) != string(b) {
			t.Fatalf("decoded %d from %x, which does not encode back", off, b)
		}
	})
}

// TestLogStartCrash crashes AdvanceStartOffset, and a follower's restart
// below its start (AppendReplica of a batch holding it), before each of
// their file-system changes and after they return, and recovers each
// image: the start is the old one or the new one (the new one once the
// call returned), never lower, and every record from it on is there.
func TestLogStartCrash(t *testing.T) {
	seeds := uint64(4)
	if testing.Short() {
		seeds = 1
	}
	for seed := uint64(0); seed < seeds; seed++ {
		for n := 0; n < 16; n++ {
			rng := rand.New(rand.NewPCG(seed, uint64(n)))
			mem := NewMemFS()
			fs := newCrashFS(mem, rng)
			cfg := testConfig()
			cfg.FS = fs
			lg := memStartLog(t, cfg)
			k := 1 + rng.Int64N(59)
			fs.arm(n)
			moved, err := lg.AdvanceStartOffset(k)
			img := fs.collect()
			if err != nil || !moved {
				t.Fatalf("seed %d n %d: AdvanceStartOffset(%d) = %v, %v", seed, n, k, moved, err)
			}
			returned := img == nil
			if returned {
				img = mem.CrashClone(rng)
			}
			checkStartImage(t, img, []int64{0, k}, returned, 60)

			// A follower restarted at k, handed the batch that holds it.
			f := memFollower(t, cfg, fs, k)
			data, err := lg.Read(k, 1<<20, 60, nil)
			if err != nil {
				t.Fatal(err)
			}
			fs.arm(n)
			if _, err := f.AppendReplica(data); err != nil {
				t.Fatalf("seed %d n %d: AppendReplica at %d: %v", seed, n, k, err)
			}
			f.Flush()
			img = fs.collect()
			returned = img == nil
			if returned {
				img = mem.CrashClone(rng)
			}
			end := recordbatch.LastOffset(splitBatches(t, data)[len(splitBatches(t, data))-1]) + 1
			checkStartImage(t, img, []int64{k}, false, -1)
			if returned {
				r := openOn(t, img, "/logs/f-0")
				if r.StartOffset() != k || r.EndOffset() != end {
					t.Fatalf("seed %d n %d: follower recovered at [%d, %d), want [%d, %d)", seed, n, r.StartOffset(), r.EndOffset(), k, end)
				}
				r.Close()
			}
			lg.Close()
			f.Close()
		}
	}
}

func cfgOn(cfg Config, fs FS) Config { cfg.FS = fs; return cfg }

func openOn(t *testing.T, fs FS, dir string) *Log {
	t.Helper()
	l, err := Open(dir, cfgOn(testConfig(), fs), zerolog.Nop())
	if err != nil {
		t.Fatalf("Open(%s) on a crash image: %v", dir, err)
	}
	return l
}

// memStartLog is startLog's layout on cfg.FS, at /logs/t-0.
func memStartLog(t *testing.T, cfg Config) *Log {
	t.Helper()
	cfg.SegmentMs = 1000
	l, err := Open("/logs/t-0", cfg, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	now := int64(1_000_000)
	for seg := 0; seg < 3; seg++ {
		for i := 0; i < 4; i++ {
			appendOpts(t, l, batchOpts{N: 5, BaseTS: now, ValueSize: 20}, now)
		}
		now += 1000
	}
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	return l
}

// memFollower is an empty log at /logs/f-0 restarted at k.
func memFollower(t *testing.T, cfg Config, fs FS, k int64) *Log {
	t.Helper()
	f, err := Open("/logs/f-0", cfgOn(cfg, fs), zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	if err := f.TruncateFullyAndStartAt(k); err != nil {
		t.Fatal(err)
	}
	return f
}

// checkStartImage recovers /logs/t-0 (when end >= 0) or /logs/f-0 from
// img: the start must be one of starts (the last one if returned), and
// every record from the start to the end readable.
func checkStartImage(t *testing.T, img *MemFS, starts []int64, returned bool, end int64) {
	t.Helper()
	dir := "/logs/t-0"
	if end < 0 {
		dir = "/logs/f-0"
	}
	r := openOn(t, img, dir)
	defer r.Close()
	start := r.StartOffset()
	if !slices.Contains(starts, start) || (returned && start != starts[len(starts)-1]) {
		t.Fatalf("%s recovered starting at %d, want one of %v (returned %v)", dir, start, starts, returned)
	}
	if end >= 0 && r.EndOffset() != end {
		t.Fatalf("%s recovered ending at %d, want %d", dir, r.EndOffset(), end)
	}
	if start > 0 {
		if _, err := r.Read(start-1, 1<<20, r.EndOffset(), nil); !errors.Is(err, ErrOffsetOutOfRange) {
			t.Fatalf("%s: Read(%d) below the recovered start: %v", dir, start-1, err)
		}
	}
	next := start
	for _, b := range readAll(t, r, start) {
		if recordbatch.BaseOffset(b) > next {
			t.Fatalf("%s: records [%d, %d) missing", dir, next, recordbatch.BaseOffset(b))
		}
		next = recordbatch.LastOffset(b) + 1
	}
}
