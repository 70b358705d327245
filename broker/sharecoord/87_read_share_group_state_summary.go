package sharecoord

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordlog/fjord/broker/api"
	"github.com/fjordlog/fjord/group/sharepart"
)

// ReadShareGroupStateSummary: v0-1
//
// Behaviour (Kafka 4.2's ShareCoordinatorShard.readStateSummary):
//   - Per share-partition: its state epoch, leader epoch and start offset,
//     without batches, for DescribeShareGroupOffsets and lag; the leader
//     epoch in the request is ignored (nothing is recorded). A
//     share-partition without state answers start offset -1, leader epoch
//     -1, state epoch 0, delivery-complete count -1, no error. The answer
//     waits until what it read is committed.
//   - A negative partition: INVALID_REQUEST. A topic or partition missing
//     from the node's metadata: UNKNOWN_TOPIC_OR_PARTITION.
//   - NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS,
//     COORDINATOR_NOT_AVAILABLE as for InitializeShareGroupState.
//   - Needs CLUSTER_ACTION on the cluster (brokers only).
//
// Version notes: v1 (Kafka 4.2, KIP-1226): DeliveryCompleteCount.
func readShareGroupStateSummaryEntry(h APIHost) api.Entry {
	return api.Entry{
		Key: 87, Client: api.Versions(0, 1), Handle: bindTo(h, handleReadShareGroupStateSummary),
		Rule:          clusterAction(summaryErrorResponse),
		ErrorResponse: summaryErrorResponse,
	}
}

func handleReadShareGroupStateSummary(h APIHost, cc *api.Conn, kreq kmsg.Request, respond func(kmsg.Response)) {
	req := kreq.(*kmsg.ReadShareGroupStateSummaryRequest)
	resp := req.ResponseKind().(*kmsg.ReadShareGroupStateSummaryResponse)
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
		st := kmsg.NewReadShareGroupStateSummaryResponseTopic()
		st.TopicID = rt.TopicID
		st.Partitions = make([]kmsg.ReadShareGroupStateSummaryResponseTopicPartition, len(rt.Partitions))
		for i, rp := range rt.Partitions {
			sp := &st.Partitions[i]
			*sp = kmsg.NewReadShareGroupStateSummaryResponseTopicPartition()
			sp.Partition = rp.Partition
			k := sharepart.Key{Group: req.GroupID, TopicID: rt.TopicID, Partition: rp.Partition}
			jobs = append(jobs, job{
				run: func(ctx context.Context, c *Coordinator) {
					s, ok, err := c.Summary(ctx, k)
					if !ok {
						s = State{StartOffset: -1, LeaderEpoch: -1, DeliveryCompleteCount: -1}
					}
					if sp.ErrorCode, sp.ErrorMessage = answer(h, err); err == nil {
						sp.StateEpoch, sp.LeaderEpoch, sp.StartOffset, sp.DeliveryCompleteCount =
							s.StateEpoch, s.LeaderEpoch, s.StartOffset, s.DeliveryCompleteCount
					}
				},
				fail: func(code int16, msg string) { sp.ErrorCode, sp.ErrorMessage = code, strPtr(msg) },
			})
		}
		resp.Topics = append(resp.Topics, st)
	}
	runJobs(h, cc, jobs, func() { respond(resp) })
}

func summaryErrorResponse(kreq kmsg.Request, code int16) kmsg.Response {
	req := kreq.(*kmsg.ReadShareGroupStateSummaryRequest)
	resp := req.ResponseKind().(*kmsg.ReadShareGroupStateSummaryResponse)
	for _, rt := range req.Topics {
		st := kmsg.NewReadShareGroupStateSummaryResponseTopic()
		st.TopicID = rt.TopicID
		for _, rp := range rt.Partitions {
			sp := kmsg.NewReadShareGroupStateSummaryResponseTopicPartition()
			sp.Partition, sp.ErrorCode = rp.Partition, code
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp
}
