package broker

import (
	"strconv"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordlog/fjord/protocol"
)

func TestNoteResponseErrors(t *testing.T) {
	c := &protocol.Client{}
	md := kmsg.NewPtrMetadataResponse()
	topic := "orders"
	mt := kmsg.NewMetadataResponseTopic()
	mt.Topic, mt.ErrorCode = &topic, 3
	mp := kmsg.NewMetadataResponseTopicPartition()
	mp.Partition, mp.ErrorCode = 2, 9
	mt.Partitions = append(mt.Partitions, mp)
	md.Topics = append(md.Topics, mt)
	noteResponseErrors(c, 3, 12, md)

	jg := kmsg.NewPtrJoinGroupResponse()
	jg.ErrorCode = 25
	noteResponseErrors(c, 11, 9, jg)

	pr := kmsg.NewPtrProduceResponse()
	pt := kmsg.NewProduceResponseTopic()
	pt.Topic = "logs"
	for i := range 10 {
		pp := kmsg.NewProduceResponseTopicPartition()
		pp.Partition, pp.ErrorCode = int32(i), 6
		pt.Partitions = append(pt.Partitions, pp)
	}
	pr.Topics = append(pr.Topics, pt)
	noteResponseErrors(c, 0, 9, pr)
	noteResponseErrors(c, 0, 9, kmsg.NewPtrProduceResponse()) // no error: nothing

	errs := c.Info().Errors
	want := []protocol.ClientError{
		{Key: 3, Version: 12, Code: 3, Where: "orders"},
		{Key: 3, Version: 12, Code: 9, Where: "orders-2"},
		{Key: 11, Version: 9, Code: 25},
		// Produce: at most maxNotedErrors of one response.
		{Key: 0, Version: 9, Code: 6, Where: "logs-0"},
		{Key: 0, Version: 9, Code: 6, Where: "logs-1"},
		{Key: 0, Version: 9, Code: 6, Where: "logs-2"},
		{Key: 0, Version: 9, Code: 6, Where: "logs-3"},
	}
	if len(errs) != len(want) {
		t.Fatalf("%d errors noted, want %d: %+v", len(errs), len(want), errs)
	}
	for i, w := range want {
		e := errs[i]
		if e.Key != w.Key || e.Version != w.Version || e.Code != w.Code || e.Where != w.Where {
			t.Errorf("error %d: %+v, want %+v", i, e, w)
		}
	}
}

// The walk a Metadata response of 100 topics × 10 partitions without an
// error costs on every response (about 20 µs here).
func BenchmarkNoteResponseErrorsMetadata(b *testing.B) {
	md := kmsg.NewPtrMetadataResponse()
	for i := range 100 {
		name := "topic-" + strconv.Itoa(i)
		mt := kmsg.NewMetadataResponseTopic()
		mt.Topic = &name
		for p := range 10 {
			mp := kmsg.NewMetadataResponseTopicPartition()
			mp.Partition = int32(p)
			mp.Replicas = []int32{1, 2, 3}
			mt.Partitions = append(mt.Partitions, mp)
		}
		md.Topics = append(md.Topics, mt)
	}
	c := &protocol.Client{}
	b.ReportAllocs()
	for b.Loop() {
		noteResponseErrors(c, 3, 12, md)
	}
}
