package storage

import (
	"fmt"
	"slices"
	"sort"

	"github.com/fjordlog/fjord/storage/recordbatch"
)

// Transactions, as a partition log keeps them (Kafka's semantics and
// formats; docs/transactions.md, "Partition logs").
//
// A transactional producer's data batches carry the transactional
// attribute; its transaction on this partition opens with its first such
// batch after its last marker and ends with a marker: a control batch the
// leader writes when the coordinator says so (AppendMarker), holding one
// record whose key and value are Kafka's EndTxnMarker. The producer table
// (producers.go) keeps each producer's open transaction (txnFirst) with the
// rest of its state; txnState below orders the open ones, so the first
// unstable offset is cheap; every abort marker that ends a transaction adds
// an entry to the aborted transaction index of the segment holding it
// (txnindex.go), which read_committed fetches return.
//
// Every path that adds batches goes through the same two functions, record
// and recordMarker, and applyBatch: the leader's appends, a follower's
// (AppendReplica), recovery's replay (Open) and truncation's (Truncate), so
// the state is a function of the log, however it got there. The one
// exception is a transaction that began below the log start (retention
// removed its first batches): a snapshot remembers where it began, a replay
// from the log start without one finds it beginning at its first batch
// still here, or not at all if none is (its marker then ends nothing). Both
// give read_committed consumers the same records.

// buildMarkerBatch encodes m as the leader writes it
// (recordbatch.BuildMarker).
func buildMarkerBatch(m TxnMarker, ts int64) []byte {
	return recordbatch.BuildMarker(recordbatch.EndTxnMarker{Commit: m.Commit, CoordinatorEpoch: m.CoordinatorEpoch}, m.ProducerID, m.ProducerEpoch, ts)
}

// TxnMarker is one partition's part of a WriteTxnMarkers request: end
// producer ProducerID's transaction here.
type TxnMarker struct {
	ProducerID       int64
	ProducerEpoch    int16
	Commit           bool  // false: abort
	CoordinatorEpoch int32 // the coordinator's epoch (its __transaction_state partition's leader epoch)
	// TransactionVersion is WriteTxnMarkers v2's (KIP-890 part 2): from 2
	// on the coordinator bumps the producer epoch for every marker, so the
	// marker's epoch must be above the producer's here, except when it
	// repeats the marker already written (same epoch, no transaction open):
	// a retry after a lost answer, or a new coordinator's. Below 2 it must
	// not be below it.
	TransactionVersion int8
}

// AppendMarker appends the marker m as the leader of leaderEpoch (as
// Append: a stale leader epoch is ErrStaleLeaderEpoch), with timestamp now
// (ms), and returns its offset. It is refused with ErrInvalidEpoch for a
// producer epoch older than the producer's here (INVALID_PRODUCER_EPOCH, or
// PRODUCER_FENCED to old clients), and ErrCoordinatorFenced for a
// coordinator epoch older than that of the producer's last marker.
//
// The marker ends the producer's open transaction on this partition, if it
// has one; an abort adds the transaction to the aborted transaction index
// of the segment it lands in. A marker for a producer with no open
// transaction (a retry, or a partition the transaction wrote nothing to) is
// written and changes nothing else, as in Kafka. Durable like any append:
// after Flush.
func (l *Log) AppendMarker(m TxnMarker, leaderEpoch int32, now int64) (int64, error) {
	if m.ProducerID < 0 || m.ProducerEpoch < 0 {
		return 0, fmt.Errorf("%w: marker for producer %d epoch %d", ErrInvalidRecord, m.ProducerID, m.ProducerEpoch)
	}
	b := buildMarkerBatch(m, now)
	info, err := recordbatch.ParseHeader(b)
	if err != nil {
		return 0, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.writableLocked(); err != nil {
		return 0, err
	}
	if err := l.mu.producers.checkMarker(m); err != nil {
		return 0, err
	}
	marker := recordbatch.EndTxnMarker{Commit: m.Commit, CoordinatorEpoch: m.CoordinatorEpoch}
	res, err := l.appendLocked(b, info, &marker, leaderEpoch, now)
	return res.BaseOffset, err
}

// AbortedTxn is one entry of the aborted transaction index: Kafka's
// AbortedTxn, which a read_committed Fetch returns as AbortedTransactions
// (ProducerID and FirstOffset).
//
// Invariants: FirstOffset <= LastOffset; LastStableOffset <= LastOffset+1;
// every transaction aborted after this one (a later entry) has its
// FirstOffset at or above LastStableOffset, which is what lets a search
// stop there.
type AbortedTxn struct {
	ProducerID  int64
	FirstOffset int64 // the transaction's first batch
	LastOffset  int64 // its abort marker
	// LastStableOffset is the last stable offset once the marker was
	// appended: the first offset of the oldest transaction still open then,
	// or the marker's offset + 1 if none was.
	LastStableOffset int64
}

// AbortedTransactions returns the aborted transactions a read_committed
// fetch from fetchOffset, whose records end before upperBound, must report:
// those whose marker is at or after fetchOffset and which began before
// upperBound, in marker order. It searches the index of the segment holding
// fetchOffset and of every later one (an aborted transaction's entry is in
// the segment of its marker, maybe far after its first batch), and stops at
// an entry whose LastStableOffset reaches upperBound, as Kafka does. The
// caller owns the result. Lock-free: it reads what the writer published.
func (l *Log) AbortedTransactions(fetchOffset, upperBound int64) []AbortedTxn {
	segs := l.segments()
	i := max(sort.Search(len(segs), func(i int) bool { return segs[i].base > fetchOffset })-1, 0)
	var out []AbortedTxn
	for _, s := range segs[i:] {
		p := s.aborted.Load()
		if p == nil {
			continue
		}
		found, complete := CollectAborted(*p, fetchOffset, upperBound)
		out = append(out, found...)
		if complete {
			return out
		}
	}
	return out
}

// CollectAborted is one segment's part of AbortedTransactions, over es, its
// aborted transaction index's entries in marker order (as a segment holds
// them, or DecodeTxnIndex returns them for a tiered copy's): the entries
// whose marker is at or after fetchOffset and which began before
// upperBound. complete says an entry's LastStableOffset reached upperBound,
// so no later segment can add one (Kafka's TxnIndexSearchResult). The
// caller owns out; es is not changed.
func CollectAborted(es []AbortedTxn, fetchOffset, upperBound int64) (out []AbortedTxn, complete bool) {
	k := sort.Search(len(es), func(k int) bool { return es[k].LastOffset >= fetchOffset })
	for _, a := range es[k:] {
		if a.FirstOffset < upperBound {
			out = append(out, a)
		}
		if a.LastStableOffset >= upperBound {
			return out, true
		}
	}
	return out, false
}

// FirstUnstableOffset is Kafka's first unstable offset: the first offset of
// the oldest transaction that is still open, or whose marker is at or above
// the high watermark last given to UpdateHighWatermark (decided, but maybe
// not replicated: its marker could still be lost with this leader), raised
// to the log start if below it; ok is false when there is none. The last
// stable offset is min(high watermark, this). Cheap (no lock, no
// allocation; a binary search over the transactions ended since the high
// watermark last moved), and free for a log that never saw a transaction.
func (l *Log) FirstUnstableOffset() (offset int64, ok bool) {
	v := l.txnPub.Load()
	if v == nil {
		return 0, false
	}
	first := v.firstOpen
	hw := l.hwMark.Load()
	c := v.completed
	for _, t := range c[sort.Search(len(c), func(i int) bool { return c[i].last >= hw }):] {
		if first < 0 || t.first < first {
			first = t.first
		}
	}
	if first < 0 {
		return 0, false
	}
	return max(first, l.startOffset.Load()), true
}

// LastStableOffset is the last stable offset under high watermark hw:
// hw, or FirstUnstableOffset when that is lower. A read_committed reader
// (a consumer's Fetch, a read_committed share group) reads below it.
func (l *Log) LastStableOffset(hw int64) int64 {
	if first, ok := l.FirstUnstableOffset(); ok {
		return min(first, hw)
	}
	return hw
}

// AbortedIn is AbortedTransactions for data, whole batches a read from
// fetchOffset returned: the aborted transactions whose batches data may
// hold, which a read_committed reader drops. Nil for empty data.
func (l *Log) AbortedIn(fetchOffset int64, data []byte) []AbortedTxn {
	end := ReadEnd(fetchOffset, data)
	if end == fetchOffset {
		return nil
	}
	return l.AbortedTransactions(fetchOffset, end)
}

// ReadEnd is the offset after the last whole batch of data, batches a read
// from fetchOffset returned: the upper bound of the aborted transactions
// a read_committed reader of data must hear of. fetchOffset for no batch.
func ReadEnd(fetchOffset int64, data []byte) int64 {
	end := fetchOffset
	for d := data; len(d) >= recordbatch.HeaderLen; {
		info, err := recordbatch.ParseHeader(d)
		if err != nil || info.Bytes > len(d) {
			break
		}
		end = recordbatch.LastOffset(d) + 1
		d = d[info.Bytes:]
	}
	return end
}

// UpdateHighWatermark tells the log its partition's high watermark (the
// leader's, or on a follower the one the leader sent), as Kafka's
// onHighWatermarkUpdated: transactions whose marker is below it count as
// replicated, so FirstUnstableOffset moves past them, and the log forgets
// them. The broker calls it whenever the high watermark moves, on leaders
// and followers; until the first call after Open, every transaction ended
// since the producer snapshot recovery started from counts as unreplicated.
// A value below one already given is ignored. Lock-free.
func (l *Log) UpdateHighWatermark(hw int64) {
	for {
		cur := l.hwMark.Load()
		if hw <= cur || l.hwMark.CompareAndSwap(cur, hw) {
			return
		}
	}
}

// openTxn is an entry of txnState.open.
type openTxn struct {
	pid   int64
	first int64
}

// completedTxn is a transaction ended by a marker at last.
type completedTxn struct {
	first, last int64
}

// txnState orders a log's transactions for the first unstable offset, beside
// the producer table that says which are open (producerEntry.txnFirst).
//
// open holds an entry for every open transaction, in the order they began,
// which is first-offset order (offsets only grow). A marker does not remove
// its transaction's entry: an entry is live while its producer's txnFirst
// equals its first, and dead entries are dropped when they reach the front
// (so the front, once cleaned, is the oldest open transaction: O(1)
// amortised) or when they outnumber the live ones (compactOpen).
//
// completed holds the transactions ended since the high watermark passed
// their marker (Kafka's unreplicated transactions), in marker order; the
// writer appends and drops from the front, and readers hold prefixes of
// it through txnView (the array is shared: elements below a published
// length never change).
//
// Invariants: every producer entry with txnFirst >= 0 has a live entry in
// open; open's firsts increase; live counts the producers with txnFirst >=
// 0; completed's lasts increase. Guarded by Log.mu.
//
// Alternatives rejected: a heap or a tree keyed by first offset does the
// same in O(log n) with more code, for transactions that arrive in order
// anyway; publishing the whole set to readers (copy-on-write) costs O(n)
// per change, where readers need only the minimum.
type txnState struct {
	open      []openTxn
	live      int
	completed []completedTxn
}

// newTxnState builds the state for a producer table loaded from a snapshot,
// or rebuilt by a replay (which then goes on adding to it).
func newTxnState(p producers) txnState {
	var t txnState
	for pid, e := range p {
		if e.txnFirst >= 0 {
			t.open = append(t.open, openTxn{pid, e.txnFirst})
		}
	}
	slices.SortFunc(t.open, func(a, b openTxn) int { return compareInt64(a.first, b.first) })
	t.live = len(t.open)
	return t
}

func compareInt64(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// began notes that producer pid opened a transaction at first.
func (t *txnState) began(pid, first int64) {
	t.open = append(t.open, openTxn{pid, first})
	t.live++
}

// ended notes that a marker at last ended producer pid's transaction that
// began at first (whose entry p no longer marks live), and returns the last
// stable offset as of the marker: the oldest other open transaction's
// first offset, or last + 1.
func (t *txnState) ended(p producers, first, last int64) int64 {
	t.live--
	t.completed = append(t.completed, completedTxn{first, last})
	if f, ok := t.firstOpen(p); ok {
		return f
	}
	return last + 1
}

func liveTxn(p producers, o openTxn) bool {
	e := p[o.pid]
	return e != nil && e.txnFirst == o.first
}

// firstOpen returns the first offset of the oldest open transaction,
// dropping dead entries at the front, and compacting open when dead ones
// dominate.
func (t *txnState) firstOpen(p producers) (int64, bool) {
	i := 0
	for i < len(t.open) && !liveTxn(p, t.open[i]) {
		i++
	}
	t.open = t.open[i:]
	if len(t.open) > 2*t.live+16 {
		t.open = slices.DeleteFunc(t.open, func(o openTxn) bool { return !liveTxn(p, o) })
	}
	if len(t.open) == 0 {
		t.open = nil
		return -1, false
	}
	return t.open[0].first, true
}

// forget drops the completed transactions whose marker is below offset:
// replicated (below the high watermark) or gone (below the log start).
func (t *txnState) forget(offset int64) {
	c := t.completed
	i := sort.Search(len(c), func(i int) bool { return c[i].last >= offset })
	t.completed = c[i:]
	if len(t.completed) == 0 {
		t.completed = nil
	}
}

// txnView is what readers see of txnState: replaced, never modified.
type txnView struct {
	firstOpen int64          // the oldest open transaction's first offset; -1: none
	completed []completedTxn // a prefix of txnState.completed
}

// publishTxnsLocked makes the transaction state visible to readers after a
// change. A log that has never seen a transaction publishes nothing.
// REQUIRES: l.mu held.
func (l *Log) publishTxnsLocked() {
	t := &l.mu.txns
	t.forget(max(l.hwMark.Load(), l.startOffset.Load()))
	first, _ := t.firstOpen(l.mu.producers)
	if first < 0 && len(t.completed) == 0 {
		if l.txnPub.Load() != nil {
			l.txnPub.Store(&txnView{firstOpen: -1})
		}
		return
	}
	l.txnPub.Store(&txnView{firstOpen: first, completed: t.completed})
}

// applyBatch records one batch appended (or replayed) at [first, last] in p
// and t, and returns the aborted-transaction entry it makes, if any. m is a
// control batch's marker; nil for a control batch without a readable one
// (Kafka's cleaner leaves empty control batches), which changes nothing.
// changed reports a change to t, which readers must then see.
func applyBatch(p producers, t *txnState, info recordbatch.Info, m *recordbatch.EndTxnMarker, first, last, now int64) (a AbortedTxn, abort, changed bool) {
	if !info.Control {
		if p.record(info, first, last, now) {
			t.began(info.ProducerID, first)
			return a, false, true
		}
		return a, false, false
	}
	if m == nil || !info.Idempotent() {
		return a, false, false
	}
	txnFirst := p.recordMarker(info.ProducerID, info.ProducerEpoch, m.CoordinatorEpoch, now)
	if txnFirst < 0 {
		return a, false, false
	}
	lso := t.ended(p, txnFirst, first)
	if m.Commit {
		return a, false, true
	}
	return AbortedTxn{ProducerID: info.ProducerID, FirstOffset: txnFirst, LastOffset: first, LastStableOffset: lso}, true, true
}

// InTransaction reports whether producer pid has a transaction open on
// this partition at epoch: a transactional batch of it then needs no
// verification with its coordinator (KIP-890 part 1), since the
// coordinator added the partition when the transaction wrote here first.
// Takes the append mutex briefly; called only for transactional batches.
func (l *Log) InTransaction(pid int64, epoch int16) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	e := l.mu.producers[pid]
	return e != nil && e.txnFirst >= 0 && e.epoch == epoch
}

// ProducerState is one producer's state on this partition, as
// DescribeProducers reports it.
type ProducerState struct {
	ProducerID    int64
	ProducerEpoch int16
	// LastSequence is the sequence of the producer's last batch here, -1
	// when none (only a marker since its epoch began).
	LastSequence int32
	// LastAppendMs is when this broker last appended for it (its clock).
	LastAppendMs     int64
	CoordinatorEpoch int32 // of its last marker; -1 before any
	TxnStartOffset   int64 // first offset of its open transaction; -1 none
}

// Producers lists the producers this partition tracks, by producer id. The
// caller owns the slice. Takes the append mutex for the copy.
func (l *Log) Producers() []ProducerState {
	l.mu.Lock()
	out := make([]ProducerState, 0, len(l.mu.producers))
	for id, e := range l.mu.producers {
		last := int32(-1)
		if n := len(e.batches); n > 0 {
			last = e.batches[n-1].lastSeq
		}
		out = append(out, ProducerState{ProducerID: id, ProducerEpoch: e.epoch, LastSequence: last,
			LastAppendMs: e.lastTS, CoordinatorEpoch: e.coordEpoch, TxnStartOffset: e.txnFirst})
	}
	l.mu.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i].ProducerID < out[j].ProducerID })
	return out
}
