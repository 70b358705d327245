package admin

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordlog/fjord/broker/acl"
	"github.com/fjordlog/fjord/broker/api"
	"github.com/fjordlog/fjord/broker/config"
)

// CreateTopics: v0-7
//
// Behaviour:
//   - Forwarded to the active controller, which validates each topic (name,
//     partitions, replication factor against the live brokers, replica
//     assignment, configs) and commits it to the metadata log; the answer
//     comes once this broker's own image has the topic.
//   - An existing name is TOPIC_ALREADY_EXISTS whatever the partition count:
//     never merged. A name given twice in one request is INVALID_REQUEST for
//     both, as in Kafka. Replication factor above the live brokers is
//     INVALID_REPLICATION_FACTOR.
//   - ValidateOnly (v1+) checks everything and creates nothing.
//   - A topic whose replicas would take this broker past its descriptor
//     budget (fjord.log.open.files.max, replicamgr/fdbudget.go) is POLICY_VIOLATION,
//     with a message naming the limit, checked here before forwarding.
//
// Version notes:
//   - v1: validate only, error messages; v5: flexible, returns partitions,
//     replication factor and configs (KIP-525); v7: topic id (KIP-516)
func createTopicsEntry(h Host) api.Entry {
	return api.Entry{
		Key: 19, Client: api.Versions(0, 7), Handle: bindTo(h, handleCreateTopics),
		Controller:    api.Versions(0, 7),
		Rule:          api.Needs("CREATE on CLUSTER or on TOPIC", 4, checkCreateTopics),
		Mutates:       true,
		ErrorResponse: errorCreateTopics,
	}
}

func handleCreateTopics(h Host, cc *api.Conn, kreq kmsg.Request, respond func(kmsg.Response)) {
	req := kreq.(*kmsg.CreateTopicsRequest)
	var refused []kmsg.CreateTopicsResponseTopic
	api.Forward(h, cc, req, api.Forwarding[*kmsg.CreateTopicsResponse]{TimeoutMs: req.TimeoutMillis,
		Prepare: func() bool {
			live := h.Live()
			refused = h.Replicas().RefuseCreateTopics(req, live.NumPartitions, live.DefaultReplication)
			return len(req.Topics) > 0
		},
		Finish: func(_ context.Context, resp *kmsg.CreateTopicsResponse, err error) kmsg.Response {
			resp = created(resp, err, refused)
			describeCreated(h, req, resp)
			return resp
		}}, respond)
}

// CreateTopics is CreateTopics for the node itself (auto-creation, the
// internal topics): the topics past the descriptor budget refused, the
// others forwarded, the answer once this node's image has the topics
// created.
func CreateTopics(ctx context.Context, h Host, req *kmsg.CreateTopicsRequest) *kmsg.CreateTopicsResponse {
	live := h.Live()
	refused := h.Replicas().RefuseCreateTopics(req, live.NumPartitions, live.DefaultReplication)
	resp := req.ResponseKind().(*kmsg.CreateTopicsResponse)
	var err error
	if len(req.Topics) > 0 {
		resp, err = api.ForwardTo[*kmsg.CreateTopicsResponse](ctx, h, req, 0, nil)
	}
	return created(resp, err, refused)
}

// created completes the answer to a forwarded CreateTopics: each topic of a
// controller that could not be reached (err) is REQUEST_TIMED_OUT saying
// why, and the topics refused here (Manager.RefuseCreateTopics) come last.
func created(resp *kmsg.CreateTopicsResponse, err error, refused []kmsg.CreateTopicsResponseTopic) *kmsg.CreateTopicsResponse {
	if err != nil {
		msg := "active controller unreachable: " + err.Error()
		for i := range resp.Topics {
			resp.Topics[i].ErrorMessage = &msg
		}
	}
	resp.Topics = append(resp.Topics, refused...)
	return resp
}

// describeCreated adds to each topic resp says was created its configs, as
// CreateTopics v5+ answers (KIP-525), and logs the configs Fjord does not
// act on.
func describeCreated(h Host, req *kmsg.CreateTopicsRequest, resp *kmsg.CreateTopicsResponse) {
	byName := map[string]*kmsg.CreateTopicsRequestTopic{}
	for i := range req.Topics {
		byName[req.Topics[i].Topic] = &req.Topics[i]
	}
	for i := range resp.Topics {
		st := &resp.Topics[i]
		rt := byName[st.Topic]
		if st.ErrorCode != 0 || rt == nil {
			continue
		}
		overrides := map[string]string{}
		for _, c := range rt.Configs {
			if c.Value != nil {
				overrides[c.Name] = *c.Value
			}
		}
		if un := config.UnsupportedTopicConfigs(overrides); len(un) > 0 && !req.ValidateOnly {
			h.Log().Warn().Str("topic", st.Topic).Strs("configs", un).Msg("topic created with configs Fjord does not act on yet")
		}
		for _, d := range config.TopicKeys() {
			v, override := d.Effective(h.Live(), overrides)
			c := kmsg.NewCreateTopicsResponseTopicConfig()
			c.Name = d.Name
			c.Value = &v
			c.Source = int8(kmsg.ConfigSourceDefaultConfig)
			if override {
				c.Source = int8(kmsg.ConfigSourceDynamicTopicConfig)
			}
			st.Configs = append(st.Configs, c)
		}
	}
}

func checkCreateTopics(z *api.Authz, kreq kmsg.Request) (kmsg.Response, func(kmsg.Response)) {
	req := kreq.(*kmsg.CreateTopicsRequest)
	if z.Az.Authorize(z.Conn.Principal, z.Conn.ClientHost, acl.OpCreate, acl.ResourceCluster, acl.ClusterName) {
		return nil, nil
	}
	var denied []kmsg.CreateTopicsRequestTopic
	req.Topics, denied = api.Split(z, acl.OpCreate, req.Topics, func(t kmsg.CreateTopicsRequestTopic) string { return t.Topic })
	if len(denied) == 0 {
		return nil, nil
	}
	fill := func(resp *kmsg.CreateTopicsResponse) {
		for _, t := range denied {
			rt := kmsg.NewCreateTopicsResponseTopic()
			rt.Topic, rt.ErrorCode = t.Topic, api.TopicDenied
			msg := "Authorization failed."
			rt.ErrorMessage = &msg
			resp.Topics = append(resp.Topics, rt)
		}
	}
	if len(req.Topics) == 0 {
		resp := req.ResponseKind().(*kmsg.CreateTopicsResponse)
		fill(resp)
		return resp, nil
	}
	return nil, func(r kmsg.Response) { fill(r.(*kmsg.CreateTopicsResponse)) }
}

func errorCreateTopics(kreq kmsg.Request, code int16) kmsg.Response {
	req := kreq.(*kmsg.CreateTopicsRequest)
	r := req.ResponseKind().(*kmsg.CreateTopicsResponse)
	for _, t := range req.Topics {
		st := kmsg.NewCreateTopicsResponseTopic()
		st.Topic, st.ErrorCode = t.Topic, code
		r.Topics = append(r.Topics, st)
	}
	return r
}
