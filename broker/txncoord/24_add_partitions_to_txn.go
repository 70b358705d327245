package txncoord

import (
	"sync"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordlog/fjord/broker/acl"
	"github.com/fjordlog/fjord/broker/api"
	"github.com/fjordlog/fjord/broker/txn"
)

// AddPartitionsToTxn: v0-5
//
// Behaviour:
//   - Served by the transactional id's coordinator (broker/txncoord):
//     NOT_COORDINATOR elsewhere, COORDINATOR_LOAD_IN_PROGRESS while its
//     partition loads.
//   - A partition that does not exist is UNKNOWN_TOPIC_OR_PARTITION and the
//     request's other partitions OPERATION_NOT_ATTEMPTED, as Kafka does;
//     __transaction_state cannot be written in a transaction
//     (TOPIC_AUTHORIZATION_FAILED).
//   - The partitions are added once the coordinator's record of them is
//     committed (acks=all on __transaction_state).
//
// Version notes:
//   - v3: flexible; v4: batched transactions and VerifyOnly, sent by
//     brokers (KIP-890 part 1); v5: TRANSACTION_ABORTABLE
func addPartitionsToTxnEntry(h APIHost) api.Entry {
	return api.Entry{
		Key: 24, Client: api.Versions(0, 5), Handle: bind(h, handleAddPartitionsToTxn),
		Rule: api.Needs("WRITE on TRANSACTIONAL_ID and WRITE on TOPIC", 3, checkAddPartitionsToTxn),
	}
}

func handleAddPartitionsToTxn(h APIHost, cc *api.Conn, kreq kmsg.Request, respond func(kmsg.Response)) {
	req := kreq.(*kmsg.AddPartitionsToTxnRequest)
	resp := req.ResponseKind().(*kmsg.AddPartitionsToTxnResponse)
	if req.Version < 4 {
		var topics []txnTopicPartitions
		for _, t := range req.Topics {
			topics = append(topics, txnTopicPartitions{t.Topic, t.Partitions})
		}
		addPartitionsToTxn(h, req.Version, req.TransactionalID, req.ProducerID, req.ProducerEpoch, false, topics, func(codes []txn.PartitionCode) {
			for _, tp := range groupCodes(codes) {
				rt := kmsg.NewAddPartitionsToTxnResponseTopic()
				rt.Topic = tp.topic
				for _, pc := range tp.codes {
					rp := kmsg.NewAddPartitionsToTxnResponseTopicPartition()
					rp.Partition, rp.ErrorCode = pc.Partition, pc.Code
					rt.Partitions = append(rt.Partitions, rp)
				}
				resp.Topics = append(resp.Topics, rt)
			}
			respond(resp)
		})
		return
	}
	var mu sync.Mutex
	left := len(req.Transactions)
	resp.Transactions = make([]kmsg.AddPartitionsToTxnResponseTransaction, len(req.Transactions))
	if left == 0 {
		respond(resp)
		return
	}
	for i, rt := range req.Transactions {
		var topics []txnTopicPartitions
		for _, t := range rt.Topics {
			topics = append(topics, txnTopicPartitions{t.Topic, t.Partitions})
		}
		addPartitionsToTxn(h, req.Version, rt.TransactionalID, rt.ProducerID, rt.ProducerEpoch, rt.VerifyOnly, topics, func(codes []txn.PartitionCode) {
			out := kmsg.NewAddPartitionsToTxnResponseTransaction()
			out.TransactionalID = rt.TransactionalID
			for _, tp := range groupCodes(codes) {
				t := kmsg.NewAddPartitionsToTxnResponseTransactionTopic()
				t.Topic = tp.topic
				for _, pc := range tp.codes {
					p := kmsg.NewAddPartitionsToTxnResponseTransactionTopicPartition()
					p.Partition, p.ErrorCode = pc.Partition, pc.Code
					t.Partitions = append(t.Partitions, p)
				}
				out.Topics = append(out.Topics, t)
			}
			mu.Lock()
			resp.Transactions[i] = out
			left--
			done := left == 0
			mu.Unlock()
			if done {
				respond(resp)
			}
		})
	}
}

type txnTopicPartitions struct {
	topic      string
	partitions []int32
}

type topicCodes struct {
	topic string
	codes []txn.PartitionCode
}

// groupCodes groups per-partition codes by topic, in first-seen order.
func groupCodes(codes []txn.PartitionCode) []topicCodes {
	var out []topicCodes
	idx := map[string]int{}
	for _, c := range codes {
		i, ok := idx[c.Topic]
		if !ok {
			i = len(out)
			idx[c.Topic] = i
			out = append(out, topicCodes{topic: c.Topic})
		}
		out[i].codes = append(out[i].codes, c)
	}
	return out
}

// addPartitionsToTxn checks the partitions and hands one transaction's
// partitions to the coordinator; done gets a code per partition.
func addPartitionsToTxn(h APIHost, version int16, id string, pid int64, epoch int16, verifyOnly bool, topics []txnTopicPartitions, done func([]txn.PartitionCode)) {
	var all []txn.TopicPartition
	for _, t := range topics {
		for _, p := range t.partitions {
			all = append(all, txn.TopicPartition{Topic: t.topic, Partition: p})
		}
	}
	every := func(code int16) []txn.PartitionCode {
		out := make([]txn.PartitionCode, len(all))
		for i, tp := range all {
			out[i] = txn.PartitionCode{TopicPartition: tp, Code: code}
		}
		return out
	}
	if code := requestCode(h, id); code != 0 {
		done(every(code))
		return
	}
	// Partitions that do not exist fail the request, the others are not
	// attempted (Kafka's order: authorization, then existence).
	bad := map[txn.TopicPartition]int16{}
	for _, tp := range all {
		switch {
		case tp.Topic == Topic:
			bad[tp] = kerr.TopicAuthorizationFailed.Code
		case !h.Topic(tp.Topic).Has(tp.Partition):
			bad[tp] = kerr.UnknownTopicOrPartition.Code
		}
	}
	if len(bad) > 0 {
		out := every(kerr.OperationNotAttempted.Code)
		for i := range out {
			if c, ok := bad[out[i].TopicPartition]; ok {
				out[i].Code = c
			}
		}
		done(out)
		return
	}
	h.Txns().AddPartitions(txn.AddPartitionsRequest{TxnID: id, ProducerID: pid, ProducerEpoch: epoch, Partitions: all,
		VerifyOnly: verifyOnly, Version: version}, func(a txn.Answer) {
		if a.Partitions == nil {
			done(every(a.Code))
			return
		}
		done(a.Partitions)
	})
}

// checkAddPartitionsToTxn (v0-3, a producer's own request): a denied
// transactional id fails every partition; otherwise a denied topic fails
// its partitions and, as Kafka does, the others are OPERATION_NOT_ATTEMPTED
// and nothing is added. v4+ batches (brokers verifying transactions) need
// CLUSTER_ACTION.
func checkAddPartitionsToTxn(z *api.Authz, kreq kmsg.Request) (kmsg.Response, func(kmsg.Response)) {
	req := kreq.(*kmsg.AddPartitionsToTxnRequest)
	if req.Version >= 4 {
		if z.Cluster(acl.OpClusterAction) {
			return nil, nil
		}
		return api.SetTopError(req.ResponseKind(), api.ClusterDenied), nil
	}
	txnOK := z.Ok(acl.OpWrite, acl.ResourceTransactionalID, req.TransactionalID)
	deniedTopic := map[string]bool{}
	if txnOK {
		for _, t := range req.Topics {
			if !z.Ok(acl.OpWrite, acl.ResourceTopic, t.Topic) {
				deniedTopic[t.Topic] = true
			}
		}
		if len(deniedTopic) == 0 {
			return nil, nil
		}
	}
	resp := req.ResponseKind().(*kmsg.AddPartitionsToTxnResponse)
	for _, t := range req.Topics {
		rt := kmsg.NewAddPartitionsToTxnResponseTopic()
		rt.Topic = t.Topic
		code := kerr.OperationNotAttempted.Code
		switch {
		case !txnOK:
			code = api.TxnDenied
		case deniedTopic[t.Topic]:
			code = api.TopicDenied
		}
		for _, p := range t.Partitions {
			rp := kmsg.NewAddPartitionsToTxnResponseTopicPartition()
			rp.Partition, rp.ErrorCode = p, code
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp, nil
}
