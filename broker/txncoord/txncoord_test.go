package txncoord

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordlog/fjord/broker/coordinator"
	"github.com/fjordlog/fjord/broker/txn"
)

// Placement is Kafka's: abs(javaHashCode(id)) % n, with Integer.MIN_VALUE
// taken as 0, and the hash over UTF-16 code units.
func TestPartitionOf(t *testing.T) {
	for _, tt := range []struct {
		id   string
		n    int32
		want int32
	}{
		{"", 50, 0},
		{"a", 50, 97 % 50},
		{"my-txn", 50, 0},
		{"polygenelubricants", 50, 0},
		{"\U0001F600", 7, 0},
	} {
		h := coordinator.JavaStringHash(tt.id)
		want := h
		if want == -1<<31 {
			want = 0
		} else if want < 0 {
			want = -want
		}
		want %= tt.n
		if tt.id == "a" && want != tt.want {
			t.Fatalf("hash of a: %d", want)
		}
		if got := PartitionOf(tt.id, tt.n); got != want || got < 0 || got >= tt.n {
			t.Errorf("PartitionOf(%q, %d) = %d, want %d", tt.id, tt.n, got, want)
		}
	}
	// "polygenelubricants".hashCode() is Integer.MIN_VALUE in Java.
	if h := coordinator.JavaStringHash("polygenelubricants"); h != -1<<31 {
		t.Fatalf("coordinator.JavaStringHash(polygenelubricants) = %d, want MIN_VALUE", h)
	}
	// U+1F600 is the surrogate pair D83D DE00: 31*0xD83D + 0xDE00.
	if h := coordinator.JavaStringHash("\U0001F600"); h != 31*0xD83D+0xDE00 {
		t.Fatalf("surrogate pair hash %d", h)
	}
	if PartitionOf("x", 0) != 0 {
		t.Fatal("no partitions: want 0")
	}
}

// A marker request names each partition once under its topic, and the
// answer is split into written and failed by code; a partition the answer
// leaves out has failed.
func TestMarkersRequestAndResponse(t *testing.T) {
	m := txn.Marker{ProducerID: 7, ProducerEpoch: 3, Commit: true, CoordinatorEpoch: 2, TransactionVersion: 2}
	tps := []txn.TopicPartition{{Topic: "a", Partition: 0}, {Topic: "b", Partition: 1}, {Topic: "a", Partition: 2}, {Topic: "c", Partition: 0}}
	req := markersRequest(m, tps)
	if len(req.Markers) != 1 {
		t.Fatalf("%d markers", len(req.Markers))
	}
	mk := req.Markers[0]
	if mk.ProducerID != 7 || mk.ProducerEpoch != 3 || !mk.Committed || mk.CoordinatorEpoch != 2 || mk.TransactionVersion != 2 {
		t.Fatalf("marker %+v", mk)
	}
	if len(mk.Topics) != 3 || mk.Topics[0].Topic != "a" || len(mk.Topics[0].Partitions) != 2 {
		t.Fatalf("topics %+v", mk.Topics)
	}
	resp := kmsg.NewPtrWriteTxnMarkersResponse()
	rm := kmsg.NewWriteTxnMarkersResponseMarker()
	for _, x := range []struct {
		topic string
		p     int32
		code  int16
	}{{"a", 0, 0}, {"a", 2, kerr.NotLeaderForPartition.Code}, {"b", 1, 0}} {
		rt := kmsg.NewWriteTxnMarkersResponseMarkerTopic()
		rt.Topic = x.topic
		rp := kmsg.NewWriteTxnMarkersResponseMarkerTopicPartition()
		rp.Partition, rp.ErrorCode = x.p, x.code
		rt.Partitions = append(rt.Partitions, rp)
		rm.Topics = append(rm.Topics, rt)
	}
	resp.Markers = append(resp.Markers, rm)
	written, failed := splitMarkerResponse(resp, tps)
	if len(written) != 2 || written[0] != tps[0] || written[1] != tps[1] {
		t.Fatalf("written %v", written)
	}
	if f := failed[kerr.NotLeaderForPartition.Code]; len(f) != 1 || f[0] != tps[2] {
		t.Fatalf("failed %v", failed)
	}
	if f := failed[kerr.UnknownServerError.Code]; len(f) != 1 || f[0] != tps[3] {
		t.Fatalf("left out: %v", failed)
	}
}
