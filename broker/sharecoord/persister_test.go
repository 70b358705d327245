package sharecoord

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordlog/fjord/broker/api"
	"github.com/fjordlog/fjord/broker/sharestate"
	"github.com/fjordlog/fjord/group/sharepart"
)

// persisterFlow runs a share-partition leader's life against pers: it
// starts the share-partition, delivers and acknowledges records, fails
// over to a newer leader, resets and deletes it; after each step what
// Read hands back restores to what the leader holds.
func persisterFlow(t *testing.T, pers sharestate.Persister) {
	t.Helper()
	k := key("g", 1, 2)
	cfg := sharepart.Config{SnapshotUpdateRecordsPerSnapshot: 2, DeliveryCountLimit: 3}
	now := int64(1000)
	// write writes the records of the leader p at its epochs.
	write := func(p *sharepart.Partition, recs []sharepart.Record) {
		t.Helper()
		if err := pers.Write(ctx, k, p.LeaderEpoch(), p.StateEpoch(), recs); err != nil {
			t.Fatalf("write: %v", err)
		}
	}
	// same checks that what a new leader of leaderEpoch restores has
	// the live partition's durable state.
	same := func(live *sharepart.Partition, leaderEpoch int32) *sharepart.Partition {
		t.Helper()
		recs, err := pers.Read(ctx, k, leaderEpoch)
		if err != nil {
			t.Fatalf("read: %v", err)
		}
		got, snap, err := sharepart.Restore(k, cfg, leaderEpoch, now, recs)
		if err != nil {
			t.Fatalf("restore: %v", err)
		}
		if len(snap) != 1 || got.StartOffset() != live.StartOffset() || got.StateEpoch() != live.StateEpoch() ||
			durable(got) != durable(live) {
			t.Fatalf("restored start %d epoch %d %s, live start %d epoch %d %s", got.StartOffset(), got.StateEpoch(), durable(got),
				live.StartOffset(), live.StateEpoch(), durable(live))
		}
		return got
	}

	if _, err := pers.Read(ctx, k, 5); !errors.Is(err, sharestate.ErrNoState) {
		t.Fatalf("read before anything: %v", err)
	}
	p, recs := sharepart.New(k, cfg, sharepart.Init{StartOffset: 10, LeaderEpoch: 5}, now)
	write(p, recs)
	same(p, 5)
	for round := range int64(4) {
		now++
		from := 10 + 10*round
		acq, recs := p.Acquire(now, "m", sharepart.Fetch{From: p.NextFetchOffset(), End: from + 10,
			Records: []sharepart.Range{{First: p.NextFetchOffset(), Last: from + 9}}, MaxRecords: 100})
		if len(acq) == 0 {
			t.Fatalf("round %d: nothing acquired", round)
		}
		write(p, recs)
		recs, err := p.Acknowledge(now, "m", []sharepart.AckBatch{{First: from, Last: from + 4, Types: []int8{1}},
			{First: from + 5, Last: from + 9, Types: []int8{2}}})
		if err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		write(p, recs)
		same(p, 5)
	}
	// A new leader takes over: its read fences the old one.
	p2 := same(p, 6)
	if err := pers.Write(ctx, k, 5, 0, p.Snapshot(now)); !errors.Is(err, sharestate.ErrFencedLeaderEpoch) {
		t.Fatalf("a write of the old leader after the new one read: %v", err)
	}
	write(p2, p2.Snapshot(now)) // Restore's snapshot
	stale := same(p2, 6)
	recs, err := p2.Delete(now)
	if err != nil {
		t.Fatal(err)
	}
	write(p2, recs)
	if _, err := pers.Read(ctx, k, 6); !errors.Is(err, sharestate.ErrNoState) {
		t.Fatalf("read after delete: %v", err)
	}
	// A leader that loaded the state before the delete cannot bring it
	// back: not with a snapshot, not with an update.
	if err := pers.Write(ctx, k, 6, stale.StateEpoch(), stale.Snapshot(now)); !errors.Is(err, sharestate.ErrNoState) {
		t.Fatalf("a snapshot of a leader from before the delete: %v", err)
	}
	_, recs = stale.Acquire(now, "m", sharepart.Fetch{From: stale.NextFetchOffset(), End: stale.NextFetchOffset() + 1,
		Records: []sharepart.Range{{First: stale.NextFetchOffset(), Last: stale.NextFetchOffset()}}, MaxRecords: 1})
	if err := pers.Write(ctx, k, 6, stale.StateEpoch(), recs); !errors.Is(err, sharestate.ErrNoState) {
		t.Fatalf("an update of a leader from before the delete: %v", err)
	}
	if _, err := pers.Read(ctx, k, 6); !errors.Is(err, sharestate.ErrNoState) {
		t.Fatalf("read after the old leader's writes: %v", err)
	}
	if err := pers.Delete(ctx, k); err != nil {
		t.Fatalf("delete of nothing: %v", err)
	}
	// A share-partition that starts again is fenced by nothing of before.
	p3, recs := sharepart.New(k, cfg, sharepart.Init{StartOffset: 0, LeaderEpoch: 2}, now)
	write(p3, recs)
	same(p3, 2)
	// Only the group coordinator's Initialize changes the state epoch (see
	// adminFlow): a leader's own reset is fenced, and changes nothing.
	reset := same(p3, 2)
	recs, err = reset.ResetStartOffset(now, 3)
	if err != nil {
		t.Fatal(err)
	}
	if err := pers.Write(ctx, k, 2, reset.StateEpoch(), recs); !errors.Is(err, ErrFencedStateEpoch) {
		t.Fatalf("a leader's reset: %v", err)
	}
	same(p3, 2)
	if err := pers.Delete(ctx, k); err != nil {
		t.Fatal(err)
	}
}

// durable is p's in-flight window as its durable form: acquired reads as
// available, locks dropped.
func durable(p *sharepart.Partition) string {
	var b strings.Builder
	for _, r := range p.Batches() {
		st := r.State
		if st == sharepart.Acquired {
			st = sharepart.Available
		}
		fmt.Fprintf(&b, "[%d-%d %s %d]", r.First, r.Last, st, r.DeliveryCount)
	}
	return b.String()
}

func TestPersisterLocal(t *testing.T) {
	p, _ := leader(t, 1, t.TempDir())
	h := newTestHost(1)
	c := newCoord(t, h, testConfig(), p)
	persisterFlow(t, c.Persister())
	// Records for another key, or that do not decode, are refused.
	k := key("g", 1, 0)
	if err := c.Persister().Write(ctx, k, 0, 0, []sharepart.Record{sharepart.Tombstone(key("g", 1, 1))}); !errors.Is(err, sharepart.ErrCorrupt) {
		t.Fatalf("a record for another key: %v", err)
	}
	if err := c.Persister().Write(ctx, k, 0, 0, []sharepart.Record{{Key: []byte{1}}}); !errors.Is(err, sharepart.ErrCorrupt) {
		t.Fatalf("an undecodable record: %v", err)
	}
}

// peers routes asks to other nodes' share-group state APIs, through the
// wire format.
type peers struct {
	mu    sync.Mutex
	nodes map[int32]*apiHost
	// fail, if set, answers instead (for the retries).
	fail func(node int32, req kmsg.Request) (kmsg.Response, error)
}

func (ps *peers) ask(_ context.Context, node int32, req kmsg.Request) (kmsg.Response, error) {
	ps.mu.Lock()
	a, fail := ps.nodes[node], ps.fail
	ps.mu.Unlock()
	if fail != nil {
		if resp, err := fail(node, req); resp != nil || err != nil {
			return resp, err
		}
	}
	if a == nil {
		return nil, fmt.Errorf("no broker %d", node)
	}
	return a.dispatch(req)
}

// dispatch is serve without a test: the wire format both ways, at the
// newest version both sides speak.
func (a *apiHost) dispatch(req kmsg.Request) (kmsg.Response, error) {
	var e api.Entry
	for _, en := range Entries(a) {
		if en.Key == req.Key() {
			e = en
		}
	}
	v := min(req.MaxVersion(), e.Client.Max)
	req.SetVersion(v)
	in := kmsg.RequestForKey(req.Key())
	in.SetVersion(v)
	if err := in.ReadFrom(req.AppendTo(nil)); err != nil {
		return nil, err
	}
	got := make(chan kmsg.Response, 1)
	e.Handle(&api.Conn{Ctx: ctx}, in, func(r kmsg.Response) { got <- r })
	resp := <-got
	out := kmsg.ResponseForKey(req.Key())
	out.SetVersion(v)
	return out, out.ReadFrom(resp.AppendTo(nil))
}

// TestPersisterRemote: node 1's persister reaches node 2's coordinator
// over the RPCs.
func TestPersisterRemote(t *testing.T) {
	p, _ := leader(t, 2, t.TempDir())
	h2 := newTestHost(2)
	c2 := newCoord(t, h2, testConfig(), p)
	ps := &peers{nodes: map[int32]*apiHost{2: {h: h2, c: c2}}}
	h1 := newTestHost(1)
	h1.leaders, h1.ask = []int32{2}, ps.ask
	c1, err := New(ctx, testConfig(), h1)
	must(t, err)
	persisterFlow(t, c1.Persister())
	if n := len(snapshotOf(t, c2, 0)); n != 0 {
		t.Fatalf("node 2 holds %d keys after the flow deleted its one", n)
	}
}

// syncBuffer is a log sink the tests read.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) count(sub string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return strings.Count(s.b.String(), sub)
}

// TestPersisterRetries: a missing topic is asked for and retried; a
// coordinator that answers NOT_COORDINATOR or is unreachable is retried
// with backoff, found afresh each time, and logged once when it goes and
// once when it comes back; the retries are bounded.
func TestPersisterRetries(t *testing.T) {
	p, _ := leader(t, 2, t.TempDir())
	h2 := newTestHost(2)
	c2 := newCoord(t, h2, testConfig(), p)
	var logs syncBuffer
	ps := &peers{nodes: map[int32]*apiHost{2: {h: h2, c: c2}}}
	h1 := newTestHost(1)
	h1.leaders, h1.ask = nil, ps.ask
	cfg := testConfig()
	cfg.Logger = zerolog.New(&logs)
	c1, err := New(ctx, cfg, h1)
	must(t, err)
	pers := c1.Persister()
	pers.attempts, pers.backoff, pers.maxBackoff = 4, time.Millisecond, 4*time.Millisecond
	k := key("g", 1, 0)

	// No state topic: asked for, and the call gives up NOT_AVAILABLE.
	if _, err := pers.Read(ctx, k, 0); !errors.Is(err, sharestate.ErrNotAvailable) {
		t.Fatalf("read without a state topic: %v", err)
	}
	h1.wg.Wait()
	if h1.ensured == 0 {
		t.Fatal("the state topic was not asked for")
	}

	// The coordinator refuses twice, then answers.
	h1.mu.Lock()
	h1.leaders = []int32{2}
	h1.mu.Unlock()
	var refusals atomic.Int32
	ps.fail = func(_ int32, req kmsg.Request) (kmsg.Response, error) {
		if refusals.Add(1) > 2 {
			return nil, nil
		}
		if refusals.Load() == 1 {
			return nil, errors.New("connection refused")
		}
		r := readErrorResponse(req, kerr.NotCoordinator.Code)
		return r, nil
	}
	if _, err := pers.Read(ctx, k, 0); !errors.Is(err, sharestate.ErrNoState) {
		t.Fatalf("read after the retries: %v", err)
	}
	if n := refusals.Load(); n != 3 {
		t.Fatalf("%d asks, want 3", n)
	}
	if down, up := logs.count(`"message":"share coordinator not available; retrying"`), logs.count(`"message":"share coordinator available again"`); down != 1 || up != 1 {
		t.Fatalf("logged %d times down and %d times up, want once each:\n%s", down, up, logs.b.String())
	}

	// The coordinator moves: node 3 is unreachable twice, then the image
	// names node 2, which answers. The outage ends with the move, logged
	// once each way.
	h1.mu.Lock()
	h1.leaders = []int32{3}
	h1.mu.Unlock()
	var to3 atomic.Int32
	ps.fail = func(node int32, _ kmsg.Request) (kmsg.Response, error) {
		if node != 3 {
			return nil, nil
		}
		if to3.Add(1) == 2 {
			h1.mu.Lock()
			h1.leaders = []int32{2}
			h1.mu.Unlock()
		}
		return nil, errors.New("connection refused")
	}
	if _, err := pers.Read(ctx, k, 0); !errors.Is(err, sharestate.ErrNoState) {
		t.Fatalf("read across a coordinator move: %v", err)
	}
	if down, up := logs.count(`"message":"share coordinator not available; retrying"`), logs.count(`"message":"share coordinator available again"`); down != 2 || up != 2 {
		t.Fatalf("after a move, logged %d times down and %d times up, want twice each:\n%s", down, up, logs.b.String())
	}
	if !strings.Contains(logs.b.String(), `"coordinator":2,"was":3`) {
		t.Fatalf("the move is not logged with both nodes:\n%s", logs.b.String())
	}

	// A coordinator that never answers: bounded.
	ps.fail = func(int32, kmsg.Request) (kmsg.Response, error) { return nil, errors.New("unreachable") }
	start := time.Now()
	if err := pers.Write(ctx, k, 0, 0, []sharepart.Record{sharepart.Tombstone(k)}); !errors.Is(err, sharestate.ErrNotAvailable) {
		t.Fatalf("write to an unreachable coordinator: %v", err)
	}
	if time.Since(start) > 5*time.Second {
		t.Fatalf("the retries took %v", time.Since(start))
	}
	// ... and within the caller's context.
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if err := pers.Delete(cctx, k); !errors.Is(err, sharestate.ErrNotAvailable) {
		t.Fatalf("delete with a canceled context: %v", err)
	}
	// Final errors are not retried.
	ps.fail = func(_ int32, req kmsg.Request) (kmsg.Response, error) {
		refusals.Add(1)
		return readErrorResponse(req, kerr.FencedLeaderEpoch.Code), nil
	}
	before := refusals.Load()
	if _, err := pers.Read(ctx, k, 0); !errors.Is(err, sharestate.ErrFencedLeaderEpoch) {
		t.Fatalf("read answered FENCED_LEADER_EPOCH: %v", err)
	}
	if n := refusals.Load() - before; n != 1 {
		t.Fatalf("a fenced read was asked %d times", n)
	}
}

// TestCodeError: every code the persister may get back is classified.
func TestCodeError(t *testing.T) {
	msg := func(s string) *string { return &s }
	for _, c := range []struct {
		code int16
		msg  *string
		want error
	}{
		{kerr.NotCoordinator.Code, nil, ErrNotCoordinator},
		{kerr.CoordinatorLoadInProgress.Code, nil, ErrLoading},
		{kerr.CoordinatorNotAvailable.Code, nil, sharestate.ErrNotAvailable},
		{kerr.RequestTimedOut.Code, nil, sharestate.ErrNotAvailable},
		{kerr.FencedLeaderEpoch.Code, nil, sharestate.ErrFencedLeaderEpoch},
		{kerr.FencedStateEpoch.Code, nil, ErrFencedStateEpoch},
		{kerr.UnknownTopicOrPartition.Code, nil, ErrUnknownTopicOrPartition},
		{kerr.InvalidRequest.Code, msg("Read operation on uninitialized share partition not allowed."), sharestate.ErrNoState},
		{kerr.InvalidRequest.Code, msg("bad batch"), ErrInvalidRequest},
	} {
		if err := codeError(2, c.code, c.msg); !errors.Is(err, c.want) {
			t.Errorf("code %d: %v, want %v", c.code, err, c.want)
		}
	}
	if err := codeError(2, kerr.ClusterAuthorizationFailed.Code, nil); err == nil || retriable(err) {
		t.Errorf("CLUSTER_AUTHORIZATION_FAILED: %v", err)
	}
}

// adminFlow runs the group coordinator's calls (AlterShareGroupOffsets,
// DescribeShareGroupOffsets, DeleteShareGroupOffsets) against pers, and
// checks that an alter fences the snapshots of a leader that loaded the
// state before it.
func adminFlow(t *testing.T, pers *Persister) {
	t.Helper()
	k := key("admin", 1, 3)
	cfg := sharepart.Config{SnapshotUpdateRecordsPerSnapshot: 2, DeliveryCountLimit: 3}
	now := int64(1000)
	summary := func(wantOK bool, want State) {
		t.Helper()
		st, ok, err := pers.Summary(ctx, k)
		if err != nil || ok != wantOK || st.StartOffset != want.StartOffset || st.StateEpoch != want.StateEpoch ||
			st.LeaderEpoch != want.LeaderEpoch || st.DeliveryCompleteCount != want.DeliveryCompleteCount {
			t.Fatalf("summary: %+v %v %v, want %+v %v", st, ok, err, want, wantOK)
		}
	}
	summary(false, State{StartOffset: -1, LeaderEpoch: -1, DeliveryCompleteCount: -1})

	// A leader starts the share-partition (state epoch 0) and acknowledges
	// two records.
	p, recs := sharepart.New(k, cfg, sharepart.Init{StartOffset: 10, LeaderEpoch: 4}, now)
	must(t, pers.Write(ctx, k, 4, 0, recs))
	_, recs = p.Acquire(now, "m", sharepart.Fetch{From: 10, End: 20, Records: []sharepart.Range{{First: 10, Last: 19}}, MaxRecords: 100})
	must(t, pers.Write(ctx, k, 4, 0, recs))
	recs, err := p.Acknowledge(now, "m", []sharepart.AckBatch{{First: 12, Last: 13, Types: []int8{1}}})
	must(t, err)
	must(t, pers.Write(ctx, k, 4, 0, recs))
	summary(true, State{StartOffset: 10, StateEpoch: 0, LeaderEpoch: 4, DeliveryCompleteCount: 2})

	// The group's offsets are altered: a new state epoch and start offset.
	must(t, pers.Initialize(ctx, k, 3, 42))
	summary(true, State{StartOffset: 42, StateEpoch: 3, LeaderEpoch: 4, DeliveryCompleteCount: 0})
	if err := pers.Initialize(ctx, k, 2, 7); !errors.Is(err, ErrFencedStateEpoch) {
		t.Fatalf("an initialize at an older state epoch: %v", err)
	}
	// The old leader's snapshot carries state epoch 0: fenced, and the
	// state is the alter's.
	if err := pers.Write(ctx, k, 4, 0, p.Snapshot(now)); !errors.Is(err, ErrFencedStateEpoch) {
		t.Fatalf("a snapshot of the leader from before the alter: %v", err)
	}
	summary(true, State{StartOffset: 42, StateEpoch: 3, LeaderEpoch: 4, DeliveryCompleteCount: 0})
	// So are its updates, which carry no state epoch of their own: the
	// Persister sends the leader's. One that moves the start offset
	// leaves the alter's alone.
	recs, err = p.Acknowledge(now, "m", []sharepart.AckBatch{{First: 10, Last: 11, Types: []int8{1}}})
	must(t, err)
	if d, err := sharepart.DecodeRecord(recs[0]); err != nil || d.Update == nil || d.Update.StartOffset != 14 {
		t.Fatalf("the old leader's acknowledgement is not an update moving the start offset: %+v %v", d, err)
	}
	if err := pers.Write(ctx, k, 4, p.StateEpoch(), recs); !errors.Is(err, ErrFencedStateEpoch) {
		t.Fatalf("an update of the leader from before the alter: %v", err)
	}
	summary(true, State{StartOffset: 42, StateEpoch: 3, LeaderEpoch: 4, DeliveryCompleteCount: 0})
	// A leader that loads it now serves from the alter's start offset.
	rs, err := pers.Read(ctx, k, 5)
	must(t, err)
	p2, _, err := sharepart.Restore(k, cfg, 5, now, rs)
	must(t, err)
	if p2.StartOffset() != 42 || p2.StateEpoch() != 3 {
		t.Fatalf("restored after the alter: start %d state epoch %d", p2.StartOffset(), p2.StateEpoch())
	}
	// Initialized without a start offset: no start offset to describe.
	must(t, pers.Initialize(ctx, k, 4, -1))
	summary(false, State{StartOffset: -1, StateEpoch: 4, LeaderEpoch: 5, DeliveryCompleteCount: -1})
	// A leader loading it finds no start offset; it resolves
	// share.auto.offset.reset and starts at the state epoch it read (as
	// broker/sharefetch's load does), not at 0.
	rs, err = pers.Read(ctx, k, 5)
	must(t, err)
	if _, _, err := sharepart.Restore(k, cfg, 5, now, rs); !errors.Is(err, sharepart.ErrNoState) {
		t.Fatalf("restore of state without a start offset: %v", err)
	}
	_, recs = sharepart.New(k, cfg, sharepart.Init{StartOffset: 50, LeaderEpoch: 5}, now)
	if err := pers.Write(ctx, k, 5, 0, recs); !errors.Is(err, ErrFencedStateEpoch) {
		t.Fatalf("a start at state epoch 0: %v", err)
	}
	p3, recs := sharepart.New(k, cfg, sharepart.Init{StartOffset: 50, StateEpoch: 4, LeaderEpoch: 5}, now)
	must(t, pers.Write(ctx, k, 5, p3.StateEpoch(), recs))
	summary(true, State{StartOffset: 50, StateEpoch: 4, LeaderEpoch: 5, DeliveryCompleteCount: 0})
	must(t, pers.Delete(ctx, k))
	summary(false, State{StartOffset: -1, LeaderEpoch: -1, DeliveryCompleteCount: -1})
	// Unknown partitions are refused, not retried.
	if _, _, err := pers.Summary(ctx, key("admin", 1, 99)); !errors.Is(err, ErrUnknownTopicOrPartition) {
		t.Fatalf("summary of an unknown partition: %v", err)
	}
	if err := pers.Initialize(ctx, key("admin", 1, 99), 1, 0); !errors.Is(err, ErrUnknownTopicOrPartition) {
		t.Fatalf("initialize of an unknown partition: %v", err)
	}
}

func TestPersisterAdminLocal(t *testing.T) {
	p, _ := leader(t, 1, t.TempDir())
	c := newCoord(t, newTestHost(1), testConfig(), p)
	adminFlow(t, c.Persister())
}

func TestPersisterAdminRemote(t *testing.T) {
	p, _ := leader(t, 2, t.TempDir())
	h2 := newTestHost(2)
	c2 := newCoord(t, h2, testConfig(), p)
	ps := &peers{nodes: map[int32]*apiHost{2: {h: h2, c: c2}}}
	h1 := newTestHost(1)
	h1.leaders, h1.ask = []int32{2}, ps.ask
	c1, err := New(ctx, testConfig(), h1)
	must(t, err)
	adminFlow(t, c1.Persister())
}
