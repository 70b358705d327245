package coordinator

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordlog/fjord/broker/acl"
	"github.com/fjordlog/fjord/group/consumer"
	"github.com/fjordlog/fjord/group/share"
	"github.com/fjordlog/fjord/group/sharepart"
)

var (
	errFencedStateEpoch = errors.New("test: fenced state epoch")
	errNotAvailable     = errors.New("test: share coordinator not available")
)

// fakeShares is a share coordinator in memory: initialize fences older
// state epochs, as sharecoord's does; fail makes a key's calls fail.
type fakeShares struct {
	mu     sync.Mutex
	states map[sharepart.Key]fakeState
	fail   map[sharepart.Key]error
}

type fakeState struct {
	stateEpoch int32
	summary    ShareSummary
}

func newFakeShares() *fakeShares {
	return &fakeShares{states: map[sharepart.Key]fakeState{}, fail: map[sharepart.Key]error{}}
}

func (f *fakeShares) Summary(_ context.Context, k sharepart.Key) (ShareSummary, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.fail[k]; err != nil {
		return ShareSummary{}, err
	}
	st, ok := f.states[k]
	if !ok {
		return ShareSummary{StartOffset: -1, LeaderEpoch: -1, DeliveryCompleteCount: -1}, nil
	}
	return st.summary, nil
}

func (f *fakeShares) Initialize(_ context.Context, k sharepart.Key, stateEpoch int32, start int64) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.fail[k]; err != nil {
		return err
	}
	st, ok := f.states[k]
	if ok && st.stateEpoch > stateEpoch {
		return fmt.Errorf("%s at %d, stored %d: %w", k, stateEpoch, st.stateEpoch, errFencedStateEpoch)
	}
	f.states[k] = fakeState{stateEpoch, ShareSummary{StartOffset: start, LeaderEpoch: st.summary.LeaderEpoch, DeliveryCompleteCount: 0}}
	return nil
}

func (f *fakeShares) Delete(_ context.Context, k sharepart.Key) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.fail[k]; err != nil {
		return err
	}
	delete(f.states, k)
	return nil
}

// set stores a leader's progress: start offset, leader epoch, records done.
func (f *fakeShares) set(k sharepart.Key, start int64, leaderEpoch, done int32) {
	f.mu.Lock()
	defer f.mu.Unlock()
	st := f.states[k]
	st.summary = ShareSummary{StartOffset: start, LeaderEpoch: leaderEpoch, DeliveryCompleteCount: done}
	f.states[k] = st
}

func (f *fakeShares) failing(k sharepart.Key, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err == nil {
		delete(f.fail, k)
	} else {
		f.fail[k] = err
	}
}

// keys lists the share-partitions with state, sorted.
func (f *fakeShares) keys() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for k, st := range f.states {
		out = append(out, fmt.Sprintf("%s/%x/%d@%d=%d", k.Group, k.TopicID[15], k.Partition, st.stateEpoch, st.summary.StartOffset))
	}
	sort.Strings(out)
	return out
}

func (h *apiHost) ShareStates() ShareStates { return h.shares }
func (h *apiHost) UnloadShareGroup(group string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.unloaded = append(h.unloaded, group)
}
func (h *apiHost) LatestOffsets(_ context.Context, topic string, parts []int32) []PartitionEnd {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make([]PartitionEnd, len(parts))
	for i, p := range parts {
		e, ok := h.ends[fmt.Sprintf("%s/%d", topic, p)]
		if !ok {
			e.Code = kerr.UnknownTopicOrPartition.Code
		}
		out[i] = e
	}
	return out
}

func (h *apiHost) setEnd(topic string, p int32, end int64, code int16) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.ends[fmt.Sprintf("%s/%d", topic, p)] = PartitionEnd{Offset: end, Code: code}
}

// shareTopics puts ts in both images: the node's (topic ids for the APIs)
// and the groups'.
func (h *apiHost) shareTopics(ts ...consumer.Topic) {
	for _, t := range ts {
		h.setTopic(t.Name, t.ID[15], t.Partitions)
	}
	h.c.host.(*testHost).setTopics(ts...)
}

func (h *apiHost) unloads() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.unloaded)
}

func sk(group string, topic byte, p int32) sharepart.Key {
	return sharepart.Key{Group: group, TopicID: [16]byte{15: topic}, Partition: p}
}

var (
	shareT = consumer.Topic{Name: "t", ID: [16]byte{15: 1}, Partitions: 2}
	shareU = consumer.Topic{Name: "u", ID: [16]byte{15: 2}, Partitions: 1}
)

func alterReq(group string, topics ...kmsg.AlterShareGroupOffsetsRequestTopic) *kmsg.AlterShareGroupOffsetsRequest {
	req := kmsg.NewPtrAlterShareGroupOffsetsRequest()
	req.GroupID, req.Topics = group, topics
	return req
}

// alterTopic: offsets[i] for partition parts[i].
func alterTopic(name string, parts []int32, offsets ...int64) kmsg.AlterShareGroupOffsetsRequestTopic {
	rt := kmsg.NewAlterShareGroupOffsetsRequestTopic()
	rt.Topic = name
	for i, p := range parts {
		rp := kmsg.NewAlterShareGroupOffsetsRequestTopicPartition()
		rp.Partition, rp.StartOffset = p, offsets[i]
		rt.Partitions = append(rt.Partitions, rp)
	}
	return rt
}

// alterCodes flattens an alter's answer: "top" and "topic/partition" to
// code name.
func alterCodes(resp *kmsg.AlterShareGroupOffsetsResponse) string {
	var out []string
	if resp.ErrorCode != 0 {
		out = append(out, "top="+codeName(resp.ErrorCode)+":"+deref(resp.ErrorMessage))
	}
	for _, rt := range resp.Topics {
		for _, rp := range rt.Partitions {
			out = append(out, fmt.Sprintf("%s%s/%d=%s", rt.Topic, idMark(rt.TopicID), rp.Partition, codeName(rp.ErrorCode)))
		}
	}
	return strings.Join(out, " ")
}

func idMark(id [16]byte) string {
	if id == ([16]byte{}) {
		return "(no id)"
	}
	return ""
}

func codeName(code int16) string {
	if code == 0 {
		return "OK"
	}
	return kerr.ErrorForCode(code).(*kerr.Error).Message
}

func describeReq(version int16, groups ...kmsg.DescribeShareGroupOffsetsRequestGroup) *kmsg.DescribeShareGroupOffsetsRequest {
	req := kmsg.NewPtrDescribeShareGroupOffsetsRequest()
	req.Version, req.Groups = version, groups
	return req
}

// describeGroup: no topics is all of them (null).
func describeGroup(id string, topics ...kmsg.DescribeShareGroupOffsetsRequestGroupTopic) kmsg.DescribeShareGroupOffsetsRequestGroup {
	g := kmsg.NewDescribeShareGroupOffsetsRequestGroup()
	g.GroupID, g.Topics = id, topics
	return g
}

func describeTopic(name string, parts ...int32) kmsg.DescribeShareGroupOffsetsRequestGroupTopic {
	t := kmsg.NewDescribeShareGroupOffsetsRequestGroupTopic()
	t.Topic, t.Partitions = name, parts
	return t
}

// described flattens a describe's answer.
func described(resp *kmsg.DescribeShareGroupOffsetsResponse, lag bool) string {
	var out []string
	for _, g := range resp.Groups {
		s := g.GroupID + ":"
		if g.ErrorCode != 0 {
			s += codeName(g.ErrorCode)
		}
		for _, t := range g.Topics {
			for _, p := range t.Partitions {
				s += fmt.Sprintf(" %s%s/%d=%d,e%d", t.Topic, idMark(t.TopicID), p.Partition, p.StartOffset, p.LeaderEpoch)
				if lag {
					s += fmt.Sprintf(",lag%d", p.Lag)
				}
				if p.ErrorCode != 0 {
					s += "," + codeName(p.ErrorCode)
				}
			}
		}
		out = append(out, s)
	}
	return strings.Join(out, " | ")
}

func deleteOffsetsReq(group string, topics ...string) *kmsg.DeleteShareGroupOffsetsRequest {
	req := kmsg.NewPtrDeleteShareGroupOffsetsRequest()
	req.GroupID = group
	for _, t := range topics {
		rt := kmsg.NewDeleteShareGroupOffsetsRequestTopic()
		rt.Topic = t
		req.Topics = append(req.Topics, rt)
	}
	return req
}

func deletedCodes(resp *kmsg.DeleteShareGroupOffsetsResponse) string {
	var out []string
	if resp.ErrorCode != 0 {
		out = append(out, "top="+codeName(resp.ErrorCode)+":"+deref(resp.ErrorMessage))
	}
	for _, rt := range resp.Topics {
		s := fmt.Sprintf("%s%s=%s", rt.Topic, idMark(rt.TopicID), codeName(rt.ErrorCode))
		if rt.ErrorCode != 0 && rt.ErrorMessage != nil && strings.HasPrefix(*rt.ErrorMessage, "There is") {
			s += "(no offsets)"
		}
		out = append(out, s)
	}
	return strings.Join(out, " ")
}

func initialized(t *testing.T, h *apiHost, group string) string {
	t.Helper()
	var out string
	h.c.Share(group, false, func(g *share.Group, img *share.Image, _ int64) []share.Record {
		out = fmt.Sprint(g.Initialized())
		return nil
	})
	return out
}

func expect(t *testing.T, what, got, want string) {
	t.Helper()
	if got != want {
		t.Fatalf("%s:\n got %s\nwant %s", what, got, want)
	}
}

// The three share-group offsets APIs end to end, over the wire, against
// a real group coordinator and a share coordinator in memory.
func TestShareGroupOffsetsAPIs(t *testing.T) {
	h := newAPIHost(t)
	h.shareTopics(shareT, shareU)
	h.setEnd("t", 0, 20, 0)
	h.setEnd("t", 1, 5, 0)

	// An alter creates the group; unknown topics and partitions are
	// refused on the partition.
	resp := serve[*kmsg.AlterShareGroupOffsetsResponse](t, h, nil, alterReq("sg",
		alterTopic("t", []int32{0, 1, 5}, 8, 3, 0), alterTopic("nope", []int32{0}, 1)))
	expect(t, "alter", alterCodes(resp), "t/0=OK t/1=OK t/5=UNKNOWN_TOPIC_OR_PARTITION nope(no id)/0=UNKNOWN_TOPIC_OR_PARTITION")
	expect(t, "states", fmt.Sprint(h.shares.keys()), "[sg/1/0@1=8 sg/1/1@1=3]")
	if h.c.GroupType("sg") != ShareGroupType {
		t.Fatalf("the alter did not create a share group: %q", h.c.GroupType("sg"))
	}
	expect(t, "unloaded", fmt.Sprint(h.unloads()), "[sg]")
	expect(t, "initialized", initialized(t, h, "sg"), fmt.Sprint(map[share.TopicID][]int32{shareT.ID: {0, 1}}))

	// A leader acknowledged records of t/0: the lag counts the rest.
	h.shares.set(sk("sg", 1, 0), 8, 3, 2)
	d := serve[*kmsg.DescribeShareGroupOffsetsResponse](t, h, nil, describeReq(1,
		describeGroup("sg", describeTopic("t", 0, 1), describeTopic("nope", 0)), describeGroup("sg"), describeGroup("none")))
	expect(t, "describe v1", described(d, true),
		"sg: t/0=8,e3,lag10 t/1=3,e0,lag2 nope(no id)/0=-1,e0,lag-1 | sg: t/0=8,e3,lag10 t/1=3,e0,lag2 | none:")
	d = serve[*kmsg.DescribeShareGroupOffsetsResponse](t, h, nil, describeReq(0, describeGroup("sg", describeTopic("t", 0))))
	expect(t, "describe v0", described(d, false), "sg: t/0=8,e3")
	// A failed summary is no data; a failed end offset the partition's
	// error; a partition never initialized -1.
	h.shares.failing(sk("sg", 1, 1), errNotAvailable)
	h.setEnd("t", 0, 0, kerr.NotLeaderForPartition.Code)
	d = serve[*kmsg.DescribeShareGroupOffsetsResponse](t, h, nil, describeReq(1, describeGroup("sg", describeTopic("t", 0, 1)), describeGroup("sg", describeTopic("u", 0))))
	expect(t, "describe with failures", described(d, true),
		"sg: t/0=0,e0,lag-1,NOT_LEADER_FOR_PARTITION t/1=-1,e0,lag-1 | sg: u/0=-1,e-1,lag-1")
	h.shares.failing(sk("sg", 1, 1), nil)
	h.setEnd("t", 0, 20, 0)
	d = serve[*kmsg.DescribeShareGroupOffsetsResponse](t, h, nil, describeReq(1, describeGroup("")))
	expect(t, "describe of no group id", described(d, true), ":INVALID_GROUP_ID")

	// With a member the group's offsets stay.
	c := h.c
	c.host.(*testHost).setTopics(shareT, shareU)
	req := joinShare("sg", "m1")
	req.SubscribedTopicNames = []string{"u"}
	if r := shareHeartbeat(t, c, req); r.ErrorCode != 0 {
		t.Fatalf("join: %v", r.ErrorCode)
	}
	resp = serve[*kmsg.AlterShareGroupOffsetsResponse](t, h, nil, alterReq("sg", alterTopic("t", []int32{0}, 0)))
	expect(t, "alter with a member", alterCodes(resp), "top=NON_EMPTY_GROUP:The group is not empty.")
	dr := serve[*kmsg.DeleteShareGroupOffsetsResponse](t, h, nil, deleteOffsetsReq("sg", "t"))
	expect(t, "delete offsets with a member", deletedCodes(dr), "top=NON_EMPTY_GROUP:The group is not empty.")
	dg := serve[*kmsg.DeleteGroupsResponse](t, h, nil, deleteGroupsReq("sg"))
	if dg.Groups[0].ErrorCode != kerr.NonEmptyGroup.Code {
		t.Fatalf("delete of a share group with a member: %v", dg.Groups[0].ErrorCode)
	}
	leave := joinShare("sg", "m1")
	leave.MemberEpoch = -1
	shareHeartbeat(t, c, leave)
	// The member's subscription initialized u (the heartbeat's way).
	expect(t, "initialized after the member", initialized(t, h, "sg"),
		fmt.Sprint(map[share.TopicID][]int32{shareT.ID: {0, 1}, shareU.ID: {0}}))

	// Another type's group, and groups that do not exist.
	heartbeat848(t, c, join848("cg", "m"))
	resp = serve[*kmsg.AlterShareGroupOffsetsResponse](t, h, nil, alterReq("cg", alterTopic("t", []int32{0}, 0)))
	expect(t, "alter of a consumer group", alterCodes(resp), "top=GROUP_ID_NOT_FOUND:Group cg is not a share group.")
	dr = serve[*kmsg.DeleteShareGroupOffsetsResponse](t, h, nil, deleteOffsetsReq("none", "t"))
	expect(t, "delete offsets of no group", deletedCodes(dr), "top=GROUP_ID_NOT_FOUND:Group none not found.")
	resp = serve[*kmsg.AlterShareGroupOffsetsResponse](t, h, nil, alterReq("nothing", alterTopic("nope", []int32{0}, 0)))
	expect(t, "alter of nothing", alterCodes(resp), "nope(no id)/0=UNKNOWN_TOPIC_OR_PARTITION")
	if c.GroupType("nothing") != "" {
		t.Fatal("an alter that initialized nothing left a group")
	}

	// A share coordinator that fails t/1: t stays deleting, and is
	// deleted in full next time.
	h.shares.failing(sk("sg", 1, 1), errNotAvailable)
	dr = serve[*kmsg.DeleteShareGroupOffsetsResponse](t, h, nil, deleteOffsetsReq("sg", "t", "nope"))
	expect(t, "delete offsets that failed", deletedCodes(dr), "nope(no id)=UNKNOWN_TOPIC_OR_PARTITION t=COORDINATOR_NOT_AVAILABLE")
	expect(t, "states after the failed delete", fmt.Sprint(h.shares.keys()), "[sg/1/1@1=3]")
	h.shares.failing(sk("sg", 1, 1), nil)
	dr = serve[*kmsg.DeleteShareGroupOffsetsResponse](t, h, nil, deleteOffsetsReq("sg", "t", "u"))
	expect(t, "delete offsets", deletedCodes(dr), "t=OK u=OK")
	expect(t, "states after the delete", fmt.Sprint(h.shares.keys()), "[]")
	dr = serve[*kmsg.DeleteShareGroupOffsetsResponse](t, h, nil, deleteOffsetsReq("sg", "t"))
	expect(t, "delete offsets again", deletedCodes(dr), "t(no id)=UNKNOWN_TOPIC_OR_PARTITION(no offsets)")
	expect(t, "initialized after the delete", initialized(t, h, "sg"), fmt.Sprint(map[share.TopicID][]int32{}))

	// An alter at the state epoch of before is fenced; the group's epoch
	// went up (the leave, the alter), so a new alter is not.
	h.shares.mu.Lock()
	h.shares.states[sk("sg", 2, 0)] = fakeState{stateEpoch: 99}
	h.shares.mu.Unlock()
	resp = serve[*kmsg.AlterShareGroupOffsetsResponse](t, h, nil, alterReq("sg", alterTopic("t", []int32{0}, 4), alterTopic("u", []int32{0}, 1)))
	expect(t, "alter fenced on u", alterCodes(resp), "t/0=OK u/0=FENCED_STATE_EPOCH")
	expect(t, "initialized after a partial alter", initialized(t, h, "sg"), fmt.Sprint(map[share.TopicID][]int32{shareT.ID: {0}}))

	// DeleteGroups: the state first; a failure keeps the group.
	h.shares.failing(sk("sg", 1, 0), errNotAvailable)
	dg = serve[*kmsg.DeleteGroupsResponse](t, h, nil, deleteGroupsReq("sg"))
	if dg.Groups[0].ErrorCode != kerr.CoordinatorNotAvailable.Code || c.GroupType("sg") != ShareGroupType {
		t.Fatalf("delete with the share coordinator failing: %v, group %q", dg.Groups[0].ErrorCode, c.GroupType("sg"))
	}
	h.shares.failing(sk("sg", 1, 0), nil)
	dg = serve[*kmsg.DeleteGroupsResponse](t, h, nil, deleteGroupsReq("sg"))
	if dg.Groups[0].ErrorCode != 0 || c.GroupType("sg") != "" {
		t.Fatalf("delete: %v, group %q", dg.Groups[0].ErrorCode, c.GroupType("sg"))
	}
	// The initializing u/0 went with t/0 (the state fenced at 99 too).
	expect(t, "states after DeleteGroups", fmt.Sprint(h.shares.keys()), "[]")

	// A partition named twice is answered twice, initialized once, at the
	// last offset.
	resp = serve[*kmsg.AlterShareGroupOffsetsResponse](t, h, nil, alterReq("dup", alterTopic("t", []int32{1, 1}, 4, 9)))
	expect(t, "alter of a partition twice", alterCodes(resp), "t/1=OK t/1=OK")
	expect(t, "states after it", fmt.Sprint(h.shares.keys()), "[dup/1/1@1=9]")
}

func deleteGroupsReq(groups ...string) *kmsg.DeleteGroupsRequest {
	req := kmsg.NewPtrDeleteGroupsRequest()
	req.Version, req.Groups = 3, groups
	return req
}

// The rules: DESCRIBE on group and topics for a describe (topics denied
// answered or, for all topics, left out), READ on group and topics for an
// alter, DELETE on the group and READ on topics for a delete, as Kafka's.
func TestShareGroupOffsetsRules(t *testing.T) {
	h := newAPIHost(t)
	h.shareTopics(shareT, shareU)
	h.setEnd("t", 0, 10, 0)
	h.setEnd("u", 0, 10, 0)
	deny := func(rt acl.ResourceType, name string, op acl.Operation) acl.Binding {
		return acl.Binding{ResourceType: rt, Name: name, Pattern: acl.PatternLiteral, Principal: "User:*", Host: "*",
			Operation: op, Permission: acl.PermDeny}
	}
	az := acl.New(acl.Config{AllowIfNoACL: true}, []acl.Binding{
		deny(acl.ResourceTopic, "u", acl.OpRead), deny(acl.ResourceTopic, "u", acl.OpDescribe),
		deny(acl.ResourceGroup, "secret", acl.OpAll), deny(acl.ResourceGroup, "ro", acl.OpRead), deny(acl.ResourceGroup, "ro", acl.OpDelete),
	})

	resp := serve[*kmsg.AlterShareGroupOffsetsResponse](t, h, az, alterReq("sg", alterTopic("t", []int32{0}, 1), alterTopic("u", []int32{0}, 1)))
	expect(t, "alter", alterCodes(resp), "u/0=TOPIC_AUTHORIZATION_FAILED t/0=OK")
	resp = serve[*kmsg.AlterShareGroupOffsetsResponse](t, h, az, alterReq("ro", alterTopic("t", []int32{0}, 1)))
	expect(t, "alter without READ on the group", alterCodes(resp),
		"top=GROUP_AUTHORIZATION_FAILED:"+deref(errorMessage(kerr.GroupAuthorizationFailed.Code)))
	// Only u: the group is still checked (and created empty, with
	// nothing initialized: gone again).
	resp = serve[*kmsg.AlterShareGroupOffsetsResponse](t, h, az, alterReq("other", alterTopic("u", []int32{0}, 1)))
	expect(t, "alter of u only", alterCodes(resp), "u/0=TOPIC_AUTHORIZATION_FAILED")

	d := serve[*kmsg.DescribeShareGroupOffsetsResponse](t, h, az, describeReq(1,
		describeGroup("secret"), describeGroup("sg", describeTopic("t", 0), describeTopic("u", 0)), describeGroup("sg")))
	expect(t, "describe", described(d, true),
		"sg: t/0=1,e0,lag9 u(no id)/0=-1,e0,lag-1,TOPIC_AUTHORIZATION_FAILED | sg: t/0=1,e0,lag9 | secret:GROUP_AUTHORIZATION_FAILED")

	dr := serve[*kmsg.DeleteShareGroupOffsetsResponse](t, h, az, deleteOffsetsReq("ro", "t"))
	expect(t, "delete without DELETE on the group", deletedCodes(dr), "top=GROUP_AUTHORIZATION_FAILED:"+deref(errorMessage(kerr.GroupAuthorizationFailed.Code)))
	dr = serve[*kmsg.DeleteShareGroupOffsetsResponse](t, h, az, deleteOffsetsReq("sg", "u", "t"))
	expect(t, "delete", deletedCodes(dr), "u(no id)=TOPIC_AUTHORIZATION_FAILED t=OK")
}

// A group an alter created, and what it initialized, come back when
// another coordinator loads the log; so do the marks of a delete that
// failed, which the next DeleteGroups takes up.
func TestShareGroupOffsetsReload(t *testing.T) {
	dir := t.TempDir()
	p := leader(t, dir)
	h := newAPIHost(t)
	h.c = newTest(t, p)
	h.shareTopics(shareT)
	resp := serve[*kmsg.AlterShareGroupOffsetsResponse](t, h, nil, alterReq("sg", alterTopic("t", []int32{0, 1}, 5, 6)))
	expect(t, "alter", alterCodes(resp), "t/0=OK t/1=OK")
	h.shares.failing(sk("sg", 1, 1), errNotAvailable)
	dg := serve[*kmsg.DeleteGroupsResponse](t, h, nil, deleteGroupsReq("sg"))
	if dg.Groups[0].ErrorCode != kerr.CoordinatorNotAvailable.Code {
		t.Fatalf("delete with the share coordinator failing: %v", dg.Groups[0].ErrorCode)
	}
	h.shares.failing(sk("sg", 1, 1), nil)

	p.Log().Close()
	h.c = newTest(t, leader(t, dir))
	h.shareTopics(shareT)
	if h.c.GroupType("sg") != ShareGroupType {
		t.Fatal("the share group did not come back")
	}
	expect(t, "states before", fmt.Sprint(h.shares.keys()), "[sg/1/1@1=6]")
	dg = serve[*kmsg.DeleteGroupsResponse](t, h, nil, deleteGroupsReq("sg"))
	if dg.Groups[0].ErrorCode != 0 || h.c.GroupType("sg") != "" {
		t.Fatalf("delete after the reload: %v", dg.Groups[0].ErrorCode)
	}
	expect(t, "states after", fmt.Sprint(h.shares.keys()), "[]")
}

// Alter and delete are audited whatever their outcome, with the group
// (a field the audit does not name by itself) and the offsets set.
func TestShareGroupOffsetsAudited(t *testing.T) {
	h := newAPIHost(t)
	got := map[int16][]string{}
	for _, e := range Entries(h) {
		if e.Key == 91 || e.Key == 92 {
			if !e.Mutates || e.AuditDetails == nil {
				t.Fatalf("key %d: Mutates %v, details %v", e.Key, e.Mutates, e.AuditDetails != nil)
			}
			var req kmsg.Request = alterReq("sg", alterTopic("t", []int32{0, 1}, 8, 3))
			if e.Key == 92 {
				req = deleteOffsetsReq("sg", "t")
			}
			got[e.Key] = e.AuditDetails(req)
		}
	}
	expect(t, "alter's details", fmt.Sprint(got[91]), "[group=sg t/0=8 t/1=3]")
	expect(t, "delete's details", fmt.Sprint(got[92]), "[group=sg]")
}
