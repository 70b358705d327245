package share

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/fjordlog/fjord/group"
	"github.com/fjordlog/fjord/group/internal/datadriven"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// harness drives one Group from datadriven commands (see testdata/*.txt):
//
//	new [session=ms] [interval=ms] [maxsize=n]
//	topics name:partitions[@gen] ...    (the image; @gen changes the topic id)
//	hb [t=ms] m=id [e=epoch] [subs=a,b|-] [rack=r] [c=client] [h=host] [v=1] [g=group]
//	leave [t=ms] m=id                   (hb e=-1)
//	metadata [t=ms]                     (MetadataChanged with the current image)
//	tick t=ms | next | state | describe | delete | left | subscribed | initialized
//	ismember m=id [e=epoch] | assigned m=id
//
// hb's epoch defaults to the last one the member was given (0 at first);
// subs defaults to none (nil). Mutating commands print the response, the
// records in order, and a status line. After every command the harness
// checks the invariants and that replaying every record emitted so far
// into a new Group rebuilds the same group.
type harness struct {
	t   *testing.T
	cfg Config
	g   *Group
	img *Image
	now int64
	// epochs are the members' epochs as their last responses gave them.
	epochs map[string]int32
	// log is every record emitted since new, for the replay check.
	log []Record
}

func newHarness(t *testing.T) *harness {
	h := &harness{t: t, cfg: DefaultConfig(), img: NewImage(nil)}
	h.reset()
	return h
}

func (h *harness) reset() {
	h.g = New("g", h.cfg)
	h.now = 0
	h.epochs = map[string]int32{}
	h.log = nil
}

// topicID is the harness's id for a topic name: the name's bytes, with
// the generation in the last byte (a deleted and recreated topic gets a
// new id).
func topicID(name string, gen byte) TopicID {
	var id TopicID
	copy(id[:15], name)
	id[15] = gen
	return id
}

func (h *harness) do(c *datadriven.Case) string {
	a := datadriven.Args{}
	var topics []string
	for _, kv := range c.Args {
		if c.Cmd == "topics" {
			topics = append(topics, kv.Key)
			continue
		}
		a[kv.Key] = kv.Val
	}
	if _, ok := a["t"]; ok {
		h.now = a.Num("t", 0)
	}
	var b strings.Builder
	switch c.Cmd {
	case "new":
		h.cfg = DefaultConfig()
		h.cfg.SessionTimeoutMs = int32(a.Num("session", 45000))
		h.cfg.HeartbeatIntervalMs = int32(a.Num("interval", 5000))
		h.cfg.MaxSize = int32(a.Num("maxsize", 200))
		h.reset()
		return "ok"
	case "topics":
		var ts []Topic
		for _, spec := range topics {
			name, rest, _ := strings.Cut(spec, ":")
			n, gen, _ := strings.Cut(rest, "@")
			parts, err := strconv.Atoi(n)
			if err != nil {
				h.t.Fatalf("%s: topics %s: %v", c.Pos, spec, err)
			}
			g := 0
			if gen != "" {
				g, _ = strconv.Atoi(gen)
			}
			ts = append(ts, Topic{Name: name, ID: topicID(name, byte(g)), Partitions: int32(parts)})
		}
		h.img = NewImage(ts)
		return "ok"
	case "hb", "leave":
		m := a.Str("m", "")
		req := kmsg.NewPtrShareGroupHeartbeatRequest()
		req.Version = int16(a.Num("v", 1))
		req.GroupID = a.Str("g", "g")
		req.MemberID = m
		req.MemberEpoch = int32(a.Num("e", int64(h.epochs[m])))
		if c.Cmd == "leave" {
			req.MemberEpoch = -1
		}
		if r, ok := a["rack"]; ok {
			req.RackID = &r
		}
		if s, ok := a["subs"]; ok && s != "-" {
			req.SubscribedTopicNames = []string{}
			if s != "" {
				req.SubscribedTopicNames = strings.Split(s, ",")
			}
		}
		cl := Client{ID: a.Str("c", "client"), Host: a.Str("h", "/10.0.0.1")}
		resp, recs := h.g.HeartbeatFrom(h.now, h.img, req, cl)
		if resp.Version != req.Version {
			h.t.Fatalf("%s: response version %d, request %d", c.Pos, resp.Version, req.Version)
		}
		if resp.ErrorCode == 0 {
			if resp.MemberEpoch >= 0 {
				h.epochs[m] = resp.MemberEpoch
			} else {
				delete(h.epochs, m)
			}
		} else if len(recs) > 0 {
			h.t.Fatalf("%s: error %d with %d records", c.Pos, resp.ErrorCode, len(recs))
		}
		b.WriteString(h.formatResp(resp) + "\n")
		h.records(&b, recs)
	case "metadata":
		h.records(&b, h.g.MetadataChanged(h.now, h.img))
	case "tick":
		h.records(&b, h.g.Tick(h.now, h.img))
	case "delete":
		recs, err := h.g.Delete()
		if err != nil {
			return "error: " + datadriven.ErrName(group.ErrorCode(err)) + " (" + err.Error() + ")"
		}
		b.WriteString("deleted\n")
		h.records(&b, recs)
	case "next":
		return fmt.Sprint(h.g.NextDeadline())
	case "state":
		return h.g.dump(h.img)
	case "describe":
		return h.describe(h.g.Describe(h.img))
	case "left":
		return fmt.Sprintf("left: %v", h.g.Left())
	case "subscribed":
		return "subscribed: " + h.formatAssignment(h.g.SubscribedPartitions(h.img))
	case "initialized":
		return "initialized: " + h.formatAssignment(h.g.Initialized())
	case "ismember":
		err := h.g.IsMember(a.Str("m", ""), int32(a.Num("e", -1)))
		if err == nil {
			return "NONE"
		}
		return fmt.Sprintf("%s (%v)", datadriven.ErrName(group.ErrorCode(err)), err)
	case "assigned":
		return "assigned: " + h.formatAssignment(h.g.Assigned(a.Str("m", "")))
	default:
		h.t.Fatalf("%s: unknown command %q", c.Pos, c.Cmd)
	}
	h.check(c.Pos)
	fmt.Fprintf(&b, "> %s", h.status())
	return b.String()
}

// records prints recs and adds them to the log.
func (h *harness) records(b *strings.Builder, recs []Record) {
	for _, r := range recs {
		b.WriteString("  " + h.formatRecord(r) + "\n")
	}
	h.log = append(h.log, recs...)
}

// check verifies the invariants and the replay property.
func (h *harness) check(pos string) {
	if err := h.g.checkInvariants(true); err != nil {
		h.t.Fatalf("%s: invariants: %v", pos, err)
	}
	r := New("g", h.cfg)
	for i, rec := range h.log {
		if err := r.Replay(rec.Key, rec.Value); err != nil {
			h.t.Fatalf("%s: replaying record %d: %v", pos, i, err)
		}
	}
	if err := r.checkInvariants(false); err != nil {
		h.t.Fatalf("%s: invariants after replay: %v", pos, err)
	}
	if got, want := r.durable(), h.g.durable(); got != want {
		h.t.Fatalf("%s: replay rebuilds another group:\n%s\nwant:\n%s", pos, got, want)
	}
}

func (h *harness) status() string {
	g := h.g
	var ms []string
	for _, id := range g.memberIDs() {
		ms = append(ms, fmt.Sprintf("%s:%d", id, g.members[id].epoch))
	}
	return fmt.Sprintf("%s epoch=%d target=%d members=[%s] next=%d",
		g.State(), g.epoch, g.targetEpoch, strings.Join(ms, " "), g.NextDeadline())
}

// durable is everything a group's records determine, deterministic: the
// replay check compares it.
func (g *Group) durable() string {
	var b strings.Builder
	fmt.Fprintf(&b, "dead=%v epoch=%d hash=%x target=%d\n", g.dead, g.epoch, g.hash, g.targetEpoch)
	for _, id := range g.memberIDs() {
		m := g.members[id]
		fmt.Fprintf(&b, "  %s rack=%s client=%s host=%s topics=%v epoch=%d prev=%d state=%d assigned=%v\n",
			id, deref(m.rack), m.clientID, m.clientHost, m.topics, m.epoch, m.prevEpoch, m.state, fmtIDs(m.assigned))
	}
	ids := make([]string, 0, len(g.target))
	for id := range g.target {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		fmt.Fprintf(&b, "  target %s %v\n", id, fmtIDs(g.target[id]))
	}
	fmt.Fprintf(&b, "  sp %+v", g.sp)
	return b.String()
}

func fmtIDs(a assignment) string {
	var parts []string
	for _, t := range a.topics() {
		parts = append(parts, fmt.Sprintf("%x:%v", t, a[t]))
	}
	return "{" + strings.Join(parts, " ") + "}"
}

// dump is the full state with topic names from img.
func (g *Group) dump(img *Image) string {
	h := &harness{img: img}
	var b strings.Builder
	fmt.Fprintf(&b, "%s epoch=%d target=%d hash=%v", g.State(), g.epoch, g.targetEpoch, g.hash != 0)
	for _, id := range g.memberIDs() {
		m := g.members[id]
		fmt.Fprintf(&b, "\n  %s epoch=%d prev=%d topics=%s assigned=%s target=%s", id, m.epoch, m.prevEpoch,
			strings.Join(m.topics, ","), h.formatAssignment(m.assigned), h.formatAssignment(g.target[id]))
		if m.rack != nil {
			fmt.Fprintf(&b, " rack=%s", *m.rack)
		}
		fmt.Fprintf(&b, " client=%s host=%s session<%d", m.clientID, m.clientHost, m.deadline)
	}
	for _, l := range []struct {
		name string
		ts   []spTopic
	}{{"initializing", g.sp.initializing}, {"initialized", g.sp.initialized}, {"deleting", g.sp.deleting}} {
		if len(l.ts) > 0 {
			fmt.Fprintf(&b, "\n  %s: %s", l.name, formatSP(l.ts))
		}
	}
	return b.String()
}

func formatSP(ts []spTopic) string {
	var s []string
	for _, t := range ts {
		s = append(s, fmt.Sprintf("%s%v", t.name, t.parts))
	}
	return strings.Join(s, " ")
}

// topicName is a topic id as the harness prints it: its name in the
// image, or the name encoded in the id and its generation.
func (h *harness) topicName(id TopicID) string {
	if t, ok := h.img.ByID(id); ok {
		return t.Name
	}
	return fmt.Sprintf("%s@%d?", strings.TrimRight(string(id[:15]), "\x00"), id[15])
}

func (h *harness) formatAssignment(a map[TopicID][]int32) string {
	ids := make([]TopicID, 0, len(a))
	for t := range a {
		ids = append(ids, t)
	}
	slices.SortFunc(ids, func(x, y TopicID) int { return strings.Compare(h.topicName(x), h.topicName(y)) })
	var parts []string
	for _, t := range ids {
		parts = append(parts, h.topicName(t)+":"+joinInts(a[t]))
	}
	return "[" + strings.Join(parts, " ") + "]"
}

func joinInts(ps []int32) string {
	s := make([]string, len(ps))
	for i, p := range ps {
		s[i] = strconv.Itoa(int(p))
	}
	return strings.Join(s, ",")
}

func (h *harness) formatResp(r *kmsg.ShareGroupHeartbeatResponse) string {
	var b strings.Builder
	fmt.Fprintf(&b, "hb: err=%s", datadriven.ErrName(r.ErrorCode))
	if r.ErrorMessage != nil {
		fmt.Fprintf(&b, " msg=%q", *r.ErrorMessage)
	}
	if r.ErrorCode != 0 {
		return b.String()
	}
	fmt.Fprintf(&b, " member=%s epoch=%d interval=%d", deref(r.MemberID), r.MemberEpoch, r.HeartbeatIntervalMillis)
	if r.Assignment == nil {
		b.WriteString(" assignment=-")
		return b.String()
	}
	a := map[TopicID][]int32{}
	for _, tp := range r.Assignment.TopicPartitions {
		a[tp.TopicID] = tp.Partitions
	}
	b.WriteString(" assignment=" + h.formatAssignment(a))
	return b.String()
}

// formatRecord decodes a record and prints it, topics by name.
func (h *harness) formatRecord(r Record) string {
	rec, group, err := decode(r.Key, r.Value)
	if err != nil {
		h.t.Fatalf("decoding our own record: %v", err)
	}
	if group != "g" {
		h.t.Fatalf("record of group %q", group)
	}
	name := strings.TrimPrefix(typeName(rec.typ), "ShareGroup")
	if rec.typ == typeGroupMetadata {
		name = "GroupMetadata"
	}
	s := fmt.Sprintf("%d %s", rec.typ, name)
	if rec.member != "" {
		s += "[" + rec.member + "]"
	}
	if rec.tomb {
		return s + " tombstone"
	}
	switch rec.typ {
	case typeMemberMetadata:
		s += fmt.Sprintf(" rack=%s client=%s host=%s topics=%s", deref(rec.meta.rack), rec.meta.clientID, rec.meta.clientHost, strings.Join(rec.meta.topics, ","))
	case typeGroupMetadata:
		s += fmt.Sprintf(" epoch=%d hash=%v", rec.epoch, rec.hash != 0)
	case typeTargetMetadata:
		s += fmt.Sprintf(" epoch=%d", rec.epoch)
	case typeTargetMember:
		s += " " + h.formatAssignment(rec.a)
	case typeCurrentAssignment:
		s += fmt.Sprintf(" epoch=%d prev=%d state=%d %s", rec.cur.epoch, rec.cur.prevEpoch, rec.cur.state, h.formatAssignment(rec.cur.assigned))
	case typeStatePartitions:
		s += fmt.Sprintf(" initializing=[%s] initialized=[%s] deleting=[%s]", formatSP(rec.sp.initializing), formatSP(rec.sp.initialized), formatSP(rec.sp.deleting))
	}
	return s
}

func (h *harness) describe(d kmsg.ShareGroupDescribeResponseGroup) string {
	var b strings.Builder
	fmt.Fprintf(&b, "group=%s err=%s", d.GroupID, datadriven.ErrName(d.ErrorCode))
	if d.ErrorMessage != nil {
		fmt.Fprintf(&b, " msg=%q", *d.ErrorMessage)
	}
	if d.ErrorCode != 0 {
		return b.String()
	}
	fmt.Fprintf(&b, " state=%s epoch=%d assignment_epoch=%d assignor=%s", d.GroupState, d.GroupEpoch, d.AssignmentEpoch, d.Assignor)
	for _, m := range d.Members {
		var tps []string
		for _, tp := range m.Assignment.TopicPartitions {
			if tp.TopicID != topicID(tp.Topic, tp.TopicID[15]) {
				h.t.Fatalf("describe: topic %s with id %x", tp.Topic, tp.TopicID)
			}
			tps = append(tps, tp.Topic+":"+joinInts(tp.Partitions))
		}
		fmt.Fprintf(&b, "\n  %s epoch=%d rack=%s client=%s host=%s subs=%s assignment=[%s]",
			m.MemberID, m.MemberEpoch, deref(m.RackID), m.ClientID, m.ClientHost,
			strings.Join(m.SubscribedTopicNames, ","), strings.Join(tps, " "))
	}
	return b.String()
}

func deref(s *string) string {
	if s == nil {
		return "-"
	}
	return *s
}
