package storage

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/fjordlog/fjord/storage/recordbatch"
)

// txnData builds a transactional batch of n records for producer pid.
func txnData(t testing.TB, pid int64, epoch int16, seq int32, n int) []byte {
	t.Helper()
	return buildBatch(t, batchOpts{N: n, ValueSize: 20, Idempotent: true, PID: pid, Epoch: epoch, Seq: seq, Attrs: attrTransactional})
}

func mustMarker(t testing.TB, l *Log, pid int64, epoch int16, commit bool) int64 {
	t.Helper()
	off, err := l.AppendMarker(TxnMarker{ProducerID: pid, ProducerEpoch: epoch, Commit: commit}, 7, 1)
	if err != nil {
		t.Fatalf("AppendMarker(pid %d epoch %d commit %v): %v", pid, epoch, commit, err)
	}
	return off
}

// probes is a handful of fetch offsets across the log.
func probes(l *Log) []int64 {
	start, end := l.StartOffset(), l.EndOffset()
	out := []int64{start, end}
	for i := int64(1); i < 8 && end > start; i++ {
		out = append(out, start+(end-start)*i/8)
	}
	return out
}

func checkAgainstReplay(t *testing.T, l *Log, what string) {
	t.Helper()
	bs := tbatchesOf(t, l)
	if d := diffTxnState(l, replayTxns(bs, seedsOf(l)), probes(l)); d != "" {
		t.Fatalf("%s: %s", what, d)
	}
	for _, f := range probes(l) {
		if d := consumerView(l, bs, f); d != "" {
			t.Fatalf("%s: %s", what, d)
		}
	}
}

// TestTransactionLifecycle walks Kafka's rules for transactional batches and
// markers on one partition.
func TestTransactionLifecycle(t *testing.T) {
	dir := t.TempDir()
	l := openLog(t, dir, testConfig())
	if _, ok := l.FirstUnstableOffset(); ok || l.txnPub.Load() != nil {
		t.Fatal("a new log has an unstable offset")
	}
	r1 := mustAppend(t, l, txnData(t, 1, 0, 0, 3)) // 0-2
	if f, ok := l.FirstUnstableOffset(); !ok || f != 0 {
		t.Fatalf("FirstUnstableOffset = %d, %v; want 0", f, ok)
	}
	r2 := mustAppend(t, l, txnData(t, 2, 0, 0, 2))   // 3-4
	mustAppend(t, l, buildBatch(t, batchOpts{N: 1})) // 5, not idempotent
	mustAppend(t, l, txnData(t, 1, 0, 3, 1))         // 6, same transaction
	// Kafka's INVALID_TXN_STATE: a non-transactional batch amid a transaction.
	_, err := appendRaw(l, pbatch(t, 1, 0, 4, 1), 1)
	wantErrIs(t, err, ErrInvalidTxnState)
	// Clients may not write control batches.
	_, err = appendRaw(l, buildMarkerBatch(TxnMarker{ProducerID: 1}, 1), 1)
	wantErrIs(t, err, ErrInvalidRecord)
	// A retry of a transactional batch is a duplicate, as any.
	if d, err := appendRaw(l, txnData(t, 1, 0, 0, 3), 1); err != nil || !d.Duplicate || d.BaseOffset != r1.BaseOffset {
		t.Fatalf("retry: %+v, %v", d, err)
	}

	c1 := mustMarker(t, l, 1, 0, true) // 7
	if c1 != 7 {
		t.Fatalf("commit marker at %d", c1)
	}
	// Decided but not known replicated: still unstable (Kafka).
	if f, ok := l.FirstUnstableOffset(); !ok || f != 0 {
		t.Fatalf("FirstUnstableOffset = %d, %v before the high watermark passes the commit; want 0", f, ok)
	}
	l.UpdateHighWatermark(c1)
	if f, _ := l.FirstUnstableOffset(); f != 0 {
		t.Fatalf("FirstUnstableOffset = %d with the high watermark at the marker; want 0", f)
	}
	l.UpdateHighWatermark(c1 + 1)
	if f, ok := l.FirstUnstableOffset(); !ok || f != r2.BaseOffset {
		t.Fatalf("FirstUnstableOffset = %d, %v; want producer 2's %d", f, ok, r2.BaseOffset)
	}
	l.UpdateHighWatermark(3) // going back is ignored
	if f, _ := l.FirstUnstableOffset(); f != r2.BaseOffset {
		t.Fatalf("a lower high watermark moved FirstUnstableOffset to %d", f)
	}
	if got := l.AbortedTransactions(0, l.EndOffset()); len(got) != 0 {
		t.Fatalf("aborted transactions after a commit: %+v", got)
	}
	if _, err := os.Stat(filepath.Join(dir, "00000000000000000000.txnindex")); !os.IsNotExist(err) {
		t.Fatalf("a .txnindex before any abort: %v", err)
	}

	a2 := mustMarker(t, l, 2, 0, false) // 8
	want := AbortedTxn{ProducerID: 2, FirstOffset: 3, LastOffset: a2, LastStableOffset: a2 + 1}
	if got := l.AbortedTransactions(0, l.EndOffset()); !slices.Equal(got, []AbortedTxn{want}) {
		t.Fatalf("AbortedTransactions = %+v, want %+v", got, want)
	}
	l.UpdateHighWatermark(l.EndOffset())
	if f, ok := l.FirstUnstableOffset(); ok {
		t.Fatalf("FirstUnstableOffset = %d with every transaction ended and replicated", f)
	}
	// Kafka's format on disk: 34 bytes, big-endian.
	raw, err := os.ReadFile(filepath.Join(dir, "00000000000000000000.txnindex"))
	if err != nil {
		t.Fatal(err)
	}
	wantRaw := []byte{0, 0}
	for _, v := range []int64{2, 3, a2, a2 + 1} {
		wantRaw = binary.BigEndian.AppendUint64(wantRaw, uint64(v))
	}
	if !bytes.Equal(raw, wantRaw) {
		t.Fatalf(".txnindex holds %x, want %x", raw, wantRaw)
	}

	// Fencing: an older producer epoch, an older coordinator.
	_, err = l.AppendMarker(TxnMarker{ProducerID: 1, ProducerEpoch: -1}, 7, 1)
	wantErrIs(t, err, ErrInvalidRecord)
	mustAppend(t, l, txnData(t, 1, 3, 0, 1)) // epoch 3 opens a transaction
	_, err = l.AppendMarker(TxnMarker{ProducerID: 1, ProducerEpoch: 2, Commit: true}, 7, 1)
	wantErrIs(t, err, ErrInvalidEpoch)
	if _, err := l.AppendMarker(TxnMarker{ProducerID: 1, ProducerEpoch: 3, Commit: true, CoordinatorEpoch: 5}, 7, 1); err != nil {
		t.Fatal(err)
	}
	_, err = l.AppendMarker(TxnMarker{ProducerID: 1, ProducerEpoch: 3, Commit: true, CoordinatorEpoch: 4}, 7, 1)
	wantErrIs(t, err, ErrCoordinatorFenced)
	// A repeated marker (no transaction open) is written and ends nothing.
	end := l.EndOffset()
	if off, err := l.AppendMarker(TxnMarker{ProducerID: 1, ProducerEpoch: 3, CoordinatorEpoch: 5}, 7, 1); err != nil || off != end {
		t.Fatalf("repeated marker: %d, %v", off, err)
	}
	// A marker for a producer never seen here: written, harmless.
	mustMarker(t, l, 99, 0, false)
	if got := l.AbortedTransactions(0, l.EndOffset()); len(got) != 1 {
		t.Fatalf("markers that ended nothing added aborted transactions: %+v", got)
	}
	// Its epoch is now known: an older one is fenced, and its first batch
	// of that epoch must be sequence 0 (Kafka's rule for an entry without
	// a last sequence).
	_, err = appendRaw(l, txnData(t, 99, 0, 4, 1), 1)
	wantErrIs(t, err, ErrOutOfOrderSeq)
	mustAppend(t, l, txnData(t, 99, 0, 0, 1))

	// Transaction version 2: the coordinator bumps the epoch for every
	// marker; the same epoch with a transaction open is a late marker.
	mustAppend(t, l, txnData(t, 1, 3, 1, 2))
	_, err = l.AppendMarker(TxnMarker{ProducerID: 1, ProducerEpoch: 3, Commit: true, CoordinatorEpoch: 5, TransactionVersion: 2}, 7, 1)
	wantErrIs(t, err, ErrInvalidEpoch)
	if _, err := l.AppendMarker(TxnMarker{ProducerID: 1, ProducerEpoch: 4, Commit: true, CoordinatorEpoch: 5, TransactionVersion: 2}, 7, 1); err != nil {
		t.Fatal(err)
	}
	// ... and its retry (same epoch, none open) is written again.
	if _, err := l.AppendMarker(TxnMarker{ProducerID: 1, ProducerEpoch: 4, Commit: true, CoordinatorEpoch: 5, TransactionVersion: 2}, 7, 1); err != nil {
		t.Fatalf("retry of a transaction version 2 marker: %v", err)
	}
	// The bumped epoch fences the old one, and starts at sequence 0.
	_, err = appendRaw(l, txnData(t, 1, 3, 3, 1), 1)
	wantErrIs(t, err, ErrInvalidEpoch)
	_, err = appendRaw(l, txnData(t, 1, 4, 3, 1), 1)
	wantErrIs(t, err, ErrOutOfOrderSeq)
	mustAppend(t, l, txnData(t, 1, 4, 0, 1))
	// A stale leader epoch is refused for markers as for data.
	_, err = l.AppendMarker(TxnMarker{ProducerID: 1, ProducerEpoch: 4, Commit: true, CoordinatorEpoch: 5}, 3, 1)
	wantErrIs(t, err, ErrStaleLeaderEpoch)
	checkAgainstReplay(t, l, "after the walk")
}

// txnWorkload appends random transactional traffic: producers 1-5 run
// transactions (one batch or several, then a commit or an abort, sometimes
// a repeated marker), producer 50 is idempotent, and plain batches come
// between. Transactions stay open across many appends and segment rolls.
type txnWorkload struct {
	rng   *rand.Rand
	seq   map[int64]int32
	epoch map[int64]int16
	open  map[int64]bool
}

func newTxnWorkload(seed uint64) *txnWorkload {
	return &txnWorkload{rng: rand.New(rand.NewPCG(seed, 7)), seq: map[int64]int32{}, epoch: map[int64]int16{}, open: map[int64]bool{}}
}

func (w *txnWorkload) step(t testing.TB, l *Log) {
	t.Helper()
	pid := int64(1 + w.rng.IntN(5))
	switch p := w.rng.IntN(100); {
	case p < 45:
		n := 1 + w.rng.IntN(3)
		mustAppendTB(t, l, txnData(t, pid, w.epoch[pid], w.seq[pid], n))
		w.seq[pid] += int32(n)
		w.open[pid] = true
	case p < 60 && w.open[pid], p < 62:
		commit := w.rng.IntN(2) == 0
		epoch := w.epoch[pid]
		if w.rng.IntN(6) == 0 {
			epoch++ // a bumped epoch (fencing, or transaction version 2)
			w.epoch[pid], w.seq[pid] = epoch, 0
		}
		if _, err := l.AppendMarker(TxnMarker{ProducerID: pid, ProducerEpoch: epoch, Commit: commit}, 7, 1); err != nil {
			t.Fatalf("AppendMarker: %v", err)
		}
		w.open[pid] = false
	case p < 80:
		mustAppendTB(t, l, buildBatch(t, batchOpts{N: 1 + w.rng.IntN(3), ValueSize: 30}))
	default:
		n := 1 + w.rng.IntN(2)
		mustAppendTB(t, l, pbatch2(t, 50, w.epoch[50], w.seq[50], n))
		w.seq[50] += int32(n)
	}
}

func pbatch2(t testing.TB, pid int64, epoch int16, seq int32, n int) []byte {
	return buildBatch(t, batchOpts{N: n, ValueSize: 20, Idempotent: true, PID: pid, Epoch: epoch, Seq: seq})
}

func mustAppendTB(t testing.TB, l *Log, b []byte) AppendResult {
	t.Helper()
	res, err := appendRaw(l, b, 1)
	if err != nil {
		t.Fatalf("append: %v", err)
	}
	return res
}

func txnConfig() Config {
	cfg := testConfig()
	cfg.SegmentBytes = 900
	cfg.IndexIntervalBytes = 200
	return cfg
}

// TestTransactionsMatchReplay: after random transactional traffic over many
// segments, the live state equals a replay of the log; and so does the
// state after a crash (random crash images: replay from the last roll's
// snapshot, through transactions that began before it), after a clean
// restart (the snapshot at the end), and after a replay of the whole log
// (no snapshots), which rebuilds every index byte for byte.
func TestTransactionsMatchReplay(t *testing.T) {
	const dir = "/logs/t-0"
	for seed := range uint64(6) {
		cfg := txnConfig()
		fs := NewMemFS()
		cfg.FS = fs
		l := openLog(t, dir, cfg)
		w := newTxnWorkload(seed)
		rng := rand.New(rand.NewPCG(seed, 99))
		for i := range 400 {
			w.step(t, l)
			if i%50 == 49 {
				checkAgainstReplay(t, l, fmt.Sprintf("seed %d live after %d steps", seed, i+1))
				ccfg := cfg
				ccfg.FS = fs.CrashClone(rng)
				checkAgainstReplay(t, openLog(t, dir, ccfg), fmt.Sprintf("seed %d after a crash at step %d", seed, i+1))
			}
		}
		if l.SegmentCount() < 10 || len(l.AbortedTransactions(0, l.EndOffset())) < 5 {
			t.Fatalf("seed %d: %d segments, %d aborted transactions: the workload is too small", seed, l.SegmentCount(), len(l.AbortedTransactions(0, l.EndOffset())))
		}
		live := openTxnsOf(l)
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		clean := openLog(t, dir, cfg)
		checkAgainstReplay(t, clean, fmt.Sprintf("seed %d after a clean restart", seed))
		if got := openTxnsOf(clean); !gomapsEqual(got, live) {
			t.Fatalf("seed %d: open transactions %v after a clean restart, %v before", seed, got, live)
		}
		img := fs.CrashClone(nil)
		snaps, _ := listSnapshots(img, dir)
		for _, off := range snaps {
			if err := img.Remove(segmentPath(dir, off, snapshotExt)); err != nil {
				t.Fatal(err)
			}
		}
		rcfg := cfg
		rcfg.FS = img
		checkAgainstReplay(t, openLog(t, dir, rcfg), fmt.Sprintf("seed %d after a replay of the whole log", seed))
		ents, _ := fs.ReadDir(dir)
		n := 0
		for _, e := range ents {
			if filepath.Ext(e.Name()) != txnIndexExt {
				continue
			}
			n++
			a, _ := readFile(fs, filepath.Join(dir, e.Name()))
			b, _ := readFile(img, filepath.Join(dir, e.Name()))
			if !bytes.Equal(a, b) || len(a) == 0 {
				t.Fatalf("seed %d: %s differs after a replay of the whole log (%d and %d bytes)", seed, e.Name(), len(a), len(b))
			}
		}
		if n < 3 {
			t.Fatalf("seed %d: %d .txnindex files", seed, n)
		}
	}
}

func gomapsEqual(a, b map[int64]int64) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// TestNoTransactionCostsWithoutTransactions: a log that never sees a
// transaction (idempotent producers included) has no .txnindex file, no
// transaction state published, and answers the queries without any.
func TestNoTransactionCostsWithoutTransactions(t *testing.T) {
	cfg := txnConfig()
	dir := t.TempDir()
	l := openLog(t, dir, cfg)
	for i := range 200 {
		if i%2 == 0 {
			mustAppend(t, l, pbatch(t, 5, 0, int32(i/2), 1))
		} else {
			mustAppend(t, l, buildBatch(t, batchOpts{N: 2, ValueSize: 40}))
		}
	}
	// A committed transaction adds no index either.
	mustAppend(t, l, txnData(t, 8, 0, 0, 1))
	mustMarker(t, l, 8, 0, true)
	l.UpdateHighWatermark(l.EndOffset())
	if l.SegmentCount() < 5 {
		t.Fatalf("%d segments", l.SegmentCount())
	}
	if got := filesWithExt(t, dir, ".txnindex"); len(got) != 0 {
		t.Fatalf(".txnindex files without an abort: %v", got)
	}
	if _, ok := l.FirstUnstableOffset(); ok {
		t.Fatal("an unstable offset")
	}
	if got := l.AbortedTransactions(0, l.EndOffset()); got != nil {
		t.Fatalf("AbortedTransactions = %+v", got)
	}
	if got := filesWithExt(t, crashCopy(t, l), ".txnindex"); len(got) != 0 {
		t.Fatalf(".txnindex files after recovery without an abort: %v", got)
	}
	l3 := openLog(t, t.TempDir(), cfg)
	for range 50 {
		mustAppend(t, l3, buildBatch(t, batchOpts{N: 2, ValueSize: 40}))
	}
	if l3.txnPub.Load() != nil {
		t.Fatal("transaction state published for a log without transactions")
	}
}

// TestAbortedTransactionsAcrossSegments: an aborted transaction's entry is
// in the segment of its marker, found from a fetch in any earlier segment it
// spans; the search stops where an entry's last stable offset reaches the
// upper bound, as Kafka's does.
func TestAbortedTransactionsAcrossSegments(t *testing.T) {
	l := openLog(t, t.TempDir(), txnConfig())
	first := mustAppend(t, l, txnData(t, 1, 0, 0, 2)).BaseOffset
	for range 30 {
		mustAppend(t, l, buildBatch(t, batchOpts{N: 2, ValueSize: 60}))
	}
	a1 := mustMarker(t, l, 1, 0, false)
	segs := l.segments()
	if len(segs) < 3 || segs[0].base > first || segs[len(segs)-1].base > a1 || segs[1].base > a1 {
		t.Fatalf("want the transaction to span segments: %d segments", len(segs))
	}
	e1 := AbortedTxn{ProducerID: 1, FirstOffset: first, LastOffset: a1, LastStableOffset: a1 + 1}
	for _, f := range []int64{0, segs[1].base, segs[1].base + 3, a1} {
		if got := l.AbortedTransactions(f, l.EndOffset()); !slices.Equal(got, []AbortedTxn{e1}) {
			t.Fatalf("AbortedTransactions(%d, end) = %+v, want %+v", f, got, e1)
		}
	}
	if got := l.AbortedTransactions(a1+1, l.EndOffset()+5); len(got) != 0 {
		t.Fatalf("from after the marker: %+v", got)
	}
	// Two more: producer 2's, aborted while producer 3's was open (its last
	// stable offset is producer 3's first offset), then producer 3's.
	b2 := mustAppend(t, l, txnData(t, 2, 0, 0, 1)).BaseOffset
	b3 := mustAppend(t, l, txnData(t, 3, 0, 0, 1)).BaseOffset
	a2 := mustMarker(t, l, 2, 0, false)
	mustAppend(t, l, buildBatch(t, batchOpts{N: 1}))
	a3 := mustMarker(t, l, 3, 0, false)
	e2 := AbortedTxn{ProducerID: 2, FirstOffset: b2, LastOffset: a2, LastStableOffset: b3}
	e3 := AbortedTxn{ProducerID: 3, FirstOffset: b3, LastOffset: a3, LastStableOffset: a3 + 1}
	if got := l.AbortedTransactions(0, l.EndOffset()); !slices.Equal(got, []AbortedTxn{e1, e2, e3}) {
		t.Fatalf("all: %+v", got)
	}
	// Upper bound b2+1: e1 (LSO a1+1 <= b2) does not stop the search, e2
	// is reported and its LSO b3 >= b2+1 stops it before e3.
	if got := l.AbortedTransactions(0, b2+1); !slices.Equal(got, []AbortedTxn{e1, e2}) {
		t.Fatalf("AbortedTransactions(0, %d) = %+v, want e1, e2", b2+1, got)
	}
	// Upper bound at e1's LSO: e1 is reported and ends the search.
	if got := l.AbortedTransactions(0, a1+1); !slices.Equal(got, []AbortedTxn{e1}) {
		t.Fatalf("AbortedTransactions(0, %d) = %+v, want e1", a1+1, got)
	}
	checkAgainstReplay(t, l, "three aborts")
}

// TestTxnSnapshotRoundTrip: version 3 keeps the coordinator epoch and the
// open transaction; versions 1 and 2 still load, with none open.
func TestTxnSnapshotRoundTrip(t *testing.T) {
	p := producers{}
	p.record(recordbatch.Info{ProducerID: 1, ProducerEpoch: 2, BaseSequence: 0, LastDelta: 1, Transactional: true}, 10, 11, 5)
	p.recordMarker(2, 4, 17, 6)
	p.record(recordbatch.Info{ProducerID: 3, ProducerEpoch: 0, BaseSequence: 0, LastDelta: 0}, 20, 20, 7)
	got, end, err := decodeSnapshot(p.encode(30))
	if err != nil || end != 30 {
		t.Fatal(err)
	}
	for pid, e := range p {
		g := got[pid]
		if g == nil || g.epoch != e.epoch || g.txnFirst != e.txnFirst || g.coordEpoch != e.coordEpoch || g.lastTS != e.lastTS || !slices.Equal(g.batches, e.batches) {
			t.Fatalf("producer %d: %+v, want %+v", pid, g, e)
		}
	}
	if got[1].txnFirst != 10 || got[2].coordEpoch != 17 || len(got[2].batches) != 0 || got[3].txnFirst != -1 {
		t.Fatalf("decoded %+v %+v %+v", got[1], got[2], got[3])
	}
	// A version 2 snapshot: no transaction fields.
	v2 := append([]byte(snapshotMagic), 2)
	v2 = binary.BigEndian.AppendUint64(v2, 42)
	v2 = binary.BigEndian.AppendUint32(v2, 1)
	v2 = binary.BigEndian.AppendUint64(v2, 5) // producer id
	v2 = binary.BigEndian.AppendUint16(v2, 3) // epoch
	v2 = binary.BigEndian.AppendUint64(v2, 9) // last append
	v2 = append(v2, 0)
	v2 = binary.BigEndian.AppendUint32(v2, crc32c(v2))
	q, end, err := decodeSnapshot(v2)
	if err != nil || end != 42 || q[5] == nil || q[5].txnFirst != -1 || q[5].coordEpoch != -1 || q[5].lastTS != 9 {
		t.Fatalf("v2: %v %d %+v", err, end, q[5])
	}
	// An open transaction below -1 is damage.
	bad := producers{1: {epoch: 0, txnFirst: -5, coordEpoch: -1}}
	if _, _, err := decodeSnapshot(bad.encode(1)); err == nil {
		t.Fatal("decoded a snapshot with an open transaction at -5")
	}
}

// TestProducerExpiryKeepsOpenTransactions: expiry never drops a producer
// whose transaction is open (it would lose the first unstable offset).
func TestProducerExpiryKeepsOpenTransactions(t *testing.T) {
	cfg := testConfig()
	cfg.ProducerExpirationMs = 1000
	l := openLog(t, t.TempDir(), cfg)
	if _, err := appendRaw(l, txnData(t, 7, 0, 0, 1), 10_000); err != nil {
		t.Fatal(err)
	}
	if _, err := appendRaw(l, txnData(t, 8, 0, 0, 1), 10_000); err != nil {
		t.Fatal(err)
	}
	if _, err := l.AppendMarker(TxnMarker{ProducerID: 8, Commit: true}, 7, 10_000); err != nil {
		t.Fatal(err)
	}
	l.DeleteOldSegments(20_000)
	l.mu.Lock()
	_, has7 := l.mu.producers[7]
	_, has8 := l.mu.producers[8]
	l.mu.Unlock()
	if !has7 || has8 {
		t.Fatalf("after expiry: producer 7 (open) kept=%v, want true; 8 (ended) kept=%v, want false", has7, has8)
	}
	if f, ok := l.FirstUnstableOffset(); !ok || f != 0 {
		t.Fatalf("FirstUnstableOffset = %d, %v", f, ok)
	}
}

// TestFirstUnstableOffsetAfterRetention: retention may remove an open
// transaction's first batches (Kafka's does too); the first unstable offset
// is then the log start, and stays so across a restart.
func TestFirstUnstableOffsetAfterRetention(t *testing.T) {
	cfg := txnConfig()
	l := openLog(t, t.TempDir(), cfg)
	mustAppend(t, l, txnData(t, 1, 0, 0, 1))
	for range 40 {
		mustAppend(t, l, buildBatch(t, batchOpts{N: 2, ValueSize: 60}))
	}
	cfg.RetentionBytes = 1500
	l.SetConfig(cfg)
	if n, err := l.DeleteOldSegments(1); err != nil || n == 0 {
		t.Fatalf("retention: %d, %v", n, err)
	}
	start := l.StartOffset()
	if f, ok := l.FirstUnstableOffset(); !ok || f != start {
		t.Fatalf("FirstUnstableOffset = %d, %v; want the log start %d", f, ok, start)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l2 := openLog(t, l.dir, cfg)
	if f, ok := l2.FirstUnstableOffset(); !ok || f != start {
		t.Fatalf("after a restart FirstUnstableOffset = %d, %v; want %d", f, ok, start)
	}
	a := mustMarker(t, l2, 1, 0, false)
	if got := l2.AbortedTransactions(start, l2.EndOffset()); len(got) != 1 || got[0].FirstOffset != 0 || got[0].LastOffset != a {
		t.Fatalf("abort of a transaction begun below the log start: %+v", got)
	}
}

// TestTxnIndexRecovery: the active segment's index is rebuilt from the log
// after a crash, whatever its file holds past the snapshot; a damaged index
// of a sealed segment makes Open replay the whole log; an index without its
// segment is removed.
func TestTxnIndexRecovery(t *testing.T) {
	cfg := txnConfig()
	l := openLog(t, t.TempDir(), cfg)
	w := newTxnWorkload(3)
	for range 300 {
		w.step(t, l)
	}
	// Aborts in the active segment too.
	for pid := int64(1); pid <= 5; pid++ {
		if w.open[pid] {
			mustMarker(t, l, pid, w.epoch[pid], false)
			w.open[pid] = false
		}
	}
	mustAppend(t, l, txnData(t, 9, 0, 0, 1))
	mustMarker(t, l, 9, 0, false)
	segs := l.segments()
	active := filepath.Base(segmentPath("/", segs[len(segs)-1].base, txnIndexExt))
	want := func(t *testing.T, l2 *Log, what string) {
		t.Helper()
		if got, w := l2.AbortedTransactions(0, l2.EndOffset()), l.AbortedTransactions(0, l.EndOffset()); !slices.Equal(got, w) {
			t.Fatalf("%s: %d aborted transactions, want %d", what, len(got), len(w))
		}
		checkAgainstReplay(t, l2, what)
	}
	for _, c := range []struct {
		name string
		edit func(b []byte) []byte
	}{
		{"torn", func(b []byte) []byte { return b[:len(b)-5] }},
		{"missing", func([]byte) []byte { return nil }},
		{"garbage after", func(b []byte) []byte { return append(b, bytes.Repeat([]byte{0xab}, 40)...) }},
		{"stale entry", func(b []byte) []byte {
			return appendTxnEntry(b, AbortedTxn{ProducerID: 4, FirstOffset: 1, LastOffset: l.EndOffset() - 1})
		}},
	} {
		dir := crashCopy(t, l)
		p := filepath.Join(dir, active)
		if b := c.edit(mustRead(t, p)); b == nil {
			removeFile(t, dir, active)
		} else if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		want(t, openLog(t, dir, cfg), "active index "+c.name)
	}

	// A sealed segment's index, damaged: the whole log is replayed.
	var sealed string
	for _, name := range filesWithExt(t, l.dir, ".txnindex") {
		if name != active {
			sealed = name
			break
		}
	}
	if sealed == "" {
		t.Fatal("no sealed segment has aborts")
	}
	for _, c := range []struct {
		name string
		edit func(b []byte) []byte
	}{
		{"torn", func(b []byte) []byte { return b[:len(b)-1] }},
		{"bad version", func(b []byte) []byte { b[0] = 1; return b }},
		{"out of range", func(b []byte) []byte { binary.BigEndian.PutUint64(b[18:], 1<<40); return b }},
	} {
		dir := crashCopy(t, l)
		p := filepath.Join(dir, sealed)
		if err := os.WriteFile(p, c.edit(mustRead(t, p)), 0o644); err != nil {
			t.Fatal(err)
		}
		l2 := openLog(t, dir, cfg)
		want(t, l2, "sealed index "+c.name)
		if !bytes.Equal(mustRead(t, p), mustRead(t, filepath.Join(l.dir, sealed))) {
			t.Fatalf("sealed index %s: not rebuilt as it was", c.name)
		}
	}

	// An index left at the base of the next segment (a removal that
	// failed) is removed when the log rolls there, not taken up.
	stale := openLog(t, crashCopy(t, l), cfg)
	at := stale.EndOffset()
	if err := os.WriteFile(filepath.Join(stale.dir, filepath.Base(segmentPath("/", at, txnIndexExt))),
		appendTxnEntry(nil, AbortedTxn{ProducerID: 1, FirstOffset: at, LastOffset: at, LastStableOffset: at + 1}), 0o644); err != nil {
		t.Fatal(err)
	}
	mustAppend(t, stale, buildBatch(t, batchOpts{N: 1, ValueSize: int(cfg.SegmentBytes)}))
	if segs := stale.segments(); segs[len(segs)-1].base != at {
		t.Fatalf("no roll at %d", at)
	}
	if err := stale.Close(); err != nil {
		t.Fatal(err)
	}
	if got := openLog(t, stale.dir, cfg).AbortedTransactions(at, 1<<62); len(got) != 0 {
		t.Fatalf("a stale index was taken up by the segment rolled at %d: %+v", at, got)
	}

	// An orphan index (its segment's removal cut short) goes at Open.
	dir := crashCopy(t, l)
	orphan := filepath.Join(dir, "00000000000000999999.txnindex")
	if err := os.WriteFile(orphan, appendTxnEntry(nil, AbortedTxn{ProducerID: 1, LastOffset: 999999}), 0o644); err != nil {
		t.Fatal(err)
	}
	openLog(t, dir, cfg)
	if _, err := os.Stat(orphan); !os.IsNotExist(err) {
		t.Fatalf("orphan index kept: %v", err)
	}
}

// TestAppendReplicaTransactions: a follower that copies the leader's log
// holds the same transaction state and the same index files; a malformed
// marker from the leader is refused.
func TestAppendReplicaTransactions(t *testing.T) {
	cfg := txnConfig()
	leader := openLog(t, t.TempDir(), cfg)
	follower := openLog(t, t.TempDir(), cfg)
	w := newTxnWorkload(11)
	rng := rand.New(rand.NewPCG(1, 2))
	for range 30 {
		for range 10 {
			w.step(t, leader)
		}
		for follower.EndOffset() < leader.EndOffset() {
			data, err := leader.Read(follower.EndOffset(), 200+rng.IntN(3000), leader.EndOffset(), nil)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := follower.AppendReplica(data); err != nil {
				t.Fatal(err)
			}
		}
		checkAgainstReplay(t, follower, "follower")
		if a, b := leader.AbortedTransactions(0, leader.EndOffset()), follower.AbortedTransactions(0, follower.EndOffset()); !slices.Equal(a, b) {
			t.Fatalf("follower's aborted transactions differ")
		}
	}
	for _, name := range filesWithExt(t, leader.dir, ".txnindex") {
		if !bytes.Equal(mustRead(t, filepath.Join(leader.dir, name)), mustRead(t, filepath.Join(follower.dir, name))) {
			t.Fatalf("%s differs between leader and follower", name)
		}
	}

	// A control batch that is no marker, CRC intact.
	bad := buildBatch(t, batchOpts{Attrs: attrControl | attrTransactional, Idempotent: true, PID: 1, Seq: -1,
		Records: []testRecord{{Key: []byte{0, 0, 0, 7}, Value: []byte{0, 0, 0, 0, 0, 0}}}})
	recordbatch.Stamp(bad, follower.EndOffset(), 7, -1)
	_, err := follower.AppendReplica(bad)
	wantErrIs(t, err, recordbatch.ErrCorrupt)
}

// TestTruncateTransactions: truncation to any offset leaves the transaction
// state and the aborted transaction indexes exactly as a replay of what
// remains gives, live and after a crash (a random image); then the log
// goes on, markers ending transactions the truncation reopened included.
func TestTruncateTransactions(t *testing.T) {
	const dir = "/logs/t-0"
	cfg := txnConfig()
	fs := NewMemFS()
	cfg.FS = fs
	src := openLog(t, dir, cfg)
	w := newTxnWorkload(5)
	for range 250 {
		w.step(t, src)
	}
	if err := src.Flush(); err != nil {
		t.Fatal(err)
	}
	end := src.EndOffset()
	rng := rand.New(rand.NewPCG(5, 5))
	for k := 0; k < 60; k++ {
		to := rng.Int64N(end + 1)
		lcfg := cfg
		lcfg.FS = fs.CrashClone(nil)
		l := openLog(t, dir, lcfg)
		if err := l.Truncate(to); err != nil {
			t.Fatal(err)
		}
		checkAgainstReplay(t, l, fmt.Sprintf("truncated to %d", to))
		for _, a := range l.AbortedTransactions(0, 1<<62) {
			if a.LastOffset >= l.EndOffset() {
				t.Fatalf("truncated to %d: entry %+v past the end", to, a)
			}
		}
		ccfg := cfg
		ccfg.FS = lcfg.FS.(*MemFS).CrashClone(rng)
		checkAgainstReplay(t, openLog(t, dir, ccfg), fmt.Sprintf("truncated to %d, then a crash", to))
		// The log goes on, with new epochs (sequences from 0).
		w2 := newTxnWorkload(uint64(k))
		for pid := range 51 {
			w2.epoch[int64(pid)] = 100
			w2.open[int64(pid)] = true // markers for whatever the cut reopened
		}
		for range 30 {
			w2.step(t, l)
		}
		checkAgainstReplay(t, l, fmt.Sprintf("truncated to %d, then appends", to))
	}
	// A restart at an offset forgets everything.
	if err := src.TruncateFullyAndStartAt(end + 10); err != nil {
		t.Fatal(err)
	}
	ents, _ := fs.ReadDir(dir)
	for _, e := range ents {
		if filepath.Ext(e.Name()) == txnIndexExt {
			t.Fatalf("%s left after TruncateFullyAndStartAt", e.Name())
		}
	}
	if _, ok := src.FirstUnstableOffset(); ok || len(src.AbortedTransactions(0, 1<<62)) != 0 {
		t.Fatal("transaction state left after TruncateFullyAndStartAt")
	}
}

// TestCompactTransactions: compaction removes aborted transactions' records
// (an aborted value never shadows a committed one), keeps every marker,
// compacts committed transactions like any records, and cleans nothing at
// or above the first unstable offset.
func TestCompactTransactions(t *testing.T) {
	cfg := testConfig()
	cfg.SegmentBytes = 400
	cfg.Compacted = true
	l := openLog(t, t.TempDir(), cfg)
	kv := func(k, v string) []testRecord { return []testRecord{{Key: []byte(k), Value: []byte(v)}} }
	app := func(o batchOpts) int64 {
		t.Helper()
		return mustAppend(t, l, buildBatch(t, o)).BaseOffset
	}
	// k: committed "good", then an aborted "bad" that must not win.
	app(batchOpts{Records: kv("k", "good")})
	app(batchOpts{Records: kv("k", "bad"), Idempotent: true, PID: 1, Attrs: attrTransactional})
	mustMarker(t, l, 1, 0, false)
	// j: a committed transaction's value supersedes a plain one.
	app(batchOpts{Records: kv("j", "old")})
	app(batchOpts{Records: kv("j", "new"), Idempotent: true, PID: 2, Attrs: attrTransactional})
	mustMarker(t, l, 2, 0, true)
	// m: an aborted tombstone must not delete the committed value.
	app(batchOpts{Records: kv("m", "keep")})
	app(batchOpts{Records: []testRecord{{Key: []byte("m")}}, Idempotent: true, PID: 3, Attrs: attrTransactional})
	mustMarker(t, l, 3, 0, false)
	// Keys equal to a marker's own key bytes are user keys like any.
	app(batchOpts{Records: kv("\x00\x00\x00\x01", "user")})
	mustAppend(t, l, txnData(t, 4, 0, 0, 1))
	mustMarker(t, l, 4, 0, true)
	for i := range 12 {
		app(batchOpts{Records: kv(fmt.Sprintf("f%d", i), "filler-filler-filler-filler")})
	}
	l.UpdateHighWatermark(l.EndOffset())
	// An open transaction: nothing from its first batch on is cleaned.
	openAt := app(batchOpts{Records: kv("z", "open"), Idempotent: true, PID: 5, Attrs: attrTransactional})
	for i := range 12 {
		app(batchOpts{Records: kv(fmt.Sprintf("f%d", i), "filler2-filler2-filler2")})
	}
	if l.SegmentCount() < 4 {
		t.Fatalf("%d segments", l.SegmentCount())
	}
	markers := func() []int64 {
		var out []int64
		for _, b := range tbatchesOf(t, l) {
			if b.control {
				out = append(out, b.base)
			}
		}
		return out
	}
	before := markers()
	var untouched []string
	for _, s := range l.segments() {
		if s.next > openAt {
			untouched = append(untouched, fmt.Sprintf("%d:%d", s.base, s.pub.Load().size))
		}
	}
	if _, err := l.Compact(1, 1<<40); err != nil {
		t.Fatal(err)
	}
	if got := markers(); !slices.Equal(got, before) {
		t.Fatalf("markers %v after compaction, %v before", got, before)
	}
	var after []string
	for _, s := range l.segments() {
		if s.next > openAt {
			after = append(after, fmt.Sprintf("%d:%d", s.base, s.pub.Load().size))
		}
	}
	if !slices.Equal(after, untouched) {
		t.Fatalf("segments at or above the first unstable offset %d changed: %v -> %v", openAt, untouched, after)
	}
	vals := map[string][]string{}
	for off, r := range readAllKV(t, l) {
		if off < openAt && !slices.Contains(before, off) {
			vals[r[0]] = append(vals[r[0]], r[1]+"/"+r[2])
		}
	}
	for k, want := range map[string]string{"k": "good/value", "j": "new/value", "m": "keep/value", "\x00\x00\x00\x01": "user/value"} {
		if got := vals[k]; len(got) != 1 || got[0] != want {
			t.Fatalf("key %q after compaction: %v, want [%s]", k, got, want)
		}
	}
	checkAgainstReplayCompacted(t, l)
	// Once the transaction ends (and is replicated), its segments are
	// cleaned too.
	mustMarker(t, l, 5, 0, true)
	l.UpdateHighWatermark(l.EndOffset())
	app(batchOpts{Records: kv("roll", "x"), ValueSize: 400})
	if st, err := l.Compact(1, 1<<40); err != nil || st.Segments == 0 {
		t.Fatalf("compaction after the transaction ended: %+v, %v", st, err)
	}
	checkAgainstReplayCompacted(t, l)
	// And all of it survives a restart.
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l2 := openLog(t, l.dir, cfg)
	checkAgainstReplayCompacted(t, l2)
}

// checkAgainstReplayCompacted is the check that holds after compaction
// removed transactions' batches: what a read_committed consumer sees.
func checkAgainstReplayCompacted(t *testing.T, l *Log) {
	t.Helper()
	bs := tbatchesOf(t, l)
	for _, f := range probes(l) {
		if d := consumerView(l, bs, f); d != "" {
			t.Fatal(d)
		}
	}
}

func crc32c(b []byte) uint32 { return crc32.Checksum(b, castagnoli) }

// TestLastStableAndAbortedIn: LastStableOffset is the high watermark held
// back by an undecided or unreplicated transaction; AbortedIn reports the
// aborted transactions of what a read returned, none for an empty read.
func TestLastStableAndAbortedIn(t *testing.T) {
	l := openLog(t, t.TempDir(), txnConfig())
	mustAppend(t, l, buildBatch(t, batchOpts{N: 2}))          // 0-1
	b1 := mustAppend(t, l, txnData(t, 1, 0, 0, 2)).BaseOffset // 2-3
	if got := l.LastStableOffset(l.EndOffset()); got != b1 {
		t.Fatalf("open transaction: LSO %d, want %d", got, b1)
	}
	if got := l.LastStableOffset(1); got != 1 {
		t.Fatalf("LSO under hw 1: %d", got)
	}
	a1 := mustMarker(t, l, 1, 0, false)
	if got := l.LastStableOffset(l.EndOffset()); got != b1 {
		t.Fatalf("marker not replicated: LSO %d, want %d", got, b1)
	}
	l.UpdateHighWatermark(l.EndOffset())
	if got := l.LastStableOffset(l.EndOffset()); got != l.EndOffset() {
		t.Fatalf("decided and replicated: LSO %d, want %d", got, l.EndOffset())
	}
	data, err := l.Read(0, 1<<20, l.EndOffset(), nil)
	if err != nil {
		t.Fatal(err)
	}
	want := []AbortedTxn{{ProducerID: 1, FirstOffset: b1, LastOffset: a1, LastStableOffset: a1 + 1}}
	if got := l.AbortedIn(0, data); !slices.Equal(got, want) {
		t.Fatalf("AbortedIn = %+v, want %+v", got, want)
	}
	if got := l.AbortedIn(0, nil); got != nil {
		t.Fatalf("AbortedIn of nothing = %+v", got)
	}
}
