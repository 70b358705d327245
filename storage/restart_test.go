package storage

import (
	"errors"
	"math/rand/v2"
	"testing"

	"github.com/rs/zerolog"
)

// RestartFromCopy: a replica restarted at the end of a copied segment
// takes the copy's producer snapshot and epochs, so a retry of a batch
// below the restart is a duplicate, a gap is out of order, a transaction
// open below it holds the last stable offset, and the state survives a
// reopen. A snapshot taken elsewhere is refused before anything changes.
func TestRestartFromCopy(t *testing.T) {
	cfg := testConfig()
	cfg.Tier.Enabled = true
	cfg.SegmentMs = 1000
	src := openLog(t, t.TempDir(), cfg)
	src.SetRemoteCopiedEnd(func() int64 { return -1 })
	now := int64(1_000_000)
	for seq := int32(0); seq < 3; seq++ {
		appendOpts(t, src, batchOpts{N: 2, Idempotent: true, PID: 9, Seq: seq * 2}, now)
		now += 1000 // each append after the first rolls (segment.ms)
	}
	txn := appendOpts(t, src, batchOpts{N: 1, Idempotent: true, PID: 11, Attrs: attrTransactional}, now)
	now += 1000
	appendOpts(t, src, batchOpts{N: 1}, now) // rolls: the segment [.., txn] is sealed
	sealed := src.SealedSegments()
	last := sealed[len(sealed)-1]
	offset := last.Last + 1
	snap, err := src.ProducerSnapshot(offset)
	if err != nil {
		t.Fatal(err)
	}
	epochs := []EpochStart{{Epoch: 3, Start: 0}, {Epoch: 7, Start: 2}, {Epoch: 9, Start: offset}}

	dir := t.TempDir()
	dst := openLog(t, dir, testConfig())
	appendOpts(t, dst, batchOpts{N: 1}, now) // something to throw away
	if err := dst.RestartFromCopy(offset+1, epochs, snap); err == nil {
		t.Fatal("a snapshot taken at another offset was accepted")
	}
	if dst.EndOffset() != 1 {
		t.Fatalf("refused restart changed the log: end %d", dst.EndOffset())
	}
	if err := dst.RestartFromCopy(offset, epochs, snap); err != nil {
		t.Fatal(err)
	}
	check := func(l *Log) {
		t.Helper()
		if l.StartOffset() != offset || l.EndOffset() != offset {
			t.Fatalf("log [%d, %d), want [%d, %d)", l.StartOffset(), l.EndOffset(), offset, offset)
		}
		byID := map[int64]ProducerState{}
		for _, p := range l.Producers() {
			byID[p.ProducerID] = p
		}
		if p := byID[9]; p.LastSequence != 5 {
			t.Fatalf("producer 9: %+v, want last sequence 5", p)
		}
		if p := byID[11]; p.TxnStartOffset != txn.BaseOffset {
			t.Fatalf("producer 11: %+v, want a transaction open at %d", p, txn.BaseOffset)
		}
	}
	check(dst)
	if e, end := dst.EndOffsetForEpoch(3); e != 3 || end != 2 {
		t.Fatalf("epoch 3 ends at %d (found %d), want 2", end, e)
	}
	if dst.LatestEpoch() != 7 {
		t.Fatalf("latest epoch %d, want 7 (9 starts at the restart: its first batch records it)", dst.LatestEpoch())
	}
	// A retry of the last batch below the restart is a duplicate; a gap
	// is out of order; the next sequence goes in.
	res := appendOpts(t, dst, batchOpts{N: 2, Idempotent: true, PID: 9, Seq: 4}, now)
	if !res.Duplicate {
		t.Fatalf("retry of a copied batch appended again at %d", res.BaseOffset)
	}
	if _, err := appendRaw(dst, buildBatch(t, batchOpts{N: 1, Idempotent: true, PID: 9, Seq: 7}), now); !errors.Is(err, ErrOutOfOrderSeq) {
		t.Fatalf("a gap after the copied sequence: %v, want ErrOutOfOrderSeq", err)
	}
	if res := appendOpts(t, dst, batchOpts{N: 1, Idempotent: true, PID: 9, Seq: 6}, now); res.Duplicate || res.BaseOffset != offset {
		t.Fatalf("next sequence: %+v", res)
	}
	dst.Close()
	re := openLog(t, dir, testConfig())
	if re.StartOffset() != offset {
		t.Fatalf("reopened log starts at %d, want %d", re.StartOffset(), offset)
	}
	// The transaction open below the start holds the last stable offset
	// at the start (the local log's floor) until its abort, which lists
	// it from its first offset in the copy.
	if got := re.LastStableOffset(re.EndOffset()); got != offset {
		t.Fatalf("reopened: last stable offset %d, want %d (a transaction open since %d)", got, offset, txn.BaseOffset)
	}
	at, err := re.AppendMarker(TxnMarker{ProducerID: 11, Commit: false}, 9, now)
	if err != nil {
		t.Fatal(err)
	}
	re.UpdateHighWatermark(re.EndOffset()) // the marker replicated
	if got := re.LastStableOffset(re.EndOffset()); got != re.EndOffset() {
		t.Fatalf("after the abort: last stable offset %d, want %d", got, re.EndOffset())
	}
	if got := re.AbortedTransactions(offset, re.EndOffset()); len(got) != 1 || got[0].ProducerID != 11 || got[0].FirstOffset != txn.BaseOffset || got[0].LastOffset != at {
		t.Fatalf("aborted transactions %+v, want producer 11 from %d to %d", got, txn.BaseOffset, at)
	}
}

// RestartFromCopy crashed at each of its file-system changes: the
// recovered log is the old one (or part of it, as the restart's steps
// allow) without the copy's producers, or the restarted one with them;
// never the restarted log without its producer state.
func TestRestartFromCopyCrash(t *testing.T) {
	p := producers{}
	e := newProducerEntry(0)
	e.batches = []producerBatch{{firstSeq: 0, lastSeq: 1, firstOffset: 98, lastOffset: 99}}
	p[9] = e
	snap := p.encode(100)
	for change := 0; ; change++ {
		fs := newCrashFS(NewMemFS(), rand.New(rand.NewPCG(uint64(change), 3)))
		cfg := testConfig()
		cfg.FS = fs
		cfg.SegmentBytes = 400
		l, err := Open("/logs/topic-0", cfg, zerolog.Nop())
		if err != nil {
			t.Fatal(err)
		}
		for i := range 12 {
			appendOpts(t, l, batchOpts{N: 3, ValueSize: 40, Idempotent: true, PID: 5, Seq: int32(3 * i)}, int64(i))
		}
		if err := l.Flush(); err != nil {
			t.Fatal(err)
		}
		fs.arm(change)
		if err := l.RestartFromCopy(100, []EpochStart{{Epoch: 7, Start: 0}}, snap); err != nil {
			t.Fatal(err)
		}
		img := fs.collect()
		last := img == nil
		if last {
			img = fs.MemFS.CrashClone(nil)
		}
		cfg.FS = img
		l2, err := Open("/logs/topic-0", cfg, zerolog.Nop())
		if err != nil {
			t.Fatalf("crash at change %d: Open: %v", change, err)
		}
		has := map[int64]bool{}
		for _, ps := range l2.Producers() {
			has[ps.ProducerID] = true
		}
		start, end := l2.StartOffset(), l2.EndOffset()
		l2.Close()
		switch {
		case end == 100 && start == 100:
			if !has[9] {
				t.Fatalf("crash at change %d: restarted at 100 without the copy's producer state", change)
			}
		case end <= 36: // the old log, or what is left of it as segments below 100 go
			if has[9] {
				t.Fatalf("crash at change %d: the old log [0, %d) with the copy's producers", change, end)
			}
		default:
			t.Fatalf("crash at change %d: log [%d, %d), neither the old nor the restarted one", change, start, end)
		}
		if last {
			return
		}
	}
}
