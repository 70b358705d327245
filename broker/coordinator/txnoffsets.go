package coordinator

import (
	"context"
	"time"

	"github.com/fjordlog/fjord/broker/replica"
	"github.com/fjordlog/fjord/storage"
	"github.com/fjordlog/fjord/storage/recordbatch"
)

// Transactional offset commits (TxnOffsetCommit, Kafka's
// pendingTransactionalOffsetCommits). A consume-transform-produce
// application commits its consumed offsets inside its transaction: the
// commit is appended to the group's offsets partition as a transactional
// batch of the producer, and stays out of the table (OffsetFetch does not
// see it) until the transaction's marker lands on that partition: a commit
// marker applies it, an abort marker drops it. Pending commits are kept
// per offsets partition and producer id in log order, and a marker
// settles those before it in the log; so does a load, replaying the
// partition's batches and markers in order.
//
// Invariant: for a loaded partition, mu.txnPending[pi] holds, per
// producer, exactly the transactional offset commits in its log that no
// later marker of that producer has settled, in log order.

// txnCommit is one transactional offset commit awaiting its marker.
type txnCommit struct {
	end   int64 // log offset after its batch
	group string
	recs  []recordbatch.KV
}

// TxnCommit appends offs for group as producer pid's (at epoch)
// transactional commit and calls done once they are committed to the
// offsets partition's in-sync replicas, or with the error that stopped
// them. They become the group's committed offsets only when the
// transaction commits (TxnCompleted).
func (c *Coordinator) TxnCommit(group string, pid int64, epoch int16, offs map[TopicPartition]*Committed, done func(error)) {
	o := c.offsets
	pi := o.partitionFor(group)
	p, err := o.leader(pi)
	if err != nil {
		done(err)
		return
	}
	recs := make([]recordbatch.KV, 0, len(offs))
	for tp, cm := range offs {
		kv := recordbatch.KV{Key: offsetKey(group, tp)}
		if cm != nil {
			kv.Value = offsetValue(*cm)
		}
		recs = append(recs, kv)
	}
	if len(recs) == 0 {
		done(nil)
		return
	}
	now := time.Now().UnixMilli()
	batch := recordbatch.BuildTxn(recs, now, pid, epoch)
	info, err := recordbatch.Validate(batch, 0)
	var res storage.AppendResult
	var v *replica.View
	o.mu.Lock()
	if err == nil {
		res, v, err = p.AppendCoordinatorAsLeader(batch, info, now)
		if err == nil {
			o.addTxnLocked(pi, pid, txnCommit{res.LastOffset + 1, group, recs})
		}
	}
	o.mu.Unlock()
	if err != nil {
		done(err)
		return
	}
	c.host.Go(func() {
		err := p.Flush()
		if err == nil {
			expire := time.NewTimer(commitTimeout)
			err = p.WaitCommitted(context.Background(), res.LastOffset+1, v.LeaderEpoch, expire.C)
			expire.Stop()
		}
		done(err)
	})
}

// TxnCompleted settles producer pid's transactional offset commits on
// offsets partition pi that precede its marker at markerOffset: applied
// when the transaction committed, dropped when it aborted. The broker
// calls it once the marker is committed.
func (c *Coordinator) TxnCompleted(pi int32, pid int64, markerOffset int64, commit bool) {
	o := c.offsets
	o.mu.Lock()
	defer o.mu.Unlock()
	o.settleLocked(pi, pid, markerOffset, commit)
}

// addTxnLocked records a transactional commit of pid on pi, in log order.
// The group of a commit replayed from the log is read from its records.
// REQUIRES: o.mu held.
func (o *offsetStore) addTxnLocked(pi int32, pid int64, tc txnCommit) {
	if tc.group == "" && len(tc.recs) > 0 {
		tc.group = groupOfKey(tc.recs[0].Key)
	}
	if o.mu.txnPending[pi] == nil {
		o.mu.txnPending[pi] = map[int64][]txnCommit{}
	}
	o.mu.txnPending[pi][pid] = append(o.mu.txnPending[pi][pid], tc)
}

// settleLocked applies or drops pid's pending commits on pi before offset
// at. REQUIRES: o.mu held.
func (o *offsetStore) settleLocked(pi int32, pid int64, at int64, commit bool) {
	q := o.mu.txnPending[pi][pid]
	n := 0
	for n < len(q) && q[n].end <= at {
		if commit {
			for _, r := range q[n].recs {
				o.applyLocked(r.Key, r.Value)
			}
		}
		n++
	}
	if n == len(q) {
		delete(o.mu.txnPending[pi], pid)
		return
	}
	o.mu.txnPending[pi][pid] = q[n:]
}

// PendingTxnOffset reports whether group has a transactional commit for
// tp not yet settled by its marker (OffsetFetch's UNSTABLE_OFFSET_COMMIT,
// KIP-447).
func (c *Coordinator) PendingTxnOffset(group string, tp TopicPartition) bool {
	o := c.offsets
	pi := o.partitionFor(group)
	key := string(offsetKey(group, tp))
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, q := range o.mu.txnPending[pi] {
		for _, tc := range q {
			if tc.group != group {
				continue
			}
			for _, r := range tc.recs {
				if string(r.Key) == key {
					return true
				}
			}
		}
	}
	return false
}
