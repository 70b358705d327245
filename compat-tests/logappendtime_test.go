package compattests

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestLogAppendTime: on a topic with message.timestamp.type=LogAppendTime
// the broker stamps batches with its own clock; the produce response, the
// fetched records and ListOffsets by timestamp all follow it.
func TestLogAppendTime(t *testing.T) {
	b := startBroker(t, t.TempDir())
	const topic = "lat"
	adm := newAdmin(t, b.Addr)
	createTopic(t, adm, topic, 1, map[string]*string{"message.timestamp.type": kadmStr("LogAppendTime")})

	before := time.Now().Add(-time.Second).UnixMilli()
	c := dialRaw(t, b.Addr)
	for _, v := range []int16{3, 9} {
		req := kmsg.NewPtrProduceRequest()
		req.Version = v
		req.Acks = -1
		req.TimeoutMillis = 5000
		rt := kmsg.NewProduceRequestTopic()
		rt.Topic = topic
		rp := kmsg.NewProduceRequestTopicPartition()
		rp.Records = recordBatch(t, nil, []byte("stamped by the broker"))
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp := c.roundTrip(t, req).(*kmsg.ProduceResponse)
		sp := resp.Topics[0].Partitions[0]
		if sp.ErrorCode != 0 || sp.LogAppendTime < before {
			t.Errorf("produce v%d: error %d log append time %d, want 0 and a time >= %d", v, sp.ErrorCode, sp.LogAppendTime, before)
		}
	}
	cl := newClient(t, b.Addr, kgo.DefaultProduceTopic(topic))
	if _, err := cl.ProduceSync(testCtx(t, 10*time.Second), &kgo.Record{Value: []byte("old"), Timestamp: time.UnixMilli(1000)}).First(); err != nil {
		t.Fatalf("produce: %v", err)
	}
	after := time.Now().Add(time.Second).UnixMilli()

	recs := consumeAll(t, b.Addr, topic, 3, 15*time.Second)
	for _, r := range recs {
		ts := r.Timestamp.UnixMilli()
		if ts < before || ts > after || r.Attrs.TimestampType() != 1 {
			t.Errorf("record %d: timestamp %d type %d, want LogAppendTime (type 1) in [%d, %d]", r.Offset, ts, r.Attrs.TimestampType(), before, after)
		}
	}
	lo, err := adm.ListOffsetsAfterMilli(testCtx(t, 10*time.Second), 500, topic)
	if err != nil {
		t.Fatalf("list offsets: %v", err)
	}
	if o, _ := lo.Lookup(topic, 0); o.Offset != 0 || o.Timestamp < before {
		t.Errorf("ListOffsets for timestamp 500: offset %d timestamp %d, want offset 0 and the append time", o.Offset, o.Timestamp)
	}
}
