package broker

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// FindCoordinator: v0-4
//
// Behaviour:
//   - Groups (key type 0): the coordinator is the leader of the group's
//     offsets-topic partition (Java hashCode of the group id modulo the
//     partition count, as Kafka computes it) — on a single node, this node.
//     While that partition's offsets are loading: COORDINATOR_LOAD_IN_PROGRESS.
//   - Transactions (key type 1): COORDINATOR_NOT_AVAILABLE; Fjord has no
//     transaction coordinator.
//
// Version notes:
//   - v1: key type; v3: flexible; v4: several keys per request (KIP-699)
func init() { regKey(10, 0, 4, handleFindCoordinator) }

func handleFindCoordinator(b *Broker, cc *connCtx, kreq kmsg.Request, respond func(kmsg.Response)) {
	req := kreq.(*kmsg.FindCoordinatorRequest)
	resp := req.ResponseKind().(*kmsg.FindCoordinatorResponse)
	adv := b.advertised[cc.listener]
	find := func(key string) (node int32, host string, port int32, code int16, msg *string) {
		if req.CoordinatorType != 0 {
			m := "transactions are not supported"
			return -1, "", -1, kerr.CoordinatorNotAvailable.Code, &m
		}
		if !b.offsets.isLoaded(key) {
			return -1, "", -1, kerr.CoordinatorLoadInProgress.Code, nil
		}
		return b.cfg.NodeID, adv.Host, adv.Port, 0, nil
	}
	if req.Version >= 4 {
		for _, key := range req.CoordinatorKeys {
			c := kmsg.NewFindCoordinatorResponseCoordinator()
			c.Key = key
			c.NodeID, c.Host, c.Port, c.ErrorCode, c.ErrorMessage = find(key)
			resp.Coordinators = append(resp.Coordinators, c)
		}
	} else {
		resp.NodeID, resp.Host, resp.Port, resp.ErrorCode, resp.ErrorMessage = find(req.CoordinatorKey)
	}
	respond(resp)
}
