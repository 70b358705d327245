package partitions

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordlog/fjord/broker/acl"
	"github.com/fjordlog/fjord/broker/api"
	"github.com/fjordlog/fjord/broker/discovery"
	"github.com/fjordlog/fjord/broker/replica"
)

// DeleteRecords: v0-2
//
// Behaviour (kafka-delete-records.sh, kadm DeleteRecords, sarama
// ClusterAdmin.DeleteRecords):
//   - Per partition, moves the leader's log start offset to Offset, -1
//     meaning the high watermark (Kafka's deleteRecordsOnLeader): records
//     below it are no longer read (a fetch below it is
//     OFFSET_OUT_OF_RANGE, ListOffsets earliest returns it), the segments
//     wholly below it are deleted, and the move is fsynced
//     (log-start-offset, storage/logstart.go) before anything answers, so
//     a restart keeps it. An offset at or below the current start changes
//     nothing and succeeds.
//   - Errors: an offset above the high watermark, or below -1,
//     OFFSET_OUT_OF_RANGE; not the leader NOT_LEADER_OR_FOLLOWER; an
//     unknown topic or partition UNKNOWN_TOPIC_OR_PARTITION; an internal
//     topic (__consumer_offsets, __transaction_state, __share_group_state)
//     INVALID_TOPIC_EXCEPTION;
//     a topic whose cleanup.policy lacks "delete" POLICY_VIOLATION — all
//     as Kafka answers them.
//   - Replication: followers report their log start in each Fetch
//     (LogStartOffset) and move theirs to the leader's, which every fetch
//     response carries (broker/replica: followLeaderStart). As in Kafka
//     (DelayedDeleteRecords), a partition answers once its low watermark
//     — the smallest log start offset among the leader and the replicas
//     the image shows live, ISR or not — reaches the offset asked for, and
//     LowWatermark is that value; past TimeoutMillis it answers
//     REQUEST_TIMED_OUT with the low watermark reached (the leader has
//     deleted; followers still follow). A follower parked in a long poll
//     hears of the move at once, so the wait is about two fetch round trips.
//
// Version notes: v1 no change (throttling); v2 flexible.
func deleteRecordsEntry(h Host) api.Entry {
	return api.Entry{
		Key: 21, Client: api.Versions(0, 2), Handle: bindTo(h, handleDeleteRecords),
		Rule:    api.Needs("DELETE on TOPIC", 5, checkDeleteRecords),
		Mutates: true,
	}
}

// deleteWait is a partition whose DeleteRecords waits for the replicas.
type deleteWait struct {
	p            *replica.Partition
	target       int64
	epoch        int32
	topic, index int // its place in the response
}

func handleDeleteRecords(h Host, cc *api.Conn, kreq kmsg.Request, respond func(kmsg.Response)) {
	req := kreq.(*kmsg.DeleteRecordsRequest)
	resp := req.ResponseKind().(*kmsg.DeleteRecordsResponse)
	replicas := h.Replicas()
	var waits []deleteWait
	for _, rt := range req.Topics {
		st := kmsg.NewDeleteRecordsResponseTopic()
		st.Topic = rt.Topic
		t := replicas.Topic(rt.Topic)
		for _, rp := range rt.Partitions {
			sp := kmsg.NewDeleteRecordsResponseTopicPartition()
			sp.Partition, sp.LowWatermark = rp.Partition, -1
			switch {
			case t == nil || rp.Partition < 0 || int(rp.Partition) >= len(t.Parts):
				sp.ErrorCode = kerr.UnknownTopicOrPartition.Code
			case discovery.IsInternalTopic(t.Name):
				sp.ErrorCode = kerr.InvalidTopicException.Code
			case !h.CleanupPolicyHas(t, "delete"):
				sp.ErrorCode = kerr.PolicyViolation.Code
			default:
				_, _, _, code := t.Serving(rp.Partition, replica.Produce)
				if code != 0 {
					sp.ErrorCode = code
					break
				}
				p := t.Parts[rp.Partition]
				target, v, err := p.DeleteRecords(rp.Offset)
				if err != nil {
					sp.ErrorCode = h.Code(err)
					p.Logger.Debug().Err(err).Int64("offset", rp.Offset).Str("client_id", cc.ClientID).Msg("delete records refused")
					break
				}
				lw, _ := p.LowWatermark()
				sp.LowWatermark = lw
				if lw < target {
					waits = append(waits, deleteWait{p: p, target: target, epoch: v.LeaderEpoch,
						topic: len(resp.Topics), index: len(st.Partitions)})
				}
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	if len(waits) == 0 {
		respond(resp)
		return
	}
	// The wait for the followers runs off the connection's reader, like
	// acks=all; one deadline bounds every partition of the request.
	h.Go(func() {
		ctx, cancel := context.WithTimeout(cc.Ctx, time.Duration(max(req.TimeoutMillis, 1))*time.Millisecond)
		defer cancel()
		for _, w := range waits {
			sp := &resp.Topics[w.topic].Partitions[w.index]
			lw, err := w.p.WaitLowWatermark(ctx, w.target, w.epoch)
			if cc.Ctx.Err() != nil {
				respond(nil) // the connection is gone
				return
			}
			switch sp.ErrorCode = h.Code(err); sp.ErrorCode {
			case 0, kerr.RequestTimedOut.Code:
				sp.LowWatermark = max(lw, sp.LowWatermark)
			default:
				sp.LowWatermark = -1 // leadership moved: no low watermark to report (Kafka's -1)
			}
			if err != nil {
				w.p.Logger.Debug().Err(err).Int64("offset", w.target).Msg("delete records: the replicas did not follow")
			}
		}
		respond(resp)
	})
}

func checkDeleteRecords(z *api.Authz, kreq kmsg.Request) (kmsg.Response, func(kmsg.Response)) {
	req := kreq.(*kmsg.DeleteRecordsRequest)
	var denied []kmsg.DeleteRecordsRequestTopic
	req.Topics, denied = api.Split(z, acl.OpDelete, req.Topics, func(t kmsg.DeleteRecordsRequestTopic) string { return t.Topic })
	if len(denied) == 0 {
		return nil, nil
	}
	fill := func(resp *kmsg.DeleteRecordsResponse) {
		for _, t := range denied {
			rt := kmsg.NewDeleteRecordsResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewDeleteRecordsResponseTopicPartition()
				rp.Partition, rp.LowWatermark, rp.ErrorCode = p.Partition, -1, api.TopicDenied
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
	}
	if len(req.Topics) == 0 {
		resp := req.ResponseKind().(*kmsg.DeleteRecordsResponse)
		fill(resp)
		return resp, nil
	}
	return nil, func(r kmsg.Response) { fill(r.(*kmsg.DeleteRecordsResponse)) }
}
