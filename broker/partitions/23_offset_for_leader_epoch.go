package partitions

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordlog/fjord/broker/acl"
	"github.com/fjordlog/fjord/broker/api"
	"github.com/fjordlog/fjord/broker/replica"
)

// OffsetForLeaderEpoch: v0-4
//
// Behaviour:
//   - Answered by the partition's leader from its leader-epoch cache
//     (KIP-101/KIP-279): for the requested epoch, the largest epoch it knows
//     at or below it and that epoch's end offset (the start of the next
//     epoch, or the log end for the current one); an epoch older than any
//     it knows gives epoch -1 and offset -1. Followers use it to find where
//     their log diverges from the leader's and truncate exactly there;
//     consumers use it to detect truncation after a leader change (KIP-320).
//   - CurrentLeaderEpoch (v2+) is checked like Fetch's: older is
//     FENCED_LEADER_EPOCH, newer UNKNOWN_LEADER_EPOCH; a non-leader answers
//     NOT_LEADER_OR_FOLLOWER.
//
// Version notes:
//   - v1: leader epoch in the response; v2: current leader epoch;
//     v3: replica id; v4: flexible
func offsetForLeaderEpochEntry(h Host) api.Entry {
	return api.Entry{
		Key: 23, Client: api.Versions(0, 4), Handle: bindTo(h, handleOffsetForLeaderEpoch),
		Rule: api.Needs("DESCRIBE on TOPIC; from a follower: CLUSTER_ACTION on CLUSTER", 0, checkOffsetForLeaderEpoch),
	}
}

func handleOffsetForLeaderEpoch(h Host, cc *api.Conn, kreq kmsg.Request, respond func(kmsg.Response)) {
	req := kreq.(*kmsg.OffsetForLeaderEpochRequest)
	resp := req.ResponseKind().(*kmsg.OffsetForLeaderEpochResponse)
	replicas := h.Replicas()
	for _, rt := range req.Topics {
		st := kmsg.NewOffsetForLeaderEpochResponseTopic()
		st.Topic = rt.Topic
		t := replicas.Topic(rt.Topic)
		for _, rp := range rt.Partitions {
			sp := kmsg.NewOffsetForLeaderEpochResponseTopicPartition()
			sp.Partition = rp.Partition
			sp.LeaderEpoch, sp.EndOffset = -1, -1
			_, lg, v, code := t.Serving(rp.Partition, replica.ConsumerRead)
			if code == 0 && req.Version >= 2 {
				code = v.CheckEpoch(rp.CurrentLeaderEpoch)
			}
			if code != 0 {
				sp.ErrorCode = code
			} else {
				sp.LeaderEpoch, sp.EndOffset = lg.EndOffsetForEpoch(rp.LeaderEpoch)
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	respond(resp)
}

func checkOffsetForLeaderEpoch(z *api.Authz, kreq kmsg.Request) (kmsg.Response, func(kmsg.Response)) {
	req := kreq.(*kmsg.OffsetForLeaderEpochRequest)
	var denied []kmsg.OffsetForLeaderEpochRequestTopic
	code := api.TopicDenied
	if req.Version >= 3 && req.ReplicaID >= 0 {
		if z.Cluster(acl.OpClusterAction) {
			return nil, nil
		}
		code = api.ClusterDenied
		denied, req.Topics = req.Topics, []kmsg.OffsetForLeaderEpochRequestTopic{}
	} else {
		req.Topics, denied = api.Split(z, acl.OpDescribe, req.Topics, func(t kmsg.OffsetForLeaderEpochRequestTopic) string { return t.Topic })
	}
	if len(denied) == 0 {
		return nil, nil
	}
	fill := func(resp *kmsg.OffsetForLeaderEpochResponse) {
		for _, t := range denied {
			rt := kmsg.NewOffsetForLeaderEpochResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewOffsetForLeaderEpochResponseTopicPartition()
				rp.Partition, rp.ErrorCode, rp.LeaderEpoch, rp.EndOffset = p.Partition, code, -1, -1
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
	}
	if len(req.Topics) == 0 {
		resp := req.ResponseKind().(*kmsg.OffsetForLeaderEpochResponse)
		fill(resp)
		return resp, nil
	}
	return nil, func(r kmsg.Response) { fill(r.(*kmsg.OffsetForLeaderEpochResponse)) }
}
