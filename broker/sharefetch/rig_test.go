package sharefetch

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordlog/fjord/broker/api"
	"github.com/fjordlog/fjord/broker/sharestate"
	"github.com/fjordlog/fjord/group/sharepart"
	"github.com/fjordlog/fjord/storage/recordbatch/batchtest"
)

// The rig: a node in memory. fakeHost is Host and APIHost; fakeReplica a
// partition's log and leadership; fakePersister the share coordinator,
// keeping every key's records and fencing as sharestate says.

const testGroup = "g"

var (
	topicA = [16]byte{0xa}
	topicB = [16]byte{0xb}
)

type fakeHost struct {
	t         testing.TB
	persister *fakePersister
	log       zerolog.Logger

	mu      sync.Mutex
	topics  map[[16]byte]string
	parts   map[tp]*fakeReplica
	gc      GroupConfig
	denied  map[string]bool
	leaders map[tp]Leader
	m       *Manager
	closing bool
	wg      sync.WaitGroup
}

func newFakeHost(t testing.TB, p *fakePersister) *fakeHost {
	return &fakeHost{
		t: t, persister: p, log: zerolog.Nop(),
		topics: map[[16]byte]string{}, parts: map[tp]*fakeReplica{},
		denied: map[string]bool{}, leaders: map[tp]Leader{},
		gc: GroupConfig{Partition: sharepart.Config{RecordLockDurationMs: 30000}, AutoOffsetReset: sharepart.AutoOffsetReset{Kind: sharepart.ResetEarliest}},
	}
}

func (h *fakeHost) addTopic(id [16]byte, name string, partitions int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.topics[id] = name
	for p := range partitions {
		h.parts[tp{id, int32(p)}] = &fakeReplica{t: h.t, epoch: 1, leading: true, waiters: map[chan struct{}]struct{}{}}
	}
}

func (h *fakeHost) replica(id [16]byte, p int32) *fakeReplica {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.parts[tp{id, p}]
}

func (h *fakeHost) Partition(id [16]byte, p int32) (Replica, int16) {
	h.mu.Lock()
	r := h.parts[tp{id, p}]
	h.mu.Unlock()
	if r == nil {
		return nil, kerr.UnknownTopicOrPartition.Code
	}
	if _, leads := r.LeaderEpoch(); !leads {
		return nil, kerr.NotLeaderForPartition.Code
	}
	return r, 0
}

func (h *fakeHost) TopicName(id [16]byte) string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.topics[id]
}

func (h *fakeHost) Persister() sharestate.Persister { return h.persister }

func (h *fakeHost) GroupConfig(string) GroupConfig {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.gc
}

func (h *fakeHost) Code(err error) int16 {
	switch {
	case errors.Is(err, sharestate.ErrNotAvailable):
		return kerr.CoordinatorNotAvailable.Code
	case errors.Is(err, errFakeStorage):
		return kerr.KafkaStorageError.Code
	}
	return kerr.UnknownServerError.Code
}

func (h *fakeHost) Go(fn func()) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closing {
		return false
	}
	h.wg.Add(1)
	go func() {
		defer h.wg.Done()
		fn()
	}()
	return true
}

func (h *fakeHost) Log() *zerolog.Logger { return &h.log }

// APIHost.
func (h *fakeHost) Manager() *Manager {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.m
}

func (h *fakeHost) TopicReadable(_ *api.Conn, topic string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return !h.denied[topic]
}

func (h *fakeHost) CurrentLeader(_ *api.Conn, id [16]byte, p int32) (Leader, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	l, ok := h.leaders[tp{id, p}]
	return l, ok
}

var errFakeStorage = errors.New("fake: disk on fire")

// fakeReplica is a partition's log: batches at consecutive offsets, a
// high watermark, a log start, and this node's leadership.
type fakeReplica struct {
	t        testing.TB
	mu       sync.Mutex
	epoch    int32
	leading  bool
	logStart int64
	hw       int64
	next     int64 // log end
	holdHW   bool  // appends do not move the high watermark
	batches  []fakeBatch
	waiters  map[chan struct{}]struct{}
	readErr  error
	// txns are the transactions written, in the order they began.
	txns []fakeTxn
}

// fakeTxn is one transaction of the log: its producer, its first offset,
// and its marker's offset (-1 while open).
type fakeTxn struct {
	pid           int64
	first, marker int64
	commit        bool
}

type fakeBatch struct {
	base, last, ts int64
	bytes          []byte
}

// produce appends a batch of n records (timestamp ts) and returns its
// base offset.
func (r *fakeReplica) produce(n int, ts int64) int64 {
	return r.appendBatch(batchtest.Opts{N: n, BaseTS: ts}, n)
}

// commitMarker appends a transaction marker (a control batch).
func (r *fakeReplica) commitMarker() int64 {
	return r.appendBatch(batchtest.Opts{Records: []batchtest.Record{batchtest.MarkerRecord(true, 0)},
		Attrs: batchtest.AttrControl | batchtest.AttrTransactional, Idempotent: true, PID: 7}, 1)
}

// txnBatch appends a transactional batch of n records of producer pid,
// beginning its transaction if none is open.
func (r *fakeReplica) txnBatch(pid int64, n int) int64 {
	r.mu.Lock()
	open := slices.ContainsFunc(r.txns, func(t fakeTxn) bool { return t.pid == pid && t.marker < 0 })
	if !open {
		r.txns = append(r.txns, fakeTxn{pid: pid, first: r.next, marker: -1})
	}
	r.mu.Unlock()
	return r.appendBatch(batchtest.Opts{N: n, Attrs: batchtest.AttrTransactional, Idempotent: true, PID: pid}, n)
}

// endTxn appends the marker ending pid's open transaction.
func (r *fakeReplica) endTxn(pid int64, commit bool) int64 {
	r.mu.Lock()
	i := slices.IndexFunc(r.txns, func(t fakeTxn) bool { return t.pid == pid && t.marker < 0 })
	if i < 0 {
		r.mu.Unlock()
		r.t.Fatalf("no open transaction of producer %d", pid)
	}
	r.txns[i].marker, r.txns[i].commit = r.next, commit
	r.mu.Unlock()
	return r.appendBatch(batchtest.Opts{Records: []batchtest.Record{batchtest.MarkerRecord(commit, 0)},
		Attrs: batchtest.AttrControl | batchtest.AttrTransactional, Idempotent: true, PID: pid}, 1)
}

func (r *fakeReplica) appendBatch(o batchtest.Opts, n int) int64 {
	r.mu.Lock()
	base := r.next
	o.BaseOffset = base
	b := batchtest.Build(r.t, o)
	ts := o.BaseTS
	if ts == 0 {
		ts = 1000
	}
	r.batches = append(r.batches, fakeBatch{base: base, last: base + int64(n) - 1, ts: ts, bytes: b})
	r.next += int64(n)
	if !r.holdHW {
		r.hw = r.next
	}
	ws := r.waitersLocked()
	r.mu.Unlock()
	signal(ws)
	return base
}

// setHW moves the high watermark (to the log end when hw < 0).
func (r *fakeReplica) setHW(hw int64) {
	r.mu.Lock()
	if hw < 0 {
		hw = r.next
	}
	r.hw = hw
	ws := r.waitersLocked()
	r.mu.Unlock()
	signal(ws)
}

// lead sets this node's leadership.
func (r *fakeReplica) lead(leading bool, epoch int32) {
	r.mu.Lock()
	r.leading, r.epoch = leading, epoch
	ws := r.waitersLocked()
	r.mu.Unlock()
	signal(ws)
}

// deleteRecords moves the log start to off (a batch boundary).
func (r *fakeReplica) deleteRecords(off int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.logStart = off
	r.batches = slices.DeleteFunc(r.batches, func(b fakeBatch) bool { return b.last < off })
}

func (r *fakeReplica) waitersLocked() []chan struct{} {
	out := make([]chan struct{}, 0, len(r.waiters))
	for ch := range r.waiters {
		out = append(out, ch)
	}
	return out
}

func (r *fakeReplica) LeaderEpoch() (int32, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.epoch, r.leading
}

func (r *fakeReplica) Offsets() (int64, int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.logStart, r.hw
}

// LastStable is the high watermark, or the first offset of the oldest
// transaction open or whose marker is not below it, when lower.
func (r *fakeReplica) LastStable() int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.lastStableLocked()
}

func (r *fakeReplica) lastStableLocked() int64 {
	lso := r.hw
	for _, t := range r.txns {
		if t.marker < 0 || t.marker >= r.hw {
			lso = min(lso, t.first)
		}
	}
	return lso
}

func (r *fakeReplica) Read(offset int64, maxBytes int, iso Isolation) ([]byte, []AbortedTxn, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.readErr != nil {
		return nil, nil, r.readErr
	}
	if offset < r.logStart {
		return nil, nil, fmt.Errorf("fake: offset %d below log start %d", offset, r.logStart)
	}
	limit := r.hw
	if iso == ReadCommitted {
		limit = r.lastStableLocked()
	}
	var out []byte
	for _, b := range r.batches {
		if b.last < offset {
			continue
		}
		if b.last >= limit || (len(out) > 0 && len(out)+len(b.bytes) > maxBytes) {
			break
		}
		out = append(out, b.bytes...)
	}
	var aborted []AbortedTxn
	if iso == ReadCommitted {
		// As the log's index answers: every aborted transaction whose
		// marker is at or after offset and which began before the bound
		// (a superset of those the batches read hold).
		for _, t := range r.txns {
			if t.marker >= offset && !t.commit && t.first < limit {
				aborted = append(aborted, AbortedTxn{ProducerID: t.pid, FirstOffset: t.first, LastOffset: t.marker})
			}
		}
	}
	return out, aborted, nil
}

func (r *fakeReplica) ListOffset(ts int64) (int64, bool, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	switch ts {
	case -1:
		return r.hw, true, nil
	case -2:
		return r.logStart, true, nil
	}
	for _, b := range r.batches {
		if b.ts >= ts && b.last < r.hw {
			return b.base, true, nil
		}
	}
	return -1, false, nil
}

func (r *fakeReplica) Watch(ch chan struct{}) {
	r.mu.Lock()
	r.waiters[ch] = struct{}{}
	r.mu.Unlock()
}

func (r *fakeReplica) Unwatch(ch chan struct{}) {
	r.mu.Lock()
	delete(r.waiters, ch)
	r.mu.Unlock()
}

// fakePersister keeps every key's records in write order and fences as
// sharestate says: a Read records the reader's leader epoch, and a Write
// (or Read) under an older epoch is ErrFencedLeaderEpoch.
type fakePersister struct {
	mu     sync.Mutex
	recs   map[sharepart.Key][]sharepart.Record
	epochs map[sharepart.Key]int32
	writes int
	// fail: the next Write (or Read) fails with it.
	failWrite, failRead error
	// gate, when set, holds every Write until a value is received.
	gate chan struct{}
}

func newFakePersister() *fakePersister {
	return &fakePersister{recs: map[sharepart.Key][]sharepart.Record{}, epochs: map[sharepart.Key]int32{}}
}

func (p *fakePersister) Read(ctx context.Context, key sharepart.Key, leaderEpoch int32) ([]sharepart.Record, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.failRead; err != nil {
		p.failRead = nil
		return nil, err
	}
	if e, ok := p.epochs[key]; ok && leaderEpoch < e {
		return nil, fmt.Errorf("fake read %s at %d < %d: %w", key, leaderEpoch, e, sharestate.ErrFencedLeaderEpoch)
	}
	p.epochs[key] = leaderEpoch
	recs := p.recs[key]
	if len(recs) == 0 {
		return nil, fmt.Errorf("fake read %s: %w", key, sharestate.ErrNoState)
	}
	return slices.Clone(recs), nil
}

func (p *fakePersister) Write(ctx context.Context, key sharepart.Key, leaderEpoch, _ int32, recs []sharepart.Record) error {
	p.mu.Lock()
	gate := p.gate
	p.mu.Unlock()
	if gate != nil {
		select {
		case <-gate:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.failWrite; err != nil {
		p.failWrite = nil
		return err
	}
	if e, ok := p.epochs[key]; ok && leaderEpoch < e {
		return fmt.Errorf("fake write %s at %d < %d: %w", key, leaderEpoch, e, sharestate.ErrFencedLeaderEpoch)
	}
	p.recs[key] = append(p.recs[key], recs...)
	p.writes++
	return nil
}

func (p *fakePersister) Delete(ctx context.Context, key sharepart.Key) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.recs, key)
	return nil
}

// durable restores key from what was written, as a new leader would.
func (p *fakePersister) durable(t testing.TB, key sharepart.Key) *sharepart.Partition {
	t.Helper()
	p.mu.Lock()
	recs := slices.Clone(p.recs[key])
	p.mu.Unlock()
	part, _, err := sharepart.Restore(key, sharepart.DefaultConfig(), 1<<30, 0, recs)
	if err != nil {
		t.Fatalf("restore %s: %v", key, err)
	}
	return part
}

// rig is a Manager on a fakeHost, with the two APIs' entries.
type rig struct {
	t       testing.TB
	h       *fakeHost
	m       *Manager
	fetchE  api.Entry
	ackE    api.Entry
	connCtx context.Context
	hangUp  context.CancelFunc
}

func newRig(t testing.TB, p *fakePersister, cfg Config, setup func(h *fakeHost)) *rig {
	t.Helper()
	h := newFakeHost(t, p)
	h.addTopic(topicA, "a", 2)
	h.addTopic(topicB, "b", 1)
	if setup != nil {
		setup(h)
	}
	return startRig(t, h, cfg)
}

func startRig(t testing.TB, h *fakeHost, cfg Config) *rig {
	t.Helper()
	h.mu.Lock()
	h.closing = false
	h.mu.Unlock()
	m, err := NewManager(h, cfg)
	if err != nil {
		t.Fatal(err)
	}
	h.mu.Lock()
	h.m = m
	h.mu.Unlock()
	es := Entries(h)
	ctx, cancel := context.WithCancel(context.Background())
	return &rig{t: t, h: h, m: m, fetchE: es[0], ackE: es[1], connCtx: ctx, hangUp: cancel}
}

// stop closes the Manager and waits for every goroutine of the rig.
func (r *rig) stop() {
	r.m.Close()
	r.h.mu.Lock()
	r.h.closing = true
	r.h.mu.Unlock()
	r.hangUp()
	r.h.wg.Wait()
}

func (r *rig) conn() *api.Conn {
	return &api.Conn{Ctx: r.connCtx, ClientID: "test", Principal: "User:test"}
}

// call serves one request and returns its answer (nil: none).
func call[Resp kmsg.Response](t testing.TB, e api.Entry, cc *api.Conn, req kmsg.Request) Resp {
	t.Helper()
	ch := make(chan kmsg.Response, 2)
	e.Handle(cc, req, func(r kmsg.Response) { ch <- r })
	r := <-ch
	select {
	case r2 := <-ch:
		t.Fatalf("responded twice: %v then %v", r, r2)
	default:
	}
	if r == nil {
		var zero Resp
		return zero
	}
	return r.(Resp)
}

func (r *rig) fetch(req *kmsg.ShareFetchRequest) *kmsg.ShareFetchResponse {
	r.t.Helper()
	return call[*kmsg.ShareFetchResponse](r.t, r.fetchE, r.conn(), req)
}

func (r *rig) ack(req *kmsg.ShareAcknowledgeRequest) *kmsg.ShareAcknowledgeResponse {
	r.t.Helper()
	return call[*kmsg.ShareAcknowledgeResponse](r.t, r.ackE, r.conn(), req)
}

// Requests.

func fetchReq(member string, epoch int32, parts ...tp) *kmsg.ShareFetchRequest {
	req := kmsg.NewPtrShareFetchRequest()
	req.Version = 2
	g := testGroup
	req.GroupID, req.MemberID = &g, &member
	req.ShareSessionEpoch = epoch
	req.MinBytes, req.MaxBytes, req.MaxRecords, req.BatchSize = 1, 1<<20, 500, 500
	req.MaxWaitMillis = 1000
	for _, p := range parts {
		fetchPartOf(req, p)
	}
	return req
}

func fetchPartOf(req *kmsg.ShareFetchRequest, p tp) *kmsg.ShareFetchRequestTopicPartition {
	ti := slices.IndexFunc(req.Topics, func(t kmsg.ShareFetchRequestTopic) bool { return t.TopicID == p.id })
	if ti < 0 {
		t := kmsg.NewShareFetchRequestTopic()
		t.TopicID = p.id
		req.Topics = append(req.Topics, t)
		ti = len(req.Topics) - 1
	}
	ps := &req.Topics[ti].Partitions
	pi := slices.IndexFunc(*ps, func(x kmsg.ShareFetchRequestTopicPartition) bool { return x.Partition == p.p })
	if pi < 0 {
		x := kmsg.NewShareFetchRequestTopicPartition()
		x.Partition = p.p
		*ps = append(*ps, x)
		pi = len(*ps) - 1
	}
	return &(*ps)[pi]
}

// withAcks piggybacks acknowledgements of p: batches of [first, last, type].
func withAcks(req *kmsg.ShareFetchRequest, p tp, batches ...[3]int64) *kmsg.ShareFetchRequest {
	fp := fetchPartOf(req, p)
	for _, b := range batches {
		ab := kmsg.NewShareFetchRequestTopicPartitionAcknowledgementBatch()
		ab.FirstOffset, ab.LastOffset, ab.AcknowledgeTypes = b[0], b[1], []int8{int8(b[2])}
		fp.AcknowledgementBatches = append(fp.AcknowledgementBatches, ab)
	}
	return req
}

func ackReq(member string, epoch int32, p tp, batches ...[3]int64) *kmsg.ShareAcknowledgeRequest {
	req := kmsg.NewPtrShareAcknowledgeRequest()
	req.Version = 2
	g := testGroup
	req.GroupID, req.MemberID = &g, &member
	req.ShareSessionEpoch = epoch
	t := kmsg.NewShareAcknowledgeRequestTopic()
	t.TopicID = p.id
	rp := kmsg.NewShareAcknowledgeRequestTopicPartition()
	rp.Partition = p.p
	for _, b := range batches {
		ab := kmsg.NewShareAcknowledgeRequestTopicPartitionAcknowledgementBatch()
		ab.FirstOffset, ab.LastOffset, ab.AcknowledgeTypes = b[0], b[1], []int8{int8(b[2])}
		rp.AcknowledgementBatches = append(rp.AcknowledgementBatches, ab)
	}
	t.Partitions = append(t.Partitions, rp)
	req.Topics = append(req.Topics, t)
	return req
}

// Answers, summarized.

// partAnswer is one partition of a ShareFetch answer.
type partAnswer struct {
	code, ackCode int16
	acquired      string // "first-last:count ..."
	offsets       []int64
	leader        [2]int32
}

func name(p tp) string {
	return fmt.Sprintf("%x/%d", p.id[0], p.p)
}

func answers(t testing.TB, resp *kmsg.ShareFetchResponse) map[string]partAnswer {
	t.Helper()
	out := map[string]partAnswer{}
	for _, rt := range resp.Topics {
		for _, rp := range rt.Partitions {
			k := name(tp{rt.TopicID, rp.Partition})
			if _, dup := out[k]; dup {
				t.Fatalf("partition %s answered twice", k)
			}
			if rp.Records == nil {
				t.Fatalf("partition %s: null records", k)
			}
			a := partAnswer{code: rp.ErrorCode, ackCode: rp.AcknowledgeErrorCode, leader: [2]int32{rp.CurrentLeader.LeaderID, rp.CurrentLeader.LeaderEpoch}}
			var rs []string
			for _, ar := range rp.AcquiredRecords {
				rs = append(rs, fmt.Sprintf("%d-%d:%d", ar.FirstOffset, ar.LastOffset, ar.DeliveryCount))
			}
			a.acquired = strings.Join(rs, " ")
			a.offsets = recordOffsets(t, rp.Records)
			for _, ar := range rp.AcquiredRecords {
				for o := ar.FirstOffset; o <= ar.LastOffset; o++ {
					if !slices.Contains(a.offsets, o) {
						t.Fatalf("partition %s: acquired offset %d not among the records sent %v", k, o, a.offsets)
					}
				}
			}
			out[k] = a
		}
	}
	return out
}

// recordOffsets lists the offsets of the data records in a Records field.
func recordOffsets(t testing.TB, b []byte) []int64 {
	t.Helper()
	var out []int64
	for _, s := range scan(b) {
		if s.control {
			continue
		}
		rb, recs := batchtest.Decode(t, b[s.from:s.to])
		for _, r := range recs {
			out = append(out, rb.FirstOffset+int64(r.OffsetDelta))
		}
	}
	return out
}

func ackCodes(resp *kmsg.ShareAcknowledgeResponse) map[string]int16 {
	out := map[string]int16{}
	for _, rt := range resp.Topics {
		for _, rp := range rt.Partitions {
			out[name(tp{rt.TopicID, rp.Partition})] = rp.ErrorCode
		}
	}
	return out
}

func keys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
