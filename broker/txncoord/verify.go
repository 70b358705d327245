package txncoord

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordlog/fjord/broker/replica"
	"github.com/fjordlog/fjord/broker/txn"
	"github.com/fjordlog/fjord/storage/recordbatch"
)

// A produce's check with the transaction coordinator (KIP-890, Kafka's
// AddPartitionsToTxnManager): the produce path stays in the broker, but
// what it asks, of whom, and how the answer maps to produce codes is the
// transaction room's. Up to Produce v11 the check only verifies that the
// partition is in the producer's transaction (part 1); from v12 it adds
// the partition (part 2: the producer sends no AddPartitionsToTxn), with
// the rules of a client's add.

// VerifyTimeout bounds a produce's check with the transaction
// coordinator.
const VerifyTimeout = 5 * time.Second

// produceAddsPartitions reports whether a Produce of version v adds its
// partitions to the transaction rather than only verifying them (Kafka:
// produceRequestVersionToTransactionSupportedOperation, "addPartition"
// above v11).
func produceAddsPartitions(v int16) bool { return v >= 12 }

// VerifyProduce checks with id's coordinator the partitions of req whose
// transactional batch would open the producer's transaction here — from
// Produce v12 by adding them to it — and returns the codes of those that
// may not be written (nil: all may). Partitions where the producer's
// transaction is already open here, and non-transactional batches, need
// no check. req's topics are named (Produce v13 names them by id: the
// produce path fills in their names first).
func VerifyProduce(ctx context.Context, h APIHost, id string, req *kmsg.ProduceRequest) map[txn.TopicPartition]int16 {
	var parts []txn.TopicPartition
	pid, epoch := int64(-1), int16(-1)
	for _, rt := range req.Topics {
		t := h.Topic(rt.Topic)
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
	ctx, cancel := context.WithTimeout(ctx, VerifyTimeout)
	defer cancel()
	codes := askCoordinator(ctx, h, id, pid, epoch, parts, produceAddsPartitions(req.Version))
	out := map[txn.TopicPartition]int16{}
	for _, tp := range parts {
		code, answered := codes[tp]
		if c := produceCode(req.Version, code, answered); c != 0 {
			out[tp] = c
		}
	}
	return out
}

// produceCode maps the coordinator's answer for one partition (answered
// false: no answer, the coordinator unknown, unreachable or too slow) to
// the code of a Produce of version v, as Kafka's AddPartitionsToTxnManager
// and ReplicaManager do.
func produceCode(v, code int16, answered bool) int16 {
	switch {
	case !answered:
		// Kafka: NETWORK_EXCEPTION, or COORDINATOR_NOT_AVAILABLE when it
		// knows no coordinator; both become the code below.
		return kerr.NotEnoughReplicas.Code
	case code == kerr.ProducerFenced.Code:
		// A producer expects INVALID_PRODUCER_EPOCH on Produce when fenced
		// (librdkafka takes it as fatal, PRODUCER_FENCED only as
		// abortable).
		return kerr.InvalidProducerEpoch.Code
	case code == kerr.TransactionAbortable.Code && v <= 10:
		return kerr.InvalidTxnState.Code // v11 added TRANSACTION_ABORTABLE
	case code == kerr.ClusterAuthorizationFailed.Code:
		// The peer refused this broker's request: the producer is told the
		// check did not complete, never about the cluster's ACLs.
		return kerr.InvalidTxnState.Code
	case code == kerr.ConcurrentTransactions.Code && produceAddsPartitions(v):
		// Common while the previous transaction's markers are written;
		// a v12 producer retries it (Kafka passes it on).
		return code
	case code == kerr.ConcurrentTransactions.Code, code == kerr.NetworkException.Code,
		code == kerr.CoordinatorLoadInProgress.Code, code == kerr.CoordinatorNotAvailable.Code,
		code == kerr.NotCoordinator.Code:
		// Retriable for the coordinator, but older producers may not
		// retry them on Produce: NOT_ENOUGH_REPLICAS, which they do retry
		// and which does not refresh their metadata.
		return kerr.NotEnoughReplicas.Code
	}
	return code // NONE, INVALID_TXN_STATE, INVALID_PRODUCER_ID_MAPPING, ...
}

// askCoordinator sends an AddPartitionsToTxn for one transaction to its
// coordinator (this node's own without the network) — VerifyOnly unless
// add — and returns the per-partition codes; nil when the coordinator
// could not be asked. The coordinator handles it as any AddPartitionsToTxn
// v4+ (addPartitionsToTxn), here or on its node.
func askCoordinator(ctx context.Context, h APIHost, id string, pid int64, epoch int16, parts []txn.TopicPartition, add bool) map[txn.TopicPartition]int16 {
	tt := h.Image().Topic(Topic)
	if tt == nil || len(tt.Partitions) == 0 {
		return nil
	}
	leader := tt.Partitions[PartitionOf(id, int32(len(tt.Partitions)))].Leader
	if leader < 0 {
		return nil
	}
	groups := txn.ByTopic(parts)
	out := map[txn.TopicPartition]int16{}
	if leader == h.NodeID() {
		var topics []txnTopicPartitions
		for _, g := range groups {
			topics = append(topics, txnTopicPartitions{g.Topic, g.Partitions})
		}
		done := make(chan []txn.PartitionCode, 1)
		addPartitionsToTxn(h, verifyVersion, id, pid, epoch, !add, topics, func(codes []txn.PartitionCode) { done <- codes })
		select {
		case codes := <-done:
			for _, pc := range codes {
				out[pc.TopicPartition] = pc.Code
			}
			return out
		case <-ctx.Done():
			return nil
		}
	}
	req := kmsg.NewPtrAddPartitionsToTxnRequest()
	req.Version = verifyVersion
	tx := kmsg.NewAddPartitionsToTxnRequestTransaction()
	tx.TransactionalID, tx.ProducerID, tx.ProducerEpoch, tx.VerifyOnly = id, pid, epoch, !add
	for _, g := range groups {
		t := kmsg.NewAddPartitionsToTxnRequestTransactionTopic()
		t.Topic, t.Partitions = g.Topic, g.Partitions
		tx.Topics = append(tx.Topics, t)
	}
	req.Transactions = append(req.Transactions, tx)
	kresp, err := h.Ask(ctx, leader, req)
	if err != nil {
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

// verifyVersion is the AddPartitionsToTxn version of a produce's check:
// the brokers' batched form (v4+), at the version that knows
// TRANSACTION_ABORTABLE. Toward a peer the client negotiates it down if
// need be.
const verifyVersion = 5
