package discovery

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordlog/fjord/broker/acl"
	"github.com/fjordlog/fjord/broker/api"
	"github.com/fjordlog/fjord/broker/coordinator"
	"github.com/fjordlog/fjord/broker/txncoord"
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
//   - Transactions (key type 1): the same with the transaction state topic
//     (__transaction_state, transaction.state.log.num.partitions
//     partitions, created on first need) and the transactional id.
//
// Version notes:
//   - v1: key type; v3: flexible; v4: several keys per request (KIP-699)
func findCoordinatorEntry(h Host) api.Entry {
	return api.Entry{
		Key: 10, Client: api.Versions(0, 4), Handle: bindTo(h, handleFindCoordinator),
		Rule: api.Needs("DESCRIBE on GROUP or TRANSACTIONAL_ID", 0, checkFindCoordinator),
	}
}

func handleFindCoordinator(h Host, cc *api.Conn, kreq kmsg.Request, respond func(kmsg.Response)) {
	req := kreq.(*kmsg.FindCoordinatorRequest)
	resp := req.ResponseKind().(*kmsg.FindCoordinatorResponse)
	img := h.Image()
	listener := h.ListenerName(cc)
	// The topic of the coordinator type, its placement and load status.
	topicName, ensure := coordinator.OffsetsTopic, h.EnsureOffsetsTopic
	status := h.Groups().Status
	switch req.CoordinatorType {
	case 0:
	case 1:
		topicName, ensure, status = txncoord.Topic, h.EnsureTxnTopic, h.Txns().Status
	default:
		topicName = ""
	}
	ot := img.Topic(topicName)
	if ot == nil && topicName != "" {
		h.Go(ensure) // clients retry COORDINATOR_NOT_AVAILABLE
	}
	find := func(key string) (node int32, host string, port int32, code int16, msg *string) {
		if topicName == "" {
			m := "unknown coordinator type"
			return -1, "", -1, kerr.InvalidRequest.Code, &m
		}
		if ot == nil || len(ot.Partitions) == 0 {
			return -1, "", -1, kerr.CoordinatorNotAvailable.Code, nil
		}
		pi := h.Groups().PartitionFor(key)
		if req.CoordinatorType == 1 {
			// Placed by the image's partition count, which the
			// coordinator follows a moment later.
			pi = txncoord.PartitionOf(key, int32(len(ot.Partitions)))
		}
		if int(pi) >= len(ot.Partitions) {
			return -1, "", -1, kerr.CoordinatorNotAvailable.Code, nil // the coordinator has not seen the topic yet
		}
		leader := ot.Partitions[pi].Leader
		e, ok := img.Endpoint(leader, listener)
		if leader < 0 || !ok {
			return -1, "", -1, kerr.CoordinatorNotAvailable.Code, nil
		}
		if leader == h.NodeID() && h.Code(status(key)) == kerr.CoordinatorLoadInProgress.Code {
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

func checkFindCoordinator(z *api.Authz, kreq kmsg.Request) (kmsg.Response, func(kmsg.Response)) {
	req := kreq.(*kmsg.FindCoordinatorRequest)
	rt, code := acl.ResourceGroup, api.GroupDenied
	if req.CoordinatorType == 1 {
		rt, code = acl.ResourceTransactionalID, api.TxnDenied
	}
	if req.Version < 4 {
		if z.Ok(acl.OpDescribe, rt, req.CoordinatorKey) {
			return nil, nil
		}
		resp := req.ResponseKind().(*kmsg.FindCoordinatorResponse)
		resp.ErrorCode, resp.NodeID = code, -1
		return resp, nil
	}
	keep := make([]string, 0, len(req.CoordinatorKeys))
	var denied []string
	for _, k := range req.CoordinatorKeys {
		if z.Ok(acl.OpDescribe, rt, k) {
			keep = append(keep, k)
		} else {
			denied = append(denied, k)
		}
	}
	if len(denied) == 0 {
		return nil, nil
	}
	req.CoordinatorKeys = keep
	fill := func(resp *kmsg.FindCoordinatorResponse) {
		for _, k := range denied {
			c := kmsg.NewFindCoordinatorResponseCoordinator()
			c.Key, c.NodeID, c.ErrorCode = k, -1, code
			resp.Coordinators = append(resp.Coordinators, c)
		}
	}
	if len(keep) == 0 {
		resp := req.ResponseKind().(*kmsg.FindCoordinatorResponse)
		fill(resp)
		return resp, nil
	}
	return nil, func(r kmsg.Response) { fill(r.(*kmsg.FindCoordinatorResponse)) }
}
