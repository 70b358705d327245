package broker

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
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
//   - With a transactional id: refused (no transaction coordinator), with
//     TRANSACTIONAL_ID_AUTHORIZATION_FAILED, which clients do not retry.
//
// Version notes:
//   - v2: flexible; v3: producer id/epoch in the request (KIP-360);
//     v5: KIP-890 (only meaningful with transactions)
func init() { regKey(22, 0, 5, handleInitProducerID) }

func handleInitProducerID(b *Broker, cc *connCtx, kreq kmsg.Request, respond func(kmsg.Response)) {
	req := kreq.(*kmsg.InitProducerIDRequest)
	resp := req.ResponseKind().(*kmsg.InitProducerIDResponse)
	resp.ProducerID, resp.ProducerEpoch = -1, -1
	if req.TransactionalID != nil {
		resp.ErrorCode = kerr.TransactionalIDAuthorizationFailed.Code
		respond(resp)
		return
	}
	b.goLoop(func() {
		ctx, cancel := adminCtx(cc.ctx, 0)
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
