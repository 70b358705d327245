package coordinator

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordlog/fjord/broker/acl"
	"github.com/fjordlog/fjord/broker/api"
	"github.com/fjordlog/fjord/group/share"
	"github.com/fjordlog/fjord/group/sharepart"
)

// AlterShareGroupOffsets: v0
//
// Behaviour (Kafka 4.2's KafkaApis, GroupCoordinatorService and
// GroupMetadataManager): sets the share-partition start offset of each
// partition named, for a share group without members; a group id no group
// holds becomes an empty share group (Kafka 4.2, KAFKA-19662), one of
// another type is GROUP_ID_NOT_FOUND ("Group <id> is not a share
// group."), one with members NON_EMPTY_GROUP, all as the top-level error
// with nothing else. The steps (group/share's offsets.go): the group
// records the partitions as initializing and bumps its epoch; the share
// coordinator initializes each partition's state at that epoch and start
// offset (InitializeShareGroupState, through ShareStates), which fences
// the writes of leaders that loaded the state before; the partitions
// initialized are recorded so; this node's leaders of the group's
// share-partitions drop what they hold. The answer waits for all of it.
//   - A topic the metadata does not have, or a partition beyond its
//     count: UNKNOWN_TOPIC_OR_PARTITION on the partition. A partition the
//     share coordinator failed to initialize: its error (such as
//     COORDINATOR_NOT_AVAILABLE, or FENCED_STATE_EPOCH for state of a
//     newer epoch); it stays initializing in the group, where a
//     DeleteGroups finds it.
//   - READ on GROUP, else GROUP_AUTHORIZATION_FAILED at the top; READ on
//     each TOPIC, else TOPIC_AUTHORIZATION_FAILED on its partitions
//     (listed first).
//
// Departure: the group epoch goes up with every alter, and the state
// epoch is the new epoch, as a later Kafka does (KAFKA-20910); Kafka 4.2
// uses the current one.
//
// Version notes: v0 (KIP-932, Kafka 4.1) is the only version
func alterShareGroupOffsetsEntry(h APIHost) api.Entry {
	return api.Entry{
		Key: 91, Client: api.Versions(0, 0), Handle: bindTo(h, handleAlterShareGroupOffsets),
		Rule:    api.Needs("READ on GROUP and READ on TOPIC", 2, bindCheck(h, checkAlterShareGroupOffsets)),
		Mutates: true, AuditDetails: auditAlterShareGroupOffsets,
	}
}

// auditAlterShareGroupOffsets: the group (its GroupID field is not one the
// audit names) and each start offset set, "topic/partition=offset".
func auditAlterShareGroupOffsets(kreq kmsg.Request) []string {
	req := kreq.(*kmsg.AlterShareGroupOffsetsRequest)
	out := []string{"group=" + req.GroupID}
	for _, rt := range req.Topics {
		for _, rp := range rt.Partitions {
			out = append(out, fmt.Sprintf("%s/%d=%d", rt.Topic, rp.Partition, rp.StartOffset))
		}
	}
	return out
}

func handleAlterShareGroupOffsets(h APIHost, cc *api.Conn, kreq kmsg.Request, respond func(kmsg.Response)) {
	req := kreq.(*kmsg.AlterShareGroupOffsetsRequest)
	resp := req.ResponseKind().(*kmsg.AlterShareGroupOffsetsResponse)
	if code := requestCode(h, req.GroupID); code != 0 {
		resp.ErrorCode, resp.ErrorMessage = code, errorMessage(code)
		respond(resp)
		return
	}
	h.Go(func() {
		alterShareOffsets(h, req, resp)
		respond(resp)
	})
}

// alterAsk is one partition to initialize: where its answers are in the
// response (a partition named twice is answered twice and initialized
// once, at the last offset given, as Kafka does), and what to initialize
// it with.
type alterAsk struct {
	at    [][2]int // topic and partition indexes
	key   sharepart.Key
	start int64
	err   error
}

func alterShareOffsets(h APIHost, req *kmsg.AlterShareGroupOffsetsRequest, resp *kmsg.AlterShareGroupOffsetsResponse) {
	var asks []alterAsk
	seen := map[sharepart.Key]int{} // index in asks
	var stateEpoch int32
	code, msg := shareStep(h, req.GroupID, true, func(g *share.Group, img *share.Image) ([]share.Record, error) {
		// The topics are resolved in the image the group sees.
		parts := map[share.TopicID][]int32{}
		for i, rt := range req.Topics {
			st := kmsg.NewAlterShareGroupOffsetsResponseTopic()
			st.Topic = rt.Topic
			topic, known := img.ByName(rt.Topic)
			if known {
				st.TopicID = topic.ID
			}
			for j, rp := range rt.Partitions {
				sp := kmsg.NewAlterShareGroupOffsetsResponseTopicPartition()
				sp.Partition = rp.Partition
				st.Partitions = append(st.Partitions, sp)
				if !known || rp.Partition < 0 || rp.Partition >= topic.Partitions {
					st.Partitions[j].ErrorCode = kerr.UnknownTopicOrPartition.Code
					st.Partitions[j].ErrorMessage = errorMessage(kerr.UnknownTopicOrPartition.Code)
					continue
				}
				k := sharepart.Key{Group: req.GroupID, TopicID: topic.ID, Partition: rp.Partition}
				if n, ok := seen[k]; ok {
					asks[n].at, asks[n].start = append(asks[n].at, [2]int{i, j}), rp.StartOffset
					continue
				}
				seen[k] = len(asks)
				parts[topic.ID] = append(parts[topic.ID], rp.Partition)
				asks = append(asks, alterAsk{at: [][2]int{{i, j}}, key: k, start: rp.StartOffset})
			}
			resp.Topics = append(resp.Topics, st)
		}
		epoch, recs, err := g.AlterOffsets(img, parts)
		stateEpoch = epoch
		return recs, err
	})
	if code != 0 {
		resp.ErrorCode, resp.ErrorMessage, resp.Topics = code, msg, nil
		return
	}
	if len(asks) == 0 {
		return
	}
	ctx, cancel := shareContext()
	defer cancel()
	concurrently(h, len(asks), func(i int) {
		a := &asks[i]
		a.err = h.ShareStates().Initialize(ctx, a.key, stateEpoch, a.start)
	})
	done := map[share.TopicID][]int32{}
	for _, a := range asks {
		if a.err != nil {
			h.Log().Warn().Err(a.err).Str("group", req.GroupID).Int32("partition", a.key.Partition).
				Msg("initializing share-partition state for AlterShareGroupOffsets")
			for _, at := range a.at {
				sp := &resp.Topics[at[0]].Partitions[at[1]]
				sp.ErrorCode = h.Code(a.err)
				sp.ErrorMessage = errorMessage(sp.ErrorCode)
			}
			continue
		}
		done[a.key.TopicID] = append(done[a.key.TopicID], a.key.Partition)
	}
	if len(done) > 0 {
		// The state is set whatever happens here: a failure leaves the
		// partitions initializing, which only describe (null topics) and
		// the next alter see.
		if code, msg := shareStep(h, req.GroupID, false, func(g *share.Group, img *share.Image) ([]share.Record, error) {
			return g.MarkInitialized(img, done), nil
		}); code != 0 {
			h.Log().Warn().Int16("code", code).Str("group", req.GroupID).Str("why", deref(msg)).
				Msg("share-partitions initialized, but not recorded so in the group")
		}
	}
	h.UnloadShareGroup(req.GroupID)
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// checkAlterShareGroupOffsets: READ on the group, else
// GROUP_AUTHORIZATION_FAILED at the top (with Kafka's message); READ on
// each topic, else TOPIC_AUTHORIZATION_FAILED on each of its partitions,
// listed before the topics the handler answers, unless the answer is a
// top-level error. The handler runs even when every topic is denied: the
// group is checked all the same, as in Kafka.
func checkAlterShareGroupOffsets(h APIHost, z *api.Authz, kreq kmsg.Request) (kmsg.Response, func(kmsg.Response)) {
	req := kreq.(*kmsg.AlterShareGroupOffsetsRequest)
	if !z.Ok(acl.OpRead, acl.ResourceGroup, req.GroupID) {
		resp := req.ResponseKind().(*kmsg.AlterShareGroupOffsetsResponse)
		resp.ErrorCode, resp.ErrorMessage = api.GroupDenied, errorMessage(api.GroupDenied)
		return resp, nil
	}
	var denied []kmsg.AlterShareGroupOffsetsRequestTopic
	req.Topics, denied = api.Split(z, acl.OpRead, req.Topics, func(t kmsg.AlterShareGroupOffsetsRequestTopic) string { return t.Topic })
	if len(denied) == 0 {
		return nil, nil
	}
	var topics []kmsg.AlterShareGroupOffsetsResponseTopic
	for _, t := range denied {
		st := kmsg.NewAlterShareGroupOffsetsResponseTopic()
		st.Topic, st.TopicID = t.Topic, h.TopicID(t.Topic)
		for _, p := range t.Partitions {
			sp := kmsg.NewAlterShareGroupOffsetsResponseTopicPartition()
			sp.Partition, sp.ErrorCode, sp.ErrorMessage = p.Partition, api.TopicDenied, errorMessage(api.TopicDenied)
			st.Partitions = append(st.Partitions, sp)
		}
		topics = append(topics, st)
	}
	return nil, func(r kmsg.Response) {
		if resp := r.(*kmsg.AlterShareGroupOffsetsResponse); resp.ErrorCode == 0 {
			resp.Topics = append(topics, resp.Topics...)
		}
	}
}
