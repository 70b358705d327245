package replicamgr

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/fjordlog/fjord/protocol/lifecycle"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// A DeleteTopics answer is a promise about the whole cluster: once it is
// sent, no broker lists the topic any more (Metadata, DescribeTopicPartitions)
// and a consumer of it anywhere gets UNKNOWN_TOPIC_ID or
// UNKNOWN_TOPIC_OR_PARTITION. Kafka answers once its controller has
// committed the deletion and lets other brokers lag, so a client that asks
// another broker at once may still see the topic with its partitions —
// and a producer with auto-creation on may keep writing to the doomed
// replicas there.
//
// Design: after the local image shows the deletion, the handling broker
// asks every other live broker of its image, over the inter-broker
// listener, for the deleted topic ids (Metadata v10+ by id) until each
// answers UNKNOWN_TOPIC_ID for all of them. A broker's Metadata reads the
// image its replicas already reflect (publishLoop), so that answer also
// means its replicas of the topic are being deleted. Asking the peers
// checks exactly the promised property, needs no new state in the
// controller, and costs one round trip per peer in the usual case
// (followers apply a committed entry within milliseconds).
//
// Rejected: having the controller collect applied offsets from heartbeats
// and hold the answer until every broker reports the deletion's offset.
// Heartbeats come every broker.heartbeat.interval.ms, so every deletion
// would wait up to that long, and the controller's decision loop would
// need a waiting list it does not have.
//
// Bounds: the wait ends with the request's timeout (the caller's ctx). A peer that
// has not confirmed by then — cut off, about to be fenced for silence —
// does not turn the answer into an error: the deletion is committed and
// irrevocable, and that peer drops the topic when it catches up. That is
// logged once per request. A peer fenced meanwhile is not waited for: it
// leads and follows nothing any more and may be dead. If it is alive with
// an old image (a process stalled past its session, then resumed), it may
// list the topic until it has applied the log — milliseconds once it runs
// again (TestFaultDeleteTopicFrozenBroker); Kafka's brokers have the same
// window.

// The pause between two asks of one lagging peer doubles from
// peerPollFirst to peerPollMax. One ask gives up after peerAskTimeout: a
// frozen peer keeps its sockets open and never answers, and only between
// asks does the loop see that the controller has fenced it.
const (
	peerPollFirst  = 5 * time.Millisecond
	peerPollMax    = 200 * time.Millisecond
	peerAskTimeout = time.Second
)

// AwaitPeersForgot waits until every other live broker answers Metadata
// for ids with UNKNOWN_TOPIC_ID, or ctx ends. It returns the brokers that
// did not confirm (nil when all did).
func (m *Manager) AwaitPeersForgot(ctx context.Context, ids [][16]byte) []int32 {
	if len(ids) == 0 {
		return nil
	}
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		lagging []int32
	)
	for _, bs := range m.Image().LiveBrokers() {
		if bs.ID == m.cfg.NodeID {
			continue
		}
		peer := bs.ID
		wg.Add(1)
		started := m.cfg.Go(func() {
			defer wg.Done()
			if !m.awaitPeerForgot(ctx, peer, ids) {
				mu.Lock()
				lagging = append(lagging, peer)
				mu.Unlock()
			}
		})
		if !started { // shutting down: nobody is waiting for the answer
			wg.Done()
		}
	}
	wg.Wait()
	slices.Sort(lagging)
	return lagging
}

// awaitPeerForgot asks peer until it no longer knows any of ids (true), it
// is no longer a live broker in this broker's image (true: not waited
// for), or ctx ends (false).
func (m *Manager) awaitPeerForgot(ctx context.Context, peer int32, ids [][16]byte) bool {
	req := kmsg.NewPtrMetadataRequest()
	for _, id := range ids {
		rt := kmsg.NewMetadataRequestTopic()
		rt.TopicID = id
		req.Topics = append(req.Topics, rt)
	}
	req.AllowAutoTopicCreation = false
	poll := lifecycle.Backoff{Initial: peerPollFirst, Max: peerPollMax}
	for asks := 1; ; asks++ {
		if bs, ok := m.Image().Broker(peer); !ok || bs.Fenced {
			return true // no longer a live broker
		}
		if peerForgot(m.cfg.AskPeer(ctx, peer, req, peerAskTimeout), ids) {
			return true
		}
		if !lifecycle.Sleep(ctx, poll.Delay(asks)) {
			return false
		}
	}
}

// peerForgot reports whether resp says every one of ids is unknown.
func peerForgot(resp *kmsg.MetadataResponse, ids [][16]byte) bool {
	if resp == nil {
		return false
	}
	for _, id := range ids {
		i := slices.IndexFunc(resp.Topics, func(t kmsg.MetadataResponseTopic) bool { return t.TopicID == id })
		if i < 0 || resp.Topics[i].ErrorCode != kerr.UnknownTopicID.Code {
			return false
		}
	}
	return true
}
