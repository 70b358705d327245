package coordinator

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordlog/fjord/group"
	"github.com/fjordlog/fjord/group/consumer"
)

var topicT = consumer.Topic{Name: "t", ID: [16]byte{7}, Partitions: 6}

// heartbeat848 sends one ConsumerGroupHeartbeat through the coordinator,
// as the API handler does, waiting for its records to commit.
func heartbeat848(t *testing.T, c *Coordinator, req *kmsg.ConsumerGroupHeartbeatRequest) *kmsg.ConsumerGroupHeartbeatResponse {
	t.Helper()
	var resp *kmsg.ConsumerGroupHeartbeatResponse
	exists, wait, err := c.Consumer(req.Group, req.MemberEpoch == 0, consumer.AllTopics, func(g *consumer.Group, img *consumer.Image, now int64) []consumer.Record {
		var recs []consumer.Record
		resp, recs = g.Heartbeat(now, img, req)
		return recs
	})
	if err != nil || !exists {
		t.Fatalf("heartbeat of %s: exists %v, %v", req.MemberID, exists, err)
	}
	if wait != nil {
		if err := wait(); err != nil {
			t.Fatalf("records of %s not committed: %v", req.MemberID, err)
		}
	}
	return resp
}

func join848(group, member string) *kmsg.ConsumerGroupHeartbeatRequest {
	req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	req.SetVersion(1)
	req.Group, req.MemberID, req.MemberEpoch = group, member, 0
	req.RebalanceTimeoutMillis = 30_000
	req.SubscribedTopicNames = []string{"t"}
	req.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
	return req
}

// owned is what a member reports owning: its last assignment.
func owned(a *kmsg.ConsumerGroupHeartbeatResponseAssignment) []kmsg.ConsumerGroupHeartbeatRequestTopic {
	out := []kmsg.ConsumerGroupHeartbeatRequestTopic{}
	if a == nil {
		return out
	}
	for _, t := range a.Topics {
		rt := kmsg.NewConsumerGroupHeartbeatRequestTopic()
		rt.TopicID, rt.Partitions = t.TopicID, t.Partitions
		out = append(out, rt)
	}
	return out
}

func describe848(t *testing.T, c *Coordinator, id string) kmsg.ConsumerGroupDescribeResponseGroup {
	t.Helper()
	var d kmsg.ConsumerGroupDescribeResponseGroup
	if ok, _, _ := c.Consumer(id, false, nil, func(g *consumer.Group, img *consumer.Image, _ int64) []consumer.Record {
		d = g.Describe(img)
		return nil
	}); !ok {
		t.Fatalf("no consumer group %s", id)
	}
	return d
}

// A KIP-848 group's members, epochs and assignments come back when
// another coordinator loads the same log: its records are committed
// before each heartbeat is answered.
func TestConsumerGroupReload(t *testing.T) {
	dir := t.TempDir()
	p := leader(t, dir)
	c := newTest(t, p)
	c.host.(*testHost).setTopics(topicT)

	a := heartbeat848(t, c, join848("g", "member-a"))
	if a.ErrorCode != 0 || a.Assignment == nil || len(a.Assignment.Topics[0].Partitions) != 6 {
		t.Fatalf("first member: %+v", a)
	}
	b := heartbeat848(t, c, join848("g", "member-b"))
	if b.ErrorCode != 0 {
		t.Fatalf("second member: %+v", b)
	}
	// member-a revokes what member-b is to get, then member-b gets it.
	for range 3 {
		req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
		req.SetVersion(1)
		req.Group, req.MemberID, req.MemberEpoch, req.RebalanceTimeoutMillis = "g", "member-a", a.MemberEpoch, -1
		if a.Assignment != nil {
			req.Topics = owned(a.Assignment)
		}
		if r := heartbeat848(t, c, req); r.ErrorCode == 0 {
			if r.Assignment != nil {
				a.Assignment = r.Assignment
			}
			a.MemberEpoch = r.MemberEpoch
		}
		req.MemberID, req.MemberEpoch = "member-b", b.MemberEpoch
		req.Topics = owned(b.Assignment)
		if r := heartbeat848(t, c, req); r.ErrorCode == 0 {
			if r.Assignment != nil {
				b.Assignment = r.Assignment
			}
			b.MemberEpoch = r.MemberEpoch
		}
	}
	before := describe848(t, c, "g")
	if before.State != "Stable" || len(before.Members) != 2 {
		t.Fatalf("before the reload: %+v", before)
	}

	p.Log().Close() // as at a restart
	c2 := newTest(t, leader(t, dir))
	c2.host.(*testHost).setTopics(topicT)
	after := describe848(t, c2, "g")
	if after.State != before.State || after.Epoch != before.Epoch || after.AssignmentEpoch != before.AssignmentEpoch || len(after.Members) != 2 {
		t.Fatalf("after the reload: state %s epoch %d/%d members %d; before: %s %d/%d %d",
			after.State, after.Epoch, after.AssignmentEpoch, len(after.Members),
			before.State, before.Epoch, before.AssignmentEpoch, len(before.Members))
	}
	for i := range before.Members {
		bm, am := before.Members[i], after.Members[i]
		if bm.MemberID != am.MemberID || bm.MemberEpoch != am.MemberEpoch || !sameAssignment(bm.Assignment, am.Assignment) {
			t.Fatalf("member %d: before %+v, after %+v", i, bm, am)
		}
	}
	if gs := c2.ListGroups(); len(gs) != 1 || gs[0] != (GroupSummary{"g", "Stable", "consumer", ConsumerGroupType}) {
		t.Fatalf("groups: %+v", gs)
	}
	// A member carries on at its epoch, without rejoining.
	req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	req.SetVersion(1)
	req.Group, req.MemberID, req.MemberEpoch, req.RebalanceTimeoutMillis = "g", "member-a", a.MemberEpoch, -1
	if r := heartbeat848(t, c2, req); r.ErrorCode != 0 || r.MemberEpoch != a.MemberEpoch {
		t.Fatalf("heartbeat after the reload: code %d epoch %d, want 0 and %d", r.ErrorCode, r.MemberEpoch, a.MemberEpoch)
	}
}

func sameAssignment(a, b kmsg.Assignment) bool {
	if len(a.TopicPartitions) != len(b.TopicPartitions) {
		return false
	}
	for i := range a.TopicPartitions {
		x, y := a.TopicPartitions[i], b.TopicPartitions[i]
		if x.TopicID != y.TopicID || len(x.Partitions) != len(y.Partitions) {
			return false
		}
		for j := range x.Partitions {
			if x.Partitions[j] != y.Partitions[j] {
				return false
			}
		}
	}
	return true
}

// One group id, one protocol at a time: a classic group whose members'
// metadata is not the consumer protocol's is not upgraded (Kafka's
// GROUP_ID_NOT_FOUND and message), a classic member cannot take the id
// of a consumer group with members through With (WithClassic joins it
// instead); an empty group of either kind is converted, and its stored
// form goes with it.
func TestGroupProtocolsShareIDs(t *testing.T) {
	dir := t.TempDir()
	p := leader(t, dir)
	c := newTest(t, p)
	c.host.(*testHost).setTopics(topicT)

	joinAndSync(t, c, "classic")
	_, _, err := c.Consumer("classic", true, nil, func(*consumer.Group, *consumer.Image, int64) []consumer.Record { return nil })
	var refused interface{ KafkaMessage() string }
	if !errors.As(err, &refused) || group.ErrorCode(err) != kerr.GroupIDNotFound.Code || !strings.Contains(refused.KafkaMessage(), "malformed") {
		t.Fatalf("consumer member into a classic group of another protocol: %v", err)
	}
	if c.GroupType("classic") != ClassicGroupType {
		t.Fatalf("the refused upgrade changed the group: %s", c.GroupType("classic"))
	}

	heartbeat848(t, c, join848("new", "m"))
	if c.With("new", true, func(*group.Group) []group.Reply { return nil }) {
		t.Fatal("a classic member took the id of a consumer group with members")
	}
	leave := join848("new", "m")
	leave.MemberEpoch = -1
	if r := heartbeat848(t, c, leave); r.ErrorCode != 0 {
		t.Fatalf("leave: %d", r.ErrorCode)
	}
	if !c.With("new", true, func(*group.Group) []group.Reply { return nil }) {
		t.Fatal("an empty consumer group was not converted for a classic member")
	}
	if gs := c.ListGroups(); len(gs) != 2 || gs[1].Type != ClassicGroupType {
		t.Fatalf("groups: %+v", gs)
	}

	// The conversion is durable: a reload finds only the classic group.
	p.Log().Close()
	c2 := newTest(t, leader(t, dir))
	for _, g := range c2.ListGroups() {
		if g.Type != ClassicGroupType {
			t.Fatalf("after the reload: %+v", c2.ListGroups())
		}
	}
}

// joinAndSyncConsumer makes a Stable classic group of one member using the
// consumer protocol, assigned partitions ps of topic t.
func joinAndSyncConsumer(t *testing.T, c *Coordinator, id string, ps ...int32) string {
	t.Helper()
	got := make(chan kmsg.Response, 1)
	sub := kmsg.NewConsumerMemberMetadata()
	sub.Version, sub.Topics = 1, []string{"t"}
	join := kmsg.NewPtrJoinGroupRequest()
	join.SetVersion(3)
	join.Group, join.ProtocolType = id, "consumer"
	join.SessionTimeoutMillis, join.RebalanceTimeoutMillis = 30_000, 30_000
	join.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range", Metadata: sub.AppendTo(nil)}}
	c.With(id, true, func(g *group.Group) []group.Reply {
		return g.Join(time.Now().UnixMilli(), join, group.JoinMeta{ClientID: "classic"}, Respond(func(r kmsg.Response) { got <- r }))
	})
	jr := (<-got).(*kmsg.JoinGroupResponse)
	if jr.ErrorCode != 0 {
		t.Fatalf("join: %d", jr.ErrorCode)
	}
	a := kmsg.NewConsumerMemberAssignment()
	a.Topics = []kmsg.ConsumerMemberAssignmentTopic{{Topic: "t", Partitions: ps}}
	sync := kmsg.NewPtrSyncGroupRequest()
	sync.SetVersion(3)
	sync.Group, sync.MemberID, sync.Generation = id, jr.MemberID, jr.Generation
	sync.GroupAssignment = []kmsg.SyncGroupRequestGroupAssignment{{MemberID: jr.MemberID, MemberAssignment: a.AppendTo(nil)}}
	c.With(id, false, func(g *group.Group) []group.Reply {
		return g.Sync(time.Now().UnixMilli(), sync, Respond(func(r kmsg.Response) { got <- r }))
	})
	if sr := (<-got).(*kmsg.SyncGroupResponse); sr.ErrorCode != 0 {
		t.Fatalf("sync: %d", sr.ErrorCode)
	}
	return jr.MemberID
}

// KIP-848's online migration through the coordinator: a consumer-protocol
// join upgrades a classic group of consumers (its member keeps its
// partitions as a classic member, reached through WithClassic); a
// reload brings both members back; the consumer-protocol member leaving
// downgrades the group to a classic one, which a reload restores.
func TestGroupMigrationDurable(t *testing.T) {
	dir := t.TempDir()
	p := leader(t, dir)
	c := newTest(t, p)
	c.host.(*testHost).setTopics(topicT)
	cm := joinAndSyncConsumer(t, c, "g", 0, 1, 2, 3, 4, 5)

	r := heartbeat848(t, c, join848("g", "m"))
	if r.ErrorCode != 0 || c.GroupType("g") != ConsumerGroupType {
		t.Fatalf("upgrade: code %d, group type %s", r.ErrorCode, c.GroupType("g"))
	}
	classicHeartbeat := func(c *Coordinator, gen int32) int16 {
		t.Helper()
		hb := kmsg.NewPtrHeartbeatRequest()
		hb.Group, hb.MemberID, hb.Generation = "g", cm, gen
		var resp *kmsg.HeartbeatResponse
		exists, _, _ := c.WithClassic("g", false, func(*group.Group) []group.Reply { t.Fatal("ran as a classic group"); return nil },
			func(g *consumer.Group, _ *consumer.Image, now int64) []consumer.Record {
				resp = g.ClassicHeartbeat(now, hb)
				return nil
			})
		if !exists {
			t.Fatal("no group")
		}
		return resp.ErrorCode
	}
	// The classic member is at the classic generation, behind the epoch
	// the join moved to: told to rejoin.
	if code := classicHeartbeat(c, 1); code != kerr.RebalanceInProgress.Code {
		t.Fatalf("classic member's heartbeat: %d", code)
	}
	d := describe848(t, c, "g")
	if len(d.Members) != 2 || d.Epoch != 2 {
		t.Fatalf("after the upgrade: %+v", d)
	}
	types := map[string]int8{}
	for _, m := range d.Members {
		types[m.MemberID] = m.MemberType
	}
	if types[cm] != 0 || types["m"] != 1 {
		t.Fatalf("member types: %v", types)
	}

	p.Log().Close()
	p = leader(t, dir)
	c2 := newTest(t, p)
	c2.host.(*testHost).setTopics(topicT)
	d2 := describe848(t, c2, "g")
	if len(d2.Members) != 2 || d2.Epoch != d.Epoch || d2.Members[0].MemberType != d.Members[0].MemberType || d2.Members[1].MemberType != d.Members[1].MemberType {
		t.Fatalf("after a reload: %+v, before %+v", d2, d)
	}
	if code := classicHeartbeat(c2, 1); code != kerr.RebalanceInProgress.Code {
		t.Fatalf("classic member's heartbeat after the reload: %d", code)
	}

	leave := join848("g", "m")
	leave.MemberEpoch = -1
	if r := heartbeat848(t, c2, leave); r.ErrorCode != 0 {
		t.Fatalf("leave: %d", r.ErrorCode)
	}
	if c2.GroupType("g") != ClassicGroupType {
		t.Fatalf("after the last consumer-protocol member left: %s", c2.GroupType("g"))
	}
	var st string
	var gen int32
	c2.With("g", false, func(g *group.Group) []group.Reply { st, gen = g.State(), g.Generation(); return nil })
	if st != "PreparingRebalance" || gen != d.Epoch {
		t.Fatalf("downgraded group: %s generation %d, want PreparingRebalance at %d", st, gen, d.Epoch)
	}

	p.Log().Close()
	c3 := newTest(t, leader(t, dir))
	if c3.GroupType("g") != ClassicGroupType {
		t.Fatalf("after a reload of the downgrade: %s %+v", c3.GroupType("g"), c3.ListGroups())
	}
}

// A group config's consumer.heartbeat.interval.ms (or share.*) applies
// from the next heartbeat, to a group that exists already.
func TestGroupTimeoutOverrides(t *testing.T) {
	c := newTest(t, leader(t, t.TempDir()))
	h := c.host.(*testHost)
	h.setTopics(topicT)
	if r := heartbeat848(t, c, join848("g", "m")); r.HeartbeatIntervalMillis != 5000 {
		t.Fatalf("default interval: %d", r.HeartbeatIntervalMillis)
	}
	h.setTimeouts("g", 20_000, 700)
	req := join848("g", "m")
	req.MemberEpoch = 1
	if r := heartbeat848(t, c, req); r.ErrorCode != 0 || r.HeartbeatIntervalMillis != 700 {
		t.Fatalf("after the override: code %d interval %d", r.ErrorCode, r.HeartbeatIntervalMillis)
	}
	h.setTimeouts("sg", 50_000, 900)
	if r := shareHeartbeat(t, c, joinShare("sg", "s")); r.HeartbeatIntervalMillis != 900 {
		t.Fatalf("share group interval: %d", r.HeartbeatIntervalMillis)
	}
}
