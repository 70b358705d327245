package coordinator

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordlog/fjord/broker/acl"
	"github.com/fjordlog/fjord/broker/api"
	"github.com/fjordlog/fjord/group/consumer"
)

// apiHost is the node as the group APIs see it: a real coordinator, and a
// metadata image of a few topics the test edits.
type apiHost struct {
	c      *Coordinator
	wg     sync.WaitGroup
	log    zerolog.Logger
	mu     sync.Mutex
	topics map[string]apiTopic // by name
	// The share coordinator, and what the share-group offsets APIs asked
	// of the node (shareoffsets_test.go).
	shares   *fakeShares
	unloaded []string
	ends     map[string]PartitionEnd // "topic/partition"
}

type apiTopic struct {
	id    [16]byte
	parts int32
}

func newAPIHost(t *testing.T) *apiHost {
	h := &apiHost{c: newTest(t, leader(t, t.TempDir())), log: zerolog.Nop(), topics: map[string]apiTopic{},
		shares: newFakeShares(), ends: map[string]PartitionEnd{}}
	t.Cleanup(h.wg.Wait)
	return h
}

func (h *apiHost) setTopic(name string, id byte, parts int32) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if parts == 0 {
		delete(h.topics, name)
		return
	}
	h.topics[name] = apiTopic{tid(id), parts}
}

func tid(b byte) [16]byte { return [16]byte{15: b} }

func (h *apiHost) Coordinator() *Coordinator { return h.c }
func (h *apiHost) HasPartition(topic string, p int32) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	t, ok := h.topics[topic]
	return ok && p >= 0 && p < t.parts
}
func (h *apiHost) TopicName(id [16]byte) string {
	h.mu.Lock()
	defer h.mu.Unlock()
	for name, t := range h.topics {
		if id != ([16]byte{}) && t.id == id {
			return name
		}
	}
	return ""
}
func (h *apiHost) TopicID(name string) [16]byte {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.topics[name].id
}
func (h *apiHost) Code(err error) int16 {
	switch {
	case err == nil:
		return 0
	case errors.Is(err, ErrLoading):
		return kerr.CoordinatorLoadInProgress.Code
	case errors.Is(err, ErrNotCoordinator):
		return kerr.NotCoordinator.Code
	case errors.Is(err, errFencedStateEpoch):
		return kerr.FencedStateEpoch.Code
	case errors.Is(err, errNotAvailable):
		return kerr.CoordinatorNotAvailable.Code
	}
	return kerr.UnknownServerError.Code
}
func (h *apiHost) AuthorizedOps(*api.Conn, acl.ResourceType, string) int32 { return testOps }
func (h *apiHost) MayDescribeTopics(*api.Conn) consumer.Visibility         { return consumer.AllTopics }

// testOps stands for the authorizer's answer to KIP-430.
const testOps = 0x128

func (h *apiHost) Go(fn func()) bool {
	h.wg.Add(1)
	go func() {
		defer h.wg.Done()
		fn()
	}()
	return true
}
func (h *apiHost) Log() *zerolog.Logger { return &h.log }

// serve runs req as the node's dispatch does, through the wire both ways:
// encoded at its version and decoded (so fields a version does not carry
// are gone), its rule with az (nil: no authorizer), its handler, the
// rule's fix; the response is what the client decodes.
func serve[Resp kmsg.Response](t *testing.T, h *apiHost, az *acl.Authorizer, req kmsg.Request) Resp {
	t.Helper()
	return serveWith[Resp](t, h, az, req, nil)
}

// serveWith is serve with between, when not nil, run after the rule and
// before the handler.
func serveWith[Resp kmsg.Response](t *testing.T, h *apiHost, az *acl.Authorizer, req kmsg.Request, between func()) Resp {
	t.Helper()
	r, err := api.NewRegistry(Entries(h)...)
	if err != nil {
		t.Fatal(err)
	}
	in := kmsg.RequestForKey(req.Key())
	in.SetVersion(req.GetVersion())
	if err := in.ReadFrom(req.AppendTo(nil)); err != nil {
		t.Fatalf("decoding %T v%d: %v", req, req.GetVersion(), err)
	}
	e := r.Get(req.Key())
	if v := req.GetVersion(); v < e.Client.Min || v > e.Client.Max {
		t.Fatalf("%T v%d is not served", req, req.GetVersion())
	}
	cc := &api.Conn{Ctx: context.Background(), Principal: "User:alice", ClientHost: "127.0.0.1"}
	deny, fix := api.Authorize(&api.Authz{Conn: cc, Az: az, Key: req.Key()}, e, in)
	out := deny
	if deny == nil {
		if between != nil {
			between()
		}
		got := make(chan kmsg.Response, 1)
		e.Handle(cc, in, func(r kmsg.Response) { got <- r })
		out = <-got
		if fix != nil {
			fix(out)
		}
	}
	resp := req.ResponseKind()
	resp.SetVersion(req.GetVersion())
	if err := resp.ReadFrom(out.AppendTo(nil)); err != nil {
		t.Fatalf("decoding the answer to %T v%d: %v", req, req.GetVersion(), err)
	}
	return resp.(Resp)
}

func commitReq(version int16, group string, gen int32, member string, topics ...kmsg.OffsetCommitRequestTopic) *kmsg.OffsetCommitRequest {
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Version, req.Group, req.Generation, req.MemberID, req.Topics = version, group, gen, member, topics
	return req
}

func commitTopic(name string, id [16]byte, offset int64, parts ...int32) kmsg.OffsetCommitRequestTopic {
	rt := kmsg.NewOffsetCommitRequestTopic()
	rt.Topic, rt.TopicID = name, id
	for _, p := range parts {
		rp := kmsg.NewOffsetCommitRequestTopicPartition()
		rp.Partition, rp.Offset = p, offset+int64(p)
		rt.Partitions = append(rt.Partitions, rp)
	}
	return rt
}

func fetchReq(version int16, group string, topics ...kmsg.OffsetFetchRequestGroupTopic) *kmsg.OffsetFetchRequest {
	req := kmsg.NewPtrOffsetFetchRequest()
	req.Version = version
	g := kmsg.NewOffsetFetchRequestGroup()
	g.Group, g.Topics = group, topics
	req.Groups = []kmsg.OffsetFetchRequestGroup{g}
	return req
}

func fetchTopic(name string, id [16]byte, parts ...int32) kmsg.OffsetFetchRequestGroupTopic {
	t := kmsg.NewOffsetFetchRequestGroupTopic()
	t.Topic, t.TopicID, t.Partitions = name, id, parts
	return t
}

// codes flattens a response's topics to "topic-or-id/partition" -> code.
func commitCodes(resp *kmsg.OffsetCommitResponse) map[string]int16 {
	out := map[string]int16{}
	for _, rt := range resp.Topics {
		for _, rp := range rt.Partitions {
			out[key(rt.Topic, rt.TopicID, rp.Partition)] = rp.ErrorCode
		}
	}
	return out
}

func key(name string, id [16]byte, p int32) string {
	if name == "" {
		name = "id" + string(rune('0'+id[15]))
	}
	return name + "/" + string(rune('0'+p))
}

type fetched struct {
	offset int64
	code   int16
}

func fetchResults(t *testing.T, resp *kmsg.OffsetFetchResponse) map[string]fetched {
	t.Helper()
	if len(resp.Groups) != 1 || resp.Groups[0].ErrorCode != 0 {
		t.Fatalf("groups: %+v", resp.Groups)
	}
	out := map[string]fetched{}
	for _, rt := range resp.Groups[0].Topics {
		for _, rp := range rt.Partitions {
			out[key(rt.Topic, rt.TopicID, rp.Partition)] = fetched{rp.Offset, rp.ErrorCode}
		}
	}
	return out
}

func sameMap[V comparable](a, b map[string]V) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// OffsetCommit v10 and OffsetFetch v10 name topics by id: known ids are
// committed under the topic's name and answered by id, unknown ids are
// UNKNOWN_TOPIC_ID; older versions see the same offsets by name.
func TestOffsetsByTopicID(t *testing.T) {
	h := newAPIHost(t)
	h.setTopic("t", 1, 3)
	resp := serve[*kmsg.OffsetCommitResponse](t, h, nil, commitReq(10, "g", -1, "",
		commitTopic("", tid(1), 100, 0, 1), commitTopic("", tid(9), 100, 0)))
	want := map[string]int16{"id1/0": 0, "id1/1": 0, "id9/0": kerr.UnknownTopicID.Code}
	if got := commitCodes(resp); !sameMap(got, want) {
		t.Fatalf("commit v10: %v, want %v", got, want)
	}
	if c, ok := h.c.Offset("g", TopicPartition{"t", 1}); !ok || c.Offset != 101 {
		t.Fatalf("stored by name: %+v %v", c, ok)
	}

	fr := serve[*kmsg.OffsetFetchResponse](t, h, nil, fetchReq(10, "g", fetchTopic("", tid(1), 0, 1, 2), fetchTopic("", tid(9), 0)))
	wantF := map[string]fetched{"id1/0": {100, 0}, "id1/1": {101, 0}, "id1/2": {-1, 0}, "id9/0": {-1, kerr.UnknownTopicID.Code}}
	if got := fetchResults(t, fr); !sameMap(got, wantF) {
		t.Fatalf("fetch v10: %v, want %v", got, wantF)
	}
	fr = serve[*kmsg.OffsetFetchResponse](t, h, nil, fetchReq(9, "g", fetchTopic("t", [16]byte{}, 0, 1)))
	wantF = map[string]fetched{"t/0": {100, 0}, "t/1": {101, 0}}
	if got := fetchResults(t, fr); !sameMap(got, wantF) {
		t.Fatalf("fetch v9 by name: %v, want %v", got, wantF)
	}

	// Every offset of the group: named by id at v10; a topic the image no
	// longer has cannot be named, and is left out as Kafka does.
	if err := commit(t, h.c, "g", map[TopicPartition]*Committed{{"gone", 0}: {Offset: 7}}); err != nil {
		t.Fatal(err)
	}
	fr = serve[*kmsg.OffsetFetchResponse](t, h, nil, fetchReq(10, "g"))
	wantF = map[string]fetched{"id1/0": {100, 0}, "id1/1": {101, 0}}
	if got := fetchResults(t, fr); !sameMap(got, wantF) {
		t.Fatalf("fetch v10 of all: %v, want %v", got, wantF)
	}
	fr = serve[*kmsg.OffsetFetchResponse](t, h, nil, fetchReq(8, "g"))
	wantF = map[string]fetched{"t/0": {100, 0}, "t/1": {101, 0}, "gone/0": {7, 0}}
	if got := fetchResults(t, fr); !sameMap(got, wantF) {
		t.Fatalf("fetch v8 of all: %v, want %v", got, wantF)
	}

	// A request naming only unknown ids is not a fetch of everything.
	fr = serve[*kmsg.OffsetFetchResponse](t, h, nil, fetchReq(10, "g", fetchTopic("", tid(9), 0)))
	wantF = map[string]fetched{"id9/0": {-1, kerr.UnknownTopicID.Code}}
	if got := fetchResults(t, fr); !sameMap(got, wantF) {
		t.Fatalf("fetch v10 of an unknown id: %v, want %v", got, wantF)
	}

	// An unknown id is answered so even when another node coordinates the
	// group (Kafka answers it before the coordinator sees the request).
	other := &apiHost{c: newTest(t), log: zerolog.Nop(), topics: map[string]apiTopic{}} // leads no offsets partition
	other.setTopic("t", 1, 3)
	resp = serve[*kmsg.OffsetCommitResponse](t, other, nil, commitReq(10, "g", -1, "",
		commitTopic("", tid(1), 0, 0), commitTopic("", tid(9), 0, 0)))
	want = map[string]int16{"id1/0": kerr.NotCoordinator.Code, "id9/0": kerr.UnknownTopicID.Code}
	if got := commitCodes(resp); !sameMap(got, want) {
		t.Fatalf("commit v10 to another coordinator: %v, want %v", got, want)
	}
}

// From OffsetCommit v9, a commit with a generation to a group that does
// not exist is GROUP_ID_NOT_FOUND (Kafka's OffsetMetadataManager); a
// group with committed offsets exists; older versions keep their answer.
func TestOffsetCommitV9UnknownGroup(t *testing.T) {
	h := newAPIHost(t)
	h.setTopic("t", 1, 1)
	for _, tc := range []struct {
		version int16
		group   string
		want    int16
	}{
		{9, "nobody", kerr.GroupIDNotFound.Code},
		{10, "nobody", kerr.GroupIDNotFound.Code},
		{8, "nobody", kerr.UnknownMemberID.Code},
		{9, "offsets-only", kerr.UnknownMemberID.Code},
	} {
		if tc.group == "offsets-only" {
			if err := commit(t, h.c, tc.group, map[TopicPartition]*Committed{{"t", 0}: {Offset: 1}}); err != nil {
				t.Fatal(err)
			}
		}
		resp := serve[*kmsg.OffsetCommitResponse](t, h, nil, commitReq(tc.version, tc.group, 3, "m", commitTopic("t", tid(1), 5, 0)))
		if got := commitCodes(resp); len(got) != 1 || got["t/0"] != tc.want && got["id1/0"] != tc.want {
			t.Errorf("v%d to %s: %v, want code %d", tc.version, tc.group, got, tc.want)
		}
	}

	// A member of a Stable group commits at v9 and v10 as at v8 (a
	// classic group checks v9 exactly as v8), and a stale generation is
	// ILLEGAL_GENERATION.
	member, gen := joinAndSync(t, h.c, "live")
	for _, v := range []int16{8, 9, 10} {
		resp := serve[*kmsg.OffsetCommitResponse](t, h, nil, commitReq(v, "live", gen, member, commitTopic("t", tid(1), int64(v), 0)))
		if got := commitCodes(resp); got["t/0"] != 0 && got["id1/0"] != 0 || len(got) != 1 {
			t.Errorf("member commit v%d: %v", v, got)
		}
		resp = serve[*kmsg.OffsetCommitResponse](t, h, nil, commitReq(v, "live", gen+1, member, commitTopic("t", tid(1), 0, 0)))
		if got := commitCodes(resp); got["t/0"] != kerr.IllegalGeneration.Code && got["id1/0"] != kerr.IllegalGeneration.Code {
			t.Errorf("stale commit v%d: %v", v, got)
		}
	}
	if c, _ := h.c.Offset("live", TopicPartition{"t", 0}); c.Offset != 10 {
		t.Errorf("live's offset %d, want 10", c.Offset)
	}
}

// The rules resolve ids to the names they authorize, answer unknown ids
// UNKNOWN_TOPIC_ID and denied topics TOPIC_AUTHORIZATION_FAILED by id; the
// handler serves the topic the rule authorized even if the image renames
// the id in between.
func TestTopicIDRules(t *testing.T) {
	h := newAPIHost(t)
	h.setTopic("t", 1, 2)
	h.setTopic("secret", 2, 2)
	az := acl.New(acl.Config{AllowIfNoACL: true}, []acl.Binding{{ResourceType: acl.ResourceTopic, Name: "secret",
		Pattern: acl.PatternLiteral, Principal: "User:*", Host: "*", Operation: acl.OpAll, Permission: acl.PermDeny}})
	if err := commit(t, h.c, "g", map[TopicPartition]*Committed{{"secret", 0}: {Offset: 9}}); err != nil {
		t.Fatal(err)
	}

	resp := serve[*kmsg.OffsetCommitResponse](t, h, az, commitReq(10, "g", -1, "",
		commitTopic("", tid(1), 50, 0), commitTopic("", tid(2), 50, 0), commitTopic("", tid(9), 50, 0)))
	want := map[string]int16{"id1/0": 0, "id2/0": kerr.TopicAuthorizationFailed.Code, "id9/0": kerr.UnknownTopicID.Code}
	if got := commitCodes(resp); !sameMap(got, want) {
		t.Fatalf("commit v10: %v, want %v", got, want)
	}
	if c, _ := h.c.Offset("g", TopicPartition{"secret", 0}); c.Offset != 9 {
		t.Fatalf("a denied topic's offset changed to %d", c.Offset)
	}

	fr := serve[*kmsg.OffsetFetchResponse](t, h, az, fetchReq(10, "g", fetchTopic("", tid(1), 0), fetchTopic("", tid(2), 0), fetchTopic("", tid(9), 0)))
	wantF := map[string]fetched{"id1/0": {50, 0}, "id2/0": {-1, kerr.TopicAuthorizationFailed.Code}, "id9/0": {-1, kerr.UnknownTopicID.Code}}
	if got := fetchResults(t, fr); !sameMap(got, wantF) {
		t.Fatalf("fetch v10: %v, want %v", got, wantF)
	}
	fr = serve[*kmsg.OffsetFetchResponse](t, h, az, fetchReq(8, "g", fetchTopic("t", [16]byte{}, 0), fetchTopic("secret", [16]byte{}, 0)))
	wantF = map[string]fetched{"t/0": {50, 0}, "secret/0": {-1, kerr.TopicAuthorizationFailed.Code}}
	if got := fetchResults(t, fr); !sameMap(got, wantF) {
		t.Fatalf("fetch v8 by name: %v, want %v", got, wantF)
	}
	fr = serve[*kmsg.OffsetFetchResponse](t, h, az, fetchReq(10, "g"))
	wantF = map[string]fetched{"id1/0": {50, 0}}
	if got := fetchResults(t, fr); !sameMap(got, wantF) {
		t.Fatalf("fetch v10 of all: %v, want %v", got, wantF)
	}

	// Id 1 becomes "secret"'s after the rule authorized it as "t": the
	// commit still goes to "t".
	resp = serveWith[*kmsg.OffsetCommitResponse](t, h, az, commitReq(10, "g", -1, "", commitTopic("", tid(1), 70, 0)), func() {
		h.setTopic("t", 3, 2)
		h.setTopic("secret", 1, 2)
	})
	if got := commitCodes(resp); !sameMap(got, map[string]int16{"id1/0": 0}) {
		t.Fatalf("commit across a rename: %v", got)
	}
	if c, _ := h.c.Offset("g", TopicPartition{"secret", 0}); c.Offset != 9 {
		t.Fatalf("the commit authorized for t went to secret: %d", c.Offset)
	}
	if c, _ := h.c.Offset("g", TopicPartition{"t", 0}); c.Offset != 70 {
		t.Fatalf("t's offset %d, want 70", c.Offset)
	}
}

// ListGroups v5 types every group "classic" and filters by type; v6
// DescribeGroups and v3 DeleteGroups answer an unknown group
// GROUP_ID_NOT_FOUND with Kafka's message.
func TestGroupAPIsKIP848And1043(t *testing.T) {
	h := newAPIHost(t)
	h.setTopic("t", 1, 1)
	joinAndSync(t, h.c, "live")
	if err := commit(t, h.c, "idle", map[TopicPartition]*Committed{{"t", 0}: {Offset: 1}}); err != nil {
		t.Fatal(err)
	}
	list := func(version int16, types ...string) map[string]string {
		req := kmsg.NewPtrListGroupsRequest()
		req.Version, req.TypesFilter = version, types
		out := map[string]string{}
		for _, g := range serve[*kmsg.ListGroupsResponse](t, h, nil, req).Groups {
			out[g.Group] = g.GroupType
		}
		return out
	}
	both := map[string]string{"live": "classic", "idle": "classic"}
	for _, tc := range []struct {
		types []string
		want  map[string]string
	}{
		{nil, both},
		{[]string{"classic"}, both},
		{[]string{"CLASSIC", "share"}, both},
		{[]string{"consumer"}, map[string]string{}},
		{[]string{"share", "unknown"}, map[string]string{}},
		{[]string{" classic"}, map[string]string{}}, // Kafka does not trim types
	} {
		if got := list(5, tc.types...); !sameMap(got, tc.want) {
			t.Errorf("ListGroups v5 types %q: %v, want %v", tc.types, got, tc.want)
		}
	}
	if got := list(4); !sameMap(got, map[string]string{"live": "", "idle": ""}) {
		t.Errorf("ListGroups v4: %v", got)
	}

	describe := func(version int16, id string) kmsg.DescribeGroupsResponseGroup {
		req := kmsg.NewPtrDescribeGroupsRequest()
		req.Version, req.Groups, req.IncludeAuthorizedOperations = version, []string{id}, true
		resp := serve[*kmsg.DescribeGroupsResponse](t, h, nil, req)
		if len(resp.Groups) != 1 {
			t.Fatalf("DescribeGroups v%d: %+v", version, resp.Groups)
		}
		return resp.Groups[0]
	}
	// Kafka tells a group's operations only when it describes the group
	// without an error.
	if d := describe(6, "nobody"); d.ErrorCode != kerr.GroupIDNotFound.Code || d.State != "Dead" ||
		d.ErrorMessage == nil || *d.ErrorMessage != "Group nobody not found." || d.AuthorizedOperations != -2147483648 {
		t.Errorf("DescribeGroups v6 of an unknown group: %+v", d)
	}
	if d := describe(5, "nobody"); d.ErrorCode != 0 || d.State != "Dead" || d.AuthorizedOperations != testOps {
		t.Errorf("DescribeGroups v5 of an unknown group: %+v", d)
	}
	for id, state := range map[string]string{"live": "Stable", "idle": "Empty"} {
		if d := describe(6, id); d.ErrorCode != 0 || d.ErrorMessage != nil || d.State != state || d.AuthorizedOperations != testOps {
			t.Errorf("DescribeGroups v6 of %s: %+v", id, d)
		}
	}

	del := func(version int16, id string) kmsg.DeleteGroupsResponseGroup {
		req := kmsg.NewPtrDeleteGroupsRequest()
		req.Version, req.Groups = version, []string{id}
		resp := serve[*kmsg.DeleteGroupsResponse](t, h, nil, req)
		if len(resp.Groups) != 1 {
			t.Fatalf("DeleteGroups v%d: %+v", version, resp.Groups)
		}
		return resp.Groups[0]
	}
	if d := del(3, "nobody"); d.ErrorCode != kerr.GroupIDNotFound.Code || d.ErrorMessage == nil || *d.ErrorMessage != "Group nobody not found." {
		t.Errorf("DeleteGroups v3 of an unknown group: %+v", d)
	}
	if d := del(3, "live"); d.ErrorCode != kerr.NonEmptyGroup.Code || d.ErrorMessage == nil || *d.ErrorMessage == "" {
		t.Errorf("DeleteGroups v3 of a group with members: %+v", d)
	}
	if d := del(3, "idle"); d.ErrorCode != 0 || d.ErrorMessage != nil {
		t.Errorf("DeleteGroups v3 of an empty group: %+v", d)
	}
	if d := del(2, "idle"); d.ErrorCode != kerr.GroupIDNotFound.Code {
		t.Errorf("DeleteGroups v2 of a deleted group: %+v", d)
	}
}
