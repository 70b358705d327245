package storage

import (
	"bytes"
	"fmt"
	"math/rand"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/fjordlog/fjord/storage/recordbatch"
)

// Followers of a compacted log. Compaction on the leader removes records
// and whole batches from sealed segments, so a follower fetching from its
// log end may get a first batch past it and gaps between the batches after.
// AppendReplica takes them (offsets only have to go forward), and the
// follower's log, its active segment included, keeps the gaps through
// reads, truncation and recovery.

// compactedLeader builds a leader log of n batches under leader epochs 0,
// 3 and 6 (4 assigned and never written), most of whose records update a
// few hot keys, then compacts it, so that most batches of its sealed
// segments go entirely. Every eighth batch also carries a key of its own,
// which survives. Producer 77 writes the even batches, idempotently. The
// first batch of epoch 3 holds only hot keys: compaction removes it, so on
// the leader epoch 3 starts at an offset no batch has any more.
func compactedLeader(t *testing.T, cfg Config, n int) *Log {
	t.Helper()
	l := openLog(t, t.TempDir(), cfg)
	var seq int32
	for i := range n {
		epoch := leaderEpochFor(t, l, i, n)
		var recs []testRecord
		for j := range 1 + i%3 {
			recs = append(recs, testRecord{TSDelta: int64(j), OffsetDelta: int32(j),
				Key: fmt.Appendf(nil, "hot-%d", (i+j)%3), Value: fmt.Appendf(nil, "v%d.%d-%s", i, j, bytes.Repeat([]byte("x"), 40))})
		}
		if i%8 == 4 && i != n/3 {
			recs = append(recs, testRecord{TSDelta: 9, OffsetDelta: int32(len(recs)), Key: fmt.Appendf(nil, "own-%d", i), Value: []byte("kept")})
		}
		c := cheapCodecs[i%len(cheapCodecs)]
		o := batchOpts{Records: recs, Codec: c.Codec, Xerial: c.Xerial, BaseTS: 10_000 + int64(i*7%23)*10}
		if i%2 == 0 {
			o.Idempotent, o.PID, o.Seq = true, 77, seq
			seq += int32(len(recs))
		}
		appendAt(t, l, o, epoch)
	}
	st, err := l.Compact(time.Now().UnixMilli(), 1<<40)
	if err != nil {
		t.Fatal(err)
	}
	if st.Segments == 0 || st.RecordsPurged == 0 {
		t.Fatalf("setup: compaction changed nothing: %+v", st)
	}
	return l
}

// gapsOf lists the gaps [from, to) between consecutive batches.
func gapsOf(bs [][]byte) [][2]int64 {
	var out [][2]int64
	for i := 1; i < len(bs); i++ {
		if e, b := recordbatch.LastOffset(bs[i-1])+1, recordbatch.BaseOffset(bs[i]); b > e {
			out = append(out, [2]int64{e, b})
		}
	}
	return out
}

// epochsOf is the epoch cache a log of exactly these batches must have: an
// entry at the first batch of each epoch above all before it.
func epochsOf(bs [][]byte) epochCache {
	var c epochCache
	for _, b := range bs {
		if e := recordbatch.PartitionLeaderEpoch(b); e >= 0 && e > c.latestEpoch() {
			c = append(c, epochEntry{e, recordbatch.BaseOffset(b)})
		}
	}
	return c
}

// replicateGaps brings follower up to leader by fetches of about chunk
// bytes (plus, when torn, part of the next batch), as a follower's fetcher
// does, and returns how many fetches began past the follower's log end.
func replicateGaps(t *testing.T, leader, follower *Log, chunk int, torn bool, rng *rand.Rand) int {
	t.Helper()
	gapFirst := 0
	for follower.EndOffset() < leader.EndOffset() {
		from := follower.EndOffset()
		data, partial := fetchChunk(t, leader, from, chunk, torn, rng)
		whole := splitBatches(t, data[:len(data)-partial])
		res, err := follower.AppendReplica(data)
		if err != nil {
			t.Fatalf("AppendReplica at %d: %v", from, err)
		}
		wantEnd := recordbatch.LastOffset(whole[len(whole)-1]) + 1
		if res.EndOffset != wantEnd || follower.EndOffset() != wantEnd || res.Batches != len(whole) || res.Skipped != 0 ||
			res.PartialBytes != partial || res.FirstOffset != recordbatch.BaseOffset(whole[0]) || res.LastOffset != wantEnd-1 {
			t.Fatalf("AppendReplica at %d of %d batches from %d: %+v, end %d", from, len(whole), recordbatch.BaseOffset(whole[0]), res, follower.EndOffset())
		}
		if res.FirstOffset > from {
			gapFirst++
		}
	}
	return gapFirst
}

// sameBatches checks that l holds exactly want, verbatim.
func sameBatches(t *testing.T, what string, l *Log, want [][]byte) {
	t.Helper()
	got := readAll(t, l, l.StartOffset())
	if len(got) != len(want) {
		t.Fatalf("%s: %d batches, want %d", what, len(got), len(want))
	}
	for i := range got {
		if !bytes.Equal(got[i], want[i]) {
			t.Fatalf("%s: batch %d (offset %d) is not the leader's, verbatim", what, i, recordbatch.BaseOffset(want[i]))
		}
	}
	if want := recordbatch.LastOffset(want[len(want)-1]) + 1; l.EndOffset() != want {
		t.Fatalf("%s: end %d, want %d", what, l.EndOffset(), want)
	}
}

// checkReadsInGaps reads every gap of want at its start, middle and last
// offset: each returns the batch after the gap, as Kafka does.
func checkReadsInGaps(t *testing.T, what string, l *Log, want [][]byte) {
	t.Helper()
	next := map[int64][]byte{}
	for _, b := range want {
		next[recordbatch.BaseOffset(b)] = b
	}
	for _, g := range gapsOf(want) {
		for _, off := range []int64{g[0], g[0] + (g[1]-g[0])/2, g[1] - 1} {
			got, err := l.Read(off, 1, l.EndOffset(), nil)
			if err != nil {
				t.Fatalf("%s: Read(%d) in gap [%d, %d): %v", what, off, g[0], g[1], err)
			}
			if !bytes.Equal(got, next[g[1]]) {
				t.Fatalf("%s: Read(%d) in gap [%d, %d) did not return the batch at %d", what, off, g[0], g[1], g[1])
			}
		}
	}
}

// checkSegmentIndexes checks every segment's index files against its log.
func checkSegmentIndexes(t *testing.T, dir string, interval int32) {
	t.Helper()
	for _, name := range filesWithExt(t, dir, ".log") {
		checkIndexFiles(t, dir, baseOf(t, name), segmentBytes(t, filepath.Join(dir, name)), interval)
	}
}

// producersReplayed is the producer table rebuilt from l's batches alone.
func producersReplayed(t *testing.T, l *Log, cfg Config) map[int64]string {
	t.Helper()
	dir := crashCopy(t, l)
	for _, s := range filesWithExt(t, dir, ".snapshot") {
		removeFile(t, dir, s)
	}
	return producersOf(openLog(t, dir, cfg))
}

func TestAppendReplicaCompactedLeader(t *testing.T) {
	for _, tc := range []struct {
		name          string
		followerBytes int64 // follower's segment.bytes
		chunk         int
		torn          bool
	}{
		{"one follower segment/whole fetches", 1 << 20, 1 << 20, false},
		{"one follower segment/small torn fetches", 1 << 20, 300, true},
		{"one follower segment/a batch a fetch", 1 << 20, 1, false},
		{"leader's segment size/torn fetches", 1500, 700, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := gapConfig()
			cfg.SegmentBytes = 1500
			cfg.IndexIntervalBytes = 200
			leader := compactedLeader(t, cfg, 90)
			want := readAll(t, leader, 0)
			gaps := gapsOf(want)
			if len(gaps) < 5 || recordbatch.BaseOffset(want[0]) == 0 && len(gaps) < 6 {
				t.Fatalf("setup: the compacted leader has %d gaps", len(gaps))
			}

			fcfg := cfg
			fcfg.SegmentBytes = tc.followerBytes
			follower := openLog(t, t.TempDir(), fcfg)
			n := replicateGaps(t, leader, follower, tc.chunk, tc.torn, rand.New(rand.NewSource(int64(tc.chunk))))
			if n == 0 {
				t.Fatal("no fetch began past the follower's log end: the gaps were not exercised")
			}
			if tc.followerBytes > 1<<19 && follower.SegmentCount() != 1 {
				t.Fatalf("setup: %d follower segments, want the whole copy in the active one", follower.SegmentCount())
			}
			sameBatches(t, "follower", follower, want)
			checkReadsInGaps(t, "follower", follower, want)
			checkSegmentIndexes(t, follower.dir, fcfg.IndexIntervalBytes)
			// Epoch entries start at the first batch of each epoch the
			// follower has (as Kafka's follower assigns them), which for
			// epoch 3 is past where the leader's entry says it began.
			wantEpochs := epochsOf(want)
			if le := leader.epochCache(); len(le) != 3 || len(wantEpochs) != 3 || wantEpochs[1].start <= le[1].start {
				t.Fatalf("setup: leader epochs %v, follower's should be %v", le, wantEpochs)
			}
			checkEpochs(t, follower, wantEpochs)
			// Producer state is what the follower's own batches say.
			live := producersOf(follower)
			follower.mu.Lock()
			e := follower.mu.producers[77]
			follower.mu.Unlock()
			if len(live) != 1 || e == nil || len(e.batches) < 3 {
				t.Fatalf("producer state %v, want several batches of producer 77", live)
			}
			if got := producersReplayed(t, follower, fcfg); !reflect.DeepEqual(live, got) {
				t.Fatalf("producer state is not the log's:\nlive     %v\nreplayed %v", live, got)
			}
			if err := follower.Flush(); err != nil {
				t.Fatal(err)
			}

			// An unclean shutdown: recovery scans the active segment, gaps
			// and all, and keeps every batch.
			crashed := openLog(t, crashCopy(t, follower), fcfg)
			sameBatches(t, "after a crash", crashed, want)
			checkReadsInGaps(t, "after a crash", crashed, want)
			checkSegmentIndexes(t, crashed.dir, fcfg.IndexIntervalBytes)
			checkEpochs(t, crashed, wantEpochs)
			if got := producersOf(crashed); !reflect.DeepEqual(live, got) {
				t.Fatalf("producer state after a crash:\nlive      %v\nrecovered %v", live, got)
			}
			// So does recovery without the epoch checkpoint.
			dir := crashCopy(t, follower)
			removeFile(t, dir, epochCheckpointFile)
			checkEpochs(t, openLog(t, dir, fcfg), wantEpochs)

			// A clean shutdown and open.
			if err := follower.Close(); err != nil {
				t.Fatal(err)
			}
			reopened := openLog(t, follower.dir, fcfg)
			sameBatches(t, "reopened", reopened, want)
			checkEpochs(t, reopened, wantEpochs)

			// Truncation inside a gap ends the log after the batch before
			// it; the follower then fetches across the gap again.
			g := gaps[len(gaps)/2]
			if err := reopened.Truncate(g[0] + (g[1]-g[0])/2); err != nil {
				t.Fatal(err)
			}
			var kept [][]byte
			for _, b := range want {
				if recordbatch.LastOffset(b) < g[0] {
					kept = append(kept, b)
				}
			}
			sameBatches(t, "truncated in a gap", reopened, kept)
			checkEpochs(t, reopened, epochsOf(kept))
			if got, want := producersOf(reopened), producersReplayed(t, reopened, fcfg); !reflect.DeepEqual(got, want) {
				t.Fatalf("producer state after truncation:\nlive     %v\nreplayed %v", got, want)
			}
			if replicateGaps(t, leader, reopened, tc.chunk, false, nil) == 0 {
				t.Fatal("the fetch after the truncation did not begin past the log end")
			}
			sameBatches(t, "fetched again", reopened, want)
			checkEpochs(t, reopened, wantEpochs)
			checkSegmentIndexes(t, reopened.dir, fcfg.IndexIntervalBytes)
		})
	}
}

// TestAppendReplicaGaps: gaps at the start of a fetch and between its
// batches are taken; overlaps and offsets going back are not; reads,
// truncation and recovery see the gaps.
func TestAppendReplicaGaps(t *testing.T) {
	// The follower holds A (0-2, epoch 1). The leader, compacted, has C
	// (6-8, epoch 2) and E (20-21, epoch 4), then G (30-31, epoch 4).
	A := storedBatch(t, batchOpts{N: 3, Idempotent: true, PID: 5, Seq: 0}, 0, 1)
	C := storedBatch(t, batchOpts{N: 3, Idempotent: true, PID: 5, Seq: 6, Codec: recordbatch.CodecGzip, BaseTS: 2000}, 6, 2)
	E := storedBatch(t, batchOpts{N: 2, Idempotent: true, PID: 5, Seq: 20, BaseTS: 3000}, 20, 4)
	G := storedBatch(t, batchOpts{N: 2, Idempotent: true, PID: 5, Seq: 30, BaseTS: 1500}, 30, 4)
	cfg := gapConfig()
	cfg.IndexIntervalBytes = 1
	dir := t.TempDir()
	l := openLog(t, dir, cfg)
	if _, err := l.AppendReplica(A); err != nil {
		t.Fatal(err)
	}
	res, err := l.AppendReplica(cat(C, E))
	if err != nil || res.Batches != 2 || res.FirstOffset != 6 || res.LastOffset != 21 || res.EndOffset != 22 || res.Records != 5 {
		t.Fatalf("AppendReplica across gaps: %+v, %v", res, err)
	}
	sameBatches(t, "after the gaps", l, [][]byte{A, C, E})
	checkReadsInGaps(t, "after the gaps", l, [][]byte{A, C, E})
	// The epochs start at their first batches, not where the gaps began.
	checkEpochs(t, l, ec(1, 0, 2, 6, 4, 20))
	for _, c := range []struct {
		epoch int32
		end   int64
	}{{1, 6}, {2, 20}, {3, 20}, {4, 22}} {
		if e, end := l.EndOffsetForEpoch(c.epoch); end != c.end {
			t.Fatalf("EndOffsetForEpoch(%d) = (%d, %d), want end %d", c.epoch, e, end, c.end)
		}
	}
	// The producer's sequences jump with the gaps; its last batch is E.
	want := normalise(producers{5: {batches: []producerBatch{{0, 2, 0, 2}, {6, 8, 6, 8}, {20, 21, 20, 21}}}})
	if got := producersOf(l); !reflect.DeepEqual(got, want) {
		t.Fatalf("producer state %v, want %v", got, want)
	}
	// The time index skips the gaps too.
	if off, ok := timeAt(t, l, 2500); !ok || off != 20 {
		t.Fatalf("OffsetForTimestamp(2500) = %d, %v; want 20", off, ok)
	}

	// Refused: anything overlapping what is here, or going back.
	for _, tc := range []struct {
		name string
		in   []byte
		kept int
	}{
		{"straddling the log end", storedBatch(t, batchOpts{N: 3}, 20, 4), 0},
		{"starting at the last offset", storedBatch(t, batchOpts{N: 2}, 21, 4), 0},
		{"going back after a gap", cat(G, storedBatch(t, batchOpts{N: 2}, 25, 4)), 1},
		{"repeated after a gap", cat(G, G), 1},
		{"overlapping the batch before", cat(G, storedBatch(t, batchOpts{N: 2}, 31, 4)), 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := openLog(t, t.TempDir(), cfg)
			if _, err := l.AppendReplica(cat(A, C, E)); err != nil {
				t.Fatal(err)
			}
			res, err := l.AppendReplica(tc.in)
			wantErrIs(t, err, ErrUnexpectedOffset)
			if res.Batches != tc.kept {
				t.Fatalf("%+v", res)
			}
			want := [][]byte{A, C, E, G}[:3+tc.kept]
			sameBatches(t, tc.name, l, want)
			sameBatches(t, tc.name+", after a crash", openLog(t, crashCopy(t, l), cfg), want)
		})
	}
	// A leading batch below the log end, in a gap or not, is a refetch.
	res, err = l.AppendReplica(cat(storedBatch(t, batchOpts{N: 2}, 10, 2), G))
	if err != nil || res.Skipped != 1 || res.Batches != 1 || res.EndOffset != 32 {
		t.Fatalf("refetch then a gap: %+v, %v", res, err)
	}

	// Truncation: inside a gap, at the batch after it, at the gap's start.
	for _, tc := range []struct {
		to      int64
		wantEnd int64
		epochs  epochCache
	}{
		{26, 22, ec(1, 0, 2, 6, 4, 20)},
		{22, 22, ec(1, 0, 2, 6, 4, 20)},
		{20, 9, ec(1, 0, 2, 6)},
		{15, 9, ec(1, 0, 2, 6)},
		{4, 3, ec(1, 0)},
	} {
		t.Run(fmt.Sprintf("truncate to %d", tc.to), func(t *testing.T) {
			l := openLog(t, crashCopy(t, l), cfg)
			if err := l.Truncate(tc.to); err != nil {
				t.Fatal(err)
			}
			if l.EndOffset() != tc.wantEnd || l.DurableOffset() != tc.wantEnd {
				t.Fatalf("end %d durable %d, want %d", l.EndOffset(), l.DurableOffset(), tc.wantEnd)
			}
			checkEpochs(t, l, tc.epochs)
			var want [][]byte
			for _, b := range [][]byte{A, C, E, G} {
				if recordbatch.LastOffset(b) < tc.wantEnd {
					want = append(want, b)
				}
			}
			sameBatches(t, "truncated", l, want)
			// The leader's batches arrive again, gaps and all.
			res, err := l.AppendReplica(cat(A, C, E, G))
			if err != nil || res.EndOffset != 32 {
				t.Fatalf("refetch after truncation: %+v, %v", res, err)
			}
			sameBatches(t, "fetched again", l, [][]byte{A, C, E, G})
			checkEpochs(t, l, ec(1, 0, 2, 6, 4, 20))
			checkSegmentIndexes(t, l.dir, cfg.IndexIntervalBytes)
		})
	}
}

// timeAt is OffsetForTimestamp(ts) over the whole log.
func timeAt(t *testing.T, l *Log, ts int64) (int64, bool) {
	t.Helper()
	off, _, ok, err := l.OffsetForTimestamp(ts, l.EndOffset())
	if err != nil {
		t.Fatal(err)
	}
	return off, ok
}

// TestAppendReplicaGapEpochs: an epoch this replica recorded as leader at
// its log end, and never wrote, gives way to the leader's batches after a
// gap as it does to batches right at the end, whatever their epoch.
func TestAppendReplicaGapEpochs(t *testing.T) {
	for _, tc := range []struct {
		name  string
		epoch int32 // of the fetched batch at 10
		want  epochCache
	}{
		{"older epoch", 4, ec(3, 0, 4, 10)},
		{"newer epoch", 7, ec(3, 0, 7, 10)},
		{"same epoch", 5, ec(3, 0, 5, 2)},
		{"the log's epoch", 3, ec(3, 0)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			l := openLog(t, dir, gapConfig())
			if _, err := l.AppendReplica(storedBatch(t, batchOpts{N: 2}, 0, 3)); err != nil {
				t.Fatal(err)
			}
			if err := l.AssignEpoch(5, 2); err != nil {
				t.Fatal(err)
			}
			if _, err := l.AppendReplica(storedBatch(t, batchOpts{N: 2}, 10, tc.epoch)); err != nil {
				t.Fatal(err)
			}
			checkEpochs(t, l, tc.want)
			if got, want := checkpointText(t, dir), string(tc.want.encode()); got != want {
				t.Fatalf("checkpoint %q, want %q", got, want)
			}
		})
	}
	// Once an epoch has a batch, an older one is refused, gap or not.
	l := openLog(t, t.TempDir(), gapConfig())
	if _, err := l.AppendReplica(storedBatch(t, batchOpts{N: 2}, 0, 3)); err != nil {
		t.Fatal(err)
	}
	_, err := l.AppendReplica(storedBatch(t, batchOpts{N: 2}, 10, 2))
	wantErrIs(t, err, ErrStaleLeaderEpoch)
	if l.EndOffset() != 2 {
		t.Fatalf("end %d", l.EndOffset())
	}
}

// TestAppendReplicaGapPastSegmentRange: a gap too wide for the active
// segment's int32 relative offsets rolls a new segment at the batch, even
// from an empty segment, and the log reads, recovers and truncates across
// the empty range.
func TestAppendReplicaGapPastSegmentRange(t *testing.T) {
	cfg := gapConfig()
	cfg.IndexIntervalBytes = 1 // each batch indexed
	// Past the int32 relative offsets of segment 0, and such that offset 0
	// relative to it wraps to a positive int32 (1<<30): a read that walks
	// on into the far segment must still start at its first batch.
	far := int64(3) << 30
	for _, tc := range []struct {
		name     string
		in       [][]byte
		segments []int64
	}{
		{"from an empty log", [][]byte{storedBatch(t, batchOpts{N: 2}, far, 1), storedBatch(t, batchOpts{N: 2}, far+5, 1)}, []int64{0, far}},
		{"after a batch", [][]byte{storedBatch(t, batchOpts{N: 2}, 0, 1), storedBatch(t, batchOpts{N: 2}, far, 1)}, []int64{0, far}},
		{"just within range", [][]byte{storedBatch(t, batchOpts{N: 2}, 0, 1), storedBatch(t, batchOpts{N: 2}, maxRelOffset-2, 1)}, []int64{0}},
		{"just past range", [][]byte{storedBatch(t, batchOpts{N: 2}, 0, 1), storedBatch(t, batchOpts{N: 2}, maxRelOffset-1, 1)}, []int64{0, maxRelOffset - 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := openLog(t, t.TempDir(), cfg)
			res, err := l.AppendReplica(cat(tc.in...))
			if err != nil || res.Batches != len(tc.in) {
				t.Fatalf("%+v, %v", res, err)
			}
			var segs []int64
			for _, name := range filesWithExt(t, l.dir, ".log") {
				segs = append(segs, baseOf(t, name))
			}
			if !reflect.DeepEqual(segs, tc.segments) {
				t.Fatalf("segments %v, want %v", segs, tc.segments)
			}
			sameBatches(t, "appended", l, tc.in)
			checkReadsInGaps(t, "appended", l, tc.in)
			if got, err := l.Read(0, 1, l.EndOffset(), nil); err != nil || !bytes.Equal(got, tc.in[0]) {
				t.Fatalf("Read(0): %v", err)
			}
			checkSegmentIndexes(t, l.dir, cfg.IndexIntervalBytes)
			crashed := openLog(t, crashCopy(t, l), cfg)
			sameBatches(t, "after a crash", crashed, tc.in)
			checkSegmentIndexes(t, crashed.dir, cfg.IndexIntervalBytes)
			// Truncating into the range before the far batch drops it.
			last := tc.in[len(tc.in)-1]
			if err := crashed.Truncate(recordbatch.BaseOffset(last) - 1); err != nil {
				t.Fatal(err)
			}
			if want := recordbatch.LastOffset(tc.in[len(tc.in)-2]) + 1; crashed.EndOffset() != want {
				t.Fatalf("end %d after truncation, want %d", crashed.EndOffset(), want)
			}
			if _, err := crashed.AppendReplica(last); err != nil {
				t.Fatal(err)
			}
			sameBatches(t, "fetched again", crashed, tc.in)
		})
	}
}

// gapConfig is the configuration of a compacted topic's log, the only kind
// that keeps gaps through recovery.
func gapConfig() Config {
	cfg := testConfig()
	cfg.Compacted = true
	return cfg
}

// TestRecoveryGapInUncompactedLog: a log that is not compacted never has
// gaps, so after a crash its active segment is cut at the first one (the
// base offset is outside the CRC: a gap there is damage). AppendReplica
// still takes gapped batches (a topic that stopped being compacted), so a
// follower cut back that way fetches the rest again.
func TestRecoveryGapInUncompactedLog(t *testing.T) {
	cfg := testConfig()
	l := openLog(t, t.TempDir(), cfg)
	for _, base := range []int64{0, 2, 10, 12} {
		if _, err := l.AppendReplica(storedBatch(t, batchOpts{N: 2}, base, 1)); err != nil {
			t.Fatalf("AppendReplica at %d: %v", base, err)
		}
	}
	if l.EndOffset() != 14 {
		t.Fatalf("end %d, want 14", l.EndOffset())
	}
	crashed := openLog(t, crashCopy(t, l), cfg)
	if crashed.EndOffset() != 4 {
		t.Fatalf("recovered end %d, want 4 (cut at the gap)", crashed.EndOffset())
	}
	for _, base := range []int64{10, 12} {
		if _, err := crashed.AppendReplica(storedBatch(t, batchOpts{N: 2}, base, 1)); err != nil {
			t.Fatalf("refetch at %d: %v", base, err)
		}
	}
	if crashed.EndOffset() != 14 {
		t.Fatalf("end after refetch %d, want 14", crashed.EndOffset())
	}
}
