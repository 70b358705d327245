package sharecoord

import (
	"context"
	"errors"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordlog/fjord/broker/replica"
	"github.com/fjordlog/fjord/broker/sharestate"
	"github.com/fjordlog/fjord/group/sharepart"
	"github.com/fjordlog/fjord/storage"
	"github.com/fjordlog/fjord/storage/recordbatch"
)

// testHost is the broker as the coordinator sees it: tracked goroutines,
// a metadata image of a few data topics and of the state topic's leaders,
// and peers reached through ask.
type testHost struct {
	wg      sync.WaitGroup
	me      int32
	mu      sync.Mutex
	topics  map[[16]byte]int32 // data topics: partition counts
	leaders []int32            // the state topic's leaders; nil: no topic
	ask     func(ctx context.Context, node int32, req kmsg.Request) (kmsg.Response, error)
	ensured int
	failed  []error // ReadFailed's errors
}

func newTestHost(me int32) *testHost {
	return &testHost{me: me, topics: map[[16]byte]int32{testTopic(1): 4, testTopic(2): 4}, leaders: []int32{me}}
}

func (h *testHost) Go(fn func()) bool {
	h.wg.Add(1)
	go func() {
		defer h.wg.Done()
		fn()
	}()
	return true
}

func (h *testHost) ReadFailed(_ *replica.Partition, err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.failed = append(h.failed, err)
}
func (h *testHost) NodeID() int32 { return h.me }
func (h *testHost) TopicPartitions(id [16]byte) int32 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.topics[id]
}
func (h *testHost) StateLeaders() []int32 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.leaders
}
func (h *testHost) EnsureStateTopic() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.ensured++
}
func (h *testHost) Ask(ctx context.Context, node int32, req kmsg.Request) (kmsg.Response, error) {
	if h.ask == nil {
		return nil, errors.New("no peers in this test")
	}
	return h.ask(ctx, node, req)
}

// replicaHost opens a partition's log in dir; nothing else happens to a
// single replica.
type replicaHost struct{ dir string }

func (h replicaHost) Open(p *replica.Partition) {
	go func() {
		lg, err := storage.Open(h.dir, p.Settings().Storage, p.Logger)
		p.Opened(lg, err)
	}()
}
func (replicaHost) Delete(*replica.Partition)                    {}
func (replicaHost) Repair(*replica.Partition, replica.Repair)    {}
func (replicaHost) Propose(*replica.Partition, replica.Proposal) {}
func (replicaHost) Ended(*replica.Partition)                     {}
func (replicaHost) Changed(*replica.Partition)                   {}

// leader returns node me's replica of a state partition, leading with the
// ISR {me}, its log in dir. close closes its log (a restart).
func leader(t *testing.T, me int32, dir string) (p *replica.Partition, close func()) {
	t.Helper()
	p = replica.NewPartition(replica.PartitionConfig{Topic: Topic, Logger: zerolog.Nop(),
		Settings: replica.Settings{Storage: storage.DefaultConfig(), FlushMessages: 1, MinISR: 1},
		Core:     replica.Config{ID: me, SyncOnAck: true, LagMs: 30_000, OpenTimeoutMs: 10_000, AlterTimeoutMs: 10_000}},
		replicaHost{dir})
	p.Step(replica.Assign{Assignment: replica.Assignment{Leader: me, Replicas: []int32{me}, ISR: []int32{me}, Live: []int32{me}}})
	p.Start()
	<-p.OpenAnswered()
	if !p.Leads() {
		t.Fatal("the replica does not lead")
	}
	var once sync.Once
	close = func() { once.Do(func() { p.Log().Close() }) }
	t.Cleanup(close)
	return p, close
}

// testConfig is DefaultConfig with a snapshot every 3 updates.
func testConfig() Config {
	cfg := DefaultConfig()
	cfg.SnapshotUpdateRecordsPerSnapshot = 3
	cfg.WriteTimeoutMs = 10_000
	return cfg
}

// newCoord returns a coordinator on h that has loaded parts; its loops
// (prune, cold snapshots) do not run: tests call them.
func newCoord(t *testing.T, h *testHost, cfg Config, parts ...*replica.Partition) *Coordinator {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	c, err := New(ctx, cfg, h)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		h.wg.Wait()
	})
	c.Follow(parts)
	checkFor(t, "the state partitions loaded", func() bool { return len(c.loadedParts()) == len(parts) })
	return c
}

// checkFor polls cond until it holds, failing the test after 10 s.
func checkFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

var ctx = context.Background()

func key(g string, topic byte, p int32) sharepart.Key {
	return sharepart.Key{Group: g, TopicID: testTopic(topic), Partition: p}
}

// snapshotOf is c's table of state partition pi as comparable text.
func snapshotOf(t *testing.T, c *Coordinator, pi int32) map[sharepart.Key]string {
	t.Helper()
	pt := c.partAt(pi)
	pt.mu.Lock()
	defer pt.mu.Unlock()
	if err := pt.mu.tbl.checkInvariants(); err != nil {
		t.Fatal(err)
	}
	out := map[sharepart.Key]string{}
	for k, e := range pt.mu.tbl.keys {
		// The timestamps and the update count are the writer's; a load
		// reads them back too, so everything is compared.
		out[k] = formatEntry(e)
	}
	return out
}

// TestDurableWriteReload: everything a coordinator answered is in the log,
// and another coordinator that loads the log has the same state.
func TestDurableWriteReload(t *testing.T) {
	dir := t.TempDir()
	p, closeLog := leader(t, 1, dir)
	h := newTestHost(1)
	c := newCoord(t, h, testConfig(), p)

	a, b, gone := key("g", 1, 0), key("g", 2, 3), key("h", 1, 1)
	must(t, c.Initialize(ctx, a, 0, 100))
	must(t, c.Initialize(ctx, b, 2, -1))
	must(t, c.Initialize(ctx, gone, 0, 0))
	st, err := c.Read(ctx, a, 7)
	must(t, err)
	if st.StartOffset != 100 || st.LeaderEpoch != 7 || len(st.Batches) != 0 {
		t.Fatalf("read after initialize: %+v", st)
	}
	for i := range int64(8) { // past the snapshot cadence
		must(t, c.Write(ctx, a, WriteState{LeaderEpoch: 7, StateEpoch: 0, StartOffset: 100 + i, DeliveryCompleteCount: int32(i),
			Batches: []sharepart.StateBatch{{FirstOffset: 100 + 2*i, LastOffset: 101 + 2*i, DeliveryState: sharepart.Acknowledged, DeliveryCount: 1},
				{FirstOffset: 120, LastOffset: 130, DeliveryState: sharepart.Available, DeliveryCount: int16(i + 1)}}}))
	}
	must(t, c.Delete(ctx, gone))
	st, err = c.Read(ctx, a, 7)
	must(t, err)
	want := []sharepart.StateBatch{{FirstOffset: 107, LastOffset: 115, DeliveryState: sharepart.Acknowledged, DeliveryCount: 1},
		{FirstOffset: 120, LastOffset: 130, DeliveryState: sharepart.Available, DeliveryCount: 8}}
	if st.StartOffset != 107 || st.DeliveryCompleteCount != 7 || !slices.Equal(st.Batches, want) {
		t.Fatalf("merged state: %+v, want start 107, batches %v", st, want)
	}
	if p.HW() != p.Log().EndOffset() {
		t.Fatalf("answered before the log was committed: hw %d, end %d", p.HW(), p.Log().EndOffset())
	}
	before := snapshotOf(t, c, 0)
	if len(before) != 2 {
		t.Fatalf("keys after the writes: %v", slices.Collect(maps.Keys(before)))
	}

	// A restart: another coordinator loads the same log.
	closeLog()
	p2, _ := leader(t, 1, dir)
	c2 := newCoord(t, newTestHost(1), testConfig(), p2)
	if after := snapshotOf(t, c2, 0); !maps.Equal(before, after) {
		t.Fatalf("reloaded state differs:\nbefore %v\nafter  %v", before, after)
	}
	// The fence came back with it.
	if err := c2.Write(ctx, a, WriteState{LeaderEpoch: 6, StateEpoch: 0, StartOffset: -1}); !errors.Is(err, sharestate.ErrFencedLeaderEpoch) {
		t.Fatalf("write at an older leader epoch after the reload: %v", err)
	}
}

// TestLoadReplay: a load replays whatever records the log holds, in order,
// skipping those that do not decode.
func TestLoadReplay(t *testing.T) {
	dir := t.TempDir()
	p, _ := leader(t, 1, dir)
	a, b := key("g", 1, 0), key("g", 1, 1)
	appendRecords(t, p,
		sharepart.EncodeSnapshot(a, &sharepart.SnapshotValue{SnapshotEpoch: 4, StateEpoch: 1, LeaderEpoch: 3, StartOffset: 10,
			DeliveryCompleteCount: -1, StateBatches: []sharepart.StateBatch{{FirstOffset: 10, LastOffset: 12, DeliveryState: sharepart.Available, DeliveryCount: 1}}}),
		sharepart.Record{Key: []byte{0, 9}, Value: []byte("garbage")},
		sharepart.EncodeUpdate(a, &sharepart.UpdateValue{SnapshotEpoch: 4, LeaderEpoch: 5, StartOffset: 11, DeliveryCompleteCount: 1,
			StateBatches: []sharepart.StateBatch{{FirstOffset: 11, LastOffset: 11, DeliveryState: sharepart.Archived, DeliveryCount: 1}}}),
		sharepart.EncodeSnapshot(b, &sharepart.SnapshotValue{StartOffset: 0, DeliveryCompleteCount: -1}),
	)
	appendRecords(t, p, sharepart.Tombstone(b))
	c := newCoord(t, newTestHost(1), testConfig(), p)
	got := snapshotOf(t, c, 0)
	want := map[sharepart.Key]string{a: "snap=4 state=1 leader=5 start=11 dcc=1 batches=[11-11/arch/1 12-12/avail/1] fence=5/1 updates=1 ts=0/0"}
	if !maps.Equal(got, want) {
		t.Fatalf("loaded %v, want %v", got, want)
	}
	if st, err := c.Read(ctx, a, 5); err != nil || st.StartOffset != 11 {
		t.Fatalf("read after the load: %+v, %v", st, err)
	}
	if _, err := c.Read(ctx, b, 5); !errors.Is(err, ErrUninitialized) || !errors.Is(err, sharestate.ErrNoState) {
		t.Fatalf("read of a deleted key: %v", err)
	}
}

func appendRecords(t *testing.T, p *replica.Partition, recs ...sharepart.Record) {
	t.Helper()
	kvs := make([]recordbatch.KV, len(recs))
	for i, r := range recs {
		kvs[i] = recordbatch.KV{Key: r.Key, Value: r.Value}
	}
	batch := recordbatch.Build(kvs, 1)
	info, err := recordbatch.Validate(batch, 0)
	must(t, err)
	if _, _, err := p.AppendAsLeader(batch, info, 1); err != nil {
		t.Fatal(err)
	}
	must(t, p.Flush())
	checkFor(t, "the records committed", func() bool { return p.HW() == p.Log().EndOffset() })
}

// TestFencing: a read by a newer leader is durable before it is answered,
// and fences the older one's reads and writes; state epochs fence as
// Kafka's.
func TestFencing(t *testing.T) {
	p, _ := leader(t, 1, t.TempDir())
	c := newCoord(t, newTestHost(1), testConfig(), p)
	k := key("g", 1, 2)
	must(t, c.Initialize(ctx, k, 0, 0))
	if _, err := c.Read(ctx, k, 4); err != nil {
		t.Fatal(err)
	}
	end := p.Log().EndOffset()
	if _, err := c.Read(ctx, k, 5); err != nil {
		t.Fatal(err)
	}
	if p.Log().EndOffset() != end+1 || p.HW() != end+1 {
		t.Fatalf("the new leader epoch was not written before the answer: end %d -> %d, hw %d", end, p.Log().EndOffset(), p.HW())
	}
	if err := c.Write(ctx, k, WriteState{LeaderEpoch: 4, StateEpoch: 0, StartOffset: 1}); !errors.Is(err, sharestate.ErrFencedLeaderEpoch) {
		t.Fatalf("write by the old leader: %v", err)
	}
	if _, err := c.Read(ctx, k, 4); !errors.Is(err, sharestate.ErrFencedLeaderEpoch) {
		t.Fatalf("read by the old leader: %v", err)
	}
	must(t, c.Write(ctx, k, WriteState{LeaderEpoch: 5, StateEpoch: 0, StartOffset: 1}))
	// A reset (new state epoch) fences writes of the old one.
	must(t, c.Initialize(ctx, k, 1, 50))
	if err := c.Write(ctx, k, WriteState{LeaderEpoch: 5, StateEpoch: 0, StartOffset: 51}); !errors.Is(err, ErrFencedStateEpoch) {
		t.Fatalf("write at the old state epoch: %v", err)
	}
	if err := c.Initialize(ctx, k, 0, 0); !errors.Is(err, ErrFencedStateEpoch) {
		t.Fatalf("initialize at an older state epoch: %v", err)
	}
	// The topic's partition must be known.
	if err := c.Write(ctx, key("g", 1, 9), WriteState{LeaderEpoch: 5, StateEpoch: 0, StartOffset: 0}); !errors.Is(err, ErrUninitialized) {
		t.Fatalf("write of an unknown key: %v", err)
	}
	if err := c.Initialize(ctx, key("g", 1, 9), 0, 0); !errors.Is(err, ErrUnknownTopicOrPartition) {
		t.Fatalf("initialize of an unknown partition: %v", err)
	}
	if err := c.Initialize(ctx, key("g", 7, 0), 0, 0); !errors.Is(err, ErrUnknownTopicOrPartition) {
		t.Fatalf("initialize of an unknown topic: %v", err)
	}
}

// TestFenceSurvivesPrune: a leader epoch recorded before a reset still
// fences after the prune removed the records that recorded it and another
// coordinator loaded what is left.
func TestFenceSurvivesPrune(t *testing.T) {
	dir := t.TempDir()
	p, closeLog := leader(t, 1, dir)
	c := newCoord(t, newTestHost(1), testConfig(), p)
	k := key("g", 1, 0)
	must(t, c.Initialize(ctx, k, 0, 0))
	_, err := c.Read(ctx, k, 9)
	must(t, err)
	must(t, c.Initialize(ctx, k, 1, 20))
	c.prune()
	if p.Log().StartOffset() != 2 {
		t.Fatalf("log start %d, want the reset's snapshot at 2", p.Log().StartOffset())
	}
	closeLog()
	p2, _ := leader(t, 1, dir)
	c2 := newCoord(t, newTestHost(1), testConfig(), p2)
	if _, err := c2.Read(ctx, k, 8); !errors.Is(err, sharestate.ErrFencedLeaderEpoch) {
		t.Fatalf("read by an older leader after the pruned reload: %v", err)
	}
}

// TestNotServing: before Follow, for a partition it does not lead, and
// while it loads, the coordinator says so.
func TestNotServing(t *testing.T) {
	h := newTestHost(1)
	c, err := New(ctx, testConfig(), h)
	must(t, err)
	k := key("g", 1, 0)
	if err := c.Initialize(ctx, k, 0, 0); !errors.Is(err, ErrNotCoordinator) {
		t.Fatalf("before Follow: %v", err)
	}
	if err := c.Status(CoordinatorKey(k)); !errors.Is(err, ErrNotCoordinator) {
		t.Fatalf("status before Follow: %v", err)
	}
	c.Follow([]*replica.Partition{nil, nil})
	if err := c.Initialize(ctx, k, 0, 0); !errors.Is(err, ErrNotCoordinator) {
		t.Fatalf("partition not led: %v", err)
	}
	// A part not loaded yet.
	pi := PartitionOf(k, 2)
	c.mu.Lock()
	c.mu.parts[pi] = &part{idx: pi}
	c.mu.Unlock()
	if err := c.Status(CoordinatorKey(k)); !errors.Is(err, ErrLoading) {
		t.Fatalf("status while loading: %v", err)
	}
	if _, err := c.Read(ctx, k, 0); !errors.Is(err, ErrLoading) {
		t.Fatalf("read while loading: %v", err)
	}
}

// TestLostLeadership: a partition this node stops leading is forgotten,
// and its keys answer NOT_COORDINATOR.
func TestLostLeadership(t *testing.T) {
	p, _ := leader(t, 1, t.TempDir())
	c := newCoord(t, newTestHost(1), testConfig(), p)
	k := key("g", 1, 0)
	must(t, c.Initialize(ctx, k, 0, 0))
	must(t, c.Status(CoordinatorKey(k)))
	p.Step(replica.Assign{Assignment: replica.Assignment{Leader: 2, LeaderEpoch: 1, Replicas: []int32{1, 2}, ISR: []int32{1, 2}, Live: []int32{1, 2}}})
	checkFor(t, "the replica to follow", func() bool { return !p.Leads() })
	c.Follow([]*replica.Partition{p})
	if err := c.Status(CoordinatorKey(k)); !errors.Is(err, ErrNotCoordinator) {
		t.Fatalf("status after losing the partition: %v", err)
	}
	if _, err := c.Read(ctx, k, 0); !errors.Is(err, ErrNotCoordinator) {
		t.Fatalf("read after losing the partition: %v", err)
	}
}

// TestPrune: the log start moves up to the oldest snapshot a live key
// needs; a load from the pruned log has the same state; cold snapshots let
// a quiet key's records go.
func TestPrune(t *testing.T) {
	dir := t.TempDir()
	p, closeLog := leader(t, 1, dir)
	cfg := testConfig()
	cfg.ColdPartitionSnapshotIntervalMs = 1
	c := newCoord(t, newTestHost(1), cfg, p)
	quiet, busy := key("q", 1, 0), key("b", 1, 1)
	must(t, c.Initialize(ctx, quiet, 0, 0)) // offset 0
	must(t, c.Initialize(ctx, busy, 0, 0))  // offset 1
	for i := range int64(10) {
		must(t, c.Write(ctx, busy, WriteState{LeaderEpoch: -1, StateEpoch: 0, StartOffset: i, DeliveryCompleteCount: 0,
			Batches: []sharepart.StateBatch{{FirstOffset: i, LastOffset: i + 5, DeliveryState: sharepart.Available, DeliveryCount: int16(i + 1)}}}))
	}
	c.prune()
	if got := p.Log().StartOffset(); got != 0 {
		t.Fatalf("log start %d with the quiet key's snapshot at 0", got)
	}
	// The quiet key is snapshotted again once its snapshot is old enough.
	end := p.Log().EndOffset()
	checkFor(t, "cold snapshots", func() bool {
		c.snapshotCold()
		return p.Log().EndOffset() > end
	})
	c.prune()
	start := p.Log().StartOffset()
	pt := c.partAt(0)
	pt.mu.Lock()
	needs := maps.Clone(pt.mu.tbl.needs)
	pt.mu.Unlock()
	if start != min(needs[quiet], needs[busy]) || start <= 1 {
		t.Fatalf("log start %d, keys need %v", start, needs)
	}
	before := snapshotOf(t, c, 0)
	closeLog()
	p2, _ := leader(t, 1, dir)
	if p2.Log().StartOffset() != start {
		t.Fatalf("the log start did not survive the restart: %d, want %d", p2.Log().StartOffset(), start)
	}
	c2 := newCoord(t, newTestHost(1), cfg, p2)
	after := snapshotOf(t, c2, 0)
	// The update counts differ by design: a load from a snapshot counts
	// from it. The states must not.
	for k := range before {
		if stateOf(before[k]) != stateOf(after[k]) {
			t.Fatalf("%s after the pruned reload: %s, want %s", k, after[k], before[k])
		}
	}
	// Deleting every key lets everything go.
	must(t, c2.Delete(ctx, quiet))
	must(t, c2.Delete(ctx, busy))
	c2.prune()
	if s, e := p2.Log().StartOffset(), p2.Log().EndOffset(); s != e {
		t.Fatalf("with no key left the log keeps [%d, %d)", s, e)
	}
}

// stateOf is the part of formatEntry a pruned reload keeps: all but the
// update count.
func stateOf(s string) string {
	before, _, _ := strings.Cut(s, " updates=")
	return before
}

// TestLoops: Start's loops write cold snapshots and prune on their own.
func TestLoops(t *testing.T) {
	p, _ := leader(t, 1, t.TempDir())
	cfg := testConfig()
	cfg.ColdPartitionSnapshotIntervalMs, cfg.PruneIntervalMs = 2, 2
	c := newCoord(t, newTestHost(1), cfg, p)
	must(t, c.Initialize(ctx, key("q", 1, 0), 0, 0))
	must(t, c.Initialize(ctx, key("b", 1, 0), 0, 0))
	must(t, c.Write(ctx, key("b", 1, 0), WriteState{LeaderEpoch: -1, StateEpoch: 0, StartOffset: 3}))
	c.Start()
	checkFor(t, "the log start to move", func() bool { return p.Log().StartOffset() > 0 })
}

// TestTopicsDeleted: the state of a deleted topic's share-partitions goes.
func TestTopicsDeleted(t *testing.T) {
	p, _ := leader(t, 1, t.TempDir())
	h := newTestHost(1)
	c := newCoord(t, h, testConfig(), p)
	must(t, c.Initialize(ctx, key("g", 1, 0), 0, 0))
	must(t, c.Initialize(ctx, key("g", 2, 0), 0, 0))
	c.TopicsDeleted([][16]byte{testTopic(2)})
	checkFor(t, "the deleted topic's state gone", func() bool {
		s := snapshotOf(t, c, 0)
		_, ok := s[key("g", 2, 0)]
		return len(s) == 1 && !ok
	})
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
