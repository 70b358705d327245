package discovery

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordlog/fjord/broker/acl"
	"github.com/fjordlog/fjord/broker/api"
	"github.com/fjordlog/fjord/broker/coordinator"
	"github.com/fjordlog/fjord/broker/sharecoord"
	"github.com/fjordlog/fjord/controller"
	"github.com/fjordlog/fjord/group/sharepart"
)

// coordHost is the Host FindCoordinator's finder runs on: an image, and a
// peer ask answered by ask. The embedded Host is nil: a call the finder
// should not make panics the test.
type coordHost struct {
	Host
	imgMu sync.Mutex
	img   *controller.Image
	me    int32
	ask   func(peer int32, req *kmsg.FindCoordinatorRequest) (kmsg.Response, error)
	asks  atomic.Int32
	wg    sync.WaitGroup
	log   zerolog.Logger
	goes  atomic.Int32
	codes map[error]int16
}

func (h *coordHost) Go(fn func()) bool {
	h.goes.Add(1)
	h.wg.Add(1)
	go func() { defer h.wg.Done(); fn() }()
	return true
}
func (h *coordHost) Image() *controller.Image {
	h.imgMu.Lock()
	defer h.imgMu.Unlock()
	return h.img
}
func (h *coordHost) setImage(img *controller.Image) {
	h.imgMu.Lock()
	defer h.imgMu.Unlock()
	h.img = img
}
func (h *coordHost) Log() *zerolog.Logger { return &h.log }
func (h *coordHost) Code(err error) int16 { return h.codes[err] }
func (h *coordHost) AskPeer(_ context.Context, peer int32, req kmsg.Request, _ time.Duration) (kmsg.Response, error) {
	h.asks.Add(1)
	return h.ask(peer, req.(*kmsg.FindCoordinatorRequest))
}

// coordImage has brokers 1-3 on PLAINTEXT (port 9000+id) and the offsets
// topic with leaders[i] leading partition i.
func coordImage(t *testing.T, leaders ...int32) *controller.Image {
	t.Helper()
	return topicImage(t, coordinator.OffsetsTopic, leaders...)
}

// topicImage has brokers 1-3 on PLAINTEXT (port 9000+id) and the internal
// topic named with leaders[i] leading partition i.
func topicImage(t *testing.T, topic string, leaders ...int32) *controller.Image {
	t.Helper()
	img := &controller.Image{}
	idx := uint64(0)
	apply := func(b controller.Body) {
		idx++
		next, err := img.Apply(idx, controller.NewRecord(b))
		if err != nil {
			t.Fatalf("apply %T: %v", b, err)
		}
		img = next
	}
	for _, id := range []int32{1, 2, 3} {
		apply(controller.RegisterBroker{ID: id, Endpoints: []controller.Endpoint{{Name: "PLAINTEXT", Host: "127.0.0.1", Port: 9000 + id}}})
		bs, _ := img.Broker(id)
		apply(controller.UnfenceBroker{ID: id, Epoch: bs.Epoch})
	}
	if len(leaders) > 0 {
		id := [16]byte{9}
		apply(controller.CreateTopic{Name: topic, ID: id})
		for p, l := range leaders {
			apply(controller.CreatePartition{TopicID: id, Partition: int32(p), Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2, 3}, Leader: l})
		}
	}
	return img
}

// keyOn is a group id placed on partition p of n.
func keyOn(t *testing.T, p, n int32) string {
	t.Helper()
	for i := range 1000 {
		k := "g" + string(rune('a'+i%26)) + strings.Repeat("x", i/26)
		if coordinator.PartitionOf(k, n) == p {
			return k
		}
	}
	t.Fatalf("no key for partition %d of %d", p, n)
	return ""
}

var (
	errLoading = errors.New("loading")
	errNotCo   = errors.New("not coordinator")
)

// newTestFinder is a group finder on h for a client (or, fromPeer, a
// peer), with status answering the local coordinator's state.
func newTestFinder(h *coordHost, fromPeer bool, status func(string) error) *finder {
	h.codes = map[error]int16{errLoading: kerr.CoordinatorLoadInProgress.Code, errNotCo: kerr.NotCoordinator.Code}
	n := int32(0)
	if t := h.img.Topic(coordinator.OffsetsTopic); t != nil {
		n = int32(len(t.Partitions))
	}
	return &finder{h: h, cc: &api.Conn{Ctx: context.Background()}, typ: keyGroup, fromPeer: fromPeer, me: h.me,
		listener: "PLAINTEXT", topic: coordinator.OffsetsTopic, ensure: func() {},
		status:       status,
		partitionFor: func(k string) int32 { return coordinator.PartitionOf(k, n) },
		loadWait:     200 * time.Millisecond, poll: time.Millisecond, askTimeout: time.Second}
}

// find runs f on a v4 request for keys and returns the answers in order.
func find(t *testing.T, h *coordHost, f *finder, version int16, keys ...string) []kmsg.FindCoordinatorResponseCoordinator {
	t.Helper()
	req := kmsg.NewPtrFindCoordinatorRequest()
	req.Version, req.CoordinatorType, req.CoordinatorKeys = version, f.typ, keys
	got := make(chan kmsg.Response, 1)
	f.serve(req, func(r kmsg.Response) { got <- r })
	select {
	case r := <-got:
		h.wg.Wait()
		return r.(*kmsg.FindCoordinatorResponse).Coordinators
	case <-time.After(5 * time.Second):
		t.Fatal("no response")
		return nil
	}
}

func TestFindCoordinatorLocal(t *testing.T) {
	h := &coordHost{img: coordImage(t, 1, 2), me: 1}
	k := keyOn(t, 0, 2)

	// Loaded: answered inline, without a goroutine.
	cs := find(t, h, newTestFinder(h, false, func(string) error { return nil }), 4, k)
	if c := cs[0]; c.ErrorCode != 0 || c.NodeID != 1 || c.Port != 9001 || h.goes.Load() != 0 {
		t.Fatalf("loaded local coordinator: %+v (goroutines %d)", c, h.goes.Load())
	}

	// Loading, then loaded within the wait: this node.
	var polls atomic.Int32
	cs = find(t, h, newTestFinder(h, false, func(string) error {
		if polls.Add(1) < 5 {
			return errLoading
		}
		return nil
	}), 4, k)
	if c := cs[0]; c.ErrorCode != 0 || c.NodeID != 1 {
		t.Fatalf("load finishing within the wait: %+v", c)
	}

	// Still loading after the wait: a client gets COORDINATOR_NOT_AVAILABLE
	// (sarama retries nothing else), a peer the precise code.
	loading := func(string) error { return errLoading }
	start := time.Now()
	if c := find(t, h, newTestFinder(h, false, loading), 4, k)[0]; c.ErrorCode != kerr.CoordinatorNotAvailable.Code || c.NodeID != -1 || c.ErrorMessage == nil {
		t.Fatalf("client, still loading: %+v", c)
	}
	if d := time.Since(start); d < 200*time.Millisecond || d > 3*time.Second {
		t.Errorf("the wait took %v, want about the bound (200ms)", d)
	}
	if c := find(t, h, newTestFinder(h, true, loading), 4, k)[0]; c.ErrorCode != kerr.CoordinatorLoadInProgress.Code {
		t.Fatalf("peer, still loading: %+v", c)
	}
	if h.asks.Load() != 0 {
		t.Fatalf("a local key asked a peer")
	}
}

func TestFindCoordinatorRelaysOnlyALoadedPeer(t *testing.T) {
	h := &coordHost{img: coordImage(t, 1, 2), me: 1}
	local, remote := keyOn(t, 0, 2), keyOn(t, 1, 2)
	notUsed := func(string) error { return nil }
	answer := func(node int32, code int16) func(int32, *kmsg.FindCoordinatorRequest) (kmsg.Response, error) {
		return func(peer int32, req *kmsg.FindCoordinatorRequest) (kmsg.Response, error) {
			if peer != 2 || req.CoordinatorType != keyGroup || len(req.CoordinatorKeys) != 1 || req.CoordinatorKeys[0] != remote {
				t.Errorf("asked broker %d for %+v", peer, req)
			}
			resp := req.ResponseKind().(*kmsg.FindCoordinatorResponse)
			resp.Version = 4
			c := kmsg.NewFindCoordinatorResponseCoordinator()
			c.Key, c.NodeID, c.ErrorCode, c.Host, c.Port = remote, node, code, "10.0.0.2", 1234
			resp.Coordinators = append(resp.Coordinators, c)
			return resp, nil
		}
	}
	for _, tc := range []struct {
		name     string
		ask      func(int32, *kmsg.FindCoordinatorRequest) (kmsg.Response, error)
		wantCode int16
		wantNode int32
	}{
		{"loaded", answer(2, 0), 0, 2},
		{"loading", answer(-1, kerr.CoordinatorLoadInProgress.Code), kerr.CoordinatorNotAvailable.Code, -1},
		{"not yet coordinator", answer(-1, kerr.NotCoordinator.Code), kerr.CoordinatorNotAvailable.Code, -1},
		{"names another", answer(3, 0), kerr.CoordinatorNotAvailable.Code, -1},
		{"no answer", func(int32, *kmsg.FindCoordinatorRequest) (kmsg.Response, error) {
			return nil, errors.New("dial: connection refused")
		}, kerr.CoordinatorNotAvailable.Code, -1},
		// A peer that cannot vouch (its ACLs deny the brokers' principal):
		// the image's answer, as before the check.
		{"denied", answer(-1, kerr.GroupAuthorizationFailed.Code), 0, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h.ask = tc.ask
			cs := find(t, h, newTestFinder(h, false, notUsed), 4, local, remote)
			if len(cs) != 2 || cs[0].Key != local || cs[1].Key != remote {
				t.Fatalf("answers %+v", cs)
			}
			if c := cs[0]; c.ErrorCode != 0 || c.NodeID != 1 {
				t.Errorf("local key: %+v", c)
			}
			c := cs[1]
			if c.ErrorCode != tc.wantCode || c.NodeID != tc.wantNode {
				t.Fatalf("remote key: %+v, want code %d node %d", c, tc.wantCode, tc.wantNode)
			}
			// The address is this broker's record of the coordinator on the
			// client's listener, not what the peer said on its own.
			if c.NodeID == 2 && (c.Host != "127.0.0.1" || c.Port != 9002) {
				t.Errorf("relayed address %s:%d, want 127.0.0.1:9002", c.Host, c.Port)
			}
		})
	}
}

// A peer's FindCoordinator is answered for the asked node only: never
// relayed again (no loops), and it creates no topic.
func TestFindCoordinatorFromPeer(t *testing.T) {
	h := &coordHost{img: coordImage(t, 1, 2), me: 1}
	h.ask = func(int32, *kmsg.FindCoordinatorRequest) (kmsg.Response, error) {
		t.Error("a peer's request was relayed")
		return nil, errors.New("no")
	}
	c := find(t, h, newTestFinder(h, true, func(string) error { return nil }), 4, keyOn(t, 1, 2))[0]
	if c.ErrorCode != kerr.NotCoordinator.Code || h.goes.Load() != 0 {
		t.Fatalf("peer asking about another leader's key: %+v", c)
	}

	// No offsets topic here yet: a peer's ask waits for this node to catch
	// up, and never asks for the topic.
	h = &coordHost{img: coordImage(t), me: 1}
	f := newTestFinder(h, true, func(string) error { return errNotCo })
	f.ensure = func() { t.Error("a peer's request created the offsets topic") }
	if c := find(t, h, f, 4, "g")[0]; c.ErrorCode != kerr.CoordinatorNotAvailable.Code {
		t.Fatalf("peer, no topic: %+v", c)
	}
}

func TestFindCoordinatorEnsuresTopicOnce(t *testing.T) {
	h := &coordHost{img: coordImage(t), me: 1}
	f := newTestFinder(h, false, nil)
	var ensured atomic.Int32
	f.ensure = func() { ensured.Add(1) }
	cs := find(t, h, f, 4, "a", "b", "c")
	for _, c := range cs {
		if c.ErrorCode != kerr.CoordinatorNotAvailable.Code {
			t.Errorf("no offsets topic: %+v", c)
		}
	}
	if ensured.Load() != 1 {
		t.Errorf("asked for the offsets topic %d times, want once", ensured.Load())
	}
}

// The first FindCoordinator of a fresh cluster asks for the offsets topic
// and waits for it, then answers as if it had been there: the client's
// first lookup names its coordinator instead of sending it round a retry.
func TestFindCoordinatorWaitsForItsTopic(t *testing.T) {
	h := &coordHost{img: coordImage(t), me: 1}
	created := coordImage(t, 1, 2)
	k := keyOn(t, 0, 2)
	f := newTestFinder(h, false, func(string) error { return nil })
	f.partitionFor = func(k string) int32 { return coordinator.PartitionOf(k, 2) }
	var ensured atomic.Int32
	f.ensure = func() {
		ensured.Add(1)
		time.Sleep(20 * time.Millisecond) // the controller's round
		h.setImage(created)
	}
	if c := find(t, h, f, 4, k)[0]; c.ErrorCode != 0 || c.NodeID != 1 || c.Port != 9001 {
		t.Fatalf("first lookup on a fresh cluster: %+v", c)
	}
	if ensured.Load() != 1 {
		t.Fatalf("asked for the offsets topic %d times, want once", ensured.Load())
	}
}

// Share keys (v6, KIP-932) on a node without a share coordinator:
// INVALID_REQUEST per key, whatever the key, and no panic on a malformed
// one.
func TestFindCoordinatorShareKeysNoCoordinator(t *testing.T) {
	h := &coordHost{img: coordImage(t, 1), me: 1}
	f := newTestFinder(h, false, nil)
	f.typ, f.topic = keyShare, ""
	keys := []string{"g:AAAAAAAAAAAAAAAAAAAAAA:0", "", ":::", "g:not-an-id:0", "a:b"}
	cs := find(t, h, f, 6, keys...)
	for i, c := range cs {
		if c.Key != keys[i] || c.ErrorCode != kerr.InvalidRequest.Code || c.NodeID != -1 || c.ErrorMessage == nil ||
			!strings.Contains(*c.ErrorMessage, "no share coordinator") {
			t.Errorf("share key %q: %+v", keys[i], c)
		}
	}
}

// newShareFinder is a share-key finder on h: the state topic of h's
// image, its coordinator's status from status.
func newShareFinder(h *coordHost, status func(string) error) *finder {
	f := newTestFinder(h, false, status)
	n := int32(0)
	if t := h.img.Topic(sharecoord.Topic); t != nil {
		n = int32(len(t.Partitions))
	}
	f.typ, f.topic = keyShare, sharecoord.Topic
	f.partitionFor = func(k string) int32 { return coordinator.PartitionOf(k, n) }
	return f
}

// shareKeyOn is a share key (its topic id padded when padded) placed on
// partition p of n.
func shareKeyOn(t *testing.T, p, n int32, padded bool) string {
	t.Helper()
	for i := range 1000 {
		k := sharepart.Key{Group: "g" + strconv.Itoa(i), TopicID: [16]byte{15: 7}, Partition: 3}
		if sharecoord.PartitionOf(k, n) == p {
			if padded {
				return k.Group + ":" + sharecoord.TopicIDString(k.TopicID) + "==:3"
			}
			return sharecoord.CoordinatorKey(k)
		}
	}
	t.Fatalf("no share key for partition %d of %d", p, n)
	return ""
}

// Share keys with a share coordinator: placed on the state topic by the
// key as Kafka spells it (the topic id unpadded), answered as group keys
// are (this node once loaded, a peer once it vouches), named as the client
// sent them; malformed keys and v5 are INVALID_REQUEST.
func TestFindCoordinatorShareKeys(t *testing.T) {
	h := &coordHost{img: topicImage(t, sharecoord.Topic, 1, 2), me: 1}
	var asked []string
	h.ask = func(peer int32, req *kmsg.FindCoordinatorRequest) (kmsg.Response, error) {
		resp := req.ResponseKind().(*kmsg.FindCoordinatorResponse)
		resp.Version = req.Version
		for _, k := range req.CoordinatorKeys {
			asked = append(asked, k)
			c := kmsg.NewFindCoordinatorResponseCoordinator()
			c.Key, c.NodeID = k, peer
			resp.Coordinators = append(resp.Coordinators, c)
		}
		return resp, nil
	}
	var statusKeys []string
	f := newShareFinder(h, func(k string) error { statusKeys = append(statusKeys, k); return nil })
	local, localPadded, remote := shareKeyOn(t, 0, 2, false), shareKeyOn(t, 0, 2, true), shareKeyOn(t, 1, 2, true)
	keys := []string{local, localPadded, remote, "g:AAAAAAAAAAAAAAAAAAAAAA:-1", "", "g:not-an-id:0", "a:b", "g:AAAAAAAAAAAAAAAAAAAAAA:x"}
	cs := find(t, h, f, 6, keys...)
	for i, c := range cs {
		if c.Key != keys[i] {
			t.Fatalf("answer %d names %q, want %q", i, c.Key, keys[i])
		}
	}
	for i, want := range []int32{1, 1, 2} {
		if c := cs[i]; c.ErrorCode != 0 || c.NodeID != want || c.Port != 9000+want {
			t.Errorf("share key %q: %+v, want broker %d", keys[i], c, want)
		}
	}
	if !slices.Contains(asked, strings.Replace(remote, "==", "", 1)) {
		t.Errorf("the peer was asked for %q, want %q as Kafka spells it", asked, remote)
	}
	statusKeys = append(statusKeys, asked...)
	for _, k := range statusKeys {
		if strings.Contains(k, "=") {
			t.Errorf("the coordinator was asked about %q, not the key as Kafka spells it", k)
		}
	}
	// A negative partition parses, as in Kafka; its key is placed.
	if c := cs[3]; c.ErrorCode == kerr.InvalidRequest.Code {
		t.Errorf("negative partition: %+v", c)
	}
	for _, c := range cs[4:] {
		if c.ErrorCode != kerr.InvalidRequest.Code || c.NodeID != -1 || c.ErrorMessage == nil || *c.ErrorMessage == "" {
			t.Errorf("malformed share key %q: %+v", c.Key, c)
		}
	}
	if c := find(t, h, f, 5, local)[0]; c.ErrorCode != kerr.InvalidRequest.Code {
		t.Errorf("share key below v6: %+v", c)
	}

	// No state topic yet: asked for, COORDINATOR_NOT_AVAILABLE meanwhile.
	h2 := &coordHost{img: coordImage(t), me: 1}
	f2 := newShareFinder(h2, nil)
	var ensured atomic.Int32
	f2.ensure = func() { ensured.Add(1) }
	for _, c := range find(t, h2, f2, 6, local, remote) {
		if c.ErrorCode != kerr.CoordinatorNotAvailable.Code {
			t.Errorf("no state topic: %+v", c)
		}
	}
	if ensured.Load() != 1 {
		t.Errorf("asked for the state topic %d times, want once", ensured.Load())
	}
}

// Share keys need CLUSTER_ACTION on CLUSTER: without it every key is
// CLUSTER_AUTHORIZATION_FAILED; below v6 the handler refuses them anyway.
func TestFindCoordinatorShareAuthz(t *testing.T) {
	az := acl.New(acl.Config{}, []acl.Binding{{ResourceType: acl.ResourceCluster, Name: acl.ClusterName,
		Pattern: acl.PatternLiteral, Principal: "User:broker", Host: "*", Operation: acl.OpClusterAction, Permission: acl.PermAllow}})
	req := func(v int16) *kmsg.FindCoordinatorRequest {
		r := kmsg.NewPtrFindCoordinatorRequest()
		r.Version, r.CoordinatorType, r.CoordinatorKeys = v, keyShare, []string{"a:AAAAAAAAAAAAAAAAAAAAAA:0", "b:AAAAAAAAAAAAAAAAAAAAAA:1"}
		return r
	}
	authz := func(who string) *api.Authz {
		return &api.Authz{Conn: &api.Conn{Principal: who, ClientHost: "10.0.0.1"}, Az: az, Key: 10}
	}
	deny, _ := checkFindCoordinator(authz("User:client"), req(6))
	resp, ok := deny.(*kmsg.FindCoordinatorResponse)
	if !ok || len(resp.Coordinators) != 2 {
		t.Fatalf("a client without CLUSTER_ACTION: %+v", deny)
	}
	for _, c := range resp.Coordinators {
		if c.ErrorCode != kerr.ClusterAuthorizationFailed.Code || c.NodeID != -1 {
			t.Errorf("denied key: %+v", c)
		}
	}
	if deny, _ := checkFindCoordinator(authz("User:broker"), req(6)); deny != nil {
		t.Fatalf("a broker: %+v", deny)
	}
	if deny, _ := checkFindCoordinator(authz("User:client"), req(5)); deny != nil {
		t.Fatalf("v5 is the handler's to refuse: %+v", deny)
	}
}

// Before v4 one key, answered at the top level with its message.
func TestFindCoordinatorV3(t *testing.T) {
	h := &coordHost{img: coordImage(t, 1, 2), me: 1}
	h.ask = func(int32, *kmsg.FindCoordinatorRequest) (kmsg.Response, error) { return nil, errors.New("cut off") }
	for _, tc := range []struct {
		key      string
		code     int16
		node     int32
		withText bool
	}{{keyOn(t, 0, 2), 0, 1, false}, {keyOn(t, 1, 2), kerr.CoordinatorNotAvailable.Code, -1, true}} {
		req := kmsg.NewPtrFindCoordinatorRequest()
		req.Version, req.CoordinatorKey = 3, tc.key
		got := make(chan kmsg.Response, 1)
		newTestFinder(h, false, func(string) error { return nil }).serve(req, func(r kmsg.Response) { got <- r })
		resp := (<-got).(*kmsg.FindCoordinatorResponse)
		h.wg.Wait()
		if resp.ErrorCode != tc.code || resp.NodeID != tc.node || (resp.ErrorMessage != nil) != tc.withText || len(resp.Coordinators) != 0 {
			t.Errorf("v3 %q: %+v", tc.key, resp)
		}
	}
}

// shareHost is a coordHost that runs a share coordinator.
type shareHost struct {
	*coordHost
	sc      *sharecoord.Coordinator
	ensured atomic.Int32
}

func (h *shareHost) Shares() *sharecoord.Coordinator { return h.sc }
func (h *shareHost) EnsureShareStateTopic()          { h.ensured.Add(1) }
func (h *shareHost) FromPeer(*api.Conn) bool         { return false }
func (h *shareHost) NodeID() int32                   { return h.me }
func (h *shareHost) ListenerName(*api.Conn) string   { return "PLAINTEXT" }

// newFinder places share keys with the host's share coordinator when the
// host has one, and refuses them otherwise.
func TestNewFinderShare(t *testing.T) {
	sc, err := sharecoord.New(context.Background(), sharecoord.DefaultConfig(), nil)
	if err != nil {
		t.Fatal(err)
	}
	h := &shareHost{coordHost: &coordHost{img: coordImage(t), me: 1}, sc: sc}
	f := newFinder(h, &api.Conn{Ctx: context.Background()}, keyShare)
	if f.topic != sharecoord.Topic || f.status == nil || f.partitionFor == nil {
		t.Fatalf("share finder: topic %q", f.topic)
	}
	f.ensure()
	if err := f.status(sharecoord.CoordinatorKey(sharepart.Key{Group: "g"})); !errors.Is(err, sharecoord.ErrNotCoordinator) {
		t.Fatalf("status of a coordinator that leads nothing: %v", err)
	}
	if h.ensured.Load() != 1 {
		t.Fatal("ensure does not ask for the state topic")
	}
	h.sc = nil
	if f := newFinder(h, &api.Conn{Ctx: context.Background()}, keyShare); f.topic != "" {
		t.Fatalf("a node without a share coordinator: topic %q", f.topic)
	}
}
