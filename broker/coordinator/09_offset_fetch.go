package coordinator

import (
	"sort"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordlog/fjord/broker/acl"
	"github.com/fjordlog/fjord/broker/api"
	"github.com/fjordlog/fjord/group"
)

// OffsetFetch: v0-10
//
// Behaviour:
//   - Returns each requested partition's committed offset, or -1 with no
//     error when nothing is committed. A null topic list (v2+) returns every
//     committed offset of the group.
//   - v8+ carries several groups per request (KIP-709), each answered on
//     its own.
//   - While the group's offsets partition loads: COORDINATOR_LOAD_IN_PROGRESS.
//   - v9's member id and epoch (KIP-848) are not checked: every group here
//     is a classic group, and Kafka's ClassicGroup.validateOffsetFetch
//     ignores them (only a consumer group checks them).
//   - v10 names topics by id (KIP-516), resolved against the node's
//     metadata image: an unknown id is answered, as Kafka's KafkaApis does,
//     with UNKNOWN_TOPIC_ID and offset -1 on each of its partitions. A
//     fetch of every offset names each topic by its id; a topic the image
//     no longer has is left out, as Kafka does (it cannot be named).
//     Offsets are kept by topic name, as in Kafka's __consumer_offsets.
//
// Version notes:
//   - v1: offsets from the log (v0 read ZooKeeper in Kafka; served the same
//     here); v2: null topics = all, top-level error; v5: leader epoch;
//     v6: flexible; v7: require stable; v8: many groups; v9: member id and
//     epoch (KIP-848); v10: topic ids
func offsetFetchEntry(h APIHost) api.Entry {
	return api.Entry{
		Key: 9, Client: api.Versions(0, 10), Handle: bindTo(h, handleOffsetFetch),
		Rule: api.Needs("DESCRIBE on GROUP and DESCRIBE on TOPIC (others are not listed)", 0, bindCheck(h, checkOffsetFetch)),
	}
}

func handleOffsetFetch(h APIHost, cc *api.Conn, kreq kmsg.Request, respond func(kmsg.Response)) {
	req := kreq.(*kmsg.OffsetFetchRequest)
	resp := req.ResponseKind().(*kmsg.OffsetFetchResponse)
	if req.Version >= 8 {
		byID := req.Version >= 10
		for _, rg := range req.Groups {
			g := kmsg.NewOffsetFetchResponseGroup()
			g.Group = rg.Group
			var topics []offsetFetchTopic
			var ids [][16]byte // ids[i] named topics[i] in the request
			var unknown []kmsg.OffsetFetchRequestGroupTopic
			if rg.Topics != nil {
				topics = []offsetFetchTopic{}
				for _, t := range rg.Topics {
					name := topicName(h, byID, t.Topic, t.TopicID)
					if byID && name == "" {
						unknown = append(unknown, t)
						continue
					}
					topics = append(topics, offsetFetchTopic{name, t.Partitions})
					ids = append(ids, t.TopicID)
				}
			}
			if req.Version >= 9 && rg.MemberID != nil {
				// KIP-848: a consumer group's member fetches with its
				// epoch; a stale or unknown one gets the group's error
				// and no offsets, as in Kafka.
				if err := h.Coordinator().ValidateFetch(rg.Group, *rg.MemberID, rg.MemberEpoch); err != nil {
					g.ErrorCode = group.ErrorCode(err)
					resp.Groups = append(resp.Groups, g)
					continue
				}
			}
			var code int16
			for i, t := range fetchOffsets(h, rg.Group, topics, req.RequireStable, &code) {
				gt := kmsg.NewOffsetFetchResponseGroupTopic()
				gt.Topic = t.Topic
				switch {
				case !byID:
				case topics != nil:
					gt.TopicID = ids[i] // answered in the request's order
				default:
					if gt.TopicID = h.TopicID(t.Topic); gt.TopicID == ([16]byte{}) {
						continue // a deleted topic's offsets: no id to name them by
					}
				}
				for _, p := range t.Partitions {
					gp := kmsg.NewOffsetFetchResponseGroupTopicPartition()
					gp.Partition, gp.Offset, gp.LeaderEpoch, gp.Metadata, gp.ErrorCode = p.Partition, p.Offset, p.LeaderEpoch, p.Metadata, p.ErrorCode
					gt.Partitions = append(gt.Partitions, gp)
				}
				g.Topics = append(g.Topics, gt)
			}
			g.Topics = append(g.Topics, unknownFetchTopics(unknown)...)
			g.ErrorCode = code
			resp.Groups = append(resp.Groups, g)
		}
		respond(resp)
		return
	}
	var topics []offsetFetchTopic
	if req.Topics != nil {
		topics = []offsetFetchTopic{}
		for _, t := range req.Topics {
			topics = append(topics, offsetFetchTopic{t.Topic, t.Partitions})
		}
	}
	resp.Topics = fetchOffsets(h, req.Group, topics, req.Version >= 7 && req.RequireStable, &resp.ErrorCode)
	if req.Version < 2 && resp.ErrorCode != 0 {
		// No top-level error before v2: report it on every partition.
		for i := range resp.Topics {
			for j := range resp.Topics[i].Partitions {
				resp.Topics[i].Partitions[j].ErrorCode = resp.ErrorCode
			}
		}
	}
	respond(resp)
}

// unknownFetchTopics answers the topics of a v10 fetch whose ids the
// node's image has not.
func unknownFetchTopics(ts []kmsg.OffsetFetchRequestGroupTopic) []kmsg.OffsetFetchResponseGroupTopic {
	var out []kmsg.OffsetFetchResponseGroupTopic
	for _, t := range ts {
		gt := kmsg.NewOffsetFetchResponseGroupTopic()
		gt.TopicID = t.TopicID
		for _, p := range t.Partitions {
			gp := kmsg.NewOffsetFetchResponseGroupTopicPartition()
			gp.Partition, gp.Offset, gp.LeaderEpoch, gp.ErrorCode = p, -1, -1, kerr.UnknownTopicID.Code
			gt.Partitions = append(gt.Partitions, gp)
		}
		out = append(out, gt)
	}
	return out
}

type offsetFetchTopic struct {
	topic      string
	partitions []int32
}

// fetchOffsets answers one group; topics nil means every committed offset.
// With requireStable (KIP-447), a partition with a transactional commit
// not yet settled by its marker is UNSTABLE_OFFSET_COMMIT (retriable):
// the offset a new member would start from is about to change.
func fetchOffsets(h APIHost, group string, topics []offsetFetchTopic, requireStable bool, code *int16) []kmsg.OffsetFetchResponseTopic {
	if h.Coordinator().Status(group) != nil {
		*code = kerr.CoordinatorLoadInProgress.Code
		topics = nonNil(topics)
	}
	if topics == nil {
		byTopic := map[string][]int32{}
		for tp := range h.Coordinator().Offsets(group) {
			byTopic[tp.Topic] = append(byTopic[tp.Topic], tp.Partition)
		}
		for t, ps := range byTopic {
			sort.Slice(ps, func(i, j int) bool { return ps[i] < ps[j] })
			topics = append(topics, offsetFetchTopic{t, ps})
		}
		sort.Slice(topics, func(i, j int) bool { return topics[i].topic < topics[j].topic })
	}
	var out []kmsg.OffsetFetchResponseTopic
	for _, t := range topics {
		rt := kmsg.NewOffsetFetchResponseTopic()
		rt.Topic = t.topic
		for _, p := range t.partitions {
			rp := kmsg.NewOffsetFetchResponseTopicPartition()
			rp.Partition, rp.Offset, rp.LeaderEpoch = p, -1, -1
			tp := TopicPartition{Topic: t.topic, Partition: p}
			if *code == 0 && requireStable && h.Coordinator().PendingTxnOffset(group, tp) {
				rp.ErrorCode = kerr.UnstableOffsetCommit.Code
			} else if *code == 0 {
				if c, ok := h.Coordinator().Offset(group, tp); ok {
					rp.Offset, rp.LeaderEpoch = c.Offset, c.LeaderEpoch
					m := c.Metadata
					rp.Metadata = &m
				}
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		out = append(out, rt)
	}
	return out
}

func nonNil(t []offsetFetchTopic) []offsetFetchTopic {
	if t == nil {
		return []offsetFetchTopic{}
	}
	return t
}

// checkOffsetFetch: the group needs DESCRIBE (GROUP_AUTHORIZATION_FAILED
// at the top, or per group from v8); named topics the principal may not
// describe are answered TOPIC_AUTHORIZATION_FAILED per partition, and a
// fetch of all topics lists only the describable ones. From v10 the topics
// are named by id: the rule resolves each id once, answers an unknown one
// UNKNOWN_TOPIC_ID (Kafka does so before it authorizes topics), and hands
// the handler the names it authorized (the request's Topic fields, not on
// the wire at v10).
func checkOffsetFetch(h APIHost, z *api.Authz, kreq kmsg.Request) (kmsg.Response, func(kmsg.Response)) {
	req := kreq.(*kmsg.OffsetFetchRequest)
	if req.Version >= 8 {
		var denied []string
		req.Groups, denied = api.Sift(req.Groups, func(g kmsg.OffsetFetchRequestGroup) (string, bool) {
			return g.Group, z.Ok(acl.OpDescribe, acl.ResourceGroup, g.Group)
		})
		// The handler answers the kept groups in order: refused[i] are
		// the topics of req.Groups[i] answered here.
		refused := make([][]kmsg.OffsetFetchResponseGroupTopic, len(req.Groups))
		for i := range req.Groups {
			g := &req.Groups[i]
			if g.Topics == nil {
				continue
			}
			var unknown []kmsg.OffsetFetchRequestGroupTopic
			if req.Version >= 10 {
				known := g.Topics[:0:0]
				for _, t := range g.Topics {
					if t.Topic = h.TopicName(t.TopicID); t.Topic == "" {
						unknown = append(unknown, t)
					} else {
						known = append(known, t)
					}
				}
				g.Topics = known
			}
			var no []kmsg.OffsetFetchRequestGroupTopic
			g.Topics, no = api.Split(z, acl.OpDescribe, g.Topics, func(t kmsg.OffsetFetchRequestGroupTopic) string { return t.Topic })
			refused[i] = unknownFetchTopics(unknown)
			for _, t := range no {
				gt := kmsg.NewOffsetFetchResponseGroupTopic()
				gt.Topic, gt.TopicID = t.Topic, t.TopicID
				for _, p := range t.Partitions {
					gp := kmsg.NewOffsetFetchResponseGroupTopicPartition()
					gp.Partition, gp.Offset, gp.LeaderEpoch, gp.ErrorCode = p, -1, -1, api.TopicDenied
					gt.Partitions = append(gt.Partitions, gp)
				}
				refused[i] = append(refused[i], gt)
			}
		}
		return nil, func(r kmsg.Response) {
			resp := r.(*kmsg.OffsetFetchResponse)
			for i := range resp.Groups {
				g := &resp.Groups[i]
				if i < len(req.Groups) && req.Groups[i].Topics != nil {
					g.Topics = append(g.Topics, refused[i]...)
				} else {
					// Every offset of the group: only the describable topics.
					g.Topics = api.Visible(z, acl.ResourceTopic, g.Topics, func(t kmsg.OffsetFetchResponseGroupTopic) string { return t.Topic })
				}
			}
			for _, g := range denied {
				rg := kmsg.NewOffsetFetchResponseGroup()
				rg.Group, rg.ErrorCode = g, api.GroupDenied
				resp.Groups = append(resp.Groups, rg)
			}
		}
	}
	if !z.Ok(acl.OpDescribe, acl.ResourceGroup, req.Group) {
		resp := req.ResponseKind().(*kmsg.OffsetFetchResponse)
		resp.ErrorCode = api.GroupDenied
		for _, t := range req.Topics {
			rt := kmsg.NewOffsetFetchResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewOffsetFetchResponseTopicPartition()
				rp.Partition, rp.Offset, rp.ErrorCode = p, -1, api.GroupDenied
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
		return resp, nil
	}
	var denied []kmsg.OffsetFetchRequestTopic
	req.Topics, denied = api.Split(z, acl.OpDescribe, req.Topics, func(t kmsg.OffsetFetchRequestTopic) string { return t.Topic })
	all := req.Topics == nil
	if !all && len(denied) == 0 {
		return nil, nil
	}
	return nil, func(r kmsg.Response) {
		resp := r.(*kmsg.OffsetFetchResponse)
		if all {
			resp.Topics = api.Visible(z, acl.ResourceTopic, resp.Topics, func(t kmsg.OffsetFetchResponseTopic) string { return t.Topic })
		}
		for _, t := range denied {
			rt := kmsg.NewOffsetFetchResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewOffsetFetchResponseTopicPartition()
				rp.Partition, rp.Offset, rp.ErrorCode = p, -1, api.TopicDenied
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
	}
}
