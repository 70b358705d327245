package replica

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordlog/fjord/storage/recordbatch"
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

// goHost is the FetchHost share the flusher uses: goroutines, counted.
type goHost struct {
	FetchHost
	wg sync.WaitGroup
}

func (h *goHost) Go(fn func()) bool { h.wg.Go(fn); return true }

// TestFlusherRounds: what a pipelining fetcher appends is fsynced by a
// round that begins after the add; appends during a round queue for the
// next one; the fetcher can wait for the running round to end.
func TestFlusherRounds(t *testing.T) {
	p, _ := newTestPartition(t, rf3(1, 2, 3), 1, nil)
	appendNoFlush := func() {
		t.Helper()
		batch := recordbatch.Build([]recordbatch.KV{{Value: []byte("v")}}, time.Now().UnixMilli())
		info, err := recordbatch.Validate(batch, 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := p.AppendAsLeader(batch, info, time.Now().UnixMilli()); err != nil {
			t.Fatal(err)
		}
	}
	h := &goHost{}
	fl := flusher{host: h}
	for range 50 {
		appendNoFlush()
		fl.add([]*Partition{p, p}) // named twice: flushed once per round
		if fl.queued() {
			fl.round(context.Background())
		}
	}
	for fl.busy() {
		fl.round(context.Background())
	}
	h.wg.Wait()
	if lg := p.Log(); lg.DurableOffset() != lg.EndOffset() || lg.EndOffset() != 50 {
		t.Fatalf("durable %d, end %d, want 50 and 50", lg.DurableOffset(), lg.EndOffset())
	}
	// The core heard of each round's durable end.
	p.FollowerFetched(2, p.View().LeaderEpoch, 50, 50, -1)
	p.FollowerFetched(3, p.View().LeaderEpoch, 50, 50, -1)
	if p.HW() != 50 {
		t.Fatalf("hw %d, want 50", p.HW())
	}
}
