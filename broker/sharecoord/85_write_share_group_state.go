package sharecoord

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordlog/fjord/broker/api"
	"github.com/fjordlog/fjord/group/sharepart"
)

// WriteShareGroupState: v0-1
//
// Behaviour (Kafka 4.2's ShareCoordinatorShard.writeState):
//   - Per share-partition: merges the state batches and start offset (-1:
//     unchanged) into its state, as a ShareUpdate, or as a ShareSnapshot of
//     the whole merged state once share.coordinator.snapshot.update.
//     records.per.snapshot updates followed the last snapshot; committed
//     before the answer. Where batches overlap, the greater delivery count
//     wins, then the later state (Kafka's PersisterStateBatchCombiner);
//     batches below the start offset are dropped. The leader epoch is
//     checked, not recorded (a read records it); the state epoch never
//     changes here.
//   - A leader epoch (not -1) older than the stored one:
//     FENCED_LEADER_EPOCH; a state epoch other than the stored one:
//     FENCED_STATE_EPOCH (Kafka fences only an older one, -1 included; a
//     newer one is a leader of state since deleted and initialized again
//     at a lower epoch, so Fjord fences it too). No state:
//     INVALID_REQUEST, with a message saying so, as Kafka 4.2. A negative
//     partition, and (unlike Kafka, which stores them) batches no
//     share-partition can have (an empty or negative range, an unknown
//     delivery state, a negative delivery count): INVALID_REQUEST. A topic or partition missing from the
//     node's metadata: UNKNOWN_TOPIC_OR_PARTITION.
//   - NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS,
//     COORDINATOR_NOT_AVAILABLE as for InitializeShareGroupState.
//   - Needs CLUSTER_ACTION on the cluster (brokers only).
//
// Version notes: v1 (Kafka 4.2, KIP-1226): DeliveryCompleteCount, stored
// with the state (v0 writes -1, "unknown").
func writeShareGroupStateEntry(h APIHost) api.Entry {
	return api.Entry{
		Key: 85, Client: api.Versions(0, 1), Handle: bindTo(h, handleWriteShareGroupState),
		Rule:          clusterAction(writeErrorResponse),
		ErrorResponse: writeErrorResponse,
	}
}

func handleWriteShareGroupState(h APIHost, cc *api.Conn, kreq kmsg.Request, respond func(kmsg.Response)) {
	req := kreq.(*kmsg.WriteShareGroupStateRequest)
	resp := req.ResponseKind().(*kmsg.WriteShareGroupStateResponse)
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
		st := kmsg.NewWriteShareGroupStateResponseTopic()
		st.TopicID = rt.TopicID
		st.Partitions = make([]kmsg.WriteShareGroupStateResponseTopicPartition, len(rt.Partitions))
		for i, rp := range rt.Partitions {
			sp := &st.Partitions[i]
			*sp = kmsg.NewWriteShareGroupStateResponseTopicPartition()
			sp.Partition = rp.Partition
			k := sharepart.Key{Group: req.GroupID, TopicID: rt.TopicID, Partition: rp.Partition}
			w := WriteState{LeaderEpoch: rp.LeaderEpoch, StateEpoch: rp.StateEpoch, StartOffset: rp.StartOffset,
				DeliveryCompleteCount: rp.DeliveryCompleteCount, Batches: fromWriteBatches(rp.StateBatches)}
			if req.Version < 1 {
				w.DeliveryCompleteCount = -1
			}
			jobs = append(jobs, job{
				run: func(ctx context.Context, c *Coordinator) {
					sp.ErrorCode, sp.ErrorMessage = answer(h, c.Write(ctx, k, w))
				},
				fail: func(code int16, msg string) { sp.ErrorCode, sp.ErrorMessage = code, strPtr(msg) },
			})
		}
		resp.Topics = append(resp.Topics, st)
	}
	runJobs(h, cc, jobs, func() { respond(resp) })
}

func writeErrorResponse(kreq kmsg.Request, code int16) kmsg.Response {
	req := kreq.(*kmsg.WriteShareGroupStateRequest)
	resp := req.ResponseKind().(*kmsg.WriteShareGroupStateResponse)
	for _, rt := range req.Topics {
		st := kmsg.NewWriteShareGroupStateResponseTopic()
		st.TopicID = rt.TopicID
		for _, rp := range rt.Partitions {
			sp := kmsg.NewWriteShareGroupStateResponseTopicPartition()
			sp.Partition, sp.ErrorCode = rp.Partition, code
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp
}
