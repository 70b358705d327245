package consumer

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordlog/fjord/group"
	"github.com/fjordlog/fjord/group/internal/datadriven"
)

// Classic-protocol members and migration in the harness (classic.go,
// convert.go):
//
//	upgrade gen=n [protocol=range] [type=consumer] [topics=a,b]
//	        [session=ms] [userdata=id] [garbage=id] [i.id=inst] id=spec ...
//	                              the harness's group becomes the upgrade
//	                              of a classic group at generation n whose
//	                              members id own spec (a:0,1;b:2), each
//	                              subscribed to topics (default: the
//	                              topics of its spec)
//	cjoin m=id [v=9] [i=inst] [topics=a,b] [owned=spec|eager]
//	      [protocols=p1,p2] [session=ms] [rt=ms] [c=client]
//	csync m=id [g=gen] [i=inst] [v=5] [protocol=name]
//	chb m=id [g=gen] [i=inst]
//	cleave m=id [i=inst] [v=5]
//
// A classic client remembers its generation and the partitions its last
// SyncGroup gave it; its JoinGroup reports them as owned (a cooperative
// consumer), or none with owned=eager. After a downgrade the harness's
// group is Dead and "downgraded" prints the classic group it became.
// Classic members show as id@epoch* in the status line.

type classicClient struct {
	gen       int32
	owned     assignment
	protocols []string
	topics    []string
	inst      *string
}

func (h *harness) classicClient(id string) *classicClient {
	if h.classics == nil {
		h.classics = map[string]*classicClient{}
	}
	cl := h.classics[id]
	if cl == nil {
		cl = &classicClient{gen: -1, owned: assignment{}, protocols: []string{"range"}}
		h.classics[id] = cl
	}
	return cl
}

// subscription encodes a ConsumerProtocolSubscription v3.
func (h *harness) subscription(topics []string, owned assignment, gen int32) []byte {
	s := kmsg.NewConsumerMemberMetadata()
	s.Version = 3
	s.Topics = topics
	s.Generation = gen
	for _, t := range owned.topics() {
		op := kmsg.NewConsumerMemberMetadataOwnedPartition()
		op.Topic, op.Partitions = h.topicName(t), owned[t]
		s.OwnedPartitions = append(s.OwnedPartitions, op)
	}
	return s.AppendTo(nil)
}

// parseSpec reads "a:0,1;b:2" into an assignment of the current ids.
func (h *harness) parseSpec(spec string) assignment {
	raw := map[TopicID][]int32{}
	for _, t := range h.parseOwned(spec) {
		raw[t.TopicID] = append(raw[t.TopicID], t.Partitions...)
	}
	return normalize(raw)
}

func (h *harness) doClassic(b *strings.Builder, c *datadriven.Case, a datadriven.Args) {
	switch c.Cmd {
	case "upgrade":
		h.upgrade(b, c, a)
	case "cjoin":
		id := a.Str("m", "")
		cl := h.classicClient(id)
		req := kmsg.NewPtrJoinGroupRequest()
		req.Version = int16(a.Num("v", 9))
		req.Group, req.MemberID = "g", id
		if strings.HasPrefix(id, "new") {
			req.MemberID = "" // a member without an id yet
		}
		req.SessionTimeoutMillis = int32(a.Num("session", 10000))
		req.RebalanceTimeoutMillis = int32(a.Num("rt", 30000))
		req.ProtocolType = a.Str("type", ConsumerProtocolType)
		if a.Has("i") {
			cl.inst = a.Ptr("i")
		}
		req.InstanceID = cl.inst
		if ts, ok := a["topics"]; ok {
			cl.topics = strings.Split(ts, ",")
		}
		if ps, ok := a["protocols"]; ok {
			cl.protocols = strings.Split(ps, ",")
		}
		owned := cl.owned
		switch spec, ok := a["owned"]; {
		case ok && spec == "eager":
			owned = assignment{}
		case ok:
			owned = h.parseSpec(spec)
		}
		meta := h.subscription(cl.topics, owned, cl.gen)
		for _, p := range cl.protocols {
			req.Protocols = append(req.Protocols, kmsg.JoinGroupRequestProtocol{Name: p, Metadata: meta})
		}
		resp, recs := h.g.ClassicJoin(h.now, h.img, req, Client{ID: a.Str("c", "client-"+id), Host: "/10.0.0.2"})
		if resp.Version != req.Version {
			h.t.Fatalf("JoinGroup response version %d, request %d", resp.Version, req.Version)
		}
		if resp.ErrorCode != 0 {
			fmt.Fprintf(b, "join err=%s member=%s\n", datadriven.ErrName(resp.ErrorCode), resp.MemberID)
		} else {
			fmt.Fprintf(b, "join member=%s generation=%d protocol=%s/%s leader=%q members=%d\n",
				resp.MemberID, resp.Generation, deref(resp.ProtocolType), deref(resp.Protocol), resp.LeaderID, len(resp.Members))
			cl.gen = resp.Generation
			if resp.MemberID != id {
				h.classics[resp.MemberID] = cl
				delete(h.classics, id)
			}
		}
		h.printRecords(b, recs)
	case "csync":
		id := a.Str("m", "")
		cl := h.classicClient(id)
		req := kmsg.NewPtrSyncGroupRequest()
		req.Version = int16(a.Num("v", 5))
		req.Group, req.MemberID = "g", id
		req.Generation = int32(a.Num("g", int64(cl.gen)))
		req.InstanceID = cl.inst
		if a.Has("i") {
			req.InstanceID = a.Ptr("i")
		}
		req.ProtocolType = kmsg.StringPtr(ConsumerProtocolType)
		req.Protocol = kmsg.StringPtr(a.Str("protocol", cl.protocols[0]))
		resp := h.g.ClassicSync(h.now, h.img, req)
		if resp.ErrorCode != 0 {
			fmt.Fprintf(b, "sync err=%s\n", datadriven.ErrName(resp.ErrorCode))
			break
		}
		var ca kmsg.ConsumerMemberAssignment
		if err := ca.ReadFrom(resp.MemberAssignment); err != nil {
			h.t.Fatalf("%s: assignment: %v", c.Pos, err)
		}
		got := h.classicAssignment(ca)
		cl.owned = got
		fmt.Fprintf(b, "sync protocol=%s/%s v%d assignment=%s\n", deref(resp.ProtocolType), deref(resp.Protocol), ca.Version, h.fmtAssignment(got))
	case "chb":
		id := a.Str("m", "")
		cl := h.classicClient(id)
		req := kmsg.NewPtrHeartbeatRequest()
		req.Version = 4
		req.Group, req.MemberID = "g", id
		req.Generation = int32(a.Num("g", int64(cl.gen)))
		req.InstanceID = cl.inst
		if a.Has("i") {
			req.InstanceID = a.Ptr("i")
		}
		resp := h.g.ClassicHeartbeat(h.now, req)
		fmt.Fprintf(b, "heartbeat err=%s\n", datadriven.ErrName(resp.ErrorCode))
	case "cleave":
		id := a.Str("m", "")
		req := kmsg.NewPtrLeaveGroupRequest()
		req.Version = int16(a.Num("v", 5))
		req.Group, req.MemberID = "g", id
		rm := kmsg.NewLeaveGroupRequestMember()
		rm.MemberID, rm.InstanceID = id, a.Ptr("i")
		req.Members = append(req.Members, rm)
		resp, recs := h.g.ClassicLeave(h.now, h.img, req)
		fmt.Fprintf(b, "leave err=%s", datadriven.ErrName(resp.ErrorCode))
		for _, m := range resp.Members {
			fmt.Fprintf(b, " %s/%s=%s", m.MemberID, deref(m.InstanceID), datadriven.ErrName(m.ErrorCode))
		}
		b.WriteString("\n")
		h.printRecords(b, recs)
		if resp.ErrorCode == 0 && (len(resp.Members) == 0 || resp.Members[0].ErrorCode == 0) {
			delete(h.classics, id)
		}
	}
}

func (h *harness) classicAssignment(ca kmsg.ConsumerMemberAssignment) assignment {
	raw := map[TopicID][]int32{}
	for _, t := range ca.Topics {
		id, ok := h.ids[t.Topic]
		if !ok {
			h.t.Fatalf("assignment names unknown topic %q", t.Topic)
		}
		raw[id] = append(raw[id], t.Partitions...)
	}
	return normalize(raw)
}

// upgrade replaces the harness's group with the upgrade of a classic
// group described by the arguments.
func (h *harness) upgrade(b *strings.Builder, c *datadriven.Case, a datadriven.Args) {
	mg := group.Migration{
		Generation:   int32(a.Num("gen", 1)),
		ProtocolType: a.Str("type", ConsumerProtocolType),
		Protocol:     a.Str("protocol", "range"),
	}
	reserved := []string{"t", "gen", "type", "protocol", "topics", "session", "userdata", "garbage"}
	for _, kv := range c.Args {
		if slices.Contains(reserved, kv.Key) || strings.HasPrefix(kv.Key, "i.") {
			continue
		}
		id := kv.Key
		owned := h.parseSpec(kv.Val)
		topics := []string{}
		if ts, ok := a["topics"]; ok {
			topics = strings.Split(ts, ",")
		} else {
			for _, t := range owned.topics() {
				topics = append(topics, h.topicName(t))
			}
		}
		ca := kmsg.NewConsumerMemberAssignment()
		ca.Version = 1
		for _, t := range owned.topics() {
			at := kmsg.NewConsumerMemberAssignmentTopic()
			at.Topic, at.Partitions = h.topicName(t), owned[t]
			ca.Topics = append(ca.Topics, at)
		}
		if a.Str("userdata", "") == id {
			ca.UserData = []byte{1}
		}
		meta := h.subscription(topics, owned, mg.Generation)
		if a.Str("garbage", "") == id {
			meta = []byte{0, 9}
		}
		m := group.MigratingMember{
			ID: id, ClientID: "client-" + id, ClientHost: "/10.0.0.2",
			SessionTimeoutMs: int32(a.Num("session", 10000)), RebalanceTimeoutMs: 30000,
			Protocols:  []kmsg.JoinGroupRequestProtocol{{Name: mg.Protocol, Metadata: meta}},
			Assignment: ca.AppendTo(nil),
		}
		cl := &classicClient{gen: mg.Generation, owned: owned, protocols: []string{mg.Protocol}, topics: topics}
		if inst, ok := a["i."+id]; ok {
			m.InstanceID, cl.inst = &inst, &inst
		}
		mg.Members = append(mg.Members, m)
		if h.classics == nil {
			h.classics = map[string]*classicClient{}
		}
		h.classics[id] = cl
	}
	g, recs, err := Upgrade("g", h.cfg, h.now, h.img, mg)
	if err != nil {
		fmt.Fprintf(b, "upgrade: %s\n", errText(err))
		return
	}
	h.g = g
	h.log = nil
	h.printRecords(b, recs)
}

// fmtClassic prints the classic GroupMetadata a downgrade writes.
func (h *harness) fmtClassic(key, value []byte) string {
	if value == nil {
		return "-classic-group"
	}
	var v kmsg.GroupMetadataValue
	if err := v.ReadFrom(value); err != nil {
		h.t.Fatalf("classic group record: %v", err)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "classic-group v%d type=%s generation=%d protocol=%s leader=%s", v.Version, v.ProtocolType, v.Generation, deref(v.Protocol), deref(v.Leader))
	for _, m := range v.Members {
		var ca kmsg.ConsumerMemberAssignment
		if err := ca.ReadFrom(m.Assignment); err != nil {
			h.t.Fatalf("classic group member %s assignment: %v", m.MemberID, err)
		}
		fmt.Fprintf(&b, "\n    %s inst=%s client=%s session=%d rt=%d assignment=%s", m.MemberID, deref(m.InstanceID), m.ClientID,
			m.SessionTimeoutMillis, m.RebalanceTimeoutMillis, h.fmtAssignment(h.classicAssignment(ca)))
	}
	return b.String()
}

// fmtClassicMeta prints a member's ClassicMemberMetadata.
func fmtClassicMeta(c *classicMeta) string {
	if c == nil {
		return ""
	}
	var ps []string
	for _, p := range c.protocols {
		ps = append(ps, p.name)
	}
	return " classic(session=" + strconv.Itoa(int(c.sessionTimeoutMs)) + " protocols=" + strings.Join(ps, ",") + ")"
}
