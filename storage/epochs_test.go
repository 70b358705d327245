package storage

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/rs/zerolog"

	"github.com/fjordlog/fjord/storage/recordbatch"
)

func ec(pairs ...int64) epochCache {
	var c epochCache
	for i := 0; i < len(pairs); i += 2 {
		c = append(c, epochEntry{int32(pairs[i]), pairs[i+1]})
	}
	return c
}

func sameCache(a, b epochCache) bool { return len(a) == 0 && len(b) == 0 || reflect.DeepEqual(a, b) }

func TestEpochCacheNext(t *testing.T) {
	for _, tc := range []struct {
		name    string
		c       epochCache
		epoch   int32
		base    int64
		replica bool
		want    epochCache
		changed bool
		err     error
	}{
		{"first epoch", nil, 0, 0, false, ec(0, 0), true, nil},
		{"first epoch later", nil, 3, 40, false, ec(3, 40), true, nil},
		{"same epoch", ec(0, 0), 0, 5, false, ec(0, 0), false, nil},
		{"new epoch", ec(0, 0), 3, 5, false, ec(0, 0, 3, 5), true, nil},
		{"unstamped", ec(0, 0, 3, 5), -1, 9, false, ec(0, 0, 3, 5), false, nil},
		{"unstamped replica", ec(0, 0, 3, 5), -1, 9, true, ec(0, 0, 3, 5), false, nil},
		{"leader: older epoch", ec(0, 0, 3, 5), 1, 9, false, ec(0, 0, 3, 5), false, ErrStaleLeaderEpoch},
		{"leader: older than an epoch with no data yet", ec(0, 0, 3, 5), 1, 5, false, ec(0, 0, 3, 5), false, ErrStaleLeaderEpoch},
		{"newer replaces an epoch with no data", ec(0, 0, 3, 5), 4, 5, false, ec(0, 0, 4, 5), true, nil},
		{"replica: an epoch with no data gives way", ec(0, 0, 3, 5), 1, 5, true, ec(0, 0, 1, 5), true, nil},
		{"replica: back to the previous epoch", ec(0, 0, 3, 5), 0, 5, true, ec(0, 0), true, nil},
		{"replica: empty log's assigned epoch gives way", ec(2, 0), 1, 0, true, ec(1, 0), true, nil},
		{"replica: older than an epoch with data", ec(0, 0, 3, 5), 1, 9, true, ec(0, 0, 3, 5), false, ErrStaleLeaderEpoch},
		{"replica: new epoch", ec(0, 0, 3, 5), 7, 9, true, ec(0, 0, 3, 5, 7, 9), true, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := append(epochCache(nil), tc.c...)
			got, changed, err := tc.c.next(tc.epoch, tc.base, tc.replica)
			if !errors.Is(err, tc.err) || (tc.err == nil) != (err == nil) {
				t.Fatalf("error %v, want %v", err, tc.err)
			}
			if !sameCache(got, tc.want) || changed != tc.changed {
				t.Fatalf("next = %v, %v; want %v, %v", got, changed, tc.want, tc.changed)
			}
			if !sameCache(tc.c, before) {
				t.Fatalf("next modified its receiver: %v, was %v", tc.c, before)
			}
		})
	}
}

// TestEpochCacheNoAliasing: caches are immutable values that readers hold
// while the writer derives new ones.
func TestEpochCacheNoAliasing(t *testing.T) {
	c := ec(0, 0, 3, 5, 4, 9)
	short := c.truncateFromEnd(9)
	a := short.with(7, 9)
	b := short.with(8, 9)
	if a[2].epoch != 7 || b[2].epoch != 8 || c[2].epoch != 4 {
		t.Fatalf("derived caches share storage: %v %v %v", a, b, c)
	}
}

func TestEpochCacheEndOffsetFor(t *testing.T) {
	c := ec(1, 0, 3, 100, 5, 250)
	for _, tc := range []struct {
		c            epochCache
		end          int64
		epoch, found int32
		offset       int64
	}{
		{c, 300, -1, -1, -1},
		{c, 300, 0, -1, -1}, // below the earliest epoch
		{c, 300, 1, 1, 100},
		{c, 300, 2, 1, 100}, // largest epoch <= 2 is 1
		{c, 300, 3, 3, 250},
		{c, 300, 4, 3, 250},
		{c, 300, 5, 5, 300}, // the latest ends at the log end
		{c, 300, 9, 5, 300},
		{c, 250, 5, 5, 250},         // latest epoch with no data yet
		{c, 200, 3, 3, 200},         // never past the log end
		{nil, 300, 0, -1, -1},       // empty cache
		{nil, 300, 1 << 30, -1, -1}, // empty cache, any epoch
	} {
		found, off := tc.c.endOffsetFor(tc.epoch, tc.end)
		if found != tc.found || off != tc.offset {
			t.Errorf("%v (end %d): endOffsetFor(%d) = (%d, %d), want (%d, %d)", tc.c, tc.end, tc.epoch, found, off, tc.found, tc.offset)
		}
	}
}

func TestEpochCacheTruncate(t *testing.T) {
	c := ec(1, 0, 3, 100, 5, 250)
	for _, tc := range []struct {
		end  int64
		want epochCache
	}{
		{300, c}, {251, c}, {250, ec(1, 0, 3, 100)}, {101, ec(1, 0, 3, 100)}, {100, ec(1, 0)}, {1, ec(1, 0)}, {0, nil},
	} {
		if got := c.truncateFromEnd(tc.end); !sameCache(got, tc.want) {
			t.Errorf("truncateFromEnd(%d) = %v, want %v", tc.end, got, tc.want)
		}
	}
	for _, tc := range []struct {
		start int64
		want  epochCache
	}{
		{0, c}, {50, ec(1, 50, 3, 100, 5, 250)}, {100, ec(3, 100, 5, 250)}, {150, ec(3, 150, 5, 250)},
		{250, ec(5, 250)}, {400, ec(5, 400)},
	} {
		if got := c.truncateFromStart(tc.start); !sameCache(got, tc.want) {
			t.Errorf("truncateFromStart(%d) = %v, want %v", tc.start, got, tc.want)
		}
	}
	if !sameCache(c, ec(1, 0, 3, 100, 5, 250)) {
		t.Fatalf("truncation modified the cache: %v", c)
	}
}

func TestEpochCheckpointFormat(t *testing.T) {
	c := ec(0, 0, 3, 150, 2147483647, 1<<40)
	want := "0\n3\n0 0\n3 150\n2147483647 1099511627776\n"
	if got := string(c.encode()); got != want {
		t.Fatalf("encode = %q, want Kafka's %q", got, want)
	}
	back, err := decodeEpochCheckpoint([]byte(want))
	if err != nil || !sameCache(back, c) {
		t.Fatalf("decode = %v, %v", back, err)
	}
	if got := string(epochCache(nil).encode()); got != "0\n0\n" {
		t.Fatalf("empty encodes as %q", got)
	}
	for _, ok := range []string{"0\n0\n", "0\n0", "0\n1\n5 7", "0\n2\n1  10\n2\t20\n"} {
		if _, err := decodeEpochCheckpoint([]byte(ok)); err != nil {
			t.Errorf("decode(%q): %v", ok, err)
		}
	}
	for _, bad := range []string{
		"", "\n", "0\n", "1\n0\n", "0\n1\n", "0\n0\n1 1\n", "0\n2\n1 1\n", "0\n-1\n",
		"0\nx\n", "0\n1\n1\n", "0\n1\n1 2 3\n", "0\n1\na 1\n", "0\n1\n1 b\n",
		"0\n1\n-1 5\n", "0\n1\n1 -5\n", "0\n1\n2147483648 0\n",
		"0\n2\n1 5\n1 6\n", // epochs not increasing
		"0\n2\n1 5\n2 5\n", // offsets not increasing
		"0\n2\n2 5\n1 6\n",
		"0\n1\n1 5\n\n", "\x00\x00\x00",
	} {
		if c, err := decodeEpochCheckpoint([]byte(bad)); err == nil {
			t.Errorf("decode(%q) = %v, want an error", bad, c)
		}
	}
}

// appendAt appends a batch as leader with leader epoch epoch.
func appendAt(t *testing.T, l *Log, o batchOpts, epoch int32) appended {
	t.Helper()
	b := buildBatch(t, o)
	orig := bytes.Clone(b)
	info, err := recordbatch.Validate(b, 0)
	if err != nil {
		t.Fatal(err)
	}
	res, err := l.Append(b, info, epoch, 1)
	if err != nil {
		t.Fatalf("Append at epoch %d: %v", epoch, err)
	}
	return appended{orig, res.BaseOffset, res.LastOffset}
}

func checkpointText(t *testing.T, dir string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, epochCheckpointFile))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func checkEpochs(t *testing.T, l *Log, want epochCache) {
	t.Helper()
	if got := l.epochCache(); !sameCache(got, want) {
		t.Fatalf("epoch cache %v, want %v", got, want)
	}
	wantLatest := int32(-1)
	if len(want) > 0 {
		wantLatest = want[len(want)-1].epoch
	}
	if got := l.LatestEpoch(); got != wantLatest {
		t.Fatalf("LatestEpoch %d, want %d", got, wantLatest)
	}
}

func TestAssignEpoch(t *testing.T) {
	dir := t.TempDir()
	l := openLog(t, dir, testConfig())
	if l.LatestEpoch() != -1 {
		t.Fatalf("empty log: LatestEpoch %d", l.LatestEpoch())
	}
	if _, err := os.Stat(filepath.Join(dir, epochCheckpointFile)); !os.IsNotExist(err) {
		t.Fatalf("a new empty log wrote a checkpoint (%v)", err)
	}
	for range 3 {
		appendAt(t, l, batchOpts{N: 2}, 0)
	}
	checkEpochs(t, l, ec(0, 0))
	end := l.EndOffset() // 6
	// An assigned entry covers no batch, so it stays out of the file
	// until the epoch's first batch (epochPending).
	saved := string(ec(0, 0).encode())
	steps := []struct {
		name  string
		epoch int32
		start int64
		err   error
		want  epochCache
	}{
		{"repeat", 0, end, nil, ec(0, 0)},
		{"not at the log end", 2, end - 1, ErrOffsetOutOfRange, ec(0, 0)},
		{"past the log end", 2, end + 1, ErrOffsetOutOfRange, ec(0, 0)},
		{"before the latest start", 2, -1, ErrOffsetOutOfRange, ec(0, 0)},
		{"new leader", 2, end, nil, ec(0, 0, 2, end)},
		{"older epoch", 1, end, nil, ec(0, 0, 2, end)},
		{"older epoch anywhere", 1, 0, nil, ec(0, 0, 2, end)},
		{"another leader before any write", 3, end, nil, ec(0, 0, 3, end)},
	}
	for _, s := range steps {
		err := l.AssignEpoch(s.epoch, s.start)
		if !errors.Is(err, s.err) || (s.err == nil) != (err == nil) {
			t.Fatalf("%s: AssignEpoch(%d, %d) = %v, want %v", s.name, s.epoch, s.start, err, s.err)
		}
		checkEpochs(t, l, s.want)
		if got := checkpointText(t, dir); got != saved {
			t.Fatalf("%s: checkpoint %q, want %q", s.name, got, saved)
		}
	}
	if err := l.AssignEpoch(-1, end); err == nil {
		t.Fatal("AssignEpoch(-1) accepted")
	}
	// Appends at the assigned epoch go on; an older epoch is refused; an
	// unstamped batch (-1) passes without an entry; a newer epoch records
	// its first batch.
	b := buildBatch(t, batchOpts{})
	info, _ := recordbatch.Validate(b, 0)
	if _, err := l.Append(b, info, 2, 1); !errors.Is(err, ErrStaleLeaderEpoch) {
		t.Fatalf("Append at epoch 2 after epoch 3: %v", err)
	}
	if l.EndOffset() != end {
		t.Fatal("a refused append moved the end")
	}
	appendAt(t, l, batchOpts{}, 3)
	if got, want := checkpointText(t, dir), "0\n2\n0 0\n3 6\n"; got != want {
		t.Fatalf("after the assigned epoch's first batch: checkpoint %q, want %q", got, want)
	}
	appendAt(t, l, batchOpts{}, -1)
	a := appendAt(t, l, batchOpts{N: 3}, 9)
	checkEpochs(t, l, ec(0, 0, 3, end, 9, a.base))
	if got, want := checkpointText(t, dir), "0\n3\n0 0\n3 6\n9 8\n"; got != want {
		t.Fatalf("checkpoint %q, want %q", got, want)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if err := l.AssignEpoch(10, l.EndOffset()); !errors.Is(err, ErrClosed) {
		t.Fatalf("AssignEpoch on a closed log: %v", err)
	}
}

// assignedLog opens a log in dir with two flushed batches of epoch 0 and
// records epoch 4 at its end, as a new leader does; it returns the end.
func assignedLog(t *testing.T, dir string, cfg Config) (*Log, int64) {
	t.Helper()
	l := openLog(t, dir, cfg)
	appendAt(t, l, batchOpts{N: 2}, 0)
	appendAt(t, l, batchOpts{N: 2}, 0)
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	end := l.EndOffset()
	if err := l.AssignEpoch(4, end); err != nil {
		t.Fatal(err)
	}
	return l, end
}

// TestAssignedEpochDurableBeforeItsBatch: AssignEpoch writes nothing (its
// entry covers no batch, and Open would drop it), but the epoch's first
// batch makes it durable before the batch: no crash image holds a batch of
// epoch 4 and a checkpoint that does not know epoch 4 (Open would then
// warn and scan every segment to rebuild it).
func TestAssignedEpochDurableBeforeItsBatch(t *testing.T) {
	fs := NewMemFS()
	cfg := testConfig()
	cfg.FS = fs
	const dir = "/p"
	l, end := assignedLog(t, dir, cfg)
	if e, o := l.EndOffsetForEpoch(0); e != 0 || o != end {
		t.Fatalf("assigned, in memory: EndOffsetForEpoch(0) = (%d, %d), want (0, %d)", e, o, end)
	}
	// A crash now: the entry is gone, and nothing needed it.
	cfg.FS = fs.CrashClone(nil)
	if got := openLog(t, dir, cfg).LatestEpoch(); got != 0 {
		t.Fatalf("after a crash before any batch of epoch 4: latest epoch %d, want 0", got)
	}

	appendAt(t, l, batchOpts{N: 3}, 4)
	survived := 0
	for seed := range uint64(60) {
		img := fs.CrashClone(rand.New(rand.NewPCG(seed, 7)))
		raw, rerr := ReadFile(img, filepath.Join(dir, epochCheckpointFile))
		cfg.FS = img
		r := openLog(t, dir, cfg)
		if r.EndOffset() == end {
			continue // the batch was lost with the crash: no constraint
		}
		survived++
		c, err := decodeEpochCheckpoint(raw)
		if rerr != nil || err != nil {
			t.Fatalf("seed %d: the batch of epoch 4 survived, the checkpoint did not: %v %v", seed, rerr, err)
		}
		if !reflect.DeepEqual(c, ec(0, 0, 4, end)) {
			t.Fatalf("seed %d: the batch of epoch 4 survived with checkpoint %v", seed, c)
		}
	}
	if survived == 0 {
		t.Fatal("no crash image kept the batch: the test checks nothing")
	}
}

// TestAssignedEpochCrashDuringFirstBatch: a crash at each change of the
// assigned epoch's first append and its flush, each image keeping a
// random part of what was not durable: any image that holds a batch of
// epoch 4 has a checkpoint naming epoch 4 where it began. (The save must
// come before the batch's write, which writeback may make durable at any
// time, not only after it.)
func TestAssignedEpochCrashDuringFirstBatch(t *testing.T) {
	const dir = "/p"
	images, kept := 0, 0
	for change := 0; ; change++ {
		last := false
		for seed := range uint64(6) {
			rng := rand.New(rand.NewPCG(seed, uint64(change)))
			fs := newCrashFS(NewMemFS(), rng)
			cfg := testConfig()
			cfg.FS = fs
			l, end := assignedLog(t, dir, cfg)
			fs.arm(change)
			appendAt(t, l, batchOpts{N: 3}, 4)
			if err := l.Flush(); err != nil {
				t.Fatal(err)
			}
			img := fs.collect()
			if img == nil {
				img, last = fs.MemFS.CrashClone(rng), true
			}
			l.Close()
			images++
			raw, rerr := ReadFile(img, filepath.Join(dir, epochCheckpointFile))
			c := testConfig()
			c.FS = img
			r, err := Open(dir, c, zerolog.Nop())
			if err != nil {
				t.Fatalf("change %d image %d: %v", change, seed, err)
			}
			got := r.EndOffset()
			r.Close()
			if got == end {
				continue
			}
			kept++
			cp, err := decodeEpochCheckpoint(raw)
			if rerr != nil || err != nil || !reflect.DeepEqual(cp, ec(0, 0, 4, end)) {
				t.Fatalf("change %d image %d: the log holds a batch of epoch 4 (end %d), the checkpoint %v (%v, %v)", change, seed, got, cp, rerr, err)
			}
		}
		if last {
			break
		}
	}
	if kept == 0 {
		t.Fatal("no image kept a batch of epoch 4: the test checks nothing")
	}
	t.Logf("%d images, %d with a batch of epoch 4", images, kept)
}

// TestPendingEpochWritten: an assigned entry reaches the checkpoint file
// through SaveEpochs, Close, or a follower's first fetched batch (whose
// newer epoch replaces it); a truncation below it forgets it.
func TestPendingEpochWritten(t *testing.T) {
	dir := t.TempDir()
	l := openLog(t, dir, testConfig())
	appendAt(t, l, batchOpts{N: 2}, 0)
	appendAt(t, l, batchOpts{N: 2}, 0) // 0-1, 2-3
	if l.EpochPending() {
		t.Fatal("pending with no assignment")
	}
	if err := l.AssignEpoch(2, 4); err != nil {
		t.Fatal(err)
	}
	if !l.EpochPending() || checkpointText(t, dir) != "0\n1\n0 0\n" {
		t.Fatalf("assigned: pending %v, checkpoint %q", l.EpochPending(), checkpointText(t, dir))
	}
	if err := l.SaveEpochs(); err != nil {
		t.Fatal(err)
	}
	if l.EpochPending() || checkpointText(t, dir) != "0\n2\n0 0\n2 4\n" {
		t.Fatalf("SaveEpochs: pending %v, checkpoint %q", l.EpochPending(), checkpointText(t, dir))
	}
	if err := l.SaveEpochs(); err != nil { // nothing pending: nothing to do
		t.Fatal(err)
	}

	if err := l.AssignEpoch(3, 4); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if got := checkpointText(t, dir); got != "0\n2\n0 0\n3 4\n" {
		t.Fatalf("Close with an entry pending: checkpoint %q", got)
	}
	if err := l.SaveEpochs(); !errors.Is(err, ErrClosed) {
		t.Fatalf("SaveEpochs on a closed log: %v", err)
	}

	// Reopened, epoch 3 has no batch and is dropped. A new leadership's
	// entry, then a truncation below its start: the entry goes with it.
	l = openLog(t, dir, testConfig())
	checkEpochs(t, l, ec(0, 0))
	if err := l.AssignEpoch(5, 4); err != nil {
		t.Fatal(err)
	}
	if err := l.Truncate(2); err != nil {
		t.Fatal(err)
	}
	checkEpochs(t, l, ec(0, 0))
	if l.EpochPending() || checkpointText(t, dir) != "0\n1\n0 0\n" {
		t.Fatalf("truncated below the pending entry: pending %v, checkpoint %q", l.EpochPending(), checkpointText(t, dir))
	}

	// A leader's pending entry, then it follows a newer leader: the first
	// fetched batch's epoch replaces the pending one, saved first.
	if err := l.AssignEpoch(6, 2); err != nil {
		t.Fatal(err)
	}
	b := buildBatch(t, batchOpts{N: 2})
	recordbatch.Stamp(b, 2, 7, -1)
	if _, err := l.AppendReplica(b); err != nil {
		t.Fatal(err)
	}
	checkEpochs(t, l, ec(0, 0, 7, 2))
	if l.EpochPending() || checkpointText(t, dir) != "0\n2\n0 0\n7 2\n" {
		t.Fatalf("follower's first batch: pending %v, checkpoint %q", l.EpochPending(), checkpointText(t, dir))
	}
}

func TestEndOffsetForEpochOnLog(t *testing.T) {
	l := openLog(t, t.TempDir(), testConfig())
	if e, o := l.EndOffsetForEpoch(0); e != -1 || o != -1 {
		t.Fatalf("empty log: (%d, %d)", e, o)
	}
	appendAt(t, l, batchOpts{N: 3}, 1) // 0-2
	appendAt(t, l, batchOpts{N: 3}, 1) // 3-5
	appendAt(t, l, batchOpts{N: 2}, 4) // 6-7
	if err := l.AssignEpoch(6, 8); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		epoch, found int32
		off          int64
	}{
		{0, -1, -1}, {1, 1, 6}, {2, 1, 6}, {3, 1, 6}, {4, 4, 8}, {5, 4, 8}, {6, 6, 8}, {100, 6, 8},
	} {
		if e, o := l.EndOffsetForEpoch(tc.epoch); e != tc.found || o != tc.off {
			t.Errorf("EndOffsetForEpoch(%d) = (%d, %d), want (%d, %d)", tc.epoch, e, o, tc.found, tc.off)
		}
	}
	appendAt(t, l, batchOpts{N: 2}, 6)
	if e, o := l.EndOffsetForEpoch(6); e != 6 || o != 10 {
		t.Errorf("latest epoch ends at the log end: (%d, %d)", e, o)
	}
}

// epochLog builds a log over several segments whose batches carry epochs 0
// (offsets 0-8), 2 (9-20) and 5 (21-29), then records epoch 7 at the end
// without writing.
func epochLog(t *testing.T, cfg Config) (*Log, []appended) {
	t.Helper()
	l := openLog(t, t.TempDir(), cfg)
	var out []appended
	for i, e := range []int32{0, 0, 0, 2, 2, 2, 2, 5, 5, 5} {
		out = append(out, appendAt(t, l, batchOpts{N: 3, ValueSize: 100, Idempotent: true, PID: 77, Seq: int32(3 * i), BaseTS: 5000 + int64(i)}, e))
	}
	if err := l.AssignEpoch(7, l.EndOffset()); err != nil {
		t.Fatal(err)
	}
	checkEpochs(t, l, ec(0, 0, 2, 9, 5, 21, 7, 30))
	return l, out
}

func TestEpochsAcrossReopen(t *testing.T) {
	cfg := testConfig()
	cfg.SegmentBytes = 800
	src, batches := epochLog(t, cfg)
	if n := len(filesWithExt(t, src.dir, ".log")); n < 3 {
		t.Fatalf("setup: %d segments", n)
	}
	// Epoch 7 has no batch: Open drops it, as entries at or past the end.
	full := ec(0, 0, 2, 9, 5, 21)
	lastPos, _ := lastBatchPos(t, activeSegmentPath(t, src.dir))
	for _, tc := range []struct {
		name    string
		clean   bool
		prepare func(t *testing.T, dir string)
		want    epochCache
		rebuilt bool // the file is rewritten from the scan
	}{
		{"clean", true, nil, full, false},
		{"crash", false, nil, full, false},
		{"missing", false, func(t *testing.T, dir string) { removeFile(t, dir, epochCheckpointFile) }, full, true},
		{"missing after clean close", true, func(t *testing.T, dir string) { removeFile(t, dir, epochCheckpointFile) }, full, true},
		{"garbage", false, func(t *testing.T, dir string) { writeCheckpoint(t, dir, "\x00garbage") }, full, true},
		{"empty file", true, func(t *testing.T, dir string) { writeCheckpoint(t, dir, "") }, full, true},
		{"wrong version", false, func(t *testing.T, dir string) { writeCheckpoint(t, dir, "1\n1\n0 0\n") }, full, true},
		{"out of order", false, func(t *testing.T, dir string) { writeCheckpoint(t, dir, "0\n2\n2 9\n0 0\n") }, full, true},
		{"behind the log", false, func(t *testing.T, dir string) { writeCheckpoint(t, dir, "0\n2\n0 0\n2 9\n") }, full, true},
		{"valid but empty", false, func(t *testing.T, dir string) { writeCheckpoint(t, dir, "0\n0\n") }, full, true},
		{"entries past the end", false, func(t *testing.T, dir string) {
			writeCheckpoint(t, dir, "0\n5\n0 0\n2 9\n5 21\n7 30\n8 1000\n")
		}, full, false},
		// A Kafka-format file that knows more than the batches say (an
		// epoch that wrote nothing before the next began) is trusted.
		{"trusted as written", false, func(t *testing.T, dir string) {
			writeCheckpoint(t, dir, "0\n4\n0 0\n1 5\n2 9\n5 21\n")
		}, ec(0, 0, 1, 5, 2, 9, 5, 21), false},
		{"tail cut by recovery", false, func(t *testing.T, dir string) {
			truncateFile(t, activeSegmentPath(t, dir), lastPos+10)
		}, full, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := crashCopy(t, src)
			if tc.clean {
				l := openLog(t, dir, cfg)
				if err := l.Close(); err != nil {
					t.Fatal(err)
				}
			}
			if tc.prepare != nil {
				tc.prepare(t, dir)
			}
			l := openLog(t, dir, cfg)
			checkEpochs(t, l, tc.want)
			if tc.rebuilt {
				if got := checkpointText(t, dir); got != string(tc.want.encode()) {
					t.Fatalf("rebuilt checkpoint not written: %q", got)
				}
			}
			end := l.EndOffset()
			if tc.name == "tail cut by recovery" && end != batches[len(batches)-1].base {
				t.Fatalf("setup: end %d", end)
			}
			if e, o := l.EndOffsetForEpoch(5); e != 5 || o != end {
				t.Fatalf("EndOffsetForEpoch(5) = (%d, %d), want (5, %d)", e, o, end)
			}
			// The next leader carries on from the reopened cache.
			if err := l.AssignEpoch(8, end); err != nil {
				t.Fatal(err)
			}
			appendAt(t, l, batchOpts{}, 8)
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			l = openLog(t, dir, cfg)
			checkEpochs(t, l, append(append(epochCache(nil), tc.want...), epochEntry{8, end}))
		})
	}
}

// TestEpochsRecoveryCutsWholeEpoch: recovery cuts every batch of the
// latest epoch; its entry goes.
func TestEpochsRecoveryCutsWholeEpoch(t *testing.T) {
	cfg := testConfig()
	l := openLog(t, t.TempDir(), cfg)
	appendAt(t, l, batchOpts{N: 2}, 1)
	a := appendAt(t, l, batchOpts{N: 2}, 3)
	dir := crashCopy(t, l)
	truncateFile(t, filepath.Join(dir, "00000000000000000000.log"), int64(len(a.orig))+10)
	r := openLog(t, dir, cfg)
	if r.EndOffset() != 2 {
		t.Fatalf("end %d", r.EndOffset())
	}
	checkEpochs(t, r, ec(1, 0))
}

func writeCheckpoint(t *testing.T, dir, text string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, epochCheckpointFile), []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestEpochsFollowRetention: deleting old segments forgets epochs wholly
// below the new start (Kafka's truncateFromStart); the clamped cache is
// saved at Close.
func TestEpochsFollowRetention(t *testing.T) {
	cfg := testConfig()
	cfg.SegmentBytes = 800
	l, _ := epochLog(t, cfg)
	// Keep the newest five segments: retention.bytes of exactly their size.
	logs := filesWithExt(t, l.dir, ".log")
	var keep int64
	for _, name := range logs[len(logs)-5:] {
		keep += segmentSize(t, filepath.Join(l.dir, name))
	}
	cfg.RetentionBytes = keep
	l.SetConfig(cfg)
	if _, err := l.DeleteOldSegments(1); err != nil {
		t.Fatal(err)
	}
	start := l.StartOffset()
	if start <= 9 || start >= 21 {
		t.Fatalf("setup: start %d, want inside epoch 2", start)
	}
	want := ec(2, start, 5, 21, 7, 30)
	checkEpochs(t, l, want)
	if e, o := l.EndOffsetForEpoch(0); e != -1 || o != -1 {
		t.Fatalf("epoch 0 after retention: (%d, %d)", e, o)
	}
	dir := l.dir
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if got := checkpointText(t, dir); got != string(want.encode()) {
		t.Fatalf("checkpoint after Close %q, want %q", got, want.encode())
	}
	r := openLog(t, dir, cfg)
	checkEpochs(t, r, want[:2])
}

func TestEachRecordShortBatch(t *testing.T) {
	b := buildBatch(t, batchOpts{N: 3})
	info, _ := recordbatch.ParseHeader(b)
	// A reader racing a truncation may get fewer bytes than the header
	// said: an error, never a panic.
	for n := range len(b) {
		err := recordbatch.EachRecord(b[:n], info, func(recordbatch.Record) bool { return true })
		if n < recordbatch.HeaderLen && err == nil {
			t.Errorf("EachRecord of %d bytes: no error", n)
		}
	}
}
