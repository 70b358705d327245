package txn

import (
	"github.com/twmb/franz-go/pkg/kerr"
)

// EndTxn handles an EndTxn (TransactionCoordinator.endTransaction from a
// client). From Ongoing it writes PrepareCommit or PrepareAbort; once that
// record is committed the decision is final, the answer goes out and the
// markers are sent; when every marker is written, Complete* is written.
//
// Transactions v2 (EndTxn v5, KIP-890 part 2): the Prepare* record bumps
// the epoch (lastEpoch keeps the old one) and the answer carries the new
// one; at an exhausted epoch it also allocates the next producer id, which
// the Complete* record takes up at epoch 0 (the answer carries it). A v2
// retry quotes the epoch before the bump, so in Prepare* and Complete* the
// request's epoch must be the state's minus one (or, after a rotation, the
// previous producer id at epoch 32766); the same epoch there means the
// next EndTxn, and is fenced.
//
// Retries of an end whose answer was lost: the same decision in Complete*
// is answered NONE, in Prepare* CONCURRENT_TRANSACTIONS; the other decision
// is INVALID_TXN_STATE.
func (t *Table) EndTxn(now int64, req EndRequest, tok any) Ready {
	t.begin()
	r := &reply{token: tok, api: apiEnd, version: req.Version}
	if code, pid, epoch := t.endTxn(now, req, r); code >= 0 {
		t.answer(r.answer(code, pid, epoch))
	}
	return t.end(now)
}

func (t *Table) endTxn(now int64, req EndRequest, r *reply) (int16, int64, int16) {
	if req.TxnID == "" {
		return kerr.InvalidRequest.Code, -1, -1
	}
	if code := t.phaseError(); code != 0 {
		return code, -1, -1
	}
	x := t.txns[req.TxnID]
	if x == nil {
		return kerr.InvalidProducerIDMapping.Code, -1, -1
	}
	m := x.m
	pid, epoch := req.ProducerID, req.ProducerEpoch
	v2 := m.tv >= 2 // the state was written by a transactions-v2 end
	// A v2 retry after the end rotated the producer id (epoch overflow).
	retryOnOverflow := v2 && m.prevPid == pid && epoch == maxEpoch-1 && m.epoch == 0
	// A v2 retry after the end bumped the epoch.
	retryOnBump := v2 && int32(m.epoch) == int32(epoch)+1
	validEpoch := epoch == m.epoch
	if v2 {
		switch m.state {
		case PrepareCommit, PrepareAbort:
			validEpoch = retryOnBump
		case CompleteCommit, CompleteAbort:
			validEpoch = retryOnBump || retryOnOverflow
		}
	}
	switch {
	case m.pid != pid && !retryOnOverflow:
		return kerr.InvalidProducerIDMapping.Code, -1, -1
	case !validEpoch:
		return kerr.ProducerFenced.Code, -1, -1
	case x.w != nil:
		return kerr.ConcurrentTransactions.Code, -1, -1
	}
	commit := req.Commit
	switch m.state {
	case Ongoing:
	case CompleteCommit, CompleteAbort:
		if commit == (m.state == CompleteCommit) {
			return 0, m.pid, m.epoch // a retry: done already
		}
		return kerr.InvalidTxnState.Code, -1, -1
	case PrepareCommit, PrepareAbort:
		if commit == (m.state == PrepareCommit) {
			return kerr.ConcurrentTransactions.Code, -1, -1 // a retry: under way
		}
		return kerr.InvalidTxnState.Code, -1, -1
	default: // Empty: nothing to end
		return kerr.InvalidTxnState.Code, -1, -1
	}

	to := m.clone()
	to.state, to.updateMs, to.nextPid, to.tv = PrepareAbort, now, -1, 0
	if commit {
		to.state = PrepareCommit
	}
	if req.Version >= 5 {
		to.tv = 2
		if epochExhausted(m.epoch) {
			next, ok := t.takeID()
			if !ok {
				return kerr.CoordinatorLoadInProgress.Code, -1, -1
			}
			to.nextPid = next
		}
		// A client never holds 32767 (see maxEpoch), but a log written
		// elsewhere might say so: then the epoch stays and the rotation
		// above moves on.
		if m.epoch < maxEpoch {
			to.epoch = m.epoch + 1
		}
		to.lastEpoch = m.epoch
	}
	t.write(x, wEnd, to, false, r)
	return parked, -1, -1
}

// nextForClient is the producer id and epoch an end's answer carries: the
// ones the producer uses for its next transaction.
func nextForClient(m meta) (int64, int16) {
	if m.tv >= 2 && m.nextPid >= 0 {
		// Kafka (at this writing) answers the current id and the bumped
		// epoch 32767 and takes up the new id only at Complete*; the
		// producer's next request would then quote a stale id. KIP-890
		// says the answer carries the id to use next, which a retry of
		// the end after Complete* gets as well.
		return m.nextPid, 0
	}
	return m.pid, m.epoch
}
