package compattests

// The pieces of TestFaultTxnChain (fault_txn_test.go): the chain members
// (franz-go GroupTransactSessions copying `in` to `out`, one transaction
// per poll), a live read_committed reader of `out`, the final readers, and
// the checker, a pure function over what they recorded, unit-tested on
// synthetic histories at the end of this file.
//
// Every output record's value (txnOutValue, JSON) names the input it copies
// (partition, offset, the seeder's sequence number), the transaction that
// wrote it (the poll batch: member, session, number) and how many records
// that transaction wrote to each output partition, so the checker can tell
// a copy from a duplicate and a whole transaction from a torn one without
// trusting the broker's own bookkeeping. The ground truth of which
// transactions committed is the log itself: `out` read with
// read_uncommitted and control records kept, where each transactional
// record's fate is the next marker (commit or abort) of its producer id in
// the same partition.

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// txnOutValue is the value of every record the chain writes to `out`.
type txnOutValue struct {
	InPartition int32  `json:"ip"`
	InOffset    int64  `json:"io"`
	Seq         string `json:"s"` // the input's value: the seeder's sequence number
	Batch       string `json:"b"` // the transaction: <member>.<session>.<n>
	Counts      []int  `json:"c"` // records the transaction wrote to each `out` partition
}

// txnOutcome is what a member learned of one of its transactions.
type txnOutcome int

const (
	txnCommitted  txnOutcome = iota // End returned committed
	txnAborted                      // End returned not committed, no error (it aborted)
	txnUnknown                      // End returned an error: commit or abort unknown
	txnNotStarted                   // Begin failed: nothing produced
)

func (o txnOutcome) String() string {
	return [...]string{"committed", "aborted", "unknown", "not-started"}[o]
}

// txnBatch is one poll batch of a member and the transaction that copied it.
type txnBatch struct {
	ID       string
	Member   string
	Session  int
	Start    time.Time
	Done     time.Time
	Inputs   int   // records polled (and produced)
	Counts   []int // per `out` partition
	Outcome  txnOutcome
	Err      string
	PID      int64 // from the produce promises (-1: none came back)
	Epoch    int16
	ProdErrs int    // produce promises with an error
	ProdErr  string // the first of them
	Crashed  bool   // the member was cut off as it wrote this transaction's EndTxn
}

// txnCutNet is a member session's network: Dialer for franz-go, which the
// test can arm so that the next EndTxn request written cuts the session
// off from every broker (the request is not sent, every connection is
// closed, and no new one can be made), as if the member's process died
// between its TxnOffsetCommit and its EndTxn.
type txnCutNet struct {
	base dialFunc // how the test reaches the nodes; nil: directly

	mu    sync.Mutex
	armed bool
	cut   time.Time
	conns map[net.Conn]struct{}
}

var errTxnCut = errors.New("test: member cut off from the network")

func (n *txnCutNet) arm() {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.armed = true
}

func (n *txnCutNet) cutAt() time.Time {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.cut
}

func (n *txnCutNet) dial(ctx context.Context, network, host string) (net.Conn, error) {
	n.mu.Lock()
	cut := !n.cut.IsZero()
	n.mu.Unlock()
	if cut {
		return nil, errTxnCut
	}
	base := n.base
	if base == nil {
		base = (&net.Dialer{Timeout: 2 * time.Second}).DialContext
	}
	dctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	c, err := base(dctx, network, host)
	cancel()
	if err != nil {
		return nil, err
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if !n.cut.IsZero() {
		c.Close()
		return nil, errTxnCut
	}
	n.conns[c] = struct{}{}
	return &txnCutConn{Conn: c, n: n}, nil
}

// blocks reports whether b (one request as franz-go writes it: size,
// api key, ...) may not be sent, cutting the network if it is the EndTxn
// an armed net waits for.
func (n *txnCutNet) blocks(b []byte) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	if !n.cut.IsZero() {
		return true
	}
	if n.armed && len(b) >= 6 && binary.BigEndian.Uint16(b[4:6]) == 26 { // EndTxn
		n.cut = time.Now()
		for c := range n.conns {
			c.Close()
		}
		clear(n.conns)
		return true
	}
	return false
}

func (n *txnCutNet) isCut() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return !n.cut.IsZero()
}

type txnCutConn struct {
	net.Conn
	n *txnCutNet
}

func (c *txnCutConn) Write(b []byte) (int, error) {
	if c.n.blocks(b) {
		return 0, errTxnCut
	}
	return c.Conn.Write(b)
}

func (c *txnCutConn) Read(b []byte) (int, error) {
	if c.n.isCut() {
		return 0, errTxnCut
	}
	return c.Conn.Read(b)
}

func (c *txnCutConn) Close() error {
	c.n.mu.Lock()
	delete(c.n.conns, c.Conn)
	c.n.mu.Unlock()
	return c.Conn.Close()
}

// txnMember is one consume-transform-produce member: a GroupTransactSession
// polling `in` (read_committed, stable offsets) and copying each poll batch
// to `out` in one transaction. A session whose Begin or End fails is closed
// and replaced by a new one with the same transactional id (franz-go: "no
// returned error is retryable"); the new one's InitProducerId fences the old
// and aborts its open transaction, and it resumes from the group's commits.
type txnMember struct {
	name, txnID string
	seeds       []string
	dial        dialFunc // how the test reaches the nodes (a namespace's); nil: directly
	group       string
	in, out     string
	outParts    int
	txnTimeout  time.Duration
	logW        io.Writer

	mu        sync.Mutex
	batches   []txnBatch
	sessions  int
	resets    []string // why sessions were replaced (first few)
	resetN    int
	pollErrs  int
	pollErr1  string
	outN      int64 // output records so far, for the round-robin partitioning
	committed int   // transactions committed
	inCopied  int   // input records in committed transactions

	curNet       *txnCutNet    // the running session's network
	crashPending bool          // Crash was called; the crash has not happened yet
	crashPause   time.Duration // how long a crashed member stays away
	crashes      []string      // when and where the member crashed

	stopping chan struct{}
	done     chan struct{}
}

func startTxnMember(t testing.TB, fc *faultCluster, name, txnID, group, in, out string, outParts int, txnTimeout time.Duration, logDir string) *txnMember {
	t.Helper()
	lf, err := os.Create(logDir + "/" + name + ".log")
	if err != nil {
		t.Fatalf("%s log: %v", name, err)
	}
	t.Cleanup(func() { lf.Close() })
	m := &txnMember{name: name, txnID: txnID, seeds: fc.AllAddrs(), dial: fc.dial, group: group, in: in, out: out, outParts: outParts,
		txnTimeout: txnTimeout, logW: lf, stopping: make(chan struct{}), done: make(chan struct{})}
	go m.run()
	return m
}

func (m *txnMember) stopped() bool {
	select {
	case <-m.stopping:
		return true
	default:
		return false
	}
}

// Stop makes the member finish the transaction it is in, close its session
// (leaving the group) and return; it waits up to timeout.
func (m *txnMember) Stop(timeout time.Duration) error {
	close(m.stopping)
	select {
	case <-m.done:
		return nil
	case <-time.After(timeout):
		return fmt.Errorf("%s did not stop within %v", m.name, timeout)
	}
}

// errTxnCrashed ends a session the test cut off from the network.
var errTxnCrashed = errors.New("crashed")

// Crash makes the member crash at its next EndTxn: its session is cut off
// from every broker as the request is written (so the transaction's
// records and its TxnOffsetCommit are in, and the coordinator never hears
// the end), and the member comes back with a new session (the same
// transactional id) pause after its old one gave up. A pause longer than
// the transaction timeout leaves the abort to the coordinator's timeout;
// a short one to the new session's InitProducerId.
func (m *txnMember) Crash(pause time.Duration) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.crashPause, m.crashPending = pause, true
	if m.curNet != nil {
		m.curNet.arm()
	}
}

// Crashes lists the member's crashes so far.
func (m *txnMember) Crashes() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.crashes)
}

func (m *txnMember) run() {
	defer close(m.done)
	for !m.stopped() {
		err := m.session()
		if err == nil {
			continue
		}
		m.mu.Lock()
		pause := 200 * time.Millisecond
		if errors.Is(err, errTxnCrashed) {
			pause = m.crashPause
		} else {
			m.resetN++
			if len(m.resets) < 8 {
				m.resets = append(m.resets, time.Now().Format("15:04:05.000 ")+err.Error())
			}
		}
		m.mu.Unlock()
		fmt.Fprintf(m.logW, "%s TEST: session ended (%v); the next starts in %v\n", time.Now().Format("15:04:05.000000"), err, pause)
		select {
		case <-m.stopping:
		case <-time.After(pause):
		}
	}
}

func (m *txnMember) opts(cn *txnCutNet) []kgo.Opt {
	level := kgo.LogLevelInfo
	if os.Getenv("FJORD_FAULT_DEBUG") != "" {
		level = kgo.LogLevelDebug
	}
	return []kgo.Opt{
		kgo.SeedBrokers(m.seeds...),
		kgo.ClientID(m.name),
		kgo.TransactionalID(m.txnID),
		kgo.TransactionTimeout(m.txnTimeout),
		kgo.ConsumerGroup(m.group),
		kgo.ConsumeTopics(m.in),
		kgo.Balancers(kgo.CooperativeStickyBalancer()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.RequireStableFetchOffsets(),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.SessionTimeout(groupSessionTimeout),
		kgo.HeartbeatInterval(groupHeartbeat),
		kgo.RebalanceTimeout(15 * time.Second),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.FetchMaxWait(200 * time.Millisecond),
		kgo.MetadataMinAge(250 * time.Millisecond),
		kgo.Dialer(cn.dial),
		kgo.RetryBackoffFn(func(int) time.Duration { return 200 * time.Millisecond }),
		kgo.WithLogger(kgo.BasicLogger(m.logW, level, func() string { return time.Now().Format("15:04:05.000000 ") })),
	}
}

// session runs one GroupTransactSession until the member stops (nil) or
// the session must be replaced (the error).
func (m *txnMember) session() error {
	cn := &txnCutNet{base: m.dial, conns: map[net.Conn]struct{}{}}
	m.mu.Lock()
	m.sessions++
	inc := m.sessions
	m.curNet = cn
	if m.crashPending {
		cn.arm()
	}
	m.mu.Unlock()
	s, err := kgo.NewGroupTransactSession(m.opts(cn)...)
	if err != nil {
		return fmt.Errorf("new session: %w", err)
	}
	defer func() {
		done := make(chan struct{})
		go func() { s.Close(); close(done) }()
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			fmt.Fprintf(m.logW, "%s TEST: session %d: Close did not return within 20s\n", time.Now().Format("15:04:05.000000"), inc)
		}
	}()
	n := 0
	for !m.stopped() {
		pctx, cancel := context.WithTimeout(context.Background(), time.Second)
		fs := s.PollRecords(pctx, 300)
		cancel()
		if fs.IsClientClosed() {
			return errors.New("client closed")
		}
		fs.EachError(func(tp string, p int32, err error) {
			if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
				return
			}
			m.mu.Lock()
			m.pollErrs++
			if m.pollErr1 == "" {
				m.pollErr1 = fmt.Sprintf("%s[%d]: %v", tp, p, err)
			}
			m.mu.Unlock()
		})
		recs := fs.Records()
		if len(recs) == 0 {
			continue
		}
		n++
		b := txnBatch{ID: fmt.Sprintf("%s.%d.%d", m.name, inc, n), Member: m.name, Session: inc, Start: time.Now(),
			Inputs: len(recs), Counts: make([]int, m.outParts), PID: -1, Epoch: -1}
		if err := s.Begin(); err != nil {
			b.Outcome, b.Err, b.Done = txnNotStarted, err.Error(), time.Now()
			m.record(b)
			return fmt.Errorf("begin %s: %w", b.ID, err)
		}
		parts := make([]int32, len(recs))
		for i := range recs {
			parts[i] = int32((m.outN + int64(i)) % int64(m.outParts))
			b.Counts[parts[i]]++
		}
		m.outN += int64(len(recs))
		var pmu sync.Mutex
		for i, r := range recs {
			v, _ := json.Marshal(txnOutValue{InPartition: r.Partition, InOffset: r.Offset, Seq: string(r.Value), Batch: b.ID, Counts: b.Counts})
			s.Produce(context.Background(), &kgo.Record{Topic: m.out, Partition: parts[i], Key: r.Key, Value: v}, func(r *kgo.Record, err error) {
				pmu.Lock()
				defer pmu.Unlock()
				if err != nil {
					b.ProdErrs++
					if b.ProdErr == "" {
						b.ProdErr = err.Error()
					}
					return
				}
				b.PID, b.Epoch = r.ProducerID, r.ProducerEpoch
			})
		}
		ectx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		committed, err := s.End(ectx, kgo.TryCommit)
		cancel()
		pmu.Lock()
		b.Done = time.Now()
		switch {
		case err != nil:
			b.Outcome, b.Err = txnUnknown, err.Error()
		case committed:
			b.Outcome = txnCommitted
		default:
			b.Outcome = txnAborted
		}
		cutAt := cn.cutAt()
		if !cutAt.IsZero() {
			b.Crashed = true
		}
		bb := b
		bb.Counts = slices.Clone(b.Counts)
		pmu.Unlock()
		m.record(bb)
		if !cutAt.IsZero() {
			m.mu.Lock()
			m.crashPending = false
			m.crashes = append(m.crashes, fmt.Sprintf("%s cut off at %s writing the EndTxn of %s (pid %d epoch %d, begun %s); End returned after %v: %v",
				m.name, cutAt.Format("15:04:05.000"), b.ID, b.PID, b.Epoch, b.Start.Format("15:04:05.000"), b.Done.Sub(cutAt).Round(time.Millisecond), err))
			m.mu.Unlock()
			fmt.Fprintf(m.logW, "%s TEST: cut off at %s writing the EndTxn of %s\n", time.Now().Format("15:04:05.000000"), cutAt.Format("15:04:05.000000"), b.ID)
			return fmt.Errorf("%w before ending %s", errTxnCrashed, b.ID)
		}
		if err != nil {
			return fmt.Errorf("end %s: %w", b.ID, err)
		}
	}
	return nil
}

func (m *txnMember) record(b txnBatch) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.batches = append(m.batches, b)
	if b.Outcome == txnCommitted {
		m.committed++
		m.inCopied += b.Inputs
	}
}

// Batches returns a copy of the member's transactions so far.
func (m *txnMember) Batches() []txnBatch {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.batches)
}

// Committed returns how many transactions committed and how many input
// records they copied.
func (m *txnMember) Committed() (txns, records int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.committed, m.inCopied
}

func (m *txnMember) Summary() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	by := map[txnOutcome]int{}
	for _, b := range m.batches {
		by[b.Outcome]++
	}
	s := fmt.Sprintf("%s (%s): %d transactions (committed %d, aborted %d, unknown %d, not started %d), %d input records committed, %d sessions, %d poll errors",
		m.name, m.txnID, len(m.batches), by[txnCommitted], by[txnAborted], by[txnUnknown], by[txnNotStarted], m.inCopied, m.sessions, m.pollErrs)
	if m.pollErr1 != "" {
		s += " (first: " + m.pollErr1 + ")"
	}
	if m.resetN > 0 {
		s += fmt.Sprintf("; %d sessions replaced after errors: %s", m.resetN, strings.Join(m.resets, "; "))
	}
	if len(m.crashes) > 0 {
		s += fmt.Sprintf("; %d crashes: %s", len(m.crashes), strings.Join(m.crashes, "; "))
	}
	return s
}

// txnOutRec is one record of `out` as a reader returned it.
type txnOutRec struct {
	Partition int32
	Offset    int64
	PID       int64
	Epoch     int16
	Txnl      bool // the transactional attribute
	Control   bool
	Commit    bool // a control record: commit marker (else abort)
	Key       string
	Raw       string
	Val       txnOutValue
	Bad       bool // a data record whose value does not parse
}

func (r txnOutRec) String() string {
	if r.Control {
		kind := "ABORT"
		if r.Commit {
			kind = "COMMIT"
		}
		return fmt.Sprintf("p%d@%d %s marker pid %d epoch %d", r.Partition, r.Offset, kind, r.PID, r.Epoch)
	}
	return fmt.Sprintf("p%d@%d pid %d epoch %d txn %s copy of in p%d@%d (seq %s)", r.Partition, r.Offset, r.PID, r.Epoch, r.Val.Batch, r.Val.InPartition, r.Val.InOffset, r.Val.Seq)
}

func txnOutRecOf(r *kgo.Record) txnOutRec {
	o := txnOutRec{Partition: r.Partition, Offset: r.Offset, PID: r.ProducerID, Epoch: r.ProducerEpoch,
		Txnl: r.Attrs.IsTransactional(), Control: r.Attrs.IsControl(), Key: string(r.Key), Raw: string(r.Value)}
	if o.Control {
		// Key: version int16, type int16 (0 abort, 1 commit).
		o.Commit = len(r.Key) >= 4 && binary.BigEndian.Uint16(r.Key[2:4]) == 1
		return o
	}
	if err := json.Unmarshal(r.Value, &o.Val); err != nil || o.Val.Batch == "" {
		o.Bad = true
	}
	return o
}

// txnLiveReader reads `out` with read_committed while the chain runs and
// records every record it is given.
type txnLiveReader struct {
	cl *kgo.Client

	mu      sync.Mutex
	recs    []txnOutRec
	errs    int
	err1    string
	markers int

	cancel context.CancelFunc
	done   chan struct{}
}

func startTxnLiveReader(t testing.TB, fc *faultCluster, topic string, parts int) *txnLiveReader {
	t.Helper()
	starts := map[int32]kgo.Offset{}
	for p := range int32(parts) {
		starts[p] = kgo.NewOffset().At(0)
	}
	cl := newClient(t, fc.AllAddrs()[0], fc.seeds(
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: starts}),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.KeepControlRecords(),
		kgo.FetchMaxWait(200*time.Millisecond), kgo.MetadataMinAge(250*time.Millisecond), kgo.DialTimeout(2*time.Second))...)
	ctx, cancel := context.WithCancel(context.Background())
	lr := &txnLiveReader{cl: cl, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(lr.done)
		for {
			fs := cl.PollFetches(ctx)
			if ctx.Err() != nil || fs.IsClientClosed() {
				return
			}
			lr.mu.Lock()
			fs.EachError(func(tp string, p int32, err error) {
				lr.errs++
				if lr.err1 == "" {
					lr.err1 = fmt.Sprintf("%s[%d]: %v", tp, p, err)
				}
			})
			fs.EachRecord(func(r *kgo.Record) {
				if r.Attrs.IsControl() {
					lr.markers++
				}
				lr.recs = append(lr.recs, txnOutRecOf(r))
			})
			lr.mu.Unlock()
		}
	}()
	return lr
}

// Stop stops reading and returns what was read.
func (lr *txnLiveReader) Stop() []txnOutRec {
	lr.cancel()
	<-lr.done
	lr.cl.Close()
	lr.mu.Lock()
	defer lr.mu.Unlock()
	return slices.Clone(lr.recs)
}

func (lr *txnLiveReader) Summary() string {
	lr.mu.Lock()
	defer lr.mu.Unlock()
	s := fmt.Sprintf("live read_committed reader: %d records (%d markers), %d fetch errors", len(lr.recs), lr.markers, lr.errs)
	if lr.err1 != "" {
		s += " (first: " + lr.err1 + ")"
	}
	return s
}

// readTxnOut reads every partition of topic from offset 0 until it has been
// given the record at ends[p]-1 (control records are kept, so with
// read_uncommitted and the high watermarks, or read_committed and the last
// stable offsets, every offset below the end is either returned or, for
// aborted data under read_committed, skipped before a later one is).
func readTxnOut(t testing.TB, fc *faultCluster, topic string, ends map[int32]int64, committed bool, timeout time.Duration) ([]txnOutRec, error) {
	t.Helper()
	starts := map[int32]kgo.Offset{}
	for p := range ends {
		starts[p] = kgo.NewOffset().At(0)
	}
	iso := kgo.ReadUncommitted()
	if committed {
		iso = kgo.ReadCommitted()
	}
	cl := newClient(t, fc.AllAddrs()[0], fc.seeds(
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: starts}),
		kgo.FetchIsolationLevel(iso), kgo.KeepControlRecords(), kgo.FetchMaxWait(200*time.Millisecond))...)
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	next := map[int32]int64{}
	done := func() bool {
		for p, e := range ends {
			if next[p] < e {
				return false
			}
		}
		return true
	}
	var out []txnOutRec
	var errs []string
	for !done() {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			return out, fmt.Errorf("after %v: read up to %s, want %s (fetch errors: %s)", timeout, fmtOffsets(next), fmtOffsets(ends), strings.Join(errs, "; "))
		}
		fs.EachError(func(tp string, p int32, err error) {
			if len(errs) < 10 {
				errs = append(errs, fmt.Sprintf("%s[%d]: %v", tp, p, err))
			}
		})
		fs.EachRecord(func(r *kgo.Record) {
			out = append(out, txnOutRecOf(r))
			next[r.Partition] = max(next[r.Partition], r.Offset+1)
		})
	}
	return out, nil
}

// ---- the checker ----

// txnChainData is everything a chain run (txnChain) recorded and read.
type txnChainData struct {
	In        []faultRecord   // `in`, read back in full
	InEnds    map[int32]int64 // `in`'s end offsets
	OutLog    []txnOutRec     // `out`, read_uncommitted, markers included: the ground truth
	OutRC     []txnOutRec     // `out`, read_committed (markers kept), after settling
	Live      []txnOutRec     // `out`, read_committed, while the chain ran and faults were injected
	Committed map[int32]int64 // the group's committed offsets on `in` (stable)
	Batches   []txnBatch      // every member's transactions
	OutParts  int
}

// txnFate is a transactional record's fate, from the markers in its partition.
type txnFate int

const (
	fateUndecided txnFate = iota // no marker of its producer after it
	fateCommit
	fateAbort
)

func (f txnFate) String() string { return [...]string{"undecided", "committed", "aborted"}[f] }

// txnReport is the checker's result.
type txnReport struct {
	InRecords   int // records in `in`
	OutData     int // data records in `out` (read_uncommitted)
	OutMarkers  int // control records in `out`
	CommitFated int // data records whose transaction committed (markers)
	AbortFated  int
	Undecided   int // data records with no marker after them
	NonTxn      int // data records in `out` without the transactional attribute
	Visible     int // data records read_committed returned
	LiveRead    int // data records the live reader returned

	TxnCommitted, TxnAborted, TxnUnknown, TxnNotStarted int // by the members' own account
	TxnVisible                                          int // transactions with records visible to read_committed

	AbortedVisible  int // read_committed returned a record of an aborted or undecided transaction
	CommittedHidden int // read_committed did not return a record of a committed transaction
	Partial         int // transactions visible in part (or committed in one partition, aborted in another)
	ClaimMismatch   int // a member's End said committed (aborted) but the records are not (are) visible
	Dup             int // extra visible copies of input records
	Lost            int // input records with no visible copy
	Phantom         int // visible records not in the log, unparseable, or copying an input that does not exist
	Gap             int // input records below the committed offset without a visible copy
	Ahead           int // input records at or after the committed offset with a visible copy
	Behind          int // input records at or after the committed offset (the chain did not catch up)
	LiveBad         int // the live reader was given a record that is not a committed one of the final log

	Problems []string
	more     int
}

func (r *txnReport) problem(format string, args ...any) {
	if len(r.Problems) < faultMaxProblems {
		r.Problems = append(r.Problems, fmt.Sprintf(format, args...))
	} else {
		r.more++
	}
}

// OK is the pass criterion.
func (r txnReport) OK() bool {
	return r.AbortedVisible == 0 && r.CommittedHidden == 0 && r.Partial == 0 && r.ClaimMismatch == 0 && r.Dup == 0 &&
		r.Lost == 0 && r.Phantom == 0 && r.Gap == 0 && r.Ahead == 0 && r.Behind == 0 && r.LiveBad == 0 &&
		r.Undecided == 0 && r.NonTxn == 0
}

func (r txnReport) Figures() string {
	return fmt.Sprintf("in=%d out: data=%d markers=%d committed=%d aborted=%d undecided=%d non-txn=%d visible=%d live-read=%d | txns by the members: committed=%d aborted=%d unknown=%d not-started=%d, visible=%d | duplicates=%d aborted-visible=%d committed-hidden=%d partial=%d claim-mismatch=%d lost=%d phantom=%d gap=%d ahead=%d behind=%d live-bad=%d",
		r.InRecords, r.OutData, r.OutMarkers, r.CommitFated, r.AbortFated, r.Undecided, r.NonTxn, r.Visible, r.LiveRead,
		r.TxnCommitted, r.TxnAborted, r.TxnUnknown, r.TxnNotStarted, r.TxnVisible,
		r.Dup, r.AbortedVisible, r.CommittedHidden, r.Partial, r.ClaimMismatch, r.Lost, r.Phantom, r.Gap, r.Ahead, r.Behind, r.LiveBad)
}

func (r txnReport) Details() string {
	s := strings.Join(r.Problems, "\n")
	if r.more > 0 {
		s += fmt.Sprintf("\n... and %d more", r.more)
	}
	return s
}

type txnPos struct {
	p   int32
	off int64
}

// txnFates derives each transactional data record's fate from the markers
// of its partition: the first marker of the same producer id after it.
func txnFates(log []txnOutRec) map[txnPos]txnFate {
	byPart := map[int32][]txnOutRec{}
	for _, rec := range log {
		byPart[rec.Partition] = append(byPart[rec.Partition], rec)
	}
	fate := map[txnPos]txnFate{}
	for p, recs := range byPart {
		sort.Slice(recs, func(i, j int) bool { return recs[i].Offset < recs[j].Offset })
		pending := map[int64][]int64{}
		for _, rec := range recs {
			switch {
			case rec.Control:
				f := fateAbort
				if rec.Commit {
					f = fateCommit
				}
				for _, off := range pending[rec.PID] {
					fate[txnPos{p, off}] = f
				}
				delete(pending, rec.PID)
			case rec.Txnl:
				fate[txnPos{p, rec.Offset}] = fateUndecided
				pending[rec.PID] = append(pending[rec.PID], rec.Offset)
			}
		}
	}
	return fate
}

// checkTxnChain checks a consume-transform-produce run:
//
//   - the fate of every record of `out` is its transaction's marker; none
//     may be left undecided once the run has settled;
//   - read_committed returns exactly the committed records (no aborted or
//     undecided one, no committed one missing), at the positions and with
//     the values the log holds; so does the live reader while faults ran
//     (everything it was given is a committed record of the final log);
//   - each transaction (poll batch) is visible whole or not at all: in
//     every partition exactly the count its records announce, one producer
//     id and epoch, and never committed in one partition and aborted in
//     another; a member's committed transaction is visible, its aborted one
//     is not;
//   - every record of `in` has exactly one visible copy, which carries its
//     value; no visible copy names an input that does not exist;
//   - the group's committed offset on each `in` partition is where the
//     copies end: every input below it copied, none at or after it, and it
//     is the partition's end (the chain caught up).
func checkTxnChain(d txnChainData) txnReport {
	var r txnReport
	r.InRecords = len(d.In)
	fate := txnFates(d.OutLog)
	logAt := map[txnPos]txnOutRec{}
	for _, rec := range d.OutLog {
		at := txnPos{rec.Partition, rec.Offset}
		logAt[at] = rec
		if rec.Control {
			r.OutMarkers++
			continue
		}
		r.OutData++
		if !rec.Txnl {
			r.NonTxn++
			r.problem("NON-TRANSACTIONAL: %s is in `out` without the transactional attribute", rec)
			continue
		}
		switch fate[at] {
		case fateCommit:
			r.CommitFated++
		case fateAbort:
			r.AbortFated++
		default:
			r.Undecided++
			r.problem("UNDECIDED: %s has no marker of its producer after it in the settled log", rec)
		}
	}

	// read_committed against the fates.
	visible := map[txnPos]txnOutRec{}
	var visibleOrder []txnOutRec
	lastOff := map[int32]int64{}
	for _, rec := range d.OutRC {
		if prev, ok := lastOff[rec.Partition]; ok && rec.Offset <= prev {
			r.Phantom++
			r.problem("REREAD: read_committed returned p%d@%d after p%d@%d", rec.Partition, rec.Offset, rec.Partition, prev)
			continue
		}
		lastOff[rec.Partition] = rec.Offset
		if rec.Control {
			continue
		}
		at := txnPos{rec.Partition, rec.Offset}
		lr, inLog := logAt[at]
		switch {
		case !inLog || lr.Control || lr.Raw != rec.Raw:
			r.Phantom++
			r.problem("PHANTOM: read_committed returned %s, the log holds %v there", rec, describeAt(lr, inLog))
			continue
		case rec.Bad:
			r.Phantom++
			r.problem("UNPARSEABLE: read_committed returned p%d@%d with value %q", rec.Partition, rec.Offset, rec.Raw)
			continue
		}
		switch fate[at] {
		case fateAbort:
			r.AbortedVisible++
			r.problem("ABORTED VISIBLE: read_committed returned %s, whose transaction was aborted", rec)
		case fateUndecided:
			r.AbortedVisible++
			r.problem("UNDECIDED VISIBLE: read_committed returned %s, whose transaction has no marker", rec)
		}
		r.Visible++
		visible[at] = rec
		visibleOrder = append(visibleOrder, rec)
	}
	for _, rec := range d.OutLog {
		at := txnPos{rec.Partition, rec.Offset}
		if !rec.Control && rec.Txnl && fate[at] == fateCommit {
			if _, ok := visible[at]; !ok {
				r.CommittedHidden++
				r.problem("COMMITTED HIDDEN: %s was committed but read_committed did not return it", rec)
			}
		}
	}

	// The live reader.
	liveLast := map[int32]int64{}
	for _, rec := range d.Live {
		if prev, ok := liveLast[rec.Partition]; ok && rec.Offset <= prev {
			r.LiveBad++
			r.problem("LIVE REREAD: the live read_committed reader was given p%d@%d after p%d@%d", rec.Partition, rec.Offset, rec.Partition, prev)
			continue
		}
		liveLast[rec.Partition] = rec.Offset
		if rec.Control {
			continue
		}
		r.LiveRead++
		at := txnPos{rec.Partition, rec.Offset}
		lr, inLog := logAt[at]
		switch {
		case !inLog || lr.Control || lr.Raw != rec.Raw:
			r.LiveBad++
			r.problem("LIVE PHANTOM: the live read_committed reader was given %s, the final log holds %v there", rec, describeAt(lr, inLog))
		case fate[at] != fateCommit:
			r.LiveBad++
			r.problem("LIVE %s VISIBLE: the live read_committed reader was given %s", strings.ToUpper(fate[at].String()), rec)
		}
	}

	// Transactions: whole or nothing.
	type txnView struct {
		perPart  map[int32]int
		counts   []int
		prods    map[[2]int64]bool
		countsOK bool
	}
	views := map[string]*txnView{}
	for _, rec := range visibleOrder {
		v := views[rec.Val.Batch]
		if v == nil {
			v = &txnView{perPart: map[int32]int{}, counts: rec.Val.Counts, prods: map[[2]int64]bool{}, countsOK: true}
			views[rec.Val.Batch] = v
		}
		v.perPart[rec.Partition]++
		v.prods[[2]int64{rec.PID, int64(rec.Epoch)}] = true
		if !slices.Equal(v.counts, rec.Val.Counts) {
			v.countsOK = false
		}
	}
	partial := map[string]bool{}
	for _, id := range slices.Sorted(func(yield func(string) bool) {
		for id := range views {
			if !yield(id) {
				return
			}
		}
	}) {
		v := views[id]
		whole := v.countsOK && len(v.prods) == 1
		for p := range max(len(v.counts), d.OutParts) {
			want := 0
			if p < len(v.counts) {
				want = v.counts[p]
			}
			if v.perPart[int32(p)] != want {
				whole = false
			}
		}
		if !whole {
			partial[id] = true
			r.problem("PARTIAL: transaction %s is visible with %v records per partition (want %v) from producers %v", id, v.perPart, v.counts, slices.Collect(func(yield func([2]int64) bool) {
				for k := range v.prods {
					if !yield(k) {
						return
					}
				}
			}))
		}
	}
	fates := map[string]map[txnFate]int{}
	for _, rec := range d.OutLog {
		if rec.Control || !rec.Txnl || rec.Bad {
			continue
		}
		if fates[rec.Val.Batch] == nil {
			fates[rec.Val.Batch] = map[txnFate]int{}
		}
		fates[rec.Val.Batch][fate[txnPos{rec.Partition, rec.Offset}]]++
	}
	for id, fs := range fates {
		if fs[fateCommit] > 0 && fs[fateAbort] > 0 && !partial[id] {
			partial[id] = true
			r.problem("TORN: transaction %s has %d committed and %d aborted records in the log", id, fs[fateCommit], fs[fateAbort])
		}
	}
	r.Partial = len(partial)
	r.TxnVisible = len(views)

	// The members' own account.
	known := map[string]bool{}
	for _, b := range d.Batches {
		known[b.ID] = true
		switch b.Outcome {
		case txnCommitted:
			r.TxnCommitted++
			v := views[b.ID]
			got := map[int32]int{}
			if v != nil {
				got = v.perPart
			}
			for p, want := range b.Counts {
				if got[int32(p)] != want {
					r.ClaimMismatch++
					r.problem("COMMITTED NOT VISIBLE: %s's End reported transaction %s (pid %d epoch %d, ended %s) committed; read_committed shows %v records per partition, want %v",
						b.Member, b.ID, b.PID, b.Epoch, b.Done.Format("15:04:05.000"), got, b.Counts)
					break
				}
			}
		case txnAborted:
			r.TxnAborted++
			if v := views[b.ID]; v != nil {
				r.ClaimMismatch++
				r.problem("ABORTED VISIBLE: %s's End reported transaction %s (pid %d epoch %d, ended %s) aborted; read_committed shows %v records per partition",
					b.Member, b.ID, b.PID, b.Epoch, b.Done.Format("15:04:05.000"), v.perPart)
			}
		case txnUnknown:
			r.TxnUnknown++
		case txnNotStarted:
			r.TxnNotStarted++
		}
	}
	for id := range views {
		if !known[id] {
			r.Phantom++
			r.problem("UNKNOWN TRANSACTION: %s is visible but no member ran it", id)
		}
	}

	// Exactly once per input record.
	inAt := map[txnPos]faultRecord{}
	for _, rec := range d.In {
		inAt[txnPos{rec.Partition, rec.Offset}] = rec
	}
	copies := map[txnPos][]txnOutRec{}
	for _, rec := range visibleOrder {
		src := txnPos{rec.Val.InPartition, rec.Val.InOffset}
		in, ok := inAt[src]
		if !ok {
			r.Phantom++
			r.problem("PHANTOM COPY: %s copies in p%d@%d, which `in` does not hold", rec, src.p, src.off)
			continue
		}
		if in.Value != rec.Val.Seq {
			r.Phantom++
			r.problem("MISTRACED: %s says in p%d@%d holds seq %s, it holds %s", rec, src.p, src.off, rec.Val.Seq, in.Value)
		}
		copies[src] = append(copies[src], rec)
	}
	for _, in := range d.In {
		at := txnPos{in.Partition, in.Offset}
		c := copies[at]
		switch {
		case len(c) == 0:
			r.Lost++
		case len(c) > 1:
			r.Dup += len(c) - 1
			var where []string
			for _, o := range c {
				where = append(where, o.String())
			}
			r.problem("DUPLICATE: in %s has %d visible copies: %s", in, len(c), strings.Join(where, "; "))
		}
		committed := d.Committed[in.Partition]
		if in.Offset < committed && len(c) == 0 {
			r.Gap++
			r.problem("GAP: in %s is below the group's committed offset %d but has no visible copy", in, committed)
		}
		if in.Offset >= committed {
			if len(c) > 0 {
				r.Ahead++
				r.problem("AHEAD: in %s is at or after the group's committed offset %d but has a visible copy (%s): it would be copied again", in, committed, c[0])
			} else {
				r.Behind++
			}
		}
	}
	for _, p := range slices.Sorted(func(yield func(int32) bool) {
		for p := range d.InEnds {
			if !yield(p) {
				return
			}
		}
	}) {
		if c, e := d.Committed[p], d.InEnds[p]; c != e {
			r.problem("COMMITTED OFFSET: in partition %d: the group committed %d, the partition ends at %d", p, c, e)
			if c > e {
				r.Ahead++
			}
		}
	}
	return r
}

func describeAt(rec txnOutRec, ok bool) string {
	if !ok {
		return "nothing"
	}
	return rec.String()
}

// ---- unit tests of the checker on synthetic histories ----

// synthTxnRun builds a clean run: n input records on inParts partitions,
// copied in transactions of batch records each, round-robin over outParts
// output partitions, every transaction committed (one producer, epoch 0,
// one marker per partition touched after the transaction's records).
func synthTxnRun(n, inParts, outParts, batch int) txnChainData {
	d := txnChainData{InEnds: map[int32]int64{}, Committed: map[int32]int64{}, OutParts: outParts}
	for i := range n {
		p := int32(i % inParts)
		d.In = append(d.In, faultRecord{Partition: p, Offset: d.InEnds[p], Key: fmt.Sprintf("k%d", i%faultKeys), Value: fmt.Sprint(i)})
		d.InEnds[p]++
	}
	outNext := map[int32]int64{}
	rr := 0
	for b := 0; b*batch < n; b++ {
		ins := d.In[b*batch : min(n, (b+1)*batch)]
		id := fmt.Sprintf("m1.1.%d", b+1)
		counts := make([]int, outParts)
		parts := make([]int32, len(ins))
		for i := range ins {
			parts[i] = int32(rr % outParts)
			rr++
			counts[parts[i]]++
		}
		for i, in := range ins {
			p := parts[i]
			v, _ := json.Marshal(txnOutValue{InPartition: in.Partition, InOffset: in.Offset, Seq: in.Value, Batch: id, Counts: counts})
			rec := txnOutRec{Partition: p, Offset: outNext[p], PID: 7, Txnl: true, Raw: string(v)}
			rec.Val = txnOutValue{InPartition: in.Partition, InOffset: in.Offset, Seq: in.Value, Batch: id, Counts: slices.Clone(counts)}
			outNext[p]++
			d.OutLog = append(d.OutLog, rec)
		}
		for p := range int32(outParts) {
			if counts[p] > 0 {
				d.OutLog = append(d.OutLog, txnOutRec{Partition: p, Offset: outNext[p], PID: 7, Txnl: true, Control: true, Commit: true})
				outNext[p]++
			}
		}
		d.Batches = append(d.Batches, txnBatch{ID: id, Member: "m1", Session: 1, Inputs: len(ins), Counts: counts, Outcome: txnCommitted, PID: 7})
		for _, in := range ins {
			d.Committed[in.Partition] = max(d.Committed[in.Partition], in.Offset+1)
		}
	}
	sort.SliceStable(d.OutLog, func(i, j int) bool { return d.OutLog[i].Partition < d.OutLog[j].Partition })
	d.OutRC = slices.Clone(d.OutLog)
	d.Live = slices.Clone(d.OutLog)
	return d
}

// abortTxn turns transaction id's markers into abort markers and drops its
// records from read_committed (and the live read), as a correct broker
// would show an aborted transaction.
func (d *txnChainData) abortTxn(id string) {
	type key struct {
		p   int32
		pid int64
	}
	mine := map[key]bool{}
	for i := range d.OutLog {
		rec := &d.OutLog[i]
		if rec.Control && mine[key{rec.Partition, rec.PID}] {
			rec.Commit = false
			delete(mine, key{rec.Partition, rec.PID})
		}
		if !rec.Control && rec.Val.Batch == id {
			mine[key{rec.Partition, rec.PID}] = true
		}
	}
	var rc []txnOutRec
	for _, rec := range d.OutLog {
		if !rec.Control && rec.Val.Batch == id {
			continue
		}
		rc = append(rc, rec)
	}
	d.OutRC = rc
	d.Live = slices.Clone(rc)
}

func TestFaultTxnCheckerClean(t *testing.T) {
	d := synthTxnRun(100, 4, 3, 7)
	r := checkTxnChain(d)
	if !r.OK() || r.Visible != 100 || r.Lost != 0 || r.TxnCommitted != 15 || r.TxnVisible != 15 {
		t.Fatalf("clean run: %s\n%s", r.Figures(), r.Details())
	}
	// An aborted transaction whose inputs a later transaction copied again
	// (as after a rebalance): still exactly once.
	d = synthTxnRun(20, 1, 2, 5)
	// Re-run the first transaction's inputs as transaction m1.2.1, and
	// abort the original.
	var redo []txnOutRec
	outNext := map[int32]int64{}
	for _, rec := range d.OutLog {
		outNext[rec.Partition] = max(outNext[rec.Partition], rec.Offset+1)
	}
	counts := []int{0, 0}
	for _, rec := range d.OutLog {
		if !rec.Control && rec.Val.Batch == "m1.1.1" {
			counts[rec.Partition]++
		}
	}
	for _, rec := range d.OutLog {
		if rec.Control || rec.Val.Batch != "m1.1.1" {
			continue
		}
		c := rec
		c.Offset = outNext[c.Partition]
		outNext[c.Partition]++
		c.PID = 8
		c.Val.Batch = "m1.2.1"
		v, _ := json.Marshal(c.Val)
		c.Raw = string(v)
		redo = append(redo, c)
	}
	for p := range int32(2) {
		redo = append(redo, txnOutRec{Partition: p, Offset: outNext[p], PID: 8, Txnl: true, Control: true, Commit: true})
	}
	d.OutLog = append(d.OutLog, redo...)
	d.Batches[0].Outcome = txnUnknown
	d.Batches = append(d.Batches, txnBatch{ID: "m1.2.1", Member: "m1", Session: 2, Counts: counts, Outcome: txnCommitted, PID: 8})
	d.abortTxn("m1.1.1")
	r = checkTxnChain(d)
	if !r.OK() || r.AbortFated != 5 || r.Visible != 20 {
		t.Fatalf("aborted and redone: %s\n%s", r.Figures(), r.Details())
	}
}

func TestFaultTxnCheckerAnomalies(t *testing.T) {
	// An aborted transaction's records returned by read_committed.
	d := synthTxnRun(40, 2, 2, 4)
	d.abortTxn("m1.1.3")
	d.Batches[2].Outcome = txnUnknown
	rc := slices.Clone(d.OutLog) // read_committed returns everything
	d.OutRC = rc
	r := checkTxnChain(d)
	if r.AbortedVisible != 4 || r.OK() {
		t.Fatalf("aborted visible: %s\n%s", r.Figures(), r.Details())
	}

	// A committed record read_committed does not return: hidden, and the
	// transaction is partial, and its input lost below the commit.
	d = synthTxnRun(40, 2, 2, 4)
	d.OutRC = slices.DeleteFunc(d.OutRC, func(rec txnOutRec) bool { return rec.Partition == 1 && rec.Offset == 3 })
	r = checkTxnChain(d)
	if r.CommittedHidden != 1 || r.Partial != 1 || r.Lost != 1 || r.Gap != 1 || r.ClaimMismatch != 1 || r.OK() {
		t.Fatalf("committed hidden: %s\n%s", r.Figures(), r.Details())
	}

	// A transaction committed in one partition and aborted in the other.
	d = synthTxnRun(40, 2, 2, 4)
	for i := range d.OutLog {
		if d.OutLog[i].Control && d.OutLog[i].Partition == 1 && d.OutLog[i].Offset == 2 {
			d.OutLog[i].Commit = false // m1.1.1's marker in partition 1
		}
	}
	d.OutRC = slices.DeleteFunc(d.OutRC, func(rec txnOutRec) bool { return !rec.Control && rec.Partition == 1 && rec.Val.Batch == "m1.1.1" })
	d.Live = slices.Clone(d.OutRC)
	r = checkTxnChain(d)
	if r.Partial != 1 || r.OK() {
		t.Fatalf("torn: %s\n%s", r.Figures(), r.Details())
	}

	// An input copied by two committed transactions.
	d = synthTxnRun(8, 1, 1, 4)
	dupRec := d.OutLog[0]
	dupRec.Offset = 100
	dupRec.Val.Batch = "m2.1.1"
	dupRec.Val.Counts = []int{1}
	v, _ := json.Marshal(dupRec.Val)
	dupRec.Raw = string(v)
	d.OutLog = append(d.OutLog, dupRec, txnOutRec{Partition: 0, Offset: 101, PID: 7, Txnl: true, Control: true, Commit: true})
	d.OutRC = slices.Clone(d.OutLog)
	d.Live = slices.Clone(d.OutLog)
	d.Batches = append(d.Batches, txnBatch{ID: "m2.1.1", Member: "m2", Counts: []int{1}, Outcome: txnCommitted})
	r = checkTxnChain(d)
	if r.Dup != 1 || r.OK() {
		t.Fatalf("duplicate: %s\n%s", r.Figures(), r.Details())
	}

	// The group committed past an input nobody copied, and short of the
	// end elsewhere.
	d = synthTxnRun(20, 2, 2, 4)
	d.In = append(d.In, faultRecord{Partition: 0, Offset: d.InEnds[0], Key: "k0", Value: "20"})
	d.InEnds[0]++
	d.Committed[0]++
	r = checkTxnChain(d)
	if r.Gap != 1 || r.Lost != 1 || r.OK() {
		t.Fatalf("gap: %s\n%s", r.Figures(), r.Details())
	}
	d = synthTxnRun(20, 2, 2, 4)
	d.Committed[1] -= 2
	r = checkTxnChain(d)
	if r.Ahead != 2 || r.OK() {
		t.Fatalf("ahead: %s\n%s", r.Figures(), r.Details())
	}

	// A member's committed transaction is missing altogether; a
	// transaction left without a marker.
	d = synthTxnRun(20, 2, 2, 4)
	d.Batches[1].Outcome = txnCommitted
	d.abortTxn("m1.1.2")
	r = checkTxnChain(d)
	if r.ClaimMismatch != 1 || r.Lost != 4 || r.OK() {
		t.Fatalf("committed not visible: %s\n%s", r.Figures(), r.Details())
	}
	d = synthTxnRun(20, 2, 2, 4) // partition 0: three offsets per transaction, its last marker at 14
	d.OutLog = slices.DeleteFunc(d.OutLog, func(rec txnOutRec) bool { return rec.Control && rec.Partition == 0 && rec.Offset == 14 })
	d.OutRC = slices.DeleteFunc(d.OutRC, func(rec txnOutRec) bool { return rec.Control && rec.Partition == 0 && rec.Offset == 14 })
	r = checkTxnChain(d)
	if r.Undecided != 2 || r.AbortedVisible != 2 || r.OK() {
		t.Fatalf("undecided: %s\n%s", r.Figures(), r.Details())
	}

	// The live reader was given an aborted record that the final
	// read_committed (correctly) hides.
	d = synthTxnRun(40, 2, 2, 4)
	d.abortTxn("m1.1.3")
	d.Batches[2].Outcome = txnAborted
	d.Live = slices.Clone(d.OutLog)
	r = checkTxnChain(d)
	if r.LiveBad != 4 || r.AbortedVisible != 0 || r.OK() {
		t.Fatalf("live aborted visible: %s\n%s", r.Figures(), r.Details())
	}
}
