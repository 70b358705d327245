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

// A produce's check with the transaction coordinator (KIP-890 part 1,
// Kafka's AddPartitionsToTxnManager): the produce path stays in the
// broker, but what it asks, of whom, and how the answer maps to produce
// codes is the transaction room's.

// VerifyTimeout bounds a produce's check with the transaction
// coordinator.
const VerifyTimeout = 5 * time.Second

// VerifyProduce checks with id's coordinator the partitions of req whose
// transactional batch would open the producer's transaction here, and
// returns the codes of those that may not be written (nil: all may).
// Partitions where the producer's transaction is already open here, and
// non-transactional batches, need no check.
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
	codes := askCoordinator(ctx, h, id, pid, epoch, parts)
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

// askCoordinator sends an AddPartitionsToTxn VerifyOnly for one
// transaction to its coordinator (this node's own without the network)
// and returns the per-partition codes; nil when the coordinator could not
// be asked.
func askCoordinator(ctx context.Context, h APIHost, id string, pid int64, epoch int16, parts []txn.TopicPartition) map[txn.TopicPartition]int16 {
	tt := h.Image().Topic(Topic)
	if tt == nil || len(tt.Partitions) == 0 {
		return nil
	}
	leader := tt.Partitions[PartitionOf(id, int32(len(tt.Partitions)))].Leader
	if leader < 0 {
		return nil
	}
	out := map[txn.TopicPartition]int16{}
	if leader == h.NodeID() {
		done := make(chan txn.Answer, 1)
		h.Txns().AddPartitions(txn.AddPartitionsRequest{TxnID: id, ProducerID: pid, ProducerEpoch: epoch, Partitions: parts,
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
