package txn

import (
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
)

// AddPartitions handles one transaction of an AddPartitionsToTxn
// (TransactionCoordinator.handleAddPartitionsToTransaction, and
// handleVerifyPartitionsInTransaction for VerifyOnly). Added partitions are
// acknowledged once the Ongoing record that holds them is committed;
// partitions already in an Ongoing transaction are acknowledged at once.
// VerifyOnly answers at once, per partition: NONE if it is in the
// transaction, TRANSACTION_ABORTABLE if not (KIP-890).
//
// Unlike Kafka, a request without partitions is answered NONE without a
// record (Kafka writes an Ongoing record with no partitions).
func (t *Table) AddPartitions(now int64, req AddPartitionsRequest, tok any) Ready {
	t.begin()
	r := &reply{token: tok, api: apiAdd, version: req.Version, parts: distinct(req.Partitions)}
	if req.VerifyOnly {
		t.answer(t.verify(req, r))
	} else if code := t.add(now, req.TxnID, req.ProducerID, req.ProducerEpoch, r); code >= 0 {
		t.answer(r.answer(code, -1, -1))
	}
	return t.end(now)
}

// AddOffsets handles an AddOffsetsToTxn: it adds the group's
// __consumer_offsets partition to the transaction, as AddPartitions does.
func (t *Table) AddOffsets(now int64, req AddOffsetsRequest, tok any) Ready {
	t.begin()
	r := &reply{token: tok, api: apiOffsets, version: req.Version,
		parts: []TopicPartition{{OffsetsTopic, req.OffsetsPartition}}}
	if code := t.add(now, req.TxnID, req.ProducerID, req.ProducerEpoch, r); code >= 0 {
		t.answer(r.answer(code, -1, -1))
	}
	return t.end(now)
}

func (t *Table) add(now int64, id string, pid int64, epoch int16, r *reply) int16 {
	if id == "" {
		return kerr.InvalidRequest.Code
	}
	if code := t.phaseError(); code != 0 {
		return code
	}
	x := t.txns[id]
	switch {
	case x == nil || x.m.pid != pid:
		return kerr.InvalidProducerIDMapping.Code
	case x.m.epoch != epoch:
		return kerr.ProducerFenced.Code
	case x.w != nil:
		return kerr.ConcurrentTransactions.Code
	case x.m.state == PrepareCommit || x.m.state == PrepareAbort:
		return kerr.ConcurrentTransactions.Code
	case x.m.state == Ongoing && subset(r.parts, x.m.parts), len(r.parts) == 0:
		return 0
	}
	to := x.m.clone()
	if x.m.state != Ongoing { // Empty, CompleteCommit, CompleteAbort: a new transaction
		to.startMs = now
	}
	to.parts = union(x.m.parts, r.parts)
	to.state, to.updateMs, to.tv, to.nextPid = Ongoing, now, 0, -1
	t.write(x, wAdd, to, false, r)
	return parked
}

// verify is VerifyOnly. It does not look at a write in flight: the leader
// asks again if its produce races an add (Kafka: "there is a final
// validation on the append to the log").
func (t *Table) verify(req AddPartitionsRequest, r *reply) Answer {
	all := func(code int16) Answer { return r.answer(code, -1, -1) }
	if req.TxnID == "" {
		return all(kerr.InvalidRequest.Code)
	}
	if code := t.phaseError(); code != 0 {
		return all(code)
	}
	x := t.txns[req.TxnID]
	switch {
	case x == nil || x.m.pid != req.ProducerID:
		return all(kerr.InvalidProducerIDMapping.Code)
	case x.m.epoch != req.ProducerEpoch:
		return all(kerr.ProducerFenced.Code)
	case x.m.state == PrepareCommit || x.m.state == PrepareAbort:
		return all(kerr.ConcurrentTransactions.Code)
	}
	a := all(0)
	for i := range a.Partitions {
		if _, ok := slices.BinarySearchFunc(x.m.parts, a.Partitions[i].TopicPartition, comparePartitions); !ok {
			a.Partitions[i].Code = kerr.TransactionAbortable.Code
		}
	}
	return a
}

// distinct returns ps without repeats, in first-seen order.
func distinct(ps []TopicPartition) []TopicPartition {
	out := make([]TopicPartition, 0, len(ps))
	seen := make(map[TopicPartition]bool, len(ps))
	for _, p := range ps {
		if !seen[p] {
			seen[p] = true
			out = append(out, p)
		}
	}
	return out
}

// subset: every p of ps is in the sorted set of.
func subset(ps, of []TopicPartition) bool {
	for _, p := range ps {
		if _, ok := slices.BinarySearchFunc(of, p, comparePartitions); !ok {
			return false
		}
	}
	return true
}

// union is the sorted set of a (sorted) and b.
func union(a, b []TopicPartition) []TopicPartition {
	out := slices.Concat(a, b)
	slices.SortFunc(out, comparePartitions)
	return slices.Compact(out)
}
