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
//     partition count, as Kafka computes it), read from this broker's image.
//     While that partition's offsets load on this node:
//     COORDINATOR_LOAD_IN_PROGRESS. Without an offsets topic (it is created
//     on first need, with offsets.topic.replication.factor replicas) or a
//     leader for the partition: COORDINATOR_NOT_AVAILABLE.
//   - Transactions (key type 1): COORDINATOR_NOT_AVAILABLE; Fjord has no
//     transaction coordinator.
//
// Version notes:
//   - v1: key type; v3: flexible; v4: several keys per request (KIP-699)
func init() { regKey(10, 0, 4, handleFindCoordinator) }

func handleFindCoordinator(b *Broker, cc *connCtx, kreq kmsg.Request, respond func(kmsg.Response)) {
	req := kreq.(*kmsg.FindCoordinatorRequest)
	resp := req.ResponseKind().(*kmsg.FindCoordinatorResponse)
	img := b.image()
	listener := b.advertised[cc.listener].Name
	ot := img.Topic(offsetsTopic)
	if ot == nil && req.CoordinatorType == 0 {
		b.goLoop(b.ensureOffsetsTopic) // clients retry COORDINATOR_NOT_AVAILABLE
	}
	find := func(key string) (node int32, host string, port int32, code int16, msg *string) {
		if req.CoordinatorType != 0 {
			m := "transactions are not supported"
			return -1, "", -1, kerr.CoordinatorNotAvailable.Code, &m
		}
		if ot == nil || len(ot.Partitions) == 0 {
			return -1, "", -1, kerr.CoordinatorNotAvailable.Code, nil
		}
		leader := ot.Partitions[b.coord.PartitionFor(key)].Leader
		e, ok := endpoint(img, leader, listener)
		if leader < 0 || !ok {
			return -1, "", -1, kerr.CoordinatorNotAvailable.Code, nil
		}
		if leader == b.cfg.NodeID && errorCode(b.coord.Status(key)) == kerr.CoordinatorLoadInProgress.Code {
			return -1, "", -1, kerr.CoordinatorLoadInProgress.Code, nil
		}
		return leader, e.Host, e.Port, 0, nil
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
