package replica

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/fjordlog/fjord/protocol/lifecycle"
)

// TestRandomized drives three replicas of one partition and a model of
// the active controller with random interleavings of produce, flush,
// follower fetches, ticks, AlterPartition answers, crashes (losing what
// was not fsynced) and restarts, and checks after every step:
//
//   - a leader's high watermark never goes backwards within its epoch;
//   - no committed offset (the highest HW any leader published) is above
//     the durable end of any ISR member, and every ISR member's log holds
//     the committed records as they were committed;
//   - at most one replica leads per leader epoch;
//   - no replica's HW is above its log end.
//
// Followers fetch before their fsync and report their durable end apart
// (pipelined replication), or fsync first and fetch at their durable end;
// leaders serve their log end, fsynced or not; a follower that leads next
// may hold a tail it has not fsynced.
//
// The replicas' logs are lists of (epoch, value); the fetch and the
// divergence check follow the broker's fetcher (KIP-101, KIP-279).
func TestRandomized(t *testing.T) {
	seeds, steps := 300, 600
	if testing.Short() {
		seeds = 50
	}
	totalCommitted, totalEpochs := 0, 0
	for seed := range seeds {
		s := newSim(t, uint64(seed))
		for i := range steps {
			s.step()
			if err := s.check(); err != nil {
				t.Fatalf("seed %d step %d: %v\n%s", seed, i, err, s.trace())
			}
		}
		totalCommitted += s.committed
		totalEpochs += len(s.leaderOf)
	}
	// A run that commits nothing or never fails over checks nothing.
	if totalCommitted < seeds*20 || totalEpochs < seeds*2 {
		t.Fatalf("too little happened: %d records committed, %d leader epochs over %d seeds", totalCommitted, totalEpochs, seeds)
	}
	t.Logf("%d seeds: %d records committed, %d leader epochs", seeds, totalCommitted, totalEpochs)
	if false {
	}
}

type simEntry struct {
	epoch int32
	value int
}

type simReplica struct {
	id      int32
	alive   bool
	core    *Core
	log     []simEntry
	durable int
}

// endForEpoch is Kafka's OffsetForLeaderEpoch answer from this log: the
// largest epoch <= e it has, and where that epoch ends (the next epoch's
// start, or the log end).
func (r *simReplica) endForEpoch(e int32) (int32, int) {
	found := int32(-1)
	for _, en := range r.log {
		if en.epoch <= e {
			found = max(found, en.epoch)
		}
	}
	if found < 0 {
		return -1, -1
	}
	for i, en := range r.log {
		if en.epoch > found {
			return found, i
		}
	}
	return found, len(r.log)
}

func (r *simReplica) latestEpoch() int32 {
	if len(r.log) == 0 {
		return -1
	}
	return r.log[len(r.log)-1].epoch
}

type simProposal struct {
	from int32
	p    Proposal
}

type sim struct {
	t     *testing.T
	rng   *rand.Rand
	now   int64
	reps  []*simReplica
	asg   Assignment
	queue []simProposal
	// fetches are fetch answers in flight.
	fetches []simFetch
	// Checker state.
	committed   int        // highest HW any leader published
	committedAs []simEntry // the records below committed, as committed
	leaderOf    map[int32]int32
	hwAt        map[[2]int32]int64 // (replica, epoch) -> last HW while leading
	nextValue   int
	events      []string
}

func newSim(t *testing.T, seed uint64) *sim {
	s := &sim{t: t, rng: rand.New(rand.NewPCG(seed, seed*7+1)), leaderOf: map[int32]int32{}, hwAt: map[[2]int32]int64{}}
	s.asg = Assignment{Leader: 1, LeaderEpoch: 0, PartitionEpoch: 0, Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2, 3}}
	for id := int32(1); id <= 3; id++ {
		r := &simReplica{id: id, alive: true}
		s.reps = append(s.reps, r)
		s.boot(r)
	}
	return s
}

func (s *sim) cfg(id int32) Config {
	return Config{ID: id, SyncOnAck: true, LagMs: 1000, OpenTimeoutMs: 5000, AlterTimeoutMs: 3000,
		Open: lifecycle.Backoff{Initial: 100 * time.Millisecond, Max: time.Second}, OpenAttempts: 5, Alter: lifecycle.Backoff{Initial: 50 * time.Millisecond, Max: 500 * time.Millisecond}, AlterAttempts: 5}
}

func (s *sim) rep(id int32) *simReplica { return s.reps[id-1] }

func (s *sim) logf(format string, args ...any) {
	s.events = append(s.events, fmt.Sprintf("t=%d ", s.now)+fmt.Sprintf(format, args...))
	if len(s.events) > 40 {
		s.events = s.events[1:]
	}
}

func (s *sim) trace() string {
	out := ""
	for _, e := range s.events {
		out += e + "\n"
	}
	for _, r := range s.reps {
		out += fmt.Sprintf("replica %d alive=%v phase=%v hw=%d log=%v durable=%d\n", r.id, r.alive, r.core.Phase(), r.core.HW(), r.log, r.durable)
	}
	return out + fmt.Sprintf("controller %+v committed=%d", s.asg, s.committed)
}

// boot starts a replica's core on its (durable) log, as a broker start.
func (s *sim) boot(r *simReplica) {
	r.core = New(s.cfg(r.id))
	s.apply(r, r.core.Step(s.now, Assign{s.assignment()}))
	s.apply(r, r.core.Start(s.now))
	s.apply(r, r.core.Step(s.now, OpenDone{Start: 0, End: int64(len(r.log)), Durable: int64(r.durable)}))
}

func (s *sim) assignment() Assignment {
	a := s.asg
	a.ISR = slices.Clone(a.ISR)
	a.Live = nil
	for _, r := range s.reps {
		if r.alive {
			a.Live = append(a.Live, r.id)
		}
	}
	return a
}

// publish sends the controller's current state to every live replica.
func (s *sim) publish() {
	for _, r := range s.reps {
		if r.alive {
			s.apply(r, r.core.Step(s.now, Assign{s.assignment()}))
		}
	}
}

// apply carries out a Ready for replica r.
func (s *sim) apply(r *simReplica, rd Ready) {
	if rd.Propose != nil {
		s.queue = append(s.queue, simProposal{r.id, *rd.Propose})
	}
	if rd.HWMoved && (r.core.Phase() == Leading || r.core.Phase() == Resigning) {
		key := [2]int32{r.id, s.asg.LeaderEpoch}
		if last, ok := s.hwAt[key]; ok && rd.HW < last {
			s.t.Fatalf("replica %d: leader HW went back %d -> %d at epoch %d\n%s", r.id, last, rd.HW, s.asg.LeaderEpoch, s.trace())
		}
		s.hwAt[key] = rd.HW
		if int(rd.HW) > s.committed {
			if int(rd.HW) > len(r.log) {
				s.t.Fatalf("replica %d: HW %d past its log end %d\n%s", r.id, rd.HW, len(r.log), s.trace())
			}
			s.committedAs = append(s.committedAs, r.log[s.committed:rd.HW]...)
			s.committed = int(rd.HW)
		}
	}
	if r.core.Phase() == Leading {
		if prev, ok := s.leaderOf[r.core.asg.LeaderEpoch]; ok && prev != r.id {
			s.t.Fatalf("epoch %d led by %d and %d\n%s", r.core.asg.LeaderEpoch, prev, r.id, s.trace())
		}
		s.leaderOf[r.core.asg.LeaderEpoch] = r.id
	}
}

func (s *sim) step() {
	switch n := s.rng.IntN(100); {
	case n < 25:
		s.produce()
	case n < 35:
		s.flush(s.reps[s.rng.IntN(3)])
	case n < 50:
		s.fetch(s.reps[s.rng.IntN(3)])
	case n < 65:
		s.deliver()
	case n < 78:
		s.now += int64(s.rng.IntN(400))
		for _, r := range s.reps {
			if r.alive {
				s.apply(r, r.core.Tick(s.now))
			}
		}
	case n < 92:
		s.answer()
	case n < 96:
		s.crash()
	default:
		s.restart()
	}
}

func (s *sim) produce() {
	if s.asg.Leader < 0 {
		return
	}
	r := s.rep(s.asg.Leader)
	if !r.alive || r.core.View().Check(Produce) != 0 {
		return
	}
	s.nextValue++
	r.log = append(r.log, simEntry{r.core.asg.LeaderEpoch, s.nextValue})
	s.logf("produce %d to %d at epoch %d", s.nextValue, r.id, r.core.asg.LeaderEpoch)
	s.apply(r, r.core.Step(s.now, Appended{End: int64(len(r.log))}))
}

func (s *sim) flush(r *simReplica) {
	if !r.alive || r.durable == len(r.log) {
		return
	}
	r.durable = len(r.log)
	s.apply(r, r.core.Step(s.now, Flushed{Durable: int64(r.durable)}))
}

func (s *sim) truncate(r *simReplica, to int) {
	if to < len(r.log) {
		s.logf("replica %d truncates %d -> %d", r.id, len(r.log), to)
		r.log = r.log[:to]
		r.durable = min(r.durable, to)
	}
	s.apply(r, r.core.Step(s.now, Truncated{Start: 0, End: int64(len(r.log))}))
}

// simFetch is a fetch response in flight to a follower: computed from
// the leader's log when asked, applied when delivered, by which time the
// follower may have moved on (the fetcher's answers race the metadata).
type simFetch struct {
	to, leader int32
	epoch      int32 // the follower's leader epoch when it asked
	reconcile  bool
	// reconcile: the leader's answer for the follower's latest epoch.
	asked, foundEpoch int32
	end               int
	// fetch: entries from offset, and the leader's HW.
	offset  int
	entries []simEntry
	hw      int64
}

// fetch is one request of r's fetcher to its leader, as the broker's
// fetcher does it: at a new epoch, ask where its latest epoch ends
// (KIP-279); else fetch at its log end, reporting its durable end (the
// leader counts that for its HW at once), which may lag its log end: its
// fsync runs beside its fetches (pipelined replication). One fetch in
// three is the serial kind, fsync first and no durable end. The answer is
// delivered later (deliver).
func (s *sim) fetch(r *simReplica) {
	if !r.alive {
		return
	}
	v := r.core.View()
	if !v.Fetches(v.Leader) {
		return
	}
	l := s.rep(v.Leader)
	lv := l.core.View()
	if !l.alive || lv.Check(ReplicaRead) != 0 || lv.LeaderEpoch != v.LeaderEpoch {
		return // the leader does not serve this epoch (yet)
	}
	f := simFetch{to: r.id, leader: l.id, epoch: v.LeaderEpoch}
	// One fetcher per leader asks for a partition one request at a time;
	// an older leader's fetcher may still be answering.
	for _, g := range s.fetches {
		if g.to == f.to && g.leader == f.leader && g.epoch == f.epoch {
			return
		}
	}
	if v.Phase == Reconciling {
		f.reconcile = true
		f.asked = r.latestEpoch()
		f.foundEpoch, f.end = l.endForEpoch(f.asked)
	} else {
		f.offset = len(r.log)
		durable := int64(r.durable)
		if s.rng.IntN(3) == 0 {
			// A fetch without the durable end (an older follower, or the
			// leader's answers unmarked): it fsyncs first, and its offset
			// counts.
			s.flush(r)
			durable = int64(len(r.log))
		}
		s.apply(l, l.core.Step(s.now, FollowerFetched{ID: r.id, LeaderEpoch: v.LeaderEpoch, Offset: int64(f.offset), Durable: durable}))
		if f.offset <= len(l.log) {
			n := len(l.log) - f.offset
			f.entries = slices.Clone(l.log[f.offset : f.offset+s.rng.IntN(n+1)])
		} else {
			f.offset = -1 // out of range
		}
		f.hw = l.core.HW()
	}
	s.fetches = append(s.fetches, f)
}

// deliver applies one fetch answer, if its follower still follows that
// leader at that epoch (the broker checks the same under its role lock).
func (s *sim) deliver() {
	if len(s.fetches) == 0 {
		return
	}
	i := s.rng.IntN(len(s.fetches))
	f := s.fetches[i]
	s.fetches = slices.Delete(s.fetches, i, i+1)
	r := s.rep(f.to)
	if !r.alive {
		return
	}
	// The log is changed only if r still follows that leader at that
	// epoch; the events go to the core regardless, and it must ignore
	// the stale ones.
	v := r.core.View()
	current := v.Fetches(f.leader) && v.LeaderEpoch == f.epoch
	if f.reconcile {
		if f.asked < 0 || f.foundEpoch < 0 {
			if current {
				s.truncate(r, int(r.core.HW()))
			}
		} else {
			target := f.end
			if f.foundEpoch != f.asked {
				if _, mine := r.endForEpoch(f.foundEpoch); mine >= 0 {
					target = min(target, mine)
				} else {
					target = min(target, int(r.core.HW()))
				}
			}
			if current {
				s.truncate(r, target)
			}
			if f.foundEpoch != f.asked {
				return // ask again with the new latest epoch
			}
		}
		s.apply(r, r.core.Step(s.now, Reconciled{LeaderEpoch: f.epoch}))
		return
	}
	if !current {
		s.apply(r, r.core.Step(s.now, Diverged{LeaderEpoch: f.epoch}))
		return
	}
	if f.offset < 0 || f.offset != len(r.log) {
		s.apply(r, r.core.Step(s.now, Diverged{LeaderEpoch: f.epoch}))
		return
	}
	if len(f.entries) > 0 {
		r.log = append(r.log, f.entries...)
		s.apply(r, r.core.Step(s.now, Appended{End: int64(len(r.log))}))
		if s.rng.IntN(4) > 0 {
			s.flush(r)
		}
	}
	s.apply(r, r.core.Step(s.now, LeaderHW{HW: f.hw}))
}

// answer lets the controller decide one queued AlterPartition.
func (s *sim) answer() {
	if len(s.queue) == 0 {
		return
	}
	i := s.rng.IntN(len(s.queue))
	q := s.queue[i]
	s.queue = slices.Delete(s.queue, i, i+1)
	r := s.rep(q.from)
	code := s.decide(q.from, q.p)
	s.logf("alter from %d %+v: code %d", q.from, q.p, code)
	if r.alive {
		s.apply(r, r.core.Step(s.now, AlterAnswered{Proposal: q.p, Code: code}))
	}
	if code == 0 {
		s.publish()
	}
}

// decide is the active controller's AlterPartition: stale epochs are
// refused; a resignation elects another live ISR member.
func (s *sim) decide(from int32, p Proposal) int16 {
	if s.asg.Leader != from || p.LeaderEpoch != s.asg.LeaderEpoch || p.PartitionEpoch != s.asg.PartitionEpoch {
		return 108 // INVALID_UPDATE_VERSION (or a stale leader)
	}
	if p.Resign {
		for _, id := range p.ISR {
			if s.rep(id).alive {
				s.asg.Leader, s.asg.ISR = id, slices.Clone(p.ISR)
				s.asg.LeaderEpoch++
				s.asg.PartitionEpoch++
				return 0
			}
		}
		return 6
	}
	if !slices.Contains(p.ISR, from) {
		return 42
	}
	s.asg.ISR = slices.Clone(p.ISR)
	s.asg.PartitionEpoch++
	return 0
}

// crash kills a live replica: what it had not fsynced is gone. The
// controller fences it: out of the ISR, and its leadership moves to
// another live ISR member (never unclean; none: no leader).
func (s *sim) crash() {
	r := s.reps[s.rng.IntN(3)]
	alive := 0
	for _, x := range s.reps {
		if x.alive {
			alive++
		}
	}
	if !r.alive || alive == 1 {
		return
	}
	r.alive = false
	r.log = r.log[:r.durable]
	s.logf("crash %d (log %d durable)", r.id, r.durable)
	if rest := without(s.asg.ISR, r.id); len(rest) > 0 {
		s.asg.ISR = rest
		s.asg.PartitionEpoch++
	}
	if s.asg.Leader == r.id {
		s.asg.Leader = -1
		for _, id := range s.asg.ISR {
			if s.rep(id).alive {
				s.asg.Leader = id
				break
			}
		}
		s.asg.LeaderEpoch++
		s.asg.PartitionEpoch++
	}
	s.publish()
}

// restart brings a dead replica back on its durable log. The sole ISR
// member of a leaderless partition is elected again.
func (s *sim) restart() {
	var dead []*simReplica
	for _, r := range s.reps {
		if !r.alive {
			dead = append(dead, r)
		}
	}
	if len(dead) == 0 {
		return
	}
	r := dead[s.rng.IntN(len(dead))]
	r.alive = true
	s.logf("restart %d", r.id)
	if s.asg.Leader < 0 && slices.Contains(s.asg.ISR, r.id) {
		s.asg.Leader = r.id
		s.asg.LeaderEpoch++
		s.asg.PartitionEpoch++
	}
	s.boot(r)
	s.publish()
}

// check verifies the invariants that need every replica at once.
func (s *sim) check() error {
	for _, id := range s.asg.ISR {
		r := s.rep(id)
		if r.durable < s.committed {
			return fmt.Errorf("ISR member %d durable end %d below committed %d", id, r.durable, s.committed)
		}
		for i := range s.committed {
			if r.log[i] != s.committedAs[i] {
				return fmt.Errorf("ISR member %d offset %d is %v, committed %v", id, i, r.log[i], s.committedAs[i])
			}
		}
	}
	for _, r := range s.reps {
		if r.alive && r.core.Phase().logOpen() && r.core.HW() > int64(len(r.log)) {
			return fmt.Errorf("replica %d HW %d above its log end %d", r.id, r.core.HW(), len(r.log))
		}
	}
	return nil
}
