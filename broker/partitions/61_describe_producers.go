package partitions

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordlog/fjord/broker/acl"
	"github.com/fjordlog/fjord/broker/api"
	"github.com/fjordlog/fjord/broker/replica"
)

// DescribeProducers: v0
//
// Behaviour: the producers the partition's leader tracks (KIP-664): id,
// epoch, last sequence, last append time, the coordinator epoch of its
// last marker and the first offset of its open transaction (-1: none),
// which is how an operator finds a transaction holding back the last
// stable offset. NOT_LEADER_OR_FOLLOWER on a follower,
// UNKNOWN_TOPIC_OR_PARTITION for a partition that does not exist.
func describeProducersEntry(h Host) api.Entry {
	return api.Entry{
		Key: 61, Client: api.Versions(0, 0), Handle: bindTo(h, handleDescribeProducers),
		Rule: api.Needs("READ on TOPIC", 0, checkDescribeProducers),
	}
}

func handleDescribeProducers(h Host, cc *api.Conn, kreq kmsg.Request, respond func(kmsg.Response)) {
	req := kreq.(*kmsg.DescribeProducersRequest)
	resp := req.ResponseKind().(*kmsg.DescribeProducersResponse)
	replicas := h.Replicas()
	for _, rt := range req.Topics {
		st := kmsg.NewDescribeProducersResponseTopic()
		st.Topic = rt.Topic
		t := replicas.Topic(rt.Topic)
		for _, idx := range rt.Partitions {
			sp := kmsg.NewDescribeProducersResponseTopicPartition()
			sp.Partition = idx
			_, lg, _, code := t.Serving(idx, replica.Produce)
			sp.ErrorCode = code
			if code == 0 {
				for _, ps := range lg.Producers() {
					ap := kmsg.NewDescribeProducersResponseTopicPartitionActiveProducer()
					ap.ProducerID, ap.ProducerEpoch, ap.LastSequence = ps.ProducerID, int32(ps.ProducerEpoch), ps.LastSequence
					ap.LastTimestamp, ap.CoordinatorEpoch, ap.CurrentTxnStartOffset = ps.LastAppendMs, ps.CoordinatorEpoch, ps.TxnStartOffset
					sp.ActiveProducers = append(sp.ActiveProducers, ap)
				}
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	respond(resp)
}

func checkDescribeProducers(z *api.Authz, kreq kmsg.Request) (kmsg.Response, func(kmsg.Response)) {
	req := kreq.(*kmsg.DescribeProducersRequest)
	var denied []kmsg.DescribeProducersRequestTopic
	req.Topics, denied = api.Split(z, acl.OpRead, req.Topics, func(t kmsg.DescribeProducersRequestTopic) string { return t.Topic })
	if len(denied) == 0 {
		return nil, nil
	}
	fill := func(resp *kmsg.DescribeProducersResponse) {
		for _, t := range denied {
			rt := kmsg.NewDescribeProducersResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewDescribeProducersResponseTopicPartition()
				rp.Partition, rp.ErrorCode = p, api.TopicDenied
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
	}
	if len(req.Topics) == 0 {
		resp := req.ResponseKind().(*kmsg.DescribeProducersResponse)
		fill(resp)
		return resp, nil
	}
	return nil, func(r kmsg.Response) { fill(r.(*kmsg.DescribeProducersResponse)) }
}
