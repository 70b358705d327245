package broker

import (
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestProduceWideRequest sends produce requests naming more partitions
// than partitions.parallelAppendMin (broker/partitions), so their appends run concurrently, with an
// unknown partition among them, and one that names a partition twice
// (appended in request order instead): every partition's response has its
// own offset or error, and each log holds exactly what was sent to it.
func TestProduceWideRequest(t *testing.T) {
	b := testBroker(t, t.TempDir(), nil)
	rc := dial(t, b)
	const parts = 40
	for _, topic := range []string{"wide-a", "wide-b"} {
		if code := rc.createTopic(topic, parts, nil); code != 0 {
			t.Fatalf("create %s: %v", topic, kerr.ErrorForCode(code))
		}
	}
	wide := func(dup bool, round int) *kmsg.ProduceRequest {
		req := kmsg.NewPtrProduceRequest()
		req.SetVersion(9)
		req.Acks, req.TimeoutMillis = -1, 5000
		for _, topic := range []string{"wide-a", "wide-b"} {
			rt := kmsg.NewProduceRequestTopic()
			rt.Topic = topic
			for p := int32(0); p <= parts; p++ { // partition 40 does not exist
				v := fmt.Sprintf("%s-%d-r%d", topic, p, round)
				rt.Partitions = append(rt.Partitions, kmsg.ProduceRequestTopicPartition{Partition: p, Records: makeBatch(batchSpec{values: []string{v}})})
			}
			if dup {
				v := fmt.Sprintf("%s-0-r%d-again", topic, round)
				rt.Partitions = append(rt.Partitions, kmsg.ProduceRequestTopicPartition{Partition: 0, Records: makeBatch(batchSpec{values: []string{v}})})
			}
			req.Topics = append(req.Topics, rt)
		}
		return req
	}
	for round, dup := range []bool{false, true, false} {
		resp := rc.do(wide(dup, round)).(*kmsg.ProduceResponse)
		if len(resp.Topics) != 2 {
			t.Fatalf("round %d: %d topics in the response", round, len(resp.Topics))
		}
		for _, rt := range resp.Topics {
			want := parts + 1
			if dup {
				want++
			}
			if len(rt.Partitions) != want {
				t.Fatalf("round %d %s: %d partitions in the response, want %d", round, rt.Topic, len(rt.Partitions), want)
			}
			for i, sp := range rt.Partitions {
				switch {
				case sp.Partition == parts:
					if sp.ErrorCode != kerr.UnknownTopicOrPartition.Code {
						t.Fatalf("round %d %s-%d: error %d, want UNKNOWN_TOPIC_OR_PARTITION", round, rt.Topic, sp.Partition, sp.ErrorCode)
					}
				case sp.ErrorCode != 0:
					t.Fatalf("round %d %s-%d: %v", round, rt.Topic, sp.Partition, kerr.ErrorForCode(sp.ErrorCode))
				case i == parts+1: // the repeated partition 0, after its first batch
					if sp.BaseOffset != int64(round)+1 {
						t.Fatalf("round %d %s-0 again: offset %d, want %d", round, rt.Topic, sp.BaseOffset, round+1)
					}
				}
			}
		}
	}
	for _, topic := range []string{"wide-a", "wide-b"} {
		for p := int32(0); p < parts; p++ {
			code, vals := rc.fetchValues(topic, p, 0)
			if code != 0 {
				t.Fatalf("fetch %s-%d: %v", topic, p, kerr.ErrorForCode(code))
			}
			want := []string{fmt.Sprintf("%s-%d-r0", topic, p), fmt.Sprintf("%s-%d-r1", topic, p)}
			if p == 0 {
				want = append(want, fmt.Sprintf("%s-0-r1-again", topic))
			}
			want = append(want, fmt.Sprintf("%s-%d-r2", topic, p))
			if fmt.Sprint(vals) != fmt.Sprint(want) {
				t.Fatalf("%s-%d holds %v, want %v", topic, p, vals, want)
			}
		}
	}
}
