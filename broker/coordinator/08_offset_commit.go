package coordinator

import (
	"errors"
	"time"

	"github.com/fjordlog/fjord/broker/acl"
	"github.com/fjordlog/fjord/broker/api"
	"github.com/fjordlog/fjord/broker/replica"
	"github.com/fjordlog/fjord/group"
	"github.com/fjordlog/fjord/group/consumer"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// OffsetCommit: v0-10
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
//   - v9 carries KIP-848's member epoch in the generation field. A
//     classic group checks v9 exactly as v8 (Kafka's ClassicGroup); a
//     commit with a generation to a group that does not exist is
//     GROUP_ID_NOT_FOUND from v9 (UNKNOWN_MEMBER_ID before, here). A
//     KIP-848 consumer group checks the member epoch with KIP-1251's rule
//     (Kafka 4.3): at the member's epoch any partition, above it none,
//     below it only partitions the member has held since that epoch
//     (STALE_MEMBER_EPOCH refuses the whole commit); below v9 a member of
//     a consumer group is refused UNSUPPORTED_VERSION.
//   - v10 names topics by id (KIP-516), resolved against the node's
//     metadata image: an unknown id is UNKNOWN_TOPIC_ID on each of its
//     partitions, whatever the group's state (Kafka's KafkaApis answers it
//     before the coordinator sees the request), and the answer names the
//     topic by id. Offsets are still stored by topic name, as Kafka keys
//     its __consumer_offsets records.
//
// Version notes:
//   - v1: commit timestamp; v2-4: retention time (ignored); v6: leader
//     epoch; v7: group instance id; v8: flexible; v9: KIP-848 (the same
//     request); v10: topic ids
func offsetCommitEntry(h APIHost) api.Entry {
	return api.Entry{
		Key: 8, Client: api.Versions(0, 10), Handle: bindTo(h, handleOffsetCommit),
		Rule: api.Needs("READ on GROUP and READ on TOPIC", 2, bindCheck(h, checkOffsetCommit)),
	}
}

// MaxOffsetMetadata bounds a committed offset's metadata, as Kafka's
// offset.metadata.max.bytes default.
const MaxOffsetMetadata = 4096

func handleOffsetCommit(h APIHost, cc *api.Conn, kreq kmsg.Request, respond func(kmsg.Response)) {
	req := kreq.(*kmsg.OffsetCommitRequest)
	resp := req.ResponseKind().(*kmsg.OffsetCommitResponse)
	byID := byIDVersion(req.Version)
	code := requestCode(h, req.Group)
	var groupErr error
	if code == 0 {
		var check consumer.CommitCheck
		check, groupErr = h.Coordinator().ValidateCommitAt(req.Group, req.MemberID, req.InstanceID, req.Generation, req.Version)
		if req.Version >= 9 && errors.Is(groupErr, ErrNoGroup) {
			code = kerr.GroupIDNotFound.Code
		}
		if groupErr == nil {
			// KIP-1251: a commit below the member's epoch writes only
			// partitions it has held since; one refusal refuses the
			// whole commit, as in Kafka.
			groupErr = commitPartitionsAllowed(h, req, byIDVersion(req.Version), check)
		}
	}
	now := time.Now().UnixMilli()
	offs := map[TopicPartition]*Committed{}
	for _, rt := range req.Topics {
		name := topicName(h, byID, rt.Topic, rt.TopicID)
		st := kmsg.NewOffsetCommitResponseTopic()
		st.Topic, st.TopicID = name, rt.TopicID
		for _, rp := range rt.Partitions {
			sp := kmsg.NewOffsetCommitResponseTopicPartition()
			sp.Partition = rp.Partition
			switch {
			case byID && name == "":
				sp.ErrorCode = kerr.UnknownTopicID.Code
			case code != 0:
				sp.ErrorCode = code
			case groupErr != nil:
				sp.ErrorCode = group.ErrorCode(groupErr)
			case !h.HasPartition(name, rp.Partition):
				sp.ErrorCode = kerr.UnknownTopicOrPartition.Code
			case rp.Metadata != nil && len(*rp.Metadata) > MaxOffsetMetadata:
				sp.ErrorCode = kerr.OffsetMetadataTooLarge.Code
			default:
				c := &Committed{Offset: rp.Offset, LeaderEpoch: rp.LeaderEpoch, CommitTimeMs: now}
				if rp.Metadata != nil {
					c.Metadata = *rp.Metadata
				}
				offs[TopicPartition{Topic: name, Partition: rp.Partition}] = c
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	if len(offs) == 0 {
		respond(resp)
		return
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

func byIDVersion(v int16) bool { return v >= 10 }

// commitPartitionsAllowed is the first refusal check gives a partition
// the commit would write, nil when it refuses none.
func commitPartitionsAllowed(h APIHost, req *kmsg.OffsetCommitRequest, byID bool, check consumer.CommitCheck) error {
	for _, rt := range req.Topics {
		name := topicName(h, byID, rt.Topic, rt.TopicID)
		id := rt.TopicID
		if !byID {
			id = h.TopicID(name)
		}
		for _, rp := range rt.Partitions {
			if name == "" || !h.HasPartition(name, rp.Partition) {
				continue // answered UNKNOWN_TOPIC_OR_PARTITION / _ID anyway
			}
			if err := check.Partition(name, id, rp.Partition); err != nil {
				return err
			}
		}
	}
	return nil
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

// checkOffsetCommit: the group needs READ (GROUP_AUTHORIZATION_FAILED on
// every partition), each topic READ (TOPIC_AUTHORIZATION_FAILED on its
// partitions). From v10 the topics are named by id: the rule resolves each
// id once, answers an unknown one UNKNOWN_TOPIC_ID as Kafka does before it
// authorizes topics, and hands the handler the names it authorized (the
// request's Topic fields, not on the wire at v10).
func checkOffsetCommit(h APIHost, z *api.Authz, kreq kmsg.Request) (kmsg.Response, func(kmsg.Response)) {
	req := kreq.(*kmsg.OffsetCommitRequest)
	code := int16(0)
	var denied, unknown []kmsg.OffsetCommitRequestTopic
	if !z.Ok(acl.OpRead, acl.ResourceGroup, req.Group) {
		code = api.GroupDenied
		denied, req.Topics = req.Topics, []kmsg.OffsetCommitRequestTopic{}
	} else {
		code = api.TopicDenied
		if req.Version >= 10 {
			req.Topics, unknown = resolveCommitTopics(h, req.Topics)
		}
		req.Topics, denied = api.Split(z, acl.OpRead, req.Topics, func(t kmsg.OffsetCommitRequestTopic) string { return t.Topic })
	}
	if len(denied) == 0 && len(unknown) == 0 {
		return nil, nil
	}
	fill := func(resp *kmsg.OffsetCommitResponse) {
		add := func(ts []kmsg.OffsetCommitRequestTopic, code int16) {
			for _, t := range ts {
				rt := kmsg.NewOffsetCommitResponseTopic()
				rt.Topic, rt.TopicID = t.Topic, t.TopicID
				for _, p := range t.Partitions {
					rp := kmsg.NewOffsetCommitResponseTopicPartition()
					rp.Partition, rp.ErrorCode = p.Partition, code
					rt.Partitions = append(rt.Partitions, rp)
				}
				resp.Topics = append(resp.Topics, rt)
			}
		}
		add(unknown, kerr.UnknownTopicID.Code)
		add(denied, code)
	}
	if code == api.GroupDenied {
		resp := req.ResponseKind().(*kmsg.OffsetCommitResponse)
		fill(resp)
		return resp, nil
	}
	return nil, func(r kmsg.Response) { fill(r.(*kmsg.OffsetCommitResponse)) }
}

// resolveCommitTopics names each topic of a v10 commit by its id in the
// node's image, in place, and splits off those whose id it has not.
func resolveCommitTopics(h APIHost, ts []kmsg.OffsetCommitRequestTopic) (known, unknown []kmsg.OffsetCommitRequestTopic) {
	known = ts[:0:0]
	for _, t := range ts {
		if t.Topic = h.TopicName(t.TopicID); t.Topic == "" {
			unknown = append(unknown, t)
		} else {
			known = append(known, t)
		}
	}
	return known, unknown
}
