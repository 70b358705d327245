package txncoord

import (
	"context"

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
//     log, so ids are unique across the cluster (AllocProducerID).
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
func initProducerIDEntry(h APIHost) api.Entry {
	return api.Entry{
		Key: 22, Client: api.Versions(0, 5), Handle: bind(h, handleInitProducerID),
		Rule: api.Needs("WRITE on TRANSACTIONAL_ID; idempotent: IDEMPOTENT_WRITE on CLUSTER or WRITE on any TOPIC", 3, checkInitProducerID),
	}
}

func handleInitProducerID(h APIHost, cc *api.Conn, kreq kmsg.Request, respond func(kmsg.Response)) {
	req := kreq.(*kmsg.InitProducerIDRequest)
	resp := req.ResponseKind().(*kmsg.InitProducerIDResponse)
	resp.ProducerID, resp.ProducerEpoch = -1, -1
	if req.TransactionalID != nil {
		id := *req.TransactionalID
		if code := requestCode(h, id); code != 0 {
			resp.ErrorCode = code
			respond(resp)
			return
		}
		pid, epoch := int64(-1), int16(-1)
		if req.Version >= 3 {
			pid, epoch = req.ProducerID, req.ProducerEpoch
		}
		h.Txns().InitProducerID(txn.InitRequest{TxnID: id, TimeoutMs: req.TransactionTimeoutMillis,
			ProducerID: pid, ProducerEpoch: epoch, Version: req.Version}, func(a txn.Answer) {
			resp.ErrorCode, resp.ProducerID, resp.ProducerEpoch = a.Code, a.ProducerID, a.ProducerEpoch
			respond(resp)
		})
		return
	}
	c := h.Txns()
	h.Go(func() {
		ctx, cancel := context.WithTimeout(cc.Ctx, requestTimeout)
		defer cancel()
		id, err := c.AllocProducerID(ctx)
		if err != nil {
			c.log.Error().Err(err).Msg("allocating producer id")
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

// AllocProducerID hands out an idempotent producer's id. Ids come in
// blocks from the controller (Host.AllocateProducerIDs), recorded in the
// metadata log before use, so they are unique across the cluster and never
// reused after a crash. The transactional ids' tables fetch blocks of
// their own.
func (c *Coordinator) AllocProducerID(ctx context.Context) (int64, error) {
	c.pids.Lock()
	if c.pids.next < c.pids.limit {
		id := c.pids.next
		c.pids.next++
		c.pids.Unlock()
		return id, nil
	}
	c.pids.Unlock()
	start, n, err := c.host.AllocateProducerIDs(ctx)
	if err != nil {
		return 0, err
	}
	c.pids.Lock()
	defer c.pids.Unlock()
	// Concurrent callers may each fetch a block; the later one wins and
	// the rest of the earlier block is skipped, never reused.
	c.pids.next, c.pids.limit = start+1, start+int64(n)
	return start, nil
}
