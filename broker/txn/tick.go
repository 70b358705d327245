package txn

// Tick applies every deadline at or before now, for each id without a
// record in flight:
//
//  1. Ongoing whose transaction.timeout.ms has passed (now > start +
//     timeout, as Kafka's check): aborted with an epoch bump (see fence),
//     which fences the producer that went quiet.
//  2. Prepare*: a marker in flight for MarkerTimeoutMs without a report
//     counts as failed; markers whose retry is due are sent again; with no
//     marker pending, a Complete* whose write failed is written again.
//  3. Empty, CompleteCommit, CompleteAbort not updated for
//     transactional.id.expiration.ms: a tombstone is written, and the id is
//     removed once it is committed.
//
// A write of the coordinator's own that failed waits WriteBackoff before 1
// or 3 is tried again. Kafka runs 1 every 10 s and 3 every hour
// (transaction.abort.timed.out.transaction.cleanup.interval.ms,
// transaction.remove.expired.transaction.cleanup.interval.ms); here they
// happen at the deadline, which NextDeadline gives. Calling Tick early,
// late or more than once is harmless. Tick and NextDeadline walk every id.
func (t *Table) Tick(now int64) Ready {
	t.begin()
	if t.phase == active {
		for _, id := range t.sortedIDs() {
			t.tickTxn(now, t.txns[id])
		}
	}
	return t.end(now)
}

func (t *Table) tickTxn(now int64, x *txn) {
	if x.w != nil {
		return
	}
	switch x.m.state {
	case Ongoing:
		if now > x.m.startMs+int64(x.m.timeoutMs) && now >= x.retryAt {
			t.fence(now, x, wTimeout, nil)
		}
	case PrepareCommit, PrepareAbort:
		if x.c == nil {
			return
		}
		for _, ms := range x.c.pending {
			if ms.inflight != 0 && now >= ms.sentAt+t.cfg.MarkerTimeoutMs {
				t.markerRetry(now, ms)
			}
		}
		t.sendDue(now, x)
		t.maybeComplete(now, x)
	case Empty, CompleteCommit, CompleteAbort:
		if now >= x.m.updateMs+t.cfg.IDExpirationMs && now >= x.retryAt {
			t.write(x, wExpire, x.m.clone(), true, nil)
		}
	}
}

// NextDeadline is the earliest now at which Tick would do something, or -1
// if nothing is due ever without another input. Tick(t) for t <
// NextDeadline() does nothing.
func (t *Table) NextDeadline() int64 {
	next := int64(-1)
	at := func(d int64) {
		if next < 0 || d < next {
			next = d
		}
	}
	if t.phase != active {
		return -1
	}
	if t.idsLow() && !t.idAsked {
		at(t.idRetryAt)
	}
	for _, x := range t.txns {
		if x.w != nil {
			continue
		}
		switch x.m.state {
		case Ongoing:
			at(max(x.m.startMs+int64(x.m.timeoutMs)+1, x.retryAt))
		case PrepareCommit, PrepareAbort:
			if x.c == nil {
				continue
			}
			if len(x.c.pending) == 0 {
				at(x.retryAt)
			}
			for _, ms := range x.c.pending {
				if ms.inflight != 0 {
					at(ms.sentAt + t.cfg.MarkerTimeoutMs)
				} else {
					at(ms.retryAt)
				}
			}
		case Empty, CompleteCommit, CompleteAbort:
			at(max(x.m.updateMs+t.cfg.IDExpirationMs, x.retryAt))
		}
	}
	return next
}

// Producer ids. The broker allocates them in blocks through the controller
// (AllocateProducerIds, KIP-730); the table keeps a stock, asks for more
// (Ready.FetchProducerIDs) when it runs low, and answers a request that
// needs one while it has none with COORDINATOR_LOAD_IN_PROGRESS, as Kafka's
// RPCProducerIdManager does while its next block is on the way.

// SupplyProducerIDs adds the block [first, first+count) to the stock, and
// answers the outstanding ask.
func (t *Table) SupplyProducerIDs(now int64, first int64, count int64) Ready {
	t.begin()
	if count > 0 {
		t.ids = append(t.ids, idBlock{first, first + count})
		t.idBlock = count
	}
	t.idAsked, t.idFails, t.idRetryAt = false, 0, 0
	return t.end(now)
}

// ProducerIDsFailed answers the outstanding ask: no block came. The next
// ask waits WriteBackoff.
func (t *Table) ProducerIDsFailed(now int64) Ready {
	t.begin()
	t.idAsked = false
	t.idFails++
	t.idRetryAt = now + retryIn(t.cfg.WriteBackoff, t.idFails)
	return t.end(now)
}

// idBlock is a range [next, end) of producer ids not yet used.
type idBlock struct{ next, end int64 }

func (t *Table) idsLeft() int64 {
	var n int64
	for _, b := range t.ids {
		n += b.end - b.next
	}
	return n
}

// idsLow: a tenth or less of the last block is left (Kafka's
// RPCProducerIdManager prefetches at 90% used), or nothing.
func (t *Table) idsLow() bool { return t.idsLeft() <= t.idBlock/10 }

func (t *Table) takeID() (int64, bool) {
	for len(t.ids) > 0 {
		b := &t.ids[0]
		if b.next < b.end {
			id := b.next
			b.next++
			return id, true
		}
		t.ids = t.ids[1:]
	}
	return 0, false
}

// maybeAskIDs asks for producer ids when the stock is low; only an active
// table asks, and only one ask is outstanding at a time.
func (t *Table) maybeAskIDs(now int64) {
	if t.phase == active && !t.idAsked && now >= t.idRetryAt && t.idsLow() {
		t.idAsked = true
		t.rd.FetchProducerIDs = true
	}
}
