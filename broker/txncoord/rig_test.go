package txncoord

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordlog/fjord/broker/replica"
	"github.com/fjordlog/fjord/broker/txn"
	"github.com/fjordlog/fjord/protocol/lifecycle"
	"github.com/fjordlog/fjord/storage"
	"github.com/fjordlog/fjord/storage/recordbatch"
)

// The rig runs a Coordinator the way the broker does, but around it:
//
//   - real replicas of __transaction_state (replica.Partition), each over a
//     storage.Log on one MemFS, so an append is a real append and "committed"
//     is the replica's own high watermark. At replication factor 3 (nodes 1,
//     2, 3; this is node 1) the watermark moves only when the test has nodes
//     2 and 3 fetch (replicate), as their fetchers would; at factor 1 it
//     moves at the flush the driver does itself.
//   - a fake broker (fakeHost): tracked goroutines, leaders from a map the
//     test edits, WriteTxnMarkers answered by a handler the test sets, every
//     marker request recorded with the bubble's clock.
//
// Every test runs in a synctest bubble: timeouts and backoffs elapse at
// once and exactly, and synctest.Wait stands for "everything the driver
// started has run as far as it can".

// markerCall is one WriteTxnMarkers the driver sent.
type markerCall struct {
	at   time.Time
	node int32
	req  *kmsg.WriteTxnMarkersRequest
}

// markerHandler answers a WriteTxnMarkers sent to node.
type markerHandler func(ctx context.Context, node int32, req *kmsg.WriteTxnMarkersRequest) (*kmsg.WriteTxnMarkersResponse, error)

// fakeHost is the broker as the coordinator sees it.
type fakeHost struct {
	wg sync.WaitGroup
	mu struct {
		sync.Mutex
		closed bool
		// gate, while set, holds every goroutine started until it closes.
		gate chan struct{}
		// leaders are the partitions' leaders in "the image"; a partition
		// that is absent belongs to a deleted topic.
		leaders    map[txn.TopicPartition]int32
		markers    markerHandler
		calls      []markerCall
		readFailed []error
		pidErr     error // AllocateProducerIDs fails with it while set
		pidAsks    int
		nextPid    int64
	}
}

func newFakeHost() *fakeHost {
	h := &fakeHost{}
	h.mu.leaders = map[txn.TopicPartition]int32{}
	h.mu.nextPid = 1000
	h.mu.markers = ackMarkers
	return h
}

func (h *fakeHost) Go(fn func()) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.mu.closed {
		return false
	}
	h.wg.Add(1)
	gate := h.mu.gate
	go func() {
		defer h.wg.Done()
		if gate != nil {
			<-gate
		}
		fn()
	}()
	return true
}

// hold makes the goroutines started from now on wait; the function it
// returns lets them run.
func (h *fakeHost) hold() (release func()) {
	gate := make(chan struct{})
	h.mu.Lock()
	h.mu.gate = gate
	h.mu.Unlock()
	return func() {
		h.mu.Lock()
		h.mu.gate = nil
		h.mu.Unlock()
		close(gate)
	}
}

func (h *fakeHost) ReadFailed(_ *replica.Partition, err error) {
	h.mu.Lock()
	h.mu.readFailed = append(h.mu.readFailed, err)
	h.mu.Unlock()
}

func (h *fakeHost) AllocateProducerIDs(context.Context) (int64, int32, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.mu.pidAsks++
	if h.mu.pidErr != nil {
		return 0, 0, h.mu.pidErr
	}
	first := h.mu.nextPid
	h.mu.nextPid += 1000
	return first, 1000, nil
}

func (h *fakeHost) WriteMarkers(ctx context.Context, node int32, req *kmsg.WriteTxnMarkersRequest) (*kmsg.WriteTxnMarkersResponse, error) {
	h.mu.Lock()
	h.mu.calls = append(h.mu.calls, markerCall{at: time.Now(), node: node, req: req})
	fn := h.mu.markers
	h.mu.Unlock()
	return fn(ctx, node, req)
}

func (h *fakeHost) Leader(topic string, partition int32) (int32, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	l, ok := h.mu.leaders[txn.TopicPartition{Topic: topic, Partition: partition}]
	if !ok {
		return -1, false
	}
	return l, true
}

// Code classifies the errors a replica and its log return here as the
// broker's errorCode does.
func (h *fakeHost) Code(err error) int16 {
	var ce replica.CodeError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ce):
		return int16(ce)
	case errors.Is(err, replica.ErrNotEnoughReplicasAfterAppend):
		return kerr.NotEnoughReplicasAfterAppend.Code
	case errors.Is(err, replica.ErrTimedOut):
		return kerr.RequestTimedOut.Code
	case errors.Is(err, storage.ErrClosed), errors.Is(err, replica.ErrNotLeader):
		return kerr.NotLeaderForPartition.Code
	}
	return kerr.UnknownServerError.Code
}

func (h *fakeHost) setLeader(topic string, partition, leader int32) {
	h.mu.Lock()
	h.mu.leaders[txn.TopicPartition{Topic: topic, Partition: partition}] = leader
	h.mu.Unlock()
}

func (h *fakeHost) dropTopic(topic string) {
	h.mu.Lock()
	for tp := range h.mu.leaders {
		if tp.Topic == topic {
			delete(h.mu.leaders, tp)
		}
	}
	h.mu.Unlock()
}

func (h *fakeHost) setMarkers(fn markerHandler) {
	h.mu.Lock()
	h.mu.markers = fn
	h.mu.Unlock()
}

func (h *fakeHost) markerCalls() []markerCall {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]markerCall(nil), h.mu.calls...)
}

// close stops the host taking goroutines and waits for those it ran; the
// caller has ended their context.
func (h *fakeHost) close() {
	h.mu.Lock()
	h.mu.closed = true
	h.mu.Unlock()
	h.wg.Wait()
}

// ackMarkers answers every partition of a WriteTxnMarkers NONE.
func ackMarkers(_ context.Context, _ int32, req *kmsg.WriteTxnMarkersRequest) (*kmsg.WriteTxnMarkersResponse, error) {
	return markersAnswer(req, func(string, int32) int16 { return 0 }), nil
}

// markersAnswer answers every partition of req with code(topic, partition).
func markersAnswer(req *kmsg.WriteTxnMarkersRequest, code func(string, int32) int16) *kmsg.WriteTxnMarkersResponse {
	resp := kmsg.NewPtrWriteTxnMarkersResponse()
	for _, m := range req.Markers {
		rm := kmsg.NewWriteTxnMarkersResponseMarker()
		rm.ProducerID = m.ProducerID
		for _, t := range m.Topics {
			rt := kmsg.NewWriteTxnMarkersResponseMarkerTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewWriteTxnMarkersResponseMarkerTopicPartition()
				rp.Partition, rp.ErrorCode = p, code(t.Topic, p)
				rt.Partitions = append(rt.Partitions, rp)
			}
			rm.Topics = append(rm.Topics, rt)
		}
		resp.Markers = append(resp.Markers, rm)
	}
	return resp
}

// markerParts lists the partitions of a WriteTxnMarkers as "t-0" strings,
// in request order.
func markerParts(req *kmsg.WriteTxnMarkersRequest) []string {
	var out []string
	for _, m := range req.Markers {
		for _, t := range m.Topics {
			for _, p := range t.Partitions {
				out = append(out, fmt.Sprintf("%s-%d", t.Topic, p))
			}
		}
	}
	return out
}

// replicaHost opens the replicas' logs on the rig's MemFS, at once.
type replicaHost struct{ dir string }

func (h replicaHost) Open(p *replica.Partition) {
	lg, err := storage.Open(h.dir, p.Settings().Storage, zerolog.Nop())
	p.Opened(lg, err)
}

func (h replicaHost) Delete(p *replica.Partition) { p.Step(replica.LogDeleted{}) }

// Repair reopens the log in place (the rig's disks do not fail).
func (h replicaHost) Repair(p *replica.Partition, _ replica.Repair) {
	if lg := p.Log(); lg != nil {
		lg.Close()
	}
	h.Open(p)
}

func (replicaHost) Propose(*replica.Partition, replica.Proposal) {}
func (replicaHost) Ended(*replica.Partition)                     {}
func (replicaHost) Changed(*replica.Partition)                   {}

// logLines collects the coordinator's log, one entry per line.
type logLines struct {
	mu    sync.Mutex
	lines []string
}

func (l *logLines) Write(p []byte) (int, error) {
	l.mu.Lock()
	l.lines = append(l.lines, strings.TrimSpace(string(p)))
	l.mu.Unlock()
	return len(p), nil
}

func (l *logLines) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.lines)
}

func (l *logLines) since(n int) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.lines[n:]...)
}

// rigConfig shapes a rig; zero fields take defaults.
type rigConfig struct {
	partitions int   // of __transaction_state; default 1
	rf         int   // 1 or 3; default 1
	minISR     int32 // min.insync.replicas of the topic; default 1
	epoch      int32 // leader epoch the rig's partitions start at; default 1
	txn        txn.Config
	fs         *storage.MemFS // the logs' file system; default a new one
	// before runs once the partitions are open and led, before the
	// coordinator hears of them (to write their logs).
	before func(r *rig)
	// unavailable: the load is expected to fail; newRig does not require
	// the partitions to serve.
	unavailable bool
}

type rig struct {
	t      *testing.T
	cfg    rigConfig
	fs     *storage.MemFS
	faults *faultFS // fs, as the logs see it
	host   *fakeHost
	c      *Coordinator
	cancel context.CancelFunc
	log    *logLines
	parts  []*replica.Partition
	closed bool
}

// newRig starts a coordinator on node 1 whose partitions of
// __transaction_state it leads at cfg.epoch, and waits until it serves.
// Call it inside a synctest bubble.
func newRig(t *testing.T, cfg rigConfig) *rig {
	t.Helper()
	if cfg.partitions == 0 {
		cfg.partitions = 1
	}
	if cfg.rf == 0 {
		cfg.rf = 1
	}
	if cfg.minISR == 0 {
		cfg.minISR = 1
	}
	if cfg.epoch == 0 {
		cfg.epoch = 1
	}
	if cfg.txn == (txn.Config{}) {
		cfg.txn = txn.DefaultConfig()
	}
	if cfg.fs == nil {
		cfg.fs = storage.NewMemFS()
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &rig{t: t, cfg: cfg, fs: cfg.fs, faults: &faultFS{FS: cfg.fs}, host: newFakeHost(), cancel: cancel, log: &logLines{}}
	c, err := New(ctx, Config{Txn: cfg.txn, Logger: zerolog.New(r.log)}, r.host)
	if err != nil {
		t.Fatal(err)
	}
	r.c = c
	c.Start()
	t.Cleanup(r.close)
	for i := range cfg.partitions {
		r.parts = append(r.parts, r.newPartition(int32(i), r.assignment(1, cfg.epoch)))
	}
	if cfg.before != nil {
		cfg.before(r)
	}
	r.c.Follow(r.parts)
	synctest.Wait()
	if !cfg.unavailable {
		for i := range r.parts {
			r.mustServe(int32(i))
		}
	}
	return r
}

// newPartition makes this node's replica of partition i, assigned a.
func (r *rig) newPartition(i int32, a replica.Assignment) *replica.Partition {
	sc := storage.DefaultConfig()
	// Small segments: MemFS copies a whole file at each sync, and a segment
	// is preallocated up to 4 MiB ahead.
	sc.FS, sc.Compacted, sc.SegmentBytes = r.faults, true, 64<<10
	h := replicaHost{dir: fmt.Sprintf("/data/%s-%d", Topic, i)}
	p := replica.NewPartition(replica.PartitionConfig{Topic: Topic, Index: i, Logger: zerolog.Nop(),
		Settings: replica.Settings{Storage: sc, FlushMessages: 1, MinISR: r.cfg.minISR},
		Core: replica.Config{ID: 1, SyncOnAck: true, LagMs: 10_000, OpenTimeoutMs: 10_000, AlterTimeoutMs: 10_000,
			Open: lifecycle.Backoff{Initial: time.Second, Max: time.Second}, OpenAttempts: 2, Alter: lifecycle.Backoff{Initial: 100 * time.Millisecond, Max: 100 * time.Millisecond}}}, h)
	p.Step(replica.Assign{Assignment: a})
	p.Start()
	<-p.OpenAnswered()
	if p.Log() == nil {
		r.t.Fatalf("partition %d did not open", i)
	}
	return p
}

// assignment places partitions on nodes 1..rf with leader at epoch.
func (r *rig) assignment(leader, epoch int32) replica.Assignment {
	nodes := []int32{1, 2, 3}[:r.cfg.rf]
	return replica.Assignment{Leader: leader, LeaderEpoch: epoch, PartitionEpoch: epoch,
		Replicas: nodes, ISR: nodes, Live: nodes}
}

// moveLeader makes node leader lead partition i at epoch (this node
// follows unless leader is 1), as a new metadata image would; the
// coordinator hears of it only at the next follow.
func (r *rig) moveLeader(i, leader, epoch int32) {
	r.parts[i].Step(replica.Assign{Assignment: r.assignment(leader, epoch)})
}

func (r *rig) follow() { r.c.Follow(r.parts) }

// mustServe fails unless partition i's table serves.
func (r *rig) mustServe(i int32) {
	r.t.Helper()
	id := r.idOn(i, "")
	if err := r.c.Status(id); err != nil {
		r.t.Fatalf("partition %d: %v", i, err)
	}
}

// idOn is a transactional id with the given prefix that lives on
// partition i.
func (r *rig) idOn(i int32, prefix string) string {
	for n := 0; ; n++ {
		id := fmt.Sprintf("%s%d", prefix, n)
		if PartitionOf(id, int32(len(r.parts))) == i {
			return id
		}
	}
}

// replicate has nodes 2 and 3 fetch partition i up to its log end, which
// commits everything appended (and flushed) so far.
func (r *rig) replicate(i int32) {
	p := r.parts[i]
	end := p.Log().EndOffset()
	for _, id := range []int32{2, 3}[:r.cfg.rf-1] {
		p.FollowerFetched(id, p.View().LeaderEpoch, end, end, -1)
	}
}

// settle lets the driver run and, at replication factor 3, replicates
// every led partition until nothing more is appended.
func (r *rig) settle() {
	r.t.Helper()
	for range 20 {
		synctest.Wait()
		moved := false
		for i, p := range r.parts {
			if p.Leads() && p.HW() < p.Log().EndOffset() {
				r.replicate(int32(i))
				moved = true
			}
		}
		if !moved {
			return
		}
	}
	r.t.Fatal("the partitions keep growing")
}

// close stops the coordinator and closes the logs.
func (r *rig) close() {
	if r.closed {
		return
	}
	r.closed = true
	r.cancel()
	r.host.close()
	for _, p := range r.parts {
		if lg := p.Log(); lg != nil {
			lg.Close()
		}
	}
}

// replies collects the answers given to one request.
type replies struct {
	mu  sync.Mutex
	got []txn.Answer
	at  time.Time // of the first answer
}

func (rp *replies) reply(a txn.Answer) {
	rp.mu.Lock()
	if len(rp.got) == 0 {
		rp.at = time.Now()
	}
	rp.got = append(rp.got, a)
	rp.mu.Unlock()
}

// when is the time of the first answer.
func (rp *replies) when() time.Time {
	rp.mu.Lock()
	defer rp.mu.Unlock()
	return rp.at
}

func (rp *replies) all() []txn.Answer {
	rp.mu.Lock()
	defer rp.mu.Unlock()
	return append([]txn.Answer(nil), rp.got...)
}

// one returns the request's answer, failing unless exactly one came.
func (rp *replies) one(t *testing.T) txn.Answer {
	t.Helper()
	got := rp.all()
	if len(got) != 1 {
		t.Fatalf("%d answers, want 1: %+v", len(got), got)
	}
	return got[0]
}

// none fails if the request has been answered.
func (rp *replies) none(t *testing.T) {
	t.Helper()
	if got := rp.all(); len(got) != 0 {
		t.Fatalf("answered early: %+v", got)
	}
}

func (r *rig) init(id string) *replies {
	rp := &replies{}
	r.c.InitProducerID(txn.InitRequest{TxnID: id, TimeoutMs: 60_000, ProducerID: -1, ProducerEpoch: -1, Version: 4}, rp.reply)
	return rp
}

func (r *rig) add(id string, pid int64, epoch int16, tps ...txn.TopicPartition) *replies {
	rp := &replies{}
	r.c.AddPartitions(txn.AddPartitionsRequest{TxnID: id, ProducerID: pid, ProducerEpoch: epoch, Partitions: tps, Version: 3}, rp.reply)
	return rp
}

func (r *rig) end(id string, pid int64, epoch int16, commit bool) *replies {
	rp := &replies{}
	r.c.EndTxn(txn.EndRequest{TxnID: id, ProducerID: pid, ProducerEpoch: epoch, Commit: commit, Version: 4}, rp.reply)
	return rp
}

// ongoing starts a transaction of id over tps and returns its producer id
// and epoch, settling each step.
func (r *rig) ongoing(id string, tps ...txn.TopicPartition) (int64, int16) {
	r.t.Helper()
	rp := r.init(id)
	r.settle()
	a := rp.one(r.t)
	if a.Code != 0 {
		r.t.Fatalf("init %s: %s", id, kerr.ErrorForCode(a.Code))
	}
	rp = r.add(id, a.ProducerID, a.ProducerEpoch, tps...)
	r.settle()
	for _, pc := range rp.one(r.t).Partitions {
		if pc.Code != 0 {
			r.t.Fatalf("add %s to %s: %s", pc.TopicPartition, id, kerr.ErrorForCode(pc.Code))
		}
	}
	return a.ProducerID, a.ProducerEpoch
}

// state is id's state as DescribeTransactions shows it, or its error.
func (r *rig) state(id string) string {
	d := r.c.Describe(id)
	if d.ErrorCode != 0 {
		return kerr.ErrorForCode(d.ErrorCode).Error()
	}
	return d.State
}

// record is one record of a __transaction_state log, decoded.
type record struct {
	offset int64
	id     string
	state  string // "tombstone" for a null value, "garbage" for one that does not decode
	pid    int64
	epoch  int16
	parts  []string
}

// records reads partition i's log, committed or not.
func (r *rig) records(i int32) []record {
	r.t.Helper()
	return readRecords(r.t, r.parts[i].Log())
}

func readRecords(t *testing.T, lg *storage.Log) []record {
	t.Helper()
	var out []record
	for off := lg.StartOffset(); off < lg.EndOffset(); {
		data, err := lg.Read(off, 1<<20, lg.EndOffset(), nil)
		if err != nil {
			t.Fatal(err)
		}
		if len(data) == 0 {
			break
		}
		for len(data) > 0 {
			info, err := recordbatch.ParseHeader(data)
			if err != nil {
				t.Fatal(err)
			}
			base := recordbatch.BaseOffset(data)
			recordbatch.EachRecord(data[:info.Bytes], info, func(sr recordbatch.Record) bool {
				var k kmsg.TxnMetadataKey
				if err := k.ReadFrom(sr.Key); err != nil {
					t.Fatalf("key at %d: %v", base, err)
				}
				rc := record{offset: base + int64(sr.OffsetDelta), id: k.TransactionalID, state: "tombstone"}
				if sr.Value != nil {
					var v kmsg.TxnMetadataValue
					if err := v.ReadFrom(sr.Value); err != nil {
						rc.state = "garbage"
					} else {
						rc.state, rc.pid, rc.epoch = v.State.String(), v.ProducerID, v.ProducerEpoch
						for _, vt := range v.Topics {
							for _, p := range vt.Partitions {
								rc.parts = append(rc.parts, fmt.Sprintf("%s-%d", vt.Topic, p))
							}
						}
					}
				}
				out = append(out, rc)
				return true
			})
			off = base + int64(info.LastDelta) + 1
			data = data[info.Bytes:]
		}
	}
	return out
}

// states lists id's record states in log order.
func states(recs []record, id string) []string {
	var out []string
	for _, rc := range recs {
		if rc.id == id {
			out = append(out, rc.state)
		}
	}
	return out
}

// appendRaw appends one record to partition i as its leader and flushes
// it, as another coordinator (or another version of this one) would have
// written it; value nil is a tombstone.
func appendRaw(t *testing.T, p *replica.Partition, key, value []byte) {
	t.Helper()
	now := time.Now().UnixMilli()
	batch := recordbatch.Build([]recordbatch.KV{{Key: key, Value: value}}, now)
	info, err := recordbatch.Validate(batch, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := p.AppendAsLeader(batch, info, now); err != nil {
		t.Fatal(err)
	}
	if err := p.Flush(); err != nil {
		t.Fatal(err)
	}
}

func txnKey(id string) []byte {
	k := kmsg.TxnMetadataKey{Version: 0, TransactionalID: id}
	return k.AppendTo(nil)
}

func txnValue(state txn.State, pid int64, epoch int16, tps ...txn.TopicPartition) []byte {
	v := kmsg.NewTxnMetadataValue()
	v.Version = 1
	v.ProducerID, v.ProducerEpoch, v.TimeoutMillis, v.State = pid, epoch, 60_000, state
	v.LastUpdateTimestamp, v.StartTimestamp = time.Now().UnixMilli(), -1
	if state != txn.Empty {
		v.StartTimestamp = time.Now().UnixMilli()
		for _, g := range txn.ByTopic(tps) {
			vt := kmsg.NewTxnMetadataValueTopic()
			vt.Topic, vt.Partitions = g.Topic, g.Partitions
			v.Topics = append(v.Topics, vt)
		}
	}
	return v.AppendTo(nil)
}

// faultFS is an FS whose files' syncs fail while failSync is set.
type faultFS struct {
	storage.FS
	mu       sync.Mutex
	failSync bool
}

var errInjected = errors.New("injected I/O error")

func (f *faultFS) setFailSync(v bool) {
	f.mu.Lock()
	f.failSync = v
	f.mu.Unlock()
}

func (f *faultFS) syncErr() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.failSync {
		return errInjected
	}
	return nil
}

func (f *faultFS) OpenFile(name string, flag int, perm os.FileMode) (storage.File, error) {
	file, err := f.FS.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return &faultFile{File: file, fs: f}, nil
}

type faultFile struct {
	storage.File
	fs *faultFS
}

func (f *faultFile) Sync() error {
	if err := f.fs.syncErr(); err != nil {
		return err
	}
	return f.File.Sync()
}

func (f *faultFile) SyncData() error {
	if err := f.fs.syncErr(); err != nil {
		return err
	}
	return f.File.SyncData()
}

func tp(topic string, partition int32) txn.TopicPartition {
	return txn.TopicPartition{Topic: topic, Partition: partition}
}

func codeName(code int16) string {
	if code == 0 {
		return "NONE"
	}
	return kerr.ErrorForCode(code).Error()
}
