package discovery

import (
	"fmt"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordlog/fjord/broker/acl"
	"github.com/fjordlog/fjord/broker/api"
	"github.com/fjordlog/fjord/broker/coordinator"
	"github.com/fjordlog/fjord/broker/sharecoord"
	"github.com/fjordlog/fjord/broker/txncoord"
)

// FindCoordinator: v0-6
//
// Behaviour:
//   - Groups (key type 0): the coordinator is the leader of the group's
//     offsets-topic partition (Java hashCode of the group id modulo the
//     partition count, as Kafka computes it). The offsets topic is
//     created on first need, as Kafka creates it: the first
//     FindCoordinator for a group asks for it (with
//     offsets.topic.replication.factor replicas) and waits up to
//     coordLoadWait for it to appear, then answers as below; a topic
//     still missing then, or a partition without a leader, is
//     COORDINATOR_NOT_AVAILABLE.
//   - Transactions (key type 1): the same with the transaction state topic
//     (__transaction_state, transaction.state.log.num.partitions
//     partitions, created on first need) and the transactional id.
//   - A coordinator is named only once it has loaded the key's partition
//     (see "Answering only with a loaded coordinator" below): a client
//     that goes there with JoinGroup, SyncGroup, OffsetCommit or
//     InitProducerID is served at once, never told NOT_COORDINATOR or
//     COORDINATOR_LOAD_IN_PROGRESS because it came too early.
//   - Until then a client is told COORDINATOR_NOT_AVAILABLE, with an error
//     message saying why (v1+). Kafka's FindCoordinator answers no other
//     retriable code, and sarama retries no other: it fails a lookup
//     answered COORDINATOR_LOAD_IN_PROGRESS or NOT_COORDINATOR.
//   - Share coordinators (key type 2, KIP-932, v6+): the key is
//     "groupId:topicId:partition", read as Kafka's SharePartitionKey
//     (sharecoord.ParseKey: from the right, so the group may hold colons;
//     the topic id base64url, padded or not). The coordinator is the
//     leader of the key's partition of the share-group state topic
//     (__share_group_state, share.coordinator.state.topic.num.partitions
//     partitions, created on first need), placed by the key as Kafka
//     writes it (sharecoord.CoordinatorKey: the topic id unpadded), with
//     the same loaded-coordinator check as groups. A malformed key:
//     INVALID_REQUEST with a message saying why; a share key below v6, or
//     on a node without a share coordinator: INVALID_REQUEST, as Kafka.
//     Share keys are for brokers' share-state persisters: they need
//     CLUSTER_ACTION on CLUSTER, and without it every key of the request
//     is CLUSTER_AUTHORIZATION_FAILED (Kafka fails the whole request so).
//   - An unknown key type: INVALID_REQUEST.
//
// Answering only with a loaded coordinator. The image of the broker that
// answers says who leads the key's partition, not whether that leader has
// applied the same image, taken up the leadership and read the partition
// back; a client sent there too early is answered NOT_COORDINATOR or
// COORDINATOR_LOAD_IN_PROGRESS by the group APIs, and a client without
// retries for those (or a test of one) fails. So:
//  1. When this broker leads the partition, it answers itself once its
//     coordinator has loaded the partition, waiting up to coordLoadWait
//     for a load (or the leadership's hand-over to the coordinator) in
//     progress, polling every coordPoll.
//  2. When another broker leads it, this broker asks that broker — over
//     the inter-broker listener, on its peer client (Host.AskPeer), with
//     the same key type and keys, at most peerAskTimeout — and relays only
//     a positive answer naming the asked broker itself, with that broker's
//     address on the listener the client came in on. Any other answer, or
//     none, is COORDINATOR_NOT_AVAILABLE for the client.
//  3. A FindCoordinator from a peer (Host.FromPeer: the peer clients'
//     client id on the inter-broker listener) is answered for this node
//     only: itself as in 1, else COORDINATOR_LOAD_IN_PROGRESS (still
//     loading after the wait), NOT_COORDINATOR (its image names another
//     leader, or its coordinator does not lead the partition) or
//     COORDINATOR_NOT_AVAILABLE (no topic or no leader in its image). It
//     is never relayed again, so an ask cannot loop, and it never creates
//     the internal topics: the asking broker did.
//  4. A peer that answers an error outside those (an ACL that denies the
//     brokers' principal DESCRIBE on the group, an older Fjord without
//     this check) cannot vouch for its coordinator: the client is given
//     the leader from this broker's image, as before the check existed,
//     and a warning is logged; groups keep working as well as they did.
//
// Bounds: the asked broker waits at most coordLoadWait (1 s), the asking
// broker at most peerAskTimeout (1.5 s) per ask, all asks of one request
// at once (one per coordinator broker, all its keys in one request), so a
// FindCoordinator is answered within about 1.5 s whatever the peers do,
// and within 2.5 s when it first waited for its topic to be created.
// The waiting runs on the host's goroutines (Host.Go), never on the
// connection's reader; keys that need no wait (an error, a loaded local
// coordinator) are answered inline. A request for n keys costs at most
// one ask per other broker.
//
// Rejected: answering from this broker's image alone (the old behaviour,
// and Kafka's): cheap, but it names a broker that has not loaded the
// group yet. Having every broker publish its loaded partitions in the
// metadata log: a write to the controller per load, and still a window
// between the write and its application by the answering broker.
//
// Version notes:
//   - v1: key type; v3: flexible; v4: several keys per request (KIP-699)
//   - v5: TRANSACTION_ABORTABLE may be answered (KIP-890); no answer of
//     Fjord's FindCoordinator is that code, so v5 needs nothing new
//   - v6: key type 2, share coordinators (KIP-932)
func findCoordinatorEntry(h Host) api.Entry {
	return api.Entry{
		Key: 10, Client: api.Versions(0, 6), Handle: bindTo(h, handleFindCoordinator),
		Rule: api.Needs("DESCRIBE on GROUP or TRANSACTIONAL_ID; share keys: CLUSTER_ACTION on CLUSTER", 0, checkFindCoordinator),
	}
}

// The bounds of the coordinator check (see the header).
const (
	coordLoadWait  = time.Second
	coordPoll      = 10 * time.Millisecond
	peerAskTimeout = coordLoadWait + 500*time.Millisecond
)

// Key types (FindCoordinatorRequest.CoordinatorType).
const (
	keyGroup = 0
	keyTxn   = 1
	keyShare = 2
)

// coordAnswer is one key's answer.
type coordAnswer struct {
	node  int32
	host  string
	port  int32
	code  int16
	msg   string
	local bool // waiting for this node's coordinator
	peer  int32
	ask   bool // to be asked of peer
	// creating: waiting for the key type's topic, whose creation this
	// request asked for; then answered as if it had been there.
	creating bool
}

func coordError(code int16, format string, args ...any) coordAnswer {
	return coordAnswer{node: -1, port: -1, code: code, msg: fmt.Sprintf(format, args...)}
}

// finder answers one FindCoordinator request's keys.
type finder struct {
	h        Host
	cc       *api.Conn
	typ      int8
	fromPeer bool
	me       int32
	listener string
	topic    string // "" for a key type without one
	ensure   func()
	// status is nil when this node's coordinator serves key (it leads
	// the key's partition and has loaded it), else why not.
	status func(key string) error
	// partitionFor is the coordinator's own placement of key (it follows
	// the topic's partition count a moment after the image).
	partitionFor func(key string) int32
	// Bounds, set from the constants; tests shorten them.
	loadWait, poll, askTimeout time.Duration
	ensured                    bool // the topic's creation was asked for
}

func newFinder(h Host, cc *api.Conn, typ int8) *finder {
	f := &finder{h: h, cc: cc, typ: typ, fromPeer: h.FromPeer(cc), me: h.NodeID(), listener: h.ListenerName(cc),
		loadWait: coordLoadWait, poll: coordPoll, askTimeout: peerAskTimeout}
	switch typ {
	case keyGroup:
		g := h.Groups()
		f.topic, f.ensure, f.status, f.partitionFor = coordinator.OffsetsTopic, h.EnsureOffsetsTopic, g.Status, g.PartitionFor
	case keyTxn:
		t := h.Txns()
		f.topic, f.ensure, f.status, f.partitionFor = txncoord.Topic, h.EnsureTxnTopic, t.Status, t.PartitionFor
	case keyShare:
		if sc := h.Shares(); sc != nil {
			f.topic, f.ensure, f.status, f.partitionFor = sharecoord.Topic, h.EnsureShareStateTopic, sc.Status, sc.PartitionFor
		}
	}
	return f
}

func handleFindCoordinator(h Host, cc *api.Conn, kreq kmsg.Request, respond func(kmsg.Response)) {
	req := kreq.(*kmsg.FindCoordinatorRequest)
	newFinder(h, cc, req.CoordinatorType).serve(req, respond)
}

// serve answers req: at once when no key needs a wait or an ask, else
// from a host goroutine.
func (f *finder) serve(req *kmsg.FindCoordinatorRequest, respond func(kmsg.Response)) {
	keys := req.CoordinatorKeys
	if req.Version < 4 {
		keys = []string{req.CoordinatorKey}
	}
	answers := make([]coordAnswer, len(keys))
	// place are the keys as placement hashes them (a share key in Kafka's
	// spelling) and as a peer is asked for them; the response names the
	// keys as the client sent them.
	place := make([]string, len(keys))
	pending := false
	for i, k := range keys {
		var bad *coordAnswer
		if place[i], bad = f.placeKey(req.Version, k); bad != nil {
			answers[i] = *bad
			continue
		}
		answers[i] = f.first(place[i])
		pending = pending || answers[i].local || answers[i].ask || answers[i].creating
	}
	if !pending {
		respond(f.response(req, answers))
		return
	}
	if !f.h.Go(func() {
		f.resolve(place, answers)
		respond(f.response(req, answers))
	}) {
		for i := range answers {
			if answers[i].local || answers[i].ask || answers[i].creating {
				answers[i] = coordError(kerr.CoordinatorNotAvailable.Code, "the broker is shutting down")
			}
		}
		respond(f.response(req, answers))
	}
}

// placeKey is key as placement hashes it, or the answer for a key that
// cannot be placed: a share key below v6, on a node without a share
// coordinator, or malformed; a key of an unknown type.
func (f *finder) placeKey(version int16, key string) (string, *coordAnswer) {
	fail := func(format string, args ...any) (string, *coordAnswer) {
		a := coordError(kerr.InvalidRequest.Code, format, args...)
		return key, &a
	}
	switch {
	case f.typ == keyShare && version < 6:
		return fail("share coordinators (key type 2) need FindCoordinator v6+")
	case f.typ == keyShare && f.topic == "":
		return fail("this node runs no share coordinator (KIP-932)")
	case f.typ == keyShare:
		k, err := sharecoord.ParseKey(key)
		if err != nil {
			return fail("%v", err)
		}
		return sharecoord.CoordinatorKey(k), nil
	case f.topic == "":
		return fail("unknown coordinator type %d", f.typ)
	}
	return key, nil
}

// first is key's answer from this broker's image and coordinator, or
// which wait or ask will give it.
func (f *finder) first(key string) coordAnswer {
	img := f.h.Image()
	ot := img.Topic(f.topic)
	if ot == nil || len(ot.Partitions) == 0 {
		if f.fromPeer {
			return coordAnswer{local: true} // this broker may be behind the asking one
		}
		a := coordError(kerr.CoordinatorNotAvailable.Code, "%s is being created", f.topic)
		if !f.ensured {
			f.ensured = true
			a.creating = f.h.Go(f.ensure)
		}
		return a
	}
	pi := coordinator.PartitionOf(key, int32(len(ot.Partitions)))
	leader := ot.Partitions[pi].Leader
	switch {
	case leader < 0:
		return coordError(kerr.CoordinatorNotAvailable.Code, "%s partition %d has no leader", f.topic, pi)
	case leader == f.me:
		a, st := f.loaded(key)
		if st == coordWait {
			a.local = true
		}
		return a
	case f.fromPeer:
		return coordError(kerr.NotCoordinator.Code, "broker %d leads %s partition %d", leader, f.topic, pi)
	}
	if _, ok := img.Endpoint(leader, f.listener); !ok {
		return coordError(kerr.CoordinatorNotAvailable.Code, "coordinator %d has no %s endpoint", leader, f.listener)
	}
	return coordAnswer{ask: true, peer: leader}
}

// coordState is what loaded found: the answer, or a reason that waiting
// may remove, or one it will not.
type coordState int

const (
	coordReady coordState = iota
	coordWait
	coordFinal
)

// loaded is this node's answer for key when it leads the key's partition
// in the current image and its coordinator has loaded it (coordReady);
// else the answer to give if that stays so, and whether waiting may
// change it.
func (f *finder) loaded(key string) (coordAnswer, coordState) {
	img := f.h.Image()
	ot := img.Topic(f.topic)
	if ot == nil || len(ot.Partitions) == 0 {
		return coordError(kerr.CoordinatorNotAvailable.Code, "%s does not exist yet", f.topic), coordWait
	}
	pi := coordinator.PartitionOf(key, int32(len(ot.Partitions)))
	switch leader := ot.Partitions[pi].Leader; {
	case leader < 0:
		return coordError(kerr.CoordinatorNotAvailable.Code, "%s partition %d has no leader", f.topic, pi), coordWait
	case leader != f.me:
		// Another leader in the image will not turn into this one soon.
		return coordError(kerr.NotCoordinator.Code, "broker %d leads %s partition %d", leader, f.topic, pi), coordFinal
	}
	if err := f.status(key); err != nil {
		return coordError(f.h.Code(err), "coordinator %d has not loaded %s partition %d: %v", f.me, f.topic, pi, err), coordWait
	}
	if f.partitionFor(key) != pi {
		// The coordinator has not followed the topic's partition count yet.
		return coordError(kerr.CoordinatorLoadInProgress.Code, "coordinator %d is taking up %s", f.me, f.topic), coordWait
	}
	e, ok := img.Endpoint(f.me, f.listener)
	if !ok {
		return coordError(kerr.CoordinatorNotAvailable.Code, "broker %d has no %s endpoint", f.me, f.listener), coordFinal
	}
	return coordAnswer{node: f.me, host: e.Host, port: e.Port}, coordReady
}

// resolve settles the keys first left waiting or to ask: the wait for the
// topic's creation first, then the asks of each peer at once, on host
// goroutines, and the local waits here.
func (f *finder) resolve(keys []string, answers []coordAnswer) {
	f.waitCreated(keys, answers)
	byPeer := map[int32][]int{}
	var local []int
	for i, a := range answers {
		switch {
		case a.ask:
			byPeer[a.peer] = append(byPeer[a.peer], i)
		case a.local:
			local = append(local, i)
		}
	}
	var wg sync.WaitGroup
	for peer, idx := range byPeer {
		wg.Add(1)
		if !f.h.Go(func() { defer wg.Done(); f.askPeer(peer, keys, idx, answers) }) {
			wg.Done()
			for _, i := range idx {
				answers[i] = coordError(kerr.CoordinatorNotAvailable.Code, "the broker is shutting down")
			}
		}
	}
	f.waitLocal(keys, local, answers)
	wg.Wait()
}

// waitCreated waits, at most f.loadWait, for the topic whose creation
// first asked for to be in this broker's image, and answers the keys that
// waited for it as first would with the topic there (each may now wait
// for a load or an ask). A key still without its topic keeps
// COORDINATOR_NOT_AVAILABLE, which clients retry.
func (f *finder) waitCreated(keys []string, answers []coordAnswer) {
	var idx []int
	for i, a := range answers {
		if a.creating {
			idx = append(idx, i)
		}
	}
	if len(idx) == 0 {
		return
	}
	exists := func() bool {
		ot := f.h.Image().Topic(f.topic)
		return ot != nil && len(ot.Partitions) > 0
	}
	if !f.pollUntil(exists) {
		for _, i := range idx {
			answers[i].creating = false
		}
		return
	}
	for _, i := range idx {
		answers[i] = f.first(keys[i])
	}
}

// waitLocal waits, at most f.loadWait, for this node's coordinator to
// load the keys at idx; each keeps its last reason when the wait ends.
func (f *finder) waitLocal(keys []string, idx []int, answers []coordAnswer) {
	if len(idx) == 0 {
		return
	}
	f.pollUntil(func() bool {
		left := idx[:0]
		for _, i := range idx {
			var st coordState
			if answers[i], st = f.loaded(keys[i]); st == coordWait {
				left = append(left, i)
			}
		}
		idx = left
		return len(idx) == 0
	})
}

// pollUntil calls done every f.poll until it returns true (true), or
// f.loadWait passes or the connection ends (false). done runs at once
// first.
func (f *finder) pollUntil(done func() bool) bool {
	deadline := time.NewTimer(f.loadWait)
	defer deadline.Stop()
	tick := time.NewTicker(f.poll)
	defer tick.Stop()
	for !done() {
		select {
		case <-tick.C:
		case <-deadline.C:
			return false
		case <-f.cc.Ctx.Done():
			return false
		}
	}
	return true
}

// askPeer asks peer, the leader of the keys at idx in this broker's
// image, whether it coordinates them, and sets their answers (see the
// header, 2 and 4).
func (f *finder) askPeer(peer int32, keys []string, idx []int, answers []coordAnswer) {
	req := kmsg.NewPtrFindCoordinatorRequest()
	req.CoordinatorType = f.typ
	for _, i := range idx {
		req.CoordinatorKeys = append(req.CoordinatorKeys, keys[i])
	}
	req.CoordinatorKey = req.CoordinatorKeys[0] // if the peer speaks only v1-3
	kresp, err := f.h.AskPeer(f.cc.Ctx, peer, req, f.askTimeout)
	resp, _ := kresp.(*kmsg.FindCoordinatorResponse)
	if err != nil || resp == nil {
		for _, i := range idx {
			answers[i] = coordError(kerr.CoordinatorNotAvailable.Code, "coordinator %d did not answer: %v", peer, err)
		}
		return
	}
	got := map[string]kmsg.FindCoordinatorResponseCoordinator{}
	if resp.Version < 4 {
		c := kmsg.NewFindCoordinatorResponseCoordinator()
		c.Key, c.NodeID, c.ErrorCode = req.CoordinatorKey, resp.NodeID, resp.ErrorCode
		got[c.Key] = c
	}
	for _, c := range resp.Coordinators {
		got[c.Key] = c
	}
	img := f.h.Image()
	for _, i := range idx {
		c, ok := got[keys[i]]
		switch {
		case !ok:
			answers[i] = coordError(kerr.CoordinatorNotAvailable.Code, "coordinator %d did not answer for this key", peer)
		case c.ErrorCode == 0 && c.NodeID == peer:
			if e, ok := img.Endpoint(peer, f.listener); ok {
				answers[i] = coordAnswer{node: peer, host: e.Host, port: e.Port}
			} else {
				answers[i] = coordError(kerr.CoordinatorNotAvailable.Code, "coordinator %d has no %s endpoint", peer, f.listener)
			}
		case c.ErrorCode == 0:
			answers[i] = coordError(kerr.CoordinatorNotAvailable.Code, "broker %d names broker %d its coordinator", peer, c.NodeID)
		case c.ErrorCode == kerr.CoordinatorLoadInProgress.Code, c.ErrorCode == kerr.NotCoordinator.Code,
			c.ErrorCode == kerr.CoordinatorNotAvailable.Code:
			answers[i] = coordError(c.ErrorCode, "coordinator %d: %s", peer, codeText(c.ErrorCode, c.ErrorMessage))
		default:
			if _, seen := fallbackLogged.LoadOrStore([2]int32{peer, int32(c.ErrorCode)}, true); !seen {
				f.h.Log().Warn().Int32("coordinator", peer).Str("key", keys[i]).Str("answer", codeText(c.ErrorCode, c.ErrorMessage)).
					Msg("FindCoordinator: the coordinator cannot confirm it has loaded the key (does the brokers' principal lack DESCRIBE on it?); answering from this broker's image (logged once per coordinator and answer)")
			}
			if e, ok := img.Endpoint(peer, f.listener); ok {
				answers[i] = coordAnswer{node: peer, host: e.Host, port: e.Port}
			} else {
				answers[i] = coordError(kerr.CoordinatorNotAvailable.Code, "coordinator %d has no %s endpoint", peer, f.listener)
			}
		}
	}
}

// fallbackLogged holds the (coordinator, error code) pairs whose fallback
// has been logged: once each per process, not once per request. Bounded
// by the brokers times the codes.
var fallbackLogged sync.Map

func codeText(code int16, msg *string) string {
	s := "no error"
	if err := kerr.ErrorForCode(code); err != nil {
		s = err.Error()
	}
	if msg != nil && *msg != "" {
		s += ": " + *msg
	}
	return s
}

// response builds req's response from answers, one per key. A client is
// told COORDINATOR_NOT_AVAILABLE where a peer is told why (see the
// header).
func (f *finder) response(req *kmsg.FindCoordinatorRequest, answers []coordAnswer) *kmsg.FindCoordinatorResponse {
	if !f.fromPeer {
		for i := range answers {
			if c := answers[i].code; c == kerr.CoordinatorLoadInProgress.Code || c == kerr.NotCoordinator.Code {
				answers[i].code = kerr.CoordinatorNotAvailable.Code
			}
		}
	}
	resp := req.ResponseKind().(*kmsg.FindCoordinatorResponse)
	if req.Version < 4 {
		a := answers[0]
		resp.NodeID, resp.Host, resp.Port, resp.ErrorCode = a.node, a.host, a.port, a.code
		if a.code != 0 && a.msg != "" {
			resp.ErrorMessage = kmsg.StringPtr(a.msg)
		}
		return resp
	}
	for i, key := range req.CoordinatorKeys {
		a := answers[i]
		c := kmsg.NewFindCoordinatorResponseCoordinator()
		c.Key, c.NodeID, c.Host, c.Port, c.ErrorCode = key, a.node, a.host, a.port, a.code
		if a.code != 0 && a.msg != "" {
			c.ErrorMessage = kmsg.StringPtr(a.msg)
		}
		resp.Coordinators = append(resp.Coordinators, c)
	}
	return resp
}

func checkFindCoordinator(z *api.Authz, kreq kmsg.Request) (kmsg.Response, func(kmsg.Response)) {
	req := kreq.(*kmsg.FindCoordinatorRequest)
	rt, code := acl.ResourceGroup, api.GroupDenied
	switch req.CoordinatorType {
	case keyTxn:
		rt, code = acl.ResourceTransactionalID, api.TxnDenied
	case keyShare:
		if req.Version < 6 || z.Cluster(acl.OpClusterAction) {
			return nil, nil // below v6 the handler refuses them, whoever asks
		}
		resp := req.ResponseKind().(*kmsg.FindCoordinatorResponse)
		for _, k := range req.CoordinatorKeys {
			c := kmsg.NewFindCoordinatorResponseCoordinator()
			c.Key, c.NodeID, c.Port, c.ErrorCode = k, -1, -1, api.ClusterDenied
			resp.Coordinators = append(resp.Coordinators, c)
		}
		return resp, nil
	}
	if req.Version < 4 {
		if z.Ok(acl.OpDescribe, rt, req.CoordinatorKey) {
			return nil, nil
		}
		resp := req.ResponseKind().(*kmsg.FindCoordinatorResponse)
		resp.ErrorCode, resp.NodeID = code, -1
		return resp, nil
	}
	keep := make([]string, 0, len(req.CoordinatorKeys))
	var denied []string
	for _, k := range req.CoordinatorKeys {
		if z.Ok(acl.OpDescribe, rt, k) {
			keep = append(keep, k)
		} else {
			denied = append(denied, k)
		}
	}
	if len(denied) == 0 {
		return nil, nil
	}
	req.CoordinatorKeys = keep
	fill := func(resp *kmsg.FindCoordinatorResponse) {
		for _, k := range denied {
			c := kmsg.NewFindCoordinatorResponseCoordinator()
			c.Key, c.NodeID, c.ErrorCode = k, -1, code
			resp.Coordinators = append(resp.Coordinators, c)
		}
	}
	if len(keep) == 0 {
		resp := req.ResponseKind().(*kmsg.FindCoordinatorResponse)
		fill(resp)
		return resp, nil
	}
	return nil, func(r kmsg.Response) { fill(r.(*kmsg.FindCoordinatorResponse)) }
}
