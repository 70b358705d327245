package storage

import (
	"encoding/binary"
	"slices"

	"github.com/fjordlog/fjord/storage/recordbatch"
)

// Transactions in TestCrashRecovery's workload: transactional producers
// append through the leader (Append) and have their transactions ended by
// markers (AppendMarker), commits and aborts, sometimes with a bumped epoch
// (transaction version 2) or for a producer with nothing open; a follower's
// fetches (AppendReplica) bring other producers' transactional batches and
// markers. After every recovery, truncation and compaction the log's
// transaction state is checked (verifyTxns):
//
//   - always: what a read_committed consumer makes of the log (consumerView):
//     it delivers exactly the batches of committed transactions, drops
//     exactly those of aborted ones, and sees nothing of open ones;
//   - while a replay of the log from its start can know everything
//     (crashTxns.inexact is false): open transactions, FirstUnstableOffset
//     and AbortedTransactions equal what the model's own replay of the
//     recovered log computes (diffTxnState).

// txnSlot is one transactional producer of the leader's workload.
type txnSlot struct {
	pid   int64
	epoch int16
	seq   int32 // next sequence number
}

// crashTxns is the transactional side of a crashRun.
type crashTxns struct {
	slots   [3]*txnSlot     // nil: the next use takes a new producer id
	retired map[int64]int16 // producers given up (their state unknown), by last epoch: markers may still end what they left open
	nextPid int64
	coord   int32           // the coordinator epoch, never going down
	repSeq  map[int64]int32 // the follower's producers' next sequences
	// inexact: a replay of the log from its start cannot know all the
	// state: a transaction was open across a segment boundary retention
	// removed (only a snapshot remembers where it began), or compaction
	// removed transactional batches. Cleared by TruncateFullyAndStartAt,
	// once it finished without a crash (clearInexact until then): an
	// empty log may still have producers' state from before.
	inexact, clearInexact bool

	// For the summary: checks made, exact ones, aborted transactions seen.
	checks, exact, aborts int
}

func (t *crashTxns) slot(i int) *txnSlot {
	if t.slots[i] == nil {
		if t.nextPid == 0 {
			t.nextPid = 1_000_000
		}
		t.nextPid++
		t.slots[i] = &txnSlot{pid: t.nextPid}
	}
	return t.slots[i]
}

func (t *crashTxns) retire(i int) {
	if sl := t.slots[i]; sl != nil {
		if t.retired == nil {
			t.retired = map[int64]int16{}
		}
		t.retired[sl.pid] = sl.epoch
		t.slots[i] = nil
	}
}

// sync sets each producer's epoch and next sequence from the batches of the
// log, as the log's own state has them; a producer none of whose data
// batches is left is given up (a snapshot may remember more).
func (t *crashTxns) sync(bs []*mbatch) {
	for i, sl := range t.slots {
		if sl == nil {
			continue
		}
		last, lastData := -1, -1
		for j, b := range bs {
			if b.tb.pid == sl.pid {
				last = j
				if !b.tb.control {
					lastData = j
				}
			}
		}
		if lastData < 0 {
			// No data batch left (retention may have taken them, and a
			// marker of theirs stayed): the sequences are unknown here.
			t.retire(i)
			continue
		}
		// Epochs only grow along the log; a marker of a new epoch forgets
		// the old one's sequences.
		sl.epoch, sl.seq = bs[last].tb.epoch, 0
		if bs[lastData].tb.epoch == sl.epoch {
			sl.seq = bs[lastData].lastSeq + 1
		}
	}
}

// retentionCut notes retention removing the batches below start, at the
// segment boundaries bounds (a crash may keep any prefix of the removals).
func (t *crashTxns) retentionCut(bs []*mbatch, bounds []int64) {
	if t.inexact {
		return
	}
	open := map[int64]bool{}
	i := 0
	for _, at := range bounds {
		for ; i < len(bs) && bs[i].base < at; i++ {
			b := bs[i].tb
			switch {
			case b.pid < 0:
			case b.control && b.marker:
				delete(open, b.pid)
			case !b.control && b.txn:
				open[b.pid] = true
			}
		}
		if len(open) > 0 {
			t.inexact = true
			return
		}
	}
}

// compacted notes a compaction; the producers' last batches may be gone.
func (t *crashTxns) compacted(removedTxn bool) {
	t.inexact = t.inexact || removedTxn
	for i := range t.slots {
		t.retire(i)
	}
}

// restarted notes TruncateFullyAndStartAt: every producer is forgotten.
func (t *crashTxns) restarted() {
	for i := range t.slots {
		t.slots[i] = nil
	}
	t.retired = nil
	t.clearInexact = true
}

// settle is called after each operation: crashed says a crash image was
// taken during it, which may hold the log from before.
func (t *crashTxns) settle(crashed bool) {
	if t.clearInexact && !crashed {
		t.inexact = false
	}
	t.clearInexact = false
}

// markerModel is the model of a marker batch at offset at.
func markerModel(at int64, m TxnMarker, ts int64, epoch int32) *mbatch {
	key := []byte{0, 0, 0, 0}
	if m.Commit {
		key[3] = 1
	}
	val := binary.BigEndian.AppendUint32([]byte{0, 0}, uint32(m.CoordinatorEpoch))
	return &mbatch{base: at, last: at, recs: map[int64]mrec{at: {string(key), string(val), ts}}, epoch: epoch,
		pid: m.ProducerID, firstSeq: -1, lastSeq: -1,
		tb: tbatch{base: at, last: at, pid: m.ProducerID, epoch: m.ProducerEpoch, txn: true, control: true, marker: true, commit: m.Commit}}
}

// appendTxn appends a transactional batch as the leader, for one of the
// workload's producers: it opens or continues the producer's transaction.
func (r *crashRun) appendTxn() {
	sl := r.txn.slot(r.rng.IntN(len(r.txn.slots)))
	recs := r.newRecords()
	o := batchOpts{Records: recs, BaseTS: r.now, Codec: r.codec(), Idempotent: true, PID: sl.pid, Epoch: sl.epoch, Seq: sl.seq, Attrs: attrTransactional}
	b := buildBatch(r.t, o)
	info, err := recordbatch.Validate(b, 0)
	if err != nil {
		r.fatalf("recordbatch.Validate: %v", err)
	}
	r.logf("append %d transactional records at %d (epoch %d, pid %d epoch %d seq %d)", len(recs), r.l.EndOffset(), r.epoch, sl.pid, sl.epoch, sl.seq)
	res, err := r.l.Append(b, info, r.epoch, r.now)
	if err != nil {
		r.fatalf("Append of a transactional batch: %v", err)
	}
	if res.Duplicate {
		r.fatalf("Append of a new transactional batch (pid %d seq %d) was taken for a duplicate", sl.pid, sl.seq)
	}
	mb := modelBatch(res.BaseOffset, recs, r.now, r.epoch, sl.pid, sl.seq)
	mb.tb.txn, mb.tb.epoch = true, sl.epoch
	sl.seq += int32(len(recs))
	r.m.batches = append(r.m.batches, mb)
}

// appendMarker ends a transaction as the leader: a workload producer's
// (maybe with none open, maybe bumping its epoch as transaction version 2
// does), or one a given-up producer left open.
func (r *crashRun) appendMarker() {
	pids := []int64{}
	for i := range r.txn.slots {
		pids = append(pids, r.txn.slot(i).pid)
	}
	open := openTxnsOf(r.l)
	for pid := range r.txn.retired {
		if _, ok := open[pid]; ok {
			pids = append(pids, pid)
		}
	}
	slices.Sort(pids) // map order must not make the run irreproducible
	pid := pids[r.rng.IntN(len(pids))]
	m := TxnMarker{ProducerID: pid, Commit: r.rng.IntN(2) == 0, CoordinatorEpoch: r.txn.coord}
	if e, ok := r.txn.retired[pid]; ok {
		m.ProducerEpoch = e
	}
	for _, sl := range r.txn.slots {
		if sl != nil && sl.pid == pid {
			if r.rng.IntN(5) == 0 {
				sl.epoch, sl.seq = sl.epoch+1, 0
				m.TransactionVersion = 2
			}
			m.ProducerEpoch = sl.epoch
		}
	}
	if r.rng.IntN(20) == 0 {
		r.txn.coord++
		m.CoordinatorEpoch = r.txn.coord
	}
	_, wasOpen := open[pid]
	r.logf("append marker at %d (epoch %d): %+v (transaction open: %v)", r.l.EndOffset(), r.epoch, m, wasOpen)
	off, err := r.l.AppendMarker(m, r.epoch, r.now)
	if err != nil {
		r.fatalf("AppendMarker(%+v): %v", m, err)
	}
	r.m.batches = append(r.m.batches, markerModel(off, m, r.now, r.epoch))
}

// replicaTxnBatch is, one time in four, a transactional batch or a marker
// of the follower's producers for AppendReplica at offset at.
func (r *crashRun) replicaTxnBatch(at int64) ([]byte, *mbatch) {
	if r.rng.IntN(4) != 0 {
		return nil, nil
	}
	pid := int64(2_000_000 + r.rng.IntN(2))
	if r.rng.IntN(3) == 0 {
		m := TxnMarker{ProducerID: pid, Commit: r.rng.IntN(2) == 0}
		b := buildMarkerBatch(m, r.now)
		recordbatch.Stamp(b, at, r.epoch, -1)
		return b, markerModel(at, m, r.now, r.epoch)
	}
	if r.txn.repSeq == nil {
		r.txn.repSeq = map[int64]int32{}
	}
	recs := r.newRecords()
	seq := r.txn.repSeq[pid]
	r.txn.repSeq[pid] += int32(len(recs))
	b := buildBatch(r.t, batchOpts{Records: recs, BaseTS: r.now, Codec: r.codec(), Idempotent: true, PID: pid, Seq: seq, Attrs: attrTransactional})
	recordbatch.Stamp(b, at, r.epoch, -1)
	mb := modelBatch(at, recs, r.now, r.epoch, pid, seq)
	mb.tb.txn = true
	return b, mb
}

// verifyTxns checks the transaction state of l, whose batches are got.
func (r *crashRun) verifyTxns(l *Log, got []*mbatch, what string) {
	if r.t.Failed() {
		return
	}
	tbs := make([]tbatch, len(got))
	for i, b := range got {
		tbs[i] = b.tb
	}
	start, end := l.StartOffset(), l.EndOffset()
	froms := []int64{start}
	for range 2 {
		if end > start {
			froms = append(froms, start+r.rng.Int64N(end-start))
		}
	}
	for _, f := range froms {
		if d := consumerView(l, tbs, f); d != "" {
			r.fatalf("%s: %s", what, d)
		}
	}
	r.txn.checks++
	r.txn.aborts += len(l.AbortedTransactions(start, end))
	if !r.txn.inexact {
		r.txn.exact++
		if d := diffTxnState(l, replayTxns(tbs, nil), append(froms, end)); d != "" {
			r.fatalf("%s: %s", what, d)
		}
	}
}
