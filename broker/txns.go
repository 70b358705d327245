package broker

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordlog/fjord/broker/replica"
	"github.com/fjordlog/fjord/broker/txn"
	"github.com/fjordlog/fjord/broker/txncoord"
	"github.com/fjordlog/fjord/storage/recordbatch"
)

// The broker's side of the transaction coordinator (package
// broker/txncoord): its configuration, the host it runs on, the
// __transaction_state topic it is backed by, and the clients it sends
// WriteTxnMarkers through. The handlers (22, 24-26, 65, 66) call it.

// txnTopic is the coordinator's topic of transaction state.
const txnTopic = txncoord.Topic

func (b *Broker) newTxnCoordinator() (*txncoord.Coordinator, error) {
	cfg := txn.DefaultConfig()
	cfg.MaxTimeoutMs = b.cfg.TxnMaxTimeoutMs
	cfg.IDExpirationMs = b.cfg.TxnIDExpirationMs
	return txncoord.New(b.ctx, txncoord.Config{Txn: cfg, Logger: b.log}, txnHost{b})
}

// txnHost gives the transaction coordinator what it needs of the broker.
type txnHost struct{ b *Broker }

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
		return h.b.writeTxnMarkers(ctx, req), nil
	}
	cl, err := h.b.peers.client(h.b, node)
	if err != nil {
		return nil, err
	}
	resp, err := cl.SeedBrokers()[0].Request(ctx, req)
	if err != nil {
		h.b.peers.drop(node, cl)
		return nil, err
	}
	return resp.(*kmsg.WriteTxnMarkersResponse), nil
}

// peerClients are the broker's clients to other brokers for inter-broker
// requests that are not replication (WriteTxnMarkers, and the Metadata
// asks of replicamgr's delete barrier): one per peer, made
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
	e, ok := endpoint(b.image(), node, b.interBrokerListener())
	if !ok {
		return nil, fmt.Errorf("broker %d has no %s endpoint", node, b.interBrokerListener())
	}
	opts := append([]kgo.Opt{kgo.SeedBrokers(net.JoinHostPort(e.Host, strconv.Itoa(int(e.Port)))),
		kgo.RequestRetries(0), kgo.DialTimeout(2 * time.Second),
		kgo.ClientID(fmt.Sprintf("fjord-txn-%d", b.cfg.NodeID))}, b.interBrokerOpts...)
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

// askMetadata sends req to peer's inter-broker listener, giving up after
// timeout; nil on any failure. A failed ask while ctx is live (an ask
// timed out included) drops the client, so the next ask dials afresh.
func (pc *peerClients) askMetadata(ctx context.Context, b *Broker, peer int32, req *kmsg.MetadataRequest, timeout time.Duration) *kmsg.MetadataResponse {
	cl, err := pc.client(b, peer)
	if err != nil {
		return nil
	}
	seeds := cl.SeedBrokers()
	if len(seeds) == 0 {
		return nil
	}
	askCtx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	kresp, err := seeds[0].Request(askCtx, req)
	if err != nil {
		if ctx.Err() == nil {
			pc.drop(peer, cl)
		}
		return nil
	}
	resp, _ := kresp.(*kmsg.MetadataResponse)
	return resp
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

// txnRequestCode is the error for a request about transactional id id
// that this node cannot take now: INVALID_REQUEST for an empty id,
// NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS; else 0.
func (b *Broker) txnRequestCode(id string) int16 {
	if id == "" {
		return kerr.InvalidRequest.Code
	}
	return errorCode(b.txns.Status(id))
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

// txnVerifyTimeout bounds a produce's check with the transaction
// coordinator (KIP-890 part 1).
const txnVerifyTimeout = 5 * time.Second

// verifyTxnProduce checks with id's coordinator the partitions of req
// whose transactional batch would open the producer's transaction here,
// and returns the codes of those that may not be written (nil: all may).
// Partitions where the producer's transaction is already open here, and
// non-transactional batches, need no check.
func (b *Broker) verifyTxnProduce(ctx context.Context, id string, req *kmsg.ProduceRequest) map[txn.TopicPartition]int16 {
	var parts []txn.TopicPartition
	pid, epoch := int64(-1), int16(-1)
	for _, rt := range req.Topics {
		t := b.replicas.Topic(rt.Topic)
		for _, rp := range rt.Partitions {
			info, err := recordbatch.ParseHeader(rp.Records)
			if err != nil || !info.Transactional || info.Control || info.ProducerID < 0 {
				continue // refused or appended as usual by the produce path
			}
			_, lg, _, code := t.Serving(rp.Partition, replica.Produce)
			if code != 0 || lg.InTransaction(info.ProducerID, info.ProducerEpoch) {
				continue
			}
			pid, epoch = info.ProducerID, info.ProducerEpoch
			parts = append(parts, txn.TopicPartition{Topic: rt.Topic, Partition: rp.Partition})
		}
	}
	if len(parts) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, txnVerifyTimeout)
	defer cancel()
	codes := b.askTxnCoordinator(ctx, id, pid, epoch, parts)
	out := map[txn.TopicPartition]int16{}
	for _, tp := range parts {
		switch code, ok := codes[tp]; {
		case ok && code == 0:
		case ok && (code == kerr.TransactionAbortable.Code || code == kerr.InvalidTxnState.Code):
			out[tp] = kerr.InvalidTxnState.Code // produce v11 and below know no TRANSACTION_ABORTABLE
		case ok && (code == kerr.InvalidProducerEpoch.Code || code == kerr.ProducerFenced.Code):
			// As Kafka's AddPartitionsToTxnManager: a producer expects
			// INVALID_PRODUCER_EPOCH on Produce when fenced (librdkafka
			// takes it as fatal, PRODUCER_FENCED only as abortable).
			out[tp] = kerr.InvalidProducerEpoch.Code
		case ok && code == kerr.InvalidProducerIDMapping.Code:
			out[tp] = code
		default:
			// The coordinator could not answer now: a code clients retry.
			out[tp] = kerr.NotEnoughReplicas.Code
		}
	}
	return out
}

// askTxnCoordinator sends an AddPartitionsToTxn VerifyOnly for one
// transaction to its coordinator (itself without the network) and returns
// the per-partition codes; nil when the coordinator could not be asked.
func (b *Broker) askTxnCoordinator(ctx context.Context, id string, pid int64, epoch int16, parts []txn.TopicPartition) map[txn.TopicPartition]int16 {
	tt := b.image().Topic(txnTopic)
	if tt == nil || len(tt.Partitions) == 0 {
		return nil
	}
	leader := tt.Partitions[txncoord.PartitionOf(id, int32(len(tt.Partitions)))].Leader
	if leader < 0 {
		return nil
	}
	out := map[txn.TopicPartition]int16{}
	if leader == b.cfg.NodeID {
		done := make(chan txn.Answer, 1)
		b.txns.AddPartitions(txn.AddPartitionsRequest{TxnID: id, ProducerID: pid, ProducerEpoch: epoch, Partitions: parts,
			VerifyOnly: true, Version: 4}, func(a txn.Answer) { done <- a })
		select {
		case a := <-done:
			for _, pc := range a.Partitions {
				out[pc.TopicPartition] = pc.Code
			}
			if a.Partitions == nil {
				for _, tp := range parts {
					out[tp] = a.Code
				}
			}
			return out
		case <-ctx.Done():
			return nil
		}
	}
	cl, err := b.peers.client(b, leader)
	if err != nil {
		return nil
	}
	req := kmsg.NewPtrAddPartitionsToTxnRequest()
	req.Version = 4
	tx := kmsg.NewAddPartitionsToTxnRequestTransaction()
	tx.TransactionalID, tx.ProducerID, tx.ProducerEpoch, tx.VerifyOnly = id, pid, epoch, true
	for _, g := range txn.ByTopic(parts) {
		t := kmsg.NewAddPartitionsToTxnRequestTransactionTopic()
		t.Topic, t.Partitions = g.Topic, g.Partitions
		tx.Topics = append(tx.Topics, t)
	}
	req.Transactions = append(req.Transactions, tx)
	kresp, err := cl.SeedBrokers()[0].Request(ctx, req)
	if err != nil {
		b.peers.drop(leader, cl)
		return nil
	}
	resp := kresp.(*kmsg.AddPartitionsToTxnResponse)
	for _, rt := range resp.Transactions {
		for _, t := range rt.Topics {
			for _, p := range t.Partitions {
				out[txn.TopicPartition{Topic: t.Topic, Partition: p.Partition}] = p.ErrorCode
			}
		}
	}
	if resp.ErrorCode != 0 {
		for _, tp := range parts {
			out[tp] = resp.ErrorCode
		}
	}
	return out
}
