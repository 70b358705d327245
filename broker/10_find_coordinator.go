package broker

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// FindCoordinator: v0-4
//
// Behaviour:
//   - Fjord has no group or transaction coordinator yet, so every key gets
//     COORDINATOR_NOT_AVAILABLE with a message saying so; clients retry, as
//     they do while a real coordinator loads.
//   - It is advertised anyway because librdkafka decides which compression
//     codecs a broker supports from the API keys it lists: without key 10 it
//     silently sends lz4 batches uncompressed.
//
// Version notes:
//   - v1: key type (group or transaction); v3: flexible;
//     v4: several keys per request (KIP-699)
func init() { regKey(10, 0, 4, handleFindCoordinator) }

const noCoordinator = "consumer groups and transactions are not implemented in this Fjord version"

func handleFindCoordinator(b *Broker, cc *connCtx, kreq kmsg.Request, respond func(kmsg.Response)) {
	req := kreq.(*kmsg.FindCoordinatorRequest)
	resp := req.ResponseKind().(*kmsg.FindCoordinatorResponse)
	msg := noCoordinator
	b.log.Debug().Str("client_id", cc.clientID).Msg("FindCoordinator: " + noCoordinator)
	if req.Version >= 4 {
		for _, key := range req.CoordinatorKeys {
			c := kmsg.NewFindCoordinatorResponseCoordinator()
			c.Key, c.NodeID, c.Port = key, -1, -1
			c.ErrorCode = kerr.CoordinatorNotAvailable.Code
			c.ErrorMessage = &msg
			resp.Coordinators = append(resp.Coordinators, c)
		}
	} else {
		resp.ErrorCode = kerr.CoordinatorNotAvailable.Code
		resp.ErrorMessage = &msg
		resp.NodeID, resp.Port = -1, -1
	}
	respond(resp)
}
