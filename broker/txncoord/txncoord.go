package txncoord

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordlog/fjord/broker/coordinator"
	"github.com/fjordlog/fjord/broker/replica"
	"github.com/fjordlog/fjord/broker/txn"
	"github.com/fjordlog/fjord/protocol/lifecycle"
	"github.com/fjordlog/fjord/storage/recordbatch"
)

// Topic is Kafka's internal topic of transaction state.
const Topic = "__transaction_state"

// Errors for a transactional id this node cannot serve now; the broker
// maps them to Kafka codes.
var (
	ErrNotCoordinator = errors.New("txncoord: not the coordinator of this transactional id")
	ErrLoading        = errors.New("txncoord: transaction state partition is loading")
)

// Host is what the coordinator needs of the broker.
type Host interface {
	// Go runs fn on a tracked goroutine; false once the broker closes.
	Go(fn func()) bool
	// ReadFailed reports that reading partition p's log failed with err.
	ReadFailed(p *replica.Partition, err error)
	// AllocateProducerIDs reserves a block of producer ids through the
	// metadata log.
	AllocateProducerIDs(ctx context.Context) (first int64, count int32, err error)
	// WriteMarkers sends req to node (which may be this one) and returns
	// its answer.
	WriteMarkers(ctx context.Context, node int32, req *kmsg.WriteTxnMarkersRequest) (*kmsg.WriteTxnMarkersResponse, error)
	// Leader is the partition's leader in this node's metadata (-1: none
	// now); exists is false when the topic or partition is gone.
	Leader(topic string, partition int32) (leader int32, exists bool)
	// Code maps an error of the replica or storage to a Kafka error code.
	Code(err error) int16
}

// Config is the coordinator's configuration.
type Config struct {
	Txn    txn.Config
	Logger zerolog.Logger
}

// Coordinator is the transaction coordinator of one broker. Safe for use
// from any goroutine.
type Coordinator struct {
	ctx   context.Context
	cfg   Config
	host  Host
	log   zerolog.Logger
	count atomic.Int32 // partitions of the topic; 0 until it exists
	wake  chan struct{}
	mu    struct {
		sync.Mutex
		// parts[i] is partition i while this node leads it, else nil.
		parts []*part
	}
	// pids is the idempotent producers' block of ids (AllocProducerID).
	pids struct {
		sync.Mutex
		next, limit int64 // [next, limit) is this node's current producer-id block
	}
}

// part is one led partition and its Table.
type part struct {
	idx int32
	p   *replica.Partition
	mu  struct {
		sync.Mutex
		tbl  *txn.Table
		gone bool // unloaded: calls are answered NOT_COORDINATOR by the table
	}
}

// New returns a coordinator that coordinates nothing until Follow reports
// led partitions; its timer runs from Start until ctx ends.
func New(ctx context.Context, cfg Config, host Host) (*Coordinator, error) {
	if err := cfg.Txn.Validate(); err != nil {
		return nil, err
	}
	return &Coordinator{ctx: ctx, cfg: cfg, host: host, log: cfg.Logger, wake: make(chan struct{}, 1)}, nil
}

// Start runs the timer loop on the host's goroutines.
func (c *Coordinator) Start() { c.host.Go(c.timerLoop) }

// PartitionFor is txnID's partition of the topic (0 before Follow has seen
// it).
func (c *Coordinator) PartitionFor(txnID string) int32 {
	return PartitionOf(txnID, c.count.Load())
}

// PartitionOf is txnID's partition of a topic of n partitions (0 if n is
// 0): Kafka's placement, abs(javaHashCode(id)) % n, the same as a group's.
func PartitionOf(txnID string, n int32) int32 { return coordinator.PartitionOf(txnID, n) }

// Status is nil when this node coordinates txnID and has loaded its
// partition, else ErrNotCoordinator or ErrLoading.
func (c *Coordinator) Status(txnID string) error {
	pt := c.partFor(txnID)
	if pt == nil {
		return ErrNotCoordinator
	}
	pt.mu.Lock()
	defer pt.mu.Unlock()
	switch {
	case pt.mu.gone:
		return ErrNotCoordinator
	case !pt.mu.tbl.Active():
		return ErrLoading // loading, or about to begin
	}
	return nil
}

func (c *Coordinator) partFor(txnID string) *part {
	if c.count.Load() == 0 {
		return nil
	}
	pi := c.PartitionFor(txnID)
	c.mu.Lock()
	defer c.mu.Unlock()
	if int(pi) >= len(c.mu.parts) {
		return nil
	}
	return c.mu.parts[pi]
}

// Reply receives a request's answer, once.
type Reply func(txn.Answer)

// notCoordinator answers a request for a partition this node does not lead.
func notCoordinator(reply Reply) {
	reply(txn.Answer{Code: kerr.NotCoordinator.Code, ProducerID: -1, ProducerEpoch: -1})
}

// call runs fn on txnID's table and does what it asks.
func (c *Coordinator) call(txnID string, reply Reply, fn func(*txn.Table, int64) txn.Ready) {
	pt := c.partFor(txnID)
	if pt == nil {
		notCoordinator(reply)
		return
	}
	if !c.do(pt, fn) {
		notCoordinator(reply)
	}
}

// do makes one call into pt's table and processes its Ready; false (and
// no call) once the partition is no longer led here: a table that lost
// its partition takes nothing but its Unload, so a load or a report that
// finishes late cannot make it send markers or records as a coordinator
// it no longer is.
func (c *Coordinator) do(pt *part, fn func(*txn.Table, int64) txn.Ready) bool {
	pt.mu.Lock()
	if pt.mu.gone {
		pt.mu.Unlock()
		return false
	}
	r := fn(pt.mu.tbl, time.Now().UnixMilli())
	pt.mu.Unlock()
	c.process(pt, r)
	return true
}

// unload answers the table's waiting requests NOT_COORDINATOR and makes
// it take nothing more.
func (c *Coordinator) unload(pt *part) {
	pt.mu.Lock()
	if pt.mu.gone {
		pt.mu.Unlock()
		return
	}
	pt.mu.gone = true
	r := pt.mu.tbl.Unload()
	pt.mu.Unlock()
	c.process(pt, r)
}

// InitProducerID serves an InitProducerId with a transactional id.
func (c *Coordinator) InitProducerID(req txn.InitRequest, reply Reply) {
	c.retryConcurrent(reply, func(reply Reply) {
		c.call(req.TxnID, reply, func(t *txn.Table, now int64) txn.Ready { return t.InitProducerID(now, req, reply) })
	})
}

// AddPartitions serves one transaction of an AddPartitionsToTxn.
func (c *Coordinator) AddPartitions(req txn.AddPartitionsRequest, reply Reply) {
	if req.VerifyOnly {
		c.call(req.TxnID, reply, func(t *txn.Table, now int64) txn.Ready { return t.AddPartitions(now, req, reply) })
		return
	}
	c.retryConcurrent(reply, func(reply Reply) {
		c.call(req.TxnID, reply, func(t *txn.Table, now int64) txn.Ready { return t.AddPartitions(now, req, reply) })
	})
}

// AddOffsets serves an AddOffsetsToTxn.
func (c *Coordinator) AddOffsets(req txn.AddOffsetsRequest, reply Reply) {
	c.retryConcurrent(reply, func(reply Reply) {
		c.call(req.TxnID, reply, func(t *txn.Table, now int64) txn.Ready { return t.AddOffsets(now, req, reply) })
	})
}

// concurrentWait bounds how long a request answered
// CONCURRENT_TRANSACTIONS is asked again here before the client gets the
// answer.
const concurrentWait = 200 * time.Millisecond

// concurrentBackoff spaces retryConcurrent's tries: 1, 2, 4 ... 16 ms.
var concurrentBackoff = lifecycle.Backoff{Initial: time.Millisecond, Max: 16 * time.Millisecond}

// retryConcurrent issues a request and, while the table answers
// CONCURRENT_TRANSACTIONS (the id's previous transaction is still writing
// its markers and its Complete record, which takes a few fsyncs), issues
// it again after 1, 2, 4 ... 16 ms, within concurrentWait, before the
// client sees the answer. The client would retry the same request itself,
// after its own backoff (20 ms and more in the Java client and franz-go),
// which bounded a producer that commits often to a few dozen
// transactions a second. The request is the same each time, so the
// outcome is what the client's retry would get.
func (c *Coordinator) retryConcurrent(reply Reply, issue func(Reply)) {
	deadline := time.Now().Add(concurrentWait)
	fails := 0 // CONCURRENT_TRANSACTIONS answers so far
	var try func()
	try = func() {
		issue(func(a txn.Answer) {
			d := concurrentBackoff.Delay(fails + 1)
			if !concurrent(a) || time.Now().Add(d).After(deadline) {
				reply(a)
				return
			}
			fails++
			if !c.host.Go(func() {
				if lifecycle.Sleep(c.ctx, d) {
					try()
				} else {
					reply(a)
				}
			}) {
				reply(a) // closing
			}
		})
	}
	try()
}

// concurrent reports whether an answer is CONCURRENT_TRANSACTIONS, for the
// request or for every partition of it.
func concurrent(a txn.Answer) bool {
	if a.Code == kerr.ConcurrentTransactions.Code {
		return true
	}
	if len(a.Partitions) == 0 {
		return false
	}
	for _, p := range a.Partitions {
		if p.Code != kerr.ConcurrentTransactions.Code {
			return false
		}
	}
	return true
}

// EndTxn serves an EndTxn.
func (c *Coordinator) EndTxn(req txn.EndRequest, reply Reply) {
	c.call(req.TxnID, reply, func(t *txn.Table, now int64) txn.Ready { return t.EndTxn(now, req, reply) })
}

// Describe answers DescribeTransactions for one id (NOT_COORDINATOR or
// COORDINATOR_LOAD_IN_PROGRESS in its error code when this node cannot).
func (c *Coordinator) Describe(txnID string) kmsg.DescribeTransactionsResponseTransactionState {
	pt := c.partFor(txnID)
	if pt == nil {
		s := kmsg.NewDescribeTransactionsResponseTransactionState()
		s.TransactionalID, s.ErrorCode = txnID, kerr.NotCoordinator.Code
		return s
	}
	pt.mu.Lock()
	defer pt.mu.Unlock()
	return pt.mu.tbl.Describe(txnID)
}

// List answers ListTransactions over every loaded table; code is
// COORDINATOR_LOAD_IN_PROGRESS while one loads.
func (c *Coordinator) List(f txn.ListFilter) (code int16, states []kmsg.ListTransactionsResponseTransactionState, unknown []string) {
	c.mu.Lock()
	parts := append([]*part(nil), c.mu.parts...)
	c.mu.Unlock()
	now := time.Now().UnixMilli()
	for _, pt := range parts {
		if pt == nil {
			continue
		}
		pt.mu.Lock()
		res := pt.mu.tbl.List(now, f)
		pt.mu.Unlock()
		if res.Code == kerr.CoordinatorLoadInProgress.Code {
			code = res.Code
		}
		if res.Code != 0 {
			continue
		}
		states = append(states, res.States...)
		unknown = res.UnknownStateFilters
	}
	return code, states, unknown
}

// process does what a Table's Ready asks: answers first (they are final),
// then the appends, markers and the producer-id fetch, each on its own.
func (c *Coordinator) process(pt *part, r txn.Ready) {
	for _, a := range r.Answers {
		if reply, ok := a.Token.(Reply); ok && reply != nil {
			reply(a)
		}
	}
	for _, n := range r.Notes {
		c.log.Info().Int32("partition", pt.idx).Msg("transactions: " + n)
	}
	for _, a := range r.Appends {
		c.appendRecord(pt, a)
	}
	for _, m := range r.Markers {
		c.sendMarkers(pt, m)
	}
	if r.FetchProducerIDs {
		c.host.Go(func() {
			ctx, cancel := context.WithTimeout(c.ctx, 10*time.Second)
			first, n, err := c.host.AllocateProducerIDs(ctx)
			cancel()
			if err != nil {
				c.log.Warn().Err(err).Msg("transactions: no producer id block from the controller; retrying")
				c.do(pt, func(t *txn.Table, now int64) txn.Ready { return t.ProducerIDsFailed(now) })
				return
			}
			c.do(pt, func(t *txn.Table, now int64) txn.Ready { return t.SupplyProducerIDs(now, first, int64(n)) })
		})
	}
	select {
	case c.wake <- struct{}{}: // deadlines may have moved
	default:
	}
}

// recordTimeout bounds how long a record waits for the partition's
// replicas before it counts as failed.
const recordTimeout = 15 * time.Second

// appendRecord appends one record as the partition's leader and reports
// it once committed, or failed.
func (c *Coordinator) appendRecord(pt *part, a txn.Append) {
	failed := func(code int16) {
		c.do(pt, func(t *txn.Table, now int64) txn.Ready { return t.RecordFailed(now, a.Token, code) })
	}
	now := time.Now().UnixMilli()
	batch := recordbatch.Build([]recordbatch.KV{{Key: a.Key, Value: a.Value}}, now)
	info, err := recordbatch.Validate(batch, 0)
	if err != nil {
		c.log.Error().Err(err).Msg("transactions: built a record that does not validate")
		c.host.Go(func() { failed(kerr.UnknownServerError.Code) })
		return
	}
	res, v, err := pt.p.AppendAsLeader(batch, info, now)
	if err != nil {
		code := c.host.Code(err)
		c.host.Go(func() { failed(code) })
		return
	}
	ok := c.host.Go(func() {
		err := pt.p.Flush()
		if err == nil {
			expire := time.NewTimer(recordTimeout)
			err = pt.p.WaitCommitted(c.ctx, res.LastOffset+1, v.LeaderEpoch, expire.C)
			expire.Stop()
		}
		if err != nil {
			code := c.host.Code(err)
			if errors.Is(err, replica.ErrTimedOut) {
				code = kerr.RequestTimedOut.Code
			}
			failed(code)
			return
		}
		c.do(pt, func(t *txn.Table, now int64) txn.Ready { return t.RecordWritten(now, a.Token) })
	})
	if !ok {
		return // closing: the table goes with the broker
	}
}

// markerTimeout bounds one WriteTxnMarkers round trip.
const markerTimeout = 30 * time.Second

// sendMarkers writes one transaction's markers: partitions whose topic is
// gone count as written, those without a leader as failed (the table
// retries them), the rest go to their leaders, one request per leader.
func (c *Coordinator) sendMarkers(pt *part, m txn.Marker) {
	byLeader := map[int32][]txn.TopicPartition{}
	var gone, leaderless []txn.TopicPartition
	for _, tp := range m.Partitions {
		leader, exists := c.host.Leader(tp.Topic, tp.Partition)
		switch {
		case !exists:
			gone = append(gone, tp)
		case leader < 0:
			leaderless = append(leaderless, tp)
		default:
			byLeader[leader] = append(byLeader[leader], tp)
		}
	}
	if len(gone) > 0 {
		c.host.Go(func() {
			c.do(pt, func(t *txn.Table, now int64) txn.Ready { return t.MarkersWritten(now, m.ID, gone) })
		})
	}
	if len(leaderless) > 0 {
		c.host.Go(func() {
			c.do(pt, func(t *txn.Table, now int64) txn.Ready {
				return t.MarkerFailed(now, m.ID, leaderless, kerr.LeaderNotAvailable.Code)
			})
		})
	}
	for leader, tps := range byLeader {
		req := markersRequest(m, tps)
		c.host.Go(func() {
			ctx, cancel := context.WithTimeout(c.ctx, markerTimeout)
			resp, err := c.host.WriteMarkers(ctx, leader, req)
			cancel()
			if err != nil {
				code := c.host.Code(err)
				if code == 0 || code == kerr.UnknownServerError.Code {
					code = kerr.NotLeaderForPartition.Code
				}
				c.do(pt, func(t *txn.Table, now int64) txn.Ready { return t.MarkerFailed(now, m.ID, tps, code) })
				return
			}
			written, failed := splitMarkerResponse(resp, tps)
			if len(written) > 0 {
				c.do(pt, func(t *txn.Table, now int64) txn.Ready { return t.MarkersWritten(now, m.ID, written) })
			}
			for code, ps := range failed {
				c.do(pt, func(t *txn.Table, now int64) txn.Ready { return t.MarkerFailed(now, m.ID, ps, code) })
			}
		})
	}
}

// markersRequest is a WriteTxnMarkers for one transaction's partitions on
// one leader.
func markersRequest(m txn.Marker, tps []txn.TopicPartition) *kmsg.WriteTxnMarkersRequest {
	req := kmsg.NewPtrWriteTxnMarkersRequest()
	mk := kmsg.NewWriteTxnMarkersRequestMarker()
	mk.ProducerID, mk.ProducerEpoch, mk.Committed, mk.CoordinatorEpoch = m.ProducerID, m.ProducerEpoch, m.Commit, m.CoordinatorEpoch
	mk.TransactionVersion = m.TransactionVersion
	for _, g := range txn.ByTopic(tps) {
		t := kmsg.NewWriteTxnMarkersRequestMarkerTopic()
		t.Topic, t.Partitions = g.Topic, g.Partitions
		mk.Topics = append(mk.Topics, t)
	}
	req.Markers = append(req.Markers, mk)
	return req
}

// splitMarkerResponse sorts the answer's partitions into written and
// failed by code; a partition the answer leaves out failed.
func splitMarkerResponse(resp *kmsg.WriteTxnMarkersResponse, asked []txn.TopicPartition) (written []txn.TopicPartition, failed map[int16][]txn.TopicPartition) {
	failed = map[int16][]txn.TopicPartition{}
	got := map[txn.TopicPartition]int16{}
	for _, m := range resp.Markers {
		for _, t := range m.Topics {
			for _, p := range t.Partitions {
				got[txn.TopicPartition{Topic: t.Topic, Partition: p.Partition}] = p.ErrorCode
			}
		}
	}
	for _, tp := range asked {
		code, ok := got[tp]
		switch {
		case !ok:
			failed[kerr.UnknownServerError.Code] = append(failed[kerr.UnknownServerError.Code], tp)
		case code == 0:
			written = append(written, tp)
		default:
			failed[code] = append(failed[code], tp)
		}
	}
	return written, failed
}

// timerLoop ticks every table at its next deadline.
func (c *Coordinator) timerLoop() {
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		c.mu.Lock()
		parts := append([]*part(nil), c.mu.parts...)
		c.mu.Unlock()
		now := time.Now().UnixMilli()
		next := int64(-1)
		for _, pt := range parts {
			if pt == nil {
				continue
			}
			pt.mu.Lock()
			d := pt.mu.tbl.NextDeadline()
			pt.mu.Unlock()
			if d < 0 {
				continue
			}
			if d <= now {
				c.do(pt, func(t *txn.Table, now int64) txn.Ready { return t.Tick(now) })
				pt.mu.Lock()
				d = pt.mu.tbl.NextDeadline()
				pt.mu.Unlock()
				if d < 0 {
					continue
				}
			}
			if next < 0 || d < next {
				next = d
			}
		}
		wait := time.Hour
		if next >= 0 {
			wait = max(time.Duration(next-time.Now().UnixMilli())*time.Millisecond, time.Millisecond)
		}
		timer.Reset(wait)
		select {
		case <-c.ctx.Done():
			return
		case <-c.wake:
			timer.Stop() // Go 1.23 timers: no stale tick to drain
		case <-timer.C:
		}
	}
}
