package replica

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestDurableEndTagOnTheWire encodes a follower's Fetch and a leader's
// answer as kmsg puts them on the wire, at every flexible version, decodes
// them as the other side does, and checks what each side reads.
func TestDurableEndTagOnTheWire(t *testing.T) {
	for v := int16(12); v <= 18; v++ {
		req := kmsg.NewPtrFetchRequest()
		req.Version = v
		req.ReplicaID, req.ReplicaState.ID = 2, 2
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic = "t"
		for i, c := range []struct{ offset, durable int64 }{{100, 90}, {100, 100}, {100, 120}, {7, 0}} {
			rp := kmsg.NewFetchRequestTopicPartition()
			rp.Partition, rp.FetchOffset = int32(i), c.offset
			PutDurableEnd(&rp, c.durable)
			rt.Partitions = append(rt.Partitions, rp)
		}
		req.Topics = append(req.Topics, rt)
		got := kmsg.NewPtrFetchRequest()
		got.Version = v
		if err := got.ReadFrom(req.AppendTo(nil)); err != nil {
			t.Fatalf("v%d: decode: %v", v, err)
		}
		want := []int64{90, 100, 100, 0}
		for i, rp := range got.Topics[0].Partitions {
			if d := FollowerDurableEnd(&rp); d != want[i] {
				t.Errorf("v%d partition %d: durable end %d, want %d", v, i, d, want[i])
			}
		}
		// Only a durable end below the fetch offset travels: the offset
		// says the rest.
		if n := got.Topics[0].Partitions[1].UnknownTags.Len(); n != 0 {
			t.Errorf("v%d: a durable fetch offset carries %d tags", v, n)
		}

		resp := req.ResponseKind().(*kmsg.FetchResponse)
		resp.Version = v
		if countsDurableEnds(resp) {
			t.Fatalf("v%d: an unmarked answer reads as marked", v)
		}
		MarkCountsDurableEnds(resp)
		gotResp := kmsg.NewPtrFetchResponse()
		gotResp.Version = v
		if err := gotResp.ReadFrom(resp.AppendTo(nil)); err != nil {
			t.Fatalf("v%d: decode answer: %v", v, err)
		}
		if !countsDurableEnds(gotResp) {
			t.Errorf("v%d: the leader's mark did not survive the wire", v)
		}
	}
}

// TestDamagedDurableEndCountsNothing: a tag that does not decode, or
// decodes negative, counts for nothing (-1), never as the fetch offset.
func TestDamagedDurableEndCountsNothing(t *testing.T) {
	for _, val := range [][]byte{nil, {0x80}, {0x01}, {0x02, 0x00}} {
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.FetchOffset = 50
		rp.UnknownTags.Set(DurableEndTag, val)
		if d := FollowerDurableEnd(&rp); d != -1 {
			t.Errorf("tag value %x: durable end %d, want -1", val, d)
		}
	}
	// Another tag of ours, or a future Kafka tag, changes nothing.
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.FetchOffset = 50
	rp.UnknownTags.Set(DurableEndTag+1, []byte{1})
	if d := FollowerDurableEnd(&rp); d != 50 {
		t.Errorf("another tag: durable end %d, want the fetch offset 50", d)
	}
}
