package txn

import (
	"fmt"
	"maps"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
)

// phase is the table's role for its partition.
type phase int8

const (
	// unloaded: not the coordinator (never was, or resigned): every
	// request gets NOT_COORDINATOR.
	unloaded phase = iota
	// loading: the partition's log is being read back: every request gets
	// COORDINATOR_LOAD_IN_PROGRESS.
	loading
	// active: serving.
	active
)

func (p phase) String() string {
	return [...]string{"unloaded", "loading", "active"}[p]
}

// Table is the transaction coordinator of one __transaction_state
// partition: one state machine per transactional id whose records live
// there. Not safe for concurrent use: its owner makes one call at a time.
//
// Steps: a request is validated in Kafka's order; if it changes the state,
// the target state becomes the id's write (Kafka's pendingState) and its
// record goes out in Ready.Appends; the answer waits in the write until the
// caller reports the record written (RecordWritten), then the state becomes
// the target and the answer goes out; a failed write (RecordFailed) leaves
// the state as it was and answers with a retriable error. Tick does the
// coordinator's own steps (timeouts, expiration, retries).
//
// Invariants (checkInvariants, run by the tests after every step):
//   - At most one write per id, and writes holds exactly the ids' writes.
//   - Ongoing has >= 1 partition; Empty and Complete* have none; Empty has
//     startMs -1. Dead and PrepareEpochFence never appear.
//   - A completion (Prepare* with markers) exists only in Prepare*; its
//     pending partitions are a subset of the transaction's; a marker in
//     flight has a sequence issued for this completion.
//   - Not active: no writes and no completions; unloaded: no ids.
//   - A write's target is a valid successor of the current state (Kafka's
//     validPreviousStates).
//
// Alternatives rejected: timers per id (Kafka's scheduler and purgatory)
// need callbacks and cancellation; instead each deadline is a field that
// Tick compares with now and NextDeadline takes the minimum of. Callbacks
// for producer ids would block the owner on the controller; instead ids
// come in as an input (SupplyProducerIDs). Ids are iterated in sorted
// order wherever the order shows in the output, so the Ready of every call
// is a function of the calls made.
type Table struct {
	cfg       Config
	partition int32 // the __transaction_state partition, for notes
	phase     phase
	// coordEpoch is the partition's leader epoch at the load: the
	// coordinator epoch in every marker.
	coordEpoch int32

	txns map[string]*txn
	// writes maps every record in flight to its id.
	writes map[Token]*txn

	nextToken  Token  // last token issued; never reset
	nextMarker uint64 // last marker sequence issued; never reset

	// ids are the producer ids supplied and not used, in order.
	ids       []idBlock
	idBlock   int64 // size of the last block supplied
	idAsked   bool  // a FetchProducerIDs is outstanding
	idFails   int   // failed asks in a row
	idRetryAt int64 // no ask before this

	rd *Ready // the current call's output
}

// NewTable returns the unloaded table of __transaction_state partition
// partition. It panics if cfg fails Validate.
func NewTable(cfg Config, partition int32) *Table {
	cfg = cfg.withDefaults()
	if err := cfg.Validate(); err != nil {
		panic(fmt.Sprintf("txn: NewTable(%d): %v", partition, err))
	}
	return &Table{cfg: cfg, partition: partition, txns: map[string]*txn{}, writes: map[Token]*txn{}}
}

// Partition is the __transaction_state partition the table serves.
func (t *Table) Partition() int32 { return t.partition }

// CoordinatorEpoch is the epoch of the current (or last) load.
func (t *Table) CoordinatorEpoch() int32 { return t.coordEpoch }

// Loading reports whether the table is loading; Active whether it serves.
func (t *Table) Loading() bool { return t.phase == loading }

// Active reports whether the table serves requests.
func (t *Table) Active() bool { return t.phase == active }

// Len is the number of transactional ids held.
func (t *Table) Len() int { return len(t.txns) }

// begin starts a call's output.
func (t *Table) begin() {
	t.rd = &Ready{}
}

// end returns the call's output, asking for producer ids if the stock is
// low.
func (t *Table) end(now int64) Ready {
	t.maybeAskIDs(now)
	rd := *t.rd
	t.rd = nil
	return rd
}

// phaseError is the code for a request the table cannot serve now, or 0.
func (t *Table) phaseError() int16 {
	switch t.phase {
	case unloaded:
		return kerr.NotCoordinator.Code
	case loading:
		return kerr.CoordinatorLoadInProgress.Code
	}
	return 0
}

// sortedIDs returns the ids in order, for deterministic iteration.
func (t *Table) sortedIDs() []string {
	return slices.Sorted(maps.Keys(t.txns))
}

// answer adds an answer to the output.
func (t *Table) answer(a Answer) {
	t.rd.Answers = append(t.rd.Answers, a)
}

// write makes to the target of x's one write and asks for its record.
func (t *Table) write(x *txn, kind writeKind, to meta, tombstone bool, r *reply) {
	if x.w != nil {
		panic(fmt.Sprintf("txn: %s: a second write while %s is in flight", x.id, x.w.kind))
	}
	t.nextToken++
	w := &write{token: t.nextToken, kind: kind, to: to, tombstone: tombstone, reply: r}
	x.w = w
	t.writes[w.token] = x
	a := Append{Token: w.token, TxnID: x.id, Key: encodeKey(x.id)}
	if !tombstone {
		v := int16(1)
		if t.cfg.LegacyValues {
			v = 0
		}
		a.Meta = to.value(v)
		a.Value = a.Meta.AppendTo(nil)
	}
	t.rd.Appends = append(t.rd.Appends, a)
}
