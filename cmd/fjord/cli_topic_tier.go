package main

import (
	"context"
	"strconv"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordlog/fjord/broker/partitions"
)

// What `fjord topic describe` shows of tiered storage: each partition's
// local log start (ListOffsets EARLIEST_LOCAL, -4, KIP-405) next to its
// log start, and its leader's local bytes and remote bytes
// (DescribeLogDirs, the remote ones in Fjord's tagged field: Kafka has
// none).

type topicPart struct {
	topic     string
	partition int32
}

// listLocalStarts asks each partition's leader for its local log start
// (franz-go sends a ListOffsets to each leader). A broker that does not
// know -4 (before v8) answers an error: those partitions are left out.
func listLocalStarts(ctx context.Context, cl *kgo.Client, md kadm.Metadata, topics []string) (map[topicPart]int64, error) {
	req := kmsg.NewPtrListOffsetsRequest()
	req.ReplicaID = -1
	for _, name := range topics {
		rt := kmsg.NewListOffsetsRequestTopic()
		rt.Topic = name
		for _, p := range md.Topics[name].Partitions.Sorted() {
			rp := kmsg.NewListOffsetsRequestTopicPartition()
			rp.Partition, rp.Timestamp, rp.CurrentLeaderEpoch = p.Partition, -4, -1
			rt.Partitions = append(rt.Partitions, rp)
		}
		req.Topics = append(req.Topics, rt)
	}
	out := map[topicPart]int64{}
	for _, shard := range cl.RequestSharded(ctx, req) {
		if shard.Err != nil {
			continue
		}
		for _, rt := range shard.Resp.(*kmsg.ListOffsetsResponse).Topics {
			for _, rp := range rt.Partitions {
				if rp.ErrorCode == 0 {
					out[topicPart{rt.Topic, rp.Partition}] = rp.Offset
				}
			}
		}
	}
	return out, nil
}

// leaderSizes asks each leader for the sizes of the partitions it leads:
// local bytes, and remote bytes (0 when the partition has no copy). A
// leader that does not answer leaves its partitions out.
func leaderSizes(ctx context.Context, cl *kgo.Client, md kadm.Metadata, topics []string) map[topicPart][2]int64 {
	byLeader := map[int32]map[string][]int32{}
	for _, name := range topics {
		for _, p := range md.Topics[name].Partitions.Sorted() {
			if p.Leader < 0 {
				continue
			}
			if byLeader[p.Leader] == nil {
				byLeader[p.Leader] = map[string][]int32{}
			}
			byLeader[p.Leader][name] = append(byLeader[p.Leader][name], p.Partition)
		}
	}
	out := map[topicPart][2]int64{}
	for leader, parts := range byLeader {
		req := kmsg.NewPtrDescribeLogDirsRequest()
		for name, ps := range parts {
			rt := kmsg.NewDescribeLogDirsRequestTopic()
			rt.Topic, rt.Partitions = name, ps
			req.Topics = append(req.Topics, rt)
		}
		kresp, err := req.RequestWith(ctx, cl.Broker(int(leader)))
		if err != nil {
			continue
		}
		for _, dir := range kresp.Dirs {
			for _, rt := range dir.Topics {
				for i := range rt.Partitions {
					rp := &rt.Partitions[i]
					remote, _ := partitions.RemoteSize(rp)
					out[topicPart{rt.Topic, rp.Partition}] = [2]int64{rp.Size, remote}
				}
			}
		}
	}
	return out
}

// orDash is n, or "-" when not known (negative).
func orDash(n int64) string {
	if n < 0 {
		return "-"
	}
	return strconv.FormatInt(n, 10)
}
