package storage

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math"
	"math/rand"
	"reflect"
	"runtime"
	"testing"

	"github.com/fjordlog/fjord/storage/recordbatch"
)

// producerBatch builds an idempotent batch of n records.
func pbatch(t *testing.T, pid int64, epoch int16, seq int32, n int) []byte {
	t.Helper()
	return buildBatch(t, batchOpts{N: n, Idempotent: true, PID: pid, Epoch: epoch, Seq: seq, ValueSize: 20})
}

func mustAppend(t *testing.T, l *Log, b []byte) AppendResult {
	t.Helper()
	res, err := appendRaw(l, b, 1)
	if err != nil {
		t.Fatalf("append: %v", err)
	}
	return res
}

func TestProducerDuplicatesOfLastFive(t *testing.T) {
	for _, c := range allCodecs {
		t.Run(c.Name, func(t *testing.T) {
			l := openLog(t, t.TempDir(), testConfig())
			var orig [][]byte
			var res []AppendResult
			for i := range 8 {
				b := buildBatch(t, batchOpts{N: 1 + i%3, Idempotent: true, PID: 5, Epoch: 2, Seq: int32(seqAt(i)), Codec: c.Codec, Xerial: c.Xerial})
				orig = append(orig, bytes.Clone(b))
				res = append(res, mustAppend(t, l, b))
			}
			end, size := l.EndOffset(), l.Size()
			for i := 3; i < 8; i++ {
				r, err := appendRaw(l, bytes.Clone(orig[i]), 99)
				if err != nil {
					t.Fatalf("retry %d: %v", i, err)
				}
				if !r.Duplicate || r.BaseOffset != res[i].BaseOffset || r.LastOffset != res[i].LastOffset || r.LogAppendTime != -1 {
					t.Fatalf("retry %d: %+v, original %+v", i, r, res[i])
				}
			}
			if l.EndOffset() != end || l.Size() != size {
				t.Fatalf("duplicates were appended: end %d->%d size %d->%d", end, l.EndOffset(), size, l.Size())
			}
			// Older than the five remembered batches: no longer recognisable.
			for i := range 3 {
				_, err := appendRaw(l, bytes.Clone(orig[i]), 1)
				wantErrIs(t, err, ErrOutOfOrderSeq)
			}
			// The next sequence is still accepted.
			r := mustAppend(t, l, buildBatch(t, batchOpts{Idempotent: true, PID: 5, Epoch: 2, Seq: int32(seqAt(8))}))
			if r.Duplicate || r.BaseOffset != end {
				t.Fatalf("next batch: %+v", r)
			}
		})
	}
}

// seqAt is the base sequence of the i-th batch when batch j has 1+j%3
// records.
func seqAt(i int) int {
	s := 0
	for j := range i {
		s += 1 + j%3
	}
	return s
}

func TestProducerDuplicateWindowSlides(t *testing.T) {
	l := openLog(t, t.TempDir(), testConfig())
	var orig [][]byte
	for i := range 20 {
		b := pbatch(t, 1, 0, int32(i*2), 2)
		orig = append(orig, bytes.Clone(b))
		mustAppend(t, l, b)
		// After each append exactly the last min(i+1, 5) batches are
		// duplicates.
		for j := 0; j <= i; j++ {
			r, err := appendRaw(l, bytes.Clone(orig[j]), 1)
			if i-j < 5 {
				if err != nil || !r.Duplicate || r.BaseOffset != int64(j*2) {
					t.Fatalf("after %d appends, retry of %d: %+v, %v", i+1, j, r, err)
				}
			} else {
				wantErrIs(t, err, ErrOutOfOrderSeq)
			}
		}
	}
}

func TestProducerSequenceChecks(t *testing.T) {
	l := openLog(t, t.TempDir(), testConfig())
	mustAppend(t, l, pbatch(t, 1, 0, 0, 3)) // seq 0-2
	end := l.EndOffset()
	for _, c := range []struct {
		name string
		seq  int32
		n    int
		want error
	}{
		{"gap", 4, 1, ErrOutOfOrderSeq},
		{"far gap", 1000, 1, ErrOutOfOrderSeq},
		{"overlap", 2, 2, ErrOutOfOrderSeq},
		{"same first, different last", 0, 2, ErrOutOfOrderSeq},
		{"negative", -5, 1, ErrOutOfOrderSeq},
	} {
		_, err := appendRaw(l, pbatch(t, 1, 0, c.seq, c.n), 1)
		if err == nil {
			t.Fatalf("%s: accepted", c.name)
		}
		wantErrIs(t, err, c.want)
		if l.EndOffset() != end {
			t.Fatalf("%s: rejected batch was appended", c.name)
		}
	}
	r := mustAppend(t, l, pbatch(t, 1, 0, 3, 1))
	if r.Duplicate || r.BaseOffset != end {
		t.Fatalf("in-order batch: %+v", r)
	}
	// Other producers are independent.
	mustAppend(t, l, pbatch(t, 2, 0, 50, 1))
	mustAppend(t, l, pbatch(t, 2, 0, 51, 1))
	mustAppend(t, l, pbatch(t, 1, 0, 4, 1))
	_, err := appendRaw(l, pbatch(t, 2, 0, 53, 1), 1)
	wantErrIs(t, err, ErrOutOfOrderSeq)
	// Non-idempotent batches are never deduplicated.
	b := buildBatch(t, batchOpts{N: 2})
	r1 := mustAppend(t, l, bytes.Clone(b))
	r2 := mustAppend(t, l, bytes.Clone(b))
	if r1.Duplicate || r2.Duplicate || r2.BaseOffset != r1.LastOffset+1 {
		t.Fatalf("non-idempotent: %+v %+v", r1, r2)
	}
}

func TestProducerEpochs(t *testing.T) {
	l := openLog(t, t.TempDir(), testConfig())
	e0 := pbatch(t, 9, 0, 0, 2)
	mustAppend(t, l, bytes.Clone(e0))
	mustAppend(t, l, pbatch(t, 9, 0, 2, 2))

	// A newer epoch must start at sequence 0.
	_, err := appendRaw(l, pbatch(t, 9, 1, 4, 1), 1)
	wantErrIs(t, err, ErrOutOfOrderSeq)
	_, err = appendRaw(l, pbatch(t, 9, 1, 1, 1), 1)
	wantErrIs(t, err, ErrOutOfOrderSeq)
	r := mustAppend(t, l, pbatch(t, 9, 1, 0, 3))
	if r.Duplicate {
		t.Fatal("first batch of a new epoch taken for a duplicate")
	}
	// The old epoch is fenced, retries included.
	_, err = appendRaw(l, bytes.Clone(e0), 1)
	wantErrIs(t, err, ErrInvalidEpoch)
	_, err = appendRaw(l, pbatch(t, 9, 0, 4, 1), 1)
	wantErrIs(t, err, ErrInvalidEpoch)
	// The new epoch's sequence continues; its own retry is a duplicate.
	r2 := mustAppend(t, l, pbatch(t, 9, 1, 3, 1))
	if r2.Duplicate {
		t.Fatal("seq 3 in epoch 1")
	}
	d, err := appendRaw(l, pbatch(t, 9, 1, 0, 3), 1)
	if err != nil || !d.Duplicate || d.BaseOffset != r.BaseOffset {
		t.Fatalf("retry in epoch 1: %+v, %v", d, err)
	}
	// Epochs jump by more than one too.
	mustAppend(t, l, pbatch(t, 9, 7, 0, 1))
	_, err = appendRaw(l, pbatch(t, 9, 6, 0, 1), 1)
	wantErrIs(t, err, ErrInvalidEpoch)
	// Epoch max value.
	mustAppend(t, l, pbatch(t, 9, math.MaxInt16, 0, 1))
	mustAppend(t, l, pbatch(t, 9, math.MaxInt16, 1, 1))
}

// TestProducerEpochIsPerPartition: an epoch bump on one partition's log does
// not fence the producer's retries on another.
func TestProducerEpochIsPerPartition(t *testing.T) {
	a := openLog(t, t.TempDir(), testConfig())
	b := openLog(t, t.TempDir(), testConfig())
	a0 := pbatch(t, 3, 0, 0, 2)
	b0 := pbatch(t, 3, 0, 0, 2)
	mustAppend(t, a, bytes.Clone(a0))
	rb := mustAppend(t, b, bytes.Clone(b0))
	// The producer times out on partition a and bumps its epoch there.
	mustAppend(t, a, pbatch(t, 3, 1, 0, 1))
	_, err := appendRaw(a, bytes.Clone(a0), 1)
	wantErrIs(t, err, ErrInvalidEpoch)
	// On b, the epoch-0 retry is still a duplicate and epoch 0 continues.
	d, err := appendRaw(b, bytes.Clone(b0), 1)
	if err != nil || !d.Duplicate || d.BaseOffset != rb.BaseOffset {
		t.Fatalf("retry on the other partition: %+v, %v", d, err)
	}
	mustAppend(t, b, pbatch(t, 3, 0, 2, 1))
	// And the new epoch reaches b in its own time, starting at 0.
	_, err = appendRaw(b, pbatch(t, 3, 1, 1, 1), 1)
	wantErrIs(t, err, ErrOutOfOrderSeq)
	mustAppend(t, b, pbatch(t, 3, 1, 0, 1))
	_, err = appendRaw(b, pbatch(t, 3, 0, 3, 1), 1)
	wantErrIs(t, err, ErrInvalidEpoch)
}

func TestProducerSequenceWrap(t *testing.T) {
	l := openLog(t, t.TempDir(), testConfig())
	// A producer first seen here may start anywhere.
	first := pbatch(t, 4, 0, math.MaxInt32-2, 3) // MaxInt32-2 .. MaxInt32
	mustAppend(t, l, bytes.Clone(first))
	_, err := appendRaw(l, pbatch(t, 4, 0, math.MaxInt32, 1), 1)
	wantErrIs(t, err, ErrOutOfOrderSeq)
	_, err = appendRaw(l, pbatch(t, 4, 0, 1, 1), 1)
	wantErrIs(t, err, ErrOutOfOrderSeq)
	wrapped := pbatch(t, 4, 0, 0, 2) // 0 .. 1
	r := mustAppend(t, l, bytes.Clone(wrapped))
	if r.Duplicate {
		t.Fatal("sequence 0 after MaxInt32 taken for a duplicate")
	}
	for _, b := range [][]byte{first, wrapped} {
		d, err := appendRaw(l, bytes.Clone(b), 1)
		if err != nil || !d.Duplicate {
			t.Fatalf("retry around the wrap: %+v, %v", d, err)
		}
	}
	// A batch that itself wraps: MaxInt32-1, MaxInt32, 0 then 1.
	l2 := openLog(t, t.TempDir(), testConfig())
	mustAppend(t, l2, pbatch(t, 4, 0, math.MaxInt32-3, 2))
	straddle := pbatch(t, 4, 0, math.MaxInt32-1, 3)
	rs := mustAppend(t, l2, bytes.Clone(straddle))
	d, err := appendRaw(l2, bytes.Clone(straddle), 1)
	if err != nil || !d.Duplicate || d.BaseOffset != rs.BaseOffset {
		t.Fatalf("retry of the straddling batch: %+v, %v", d, err)
	}
	_, err = appendRaw(l2, pbatch(t, 4, 0, 0, 1), 1)
	wantErrIs(t, err, ErrOutOfOrderSeq)
	mustAppend(t, l2, pbatch(t, 4, 0, 1, 1))
	// The wrap survives a restart (snapshot) and a replay (no snapshot).
	if err := l2.Close(); err != nil {
		t.Fatal(err)
	}
	l3 := openLog(t, l2.dir, testConfig())
	d, err = appendRaw(l3, bytes.Clone(straddle), 1)
	if err != nil || !d.Duplicate {
		t.Fatalf("retry of the straddling batch after reopen: %+v, %v", d, err)
	}
	mustAppend(t, l3, pbatch(t, 4, 0, 2, 1))
}

// TestProducerSnapshotRoundTrip: encode/decode of the producer table, for
// random tables.
func TestProducerSnapshotRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewSource(5))
	for iter := range 200 {
		p := producers{}
		for range rng.Intn(6) {
			pid := rng.Int63()
			epoch := int16(rng.Intn(math.MaxInt16))
			for range rng.Intn(12) {
				n := int32(1 + rng.Intn(5))
				seq := rng.Int31()
				info := recordbatch.Info{ProducerID: pid, ProducerEpoch: epoch, BaseSequence: seq, LastDelta: n - 1}
				off := rng.Int63n(1 << 40)
				p.record(info, off, off+int64(n-1), 0)
			}
		}
		end := rng.Int63n(1 << 50)
		got, gotEnd, err := decodeSnapshot(p.encode(end))
		if err != nil {
			t.Fatalf("iteration %d: %v", iter, err)
		}
		if gotEnd != end || !reflect.DeepEqual(normalise(got), normalise(p)) {
			t.Fatalf("iteration %d: round trip changed the table", iter)
		}
		enc := p.encode(end)
		for cut := range len(enc) {
			if _, _, err := decodeSnapshot(enc[:cut]); err == nil {
				t.Fatalf("iteration %d: truncated snapshot (%d of %d bytes) decoded", iter, cut, len(enc))
			}
		}
	}
}

func normalise(p producers) map[int64]string {
	out := map[int64]string{}
	for id, e := range p {
		out[id] = fmt.Sprintf("%d %v", e.epoch, e.batches)
	}
	return out
}

// TestProducerStateIsAFunctionOfTheLog: after any sequence of appends, a
// replay of the log gives the same table as the live one.
func TestProducerStateIsAFunctionOfTheLog(t *testing.T) {
	cfg := testConfig()
	cfg.SegmentBytes = 700
	l := openLog(t, t.TempDir(), cfg)
	rng := rand.New(rand.NewSource(11))
	next := map[int64]int32{}
	epochs := map[int64]int16{}
	for range 150 {
		pid := int64(rng.Intn(4))
		if rng.Intn(15) == 0 {
			epochs[pid]++
			next[pid] = 0
		}
		n := 1 + rng.Intn(3)
		b := pbatch(t, pid, epochs[pid], next[pid], n)
		if _, err := appendRaw(l, b, 1); err != nil {
			t.Fatal(err)
		}
		next[pid] += int32(n)
	}
	l.mu.Lock()
	live := normalise(l.mu.producers)
	l.mu.Unlock()
	dir := crashCopy(t, l)
	for _, s := range filesWithExt(t, dir, ".snapshot") {
		removeFile(t, dir, s)
	}
	r := openLog(t, dir, cfg)
	r.mu.Lock()
	replayed := normalise(r.mu.producers)
	r.mu.Unlock()
	if !reflect.DeepEqual(live, replayed) {
		t.Fatalf("replayed producer table differs:\nlive     %v\nreplayed %v", live, replayed)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	c := openLog(t, l.dir, cfg)
	c.mu.Lock()
	fromSnap := normalise(c.mu.producers)
	c.mu.Unlock()
	if !reflect.DeepEqual(live, fromSnap) {
		t.Fatalf("snapshot producer table differs:\nlive %v\nsnap %v", live, fromSnap)
	}
}

// TestDecodeSnapshotBoundsAllocation: a snapshot's producer count comes from
// the file; a CRC-valid file (a writer bug, or a hand-edited file) claiming
// millions of producers with no bytes behind them must fail cheaply, not
// size a map for them first. (With the count at 2^32-1, make() asks for tens
// of GiB: Open would take the broker down.)
func TestDecodeSnapshotBoundsAllocation(t *testing.T) {
	b := append([]byte(snapshotMagic), snapshotVersion)
	b = binary.BigEndian.AppendUint64(b, 0)
	b = binary.BigEndian.AppendUint32(b, 1<<22)
	b = binary.BigEndian.AppendUint32(b, crc32.Checksum(b, crc32.MakeTable(crc32.Castagnoli)))
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, _, err := decodeSnapshot(b)
	runtime.ReadMemStats(&after)
	if err == nil {
		t.Fatal("decoded a snapshot whose producers are missing")
	}
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 16<<20 {
		t.Fatalf("regression: decodeSnapshot allocated %d MiB for a %d-byte snapshot claiming 2^22 producers: producers.go decodeSnapshot does make(producers, n) with n straight from the file before checking that n*11 bytes follow (2^32-1 would exhaust memory at Open)", alloc>>20, len(b))
	}
}

// Producers idle longer than the expiration are forgotten at the next
// retention check; active ones stay. Version-1 snapshots still load.
func TestProducerExpiry(t *testing.T) {
	cfg := testConfig()
	cfg.ProducerExpirationMs = 1000
	l := openLog(t, t.TempDir(), cfg)
	if _, err := appendRaw(l, pbatch(t, 7, 0, 0, 1), 10_000); err != nil {
		t.Fatal(err)
	}
	if _, err := appendRaw(l, pbatch(t, 8, 0, 0, 1), 10_900); err != nil {
		t.Fatal(err)
	}
	l.DeleteOldSegments(11_500)
	l.mu.Lock()
	_, has7 := l.mu.producers[7]
	_, has8 := l.mu.producers[8]
	l.mu.Unlock()
	if has7 || !has8 {
		t.Fatalf("after expiry: producer 7 kept=%v (want false), 8 kept=%v (want true)", has7, has8)
	}

	v1 := append([]byte(snapshotMagic), 1)
	v1 = binary.BigEndian.AppendUint64(v1, 42)
	v1 = binary.BigEndian.AppendUint32(v1, 1)
	v1 = binary.BigEndian.AppendUint64(v1, 5)  // producer id
	v1 = binary.BigEndian.AppendUint16(v1, 3)  // epoch
	v1 = append(v1, 1)                         // one batch
	v1 = binary.BigEndian.AppendUint32(v1, 0)  // first seq
	v1 = binary.BigEndian.AppendUint32(v1, 4)  // last seq
	v1 = binary.BigEndian.AppendUint64(v1, 10) // first offset
	v1 = binary.BigEndian.AppendUint64(v1, 14) // last offset
	v1 = binary.BigEndian.AppendUint32(v1, crc32.Checksum(v1, castagnoli))
	p, end, err := decodeSnapshotAt(v1, 777)
	if err != nil || end != 42 || p[5] == nil || p[5].epoch != 3 || p[5].lastTS != 777 || len(p[5].batches) != 1 {
		t.Fatalf("v1 snapshot: %v %d %+v", err, end, p[5])
	}
}
