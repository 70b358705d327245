package group

import (
	"fmt"
	"sort"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordlog/fjord/group/internal/datadriven"
)

// harness drives one Group from datadriven commands (see testdata/*.txt):
//
//	new [min=ms] [max=ms] [delay=ms] [attempts=n] [maxsize=n] [nonce=s]
//	join [t=ms] [m=id] [i=inst] [c=client] [h=host] [v=5] [st=10000] [rt=30000]
//	     [pt=consumer] [p=range:meta,rr:meta] [tok=name]
//	sync [t=ms] m=id g=gen [i=inst] [v=5] [a=id:bytes,id:bytes] [pt=s] [pn=s] [tok=name]
//	hb [t=ms] m=id g=gen [i=inst] [v=4]
//	leave [t=ms] [v=5] m=id                 (v0-2)
//	leave [t=ms] [v=5] ms=id@inst,id,@inst  (v3+; "@inst" alone: by instance id)
//	tick t=ms | next | state | describe | delete | ismember m=id g=gen [i=inst]
//
// Every mutating command prints the replies it produced, then a status
// line. After every command the harness checks the Group's invariants and
// that parked requests and unanswered tokens match one to one; a reply to a
// token that is not outstanding, or with another version than its request,
// fails the test.
type harness struct {
	t   *testing.T
	g   *Group
	now int64
	// outstanding maps tokens not yet answered to their request's version.
	outstanding map[string]int16
	seq         int
}

func newHarness(t *testing.T) *harness {
	cfg := DefaultConfig()
	return &harness{t: t, g: NewGroup("g", cfg), outstanding: map[string]int16{}}
}

func (h *harness) do(c *datadriven.Case) string {
	a := c.Map()
	if _, ok := a["t"]; ok {
		h.now = a.Num("t", 0)
	}
	var b strings.Builder
	switch c.Cmd {
	case "new":
		cfg := Config{
			MinSessionTimeoutMs:     int32(a.Num("min", 6000)),
			MaxSessionTimeoutMs:     int32(a.Num("max", 1800000)),
			InitialRebalanceDelayMs: int32(a.Num("delay", 3000)),
			MaxRebalanceAttempts:    int(a.Num("attempts", 10)),
			MaxSize:                 int32(a.Num("maxsize", 0)),
			MemberIDNonce:           a.Str("nonce", ""),
		}
		h.g = NewGroup("g", cfg)
		h.now = 0
		h.outstanding = map[string]int16{}
		return "ok"
	case "join":
		req := kmsg.NewPtrJoinGroupRequest()
		req.Version = int16(a.Num("v", 5))
		req.Group = "g"
		req.MemberID = a.Str("m", "")
		req.InstanceID = a.Ptr("i")
		req.SessionTimeoutMillis = int32(a.Num("st", 10000))
		req.RebalanceTimeoutMillis = int32(a.Num("rt", 30000))
		req.ProtocolType = a.Str("pt", "consumer")
		req.Protocols = parseProtocols(a.Str("p", "range:x"))
		tok := h.token(a, "J")
		h.outstanding[tok] = req.Version
		meta := JoinMeta{ClientID: a.Str("c", "c"), ClientHost: a.Str("h", "/10.0.0.1")}
		h.print(&b, h.g.Join(h.now, req, meta, tok))
	case "sync":
		req := kmsg.NewPtrSyncGroupRequest()
		req.Version = int16(a.Num("v", 5))
		req.Group = "g"
		req.MemberID = a.Str("m", "")
		req.Generation = int32(a.Num("g", 0))
		req.InstanceID = a.Ptr("i")
		req.ProtocolType = a.Ptr("pt")
		req.Protocol = a.Ptr("pn")
		for _, kv := range splitList(a.Str("a", "")) {
			id, asg, _ := strings.Cut(kv, ":")
			req.GroupAssignment = append(req.GroupAssignment, kmsg.SyncGroupRequestGroupAssignment{MemberID: id, MemberAssignment: []byte(asg)})
		}
		tok := h.token(a, "S")
		h.outstanding[tok] = req.Version
		h.print(&b, h.g.Sync(h.now, req, tok))
	case "hb":
		req := kmsg.NewPtrHeartbeatRequest()
		req.Version = int16(a.Num("v", 4))
		req.MemberID = a.Str("m", "")
		req.Generation = int32(a.Num("g", 0))
		req.InstanceID = a.Ptr("i")
		resp := h.g.Heartbeat(h.now, req)
		h.checkVersion(resp, req.Version)
		fmt.Fprintf(&b, "hb: err=%s\n", datadriven.ErrName(resp.ErrorCode))
	case "leave":
		req := kmsg.NewPtrLeaveGroupRequest()
		req.Version = int16(a.Num("v", 5))
		req.MemberID = a.Str("m", "")
		for _, e := range splitList(a.Str("ms", "")) {
			id, inst, hasInst := strings.Cut(e, "@")
			lm := kmsg.NewLeaveGroupRequestMember()
			lm.MemberID = id
			if hasInst {
				lm.InstanceID = &inst
			}
			req.Members = append(req.Members, lm)
		}
		replies, resp := h.g.Leave(h.now, req)
		h.checkVersion(resp, req.Version)
		fmt.Fprintf(&b, "leave: err=%s", datadriven.ErrName(resp.ErrorCode))
		for _, m := range resp.Members {
			inst := ""
			if m.InstanceID != nil {
				inst = "@" + *m.InstanceID
			}
			fmt.Fprintf(&b, " %s%s=%s", m.MemberID, inst, datadriven.ErrName(m.ErrorCode))
		}
		b.WriteString("\n")
		h.print(&b, replies)
	case "tick":
		h.print(&b, h.g.Tick(h.now))
	case "next":
		return fmt.Sprint(h.g.NextDeadline())
	case "state":
		return h.g.dump()
	case "describe":
		return describe(h.g.Describe())
	case "timeline":
		var tb strings.Builder
		for _, r := range h.g.Timeline() {
			fmt.Fprintf(&tb, "%s by %s: gen %d->%d members=%d start=%d join_end=%d end=%d %s\n",
				r.Cause, orDash(r.Member), r.From, r.Generation, r.Members, r.Start, r.JoinEnd, r.End, orDash(r.Outcome))
		}
		return strings.TrimSuffix(tb.String(), "\n")
	case "delete":
		if err := h.g.Delete(); err != nil {
			return "error: " + err.Error()
		}
		b.WriteString("deleted\n")
	case "ismember":
		var err error
		if _, ok := a["i"]; ok {
			err = h.g.ValidateOffsetCommit(a.Str("m", ""), a.Ptr("i"), int32(a.Num("g", -1)))
		} else {
			err = h.g.IsMember(a.Str("m", ""), int32(a.Num("g", -1)))
		}
		return fmt.Sprintf("%s (%s)", datadriven.ErrName(ErrorCode(err)), errString(err))
	default:
		h.t.Fatalf("%s: unknown command %q", c.Pos, c.Cmd)
	}
	h.check(c.Pos)
	fmt.Fprintf(&b, "> %s", h.status())
	return b.String()
}

func (h *harness) token(a datadriven.Args, prefix string) string {
	if tok, ok := a["tok"]; ok {
		if _, dup := h.outstanding[tok]; dup {
			h.t.Fatalf("token %s is still outstanding", tok)
		}
		return tok
	}
	h.seq++
	return fmt.Sprintf("%s%d", prefix, h.seq)
}

func (h *harness) checkVersion(r kmsg.Response, v int16) {
	if r.GetVersion() != v {
		h.t.Fatalf("%T version %d, request version %d", r, r.GetVersion(), v)
	}
}

// print formats replies, checking each answers an outstanding token once.
func (h *harness) print(b *strings.Builder, replies []Reply) {
	for _, r := range replies {
		tok := r.Token.(string)
		v, ok := h.outstanding[tok]
		if !ok {
			h.t.Fatalf("reply to %s, which is not outstanding", tok)
		}
		delete(h.outstanding, tok)
		h.checkVersion(r.Resp, v)
		b.WriteString(tok + ": " + formatResp(r.Resp) + "\n")
	}
}

// check verifies the Group's invariants and that unanswered tokens are
// exactly the parked requests.
func (h *harness) check(pos string) {
	if err := h.g.checkInvariants(); err != nil {
		h.t.Fatalf("%s: invariants: %v", pos, err)
	}
	waiting := map[string]bool{}
	for _, m := range h.g.order {
		for _, p := range []*parked{m.join, m.sync} {
			if p != nil {
				waiting[p.token.(string)] = true
			}
		}
	}
	for tok := range h.outstanding {
		if !waiting[tok] {
			h.t.Fatalf("%s: token %s was never answered and is not parked", pos, tok)
		}
	}
	if len(waiting) != len(h.outstanding) {
		h.t.Fatalf("%s: %d parked requests, %d outstanding tokens", pos, len(waiting), len(h.outstanding))
	}
}

func (h *harness) status() string {
	g := h.g
	ids := make([]string, len(g.order))
	for i, m := range g.order {
		ids[i] = m.id
	}
	return fmt.Sprintf("%s gen=%d leader=%s members=[%s] next=%d",
		g.State(), g.generation, orDash(g.leader), strings.Join(ids, " "), g.NextDeadline())
}

// dump is the full state, deterministic; tests also use it as a
// fingerprint.
func (g *Group) dump() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s gen=%d type=%s protocol=%s leader=%s\n",
		g.State(), g.generation, orDash(g.protocolType), orDash(g.protocol), orDash(g.leader))
	for _, m := range g.order {
		fmt.Fprintf(&b, "  %s", m.id)
		if m.instanceID != nil {
			fmt.Fprintf(&b, " inst=%s", *m.instanceID)
		}
		fmt.Fprintf(&b, " client=%s protocols=%s", m.clientID, formatProtocols(m.protocols))
		if m.assignment != nil {
			fmt.Fprintf(&b, " assign=%s", m.assignment)
		}
		switch {
		case m.join != nil:
			fmt.Fprintf(&b, " joining(%v)", m.join.token)
		case m.sync != nil:
			fmt.Fprintf(&b, " syncing(%v)", m.sync.token)
		default:
			fmt.Fprintf(&b, " session<%d", m.sessionDeadline)
		}
		if g.pendingSync[m.id] {
			b.WriteString(" unsynced")
		}
		if m.forced > 0 {
			fmt.Fprintf(&b, " forced=%d", m.forced)
		}
		b.WriteString("\n")
	}
	var pend []string
	for id, t := range g.pending {
		pend = append(pend, fmt.Sprintf("%s<%d", id, t))
	}
	sort.Strings(pend)
	if len(pend) > 0 {
		fmt.Fprintf(&b, "  pending: %s\n", strings.Join(pend, " "))
	}
	var fenced []string
	for id, inst := range g.fenced {
		fenced = append(fenced, id+"@"+inst)
	}
	sort.Strings(fenced)
	if len(fenced) > 0 {
		fmt.Fprintf(&b, "  fenced: %s\n", strings.Join(fenced, " "))
	}
	if g.state == statePreparingRebalance {
		fmt.Fprintf(&b, "  join deadline=%d", g.joinDeadline)
		if g.initialDelay {
			fmt.Fprintf(&b, " (initial, cap=%d, new member=%v)", g.initialCap, g.newMemberAdded)
		}
		b.WriteString("\n")
	}
	if g.syncDeadline >= 0 {
		fmt.Fprintf(&b, "  sync deadline=%d\n", g.syncDeadline)
	}
	fmt.Fprintf(&b, "  next=%d", g.NextDeadline())
	return b.String()
}

func formatResp(r kmsg.Response) string {
	var b strings.Builder
	switch r := r.(type) {
	case *kmsg.JoinGroupResponse:
		fmt.Fprintf(&b, "join err=%s", datadriven.ErrName(r.ErrorCode))
		if r.Generation != -1 {
			fmt.Fprintf(&b, " gen=%d", r.Generation)
		}
		fmt.Fprintf(&b, " member=%s", orDash(r.MemberID))
		if r.LeaderID != "" {
			fmt.Fprintf(&b, " leader=%s", r.LeaderID)
		}
		if r.Protocol != nil {
			fmt.Fprintf(&b, " proto=%s/%s", deref(r.ProtocolType), *r.Protocol)
		}
		if r.SkipAssignment {
			b.WriteString(" skip")
		}
		if len(r.Members) > 0 {
			var ms []string
			for _, m := range r.Members {
				s := m.MemberID
				if m.InstanceID != nil {
					s += "@" + *m.InstanceID
				}
				ms = append(ms, s+":"+string(m.ProtocolMetadata))
			}
			fmt.Fprintf(&b, " members=[%s]", strings.Join(ms, " "))
		}
	case *kmsg.SyncGroupResponse:
		fmt.Fprintf(&b, "sync err=%s", datadriven.ErrName(r.ErrorCode))
		if r.Protocol != nil {
			fmt.Fprintf(&b, " proto=%s/%s", deref(r.ProtocolType), *r.Protocol)
		}
		if r.ErrorCode == 0 {
			fmt.Fprintf(&b, " assign=%q", r.MemberAssignment)
		}
	default:
		fmt.Fprintf(&b, "%T", r)
	}
	return b.String()
}

func describe(d kmsg.DescribeGroupsResponseGroup) string {
	var b strings.Builder
	fmt.Fprintf(&b, "group=%s state=%s type=%s protocol=%s err=%s",
		d.Group, d.State, orDash(d.ProtocolType), orDash(d.Protocol), datadriven.ErrName(d.ErrorCode))
	for _, m := range d.Members {
		fmt.Fprintf(&b, "\n  %s", m.MemberID)
		if m.InstanceID != nil {
			fmt.Fprintf(&b, " inst=%s", *m.InstanceID)
		}
		fmt.Fprintf(&b, " client=%s host=%s meta=%q assign=%q", m.ClientID, m.ClientHost, m.ProtocolMetadata, m.MemberAssignment)
	}
	return b.String()
}

func parseProtocols(s string) []kmsg.JoinGroupRequestProtocol {
	var ps []kmsg.JoinGroupRequestProtocol
	for _, e := range splitList(s) {
		name, md, _ := strings.Cut(e, ":")
		ps = append(ps, kmsg.JoinGroupRequestProtocol{Name: name, Metadata: []byte(md)})
	}
	return ps
}

func formatProtocols(ps []kmsg.JoinGroupRequestProtocol) string {
	var ss []string
	for _, p := range ps {
		ss = append(ss, p.Name+":"+string(p.Metadata))
	}
	return strings.Join(ss, ",")
}

func splitList(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, ",")
}

func errString(err error) string {
	if err == nil {
		return "nil"
	}
	return err.Error()
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func deref(s *string) string {
	if s == nil {
		return "<nil>"
	}
	return *s
}
