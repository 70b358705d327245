package storage

import (
	"fmt"
	gomaps "maps"
	"math"
	"slices"
	"testing"

	"github.com/fjordlog/fjord/storage/recordbatch"
	"github.com/fjordlog/fjord/storage/recordbatch/batchtest"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The tests' model of transactions: what a replay of a log's batches, in
// order, says about them, written apart from the storage code (markers are
// decoded with kmsg), to check the log's own state against.

// tbatch is a batch as the transaction model sees it.
type tbatch struct {
	base, last int64
	pid        int64
	epoch      int16
	txn        bool // the transactional attribute
	control    bool
	commit     bool // a control batch's marker type
	marker     bool // a control batch with a readable marker
}

// decodeTBatch reads a stored batch's header, and a control batch's marker
// with kmsg.
func decodeTBatch(b []byte) (tbatch, error) {
	var rb kmsg.RecordBatch
	if err := rb.ReadFrom(b); err != nil {
		return tbatch{}, err
	}
	tb := tbatch{base: rb.FirstOffset, last: rb.FirstOffset + int64(rb.LastOffsetDelta), pid: rb.ProducerID,
		epoch: rb.ProducerEpoch, txn: rb.Attributes&0x10 != 0, control: rb.Attributes&0x20 != 0}
	tb.commit, tb.marker = batchtest.MarkerOf(rb)
	return tb, nil
}

// tbatchesOf reads every batch of the log.
func tbatchesOf(t testing.TB, l *Log) []tbatch {
	t.Helper()
	var out []tbatch
	end := l.EndOffset()
	for off := l.StartOffset(); off < end; {
		data, err := l.Read(off, 1<<20, end, nil)
		if err != nil {
			t.Fatalf("Read(%d): %v", off, err)
		}
		if len(data) == 0 {
			break
		}
		for _, b := range splitBatches(t, data) {
			tb, err := decodeTBatch(b)
			if err != nil {
				t.Fatalf("batch at %d: %v", recordbatch.BaseOffset(b), err)
			}
			out = append(out, tb)
			off = tb.last + 1
		}
	}
	return out
}

// txnModel is the transaction state a replay of batches gives.
type txnModel struct {
	open    map[int64]int64 // producer id -> first offset of its open transaction
	aborted []AbortedTxn    // in marker order
	ended   []completedTxn  // every transaction a marker ended, in marker order
}

// replayTxns replays bs, starting with the transactions open in seeds
// (those that began below the log start, which only a snapshot knows).
func replayTxns(bs []tbatch, seeds map[int64]int64) txnModel {
	m := txnModel{open: gomaps.Clone(seeds)}
	if m.open == nil {
		m.open = map[int64]int64{}
	}
	for _, b := range bs {
		if b.pid < 0 {
			continue
		}
		if !b.control {
			if _, ok := m.open[b.pid]; b.txn && !ok {
				m.open[b.pid] = b.base
			}
			continue
		}
		first, ok := m.open[b.pid]
		if !b.marker || !ok {
			continue
		}
		delete(m.open, b.pid)
		m.ended = append(m.ended, completedTxn{first, b.base})
		if b.commit {
			continue
		}
		lso := b.base + 1
		for _, f := range m.open {
			lso = min(lso, f)
		}
		m.aborted = append(m.aborted, AbortedTxn{ProducerID: b.pid, FirstOffset: first, LastOffset: b.base, LastStableOffset: lso})
	}
	return m
}

// abortedFor is what AbortedTransactions(f, u) must return.
func (m txnModel) abortedFor(f, u int64) []AbortedTxn {
	var out []AbortedTxn
	for _, a := range m.aborted {
		if a.LastOffset < f {
			continue
		}
		if a.FirstOffset < u {
			out = append(out, a)
		}
		if a.LastStableOffset >= u {
			break
		}
	}
	return out
}

// firstOpen is the first unstable offset once every marker is replicated.
func (m txnModel) firstOpen(start int64) (int64, bool) {
	if len(m.open) == 0 {
		return 0, false
	}
	f := int64(math.MaxInt64)
	for _, v := range m.open {
		f = min(f, v)
	}
	return max(f, start), true
}

// openTxnsOf is the log's producer table's open transactions.
func openTxnsOf(l *Log) map[int64]int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := map[int64]int64{}
	for pid, e := range l.mu.producers {
		if e.txnFirst >= 0 {
			out[pid] = e.txnFirst
		}
	}
	return out
}

// seedsOf is the log's open transactions that began below its start.
func seedsOf(l *Log) map[int64]int64 {
	out := map[int64]int64{}
	for pid, f := range openTxnsOf(l) {
		if f < l.StartOffset() {
			out[pid] = f
		}
	}
	return out
}

// diffTxnState compares the log's transaction state with a replay of its
// batches: open transactions, the first unstable offset once the high
// watermark is the log end, and AbortedTransactions for every fetch offset
// in probes (with upper bounds at the log end and just after it). It
// returns "" when they agree.
func diffTxnState(l *Log, m txnModel, probes []int64) string {
	if got := openTxnsOf(l); !gomaps.Equal(got, m.open) {
		return fmt.Sprintf("open transactions %v, a replay of the log has %v", got, m.open)
	}
	end := l.EndOffset()
	l.UpdateHighWatermark(end)
	gf, gok := l.FirstUnstableOffset()
	wf, wok := m.firstOpen(l.StartOffset())
	if gf != wf || gok != wok {
		return fmt.Sprintf("FirstUnstableOffset() = (%d, %v) with the high watermark at the end, a replay says (%d, %v)", gf, gok, wf, wok)
	}
	for _, f := range probes {
		for _, u := range []int64{f + 1, f + 7, end, end + 1, math.MaxInt64} {
			got, want := l.AbortedTransactions(f, u), m.abortedFor(f, u)
			if !slices.Equal(got, want) {
				return fmt.Sprintf("AbortedTransactions(%d, %d) = %+v, a replay says %+v", f, u, got, want)
			}
		}
	}
	return ""
}

// consumerView checks what a read_committed consumer (Kafka's Java
// client's algorithm) makes of the log from offset from, with the last
// stable offset as FirstUnstableOffset and the log end give it: every
// transactional data batch it delivers is one that a commit marker of its
// producer follows in the log, every one it drops is one an abort marker
// follows, and every batch no marker follows yet is at or above the last
// stable offset. This holds whatever compaction, retention and truncation
// did. It returns "" when it holds.
func consumerView(l *Log, bs []tbatch, from int64) string {
	end := l.EndOffset()
	l.UpdateHighWatermark(end)
	lso := end
	if f, ok := l.FirstUnstableOffset(); ok {
		lso = min(lso, f)
	}
	outcome := txnOutcomes(bs)
	aborted := l.AbortedTransactions(from, lso)
	slices.SortStableFunc(aborted, func(a, b AbortedTxn) int { return compareInt64(a.FirstOffset, b.FirstOffset) })
	abortedPids := map[int64]bool{}
	for i, b := range bs {
		if outcome[i] == "open" && b.base < lso {
			return fmt.Sprintf("batch [%d, %d] of producer %d is in an open transaction, below the last stable offset %d", b.base, b.last, b.pid, lso)
		}
		if b.last < from || b.last >= lso {
			continue
		}
		if b.pid >= 0 {
			for len(aborted) > 0 && aborted[0].FirstOffset <= b.last {
				abortedPids[aborted[0].ProducerID] = true
				aborted = aborted[1:]
			}
		}
		switch {
		case b.control:
			if b.marker && !b.commit {
				delete(abortedPids, b.pid)
			}
		case b.txn && b.pid >= 0 && abortedPids[b.pid]:
			if outcome[i] != "abort" {
				return fmt.Sprintf("a read_committed consumer from %d drops batch [%d, %d] of producer %d, whose transaction is %s", from, b.base, b.last, b.pid, outcome[i])
			}
		case b.txn && b.pid >= 0:
			if outcome[i] != "commit" {
				return fmt.Sprintf("a read_committed consumer from %d delivers batch [%d, %d] of producer %d, whose transaction is %s (last stable offset %d)", from, b.base, b.last, b.pid, outcome[i], lso)
			}
		}
	}
	return ""
}

// txnOutcomes is the ground truth for each transactional data batch of bs:
// "commit" or "abort" as the next marker of its producer in the log says,
// "open" if none follows; "" for other batches.
func txnOutcomes(bs []tbatch) []string {
	outcome := make([]string, len(bs))
	nextMarker := map[int64]string{}
	for i := len(bs) - 1; i >= 0; i-- {
		b := bs[i]
		switch {
		case b.control && b.marker && b.commit:
			nextMarker[b.pid] = "commit"
		case b.control && b.marker:
			nextMarker[b.pid] = "abort"
		case b.txn && b.pid >= 0:
			outcome[i] = nextMarker[b.pid]
			if outcome[i] == "" {
				outcome[i] = "open"
			}
		}
	}
	return outcome
}
