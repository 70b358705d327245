package admin

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordlog/fjord/broker/acl"
	"github.com/fjordlog/fjord/broker/api"
)

// CreatePartitions: v0-3
//
// Behaviour:
//   - Forwarded to the active controller, which grows each topic to Count
//     partitions, placed automatically or by the request's assignment of
//     the new partitions, and commits them; the answer comes once this
//     broker's image has them. Errors as Kafka: UNKNOWN_TOPIC_OR_PARTITION,
//     INVALID_PARTITIONS when Count is not above the current count,
//     INVALID_REPLICATION_FACTOR when the topic's replication factor exceeds
//     the live brokers, INVALID_REPLICA_ASSIGNMENT, INVALID_REQUEST for a
//     topic named twice.
//   - New partitions whose replicas would take this broker past its
//     descriptor budget are POLICY_VIOLATION (replicamgr/fdbudget.go), checked here.
//   - ValidateOnly checks and changes nothing.
//
// Version notes:
//   - v2: flexible; v3: same as v2 (KIP-1075 bump)
func createPartitionsEntry(h Host) api.Entry {
	return api.Entry{
		Key: 37, Client: api.Versions(0, 3), Handle: bindTo(h, handleCreatePartitions),
		Controller:    api.Versions(0, 3),
		Rule:          api.Needs("ALTER on TOPIC", 4, checkCreatePartitions),
		Mutates:       true,
		ErrorResponse: errorCreatePartitions,
	}
}

func handleCreatePartitions(h Host, cc *api.Conn, kreq kmsg.Request, respond func(kmsg.Response)) {
	req := kreq.(*kmsg.CreatePartitionsRequest)
	var refused []kmsg.CreatePartitionsResponseTopic
	api.Forward(h, cc, req, api.Forwarding[*kmsg.CreatePartitionsResponse]{TimeoutMs: req.TimeoutMillis,
		Prepare: func() bool {
			refused = h.Replicas().RefuseCreatePartitions(req)
			return len(req.Topics) > 0
		},
		Finish: func(_ context.Context, resp *kmsg.CreatePartitionsResponse, _ error) kmsg.Response {
			resp.Topics = append(resp.Topics, refused...)
			return resp
		}}, respond)
}

func checkCreatePartitions(z *api.Authz, kreq kmsg.Request) (kmsg.Response, func(kmsg.Response)) {
	req := kreq.(*kmsg.CreatePartitionsRequest)
	var denied []kmsg.CreatePartitionsRequestTopic
	req.Topics, denied = api.Split(z, acl.OpAlter, req.Topics, func(t kmsg.CreatePartitionsRequestTopic) string { return t.Topic })
	if len(denied) == 0 {
		return nil, nil
	}
	fill := func(resp *kmsg.CreatePartitionsResponse) {
		for _, t := range denied {
			rt := kmsg.NewCreatePartitionsResponseTopic()
			rt.Topic, rt.ErrorCode = t.Topic, api.TopicDenied
			resp.Topics = append(resp.Topics, rt)
		}
	}
	if len(req.Topics) == 0 {
		resp := req.ResponseKind().(*kmsg.CreatePartitionsResponse)
		fill(resp)
		return resp, nil
	}
	return nil, func(r kmsg.Response) { fill(r.(*kmsg.CreatePartitionsResponse)) }
}

func errorCreatePartitions(kreq kmsg.Request, code int16) kmsg.Response {
	req := kreq.(*kmsg.CreatePartitionsRequest)
	r := req.ResponseKind().(*kmsg.CreatePartitionsResponse)
	for _, t := range req.Topics {
		st := kmsg.NewCreatePartitionsResponseTopic()
		st.Topic, st.ErrorCode = t.Topic, code
		r.Topics = append(r.Topics, st)
	}
	return r
}
