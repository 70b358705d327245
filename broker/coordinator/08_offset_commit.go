package coordinator

import (
	"errors"
	"time"

	"github.com/fjordlog/fjord/broker/acl"
	"github.com/fjordlog/fjord/broker/api"
	"github.com/fjordlog/fjord/broker/replica"
	"github.com/fjordlog/fjord/group"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// OffsetCommit: v0-8
//
// Behaviour:
//   - Commits are records in the offsets topic; the response is sent only
//     once they are durable (fsync). A failure to persist is reported per
//     partition, never acknowledged.
//   - A member of an active group must give its member id and current
//     generation (UNKNOWN_MEMBER_ID, ILLEGAL_GENERATION, and
//     REBALANCE_IN_PROGRESS while the group rebalances). Generation -1 with
//     no member id is a "simple" commit, allowed while the group has no
//     members (manual assignment, admin tools).
//   - Unknown topics or partitions: UNKNOWN_TOPIC_OR_PARTITION; metadata
//     over 4096 bytes: OFFSET_METADATA_TOO_LARGE.
//
// Version notes:
//   - v1: commit timestamp; v2-4: retention time (ignored); v6: leader
//     epoch; v7: group instance id; v8: flexible
func offsetCommitEntry(h APIHost) api.Entry {
	return api.Entry{
		Key: 8, Client: api.Versions(0, 8), Handle: bindTo(h, handleOffsetCommit),
		Rule: api.Needs("READ on GROUP and READ on TOPIC", 2, checkOffsetCommit),
	}
}

// MaxOffsetMetadata bounds a committed offset's metadata, as Kafka's
// offset.metadata.max.bytes default.
const MaxOffsetMetadata = 4096

func handleOffsetCommit(h APIHost, cc *api.Conn, kreq kmsg.Request, respond func(kmsg.Response)) {
	req := kreq.(*kmsg.OffsetCommitRequest)
	resp := req.ResponseKind().(*kmsg.OffsetCommitResponse)
	if code := requestCode(h, req.Group); code != 0 {
		for _, rt := range req.Topics {
			st := kmsg.NewOffsetCommitResponseTopic()
			st.Topic = rt.Topic
			for _, rp := range rt.Partitions {
				sp := kmsg.NewOffsetCommitResponseTopicPartition()
				sp.Partition, sp.ErrorCode = rp.Partition, code
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
		respond(resp)
		return
	}
	groupErr := h.Coordinator().ValidateCommit(req.Group, req.MemberID, req.InstanceID, req.Generation)
	now := time.Now().UnixMilli()
	offs := map[TopicPartition]*Committed{}
	for _, rt := range req.Topics {
		st := kmsg.NewOffsetCommitResponseTopic()
		st.Topic = rt.Topic
		for _, rp := range rt.Partitions {
			sp := kmsg.NewOffsetCommitResponseTopicPartition()
			sp.Partition = rp.Partition
			switch {
			case groupErr != nil:
				sp.ErrorCode = group.ErrorCode(groupErr)
			case !h.HasPartition(rt.Topic, rp.Partition):
				sp.ErrorCode = kerr.UnknownTopicOrPartition.Code
			case rp.Metadata != nil && len(*rp.Metadata) > MaxOffsetMetadata:
				sp.ErrorCode = kerr.OffsetMetadataTooLarge.Code
			default:
				c := &Committed{Offset: rp.Offset, LeaderEpoch: rp.LeaderEpoch, CommitTimeMs: now}
				if rp.Metadata != nil {
					c.Metadata = *rp.Metadata
				}
				offs[TopicPartition{Topic: rt.Topic, Partition: rp.Partition}] = c
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	h.Coordinator().Commit(req.Group, offs, func(err error) {
		if err != nil {
			code := CommitErrorCode(err, h.Code)
			h.Log().Warn().Err(err).Str("group", req.Group).Msg("offset commit not persisted")
			for i := range resp.Topics {
				for j := range resp.Topics[i].Partitions {
					sp := &resp.Topics[i].Partitions[j]
					if sp.ErrorCode == 0 {
						sp.ErrorCode = code
					}
				}
			}
		}
		respond(resp)
	})
}

// CommitErrorCode maps why an offset commit (plain or transactional) was
// not persisted to the code the client gets; code is the node's mapping
// of errors to codes.
func CommitErrorCode(err error, code func(error) int16) int16 {
	switch {
	case errors.Is(err, ErrLoading), errors.Is(err, ErrNotCoordinator):
		return code(err)
	case errors.Is(err, replica.ErrNotLeader):
		return kerr.NotCoordinator.Code
	case code(err) == kerr.NotEnoughReplicas.Code, errors.Is(err, replica.ErrNotEnoughReplicasAfterAppend), errors.Is(err, replica.ErrTimedOut):
		// As Kafka: the offsets partition's replicas did not all confirm;
		// the client finds the coordinator again and retries.
		return kerr.CoordinatorNotAvailable.Code
	case code(err) == kerr.InvalidProducerEpoch.Code:
		// A transactional commit from a fenced producer.
		return kerr.ProducerFenced.Code
	}
	return kerr.KafkaStorageError.Code
}

func checkOffsetCommit(z *api.Authz, kreq kmsg.Request) (kmsg.Response, func(kmsg.Response)) {
	req := kreq.(*kmsg.OffsetCommitRequest)
	code := int16(0)
	var denied []kmsg.OffsetCommitRequestTopic
	if !z.Ok(acl.OpRead, acl.ResourceGroup, req.Group) {
		code = api.GroupDenied
		denied, req.Topics = req.Topics, []kmsg.OffsetCommitRequestTopic{}
	} else {
		code = api.TopicDenied
		req.Topics, denied = api.Split(z, acl.OpRead, req.Topics, func(t kmsg.OffsetCommitRequestTopic) string { return t.Topic })
	}
	if len(denied) == 0 {
		return nil, nil
	}
	fill := func(resp *kmsg.OffsetCommitResponse) {
		for _, t := range denied {
			rt := kmsg.NewOffsetCommitResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewOffsetCommitResponseTopicPartition()
				rp.Partition, rp.ErrorCode = p.Partition, code
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
	}
	if code == api.GroupDenied {
		resp := req.ResponseKind().(*kmsg.OffsetCommitResponse)
		fill(resp)
		return resp, nil
	}
	return nil, func(r kmsg.Response) { fill(r.(*kmsg.OffsetCommitResponse)) }
}
