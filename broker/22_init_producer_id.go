package broker

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordlog/fjord/broker/acl"
	"github.com/fjordlog/fjord/broker/api"
	"github.com/fjordlog/fjord/broker/txn"
)

// InitProducerID: v0-5
//
// Behaviour:
//   - Without a transactional id (the idempotent producer): a fresh producer
//     id at epoch 0 every time, as Kafka does. Ids come from blocks reserved
//     durably, so they are unique across restarts. An idempotent client that
//     must bump its epoch does so itself, per partition (KIP-360); the broker
//     keeps the epoch per (producer id, partition).
//     Blocks of ids come from the active controller, through the metadata
//     log, so ids are unique across the cluster.
//   - With a transactional id: served by the id's transaction coordinator
//     (broker/txncoord; NOT_COORDINATOR elsewhere, COORDINATOR_LOAD_IN_PROGRESS
//     while its partition loads): the id keeps its producer id and gets the
//     next epoch, which fences every older producer of the id; an open
//     transaction is aborted first (the answer is then
//     CONCURRENT_TRANSACTIONS and the client retries, as with Kafka).
//
// Version notes:
//   - v2: flexible; v3: producer id/epoch in the request (KIP-360);
//     v5: KIP-890 (only meaningful with transactions)
func init() {
	register(func(b *Broker) api.Entry {
		return api.Entry{
			Key: 22, Client: api.Versions(0, 5), Handle: bind(b, handleInitProducerID),
			Rule: api.Needs("WRITE on TRANSACTIONAL_ID; idempotent: IDEMPOTENT_WRITE on CLUSTER or WRITE on any TOPIC", 3, checkInitProducerID),
		}
	})
}

func handleInitProducerID(b *Broker, cc *api.Conn, kreq kmsg.Request, respond func(kmsg.Response)) {
	req := kreq.(*kmsg.InitProducerIDRequest)
	resp := req.ResponseKind().(*kmsg.InitProducerIDResponse)
	resp.ProducerID, resp.ProducerEpoch = -1, -1
	if req.TransactionalID != nil {
		id := *req.TransactionalID
		if code := b.txnRequestCode(id); code != 0 {
			resp.ErrorCode = code
			respond(resp)
			return
		}
		pid, epoch := int64(-1), int16(-1)
		if req.Version >= 3 {
			pid, epoch = req.ProducerID, req.ProducerEpoch
		}
		b.txns.InitProducerID(txn.InitRequest{TxnID: id, TimeoutMs: req.TransactionTimeoutMillis,
			ProducerID: pid, ProducerEpoch: epoch, Version: req.Version}, func(a txn.Answer) {
			resp.ErrorCode, resp.ProducerID, resp.ProducerEpoch = a.Code, a.ProducerID, a.ProducerEpoch
			respond(resp)
		})
		return
	}
	b.goLoop(func() {
		ctx, cancel := adminCtx(cc.Ctx, 0)
		defer cancel()
		id, err := b.allocProducerID(ctx)
		if err != nil {
			b.log.Error().Err(err).Msg("allocating producer id")
			resp.ErrorCode = kerr.CoordinatorNotAvailable.Code
			respond(resp)
			return
		}
		resp.ProducerID, resp.ProducerEpoch = id, 0
		respond(resp)
	})
}

func checkInitProducerID(z *api.Authz, kreq kmsg.Request) (kmsg.Response, func(kmsg.Response)) {
	req := kreq.(*kmsg.InitProducerIDRequest)
	resp := req.ResponseKind().(*kmsg.InitProducerIDResponse)
	resp.ProducerID, resp.ProducerEpoch = -1, -1
	if req.TransactionalID != nil {
		if z.Ok(acl.OpWrite, acl.ResourceTransactionalID, *req.TransactionalID) {
			return nil, nil
		}
		resp.ErrorCode = api.TxnDenied
		return resp, nil
	}
	if z.Az.Authorize(z.Conn.Principal, z.Conn.ClientHost, acl.OpIdempotentWrite, acl.ResourceCluster, acl.ClusterName) ||
		z.Az.AuthorizeAny(z.Conn.Principal, z.Conn.ClientHost, acl.OpWrite, acl.ResourceTopic) {
		return nil, nil
	}
	z.Deny(acl.OpIdempotentWrite, acl.ResourceCluster, acl.ClusterName)
	resp.ErrorCode = api.ClusterDenied
	return resp, nil
}
