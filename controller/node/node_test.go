package node

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"reflect"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"go.etcd.io/raft/v3/raftpb"

	"github.com/fjordlog/fjord/controller"
)

const testTick = 20 * time.Millisecond

// harness runs a cluster of nodes over real TCP on 127.0.0.1. Every port is
// bound before any node starts, so every config names every address.
type harness struct {
	t                testing.TB
	voters, learners map[uint64]string
	dirs             map[uint64]string
	lns              map[uint64]net.Listener // bound, not yet handed to a node
	nodes            map[uint64]*Node        // running
	snapEvery        uint64
	links            *links // nil: nodes dial each other directly
}

func newHarness(t testing.TB, voters, learners int, snapEvery uint64) *harness {
	return newLinkedHarness(t, voters, learners, snapEvery, nil)
}

// newLinkedHarness is newHarness whose nodes dial each other through l
// (when not nil), so a test can cut links.
func newLinkedHarness(t testing.TB, voters, learners int, snapEvery uint64, l *links) *harness {
	h := &harness{
		t: t, voters: map[uint64]string{}, learners: map[uint64]string{},
		dirs: map[uint64]string{}, lns: map[uint64]net.Listener{}, nodes: map[uint64]*Node{},
		snapEvery: snapEvery, links: l,
	}
	for id := uint64(1); id <= uint64(voters+learners); id++ {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		h.lns[id] = ln
		h.dirs[id] = t.TempDir()
		if id <= uint64(voters) {
			h.voters[id] = ln.Addr().String()
		} else {
			h.learners[id] = ln.Addr().String()
		}
	}
	t.Cleanup(func() {
		for _, n := range h.nodes {
			if err := n.Close(); err != nil {
				t.Errorf("close %d: %v", n.ID(), err)
			}
		}
		for _, ln := range h.lns {
			_ = ln.Close()
		}
	})
	for id := range h.lns {
		h.start(id)
	}
	return h
}

// start starts node id on its directory and address (rebinding the address
// after a stop).
func (h *harness) start(id uint64) *Node {
	h.t.Helper()
	ln := h.lns[id]
	delete(h.lns, id)
	if ln == nil {
		addr := h.voters[id]
		if addr == "" {
			addr = h.learners[id]
		}
		var err error
		if ln, err = net.Listen("tcp", addr); err != nil {
			h.t.Fatalf("rebind %s: %v", addr, err)
		}
	}
	cfg := Config{
		ID: id, Voters: h.voters, Learners: h.learners, Dir: h.dirs[id], Listener: ln,
		TickInterval: testTick, SnapshotEvery: h.snapEvery,
		Logger: zerolog.New(zerolog.NewTestWriter(h.t)).Level(zerolog.InfoLevel),
	}
	if h.links != nil {
		cfg.Dial = h.links.dialer(id)
	}
	n, err := Start(cfg)
	if err != nil {
		h.t.Fatalf("start %d: %v", id, err)
	}
	h.nodes[id] = n
	return n
}

func (h *harness) stop(id uint64) {
	h.t.Helper()
	n := h.nodes[id]
	delete(h.nodes, id)
	if err := n.Close(); err != nil {
		h.t.Fatalf("close %d: %v", id, err)
	}
	if err := n.Close(); err != nil { // idempotent
		h.t.Fatalf("second close %d: %v", id, err)
	}
}

// checkFor polls f until it returns nil or d passes.
func checkFor(t testing.TB, d time.Duration, f func() error) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		err := f()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %v: %v", d, err)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// waitLeader waits until every running voter knows the same leader, which
// is running and knows it leads.
func (h *harness) waitLeader() *Node {
	h.t.Helper()
	var leader *Node
	checkFor(h.t, 10*time.Second, func() error {
		var lead uint64
		for id, n := range h.nodes {
			if _, voter := h.voters[id]; !voter {
				continue
			}
			l := n.Leader()
			if l == 0 || (lead != 0 && l != lead) {
				return fmt.Errorf("node %d sees leader %d, others %d", id, l, lead)
			}
			lead = l
		}
		leader = h.nodes[lead]
		if leader == nil || !leader.IsLeader() {
			return fmt.Errorf("leader %d not running or not leading", lead)
		}
		return nil
	})
	return leader
}

// waitAll waits until every running node's image satisfies pred.
func (h *harness) waitAll(pred func(*controller.Image) bool) {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for id, n := range h.nodes {
		if err := n.WaitFor(ctx, pred); err != nil {
			h.t.Fatalf("node %d: %v (image version %d)", id, err, n.Image().Version())
		}
	}
}

func register(id int32) controller.Record {
	return controller.NewRecord(controller.RegisterBroker{
		ID: id, Incarnation: [16]byte{byte(id), 1},
		Endpoints: []controller.Endpoint{{Name: "PLAINTEXT", Host: "127.0.0.1", Port: 9092 + id}},
	})
}

func hasBroker(id int32, atLeast uint64) func(*controller.Image) bool {
	return func(img *controller.Image) bool {
		_, ok := img.Broker(id)
		return ok && img.Version() >= atLeast
	}
}

func propose(t testing.TB, n *Node, r controller.Record) uint64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	idx, err := n.Propose(ctx, r)
	if err != nil {
		t.Fatalf("propose on %d: %v", n.ID(), err)
	}
	if got := n.Image().Version(); got < idx {
		t.Fatalf("propose returned index %d before applying it (image version %d)", idx, got)
	}
	return idx
}

// TestClusterFailoverRestartLearner: three voters and a learner elect a
// leader and replicate; after the leader closes the others elect a new one
// and keep committing; the old leader restarts on its directory and catches
// up (by snapshot: the log was compacted meanwhile); the learner gets all.
func TestClusterFailoverRestartLearner(t *testing.T) {
	h := newHarness(t, 3, 1, 8)
	leader := h.waitLeader()
	if leader.ID() == 4 {
		t.Fatal("the learner leads")
	}

	idx := propose(t, leader, register(1))
	h.waitAll(hasBroker(1, idx))

	// A follower refuses and names the leader.
	for id, n := range h.nodes {
		if id == leader.ID() {
			continue
		}
		_, err := n.Propose(context.Background(), register(9))
		var nl *NotLeaderError
		if !errors.Is(err, ErrNotLeader) || !errors.As(err, &nl) || nl.Leader != leader.ID() {
			t.Fatalf("propose on follower %d: %v, want not leader (leader %d)", id, err, leader.ID())
		}
	}

	old := leader.ID()
	h.stop(old)
	start := time.Now()
	leader = h.waitLeader()
	if leader.ID() == old {
		t.Fatalf("closed node %d still leads", old)
	}
	t.Logf("new leader %d after %v", leader.ID(), time.Since(start))
	idx = propose(t, leader, register(2))
	h.waitAll(hasBroker(2, idx))

	// Enough entries for several snapshots and compactions while old is down.
	for i := int32(10); i < 40; i++ {
		idx = propose(t, leader, register(i))
	}
	h.waitAll(hasBroker(39, idx))

	h.start(old)
	want := leader.Image()
	h.waitAll(func(img *controller.Image) bool { return img.Version() >= want.Version() })
	for id, n := range h.nodes {
		img := n.Image()
		if !reflect.DeepEqual(img.Brokers(), want.Brokers()) {
			t.Fatalf("node %d brokers differ from the leader's", id)
		}
	}

	// The restarted node takes part again: a new proposal reaches everyone.
	leader = h.waitLeader()
	idx = propose(t, leader, register(3))
	h.waitAll(hasBroker(3, idx))
}

// TestConcurrentProposals: concurrent proposals all apply at
// distinct indexes; after Close, Propose and WaitFor fail with ErrClosed.
func TestConcurrentProposals(t *testing.T) {
	h := newHarness(t, 3, 0, 0)
	leader := h.waitLeader()
	const k = 20
	type res struct {
		idx uint64
		err error
	}
	out := make(chan res, k)
	for i := range k {
		go func() {
			idx, err := leader.Propose(context.Background(), register(int32(100+i)))
			out <- res{idx, err}
		}()
	}
	seen := map[uint64]bool{}
	var maxIdx uint64
	for range k {
		r := <-out
		if r.err != nil {
			t.Fatal(r.err)
		}
		if seen[r.idx] {
			t.Fatalf("index %d returned twice", r.idx)
		}
		seen[r.idx] = true
		maxIdx = max(maxIdx, r.idx)
	}
	h.waitAll(func(img *controller.Image) bool { return img.Version() >= maxIdx && len(img.Brokers()) == k })

	id := leader.ID()
	h.stop(id)
	if _, err := leader.Propose(context.Background(), register(1)); !errors.Is(err, ErrClosed) {
		t.Fatalf("propose after close: %v", err)
	}
	if err := leader.WaitFor(context.Background(), func(*controller.Image) bool { return false }); !errors.Is(err, ErrClosed) {
		t.Fatalf("WaitFor after close: %v", err)
	}
}

func TestFrames(t *testing.T) {
	var buf bytes.Buffer
	w := bufio.NewWriter(&buf)
	m := raftpb.Message{Type: raftpb.MsgApp, To: 2, From: 1, Term: 3, Index: 7,
		Entries: []raftpb.Entry{{Term: 3, Index: 8, Data: []byte("x")}}}
	if err := writeFrame(w, &m); err != nil {
		t.Fatal(err)
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	got, err := readFrame(bufio.NewReader(&buf))
	if err != nil || !reflect.DeepEqual(got, m) {
		t.Fatalf("round trip: %v, %+v", err, got)
	}

	var hdr [4]byte
	binary.BigEndian.PutUint32(hdr[:], MaxFrameSize+1)
	if _, err := readFrame(bufio.NewReader(bytes.NewReader(hdr[:]))); !errors.Is(err, errFrameTooLarge) {
		t.Fatalf("oversized frame: %v", err)
	}
	big := raftpb.Message{Type: raftpb.MsgSnap, Snapshot: &raftpb.Snapshot{Data: make([]byte, MaxFrameSize)}}
	if err := writeFrame(w, &big); !errors.Is(err, errFrameTooLarge) {
		t.Fatalf("oversized write: %v", err)
	}
}

func TestConfigValidate(t *testing.T) {
	for _, c := range []Config{
		{},
		{ID: 1, Voters: map[uint64]string{2: "x"}, Dir: "d", Listen: ":0"},
		{ID: 1, Voters: map[uint64]string{1: "x"}, Listen: ":0"},
		{ID: 1, Voters: map[uint64]string{1: "x"}, Dir: "d"},
		{ID: 1, Voters: map[uint64]string{1: "x"}, Learners: map[uint64]string{1: "x"}, Dir: "d", Listen: ":0"},
	} {
		if _, err := Start(c); err == nil {
			t.Fatalf("Start(%+v) succeeded", c)
		}
	}
}
