package txn

import (
	"github.com/twmb/franz-go/pkg/kerr"
)

// InitProducerID handles an InitProducerId with a transactional id
// (TransactionCoordinator.handleInitProducerId). The answer carries the
// producer id and epoch once the Empty record with them is committed. A
// new id gets a producer id from the stock (SupplyProducerIDs) at epoch 0;
// a known one gets its epoch bumped, which fences every older producer,
// or, when the epoch is exhausted, a new producer id at epoch 0.
//
// A transaction left Ongoing is aborted first, with an epoch bump (Kafka's
// PrepareEpochFence): once the PrepareAbort record is committed the answer
// is CONCURRENT_TRANSACTIONS, and the client's retry gets the new epoch
// after the abort completes (before, it gets CONCURRENT_TRANSACTIONS too).
//
// KIP-360 (v3+): a producer that passes its current producer id and epoch
// keeps the producer id; a retry quoting the epoch before the last bump
// gets the current one again; any other epoch is fenced.
func (t *Table) InitProducerID(now int64, req InitRequest, tok any) Ready {
	t.begin()
	r := &reply{token: tok, api: apiInit, version: req.Version}
	if code := t.initProducerID(now, req, r); code >= 0 {
		t.answer(r.answer(code, -1, -1))
	}
	return t.end(now)
}

// parked is returned by request handlers whose answer waits for a record.
const parked = -2

func (t *Table) initProducerID(now int64, req InitRequest, r *reply) int16 {
	switch {
	case req.TxnID == "":
		return kerr.InvalidRequest.Code
	case (req.ProducerID < 0) != (req.ProducerEpoch < 0):
		return kerr.InvalidRequest.Code // KafkaApis: one of them without the other
	case req.TimeoutMs <= 0 || req.TimeoutMs > t.cfg.MaxTimeoutMs:
		return kerr.InvalidTransactionTimeout.Code
	}
	if code := t.phaseError(); code != 0 {
		return code
	}
	expected := req.ProducerID >= 0
	x := t.txns[req.TxnID]
	if x == nil {
		pid, ok := t.takeID()
		if !ok {
			// Kafka's RPCProducerIdManager: "Producer ID block is not
			// available yet", retriable.
			return kerr.CoordinatorLoadInProgress.Code
		}
		x = &txn{id: req.TxnID, m: meta{
			pid: pid, prevPid: -1, nextPid: -1, epoch: -1, lastEpoch: -1,
			timeoutMs: req.TimeoutMs, state: Empty, startMs: -1, updateMs: now,
		}}
		t.txns[req.TxnID] = x
	}
	if x.w != nil {
		return kerr.ConcurrentTransactions.Code
	}
	if expected && !validProducerID(x.m, req.ProducerID, req.ProducerEpoch) {
		return kerr.ProducerFenced.Code
	}
	switch x.m.state {
	case PrepareCommit, PrepareAbort:
		return kerr.ConcurrentTransactions.Code
	case Ongoing:
		// The epoch bumped here is never handed out: the client retries
		// and bumps it again (which rotates the producer id if this bump
		// exhausted it).
		t.fence(now, x, wFenceInit, r)
		return parked
	}
	to := x.m.clone()
	if epochExhausted(x.m.epoch) && (!expected || req.ProducerEpoch == x.m.epoch) {
		pid, ok := t.takeID()
		if !ok {
			return kerr.CoordinatorLoadInProgress.Code
		}
		to.pid, to.epoch, to.lastEpoch = pid, 0, -1
		if expected {
			to.lastEpoch = x.m.epoch // a retry after the rotation quotes it
		}
	} else {
		switch {
		case !expected:
			to.epoch, to.lastEpoch = x.m.epoch+1, -1
		case x.m.epoch < 0 || req.ProducerEpoch == x.m.epoch:
			to.epoch, to.lastEpoch = x.m.epoch+1, x.m.epoch
		case req.ProducerEpoch == x.m.lastEpoch:
			// A retry of a bump whose answer was lost. No other producer
			// has initialized since: that would have reset lastEpoch.
		default:
			return kerr.ProducerFenced.Code
		}
	}
	to.prevPid, to.nextPid = x.m.pid, -1
	to.timeoutMs, to.state, to.parts, to.startMs, to.updateMs, to.tv = req.TimeoutMs, Empty, nil, -1, now, 0
	t.write(x, wInit, to, false, r)
	return parked
}

// validProducerID is Kafka's check of the producer id an InitProducerId
// quotes: the id is new (nothing to fence), or the producer id is current,
// or it is the previous one at an exhausted epoch (a retry of the bump
// that rotated it).
func validProducerID(m meta, pid int64, epoch int16) bool {
	return m.epoch < 0 || pid == m.pid || (pid == m.prevPid && epochExhausted(epoch))
}

// fence aborts x's Ongoing transaction with an epoch bump, which fences its
// producer: the PrepareAbort record carries the bumped epoch, and so do the
// markers (TransactionMetadata.prepareFenceProducerEpoch). The bump is
// transactions-v1 style (lastEpoch -1, client version 0), so a
// transactions-v2 producer is fenced too, as in Kafka. An epoch already at
// 32767 is never held by a client (see maxEpoch) and is kept.
func (t *Table) fence(now int64, x *txn, kind writeKind, r *reply) {
	to := x.m.clone()
	to.state = PrepareAbort
	if to.epoch < maxEpoch {
		to.epoch++
	}
	to.lastEpoch, to.nextPid, to.tv, to.updateMs = -1, -1, 0, now
	t.write(x, kind, to, false, r)
}
