package coordinator

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordlog/fjord/broker/replica"
	"github.com/fjordlog/fjord/group"
	"github.com/fjordlog/fjord/group/assign"
	"github.com/fjordlog/fjord/group/consumer"
	"github.com/fjordlog/fjord/group/share"
	"github.com/fjordlog/fjord/storage"
)

// testHost runs the coordinator's goroutines.
type testHost struct {
	wg       sync.WaitGroup
	imgMu    sync.Mutex
	img      *consumer.Image
	timeouts map[string][2]int32
}

func (h *testHost) Go(fn func()) bool {
	h.wg.Add(1)
	go func() {
		defer h.wg.Done()
		fn()
	}()
	return true
}

func (h *testHost) ReadFailed(*replica.Partition, error) {}

// ConsumerImage: the tests' cluster has no topics but those they name.
func (h *testHost) ConsumerImage() *consumer.Image {
	h.imgMu.Lock()
	defer h.imgMu.Unlock()
	if h.img == nil {
		h.img = consumer.NewImage(nil)
	}
	return h.img
}

// GroupTimeouts: a group's overrides from setTimeouts, else 0 (keep).
func (h *testHost) GroupTimeouts(kind, id string) (int32, int32) {
	h.imgMu.Lock()
	defer h.imgMu.Unlock()
	t := h.timeouts[id]
	return t[0], t[1]
}

// setTimeouts gives group id a session timeout and heartbeat interval, as
// its group config would.
func (h *testHost) setTimeouts(id string, sessionMs, heartbeatMs int32) {
	h.imgMu.Lock()
	defer h.imgMu.Unlock()
	if h.timeouts == nil {
		h.timeouts = map[string][2]int32{}
	}
	h.timeouts[id] = [2]int32{sessionMs, heartbeatMs}
}

// setTopics replaces the topics ConsumerImage reports.
func (h *testHost) setTopics(ts ...consumer.Topic) {
	h.imgMu.Lock()
	defer h.imgMu.Unlock()
	h.img = consumer.NewImage(ts)
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

const me = 1

// leader returns this node's replica of an offsets partition, leading
// with the ISR {me}, its log in dir.
func leader(t *testing.T, dir string) *replica.Partition {
	t.Helper()
	p := replica.NewPartition(replica.PartitionConfig{Topic: OffsetsTopic, Logger: zerolog.Nop(),
		Settings: replica.Settings{Storage: storage.DefaultConfig(), FlushMessages: 1, MinISR: 1},
		Core:     replica.Config{ID: me, SyncOnAck: true, LagMs: 30_000, OpenTimeoutMs: 10_000, AlterTimeoutMs: 10_000}},
		replicaHost{dir})
	p.Step(replica.Assign{Assignment: replica.Assignment{Leader: me, Replicas: []int32{me}, ISR: []int32{me}, Live: []int32{me}}})
	p.Start()
	<-p.OpenAnswered()
	if !p.Leads() {
		t.Fatal("the replica does not lead")
	}
	t.Cleanup(func() { p.Log().Close() })
	return p
}

// newTest returns a started coordinator that has loaded parts.
func newTest(t *testing.T, parts ...*replica.Partition) *Coordinator {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	h := &testHost{}
	ccfg := consumer.DefaultConfig()
	ccfg.Assignors = []assign.Assignor{assign.Uniform(), assign.Range()}
	c, err := New(ctx, Config{Group: group.Config{MinSessionTimeoutMs: 1000}, Consumer: ccfg, Share: share.DefaultConfig(), RetentionMs: 60_000,
		RetentionCheckMs: 3_600_000, Logger: zerolog.Nop()}, h)
	if err != nil {
		t.Fatal(err)
	}
	c.Start()
	t.Cleanup(func() {
		cancel()
		h.wg.Wait()
	})
	c.Follow(parts)
	checkFor(t, "the offsets partitions loaded", func() bool { return c.offsets.allLoadedForTest() })
	return c
}

func (o *offsetStore) allLoadedForTest() bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	for i, l := range o.mu.loaded {
		if o.mu.parts[i] != nil && !l {
			return false
		}
	}
	return true
}

// checkFor polls cond for up to ten seconds.
func checkFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(2 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("never: %s", what)
		}
	}
}

func commit(t *testing.T, c *Coordinator, group string, offs map[TopicPartition]*Committed) error {
	t.Helper()
	done := make(chan error, 1)
	c.Commit(group, offs, func(err error) { done <- err })
	return <-done
}

func TestNotCoordinatorWithoutOffsetsTopic(t *testing.T) {
	c := newTest(t)
	if err := c.Status("g"); !errors.Is(err, ErrNotCoordinator) {
		t.Fatalf("status: %v", err)
	}
	if err := commit(t, c, "g", map[TopicPartition]*Committed{{"t", 0}: {Offset: 1}}); !errors.Is(err, ErrNotCoordinator) {
		t.Fatalf("commit: %v", err)
	}
}

// Committed offsets and a Stable group come back when another
// coordinator loads the same log.
func TestCommitsAndGroupsReload(t *testing.T) {
	dir := t.TempDir()
	p := leader(t, dir)
	c := newTest(t, p)
	tp := TopicPartition{"t", 3}
	if err := commit(t, c, "g", map[TopicPartition]*Committed{tp: {Offset: 42, LeaderEpoch: 5, Metadata: "m", CommitTimeMs: 7}}); err != nil {
		t.Fatal(err)
	}
	if got, ok := c.Offset("g", tp); !ok || got != (Committed{42, 5, "m", 7}) {
		t.Fatalf("offset: %+v %v", got, ok)
	}
	member, gen := joinAndSync(t, c, "g")

	c2 := newTest(t, leader(t, t.TempDir()))
	if _, ok := c2.Offset("g", tp); ok {
		t.Fatal("another log has the offset")
	}
	p.Log().Close() // as at a restart
	c3 := newTest(t, leader(t, dir))
	if got, ok := c3.Offset("g", tp); !ok || got != (Committed{42, 5, "m", 7}) {
		t.Fatalf("after reload: %+v %v", got, ok)
	}
	var state string
	var err error
	if !c3.With("g", false, func(g *group.Group) []group.Reply {
		state, err = g.State(), g.IsMember(member, gen)
		return nil
	}) || state != "Stable" || err != nil {
		t.Fatalf("restored group: %s, member: %v", state, err)
	}
	if gs := c3.ListGroups(); len(gs) != 1 || gs[0] != (GroupSummary{"g", "Stable", "consumer", ClassicGroupType}) {
		t.Fatalf("groups: %+v", gs)
	}
}

// joinAndSync makes one member join group and sync; the group is Stable.
func joinAndSync(t *testing.T, c *Coordinator, id string) (string, int32) {
	t.Helper()
	got := make(chan kmsg.Response, 1)
	join := kmsg.NewPtrJoinGroupRequest()
	join.SetVersion(3)
	join.Group, join.ProtocolType = id, "consumer"
	join.SessionTimeoutMillis, join.RebalanceTimeoutMillis = 30_000, 30_000
	join.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range", Metadata: []byte("m")}}
	c.With(id, true, func(g *group.Group) []group.Reply {
		return g.Join(time.Now().UnixMilli(), join, group.JoinMeta{}, Respond(func(r kmsg.Response) { got <- r }))
	})
	jr := (<-got).(*kmsg.JoinGroupResponse)
	if jr.ErrorCode != 0 {
		t.Fatalf("join: %d", jr.ErrorCode)
	}
	sync := kmsg.NewPtrSyncGroupRequest()
	sync.SetVersion(3)
	sync.Group, sync.MemberID, sync.Generation = id, jr.MemberID, jr.Generation
	sync.GroupAssignment = []kmsg.SyncGroupRequestGroupAssignment{{MemberID: jr.MemberID, MemberAssignment: []byte("a")}}
	c.With(id, false, func(g *group.Group) []group.Reply {
		return g.Sync(time.Now().UnixMilli(), sync, Respond(func(r kmsg.Response) { got <- r }))
	})
	if sr := (<-got).(*kmsg.SyncGroupResponse); sr.ErrorCode != 0 {
		t.Fatalf("sync: %d", sr.ErrorCode)
	}
	return jr.MemberID, jr.Generation
}

// A partition this node stops leading is forgotten with its groups.
func TestLostLeadershipUnloads(t *testing.T) {
	p := leader(t, t.TempDir())
	c := newTest(t, p)
	if err := commit(t, c, "g", map[TopicPartition]*Committed{{"t", 0}: {Offset: 1}}); err != nil {
		t.Fatal(err)
	}
	joinAndSync(t, c, "g")
	p.Step(replica.Assign{Assignment: replica.Assignment{Leader: 2, LeaderEpoch: 1, PartitionEpoch: 1,
		Replicas: []int32{me, 2}, ISR: []int32{me, 2}, Live: []int32{me, 2}}})
	c.Follow([]*replica.Partition{p})
	if err := c.Status("g"); !errors.Is(err, ErrNotCoordinator) {
		t.Fatalf("status: %v", err)
	}
	if len(c.Offsets("g")) != 0 || len(c.ListGroups()) != 0 {
		t.Fatalf("still holds %v, %v", c.Offsets("g"), c.ListGroups())
	}
}

// Offsets of a group without members expire; a group with members keeps
// its own, and so does a commit within retention.
func TestExpiry(t *testing.T) {
	c := newTest(t, leader(t, t.TempDir()))
	now := time.Now().UnixMilli()
	old := now - 2*c.cfg.RetentionMs
	for _, id := range []string{"idle", "active"} {
		if err := commit(t, c, id, map[TopicPartition]*Committed{{"t", 0}: {Offset: 1, CommitTimeMs: old}, {"t", 1}: {Offset: 1, CommitTimeMs: now}}); err != nil {
			t.Fatal(err)
		}
	}
	joinAndSync(t, c, "active")
	c.expire(now)
	checkFor(t, "the old offset expires", func() bool { return len(c.Offsets("idle")) == 1 })
	if _, ok := c.Offset("idle", TopicPartition{"t", 1}); !ok {
		t.Fatal("an offset within retention expired")
	}
	if len(c.Offsets("active")) != 2 {
		t.Fatalf("an active group's offsets expired: %v", c.Offsets("active"))
	}
}
