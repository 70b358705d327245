package consumer

import (
	"bytes"
	"fmt"
	"maps"
	"math/rand"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordlog/fjord/group"
	"github.com/fjordlog/fjord/group/assign"
	"github.com/fjordlog/fjord/group/internal/datadriven"
)

// simClient is a consumer as the simulation plays it: mostly well behaved,
// sometimes slow to revoke, sometimes losing responses or crashing.
type simClient struct {
	name    string
	inst    *string
	id      string // member id; a new one after UNKNOWN_MEMBER_ID or a restart
	joined  bool
	epoch   int32
	owned   assignment // what it consumes and reports
	pending assignment // received, not yet taken (still revoking)
	topics  []string
	regex   *string
	crashed bool // no longer heartbeats; its session will expire
	gen     int
	// full: the last response was lost; like Kafka's clients, the next
	// heartbeat sends every field, so that the response carries the
	// assignment again.
	full bool
}

// sim is one seeded random run against a Group.
type sim struct {
	t     *testing.T
	seed  int64
	rng   *rand.Rand
	cfg   Config
	g     *Group
	now   int64
	img   *Image
	ids   map[string]TopicID
	nIDs  int
	parts map[string]int32 // topic -> partitions, for topics that exist
	cl    []*simClient
	log   []Record
	tr    bytes.Buffer // transcript: every response and record, encoded
	// held is the simulation's own account of the assignment epochs
	// (KIP-1251), kept from the records as they are written (account):
	// member id -> topic -> partition. check compares it with the group's.
	held map[string]map[TopicID]map[int32]heldPartition
}

// heldPartition is a partition a member owns, by the records: since when
// (the epoch of the first record in which it held the partition
// continuously, revoking or not, or 0 after it left with epoch -2), and
// whether it is being revoked.
type heldPartition struct {
	since    int32
	revoking bool
}

var simRegexes = []string{"t[0-2]", "t.*", "x.*", "t3|t4"}

func newSim(t *testing.T, seed int64) *sim {
	s := &sim{t: t, seed: seed, rng: rand.New(rand.NewSource(seed)), ids: map[string]TopicID{}, parts: map[string]int32{},
		held: map[string]map[TopicID]map[int32]heldPartition{}}
	s.cfg = DefaultConfig()
	s.cfg.SessionTimeoutMs = int32(6000 + s.rng.Intn(4)*10000)
	s.cfg.HeartbeatIntervalMs = 1000
	if s.rng.Intn(3) == 0 {
		s.cfg.MaxSize = int32(3 + s.rng.Intn(5))
	}
	if s.rng.Intn(2) == 0 {
		s.cfg.Assignors = []assign.Assignor{assign.Range(), assign.Uniform()}
	}
	s.g = New("g", s.cfg)
	for i := range 3 {
		s.parts[fmt.Sprintf("t%d", i)] = int32(1 + s.rng.Intn(6))
	}
	s.setImage()
	n := 2 + s.rng.Intn(7) // up to 8 members
	for i := range n {
		c := &simClient{name: fmt.Sprintf("c%d", i)}
		if s.rng.Intn(3) == 0 {
			inst := fmt.Sprintf("i%d", i)
			c.inst = &inst
		}
		c.id = c.memberID()
		s.resubscribe(c)
		s.cl = append(s.cl, c)
	}
	return s
}

func (c *simClient) memberID() string { return fmt.Sprintf("%s-%d", c.name, c.gen) }

func (s *sim) setImage() {
	var ts []Topic
	for _, name := range slices.Sorted(maps.Keys(s.parts)) {
		n := s.parts[name]
		id, ok := s.ids[name]
		if !ok {
			s.nIDs++
			id = TopicID{'S', byte(s.nIDs >> 8), byte(s.nIDs)}
			s.ids[name] = id
		}
		ts = append(ts, Topic{Name: name, ID: id, Partitions: n})
	}
	s.img = NewImage(ts)
}

func (s *sim) resubscribe(c *simClient) {
	c.topics, c.regex = nil, nil
	if s.rng.Intn(3) == 0 {
		re := simRegexes[s.rng.Intn(len(simRegexes))]
		c.regex = &re
		return
	}
	c.topics = []string{}
	for i := range 5 {
		if s.rng.Intn(2) == 0 {
			c.topics = append(c.topics, fmt.Sprintf("t%d", i))
		}
	}
}

func (s *sim) record(what string, recs []Record) {
	fmt.Fprintf(&s.tr, "%d %s\n", s.now, what)
	for _, r := range recs {
		fmt.Fprintf(&s.tr, "  %x %x\n", r.Key, r.Value)
		s.account(r)
	}
	s.log = append(s.log, recs...)
}

// account follows a member's current assignment records: a partition it
// held in the previous record keeps its epoch, unless it comes back from
// revocation to the assigned ones (the client stopped consuming it in
// between); any other is held from the record's epoch; a static member
// leaving with -2 holds everything from 0.
func (s *sim) account(r Record) {
	_, rec, err := decode(r.Key, r.Value)
	if err != nil {
		s.t.Fatalf("seed %d: decoding own record: %v", s.seed, err)
	}
	c, ok := rec.(currentRec)
	if !ok {
		return
	}
	if c.tomb {
		delete(s.held, c.id)
		return
	}
	prev := s.held[c.id]
	next := map[TopicID]map[int32]heldPartition{}
	for _, a := range []struct {
		parts    assignment
		revoking bool
	}{{c.cur.assigned, false}, {c.cur.revoking, true}} {
		for t, ps := range a.parts {
			for _, p := range ps {
				h, ok := prev[t][p]
				switch {
				case c.cur.epoch == epochStaticLeave:
					h.since = 0
				case !ok || (h.revoking && !a.revoking):
					h.since = c.cur.epoch
				}
				h.revoking = a.revoking
				if next[t] == nil {
					next[t] = map[int32]heldPartition{}
				}
				next[t][p] = h
			}
		}
	}
	s.held[c.id] = next
}

// heartbeat sends one heartbeat for c; join with epoch 0.
func (s *sim) heartbeat(c *simClient, join bool) {
	req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	req.Version = 1
	req.Group, req.MemberID, req.InstanceID = "g", c.id, c.inst
	full := join || c.full || s.rng.Intn(8) == 0
	if join {
		c.owned, c.pending, c.epoch = assignment{}, nil, 0
	} else if c.pending != nil && s.rng.Intn(4) != 0 {
		c.owned, c.pending = c.pending, nil // revocation done
	}
	req.MemberEpoch = c.epoch
	if full {
		req.RebalanceTimeoutMillis = int32(2000 + s.rng.Intn(3)*4000)
		req.SubscribedTopicNames, req.SubscribedTopicRegex = c.topics, c.regex
		if c.regex != nil && c.topics == nil && s.rng.Intn(2) == 0 {
			req.SubscribedTopicNames = []string{}
		}
		if s.rng.Intn(4) == 0 {
			a := s.cfg.Assignors[s.rng.Intn(len(s.cfg.Assignors))].Name()
			req.ServerAssignor = &a
		}
	}
	req.Topics = ownedTopics(c.owned)
	if !full {
		switch s.rng.Intn(20) {
		case 0:
			req.Topics = nil // not reported
		case 1:
			req.MemberEpoch-- // a stale epoch
		}
	}
	resp, recs := s.g.HeartbeatFrom(s.now, s.img, req, Client{ID: c.name, Host: "/h"})
	s.record(fmt.Sprintf("hb %s e%d: %x", c.id, req.MemberEpoch, resp.AppendTo(nil)), recs)
	if resp.ErrorCode == 0 && s.rng.Intn(15) == 0 {
		c.full = true // the response is lost: the client retries at its old epoch
		// ... and it may commit first, at that epoch, as franz-go's
		// TestGroupETL does while it shuts down (KIP-1251's race).
		s.commit(c)
		return
	}
	c.full = false
	switch resp.ErrorCode {
	case 0:
		c.joined = true
		c.epoch = resp.MemberEpoch
		if resp.Assignment != nil {
			got := assignment{}
			for _, t := range resp.Assignment.Topics {
				got[t.TopicID] = slices.Clone(t.Partitions)
			}
			if s.rng.Intn(3) == 0 {
				c.pending = got // still revoking: keeps reporting the old ones
			} else {
				c.owned, c.pending = got, nil
			}
		}
	case kerr.FencedMemberEpoch.Code, kerr.StaleMemberEpoch.Code:
		// Abandon the partitions, rejoin under the same id.
		c.joined, c.owned, c.pending = false, assignment{}, nil
	case kerr.UnknownMemberID.Code, kerr.FencedInstanceID.Code:
		c.joined, c.owned, c.pending = false, assignment{}, nil
		c.gen++
		c.id = c.memberID()
	default:
		c.joined, c.owned, c.pending = false, assignment{}, nil
	}
}

// ownedTopics is a heartbeat's Topics for the partitions a, sorted by id
// (also the harness's).
func ownedTopics(a assignment) []kmsg.ConsumerGroupHeartbeatRequestTopic {
	out := []kmsg.ConsumerGroupHeartbeatRequestTopic{}
	for _, t := range a.topics() {
		rt := kmsg.NewConsumerGroupHeartbeatRequestTopic()
		rt.TopicID, rt.Partitions = t, slices.Clone(a[t])
		out = append(out, rt)
	}
	return out
}

func (s *sim) leave(c *simClient) {
	req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	req.Version = 1
	req.Group, req.MemberID, req.InstanceID = "g", c.id, c.inst
	req.MemberEpoch = -1
	if c.inst != nil && s.rng.Intn(2) == 0 {
		req.MemberEpoch = -2
	}
	resp, recs := s.g.Heartbeat(s.now, s.img, req)
	s.record(fmt.Sprintf("leave %s e%d: %x", c.id, req.MemberEpoch, resp.AppendTo(nil)), recs)
	c.joined, c.owned, c.pending = false, assignment{}, nil
	c.gen++ // a restarted client: a new member id, the same instance id
	c.id = c.memberID()
}

func (s *sim) changeTopics() {
	name := fmt.Sprintf("t%d", s.rng.Intn(5))
	switch n, ok := s.parts[name]; {
	case !ok:
		s.parts[name] = int32(1 + s.rng.Intn(6))
	case s.rng.Intn(3) == 0:
		delete(s.parts, name)
		delete(s.ids, name) // recreated later with a new id
	default:
		s.parts[name] = n + int32(1+s.rng.Intn(3))
	}
	s.setImage()
	s.record("metadata", s.g.MetadataChanged(s.now, s.img, AllTopics))
}

// step does one random thing.
func (s *sim) step() {
	s.now += int64(s.rng.Intn(4) * s.rng.Intn(1500))
	c := s.cl[s.rng.Intn(len(s.cl))]
	switch r := s.rng.Intn(100); {
	case r < 45:
		if !c.crashed {
			s.heartbeat(c, !c.joined)
		}
	case r < 50:
		if c.joined && !c.crashed {
			s.resubscribe(c)
			s.heartbeat(c, false)
		}
	case r < 54:
		if c.joined && !c.crashed {
			s.leave(c)
		}
	case r < 57:
		c.crashed = !c.crashed
		if !c.crashed { // restarted
			c.joined, c.owned, c.pending = false, assignment{}, nil
			c.gen++
			c.id = c.memberID()
		}
	case r < 62:
		s.changeTopics()
	case r < 80:
		s.record("tick", s.g.Tick(s.now, s.img))
	case r < 82:
		recs, err := s.g.Delete()
		s.record(fmt.Sprintf("delete: %v", err), recs)
		if err == nil {
			s.g = New("g", s.cfg) // the coordinator drops the Dead group
			for _, c := range s.cl {
				c.joined, c.owned, c.pending = false, assignment{}, nil
			}
		}
	case r < 84:
		s.failover()
	default:
		// Offset validation never changes anything.
		before := s.dump()
		s.commit(c)
		_ = s.g.ValidateOffsetFetch(c.id, c.epoch)
		if s.dump() != before {
			s.t.Fatalf("seed %d: offset validation changed the group", s.seed)
		}
	}
}

// commit checks OffsetCommits by c: at its own epoch (which lags the
// member's when a response was lost) and at epochs around the member's,
// for the partitions it consumes and a few others. Each answer must be
// the KIP-1251 rule applied to the simulation's own account of the
// assignment epochs (held); and a client's commit at its own epoch for
// what it consumes must pass, lost response or not: that is the race the
// rule exists for.
func (s *sim) commit(c *simClient) {
	m := s.g.members[c.id]
	epochs := []int32{c.epoch}
	if m != nil {
		epochs = append(epochs, m.cur.epoch-1-int32(s.rng.Intn(3)), m.cur.epoch+int32(s.rng.Intn(2)))
	}
	type tp struct {
		t TopicID
		p int32
	}
	var parts []tp
	for _, t := range c.owned.topics() {
		for _, p := range c.owned[t] {
			parts = append(parts, tp{t, p})
		}
	}
	names := slices.Sorted(maps.Keys(s.ids))
	for range 3 {
		if len(names) > 0 {
			name := names[s.rng.Intn(len(names))]
			parts = append(parts, tp{s.ids[name], int32(s.rng.Intn(int(s.parts[name])))})
		}
	}
	for _, e := range epochs {
		v := int16(8 + s.rng.Intn(2))
		if e == c.epoch {
			v = 9
		}
		check, err := s.g.CheckOffsetCommit(c.id, e, v)
		lagging := false
		var want int16
		switch {
		case e < 0 && len(s.g.members) == 0:
		case m == nil:
			want = kerr.UnknownMemberID.Code
		case v < 9:
			want = kerr.UnsupportedVersion.Code
		case e > m.cur.epoch:
			want = kerr.StaleMemberEpoch.Code
		default:
			lagging = e < m.cur.epoch
		}
		if got := group.ErrorCode(err); got != want {
			s.t.Fatalf("seed %d: commit by %s at epoch %d v%d: %s, want %s\n%s", s.seed, c.id, e, v,
				errText(err), datadriven.ErrName(want), s.dump())
		}
		if err != nil {
			continue
		}
		for _, x := range parts {
			h, held := s.held[c.id][x.t][x.p]
			ok := !lagging || (held && e >= h.since)
			if got := check.Partition("t", x.t, x.p); (got == nil) != ok {
				s.t.Fatalf("seed %d: commit by %s at epoch %d of %x/%d: %v, want ok=%v (held %v since %d)\n%s",
					s.seed, c.id, e, x.t, x.p, got, ok, held, h.since, s.dump())
			}
		}
		if e != c.epoch || !c.joined || c.crashed || m == nil || e > m.cur.epoch {
			continue
		}
		for _, t := range c.owned.topics() {
			for _, p := range c.owned[t] {
				if err := check.Partition("t", t, p); err != nil {
					s.t.Fatalf("seed %d: %s (lost response: %v) cannot commit %x/%d, which it consumes, at its epoch %d: %v\n%s",
						s.seed, c.id, c.full, t, p, e, err, s.dump())
				}
			}
		}
	}
}

// failover replays the log into a new group, as a new coordinator would.
func (s *sim) failover() {
	g := New("g", s.cfg)
	for i, r := range s.log {
		if err := g.Replay(r.Key, r.Value); err != nil {
			s.t.Fatalf("seed %d: replay of record %d: %v", s.seed, i, err)
		}
	}
	if g.State() == "Dead" {
		g = New("g", s.cfg)
	}
	g.Loaded(s.now)
	s.g = g
	s.record("failover", g.MetadataChanged(s.now, s.img, AllTopics))
}

func (s *sim) dump() string {
	var b strings.Builder
	h := &harness{names: map[TopicID]string{}}
	for name, id := range s.ids {
		h.names[id] = name
	}
	b.WriteString(h.dump(s.g, true))
	return b.String()
}

// check verifies the invariants, the NextDeadline contract, and that
// every joined client consumes only partitions the group lets it own.
func (s *sim) check(what string) {
	if err := s.g.checkInvariants(s.img); err != nil {
		s.t.Fatalf("seed %d after %s: %v\n%s", s.seed, what, err, s.dump())
	}
	if d := s.g.NextDeadline(); d >= 0 {
		before := s.dump()
		recs := s.g.Tick(d-1, s.img)
		if len(recs) > 0 || stripSoft(s.dump()) != stripSoft(before) {
			s.t.Fatalf("seed %d after %s: Tick(NextDeadline-1) acted", s.seed, what)
		}
	}
	for id, m := range s.g.members {
		held := map[TopicID]map[int32]int32{}
		for t, ps := range s.held[id] {
			held[t] = map[int32]int32{}
			for p, h := range ps {
				held[t][p] = h.since
			}
		}
		if !partitionEpochs(held).equal(m.cur.since) {
			s.t.Fatalf("seed %d after %s: member %s assignment epochs %v, its records say %v\n%s",
				s.seed, what, id, m.cur.since, held, s.dump())
		}
	}
	for _, c := range s.cl {
		m := s.g.members[c.id]
		if !c.joined || c.crashed || m == nil || m.cur.epoch < 0 {
			continue
		}
		if !c.owned.subsetOf(m.cur.assigned.union(m.cur.revoking)) {
			s.t.Fatalf("seed %d after %s: client %s consumes %v, the group says %v + %v\n%s",
				s.seed, what, c.id, c.owned, m.cur.assigned, m.cur.revoking, s.dump())
		}
	}
}

// stripSoft drops the lines' rebalance deadlines that Tick may clear.
func stripSoft(dump string) string {
	var out []string
	for _, l := range strings.Split(dump, "\n") {
		if i := strings.Index(l, " rebalance<"); i >= 0 {
			l = l[:i]
		}
		out = append(out, l)
	}
	return strings.Join(out, "\n")
}

// converge stops the chaos: crashed clients restart (their old members
// expire), every client heartbeats dutifully; the group must end Stable
// with every client consuming exactly its target.
func (s *sim) converge(excluded map[*simClient]bool) {
	for _, c := range s.cl {
		if c.crashed && !excluded[c] {
			c.crashed, c.joined, c.owned, c.pending = false, false, assignment{}, nil
			c.gen++
			c.id = c.memberID()
		}
	}
	for round := range 200 {
		s.now += 1000
		for _, c := range s.cl {
			if c.crashed {
				continue
			}
			if c.pending != nil {
				// Done revoking: it takes what it was given (dropping it
				// would leave it without partitions the group will not
				// send again).
				c.owned, c.pending = c.pending, nil
			}
			s.heartbeatDutifully(c)
			s.check("converge")
		}
		s.record("tick", s.g.Tick(s.now, s.img))
		s.check("converge tick")
		if round > int(s.cfg.SessionTimeoutMs/1000)+2 && s.g.State() == "Stable" && s.settled() {
			return
		}
	}
	var cs []string
	for _, c := range s.cl {
		cs = append(cs, fmt.Sprintf("%s joined=%v crashed=%v epoch=%d owned=%v", c.id, c.joined, c.crashed, c.epoch, c.owned))
	}
	s.t.Fatalf("seed %d: the group did not settle: %s\n%s\nclients:\n%s\nlast:\n%s", s.seed, s.g.State(), s.dump(), strings.Join(cs, "\n"), lastLines(s.tr.String(), 12))
}

func (s *sim) settled() bool {
	for _, c := range s.cl {
		if c.crashed {
			continue
		}
		m := s.g.members[c.id]
		if m == nil || !c.joined || !c.owned.equal(m.cur.assigned) || !m.cur.assigned.equal(s.g.target[c.id]) {
			return false
		}
	}
	return true
}

func lastLines(s string, n int) string {
	ls := strings.Split(strings.TrimSpace(s), "\n")
	return strings.Join(ls[max(0, len(ls)-n):], "\n")
}

// heartbeatDutifully is a well-behaved client's heartbeat: it takes what
// it is given at once and never loses a response.
func (s *sim) heartbeatDutifully(c *simClient) {
	req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	req.Version = 1
	req.Group, req.MemberID, req.InstanceID = "g", c.id, c.inst
	if !c.joined {
		c.owned, c.epoch = assignment{}, 0
	}
	if !c.joined || c.full {
		req.RebalanceTimeoutMillis = 10000
		req.SubscribedTopicNames, req.SubscribedTopicRegex = c.topics, c.regex
	}
	req.MemberEpoch = c.epoch
	req.Topics = ownedTopics(c.owned)
	resp, recs := s.g.HeartbeatFrom(s.now, s.img, req, Client{ID: c.name, Host: "/h"})
	s.record(fmt.Sprintf("hb %s e%d: %x", c.id, req.MemberEpoch, resp.AppendTo(nil)), recs)
	c.full = false
	switch resp.ErrorCode {
	case 0:
		c.joined, c.epoch = true, resp.MemberEpoch
		if resp.Assignment != nil {
			got := assignment{}
			for _, t := range resp.Assignment.Topics {
				got[t.TopicID] = slices.Clone(t.Partitions)
			}
			c.owned = got
		}
	case kerr.UnreleasedInstanceID.Code, kerr.GroupMaxSizeReached.Code:
		// Wait for the holder's session, or for room.
	case kerr.UnknownMemberID.Code, kerr.FencedInstanceID.Code:
		c.joined, c.owned = false, assignment{}
		c.gen++
		c.id = c.memberID()
	default:
		c.joined, c.owned = false, assignment{}
	}
}

// run plays steps random steps, then converges; it returns the
// transcript.
func (s *sim) run(steps int) []byte {
	for i := range steps {
		s.step()
		s.check(fmt.Sprintf("step %d", i))
		if i%25 == 0 {
			if err := checkReplay(s.g, s.cfg, s.logOfCurrentGroup(), s.img, func(g *Group, soft bool) string { return s.dumpOf(g, soft) }); err != nil {
				s.t.Fatalf("seed %d step %d: %v", s.seed, i, err)
			}
		}
	}
	// Too many members for the group's max size never settle: only
	// those that fit.
	excluded := map[*simClient]bool{}
	if max := int(s.cfg.MaxSize); len(s.cl) > max {
		for _, c := range s.cl[max:] {
			if c.joined && !c.crashed {
				s.leave(c)
			}
			c.crashed = true
			excluded[c] = true
		}
	}
	s.converge(excluded)
	if err := checkReplay(s.g, s.cfg, s.logOfCurrentGroup(), s.img, func(g *Group, soft bool) string { return s.dumpOf(g, soft) }); err != nil {
		s.t.Fatalf("seed %d at the end: %v", s.seed, err)
	}
	return s.tr.Bytes()
}

// logOfCurrentGroup is the log since the current group began: after a
// Delete the coordinator starts a new Group, and a failover into an empty
// log starts afresh.
func (s *sim) logOfCurrentGroup() []Record {
	// A replay of the whole log recreates a deleted group from its later
	// records, so the whole log is the current group's history.
	return s.log
}

func (s *sim) dumpOf(g *Group, soft bool) string {
	h := &harness{names: map[TopicID]string{}}
	for name, id := range s.ids {
		h.names[id] = name
	}
	return h.dump(g, soft)
}

// TestRandom drives groups of up to 8 members through seeded random
// sequences of joins, heartbeats (some slow to revoke, some stale, some
// losing their response), leaves, crashes, restarts, metadata changes,
// ticks, deletes, failovers and offset commits, checking the invariants
// and the assignment epochs after every step, every commit against the
// KIP-1251 rule, and the replay property regularly; then lets each group
// settle.
func TestRandom(t *testing.T) {
	budget := 2 * time.Second
	if testing.Short() {
		budget = 300 * time.Millisecond
	}
	start := time.Now()
	seeds := 0
	for seed := int64(1); time.Since(start) < budget; seed++ {
		newSim(t, seed).run(300)
		seeds++
	}
	t.Logf("%d seeds", seeds)
}

// TestDeterminism runs the same seeds twice: the responses and records
// must be the same bytes.
func TestDeterminism(t *testing.T) {
	for seed := int64(1); seed <= 5; seed++ {
		a := newSim(t, seed).run(300)
		b := newSim(t, seed).run(300)
		if !bytes.Equal(a, b) {
			t.Fatalf("seed %d: transcripts differ", seed)
		}
	}
}
