package consumer

import (
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordlog/fjord/group"
	"github.com/fjordlog/fjord/group/internal/datadriven"
)

// harness drives one Group from datadriven commands (testdata/*.txt).
// Every command may set the clock with t=ms.
//
//	new [session=ms] [hb=ms] [maxsize=n] [assignors=uniform,range] [nonce=s]
//	    [migration=policy] [classicmax=n]
//	topics name:partitions ...    the image becomes exactly these topics (a
//	                              name seen before keeps its id unless
//	                              written name:n:new); MetadataChanged
//	                              unless quiet
//	join m=id [v=1] [i=inst] [rack=r] [rt=ms] [topics=a,b|-] [regex=re]
//	     [assignor=name] [c=client] [h=host] [owned=spec|nil] [hold]
//	hb m=id [e=epoch] [v=1] [i=inst] [rack=r] [rt=ms] [topics=a,b|-]
//	     [regex=re] [assignor=name] [owned=spec|nil] [full] [hold]
//	leave m=id [static] [i=inst] [e=epoch]
//	tick | next | state | describe | classic | delete
//	    topics, join, hb and load take [deny=a,b]: the principal of the
//	    heartbeat (of the change, for topics and load) may not DESCRIBE
//	    those topics; topics and load take [nobody]: no heartbeat brings
//	    the change (MetadataChanged's nil Visibility)
//	commit m=id e=epoch [v=9] [p=a:0,1;b:2]
//	                              without p: ValidateOffsetCommit; with p:
//	                              CheckOffsetCommit and each partition
//	fetch m=id e=epoch
//	load                          replay every record so far into a new
//	                              group, Loaded, MetadataChanged: a
//	                              coordinator failover
//
// The harness plays the clients: each remembers its member id, epoch and
// the partitions it owns; a heartbeat reports them (owned=a:0,1;b:2
// overrides, owned= is the empty list, owned=nil leaves them out). A
// response's assignment is taken at once, unless hold: then the client
// keeps reporting its old partitions (it is still revoking) until a
// heartbeat without hold. A heartbeat sends only the epoch, the member id
// and the owned partitions unless told otherwise; full sends every field
// as on the join.
//
// After every command the harness checks the invariants and replays every
// record written so far into a fresh group, which must equal the live one.
type harness struct {
	t       *testing.T
	cfg     Config
	g       *Group
	now     int64
	img     *Image
	ids     map[string]TopicID // current id of each topic name
	names   map[TopicID]string // name of every id ever created
	nTopics int
	clients map[string]*client
	// classics are the classic-protocol clients (classic_harness_test.go).
	classics map[string]*classicClient
	log      []Record // every record written, in order
	// stale: the image changed quietly; the group has not been told, so
	// the invariants that compare it with the image are not checked.
	stale bool
}

type client struct {
	id      string
	epoch   int32
	owned   assignment
	pending assignment // received while holding
	join    *kmsg.ConsumerGroupHeartbeatRequest
}

func newHarness(t *testing.T) *harness {
	h := &harness{t: t, ids: map[string]TopicID{}, names: map[TopicID]string{}}
	h.reset(DefaultConfig())
	return h
}

func (h *harness) reset(cfg Config) {
	h.cfg = cfg
	h.g = New("g", cfg)
	h.now = 0
	h.clients = map[string]*client{}
	h.classics = nil
	h.log = nil
	if h.img == nil {
		h.img = NewImage(nil)
	}
}

func (h *harness) do(c *datadriven.Case) string {
	a := c.Map()
	if a.Has("t") {
		h.now = a.Num("t", 0)
	}
	var b strings.Builder
	switch c.Cmd {
	case "new":
		cfg := DefaultConfig()
		cfg.SessionTimeoutMs = int32(a.Num("session", int64(cfg.SessionTimeoutMs)))
		cfg.HeartbeatIntervalMs = int32(a.Num("hb", int64(cfg.HeartbeatIntervalMs)))
		cfg.MaxSize = int32(a.Num("maxsize", int64(cfg.MaxSize)))
		cfg.MemberIDNonce = a.Str("nonce", "")
		if p, ok := a["migration"]; ok {
			cfg.MigrationPolicy = MigrationPolicy(p)
		}
		cfg.ClassicMaxSize = int32(a.Num("classicmax", 0))
		if names, ok := a["assignors"]; ok {
			all := cfg.Assignors
			cfg.Assignors = nil
			for _, n := range strings.Split(names, ",") {
				for _, x := range all {
					if x.Name() == n {
						cfg.Assignors = append(cfg.Assignors, x)
					}
				}
			}
		}
		h.reset(cfg)
		return "ok"
	case "topics":
		var ts []Topic
		for _, kv := range c.Args {
			if kv.Key == "t" || kv.Key == "quiet" || kv.Key == "deny" || kv.Key == "nobody" {
				continue
			}
			name, rest, _ := strings.Cut(kv.Key, ":")
			parts := strings.Split(rest, ":")
			n, err := strconv.Atoi(parts[0])
			if err != nil {
				h.t.Fatalf("%s: topic %q: %v", c.Pos, kv.Key, err)
			}
			id, ok := h.ids[name]
			if !ok || (len(parts) > 1 && parts[1] == "new") {
				h.nTopics++
				id = TopicID{'T', byte(h.nTopics)}
				h.ids[name], h.names[id] = id, name
			}
			ts = append(ts, Topic{Name: name, ID: id, Partitions: int32(n)})
		}
		h.img = NewImage(ts)
		h.stale = a.Has("quiet")
		if !h.stale {
			h.printRecords(&b, h.g.MetadataChanged(h.now, h.img, visibility(a)))
		}
	case "join", "hb":
		h.heartbeat(&b, c, a)
	case "leave":
		id := a.Str("m", "")
		cl := h.clients[id]
		req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
		req.Version = int16(a.Num("v", 1))
		req.Group, req.MemberID = "g", id
		req.MemberEpoch = -1
		req.InstanceID = a.Ptr("i")
		if a.Has("static") {
			req.MemberEpoch = -2
			if req.InstanceID == nil && cl != nil && cl.join != nil {
				req.InstanceID = cl.join.InstanceID
			}
		}
		req.MemberEpoch = int32(a.Num("e", int64(req.MemberEpoch)))
		resp, recs := h.g.Heartbeat(h.now, h.img, req)
		h.printResp(&b, req, resp)
		h.printRecords(&b, recs)
		if resp.ErrorCode == 0 {
			delete(h.clients, id)
		}
	case "upgrade", "cjoin", "csync", "chb", "cleave":
		h.doClassic(&b, c, a)
	case "downgraded":
		v, rebalance := h.g.Downgraded()
		if v == nil {
			return "not downgraded"
		}
		return fmt.Sprintf("%s\nrebalance=%v", h.fmtClassic([]byte{0, 2}, v.AppendTo(nil)), rebalance)
	case "tick":
		h.printRecords(&b, h.g.Tick(h.now, h.img))
	case "next":
		return fmt.Sprint(h.g.NextDeadline())
	case "state":
		return h.dump(h.g, true)
	case "describe":
		return h.describe(h.g.Describe(h.img))
	case "classic":
		d := h.g.DescribeClassic()
		return fmt.Sprintf("group=%s state=%s err=%s msg=%q members=%d", d.Group, d.State, datadriven.ErrName(d.ErrorCode), deref(d.ErrorMessage), len(d.Members))
	case "delete":
		recs, err := h.g.Delete()
		if err != nil {
			b.WriteString("delete: " + errText(err) + "\n")
		}
		h.printRecords(&b, recs)
	case "commit":
		return h.commit(a)
	case "fetch":
		err := h.g.ValidateOffsetFetch(a.Str("m", ""), int32(a.Num("e", -1)))
		return "fetch: " + errText(err)
	case "load":
		g := New("g", h.cfg)
		for _, r := range h.log {
			if _, ok := GroupOfKey(r.Key); !ok {
				continue // the classic group's record of a migration
			}
			if err := g.Replay(r.Key, r.Value); err != nil {
				h.t.Fatalf("%s: replay: %v", c.Pos, err)
			}
		}
		g.Loaded(h.now)
		h.g = g
		h.stale = false
		h.printRecords(&b, g.MetadataChanged(h.now, h.img, visibility(a)))
	default:
		h.t.Fatalf("%s: unknown command %q", c.Pos, c.Cmd)
	}
	h.check(c.Pos)
	fmt.Fprintf(&b, "> %s", h.status())
	return b.String()
}

func (h *harness) heartbeat(b *strings.Builder, c *datadriven.Case, a datadriven.Args) {
	id := a.Str("m", "")
	cl := h.clients[id]
	if cl == nil {
		cl = &client{id: id, owned: assignment{}}
	}
	req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	req.Version = int16(a.Num("v", 1))
	req.Group, req.MemberID = "g", id
	joining := c.Cmd == "join"
	if joining {
		req.MemberEpoch = 0
		req.RebalanceTimeoutMillis = 30000
	} else {
		req.MemberEpoch = cl.epoch
		if a.Has("full") && cl.join != nil {
			*req = *cl.join
			req.MemberID = id
			req.MemberEpoch = cl.epoch
		}
	}
	req.MemberEpoch = int32(a.Num("e", int64(req.MemberEpoch)))
	if a.Has("i") {
		req.InstanceID = a.Ptr("i")
	}
	if a.Has("rack") {
		req.RackID = a.Ptr("rack")
	}
	req.RebalanceTimeoutMillis = int32(a.Num("rt", int64(req.RebalanceTimeoutMillis)))
	if ts, ok := a["topics"]; ok {
		req.SubscribedTopicNames = []string{}
		if ts != "-" {
			req.SubscribedTopicNames = strings.Split(ts, ",")
		}
	}
	if a.Has("regex") {
		req.SubscribedTopicRegex = a.Ptr("regex")
	}
	if a.Has("assignor") {
		req.ServerAssignor = a.Ptr("assignor")
	}
	if cl.pending != nil && !a.Has("hold") {
		cl.owned, cl.pending = cl.pending, nil
	}
	if joining {
		req.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
	} else {
		req.Topics = ownedTopics(cl.owned) // sim_test.go
	}
	if spec, ok := a["owned"]; ok {
		req.Topics = h.parseOwned(spec)
	}
	client := Client{ID: a.Str("c", "client-"+id), Host: a.Str("h", "/10.0.0.1"), MayDescribe: visibility(a)}
	resp, recs := h.g.HeartbeatFrom(h.now, h.img, req, client)
	h.printResp(b, req, resp)
	h.printRecords(b, recs)
	if resp.ErrorCode != 0 {
		return
	}
	if joining {
		j := *req
		cl.join = &j
		cl.owned = assignment{}
	}
	cl.id = *resp.MemberID
	cl.epoch = resp.MemberEpoch
	if resp.Assignment != nil {
		got := assignment{}
		for _, t := range resp.Assignment.Topics {
			got[t.TopicID] = t.Partitions
		}
		if a.Has("hold") {
			cl.pending = got
		} else {
			cl.owned, cl.pending = got, nil
		}
	}
	if cl.id != id {
		delete(h.clients, id)
	}
	h.clients[cl.id] = cl
}

// parseOwned reads "a:0,1;b:2" ("" is the empty list, "nil" null).
func (h *harness) parseOwned(spec string) []kmsg.ConsumerGroupHeartbeatRequestTopic {
	if spec == "nil" {
		return nil
	}
	out := []kmsg.ConsumerGroupHeartbeatRequestTopic{}
	if spec == "" {
		return out
	}
	for _, e := range strings.Split(spec, ";") {
		name, ps, _ := strings.Cut(e, ":")
		id, ok := h.ids[name]
		if !ok {
			h.t.Fatalf("owned: unknown topic %q", name)
		}
		rt := kmsg.NewConsumerGroupHeartbeatRequestTopic()
		rt.TopicID = id
		for _, p := range strings.Split(ps, ",") {
			if p == "" {
				continue
			}
			n, err := strconv.Atoi(p)
			if err != nil {
				h.t.Fatalf("owned %q: %v", spec, err)
			}
			rt.Partitions = append(rt.Partitions, int32(n))
		}
		out = append(out, rt)
	}
	return out
}

func (h *harness) printResp(b *strings.Builder, req *kmsg.ConsumerGroupHeartbeatRequest, resp *kmsg.ConsumerGroupHeartbeatResponse) {
	if resp.Version != req.Version {
		h.t.Fatalf("response version %d, request %d", resp.Version, req.Version)
	}
	if resp.ErrorCode != 0 {
		fmt.Fprintf(b, "err=%s: %s\n", datadriven.ErrName(resp.ErrorCode), deref(resp.ErrorMessage))
		return
	}
	fmt.Fprintf(b, "member=%s epoch=%d hb=%d", deref(resp.MemberID), resp.MemberEpoch, resp.HeartbeatIntervalMillis)
	if resp.Assignment != nil {
		a := assignment{}
		for _, t := range resp.Assignment.Topics {
			a[t.TopicID] = t.Partitions
		}
		fmt.Fprintf(b, " assignment=%s", h.fmtAssignment(a))
	}
	b.WriteString("\n")
}

// printRecords decodes and prints the records, and logs them for the
// replay check.
func (h *harness) printRecords(b *strings.Builder, recs []Record) {
	for _, r := range recs {
		h.log = append(h.log, r)
		if g, ok := ClassicGroupOfKey(r.Key); ok {
			if g != "g" {
				h.t.Fatalf("classic record of group %q", g)
			}
			b.WriteString("  " + h.fmtClassic(r.Key, r.Value) + "\n")
			continue
		}
		group, rec, err := decode(r.Key, r.Value)
		if err != nil {
			h.t.Fatalf("decoding own record: %v", err)
		}
		if g2, ok := GroupOfKey(r.Key); !ok || g2 != group || group != "g" {
			h.t.Fatalf("GroupOfKey(%x) = %q, %v", r.Key, g2, ok)
		}
		b.WriteString("  " + h.fmtRecord(rec) + "\n")
	}
}

func (h *harness) fmtRecord(rec record) string {
	switch r := rec.(type) {
	case groupRec:
		if r.tomb {
			return "-group"
		}
		return fmt.Sprintf("group epoch=%d hash=%s", r.epoch, fmtHash(r.hash))
	case partitionMetaRec:
		return "-partition-metadata"
	case memberRec:
		if r.tomb {
			return "-member " + r.id
		}
		m := r.meta
		return fmt.Sprintf("member %s inst=%s rack=%s client=%s host=%s topics=[%s] regex=%s rt=%d assignor=%s%s",
			r.id, deref(m.instanceID), deref(m.rackID), m.clientID, m.clientHost, strings.Join(m.topics, ","),
			deref(m.regex), m.rebalanceTimeoutMs, deref(m.assignor), fmtClassicMeta(m.classic))
	case targetEpochRec:
		if r.tomb {
			return "-target-epoch"
		}
		return fmt.Sprintf("target-epoch %d", r.epoch)
	case targetMemberRec:
		if r.tomb {
			return "-target " + r.id
		}
		return fmt.Sprintf("target %s %s", r.id, h.fmtAssignment(r.a))
	case currentRec:
		if r.tomb {
			return "-current " + r.id
		}
		return fmt.Sprintf("current %s %s", r.id, h.fmtCur(r.cur))
	case regexRec:
		if r.tomb {
			return fmt.Sprintf("-regex %q", r.regex)
		}
		return fmt.Sprintf("regex %q [%s] t=%d", r.regex, strings.Join(r.r.topics, ","), r.r.timestamp)
	}
	return fmt.Sprintf("%T", rec)
}

// fmtCur prints a member's current state; a partition assigned before
// the member's epoch shows its assignment epoch: [a:0@3,1] (KIP-1251).
func (h *harness) fmtCur(c currentState) string {
	s := fmt.Sprintf("e%d/%d %s %s", c.epoch, c.prevEpoch, c.state, h.fmtEpochs(c.assigned, c.since, c.epoch))
	if len(c.revoking) > 0 {
		s += " -" + h.fmtEpochs(c.revoking, c.since, c.epoch)
	}
	return s
}

// fmtEpochs is fmtAssignment with p@e for each partition whose assignment
// epoch e is not epoch, and p@? for one that has none (a bug the
// invariants report).
func (h *harness) fmtEpochs(a assignment, since partitionEpochs, epoch int32) string {
	var parts []string
	for t, ps := range a {
		var s []string
		for _, p := range ps {
			e, ok := since.of(t, p)
			switch {
			case !ok:
				s = append(s, fmt.Sprintf("%d@?", p))
			case e != epoch:
				s = append(s, fmt.Sprintf("%d@%d", p, e))
			default:
				s = append(s, strconv.Itoa(int(p)))
			}
		}
		parts = append(parts, h.topicName(t)+":"+strings.Join(s, ","))
	}
	slices.Sort(parts)
	return "[" + strings.Join(parts, " ") + "]"
}

func (h *harness) topicName(t TopicID) string {
	if name, ok := h.names[t]; ok {
		return name
	}
	return fmt.Sprintf("%x", t)
}

func fmtHash(v int64) string {
	if v == 0 {
		return "0"
	}
	return fmt.Sprintf("%04x", uint64(v)>>48)
}

// fmtAssignment prints topics by name, sorted: [a:0,1 b:2].
func (h *harness) fmtAssignment(a assignment) string {
	var parts []string
	for t, ps := range a {
		name := h.topicName(t)
		var s []string
		for _, p := range ps {
			s = append(s, strconv.Itoa(int(p)))
		}
		parts = append(parts, name+":"+strings.Join(s, ","))
	}
	slices.Sort(parts)
	return "[" + strings.Join(parts, " ") + "]"
}

// status is the one-line summary printed after each command: the state,
// group epoch / assignment epoch, and every member as id@epoch with its
// owned partitions (~: revoking, then -[...]; +: waiting for unreleased
// partitions; -2 static members that left show @-2).
func (h *harness) status() string {
	g := h.g
	var ms []string
	for _, m := range g.sortedMembers() {
		s := fmt.Sprintf("%s@%d", m.id, m.cur.epoch)
		if m.meta.classic != nil {
			s += "*"
		}
		switch m.cur.state {
		case memberUnrevoked:
			s += "~"
		case memberUnreleased:
			s += "+"
		case memberUnknown:
			s += "?"
		}
		s += h.fmtAssignment(m.cur.assigned)
		if len(m.cur.revoking) > 0 {
			s += "-" + h.fmtAssignment(m.cur.revoking)
		}
		ms = append(ms, s)
	}
	return fmt.Sprintf("%s e%d/%d %s next=%d", g.State(), g.epoch, g.assignmentEpoch, strings.Join(ms, " "), g.NextDeadline())
}

// dump is the group's durable state (and with soft, its deadlines),
// deterministic: the replay check compares it.
func (h *harness) dump(g *Group, soft bool) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s epoch=%d hash=%s assignment-epoch=%d dead=%v partition-metadata=%v\n",
		g.State(), g.epoch, fmtHash(g.metadataHash), g.assignmentEpoch, g.dead, g.partitionMeta)
	for _, m := range g.sortedMembers() {
		fmt.Fprintf(&b, "  %s\n", h.fmtRecord(memberRec{id: m.id, meta: m.meta}))
		fmt.Fprintf(&b, "    %s", h.fmtCur(m.cur))
		if t, ok := g.target[m.id]; ok {
			fmt.Fprintf(&b, " target=%s", h.fmtAssignment(t))
		}
		if soft {
			fmt.Fprintf(&b, " session<%d", m.sessionDeadline)
			if m.rebalanceDeadline >= 0 {
				fmt.Fprintf(&b, " rebalance<%d@e%d", m.rebalanceDeadline, m.rebalanceEpoch)
			}
			if m.joinDeadline >= 0 {
				fmt.Fprintf(&b, " join<%d", m.joinDeadline)
			}
			if m.syncDeadline >= 0 {
				fmt.Fprintf(&b, " sync<%d", m.syncDeadline)
			}
		}
		b.WriteString("\n")
	}
	for _, id := range slices.Sorted(maps.Keys(g.target)) {
		if g.members[id] == nil {
			fmt.Fprintf(&b, "  orphan target %s %s\n", id, h.fmtAssignment(g.target[id]))
		}
	}
	for _, inst := range slices.Sorted(maps.Keys(g.static)) {
		fmt.Fprintf(&b, "  static %s=%s\n", inst, g.static[inst])
	}
	for _, re := range slices.Sorted(maps.Keys(g.regexes)) {
		fmt.Fprintf(&b, "  %s\n", h.fmtRecord(regexRec{regex: re, r: g.regexes[re]}))
	}
	return strings.TrimSuffix(b.String(), "\n")
}

func (h *harness) describe(d kmsg.ConsumerGroupDescribeResponseGroup) string {
	var b strings.Builder
	fmt.Fprintf(&b, "group=%s err=%s", d.Group, datadriven.ErrName(d.ErrorCode))
	if d.ErrorMessage != nil {
		fmt.Fprintf(&b, " msg=%q", *d.ErrorMessage)
	}
	if d.ErrorCode == 0 {
		fmt.Fprintf(&b, " state=%s epoch=%d assignment-epoch=%d assignor=%s", d.State, d.Epoch, d.AssignmentEpoch, d.AssignorName)
	}
	da := func(a kmsg.Assignment) string {
		var s []string
		for _, tp := range a.TopicPartitions {
			var ps []string
			for _, p := range tp.Partitions {
				ps = append(ps, strconv.Itoa(int(p)))
			}
			s = append(s, tp.Topic+":"+strings.Join(ps, ","))
		}
		return "[" + strings.Join(s, " ") + "]"
	}
	for _, m := range d.Members {
		fmt.Fprintf(&b, "\n  %s epoch=%d inst=%s rack=%s client=%s host=%s topics=[%s] regex=%s type=%d\n    assignment=%s target=%s",
			m.MemberID, m.MemberEpoch, deref(m.InstanceID), deref(m.RackID), m.ClientID, m.ClientHost,
			strings.Join(m.SubscribedTopics, ","), deref(m.SubscribedTopicRegex), m.MemberType, da(m.Assignment), da(m.TargetAssignment))
	}
	return b.String()
}

// check verifies the invariants and the replay property: the records
// written so far, replayed in order into a new group, give the live
// group's durable state and ConsumerGroupDescribe.
func (h *harness) check(pos string) {
	h.t.Helper()
	img := h.img
	if h.stale {
		img = nil
	}
	if err := h.g.checkInvariants(img); err != nil {
		h.t.Fatalf("%s: invariants: %v\n%s", pos, err, h.dump(h.g, true))
	}
	if err := checkReplay(h.g, h.cfg, h.log, h.img, h.dump); err != nil {
		h.t.Fatalf("%s: %v", pos, err)
	}
}

// checkReplay replays log into a fresh group and compares it with g.
func checkReplay(g *Group, cfg Config, log []Record, img *Image, dump func(*Group, bool) string) error {
	r := New(g.id, cfg)
	for i, rec := range log {
		if _, ok := GroupOfKey(rec.Key); !ok {
			continue // the classic group's record of a migration
		}
		if err := r.Replay(rec.Key, rec.Value); err != nil {
			return fmt.Errorf("replaying record %d: %v", i, err)
		}
	}
	if r.dead && !g.dead {
		r = New(g.id, cfg) // the caller drops a Dead group and starts anew
	}
	if want, got := dump(g, false), dump(r, false); want != got {
		return fmt.Errorf("replayed group differs:\nlive:\n%s\nreplayed:\n%s", want, got)
	}
	if want, got := g.Describe(img), r.Describe(img); !reflect.DeepEqual(want, got) {
		return fmt.Errorf("replayed group describes differently:\nlive: %+v\nreplayed: %+v", want, got)
	}
	return nil
}

func errText(err error) string {
	if err == nil {
		return "NONE"
	}
	return fmt.Sprintf("%s (%v)", datadriven.ErrName(group.ErrorCode(err)), err)
}

func deref(s *string) string {
	if s == nil {
		return "-"
	}
	return *s
}

// commit runs the commit command: ValidateOffsetCommit alone, or with
// p=spec CheckOffsetCommit and the check of every partition of spec
// (parseOwned's syntax; a topic unknown to the harness has the zero id).
func (h *harness) commit(a datadriven.Args) string {
	m, e, v := a.Str("m", ""), int32(a.Num("e", -1)), int16(a.Num("v", 9))
	spec, ok := a["p"]
	if !ok {
		return "commit: " + errText(h.g.ValidateOffsetCommit(m, e, v))
	}
	check, err := h.g.CheckOffsetCommit(m, e, v)
	if err != nil {
		return "commit: " + errText(err)
	}
	var b strings.Builder
	b.WriteString("commit: NONE")
	for _, tp := range strings.Split(spec, ";") {
		name, ps, _ := strings.Cut(tp, ":")
		for _, p := range strings.Split(ps, ",") {
			n, err := strconv.Atoi(p)
			if err != nil {
				h.t.Fatalf("commit p=%q: %v", spec, err)
			}
			fmt.Fprintf(&b, "\n  %s:%d %s", name, n, errText(check.Partition(name, h.ids[name], int32(n))))
		}
	}
	return b.String()
}

// visibility is the Visibility a command's [deny=a,b] and [nobody] give
// (AllTopics without either).
func visibility(a datadriven.Args) Visibility {
	if a.Has("nobody") {
		return nil
	}
	if !a.Has("deny") {
		return AllTopics
	}
	denied := strings.Split(a.Str("deny", ""), ",")
	return func(t string) bool { return !slices.Contains(denied, t) }
}
