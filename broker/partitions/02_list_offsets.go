package partitions

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordlog/fjord/broker/acl"
	"github.com/fjordlog/fjord/broker/api"
	"github.com/fjordlog/fjord/broker/replica"
	"github.com/fjordlog/fjord/storage"
)

// ListOffsets: v0-8
//
// Behaviour:
//   - Timestamp -1: the high watermark (latest); -2 and -4: the log start
//     offset (earliest, earliest local); -3: the batch with the largest
//     timestamp (KIP-734). Any other timestamp: the first record at or after
//     it, found through the time index; none gives offset -1.
//   - Only offsets below the high watermark are reported; with isolation
//     level 1 (read_committed, v2+) below the last stable offset, and -1
//     is the last stable offset.
//   - CurrentLeaderEpoch (v4+) above ours is UNKNOWN_LEADER_EPOCH.
//
// Version notes:
//   - v0: MaxNumOffsets and a list of old-style offsets (kafka-python 2.0
//     still sends it; Kafka 4 dropped it); v1: single offset and timestamp;
//     v2: isolation level; v4: leader epochs; v6: flexible; v7: max
//     timestamp; v8: earliest local (KIP-405)
func listOffsetsEntry(h Host) api.Entry {
	return api.Entry{
		Key: 2, Client: api.Versions(0, 8), Handle: bindTo(h, handleListOffsets),
		Rule: api.Needs("DESCRIBE on TOPIC", 0, checkListOffsets),
	}
}

func handleListOffsets(h Host, cc *api.Conn, kreq kmsg.Request, respond func(kmsg.Response)) {
	req := kreq.(*kmsg.ListOffsetsRequest)
	resp := req.ResponseKind().(*kmsg.ListOffsetsResponse)
	replicas := h.Replicas()
	for _, rt := range req.Topics {
		st := kmsg.NewListOffsetsResponseTopic()
		st.Topic = rt.Topic
		t := replicas.Topic(rt.Topic)
		for _, rp := range rt.Partitions {
			sp := kmsg.NewListOffsetsResponseTopicPartition()
			sp.Partition = rp.Partition
			sp.Offset, sp.Timestamp, sp.LeaderEpoch = -1, -1, 0
			switch {
			default:
				p, lg, v, code := t.Serving(rp.Partition, replica.ConsumerRead)
				if code == 0 {
					code = v.CheckEpoch(rp.CurrentLeaderEpoch)
				}
				if code != 0 {
					sp.ErrorCode = code
					break
				}
				sp.LeaderEpoch = v.LeaderEpoch
				limit := p.HW()
				if req.Version >= 2 && req.IsolationLevel == 1 {
					limit = lastStable(lg, limit)
				}
				off, ts, err := listOffset(lg, limit, rp.Timestamp)
				if err != nil {
					sp.ErrorCode = h.Code(err)
					p.Logger.Error().Err(err).Int64("timestamp", rp.Timestamp).Msg("list offsets")
					break
				}
				sp.Offset, sp.Timestamp = off, ts
				if req.Version == 0 {
					sp.OldStyleOffsets = []int64{off}
					if rp.MaxNumOffsets == 0 || off < 0 {
						sp.OldStyleOffsets = nil
					}
				}
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	respond(resp)
}

func listOffset(lg *storage.Log, hw, ts int64) (offset, timestamp int64, err error) {
	switch ts {
	case -1:
		return hw, -1, nil
	case -2, -4:
		return lg.StartOffset(), -1, nil
	case -3:
		off, mts, ok, err := lg.MaxTimestamp()
		if err != nil || !ok || off >= hw {
			return -1, -1, err
		}
		return off, mts, nil
	}
	off, rts, ok, err := lg.OffsetForTimestamp(ts, hw)
	if err != nil || !ok {
		return -1, -1, err
	}
	return off, rts, nil
}

func checkListOffsets(z *api.Authz, kreq kmsg.Request) (kmsg.Response, func(kmsg.Response)) {
	req := kreq.(*kmsg.ListOffsetsRequest)
	var denied []kmsg.ListOffsetsRequestTopic
	req.Topics, denied = api.Split(z, acl.OpDescribe, req.Topics, func(t kmsg.ListOffsetsRequestTopic) string { return t.Topic })
	if len(denied) == 0 {
		return nil, nil
	}
	return nil, func(r kmsg.Response) {
		resp := r.(*kmsg.ListOffsetsResponse)
		for _, t := range denied {
			rt := kmsg.NewListOffsetsResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewListOffsetsResponseTopicPartition()
				rp.Partition, rp.ErrorCode = p.Partition, api.TopicDenied
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
	}
}
