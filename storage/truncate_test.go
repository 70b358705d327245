package storage

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"math/rand"
	"os"
	"path/filepath"
	"reflect"
	"sync"
	"testing"

	"github.com/fjordlog/fjord/storage/recordbatch"
	"github.com/fjordlog/fjord/storage/recordbatch/batchtest"
)

func truncConfig() Config {
	cfg := testConfig()
	cfg.SegmentBytes = 1500
	cfg.IndexIntervalBytes = 200
	return cfg
}

// leaderEpochs is the epoch cache buildLeader leaves.
func leaderEpochs(batches []leaderBatch) epochCache {
	n := len(batches)
	return ec(0, 0, 3, batches[n/3].base, 6, batches[2*n/3].base)
}

// recordTimes lists every record's offset and timestamp, for brute-force
// time queries.
func recordTimes(t *testing.T, batches []leaderBatch) []tsRecord {
	t.Helper()
	var out []tsRecord
	for _, b := range batches {
		rb, recs := batchtest.Decode(t, b.orig)
		for _, r := range recs {
			out = append(out, tsRecord{b.base + int64(r.OffsetDelta), rb.FirstTimestamp + r.TimestampDelta64})
		}
	}
	return out
}

// replayedProducers is the producer table a log's batches imply: a crashed
// copy of it opened with every snapshot removed.
func replayedProducers(t *testing.T, l *Log) map[int64]string {
	t.Helper()
	dir := crashCopy(t, l)
	for _, s := range filesWithExt(t, dir, ".snapshot") {
		removeFile(t, dir, s)
	}
	r := openLog(t, dir, l.cfg)
	defer r.Close()
	return producersOf(r)
}

// checkLogIs checks that l holds exactly batches, with every derived
// structure agreeing: files cut to their batches, indexes, epoch cache and
// its checkpoint, producer state, time queries.
func checkLogIs(t *testing.T, l *Log, batches []leaderBatch, epochs epochCache) {
	t.Helper()
	checkLogIsOpt(t, l, batches, epochs, true)
}

// checkLogIsOpt is checkLogIs, with the costly check of the producer table
// against a replay of a copy of the log only when replay is set.
func checkLogIsOpt(t *testing.T, l *Log, batches []leaderBatch, epochs epochCache, replay bool) {
	t.Helper()
	wantEnd := l.StartOffset()
	if n := len(batches); n > 0 {
		wantEnd = batches[n-1].last + 1
	}
	if l.EndOffset() != wantEnd {
		t.Fatalf("end %d, want %d", l.EndOffset(), wantEnd)
	}
	got := readAll(t, l, l.StartOffset())
	if len(got) != len(batches) {
		t.Fatalf("log holds %d batches, want %d", len(got), len(batches))
	}
	for i, b := range batches {
		sameBatch(t, got[i], b.orig, b.base, b.epoch)
	}
	for _, name := range filesWithExt(t, l.dir, ".log") {
		path := filepath.Join(l.dir, name)
		data := segmentBytes(t, path)
		if base := baseOf(t, name); base > wantEnd || (base == wantEnd && len(data) > 0) {
			t.Fatalf("segment %s survives past the end %d", name, wantEnd)
		}
		checkIndexFiles(t, l.dir, baseOf(t, name), data, l.cfg.IndexIntervalBytes)
	}
	for _, name := range filesWithExt(t, l.dir, ".snapshot") {
		if off := baseOf(t, name); off > wantEnd {
			t.Fatalf("producer snapshot %s past the end %d", name, wantEnd)
		}
	}
	checkEpochs(t, l, epochs)
	if got := checkpointText(t, l.dir); got != string(epochs.encode()) {
		t.Fatalf("checkpoint %q, want %q", got, epochs.encode())
	}
	if !replay {
		// The live table against the crashed copy's, elsewhere.
	} else if live, replayed := producersOf(l), replayedProducers(t, l); !reflect.DeepEqual(live, replayed) {
		t.Fatalf("producer state is not the log's:\nlive     %v\nreplayed %v", live, replayed)
	}
	recs := recordTimes(t, batches)
	for target := int64(9_990); target < 10_300; target += 7 {
		off, ts, ok, err := l.OffsetForTimestamp(target, math.MaxInt64)
		wo, wts, wok := bruteForceTS(recs, target, math.MaxInt64)
		if err != nil || off != wo || ts != wts || ok != wok {
			t.Fatalf("OffsetForTimestamp(%d) = %d, %d, %v, %v; want %d, %d, %v", target, off, ts, ok, err, wo, wts, wok)
		}
	}
	var maxRec tsRecord
	maxRec.ts = -1
	for _, r := range recs {
		if r.ts > maxRec.ts {
			maxRec = r
		}
	}
	off, ts, ok, err := l.MaxTimestamp()
	if err != nil || ok != (len(recs) > 0) || (ok && (off != maxRec.off || ts != maxRec.ts)) {
		t.Fatalf("MaxTimestamp = %d, %d, %v, %v; want %+v", off, ts, ok, err, maxRec)
	}
}

// truncTargets are offsets worth truncating a log of batches to: each
// segment's first, second and last offset, the inside of every fourth
// batch (a straddled batch goes whole), and the last offset.
func truncTargets(segs []*segment, batches []leaderBatch) []int64 {
	seen := map[int64]bool{}
	var out []int64
	add := func(o int64) {
		if !seen[o] {
			seen[o] = true
			out = append(out, o)
		}
	}
	for _, s := range segs {
		add(s.base)
		add(s.base + 1)
		add(s.next - 1)
	}
	for i, b := range batches {
		if i%4 == 1 && b.last > b.base {
			add(b.last)
		}
	}
	add(batches[len(batches)-1].last)
	return out
}

func TestTruncate(t *testing.T) {
	cfg := truncConfig()
	probe := openLog(t, t.TempDir(), cfg)
	all := buildLeaderWith(t, probe, 30, cheapCodecs)
	if probe.SegmentCount() < 4 {
		t.Fatalf("setup: %d segments", probe.SegmentCount())
	}
	targets := truncTargets(probe.segments(), all)
	probe.Close()
	for _, target := range targets {
		t.Run(fmt.Sprint(target), func(t *testing.T) {
			l := openLog(t, t.TempDir(), cfg)
			batches := buildLeaderWith(t, l, 30, cheapCodecs)
			keep := 0
			for keep < len(batches) && batches[keep].last < target {
				keep++
			}
			wantEnd := batches[keep].base // a batch straddling target goes whole
			if err := l.Truncate(target); err != nil {
				t.Fatal(err)
			}
			if l.EndOffset() != wantEnd || l.DurableOffset() != wantEnd {
				t.Fatalf("Truncate(%d): end %d durable %d, want %d", target, l.EndOffset(), l.DurableOffset(), wantEnd)
			}
			epochs := leaderEpochs(batches).truncateFromEnd(wantEnd)
			checkLogIs(t, l, batches[:keep], epochs)

			// A crash now: the log comes back truncated, with the producer
			// table the live one has.
			r := openLog(t, crashCopy(t, l), cfg)
			checkLogIsOpt(t, r, batches[:keep], epochs, false)
			if live, crashed := producersOf(l), producersOf(r); !reflect.DeepEqual(live, crashed) {
				t.Fatalf("producer state after a crash:\nlive    %v\ncrashed %v", live, crashed)
			}
			r.Close()

			// The log carries on as a leader at a new epoch: producer 77's
			// first lost batch is new again, its last kept one a duplicate.
			if err := l.AssignEpoch(9, wantEnd); err != nil {
				t.Fatal(err)
			}
			epochs = append(epochs, epochEntry{9, wantEnd})
			var kept77, lost77 *leaderBatch
			for i := range batches {
				if b := &batches[i]; b.opts.PID == 77 && b.opts.Idempotent {
					if i < keep {
						kept77 = b
					} else if lost77 == nil {
						lost77 = b
					}
				}
			}
			if kept77 != nil {
				res, err := l.Append(bytes.Clone(kept77.orig), must(recordbatch.Validate(kept77.orig, 0)), 9, 1)
				if err != nil || !res.Duplicate || res.BaseOffset != kept77.base {
					t.Fatalf("retry of kept batch [%d, %d]: %+v, %v", kept77.base, kept77.last, res, err)
				}
			}
			if lost77 == nil { // only plain batches were cut: producer 77 goes on
				o := kept77.opts
				o.Seq += int32(o.N)
				lost77 = &leaderBatch{appended{orig: buildBatch(t, o)}, 9, o}
			}
			res, err := l.Append(bytes.Clone(lost77.orig), must(recordbatch.Validate(lost77.orig, 0)), 9, 1)
			if err != nil || res.Duplicate || res.BaseOffset != wantEnd {
				t.Fatalf("retry of lost batch [%d, %d]: %+v, %v; want appended at %d", lost77.base, lost77.last, res, err, wantEnd)
			}
			after := append(append([]leaderBatch(nil), batches[:keep]...), leaderBatch{appended{lost77.orig, res.BaseOffset, res.LastOffset}, 9, lost77.opts})
			checkLogIsOpt(t, l, after, epochs, false)
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			checkLogIs(t, openLog(t, l.dir, cfg), after, epochs)
		})
	}
}

// TestTruncateAtOrPastEnd removes nothing, but forgets an epoch recorded
// at the end and never written.
func TestTruncateAtOrPastEnd(t *testing.T) {
	cfg := truncConfig()
	l := openLog(t, t.TempDir(), cfg)
	batches := buildLeaderWith(t, l, 12, cheapCodecs)
	end := l.EndOffset()
	if err := l.AssignEpoch(8, end); err != nil {
		t.Fatal(err)
	}
	for _, target := range []int64{end + 100, end + 1, end} {
		if err := l.Truncate(target); err != nil {
			t.Fatal(err)
		}
		checkLogIs(t, l, batches, leaderEpochs(batches))
	}
	if err := l.Truncate(-1); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Fatalf("Truncate(-1): %v", err)
	}
}

// TestTruncatePreallocatedTail: the active segment's file runs ahead of its
// batches (fallocate); truncation leaves exactly the kept batches, and
// appends after it extend the file again.
func TestTruncatePreallocatedTail(t *testing.T) {
	cfg := testConfig()
	l := openLog(t, t.TempDir(), cfg)
	path := filepath.Join(l.dir, "00000000000000000000.log")
	var kept []appended
	for i := range 10 {
		a := appendAt(t, l, batchOpts{N: 2, ValueSize: 100}, 1)
		if i < 4 {
			kept = append(kept, a)
		}
	}
	if fileSize(t, path) <= segmentSize(t, path) {
		t.Skip("no preallocation on this filesystem")
	}
	var want int64
	for _, a := range kept {
		want += int64(len(a.orig))
	}
	if err := l.Truncate(kept[3].last + 1); err != nil {
		t.Fatal(err)
	}
	if got := fileSize(t, path); got != want {
		t.Fatalf("segment file is %d bytes after truncation, want %d", got, want)
	}
	a := appendAt(t, l, batchOpts{N: 2, ValueSize: 100}, 2)
	if a.base != kept[3].last+1 {
		t.Fatalf("append after truncation at %d", a.base)
	}
	if err := l.Truncate(a.base); err != nil {
		t.Fatal(err)
	}
	if got := fileSize(t, path); got != want {
		t.Fatalf("segment file is %d bytes after the second truncation, want %d", got, want)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if got := fileSize(t, path); got != want {
		t.Fatalf("segment file is %d bytes after Close, want %d", got, want)
	}
}

func TestTruncateFullyAndStartAt(t *testing.T) {
	cfg := truncConfig()
	probe := openLog(t, t.TempDir(), cfg)
	buildLeaderWith(t, probe, 20, cheapCodecs)
	segs := probe.segments()
	end := probe.EndOffset()
	probe.Close()
	for _, tc := range []struct {
		name   string
		offset int64
		retain bool // delete old segments first, then truncate below the start
	}{
		{"zero", 0, false},
		{"inside the first segment", 1, false},
		{"a segment base", segs[2].base, false},
		{"inside the log", segs[2].base + 1, false},
		{"the end", end, false},
		{"past the end", end + 1000, false},
		{"below the start, by Truncate", segs[2].base - 1, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := openLog(t, t.TempDir(), cfg)
			buildLeaderWith(t, l, 20, cheapCodecs)
			if tc.retain {
				c := cfg
				c.RetentionBytes = 1
				l.SetConfig(c)
				if _, err := l.DeleteOldSegments(1); err != nil || l.StartOffset() <= tc.offset {
					t.Fatalf("setup: start %d, %v", l.StartOffset(), err)
				}
				l.SetConfig(cfg)
				if err := l.Truncate(tc.offset); err != nil {
					t.Fatal(err)
				}
			} else if err := l.TruncateFullyAndStartAt(tc.offset); err != nil {
				t.Fatal(err)
			}
			check := func(l *Log) {
				t.Helper()
				if l.StartOffset() != tc.offset || l.EndOffset() != tc.offset || l.DurableOffset() != tc.offset || l.Size() != 0 {
					t.Fatalf("start %d end %d durable %d size %d, want empty at %d", l.StartOffset(), l.EndOffset(), l.DurableOffset(), l.Size(), tc.offset)
				}
				if logs := filesWithExt(t, l.dir, ".log"); len(logs) != 1 || baseOf(t, logs[0]) != tc.offset {
					t.Fatalf("segments %v", logs)
				}
				if snaps := filesWithExt(t, l.dir, ".snapshot"); len(snaps) != 0 {
					t.Fatalf("snapshots survive: %v", snaps)
				}
				checkEpochs(t, l, nil)
				if len(producersOf(l)) != 0 {
					t.Fatal("producer state survives")
				}
				if data, err := l.Read(tc.offset, 1<<20, math.MaxInt64, nil); err != nil || len(data) != 0 {
					t.Fatalf("Read(%d) = %d bytes, %v", tc.offset, len(data), err)
				}
				if tc.offset > 0 {
					if _, err := l.Read(tc.offset-1, 1<<20, math.MaxInt64, nil); !errors.Is(err, ErrOffsetOutOfRange) {
						t.Fatalf("Read below the new start: %v", err)
					}
				}
			}
			check(l)
			check(openLog(t, crashCopy(t, l), cfg))
			// The leader's batches from the new start follow.
			res, err := l.AppendReplica(cat(storedBatch(t, batchOpts{N: 2}, tc.offset, 7), storedBatch(t, batchOpts{N: 3}, tc.offset+2, 7)))
			if err != nil || l.EndOffset() != tc.offset+5 || res.Batches != 2 {
				t.Fatalf("AppendReplica after restart: %+v, %v", res, err)
			}
			checkEpochs(t, l, ec(7, tc.offset))
			r := openLog(t, crashCopy(t, l), cfg)
			if r.StartOffset() != tc.offset || r.EndOffset() != tc.offset+5 || len(readAll(t, r, tc.offset)) != 2 {
				t.Fatalf("after a crash: start %d end %d", r.StartOffset(), r.EndOffset())
			}
			checkEpochs(t, r, ec(7, tc.offset))
		})
	}
	l := openLog(t, t.TempDir(), cfg)
	if err := l.TruncateFullyAndStartAt(-1); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Fatalf("TruncateFullyAndStartAt(-1): %v", err)
	}
	l.Close()
	if err := l.TruncateFullyAndStartAt(5); !errors.Is(err, ErrClosed) {
		t.Fatalf("closed: %v", err)
	}
	if err := l.Truncate(0); !errors.Is(err, ErrClosed) {
		t.Fatalf("closed: %v", err)
	}
}

// TestTruncateThenDivergentHistory is the follower's case: truncated to the
// divergence point, it takes the new leader's different batches at the same
// offsets. After a crash, nothing of the old history comes back: not its
// batches, not its producer snapshots (a roll wrote one at an offset the
// new history passes again), not its epochs.
func TestTruncateThenDivergentHistory(t *testing.T) {
	cfg := truncConfig()
	l := openLog(t, t.TempDir(), cfg)
	old := buildLeaderWith(t, l, 30, cheapCodecs)
	cut := old[12].base
	snapsBefore := filesWithExt(t, l.dir, ".snapshot")
	if len(snapsBefore) == 0 || baseOf(t, snapsBefore[len(snapsBefore)-1]) <= cut {
		t.Fatalf("setup: snapshots %v, cut at %d", snapsBefore, cut)
	}
	if err := l.Truncate(cut); err != nil {
		t.Fatal(err)
	}
	// The new leader, at epoch 4, wrote other batches from the cut: producer
	// 77 under a new producer epoch, and enough to pass the old snapshots.
	// A single large segment config on this replica keeps it from rolling
	// (and writing new snapshots over the old names).
	big := cfg
	big.SegmentBytes = 1 << 30
	l.SetConfig(big)
	var newer []leaderBatch
	next := cut
	for i := range 40 {
		o := batchOpts{N: 2, ValueSize: 40, Idempotent: true, PID: 77, Epoch: 5, Seq: int32(2 * i), BaseTS: 10_000}
		b := storedBatch(t, o, next, 4)
		if _, err := l.AppendReplica(b); err != nil {
			t.Fatal(err)
		}
		newer = append(newer, leaderBatch{appended{b, next, next + 1}, 4, o})
		next += 2
	}
	if next <= baseOf(t, snapsBefore[len(snapsBefore)-1]) {
		t.Fatalf("setup: the new history ends at %d, before the old snapshots", next)
	}
	want := append(append([]leaderBatch(nil), old[:12]...), newer...)
	epochs := ec(0, 0, 3, old[10].base, 4, cut)
	r := openLog(t, crashCopy(t, l), big)
	checkLogIs(t, r, want, epochs)
	checkLogIs(t, l, want, epochs)
}

// TestTruncateConcurrentReaders runs readers against a writer that appends
// and truncates, under the race detector. Reads below a floor the writer
// never truncates under (the high watermark, for the broker) must always
// succeed with whole, intact batches; the rest may fail, never panic.
func TestTruncateConcurrentReaders(t *testing.T) {
	cfg := testConfig()
	cfg.SegmentBytes = 2000
	cfg.IndexIntervalBytes = 150
	l := openLog(t, t.TempDir(), cfg)
	var floor sync.Mutex
	hw := int64(0)
	getHW := func() int64 { floor.Lock(); defer floor.Unlock(); return hw }
	done := make(chan struct{})
	errc := make(chan error, 100)
	var wg sync.WaitGroup
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
				limit := getHW()
				start := l.StartOffset()
				if limit <= start {
					continue
				}
				off := start + rng.Int63n(limit-start)
				data, err := l.Read(off, rng.Intn(3000), limit, nil)
				if err != nil {
					errc <- fmt.Errorf("Read(%d) below the floor %d: %v", off, limit, err)
					return
				}
				if len(data) == 0 {
					errc <- fmt.Errorf("Read(%d) below the floor %d returned nothing", off, limit)
					return
				}
				for b := data; len(b) > 0; {
					n := int(recordbatch.Length(b))
					if len(b) < recordbatch.HeaderLen || n < recordbatch.HeaderLen || n > len(b) {
						errc <- fmt.Errorf("Read(%d) below the floor %d: torn batch", off, limit)
						return
					}
					if err := recordbatch.CheckCRC(b[:n]); err != nil || recordbatch.LastOffset(b) >= limit || (len(b) == len(data) && (recordbatch.BaseOffset(b) > off || recordbatch.LastOffset(b) < off)) {
						errc <- fmt.Errorf("Read(%d): batch [%d, %d] (floor %d): %v", off, recordbatch.BaseOffset(b), recordbatch.LastOffset(b), limit, err)
						return
					}
					b = b[n:]
				}
				l.OffsetForTimestamp(rng.Int63n(400), l.EndOffset())
				l.MaxTimestamp()
				// Above the floor a read may race a truncation and fail,
				// but never as damage: what it met was the cut, not bad
				// bytes on disk (a false damage report costs a repair).
				if _, err := l.Read(off, 1<<16, math.MaxInt64, nil); errors.Is(err, ErrCorruptLog) {
					errc <- fmt.Errorf("Read(%d) above the floor: %v", off, err)
					return
				}
				l.EndOffsetForEpoch(int32(rng.Intn(20)))
				l.LatestEpoch()
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
	// The floor is always a batch boundary, as a high watermark is (the
	// least of the replicas' log ends), so no batch straddles it and
	// truncation above it never cuts below it.
	rng := rand.New(rand.NewSource(1))
	epoch := int32(0)
	var bounds []int64
	for i := range 400 {
		if i%20 == 0 {
			epoch++
		}
		appendAt(t, l, batchOpts{N: 1 + i%4, ValueSize: 50, BaseTS: int64(i)}, epoch)
		end := l.EndOffset()
		bounds = append(bounds, end)
		switch {
		case i%9 == 8:
			h := getHW()
			target := h + rng.Int63n(end-h+1)
			if err := l.Truncate(target); err != nil {
				t.Fatal(err)
			}
			// A cut is durable before Truncate returns; a target at the end
			// cuts nothing and leaves durability to the flusher.
			if (target < end && l.DurableOffset() != l.EndOffset()) || l.EndOffset() < h {
				t.Fatalf("after Truncate: durable %d, end %d, floor %d", l.DurableOffset(), l.EndOffset(), h)
			}
			for len(bounds) > 0 && bounds[len(bounds)-1] > l.EndOffset() {
				bounds = bounds[:len(bounds)-1]
			}
		case i%5 == 0:
			floor.Lock()
			hw = max(hw, bounds[len(bounds)-1-rng.Intn(min(8, len(bounds)))])
			floor.Unlock()
		}
	}
	close(done)
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Fatal(err)
	}
}

// TestCompactAbortedByTruncate: Compact decides what to drop from records
// a truncation may remove meanwhile; its swap must then give up.
func TestCompactAbortedByTruncate(t *testing.T) {
	cfg := testConfig()
	cfg.SegmentBytes = 400
	l := openLog(t, t.TempDir(), cfg)
	for i := range 12 {
		appendKV(t, l, 1, recordbatch.KV{Key: []byte("k"), Value: fmt.Appendf(nil, "v%d", i)})
	}
	segs := l.segments()
	if len(segs) < 3 {
		t.Fatalf("setup: %d segments", len(segs))
	}
	before := mustRead(t, segs[0].path)
	gen := l.truncations.Load()
	if err := l.Truncate(l.EndOffset() - 1); err != nil {
		t.Fatal(err)
	}
	cleaned := segmentPath(l.dir, segs[0].base, ".log"+cleanedExt)
	if err := os.WriteFile(cleaned, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := l.swapSegment(segs[0], cleaned, gen); !errors.Is(err, errCompactionAborted) {
		t.Fatalf("swap after a truncation: %v", err)
	}
	if _, err := os.Stat(cleaned); !os.IsNotExist(err) {
		t.Fatal("the cleaned file was left behind")
	}
	if !bytes.Equal(mustRead(t, segs[0].path), before) {
		t.Fatal("the segment was replaced")
	}
	// A pass that starts after the truncation runs.
	st, err := l.Compact(1, 1)
	if err != nil || st.RecordsPurged == 0 {
		t.Fatalf("Compact after the truncation: %+v, %v", st, err)
	}
}

func TestTruncateFailedLog(t *testing.T) {
	l := openLog(t, t.TempDir(), testConfig())
	appendAt(t, l, batchOpts{N: 3}, 0)
	l.mu.Lock()
	l.mu.failed = errors.New("disk gone")
	l.mu.Unlock()
	if err := l.Truncate(1); err == nil || l.EndOffset() != 3 {
		t.Fatalf("Truncate on a failed log: %v, end %d", err, l.EndOffset())
	}
	l.mu.Lock()
	l.mu.failed = nil
	l.mu.Unlock()
}
