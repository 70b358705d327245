package sharecoord

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordlog/fjord/broker/api"
	"github.com/fjordlog/fjord/group/sharepart"
)

// InitializeShareGroupState: v0
//
// Behaviour (Kafka 4.2's ShareCoordinatorShard.initializeState):
//   - Per share-partition: starts its state afresh with the given state
//     epoch and start offset (-1: none yet; the share-partition leader
//     then resolves share.auto.offset.reset), nothing in flight: one
//     ShareSnapshot, committed before the answer, its snapshot epoch one
//     above the replaced state's (0 for a new one). Its leader epoch is 0
//     for a new share-partition; a replaced one keeps the highest leader
//     epoch it had seen (Kafka writes 0, and keeps that fence in memory
//     only, where a load after the prune does not find it).
//     Kafka's group coordinator sends it for share-partitions newly
//     assigned to a share group and for AlterShareGroupOffsets; Fjord's
//     Persister sends it for a leader's first snapshot.
//   - A state epoch older than the stored one: FENCED_STATE_EPOCH. A
//     negative partition: INVALID_REQUEST. A topic or partition missing
//     from the node's metadata: UNKNOWN_TOPIC_OR_PARTITION.
//   - This node is not the key's coordinator: NOT_COORDINATOR; loading
//     its state partition: COORDINATOR_LOAD_IN_PROGRESS; the record not
//     committed in share.coordinator.write.timeout.ms:
//     COORDINATOR_NOT_AVAILABLE.
//   - Needs CLUSTER_ACTION on the cluster (brokers only).
//
// Version notes: v0 (KIP-932, Kafka 4.0) is the only version.
func initializeShareGroupStateEntry(h APIHost) api.Entry {
	return api.Entry{
		Key: 83, Client: api.Versions(0, 0), Handle: bindTo(h, handleInitializeShareGroupState),
		Rule:          clusterAction(initializeErrorResponse),
		ErrorResponse: initializeErrorResponse,
	}
}

func handleInitializeShareGroupState(h APIHost, cc *api.Conn, kreq kmsg.Request, respond func(kmsg.Response)) {
	req := kreq.(*kmsg.InitializeShareGroupStateRequest)
	resp := req.ResponseKind().(*kmsg.InitializeShareGroupStateResponse)
	if req.GroupID == "" || len(req.Topics) == 0 {
		respond(resp)
		return
	}
	var jobs []job
	for _, rt := range req.Topics {
		st := kmsg.NewInitializeShareGroupStateResponseTopic()
		st.TopicID = rt.TopicID
		st.Partitions = make([]kmsg.InitializeShareGroupStateResponseTopicPartition, len(rt.Partitions))
		for i, rp := range rt.Partitions {
			sp := &st.Partitions[i]
			*sp = kmsg.NewInitializeShareGroupStateResponseTopicPartition()
			sp.Partition = rp.Partition
			k := sharepart.Key{Group: req.GroupID, TopicID: rt.TopicID, Partition: rp.Partition}
			jobs = append(jobs, job{
				run: func(ctx context.Context, c *Coordinator) {
					sp.ErrorCode, sp.ErrorMessage = answer(h, c.Initialize(ctx, k, rp.StateEpoch, rp.StartOffset))
				},
				fail: func(code int16, msg string) { sp.ErrorCode, sp.ErrorMessage = code, strPtr(msg) },
			})
		}
		resp.Topics = append(resp.Topics, st)
	}
	runJobs(h, cc, jobs, func() { respond(resp) })
}

func initializeErrorResponse(kreq kmsg.Request, code int16) kmsg.Response {
	req := kreq.(*kmsg.InitializeShareGroupStateRequest)
	resp := req.ResponseKind().(*kmsg.InitializeShareGroupStateResponse)
	for _, rt := range req.Topics {
		st := kmsg.NewInitializeShareGroupStateResponseTopic()
		st.TopicID = rt.TopicID
		for _, rp := range rt.Partitions {
			sp := kmsg.NewInitializeShareGroupStateResponseTopicPartition()
			sp.Partition, sp.ErrorCode = rp.Partition, code
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp
}
