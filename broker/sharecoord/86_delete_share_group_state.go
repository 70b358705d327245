package sharecoord

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordlog/fjord/broker/api"
	"github.com/fjordlog/fjord/group/sharepart"
)

// DeleteShareGroupState: v0
//
// Behaviour (Kafka 4.2's ShareCoordinatorShard.deleteState):
//   - Per share-partition: deletes its state with a tombstone (a
//     ShareSnapshot key with no value), committed before the answer; a
//     share-partition without state succeeds and writes nothing. Kafka's
//     group coordinator sends it for DeleteShareGroupOffsets and deleted
//     share groups; Fjord's Persister for Persister.Delete.
//   - A negative partition: INVALID_REQUEST. A topic or partition
//     missing from the node's metadata: UNKNOWN_TOPIC_OR_PARTITION (as
//     Kafka: a deleted topic's state goes with the topic,
//     Coordinator.TopicsDeleted).
//   - NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS,
//     COORDINATOR_NOT_AVAILABLE as for InitializeShareGroupState.
//   - Needs CLUSTER_ACTION on the cluster (brokers only).
//
// Version notes: v0 (KIP-932, Kafka 4.0) is the only version.
func deleteShareGroupStateEntry(h APIHost) api.Entry {
	return api.Entry{
		Key: 86, Client: api.Versions(0, 0), Handle: bindTo(h, handleDeleteShareGroupState),
		Rule:          clusterAction(deleteErrorResponse),
		ErrorResponse: deleteErrorResponse,
	}
}

func handleDeleteShareGroupState(h APIHost, cc *api.Conn, kreq kmsg.Request, respond func(kmsg.Response)) {
	req := kreq.(*kmsg.DeleteShareGroupStateRequest)
	resp := req.ResponseKind().(*kmsg.DeleteShareGroupStateResponse)
	if req.GroupID == "" || len(req.Topics) == 0 {
		respond(resp)
		return
	}
	var jobs []job
	for _, rt := range req.Topics {
		st := kmsg.NewDeleteShareGroupStateResponseTopic()
		st.TopicID = rt.TopicID
		st.Partitions = make([]kmsg.DeleteShareGroupStateResponseTopicPartition, len(rt.Partitions))
		for i, rp := range rt.Partitions {
			sp := &st.Partitions[i]
			*sp = kmsg.NewDeleteShareGroupStateResponseTopicPartition()
			sp.Partition = rp.Partition
			k := sharepart.Key{Group: req.GroupID, TopicID: rt.TopicID, Partition: rp.Partition}
			jobs = append(jobs, job{
				run: func(ctx context.Context, c *Coordinator) {
					sp.ErrorCode, sp.ErrorMessage = answer(h, c.Delete(ctx, k))
				},
				fail: func(code int16, msg string) { sp.ErrorCode, sp.ErrorMessage = code, strPtr(msg) },
			})
		}
		if len(rt.Partitions) == 0 {
			respond(req.ResponseKind())
			return
		}
		resp.Topics = append(resp.Topics, st)
	}
	runJobs(h, cc, jobs, func() { respond(resp) })
}

func deleteErrorResponse(kreq kmsg.Request, code int16) kmsg.Response {
	req := kreq.(*kmsg.DeleteShareGroupStateRequest)
	resp := req.ResponseKind().(*kmsg.DeleteShareGroupStateResponse)
	for _, rt := range req.Topics {
		st := kmsg.NewDeleteShareGroupStateResponseTopic()
		st.TopicID = rt.TopicID
		for _, rp := range rt.Partitions {
			sp := kmsg.NewDeleteShareGroupStateResponseTopicPartition()
			sp.Partition, sp.ErrorCode = rp.Partition, code
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp
}
