package txn

import (
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Describe is DescribeTransactions for one id
// (TransactionCoordinator.handleDescribeTransactions): the committed state
// (a record in flight does not show), and its partitions; in Prepare*, only
// those whose marker is not yet written. Errors: INVALID_REQUEST for an
// empty id, COORDINATOR_LOAD_IN_PROGRESS, NOT_COORDINATOR,
// TRANSACTIONAL_ID_NOT_FOUND.
func (t *Table) Describe(txnID string) kmsg.DescribeTransactionsResponseTransactionState {
	d := kmsg.NewDescribeTransactionsResponseTransactionState()
	d.TransactionalID = txnID
	d.ProducerID, d.ProducerEpoch = -1, -1
	if txnID == "" {
		d.ErrorCode = kerr.InvalidRequest.Code
		return d
	}
	if code := t.phaseError(); code != 0 {
		d.ErrorCode = code
		return d
	}
	x := t.txns[txnID]
	if x == nil {
		d.ErrorCode = kerr.TransactionalIDNotFound.Code
		return d
	}
	d.State = x.m.state.String()
	d.TimeoutMillis = x.m.timeoutMs
	d.StartTimestamp = x.m.startMs
	d.ProducerID, d.ProducerEpoch = x.m.pid, x.m.epoch
	for _, p := range x.partitions() {
		if n := len(d.Topics); n > 0 && d.Topics[n-1].Topic == p.Topic {
			d.Topics[n-1].Partitions = append(d.Topics[n-1].Partitions, p.Partition)
			continue
		}
		dt := kmsg.NewDescribeTransactionsResponseTransactionStateTopic()
		dt.Topic, dt.Partitions = p.Topic, []int32{p.Partition}
		d.Topics = append(d.Topics, dt)
	}
	return d
}

// partitions are the partitions Describe reports: in Prepare* those still
// waiting for their marker.
func (x *txn) partitions() []TopicPartition {
	if x.c == nil {
		return x.m.parts
	}
	var ps []TopicPartition
	for _, p := range x.m.parts {
		if x.c.pending[p] != nil {
			ps = append(ps, p)
		}
	}
	return ps
}

// ListFilter is a ListTransactions request's filters.
type ListFilter struct {
	// States: only ids in one of these states (by name); none: any.
	States []string
	// ProducerIDs: only ids with one of these producer ids; none: any.
	ProducerIDs []int64
	// DurationMs (v1+): >= 0: only transactions running longer than this
	// (now - start > DurationMs; an Empty id, start -1, always is).
	DurationMs int64
	// Match (v2+, the id pattern, which the broker compiles once): nil
	// matches every id.
	Match func(txnID string) bool
}

// ListResult is one table's part of a ListTransactions answer.
type ListResult struct {
	// Code is COORDINATOR_LOAD_IN_PROGRESS while loading (Kafka answers
	// the whole request so when any partition loads) or NOT_COORDINATOR
	// when unloaded (the broker leaves the table out).
	Code int16
	// States are the matching ids, sorted by id.
	States []kmsg.ListTransactionsResponseTransactionState
	// UnknownStateFilters are the filter states that name no state.
	UnknownStateFilters []string
}

// List is ListTransactions over this table
// (TransactionStateManager.listTransactionStates).
func (t *Table) List(now int64, f ListFilter) ListResult {
	var res ListResult
	if res.Code = t.phaseError(); res.Code != 0 {
		return res
	}
	var states []State
	for _, name := range f.States {
		s, err := kmsg.ParseTransactionState(name)
		if err != nil || s.String() != name {
			res.UnknownStateFilters = append(res.UnknownStateFilters, name)
			continue
		}
		states = append(states, s)
	}
	for _, id := range t.sortedIDs() {
		x := t.txns[id]
		switch {
		case len(f.ProducerIDs) > 0 && !slices.Contains(f.ProducerIDs, x.m.pid):
		case len(f.States) > 0 && !slices.Contains(states, x.m.state):
		case f.DurationMs >= 0 && now-x.m.startMs <= f.DurationMs:
		case f.Match != nil && !f.Match(id):
		default:
			s := kmsg.NewListTransactionsResponseTransactionState()
			s.TransactionalID, s.ProducerID, s.TransactionState = id, x.m.pid, x.m.state.String()
			res.States = append(res.States, s)
		}
	}
	return res
}

// Snapshot is an id's state as the coordinator holds it, for the broker's
// inspection pages and tests.
type Snapshot struct {
	State                 State
	ProducerID            int64
	ProducerEpoch         int16
	TimeoutMs             int32
	Partitions            []TopicPartition // in Prepare*: those still waiting for a marker
	StartMs, LastUpdateMs int64
	PendingWrite          bool // a record is in flight
	TransactionVersion    int16
	PreviousProducerID    int64
	NextProducerID        int64
	LastProducerEpoch     int16
}

// Get returns id's state, ok false if the table holds no such id.
func (t *Table) Get(txnID string) (Snapshot, bool) {
	x := t.txns[txnID]
	if x == nil {
		return Snapshot{}, false
	}
	m := x.m
	return Snapshot{
		State: m.state, ProducerID: m.pid, ProducerEpoch: m.epoch, TimeoutMs: m.timeoutMs,
		Partitions: slices.Clone(x.partitions()), StartMs: m.startMs, LastUpdateMs: m.updateMs,
		PendingWrite: x.w != nil, TransactionVersion: m.tv,
		PreviousProducerID: m.prevPid, NextProducerID: m.nextPid, LastProducerEpoch: m.lastEpoch,
	}, true
}

// Metrics is a snapshot of the table's size, for the broker's gauges.
type Metrics struct {
	// IDs counts the transactional ids by state (indexed by State, 0
	// Empty to 5 CompleteAbort).
	IDs [6]int
	// WritesInFlight counts the records appended and not yet reported.
	WritesInFlight int
	// MarkersPending counts the partitions whose marker is not yet
	// written, over every transaction completing.
	MarkersPending int
	// ProducerIDsLeft is the stock of producer ids.
	ProducerIDsLeft int64
}

// Metrics returns the table's metrics. It walks every id: call it at
// scrape time, not per request.
func (t *Table) Metrics() Metrics {
	m := Metrics{WritesInFlight: len(t.writes), ProducerIDsLeft: t.idsLeft()}
	for _, x := range t.txns {
		if int(x.m.state) < len(m.IDs) {
			m.IDs[x.m.state]++
		}
		if x.c != nil {
			m.MarkersPending += len(x.c.pending)
		}
	}
	return m
}
