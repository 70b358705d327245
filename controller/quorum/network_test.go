package quorum

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"go.etcd.io/raft/v3/raftpb"
)

// network is a simulated cluster: members, their logs, and the messages in
// flight between them. Everything happens in the test's goroutine, driven
// by tick and settle; randomness (delays, drops) comes from one seeded
// source, so a schedule replays exactly. (Raft's randomized election
// timeouts read crypto/rand; tests make that deterministic with
// cryptotest.SetGlobalRandom.)
type network struct {
	t       testing.TB
	rng     *rand.Rand
	ids     []uint64 // sorted
	members map[uint64]*Member
	logs    map[uint64]Log
	applied map[uint64][]Applied // everything each member applied, in order

	now      int // rounds since start
	inflight []flight
	cut      map[[2]uint64]bool // from, to: dropped
	down     map[uint64]bool    // crashed: neither ticks nor processes
	// maxDelay is the most rounds a message waits (uniform in
	// [0, maxDelay]), which also reorders messages; dropRate is the
	// chance a message is lost.
	maxDelay int
	dropRate float64
	// snapEvery, when non-zero, makes every member call
	// MaybeSnapshot(snapEvery) after each Ready.
	snapEvery uint64
	catchUp   uint64

	sent []raftpb.Message // every message handed to the network
}

type flight struct {
	at  int // deliver in this round or later
	seq int // tie-breaker: send order
	msg raftpb.Message
}

func newNetwork(t testing.TB, seed uint64, voters, learners []uint64) *network {
	return newNetworkCatchUp(t, seed, voters, learners, 0)
}

func newNetworkCatchUp(t testing.TB, seed uint64, voters, learners []uint64, catchUp uint64) *network {
	t.Helper()
	return newNetworkLogs(t, seed, voters, learners, catchUp, func(uint64) Log { return NewMemoryLog() })
}

// newNetworkLogs is newNetworkCatchUp with each member's log from newLog.
func newNetworkLogs(t testing.TB, seed uint64, voters, learners []uint64, catchUp uint64, newLog func(id uint64) Log) *network {
	t.Helper()
	n := &network{
		t:       t,
		rng:     rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)),
		members: map[uint64]*Member{},
		logs:    map[uint64]Log{},
		applied: map[uint64][]Applied{},
		cut:     map[[2]uint64]bool{},
		down:    map[uint64]bool{},
		catchUp: catchUp,
	}
	for _, id := range slices.Concat(voters, learners) {
		n.ids = append(n.ids, id)
		n.logs[id] = newLog(id)
		n.start(id, voters, learners)
	}
	slices.Sort(n.ids)
	return n
}

// start (re)creates member id over its log: a restart when the log is not
// empty.
func (n *network) start(id uint64, voters, learners []uint64) {
	n.t.Helper()
	m, err := NewMember(Config{ID: id, Voters: voters, Learners: learners, Log: n.logs[id], CatchUpEntries: n.catchUp})
	if err != nil {
		n.t.Fatalf("member %d: %v", id, err)
	}
	n.members[id] = m
}

// isolate cuts every link to and from id.
func (n *network) isolate(id uint64) {
	for _, o := range n.ids {
		if o != id {
			n.cut[[2]uint64{id, o}], n.cut[[2]uint64{o, id}] = true, true
		}
	}
}

// cutLink drops messages from → to (one direction).
func (n *network) cutLink(from, to uint64) { n.cut[[2]uint64{from, to}] = true }

// heal restores every link.
func (n *network) heal() { clear(n.cut) }

// round lets every live member run a Ready cycle (in id order), then
// delivers every message due.
func (n *network) round() {
	n.t.Helper()
	for _, id := range n.ids {
		if n.down[id] {
			continue
		}
		m := n.members[id]
		msgs, applied, err := m.Ready()
		if err != nil {
			n.t.Fatalf("member %d: Ready: %v", id, err)
		}
		n.applied[id] = append(n.applied[id], applied...)
		if n.snapEvery > 0 {
			if _, err := m.MaybeSnapshot(n.snapEvery); err != nil {
				n.t.Fatalf("member %d: snapshot: %v", id, err)
			}
		}
		for _, msg := range msgs {
			n.send(msg)
		}
	}
	n.deliver()
	n.now++
}

func (n *network) send(msg raftpb.Message) {
	n.sent = append(n.sent, msg)
	from, to := msg.From, msg.To
	lost := n.cut[[2]uint64{from, to}] || n.down[to] || n.members[to] == nil ||
		(n.dropRate > 0 && n.rng.Float64() < n.dropRate)
	if lost {
		if msg.Type == raftpb.MsgSnap {
			n.members[from].ReportSnapshot(to, false)
		}
		n.members[from].ReportUnreachable(to)
		return
	}
	delay := 0
	if n.maxDelay > 0 {
		delay = n.rng.IntN(n.maxDelay + 1)
	}
	n.inflight = append(n.inflight, flight{at: n.now + delay, seq: len(n.sent), msg: msg})
}

func (n *network) deliver() {
	n.t.Helper()
	slices.SortStableFunc(n.inflight, func(a, b flight) int {
		if a.at != b.at {
			return a.at - b.at
		}
		return a.seq - b.seq
	})
	var due []flight
	i := 0
	for i < len(n.inflight) && n.inflight[i].at <= n.now {
		i++
	}
	due, n.inflight = n.inflight[:i:i], slices.Clone(n.inflight[i:])
	for _, f := range due {
		msg := f.msg
		// A link cut while the message was in flight loses it too.
		if n.cut[[2]uint64{msg.From, msg.To}] || n.down[msg.To] || n.members[msg.To] == nil {
			if msg.Type == raftpb.MsgSnap && !n.down[msg.From] {
				n.members[msg.From].ReportSnapshot(msg.To, false)
			}
			continue
		}
		if err := n.members[msg.To].Step(msg); err != nil {
			n.t.Fatalf("member %d: Step %v from %d: %v", msg.To, msg.Type, msg.From, err)
		}
		if msg.Type == raftpb.MsgSnap && !n.down[msg.From] {
			n.members[msg.From].ReportSnapshot(msg.To, true)
		}
	}
}

// tick advances every live member's clock once, then runs rounds rounds.
func (n *network) tick(rounds int) {
	n.t.Helper()
	for _, id := range n.ids {
		if !n.down[id] {
			n.members[id].Tick()
		}
	}
	for range rounds {
		n.round()
	}
}

// run ticks k times with enough rounds per tick for messages to settle.
func (n *network) run(k int) {
	n.t.Helper()
	for range k {
		n.tick(3 + n.maxDelay)
	}
}

// leaders returns the members that think they lead, by id.
func (n *network) leaders() []uint64 {
	var out []uint64
	for _, id := range n.ids {
		if !n.down[id] && n.members[id].IsLeader() {
			out = append(out, id)
		}
	}
	return out
}

// waitLeader runs until exactly one of the members among (default: all)
// leads and all of among agree on it, and returns it.
func (n *network) waitLeader(among ...uint64) uint64 {
	n.t.Helper()
	if len(among) == 0 {
		among = n.ids
	}
	for range 500 {
		n.run(1)
		var ls []uint64
		for _, id := range among {
			if n.members[id].IsLeader() {
				ls = append(ls, id)
			}
		}
		if len(ls) != 1 {
			continue
		}
		agree := true
		for _, id := range among {
			agree = agree && n.members[id].Leader() == ls[0]
		}
		if agree {
			return ls[0]
		}
	}
	n.t.Fatalf("no single leader among %v after 500 ticks", among)
	return 0
}

// propose has member id propose rec's encoding.
func (n *network) propose(id uint64, data []byte) error {
	return n.members[id].Propose(data)
}

// history renders what a member applied, for comparing members.
func history(as []Applied) []string {
	out := make([]string, len(as))
	for i, a := range as {
		out[i] = fmt.Sprintf("%d/%d %s %x", a.Index, a.Term, a.Kind, a.Data)
	}
	return out
}
