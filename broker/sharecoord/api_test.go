package sharecoord

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordlog/fjord/broker/acl"
	"github.com/fjordlog/fjord/broker/api"
	"github.com/fjordlog/fjord/broker/sharestate"
	"github.com/fjordlog/fjord/group/sharepart"
)

// apiHost is the node as the share-group state APIs see it.
type apiHost struct {
	h    *testHost
	c    *Coordinator // nil: the node runs none
	reqs int          // requests served
}

func (a *apiHost) Shares() *Coordinator { return a.c }
func (a *apiHost) Code(err error) int16 { return testCode(err) }
func (a *apiHost) Go(fn func()) bool    { return a.h.Go(fn) }

// testCode is the mapping the package documentation asks of the broker.
func testCode(err error) int16 {
	switch {
	case err == nil:
		return 0
	case errors.Is(err, ErrNotCoordinator):
		return kerr.NotCoordinator.Code
	case errors.Is(err, ErrLoading):
		return kerr.CoordinatorLoadInProgress.Code
	case errors.Is(err, ErrUninitialized), errors.Is(err, ErrInvalidRequest):
		return kerr.InvalidRequest.Code
	case errors.Is(err, ErrFencedStateEpoch):
		return kerr.FencedStateEpoch.Code
	case errors.Is(err, ErrUnknownTopicOrPartition):
		return kerr.UnknownTopicOrPartition.Code
	case errors.Is(err, sharestate.ErrFencedLeaderEpoch):
		return kerr.FencedLeaderEpoch.Code
	case errors.Is(err, sharestate.ErrNotAvailable):
		return kerr.CoordinatorNotAvailable.Code
	}
	return kerr.UnknownServerError.Code
}

// serve sends req through the wire format to a's entry for its key, and
// its response back through the wire format.
func (a *apiHost) serve(t *testing.T, req kmsg.Request) kmsg.Response {
	t.Helper()
	var e *api.Entry
	for _, en := range Entries(a) {
		if en.Key == req.Key() {
			e = &en
		}
	}
	if e == nil {
		t.Fatalf("no entry for key %d", req.Key())
	}
	v := req.GetVersion()
	in := kmsg.RequestForKey(req.Key())
	in.SetVersion(v)
	if err := in.ReadFrom(req.AppendTo(nil)); err != nil {
		t.Fatalf("decoding %T: %v", req, err)
	}
	got := make(chan kmsg.Response, 1)
	e.Handle(&api.Conn{Ctx: ctx}, in, func(r kmsg.Response) { got <- r })
	a.reqs++
	var resp kmsg.Response
	select {
	case resp = <-got:
	case <-time.After(10 * time.Second):
		t.Fatalf("no response to %T", req)
	}
	out := kmsg.ResponseForKey(req.Key())
	out.SetVersion(v)
	if err := out.ReadFrom(resp.AppendTo(nil)); err != nil {
		t.Fatalf("decoding %T: %v", resp, err)
	}
	return out
}

func newAPIHost(t *testing.T) *apiHost {
	p, _ := leader(t, 1, t.TempDir())
	h := newTestHost(1)
	return &apiHost{h: h, c: newCoord(t, h, testConfig(), p)}
}

func TestEntries(t *testing.T) {
	es := Entries(&apiHost{})
	if _, err := api.NewRegistry(es...); err != nil {
		t.Fatal(err)
	}
	want := map[int16][2]int16{83: {0, 0}, 84: {0, 0}, 85: {0, 1}, 86: {0, 0}, 87: {0, 1}}
	for _, e := range es {
		if v, ok := want[e.Key]; !ok || e.Client.Min != v[0] || e.Client.Max != v[1] || e.Controller.Served {
			t.Errorf("key %d serves %+v (controller %v), want %v on the client listeners only", e.Key, e.Client, e.Controller.Served, v)
		}
		if e.Rule.Need != "CLUSTER_ACTION on CLUSTER" || e.Mutates {
			t.Errorf("key %d: rule %q, mutates %v", e.Key, e.Rule.Need, e.Mutates)
		}
		delete(want, e.Key)
	}
	if len(want) != 0 {
		t.Errorf("keys not registered: %v", want)
	}
}

// TestAuthz: without CLUSTER_ACTION on the cluster every partition is
// CLUSTER_AUTHORIZATION_FAILED and nothing runs.
func TestAuthz(t *testing.T) {
	a := &apiHost{}
	az := acl.New(acl.Config{}, []acl.Binding{{ResourceType: acl.ResourceCluster, Name: acl.ClusterName,
		Pattern: acl.PatternLiteral, Principal: "User:broker", Host: "*", Operation: acl.OpClusterAction, Permission: acl.PermAllow}})
	k := key("g", 1, 0)
	for _, e := range Entries(a) {
		req := requestFor(e.Key, k)
		for _, who := range []string{"User:client", "User:broker"} {
			deny, _ := api.Authorize(&api.Authz{Conn: &api.Conn{Principal: who, ClientHost: "10.0.0.1"}, Az: az, Key: e.Key}, &e, req)
			if (deny != nil) != (who == "User:client") {
				t.Fatalf("key %d, %s: denied %v", e.Key, who, deny != nil)
			}
			if deny == nil {
				continue
			}
			if codes := partitionCodes(deny); len(codes) != 1 || codes[k] != kerr.ClusterAuthorizationFailed.Code {
				t.Fatalf("key %d denied: %v", e.Key, codes)
			}
		}
		if codes := partitionCodes(e.ErrorResponse(req, kerr.NotController.Code)); codes[k] != kerr.NotController.Code {
			t.Fatalf("key %d error response: %v", e.Key, codes)
		}
	}
}

// requestFor is a request of key for share-partition k.
func requestFor(apiKey int16, k sharepart.Key) kmsg.Request {
	switch apiKey {
	case 83:
		return initReq(k, 0, 0)
	case 84:
		return readReq(k, 0)
	case 85:
		return writeReq(1, k, WriteState{LeaderEpoch: -1, StateEpoch: 0, StartOffset: -1})
	case 86:
		return deleteReq(k)
	case 87:
		return summaryReq(1, k)
	}
	panic(apiKey)
}

func initReq(k sharepart.Key, stateEpoch int32, start int64) *kmsg.InitializeShareGroupStateRequest {
	req := kmsg.NewPtrInitializeShareGroupStateRequest()
	req.GroupID = k.Group
	t := kmsg.NewInitializeShareGroupStateRequestTopic()
	t.TopicID = k.TopicID
	p := kmsg.NewInitializeShareGroupStateRequestTopicPartition()
	p.Partition, p.StateEpoch, p.StartOffset = k.Partition, stateEpoch, start
	t.Partitions = append(t.Partitions, p)
	req.Topics = append(req.Topics, t)
	return req
}

func readReq(k sharepart.Key, leaderEpoch int32) *kmsg.ReadShareGroupStateRequest {
	req := kmsg.NewPtrReadShareGroupStateRequest()
	req.GroupID = k.Group
	t := kmsg.NewReadShareGroupStateRequestTopic()
	t.TopicID = k.TopicID
	p := kmsg.NewReadShareGroupStateRequestTopicPartition()
	p.Partition, p.LeaderEpoch = k.Partition, leaderEpoch
	t.Partitions = append(t.Partitions, p)
	req.Topics = append(req.Topics, t)
	return req
}

func writeReq(version int16, k sharepart.Key, w WriteState) *kmsg.WriteShareGroupStateRequest {
	req := kmsg.NewPtrWriteShareGroupStateRequest()
	req.Version, req.GroupID = version, k.Group
	t := kmsg.NewWriteShareGroupStateRequestTopic()
	t.TopicID = k.TopicID
	p := kmsg.NewWriteShareGroupStateRequestTopicPartition()
	p.Partition, p.LeaderEpoch, p.StateEpoch, p.StartOffset = k.Partition, w.LeaderEpoch, w.StateEpoch, w.StartOffset
	p.DeliveryCompleteCount, p.StateBatches = w.DeliveryCompleteCount, toWriteBatches(w.Batches)
	t.Partitions = append(t.Partitions, p)
	req.Topics = append(req.Topics, t)
	return req
}

func deleteReq(k sharepart.Key) *kmsg.DeleteShareGroupStateRequest {
	req := kmsg.NewPtrDeleteShareGroupStateRequest()
	req.GroupID = k.Group
	t := kmsg.NewDeleteShareGroupStateRequestTopic()
	t.TopicID = k.TopicID
	p := kmsg.NewDeleteShareGroupStateRequestTopicPartition()
	p.Partition = k.Partition
	t.Partitions = append(t.Partitions, p)
	req.Topics = append(req.Topics, t)
	return req
}

func summaryReq(version int16, k sharepart.Key) *kmsg.ReadShareGroupStateSummaryRequest {
	req := kmsg.NewPtrReadShareGroupStateSummaryRequest()
	req.Version, req.GroupID = version, k.Group
	t := kmsg.NewReadShareGroupStateSummaryRequestTopic()
	t.TopicID = k.TopicID
	p := kmsg.NewReadShareGroupStateSummaryRequestTopicPartition()
	p.Partition = k.Partition
	t.Partitions = append(t.Partitions, p)
	req.Topics = append(req.Topics, t)
	return req
}

// partitionCodes are a response's error codes by share-partition (the
// group left empty), and a message of each.
func partitionCodes(resp kmsg.Response) map[sharepart.Key]int16 {
	out := map[sharepart.Key]int16{}
	add := func(id [16]byte, p int32, code int16) {
		out[sharepart.Key{Group: "g", TopicID: id, Partition: p}] = code
	}
	switch r := resp.(type) {
	case *kmsg.InitializeShareGroupStateResponse:
		for _, t := range r.Topics {
			for _, p := range t.Partitions {
				add(t.TopicID, p.Partition, p.ErrorCode)
			}
		}
	case *kmsg.ReadShareGroupStateResponse:
		for _, t := range r.Topics {
			for _, p := range t.Partitions {
				add(t.TopicID, p.Partition, p.ErrorCode)
			}
		}
	case *kmsg.WriteShareGroupStateResponse:
		for _, t := range r.Topics {
			for _, p := range t.Partitions {
				add(t.TopicID, p.Partition, p.ErrorCode)
			}
		}
	case *kmsg.DeleteShareGroupStateResponse:
		for _, t := range r.Topics {
			for _, p := range t.Partitions {
				add(t.TopicID, p.Partition, p.ErrorCode)
			}
		}
	case *kmsg.ReadShareGroupStateSummaryResponse:
		for _, t := range r.Topics {
			for _, p := range t.Partitions {
				add(t.TopicID, p.Partition, p.ErrorCode)
			}
		}
	}
	return out
}

// TestAPIFlow: a share-partition's life through the five RPCs.
func TestAPIFlow(t *testing.T) {
	a := newAPIHost(t)
	k := key("g", 1, 0)

	// No state: read and write are INVALID_REQUEST saying so; the summary
	// answers the defaults; a delete succeeds.
	rr := a.serve(t, readReq(k, 1)).(*kmsg.ReadShareGroupStateResponse)
	if p := rr.Topics[0].Partitions[0]; p.ErrorCode != kerr.InvalidRequest.Code || p.ErrorMessage == nil || !strings.Contains(*p.ErrorMessage, "not initialized") {
		t.Fatalf("read before initialize: %+v", p)
	}
	if codes := partitionCodes(a.serve(t, writeReq(1, k, WriteState{LeaderEpoch: 1, StateEpoch: 0, StartOffset: 0}))); codes[k] != kerr.InvalidRequest.Code {
		t.Fatalf("write before initialize: %v", codes)
	}
	sr := a.serve(t, summaryReq(1, k)).(*kmsg.ReadShareGroupStateSummaryResponse)
	if p := sr.Topics[0].Partitions[0]; p.ErrorCode != 0 || p.StartOffset != -1 || p.LeaderEpoch != -1 || p.StateEpoch != 0 || p.DeliveryCompleteCount != -1 {
		t.Fatalf("summary before initialize: %+v", p)
	}
	if codes := partitionCodes(a.serve(t, deleteReq(k))); codes[k] != 0 {
		t.Fatalf("delete of nothing: %v", codes)
	}

	if codes := partitionCodes(a.serve(t, initReq(k, 1, 40))); codes[k] != 0 {
		t.Fatalf("initialize: %v", codes)
	}
	rr = a.serve(t, readReq(k, 3)).(*kmsg.ReadShareGroupStateResponse)
	if p := rr.Topics[0].Partitions[0]; p.ErrorCode != 0 || p.StateEpoch != 1 || p.StartOffset != 40 || len(p.StateBatches) != 0 {
		t.Fatalf("read after initialize: %+v", p)
	}
	batches := []sharepart.StateBatch{{FirstOffset: 40, LastOffset: 44, DeliveryState: sharepart.Acknowledged, DeliveryCount: 1},
		{FirstOffset: 45, LastOffset: 49, DeliveryState: sharepart.Available, DeliveryCount: 2}}
	if codes := partitionCodes(a.serve(t, writeReq(1, k, WriteState{LeaderEpoch: 3, StateEpoch: 1, StartOffset: 40, DeliveryCompleteCount: 5, Batches: batches}))); codes[k] != 0 {
		t.Fatalf("write: %v", codes)
	}
	// v0 has no delivery-complete count: -1 is stored.
	if codes := partitionCodes(a.serve(t, writeReq(0, k, WriteState{LeaderEpoch: 3, StateEpoch: 1, StartOffset: 40, DeliveryCompleteCount: 9}))); codes[k] != 0 {
		t.Fatalf("write v0: %v", codes)
	}
	sr = a.serve(t, summaryReq(1, k)).(*kmsg.ReadShareGroupStateSummaryResponse)
	if p := sr.Topics[0].Partitions[0]; p.ErrorCode != 0 || p.StartOffset != 40 || p.LeaderEpoch != 3 || p.StateEpoch != 1 || p.DeliveryCompleteCount != -1 {
		t.Fatalf("summary: %+v", p)
	}
	rr = a.serve(t, readReq(k, 3)).(*kmsg.ReadShareGroupStateResponse)
	if p := rr.Topics[0].Partitions[0]; p.ErrorCode != 0 || len(p.StateBatches) != 2 || !slices.Equal(fromReadBatches(p.StateBatches), batches) {
		t.Fatalf("read after the write: %+v", p)
	}
	// Fences.
	if codes := partitionCodes(a.serve(t, writeReq(1, k, WriteState{LeaderEpoch: 2, StateEpoch: 1, StartOffset: 41}))); codes[k] != kerr.FencedLeaderEpoch.Code {
		t.Fatalf("write by an older leader: %v", codes)
	}
	if codes := partitionCodes(a.serve(t, writeReq(1, k, WriteState{LeaderEpoch: 3, StateEpoch: 0, StartOffset: 41}))); codes[k] != kerr.FencedStateEpoch.Code {
		t.Fatalf("write at an older state epoch: %v", codes)
	}
	if codes := partitionCodes(a.serve(t, readReq(k, 2))); codes[k] != kerr.FencedLeaderEpoch.Code {
		t.Fatalf("read by an older leader: %v", codes)
	}
	if codes := partitionCodes(a.serve(t, initReq(k, 0, 0))); codes[k] != kerr.FencedStateEpoch.Code {
		t.Fatalf("initialize at an older state epoch: %v", codes)
	}
	// Unknown topic or partition, invalid requests.
	for _, u := range []sharepart.Key{key("g", 1, 7), key("g", 9, 0)} {
		if codes := partitionCodes(a.serve(t, initReq(u, 0, 0))); codes[u] != kerr.UnknownTopicOrPartition.Code {
			t.Fatalf("initialize %s: %v", u, codes)
		}
		if codes := partitionCodes(a.serve(t, deleteReq(u))); codes[u] != kerr.UnknownTopicOrPartition.Code {
			t.Fatalf("delete %s: %v", u, codes)
		}
	}
	neg := key("g", 1, -1)
	for _, req := range []kmsg.Request{initReq(neg, 0, 0), readReq(neg, 0), deleteReq(neg), summaryReq(1, neg),
		writeReq(1, k, WriteState{LeaderEpoch: 3, StateEpoch: 1, StartOffset: 40, Batches: []sharepart.StateBatch{{FirstOffset: 50, LastOffset: 49}}})} {
		codes := partitionCodes(a.serve(t, req))
		for kk, c := range codes {
			if c != kerr.InvalidRequest.Code {
				t.Fatalf("%T for %s: %d, want INVALID_REQUEST", req, kk, c)
			}
		}
	}

	if codes := partitionCodes(a.serve(t, deleteReq(k))); codes[k] != 0 {
		t.Fatalf("delete: %v", codes)
	}
	if codes := partitionCodes(a.serve(t, readReq(k, 3))); codes[k] != kerr.InvalidRequest.Code {
		t.Fatalf("read after delete: %v", codes)
	}
}

// TestAPIShape: several partitions keep the request's order; an empty
// group id, no topics or a topic without partitions get an empty
// response; a node without a coordinator answers COORDINATOR_NOT_AVAILABLE,
// one not leading the key NOT_COORDINATOR.
func TestAPIShape(t *testing.T) {
	a := newAPIHost(t)
	req := initReq(key("g", 1, 3), 0, 0)
	for _, p := range []int32{1, 0, 2} {
		rp := kmsg.NewInitializeShareGroupStateRequestTopicPartition()
		rp.Partition = p
		req.Topics[0].Partitions = append(req.Topics[0].Partitions, rp)
	}
	t2 := kmsg.NewInitializeShareGroupStateRequestTopic()
	t2.TopicID = testTopic(2)
	t2.Partitions = append(t2.Partitions, kmsg.InitializeShareGroupStateRequestTopicPartition{Partition: 0})
	req.Topics = append(req.Topics, t2)
	resp := a.serve(t, req).(*kmsg.InitializeShareGroupStateResponse)
	var got []int32
	for _, rt := range resp.Topics {
		for _, p := range rt.Partitions {
			if p.ErrorCode != 0 {
				t.Fatalf("initialize %x/%d: %d", rt.TopicID, p.Partition, p.ErrorCode)
			}
			got = append(got, int32(rt.TopicID[15])*10+p.Partition)
		}
	}
	if want := []int32{13, 11, 10, 12, 20}; !slices.Equal(got, want) {
		t.Fatalf("response order %v, want %v", got, want)
	}

	empty := readReq(key("", 1, 0), 0)
	if r := a.serve(t, empty).(*kmsg.ReadShareGroupStateResponse); len(r.Topics) != 0 {
		t.Fatalf("empty group: %+v", r)
	}
	noParts := writeReq(1, key("g", 1, 0), WriteState{})
	noParts.Topics[0].Partitions = nil
	if r := a.serve(t, noParts).(*kmsg.WriteShareGroupStateResponse); len(r.Topics) != 0 {
		t.Fatalf("no partitions: %+v", r)
	}

	none := &apiHost{h: a.h}
	if codes := partitionCodes(none.serve(t, readReq(key("g", 1, 0), 0))); codes[key("g", 1, 0)] != kerr.CoordinatorNotAvailable.Code {
		t.Fatalf("no coordinator: %v", codes)
	}
	c, err := New(ctx, testConfig(), a.h)
	must(t, err)
	other := &apiHost{h: a.h, c: c}
	if codes := partitionCodes(other.serve(t, summaryReq(0, key("g", 1, 0)))); codes[key("g", 1, 0)] != kerr.NotCoordinator.Code {
		t.Fatalf("not the coordinator: %v", codes)
	}
}
