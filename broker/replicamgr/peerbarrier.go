package replicamgr

import (
	"context"
	"encoding/binary"
	"slices"
	"sync"
	"time"

	"github.com/fjordlog/fjord/protocol/lifecycle"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// An answer to a metadata change is a promise about the whole cluster:
// once a client has been told that its topic was created, its partitions
// added, its topic deleted, or its config or ACL changed, every broker it
// asks next acts on the change. Kafka answers at the controller's commit
// and lets other brokers lag: a client that creates a topic through one
// broker and goes straight to the partition's leader gets
// UNKNOWN_TOPIC_OR_PARTITION there (a long-standing complaint of its
// users, and seven of segmentio/kafka-go's own tests fail on three nodes
// for it); a topic deleted through one broker may still be listed, and
// written to, by another.
//
// Design: the change is committed at one offset of the metadata log
// (api.ForwardTo learns it from the controller's answer). After the local
// image reaches it, the handling broker asks every other live broker of
// its image, over the inter-broker listener, for the version of the image
// its Metadata answers from, until each reports that offset or later. A
// broker's Metadata reads the image its replicas already reflect
// (publish.go), so that answer also means the peer's new leaders serve,
// its deleted replicas are being removed, and its authorizer and configs
// follow. The version travels in a tagged field of Metadata (TagImageVersion),
// set only when a peer's request carries it, so clients see no change. Asking
// costs one round trip per peer in the usual case (followers apply a
// committed entry within milliseconds) and needs no new state in the
// controller.
//
// Rejected: having the controller collect applied offsets from heartbeats
// and hold the answer until every broker reports the change's offset.
// Heartbeats come every broker.heartbeat.interval.ms, so every change
// would wait up to that long, and the controller's decision loop would
// need a waiting list it does not have. Rejected too: a predicate per
// change (the peer lists the topic, has the ACL...), as the deletion
// barrier once was: the offset says it for every change at once.
//
// Bounds: the wait ends with the request's timeout (the caller's ctx). A
// peer that has not confirmed by then — cut off, about to be fenced for
// silence — does not turn the answer into an error: the change is
// committed and irrevocable, and that peer applies it when it catches up.
// The caller says which peers lag, in the answer and once in the log. A
// peer fenced meanwhile is not waited for: it leads and follows nothing
// any more and may be dead. If it is alive with an old image (a process
// stalled past its session, then resumed), it may answer from that image
// until it has applied the log — milliseconds once it runs again
// (TestFaultDeleteTopicFrozenBroker); Kafka's brokers have the same window.

// TagImageVersion is the tag, in a Metadata request and response (v9+,
// flexible), of the responding broker's image version: a peer asks with
// it (any value), and the answer carries the version as an unsigned
// varint. A tag number far above Kafka's own (which count up from 0), so
// a future Kafka field does not collide with it.
const TagImageVersion = 0x464a // "FJ"

// PutImageVersion answers a Metadata request that asks for the image
// version (TagImageVersion) with version.
func PutImageVersion(req *kmsg.MetadataRequest, resp *kmsg.MetadataResponse, version uint64) {
	asked := false
	req.UnknownTags.Each(func(tag uint32, _ []byte) { asked = asked || tag == TagImageVersion })
	if asked {
		resp.UnknownTags.Set(TagImageVersion, binary.AppendUvarint(nil, version))
	}
}

// imageVersion is the version resp reports, ok false when it reports
// none (no answer, a broker that does not know the tag, a damaged value).
func imageVersion(resp *kmsg.MetadataResponse) (v uint64, ok bool) {
	if resp == nil {
		return 0, false
	}
	resp.UnknownTags.Each(func(tag uint32, val []byte) {
		if tag == TagImageVersion {
			if x, n := binary.Uvarint(val); n == len(val) && n > 0 {
				v, ok = x, true
			}
		}
	})
	return v, ok
}

// The pause between two asks of one lagging peer doubles from
// peerPollFirst to peerPollMax. One ask gives up after peerAskTimeout: a
// frozen peer keeps its sockets open and never answers, and only between
// asks does the loop see that the controller has fenced it.
const (
	peerPollFirst  = 5 * time.Millisecond
	peerPollMax    = 200 * time.Millisecond
	peerAskTimeout = time.Second
)

// AwaitPeersApplied waits until every other live broker's image is at
// offset or later, or ctx ends. It returns the brokers that did not
// confirm (nil when all did). Offset 0 (nothing committed) is reached at
// once.
func (m *Manager) AwaitPeersApplied(ctx context.Context, offset uint64) []int32 {
	if offset == 0 {
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
			if !m.awaitPeerApplied(ctx, peer, offset) {
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

// awaitPeerApplied asks peer until its image is at offset or later
// (true), it is no longer a live broker in this broker's image (true: not
// waited for), or ctx ends (false).
func (m *Manager) awaitPeerApplied(ctx context.Context, peer int32, offset uint64) bool {
	req := kmsg.NewPtrMetadataRequest()
	req.Topics = []kmsg.MetadataRequestTopic{} // none: only the brokers
	req.UnknownTags.Set(TagImageVersion, nil)
	poll := lifecycle.Backoff{Initial: peerPollFirst, Max: peerPollMax}
	for asks := 1; ; asks++ {
		if bs, ok := m.Image().Broker(peer); !ok || bs.Fenced {
			return true // no longer a live broker
		}
		if v, ok := imageVersion(m.cfg.AskPeer(ctx, peer, req, peerAskTimeout)); ok && v >= offset {
			return true
		}
		if !lifecycle.Sleep(ctx, poll.Delay(asks)) {
			return false
		}
	}
}
