package broker

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordlog/fjord/broker/coordinator"
	"github.com/fjordlog/fjord/broker/replica"
	"github.com/fjordlog/fjord/broker/replicamgr"
	"github.com/fjordlog/fjord/broker/txn"
	"github.com/fjordlog/fjord/broker/txncoord"
	"github.com/fjordlog/fjord/controller"
)

// The broker's side of the transaction room (package broker/txncoord,
// which owns the coordinator and the transaction APIs: 22, 24-28, 61, 65,
// 66): its configuration, the host it runs on, the __transaction_state
// topic it is backed by, and the clients it sends WriteTxnMarkers and
// produce verifications through.

// txnTopic is the coordinator's topic of transaction state.
const txnTopic = txncoord.Topic

func (b *Broker) newTxnCoordinator() (*txncoord.Coordinator, error) {
	cfg := txn.DefaultConfig()
	cfg.MaxTimeoutMs = b.cfg.TxnMaxTimeoutMs
	cfg.IDExpirationMs = b.cfg.TxnIDExpirationMs
	return txncoord.New(b.ctx, txncoord.Config{Txn: cfg, Logger: b.log}, txnHost{b})
}

// txnHost gives the transaction coordinator (txncoord.Host) and the
// transaction APIs (txncoord.APIHost) what they need of the broker. The
// registry binds it before the broker is built (and, in tests, to a nil
// broker): its methods read b only when called.
type txnHost struct{ b *Broker }

var (
	_ txncoord.Host    = txnHost{}
	_ txncoord.APIHost = txnHost{}
)

func (h txnHost) Txns() *txncoord.Coordinator         { return h.b.txns }
func (h txnHost) NodeID() int32                       { return h.b.cfg.NodeID }
func (h txnHost) Image() *controller.Image            { return h.b.image() }
func (h txnHost) Topic(name string) *replicamgr.Topic { return h.b.replicas.Topic(name) }
func (h txnHost) Offsets() txncoord.Offsets           { return h.b.coord }
func (h txnHost) GroupCode(group string) int16        { return h.b.coord.RequestCode(group, errorCode) }
func (h txnHost) CommitCode(err error) int16          { return coordinator.CommitErrorCode(err, errorCode) }
func (h txnHost) EnsureOffsetsTopic()                 { h.b.ensureOffsetsTopic() }

// TopicByID resolves the topic ids of TxnOffsetCommit v6 (KIP-1319).
func (h txnHost) TopicByID(id [16]byte) *replicamgr.Topic { return h.b.replicas.TopicByID(id) }

func (h txnHost) Go(fn func()) bool                          { return h.b.goLoop(fn) }
func (h txnHost) ReadFailed(p *replica.Partition, err error) { h.b.readFailed(p, err) }
func (h txnHost) Code(err error) int16                       { return errorCode(err) }

func (h txnHost) AllocateProducerIDs(ctx context.Context) (int64, int32, error) {
	return h.b.ctl.AllocateProducerIDs(ctx, h.b.life.Epoch())
}

func (h txnHost) Leader(topic string, partition int32) (int32, bool) {
	t := h.b.image().Topic(topic)
	if t == nil || int(partition) >= len(t.Partitions) {
		return -1, false
	}
	return t.Partitions[partition].Leader, true
}

func (h txnHost) WriteMarkers(ctx context.Context, node int32, req *kmsg.WriteTxnMarkersRequest) (*kmsg.WriteTxnMarkersResponse, error) {
	if node == h.b.cfg.NodeID {
		return txncoord.WriteMarkers(ctx, h, req), nil
	}
	resp, err := h.Ask(ctx, node, req)
	if err != nil {
		return nil, err
	}
	return resp.(*kmsg.WriteTxnMarkersResponse), nil
}

// Ask sends req to node through its peer client; a failure drops the
// client, so the next ask dials afresh.
func (h txnHost) Ask(ctx context.Context, node int32, req kmsg.Request) (kmsg.Response, error) {
	cl, err := h.b.peers.client(h.b, node)
	if err != nil {
		return nil, err
	}
	resp, err := cl.SeedBrokers()[0].Request(ctx, req)
	if err != nil {
		h.b.peers.drop(node, cl)
		return nil, err
	}
	return resp, nil
}

// peerClients are the broker's clients to other brokers for inter-broker
// requests that are not replication (WriteTxnMarkers, and the asks of
// peerClients.ask: replicamgr's delete barrier, FindCoordinator's check
// with the coordinator): one per peer, made
// on first use, dropped after a failure so the next use dials afresh, all
// closed with the broker. Bounded by the number of brokers.
type peerClients struct {
	mu      sync.Mutex
	clients map[int32]*kgo.Client
}

func (pc *peerClients) client(b *Broker, node int32) (*kgo.Client, error) {
	pc.mu.Lock()
	defer pc.mu.Unlock()
	if cl := pc.clients[node]; cl != nil {
		return cl, nil
	}
	e, ok := b.image().Endpoint(node, b.interBrokerListener())
	if !ok {
		return nil, fmt.Errorf("broker %d has no %s endpoint", node, b.interBrokerListener())
	}
	opts := append([]kgo.Opt{kgo.SeedBrokers(net.JoinHostPort(e.Host, strconv.Itoa(int(e.Port)))),
		kgo.RequestRetries(0), kgo.DialTimeout(2 * time.Second),
		kgo.ClientID(peerClientID(b.cfg.NodeID))}, b.interBrokerOpts...)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, err
	}
	if pc.clients == nil {
		pc.clients = map[int32]*kgo.Client{}
	}
	pc.clients[node] = cl
	return cl, nil
}

func (pc *peerClients) drop(node int32, cl *kgo.Client) {
	pc.mu.Lock()
	if pc.clients[node] == cl {
		delete(pc.clients, node)
	}
	pc.mu.Unlock()
	cl.Close()
}

func (pc *peerClients) closeAll() {
	pc.mu.Lock()
	cls := pc.clients
	pc.clients = nil
	pc.mu.Unlock()
	for _, cl := range cls {
		cl.Close()
	}
}

// ensureTxnTopic asks the controller for the transaction state topic if
// the image lacks it; FindCoordinator retries a failure.
func (b *Broker) ensureTxnTopic() {
	b.ensureInternalTopic(txnTopic, b.cfg.TxnTopicPartitions, b.cfg.TxnTopicReplication, map[string]string{
		// Transaction state must never age out by time; compaction keeps
		// each id's latest record.
		"cleanup.policy": "compact", "retention.ms": "-1", "segment.bytes": strconv.FormatInt(int64(b.cfg.TxnTopicSegmentBytes), 10),
		"min.insync.replicas": strconv.Itoa(int(b.cfg.TxnTopicMinISR)),
	})
}
