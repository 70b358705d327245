package txn

import (
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
)

// Markers. Once Prepare* is committed (or loaded), the decision is sent to
// every partition of the transaction as a marker; each partition is
// reported done (MarkersWritten) or failed (MarkerFailed), and a failed or
// unreported one is sent again after MarkerBackoff, forever: a decided
// commit is never given up (TransactionMarkerChannelManager retries too).
// When no partition is left, Complete* is written.

// startCompletion starts sending x's markers: x is in Prepare*, durable.
func (t *Table) startCompletion(now int64, x *txn) {
	c := &completion{base: t.nextMarker + 1, pending: map[TopicPartition]*markerState{}}
	for _, p := range x.m.parts {
		c.pending[p] = &markerState{}
	}
	x.c = c
	t.sendDue(now, x)
	t.maybeComplete(now, x)
}

// sendDue sends x's markers for the partitions with none in flight whose
// retry is due, as one Marker.
func (t *Table) sendDue(now int64, x *txn) {
	var due []TopicPartition
	for p, ms := range x.c.pending {
		if ms.inflight == 0 && now >= ms.retryAt {
			due = append(due, p)
		}
	}
	if len(due) == 0 {
		return
	}
	slices.SortFunc(due, comparePartitions)
	t.nextMarker++
	for _, p := range due {
		ms := x.c.pending[p]
		ms.inflight, ms.sentAt = t.nextMarker, now
	}
	t.rd.Markers = append(t.rd.Markers, Marker{
		ID:                 MarkerID{TxnID: x.id, Seq: t.nextMarker},
		ProducerID:         x.m.pid,
		ProducerEpoch:      x.m.epoch,
		Commit:             x.m.state == PrepareCommit,
		CoordinatorEpoch:   t.coordEpoch,
		TransactionVersion: int8(min(x.m.tv, 2)),
		Partitions:         due,
	})
}

// MarkersWritten reports that the marker sent as id is written to each of
// partitions, or is not needed there: a partition whose topic was deleted
// counts as done (Kafka skips partitions without a leader endpoint for
// that reason). A report for another transaction (an older id), or for a
// partition already done, is ignored: any write of this transaction's
// marker to a partition is as good as another.
func (t *Table) MarkersWritten(now int64, id MarkerID, partitions []TopicPartition) Ready {
	t.begin()
	if x := t.completionFor(id); x != nil {
		for _, p := range partitions {
			delete(x.c.pending, p)
		}
		t.maybeComplete(now, x)
	}
	return t.end(now)
}

// MarkerFailed reports that the marker sent as id was not written to
// partitions; code is the partition's WriteTxnMarkers error, or
// REQUEST_TIMED_OUT when no answer came (the leader is unknown, the
// connection failed). It is sent again after MarkerBackoff, except where the
// error says the partition needs no marker from this coordinator
// (TransactionMarkerRequestCompletionHandler):
//
//   - UNSUPPORTED_FOR_MESSAGE_FORMAT, UNSUPPORTED_VERSION: the producer could
//     not have written there; done, as in Kafka.
//   - INVALID_PRODUCER_EPOCH: the partition has seen a newer epoch of the
//     producer, so it holds no open transaction at this one; and
//     TRANSACTION_COORDINATOR_FENCED: a newer coordinator has written there.
//     Kafka stops sending this transaction's markers altogether and leaves
//     it in Prepare* until the partition is loaded again; here the
//     partition counts as done, so the transaction completes (a forced
//     exit; a fenced coordinator's Complete* write fails anyway).
//
// A report for a partition that is not in flight under id is ignored.
func (t *Table) MarkerFailed(now int64, id MarkerID, partitions []TopicPartition, code int16) Ready {
	t.begin()
	if x := t.completionFor(id); x != nil {
		for _, p := range partitions {
			ms := x.c.pending[p]
			if ms == nil || ms.inflight != id.Seq {
				continue
			}
			switch code {
			case kerr.UnsupportedForMessageFormat.Code, kerr.UnsupportedVersion.Code,
				kerr.InvalidProducerEpoch.Code, kerr.TransactionCoordinatorFenced.Code:
				t.rd.note("%s: marker for %s refused (%s): counted as done", x.id, p, codeName(code))
				delete(x.c.pending, p)
			default:
				t.markerRetry(now, ms)
			}
		}
		t.maybeComplete(now, x)
	}
	return t.end(now)
}

// markerRetry schedules the next sending of a failed or unanswered marker.
func (t *Table) markerRetry(now int64, ms *markerState) {
	ms.inflight = 0
	ms.fails++
	ms.retryAt = now + retryIn(t.cfg.MarkerBackoff, ms.fails)
}

// completionFor is the id whose current completion sent id, or nil.
func (t *Table) completionFor(id MarkerID) *txn {
	x := t.txns[id.TxnID]
	if x == nil || x.c == nil || id.Seq < x.c.base || id.Seq > t.nextMarker {
		return nil
	}
	return x
}

// maybeComplete writes x's Complete* once no marker is pending
// (TransactionMetadata.prepareComplete).
func (t *Table) maybeComplete(now int64, x *txn) {
	if x.c == nil || len(x.c.pending) > 0 || x.w != nil || now < x.retryAt {
		return
	}
	m := x.m
	to := m.clone()
	to.state = CompleteAbort
	if m.state == PrepareCommit {
		to.state = CompleteCommit
	}
	if m.tv >= 2 {
		to.prevPid, to.lastEpoch = m.pid, m.epoch
		if m.nextPid >= 0 { // the epoch overflowed: the new producer id starts
			to.pid, to.epoch = m.nextPid, 0
		}
	}
	to.nextPid, to.parts, to.updateMs = -1, nil, now
	t.write(x, wComplete, to, false, nil)
}
