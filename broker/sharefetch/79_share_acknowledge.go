package sharefetch

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordlog/fjord/broker/api"
	"github.com/fjordlog/fjord/group/sharepart"
)

// ShareAcknowledge: v1-2
//
// Behaviour (KIP-932, as Kafka 4.2 serves it):
//   - Applies the member's acknowledgements (accept, release, reject, gap;
//     renew from v2) to the share-partitions this node leads, and answers
//     each partition once the records its step wrote are durable.
//   - Uses the member's share session (ShareFetch opens it): epoch 0 is
//     INVALID_SHARE_SESSION_EPOCH, a missing session
//     SHARE_SESSION_NOT_FOUND, a positive epoch other than the session's
//     INVALID_SHARE_SESSION_EPOCH, and each accepted request advances it;
//     -1 closes the session after its acknowledgements and releases the
//     member's records here.
//   - Per partition, in Kafka's order: UNKNOWN_TOPIC_ID,
//     TOPIC_AUTHORIZATION_FAILED (READ on the topic), INVALID_REQUEST for
//     renew without IsRenewAck, UNKNOWN_TOPIC_OR_PARTITION or
//     NOT_LEADER_OR_FOLLOWER (with CurrentLeader and NodeEndpoints,
//     KIP-951), UNKNOWN_TOPIC_OR_PARTITION when the share-partition is not
//     loaded here (its locks went with the previous one), LEADER_NOT_AVAILABLE
//     while it loads, then group/sharepart's INVALID_REQUEST and
//     INVALID_RECORD_STATE (all of a partition's batches or none). A
//     partition without batches is answered NONE. READ on the group is the
//     rule's (GROUP_AUTHORIZATION_FAILED at the top).
//   - ThrottleMillis is always 0.
//
// Version notes:
//   - v0 (Kafka 4.0's early access) is not served.
//   - v2 (Kafka 4.2): IsRenewAck and acknowledge type 4, renew (KIP-1222),
//     and AcquisitionLockTimeoutMs in the response.
func shareAcknowledgeEntry(h APIHost) api.Entry {
	return api.Entry{
		Key: 79, Client: api.Versions(1, 2), Handle: bindTo(h, handleShareAcknowledge),
		Rule: needRead(func(r kmsg.Request) *string { return r.(*kmsg.ShareAcknowledgeRequest).GroupID }),
	}
}

func handleShareAcknowledge(h APIHost, cc *api.Conn, kreq kmsg.Request, respond func(kmsg.Response)) {
	req := kreq.(*kmsg.ShareAcknowledgeRequest)
	m := h.Manager()
	resp := req.ResponseKind().(*kmsg.ShareAcknowledgeResponse)
	top := func(err error) {
		resp.ErrorCode, resp.ErrorMessage = m.code(err), errorMessage(err)
		respond(resp)
	}
	key, ok := identity(req.GroupID, req.MemberID)
	if !ok {
		top(fmt.Errorf("sharefetch: group id and member id must be set, the member id at most 36 characters: %w", kerr.InvalidRequest))
		return
	}
	resp.AcquisitionLockTimeoutMillis = m.groupConfig(key.group).Partition.RecordLockDurationMs
	ss, err := m.ackSession(key, req.ShareSessionEpoch)
	if err != nil {
		top(err)
		return
	}
	var acks []*ackPart
	for _, t := range req.Topics {
		for _, p := range t.Partitions {
			bs := make([]sharepart.AckBatch, 0, len(p.AcknowledgementBatches))
			for _, b := range p.AcknowledgementBatches {
				bs = append(bs, ackBatch(b.FirstOffset, b.LastOffset, b.AcknowledgeTypes))
			}
			acks = addAck(acks, tp{t.TopicID, p.Partition}, bs)
		}
	}
	acked := m.acknowledge(&readable{h: h, cc: cc}, key.group, key.member, acks, req.Version >= 2 && req.IsRenewAck)
	final := req.ShareSessionEpoch == -1
	run := func() {
		acked()
		if final {
			m.closeSession(ss)
		}
		fillShareAcknowledge(h, cc, resp, acks)
		respond(resp)
	}
	if !h.Go(run) {
		respond(nil)
	}
}

// fillShareAcknowledge writes each acknowledged partition's outcome.
func fillShareAcknowledge(h APIHost, cc *api.Conn, resp *kmsg.ShareAcknowledgeResponse, acks []*ackPart) {
	topics := make(map[[16]byte]int)
	hints := leaderHints{h: h, cc: cc}
	for _, a := range acks {
		ti, ok := topics[a.id]
		if !ok {
			ti = len(resp.Topics)
			topics[a.id] = ti
			rt := kmsg.NewShareAcknowledgeResponseTopic()
			rt.TopicID = a.id
			resp.Topics = append(resp.Topics, rt)
		}
		rp := kmsg.NewShareAcknowledgeResponseTopicPartition()
		rp.Partition, rp.ErrorCode = a.p, a.code
		rp.CurrentLeader.LeaderID, rp.CurrentLeader.LeaderEpoch = -1, -1
		if a.code != 0 {
			rp.ErrorMessage = errorMessage(a.err)
			if a.code == kerr.NotLeaderForPartition.Code {
				rp.CurrentLeader.LeaderID, rp.CurrentLeader.LeaderEpoch = hints.leader(a.tp)
			}
		}
		resp.Topics[ti].Partitions = append(resp.Topics[ti].Partitions, rp)
	}
	for _, ep := range hints.endpoints {
		ne := kmsg.NewShareAcknowledgeResponseNodeEndpoint()
		ne.NodeID, ne.Host, ne.Port, ne.Rack = ep.ID, ep.Host, ep.Port, ep.Rack
		resp.NodeEndpoints = append(resp.NodeEndpoints, ne)
	}
}
