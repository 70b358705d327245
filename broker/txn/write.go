package txn

import (
	"github.com/twmb/franz-go/pkg/kerr"
)

// RecordWritten reports that the record of token is committed in the
// partition (appended and replicated to every in-sync replica, as an
// acks=all produce). The id's state becomes the record's; what waited on
// it follows: the request's answer, the markers of a decided transaction,
// the removal of an expired id. A token that is not in flight (already
// reported, or issued before the last unload) is ignored.
func (t *Table) RecordWritten(now int64, token Token) Ready {
	t.begin()
	if x := t.takeWrite(token); x != nil {
		t.committed(now, x, x.w)
	}
	return t.end(now)
}

// RecordFailed reports that the record of token was not written; code is
// the append's error (REQUEST_TIMED_OUT when no answer came in time). The
// id's state stays as it was: a request waiting on the record is answered
// with the retriable coordinator error Kafka maps the append error to
// (COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR, UNKNOWN_SERVER_ERROR; see
// mapAppendError); the coordinator's own writes are tried again after
// WriteBackoff. If the record landed after all (a timeout), nothing was
// acknowledged or sent on it, and the id's next record supersedes it; a
// successor that loads it before then carries it out (the client's retry
// then finds it done or under way).
func (t *Table) RecordFailed(now int64, token Token, code int16) Ready {
	t.begin()
	if x := t.takeWrite(token); x != nil {
		w := x.w
		x.w = nil
		mapped := mapAppendError(code)
		t.rd.note("%s: %s record failed (%s): %s stays %s", x.id, w.kind, codeName(code), x.id, x.m.state)
		if w.reply != nil {
			t.answer(w.reply.answer(mapped, -1, -1))
		} else {
			x.fails++
			x.retryAt = now + retryIn(t.cfg.WriteBackoff, x.fails)
		}
	}
	return t.end(now)
}

// takeWrite returns the id whose write token is, or nil.
func (t *Table) takeWrite(token Token) *txn {
	x := t.writes[token]
	if x == nil {
		return nil
	}
	delete(t.writes, token)
	return x
}

// committed applies w, now durable, to x.
func (t *Table) committed(now int64, x *txn, w *write) {
	x.w = nil
	if w.tombstone {
		delete(t.txns, x.id)
		t.rd.note("%s: expired and removed", x.id)
		return
	}
	x.m, x.durable = w.to, true
	x.fails, x.retryAt = 0, 0
	switch w.kind {
	case wInit:
		t.answer(w.reply.answer(0, x.m.pid, x.m.epoch))
	case wFenceInit:
		// Kafka answers the InitProducerId that aborted an open
		// transaction with CONCURRENT_TRANSACTIONS: the client retries,
		// which bumps the epoch again once the abort completes.
		t.answer(w.reply.answer(kerr.ConcurrentTransactions.Code, -1, -1))
	case wAdd:
		t.answer(w.reply.answer(0, -1, -1))
	case wEnd:
		pid, epoch := nextForClient(x.m)
		t.answer(w.reply.answer(0, pid, epoch))
	case wTimeout:
		t.rd.note("%s: timed out, aborting at epoch %d", x.id, x.m.epoch)
	}
	if x.m.state == PrepareCommit || x.m.state == PrepareAbort {
		t.startCompletion(now, x)
	} else {
		x.c = nil
	}
}

// codeName is a Kafka error code's name, for notes.
func codeName(code int16) string {
	if code == 0 {
		return "NONE"
	}
	if e, ok := kerr.ErrorForCode(code).(*kerr.Error); ok {
		return e.Message
	}
	return "UNKNOWN"
}
