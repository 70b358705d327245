package txn

import (
	"errors"
	"fmt"
	"slices"
)

// validPrevious is Kafka's TransactionState.validPreviousStates for the
// states this package writes: a write to the key state may start from the
// listed ones. (Expiration, a tombstone, starts from Empty or Complete*.)
var validPrevious = map[State][]State{
	Empty:          {Empty, CompleteCommit, CompleteAbort},
	Ongoing:        {Ongoing, Empty, CompleteCommit, CompleteAbort},
	PrepareCommit:  {Ongoing},
	PrepareAbort:   {Ongoing},
	CompleteCommit: {PrepareCommit},
	CompleteAbort:  {PrepareAbort},
}

// checkInvariants returns every broken invariant of the Table doc comment.
// Tests call it after each step; it is not on any request path.
func (t *Table) checkInvariants() error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }

	nw := 0
	for _, id := range t.sortedIDs() {
		x := t.txns[id]
		m := x.m
		if x.id != id {
			bad("%s: keyed as %s", x.id, id)
		}
		if x.w != nil {
			nw++
			if t.writes[x.w.token] != x {
				bad("%s: write %d not indexed", id, x.w.token)
			}
			if x.w.tombstone {
				if m.state != Empty && m.state != CompleteCommit && m.state != CompleteAbort {
					bad("%s: tombstone from %s", id, m.state)
				}
			} else if !slices.Contains(validPrevious[x.w.to.state], m.state) {
				bad("%s: write %s -> %s", id, m.state, x.w.to.state)
			}
			if x.w.reply == nil && (x.w.kind == wInit || x.w.kind == wAdd || x.w.kind == wEnd || x.w.kind == wFenceInit) {
				bad("%s: %s write without a request", id, x.w.kind)
			}
		}
		switch m.state {
		case Ongoing:
			if len(m.parts) == 0 {
				bad("%s: Ongoing without partitions", id)
			}
		case Empty, CompleteCommit, CompleteAbort:
			if len(m.parts) > 0 {
				bad("%s: %s with partitions %v", id, m.state, m.parts)
			}
			if m.state == Empty && m.startMs != -1 {
				bad("%s: Empty with start %d", id, m.startMs)
			}
		case PrepareCommit, PrepareAbort:
		default:
			bad("%s: state %s", id, m.state)
		}
		if !slices.IsSortedFunc(m.parts, comparePartitions) || len(slices.Compact(slices.Clone(m.parts))) != len(m.parts) {
			bad("%s: partitions not a sorted set: %v", id, m.parts)
		}
		if m.epoch < 0 && x.durable {
			bad("%s: durable at epoch %d", id, m.epoch)
		}
		if m.nextPid >= 0 && !((m.state == PrepareCommit || m.state == PrepareAbort) && m.tv >= 2) {
			bad("%s: next producer id %d in %s tv%d", id, m.nextPid, m.state, m.tv)
		}
		prep := m.state == PrepareCommit || m.state == PrepareAbort
		if x.c != nil {
			if !prep || t.phase != active {
				bad("%s: completion in %s (%s)", id, m.state, t.phase)
			}
			for p, ms := range x.c.pending {
				if _, ok := slices.BinarySearchFunc(m.parts, p, comparePartitions); !ok {
					bad("%s: pending marker for %s, not in the transaction", id, p)
				}
				if ms.inflight != 0 && (ms.inflight < x.c.base || ms.inflight > t.nextMarker) {
					bad("%s: marker %d in flight outside [%d, %d]", id, ms.inflight, x.c.base, t.nextMarker)
				}
			}
		} else if prep && t.phase == active && x.w == nil {
			bad("%s: %s without a completion", id, m.state)
		}
	}
	if nw != len(t.writes) {
		bad("%d ids with a write, %d writes", nw, len(t.writes))
	}
	if t.phase != active && len(t.writes) > 0 {
		bad("%d writes while %s", len(t.writes), t.phase)
	}
	if t.phase == unloaded && len(t.txns) > 0 {
		bad("%d ids while unloaded", len(t.txns))
	}
	return errors.Join(errs...)
}
