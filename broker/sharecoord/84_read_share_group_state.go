package sharecoord

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordlog/fjord/broker/api"
	"github.com/fjordlog/fjord/group/sharepart"
)

// ReadShareGroupState: v0
//
// Behaviour (Kafka 4.2's ShareCoordinatorShard.readStateAndMaybeUpdateLeaderEpoch):
//   - Per share-partition: its state epoch, start offset and state
//     batches (merged, sorted, disjoint) for the leader of the given
//     leader epoch, sent by a share-partition leader taking the
//     share-partition over. A leader epoch newer than the stored one is
//     recorded first, with a ShareUpdate (or the periodic ShareSnapshot),
//     committed before the answer: from then on the older leader's writes
//     are FENCED_LEADER_EPOCH. Every answer waits until what it read is
//     committed.
//   - A leader epoch older than the stored one: FENCED_LEADER_EPOCH. No
//     state (never initialized, or deleted): INVALID_REQUEST, with a
//     message saying so, as Kafka 4.2. A negative partition:
//     INVALID_REQUEST. A topic or partition missing from the node's
//     metadata: UNKNOWN_TOPIC_OR_PARTITION.
//   - NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS,
//     COORDINATOR_NOT_AVAILABLE as for InitializeShareGroupState.
//   - Needs CLUSTER_ACTION on the cluster (brokers only).
//
// Version notes: v0 (KIP-932, Kafka 4.0) is the only version.
func readShareGroupStateEntry(h APIHost) api.Entry {
	return api.Entry{
		Key: 84, Client: api.Versions(0, 0), Handle: bindTo(h, handleReadShareGroupState),
		Rule:          clusterAction(readErrorResponse),
		ErrorResponse: readErrorResponse,
	}
}

func handleReadShareGroupState(h APIHost, cc *api.Conn, kreq kmsg.Request, respond func(kmsg.Response)) {
	req := kreq.(*kmsg.ReadShareGroupStateRequest)
	resp := req.ResponseKind().(*kmsg.ReadShareGroupStateResponse)
	if req.GroupID == "" || len(req.Topics) == 0 {
		respond(resp)
		return
	}
	var jobs []job
	for _, rt := range req.Topics {
		if len(rt.Partitions) == 0 {
			respond(req.ResponseKind())
			return
		}
		st := kmsg.NewReadShareGroupStateResponseTopic()
		st.TopicID = rt.TopicID
		st.Partitions = make([]kmsg.ReadShareGroupStateResponseTopicPartition, len(rt.Partitions))
		for i, rp := range rt.Partitions {
			sp := &st.Partitions[i]
			*sp = kmsg.NewReadShareGroupStateResponseTopicPartition()
			sp.Partition = rp.Partition
			k := sharepart.Key{Group: req.GroupID, TopicID: rt.TopicID, Partition: rp.Partition}
			jobs = append(jobs, job{
				run: func(ctx context.Context, c *Coordinator) {
					s, err := c.Read(ctx, k, rp.LeaderEpoch)
					if sp.ErrorCode, sp.ErrorMessage = answer(h, err); err == nil {
						sp.StateEpoch, sp.StartOffset, sp.StateBatches = s.StateEpoch, s.StartOffset, toReadBatches(s.Batches)
					}
				},
				fail: func(code int16, msg string) { sp.ErrorCode, sp.ErrorMessage = code, strPtr(msg) },
			})
		}
		resp.Topics = append(resp.Topics, st)
	}
	runJobs(h, cc, jobs, func() { respond(resp) })
}

func readErrorResponse(kreq kmsg.Request, code int16) kmsg.Response {
	req := kreq.(*kmsg.ReadShareGroupStateRequest)
	resp := req.ResponseKind().(*kmsg.ReadShareGroupStateResponse)
	for _, rt := range req.Topics {
		st := kmsg.NewReadShareGroupStateResponseTopic()
		st.TopicID = rt.TopicID
		for _, rp := range rt.Partitions {
			sp := kmsg.NewReadShareGroupStateResponseTopicPartition()
			sp.Partition, sp.ErrorCode = rp.Partition, code
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp
}
