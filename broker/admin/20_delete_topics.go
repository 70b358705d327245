package admin

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordlog/fjord/broker/acl"
	"github.com/fjordlog/fjord/broker/api"
)

// DeleteTopics: v0-6
//
// Behaviour:
//   - Forwarded to the active controller, which commits the deletion to the
//     metadata log; the answer comes once this broker's image and every
//     other live broker's have applied the deletion
//     (replicamgr/peerbarrier.go), within the request's timeout: after the
//     answer no broker lists it, and every broker deletes its replicas'
//     files. A broker still behind at the timeout is named in the topic's
//     error message (the deletion stands). Kafka lets the other brokers lag. Unknown
//     names are UNKNOWN_TOPIC_OR_PARTITION and unknown ids UNKNOWN_TOPIC_ID;
//     delete.topic.enable=false (on the controller) gives
//     TOPIC_DELETION_DISABLED.
//
// Version notes:
//   - v4: flexible; v5: error messages; v6: topic ids (KIP-516)
func deleteTopicsEntry(h Host) api.Entry {
	return api.Entry{
		Key: 20, Client: api.Versions(0, 6), Handle: bindTo(h, handleDeleteTopics),
		Controller:    api.Versions(0, 6),
		Rule:          api.Needs("DELETE on TOPIC", 5, checkWith(h, checkDeleteTopics)),
		Mutates:       true,
		ErrorResponse: errorDeleteTopics,
	}
}

func handleDeleteTopics(h Host, cc *api.Conn, kreq kmsg.Request, respond func(kmsg.Response)) {
	req := kreq.(*kmsg.DeleteTopicsRequest)
	// The wait for every live broker (api.ForwardTo, replicamgr/peerbarrier.go)
	// is what lets the answer promise that no broker lists the topics.
	api.Forward(h, cc, req, api.Forwarding[*kmsg.DeleteTopicsResponse]{TimeoutMs: req.TimeoutMillis}, respond)
}

func checkDeleteTopics(h Host, z *api.Authz, kreq kmsg.Request) (kmsg.Response, func(kmsg.Response)) {
	req := kreq.(*kmsg.DeleteTopicsRequest)
	var deniedNames []string
	var deniedTopics []kmsg.DeleteTopicsRequestTopic
	if req.TopicNames != nil {
		keep := make([]string, 0, len(req.TopicNames))
		for _, n := range req.TopicNames {
			if z.Ok(acl.OpDelete, acl.ResourceTopic, n) {
				keep = append(keep, n)
			} else {
				deniedNames = append(deniedNames, n)
			}
		}
		req.TopicNames = keep
	}
	if req.Topics != nil {
		keep := make([]kmsg.DeleteTopicsRequestTopic, 0, len(req.Topics))
		for _, t := range req.Topics {
			name := ""
			if t.Topic != nil {
				name = *t.Topic
			}
			if z.Ok(acl.OpDelete, acl.ResourceTopic, h.TopicName(name, t.TopicID)) {
				keep = append(keep, t)
			} else {
				deniedTopics = append(deniedTopics, t)
			}
		}
		req.Topics = keep
	}
	if len(deniedNames)+len(deniedTopics) == 0 {
		return nil, nil
	}
	fill := func(resp *kmsg.DeleteTopicsResponse) {
		for _, n := range deniedNames {
			rt := kmsg.NewDeleteTopicsResponseTopic()
			rt.Topic, rt.ErrorCode = &n, api.TopicDenied
			resp.Topics = append(resp.Topics, rt)
		}
		for _, t := range deniedTopics {
			rt := kmsg.NewDeleteTopicsResponseTopic()
			rt.Topic, rt.TopicID, rt.ErrorCode = t.Topic, t.TopicID, api.TopicDenied
			resp.Topics = append(resp.Topics, rt)
		}
	}
	if len(req.TopicNames)+len(req.Topics) == 0 {
		resp := req.ResponseKind().(*kmsg.DeleteTopicsResponse)
		fill(resp)
		return resp, nil
	}
	return nil, func(r kmsg.Response) { fill(r.(*kmsg.DeleteTopicsResponse)) }
}

func errorDeleteTopics(kreq kmsg.Request, code int16) kmsg.Response {
	req := kreq.(*kmsg.DeleteTopicsRequest)
	r := req.ResponseKind().(*kmsg.DeleteTopicsResponse)
	for _, n := range req.TopicNames {
		st := kmsg.NewDeleteTopicsResponseTopic()
		st.Topic, st.ErrorCode = &n, code
		r.Topics = append(r.Topics, st)
	}
	for _, t := range req.Topics {
		st := kmsg.NewDeleteTopicsResponseTopic()
		st.Topic, st.TopicID, st.ErrorCode = t.Topic, t.TopicID, code
		r.Topics = append(r.Topics, st)
	}
	return r
}
