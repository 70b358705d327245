package txncoord

import (
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordlog/fjord/broker/acl"
	"github.com/fjordlog/fjord/broker/api"
	"github.com/fjordlog/fjord/broker/coordinator"
	"github.com/fjordlog/fjord/broker/replicamgr"
	"github.com/fjordlog/fjord/group"
)

// TxnOffsetCommit: v0-6
//
// Behaviour:
//   - Sent to the group's coordinator after AddOffsetsToTxn: the offsets
//     are appended to the group's offsets partition as the producer's
//     transactional batch, and become the group's committed offsets only
//     when the transaction commits (its marker on that partition); an
//     abort drops them (broker/coordinator/txnoffsets.go).
//   - v3+ carries the member's id and generation (KIP-447): they are
//     checked as OffsetCommit checks them (ILLEGAL_GENERATION,
//     UNKNOWN_MEMBER_ID, FENCED_INSTANCE_ID), so a zombie member cannot
//     commit for a generation it no longer owns.
//   - Unknown partitions: UNKNOWN_TOPIC_OR_PARTITION; metadata over 4096
//     bytes: OFFSET_METADATA_TOO_LARGE.
//   - v6 names topics by id (KIP-1319), as OffsetCommit v10 does: each is
//     resolved against the node's metadata image, an unknown id is
//     UNKNOWN_TOPIC_ID on each of its partitions, and the answer names
//     the topic by id. The offsets are kept by topic name.
//
// Version notes: v2: leader epoch; v3: flexible, member fields (KIP-447);
// v4-5: TRANSACTION_ABORTABLE (KIP-890); v6: topic ids (KIP-1319).
func txnOffsetCommitEntry(h APIHost) api.Entry {
	return api.Entry{
		Key: 28, Client: api.Versions(0, 6), Handle: bind(h, handleTxnOffsetCommit),
		Rule: api.Needs("WRITE on TRANSACTIONAL_ID, READ on GROUP and READ on TOPIC", 3, bindCheck(h, checkTxnOffsetCommit)),
	}
}

// txnTopic is the topic a TxnOffsetCommit names: by name before v6 (byID
// false); from v6 by id, as the authorization rule resolved it when it ran
// (so the topic authorized is the topic committed), else as the node's
// image resolves it now. nil when the image has no such topic.
func txnTopic(h APIHost, byID bool, rt kmsg.TxnOffsetCommitRequestTopic) *replicamgr.Topic {
	if !byID || rt.Topic != "" {
		return h.Topic(rt.Topic)
	}
	return h.TopicByID(rt.TopicID)
}

func handleTxnOffsetCommit(h APIHost, cc *api.Conn, kreq kmsg.Request, respond func(kmsg.Response)) {
	req := kreq.(*kmsg.TxnOffsetCommitRequest)
	resp := req.ResponseKind().(*kmsg.TxnOffsetCommitResponse)
	fill := func(code int16) {
		for i := range resp.Topics {
			for j := range resp.Topics[i].Partitions {
				if sp := &resp.Topics[i].Partitions[j]; sp.ErrorCode == 0 {
					sp.ErrorCode = code
				}
			}
		}
	}
	offsets := h.Offsets()
	code := h.GroupCode(req.Group)
	var groupErr error
	if code == 0 && req.Version >= 3 && (req.MemberID != "" || req.Generation >= 0) {
		groupErr = offsets.ValidateCommit(req.Group, req.MemberID, req.InstanceID, req.Generation)
	}
	byID := req.Version >= 6
	now := time.Now().UnixMilli()
	offs := map[coordinator.TopicPartition]*coordinator.Committed{}
	for _, rt := range req.Topics {
		t := txnTopic(h, byID, rt)
		st := kmsg.NewTxnOffsetCommitResponseTopic()
		st.Topic, st.TopicID = rt.Topic, rt.TopicID
		if t != nil {
			st.Topic = t.Name
		}
		for _, rp := range rt.Partitions {
			sp := kmsg.NewTxnOffsetCommitResponseTopicPartition()
			sp.Partition = rp.Partition
			switch {
			case byID && t == nil:
				sp.ErrorCode = kerr.UnknownTopicID.Code
			case code != 0:
				sp.ErrorCode = code
			case groupErr != nil:
				sp.ErrorCode = group.ErrorCode(groupErr)
			case t == nil || rp.Partition < 0 || int(rp.Partition) >= len(t.Parts):
				sp.ErrorCode = kerr.UnknownTopicOrPartition.Code
			case rp.Metadata != nil && len(*rp.Metadata) > coordinator.MaxOffsetMetadata:
				sp.ErrorCode = kerr.OffsetMetadataTooLarge.Code
			default:
				c := &coordinator.Committed{Offset: rp.Offset, LeaderEpoch: rp.LeaderEpoch, CommitTimeMs: now}
				if req.Version < 2 {
					c.LeaderEpoch = -1
				}
				if rp.Metadata != nil {
					c.Metadata = *rp.Metadata
				}
				offs[coordinator.TopicPartition{Topic: t.Name, Partition: rp.Partition}] = c
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	if len(offs) == 0 {
		respond(resp)
		return
	}
	offsets.TxnCommit(req.Group, req.ProducerID, req.ProducerEpoch, offs, func(err error) {
		if err != nil {
			code := h.CommitCode(err)
			h.Txns().log.Warn().Err(err).Str("group", req.Group).Msg("transactional offset commit not persisted")
			fill(code)
		}
		respond(resp)
	})
}

// checkTxnOffsetCommit: WRITE on the transactional id, then READ on the
// group (either refused: that code on every partition), then READ on each
// topic (TOPIC_AUTHORIZATION_FAILED on its partitions). From v6 the
// topics are named by id: the rule resolves each id once, answers an
// unknown one UNKNOWN_TOPIC_ID before it authorizes topics, and hands the
// handler the names it authorized (the request's Topic fields, not on the
// wire at v6).
func checkTxnOffsetCommit(h APIHost, z *api.Authz, kreq kmsg.Request) (kmsg.Response, func(kmsg.Response)) {
	req := kreq.(*kmsg.TxnOffsetCommitRequest)
	code := int16(0)
	switch {
	case !z.Ok(acl.OpWrite, acl.ResourceTransactionalID, req.TransactionalID):
		code = api.TxnDenied
	case !z.Ok(acl.OpRead, acl.ResourceGroup, req.Group):
		code = api.GroupDenied
	}
	var denied, unknown []kmsg.TxnOffsetCommitRequestTopic
	if code != 0 {
		denied, req.Topics = req.Topics, []kmsg.TxnOffsetCommitRequestTopic{}
	} else {
		code = api.TopicDenied
		if req.Version >= 6 {
			known := req.Topics[:0:0]
			for _, t := range req.Topics {
				if tt := h.TopicByID(t.TopicID); tt != nil {
					t.Topic = tt.Name
					known = append(known, t)
				} else {
					unknown = append(unknown, t)
				}
			}
			req.Topics = known
		}
		req.Topics, denied = api.Split(z, acl.OpRead, req.Topics, func(t kmsg.TxnOffsetCommitRequestTopic) string { return t.Topic })
	}
	if len(denied) == 0 && len(unknown) == 0 {
		return nil, nil
	}
	fill := func(resp *kmsg.TxnOffsetCommitResponse) {
		add := func(ts []kmsg.TxnOffsetCommitRequestTopic, code int16) {
			for _, t := range ts {
				rt := kmsg.NewTxnOffsetCommitResponseTopic()
				rt.Topic, rt.TopicID = t.Topic, t.TopicID
				for _, p := range t.Partitions {
					rp := kmsg.NewTxnOffsetCommitResponseTopicPartition()
					rp.Partition, rp.ErrorCode = p.Partition, code
					rt.Partitions = append(rt.Partitions, rp)
				}
				resp.Topics = append(resp.Topics, rt)
			}
		}
		add(unknown, kerr.UnknownTopicID.Code)
		add(denied, code)
	}
	if len(req.Topics) == 0 {
		resp := req.ResponseKind().(*kmsg.TxnOffsetCommitResponse)
		fill(resp)
		return resp, nil
	}
	return nil, func(r kmsg.Response) { fill(r.(*kmsg.TxnOffsetCommitResponse)) }
}
