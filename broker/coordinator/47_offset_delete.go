package coordinator

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordlog/fjord/broker/acl"
	"github.com/fjordlog/fjord/broker/api"
	"github.com/fjordlog/fjord/group"
	"github.com/fjordlog/fjord/group/consumer"
)

// OffsetDelete: v0
//
// Behaviour: deletes committed offsets of a group (tombstones, durable
// before the answer). As in Kafka, partitions of topics the members of a
// "consumer" group subscribe to are refused with GROUP_SUBSCRIBED_TO_TOPIC
// (subscriptions are read from the members' consumer-protocol metadata).
// While a group with members rebalances, or uses another protocol type, its
// subscriptions are not known and every partition is refused. A KIP-848
// consumer group's subscriptions are its members' topic names and the
// topics assigned to them (a regular expression's topics among them).
// Unknown group: GROUP_ID_NOT_FOUND.
func offsetDeleteEntry(h APIHost) api.Entry {
	return api.Entry{
		Key: 47, Client: api.Versions(0, 0), Handle: bindTo(h, handleOffsetDelete),
		Rule:    api.Needs("DELETE on GROUP and READ on TOPIC", 2, checkOffsetDelete),
		Mutates: true,
	}
}

func handleOffsetDelete(h APIHost, cc *api.Conn, kreq kmsg.Request, respond func(kmsg.Response)) {
	req := kreq.(*kmsg.OffsetDeleteRequest)
	resp := req.ResponseKind().(*kmsg.OffsetDeleteResponse)
	if code := requestCode(h, req.Group); code != 0 {
		resp.ErrorCode = code
		respond(resp)
		return
	}
	members := 0
	var subscribed map[string]bool // nil: unknown, refuse everything
	existed := h.Coordinator().With(req.Group, false, func(g *group.Group) []group.Reply {
		members = g.NumMembers()
		if members > 0 && g.State() == "Stable" && g.ProtocolType() == "consumer" {
			subscribed = subscriptions(g.Describe())
		}
		return nil
	})
	if !existed {
		existed, _, _ = h.Coordinator().Consumer(req.Group, false, nil, func(g *consumer.Group, img *consumer.Image, _ int64) []consumer.Record {
			members, subscribed = g.NumMembers(), consumerSubscriptions(g.Describe(img))
			return nil
		})
	}
	have := h.Coordinator().Offsets(req.Group)
	if !existed && len(have) == 0 {
		resp.ErrorCode = kerr.GroupIDNotFound.Code
		respond(resp)
		return
	}
	tombs := map[TopicPartition]*Committed{}
	for _, rt := range req.Topics {
		st := kmsg.NewOffsetDeleteResponseTopic()
		st.Topic = rt.Topic
		for _, rp := range rt.Partitions {
			sp := kmsg.NewOffsetDeleteResponseTopicPartition()
			sp.Partition = rp.Partition
			tp := TopicPartition{Topic: rt.Topic, Partition: rp.Partition}
			switch {
			case members > 0 && (subscribed == nil || subscribed[rt.Topic]):
				sp.ErrorCode = kerr.GroupSubscribedToTopic.Code
			case !h.HasPartition(rt.Topic, rp.Partition):
				sp.ErrorCode = kerr.UnknownTopicOrPartition.Code
			default:
				if _, ok := have[tp]; ok {
					tombs[tp] = nil
				}
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	h.Coordinator().Commit(req.Group, tombs, func(err error) {
		if err != nil {
			resp.ErrorCode = kerr.KafkaStorageError.Code
		}
		respond(resp)
	})
}

// subscriptions returns the topics a consumer group's members subscribe to,
// or nil if any member's metadata cannot be read.
func subscriptions(d kmsg.DescribeGroupsResponseGroup) map[string]bool {
	out := map[string]bool{}
	for _, m := range d.Members {
		var meta kmsg.ConsumerMemberMetadata
		if err := meta.ReadFrom(m.ProtocolMetadata); err != nil {
			return nil
		}
		for _, t := range meta.Topics {
			out[t] = true
		}
	}
	return out
}

func checkOffsetDelete(z *api.Authz, kreq kmsg.Request) (kmsg.Response, func(kmsg.Response)) {
	req := kreq.(*kmsg.OffsetDeleteRequest)
	if !z.Ok(acl.OpDelete, acl.ResourceGroup, req.Group) {
		return api.SetTopError(req.ResponseKind(), api.GroupDenied), nil
	}
	var denied []kmsg.OffsetDeleteRequestTopic
	req.Topics, denied = api.Split(z, acl.OpRead, req.Topics, func(t kmsg.OffsetDeleteRequestTopic) string { return t.Topic })
	if len(denied) == 0 {
		return nil, nil
	}
	fill := func(resp *kmsg.OffsetDeleteResponse) {
		for _, t := range denied {
			rt := kmsg.NewOffsetDeleteResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewOffsetDeleteResponseTopicPartition()
				rp.Partition, rp.ErrorCode = p.Partition, api.TopicDenied
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
	}
	if len(req.Topics) == 0 {
		resp := req.ResponseKind().(*kmsg.OffsetDeleteResponse)
		fill(resp)
		return resp, nil
	}
	return nil, func(r kmsg.Response) { fill(r.(*kmsg.OffsetDeleteResponse)) }
}

// consumerSubscriptions are the topics a KIP-848 group's members
// subscribe to by name or hold partitions of.
func consumerSubscriptions(d kmsg.ConsumerGroupDescribeResponseGroup) map[string]bool {
	out := map[string]bool{}
	for _, m := range d.Members {
		for _, t := range m.SubscribedTopics {
			out[t] = true
		}
		for _, t := range m.Assignment.TopicPartitions {
			out[t.Topic] = true
		}
		for _, t := range m.TargetAssignment.TopicPartitions {
			out[t.Topic] = true
		}
	}
	return out
}
