package controller

import (
	"runtime"
	"testing"
)

// TestRemoteSegmentMemory measures what the image holds per remote
// segment (every broker holds every tiered segment's metadata): 100
// partitions of 200 COPY_FINISHED segments, one leader epoch each. The
// figure is logged for docs/architecture.md; the bound only catches a
// blow-up (a copy per image kept alive, say).
func TestRemoteSegmentMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("allocates ~10 MB")
	}
	c := newCluster(t)
	c.brokers("", "", "")
	const parts, segs = 100, 200
	id := [16]byte{0xee, 1}
	c.apply(NewRecord(CreateTopic{Name: "tiered", ID: id}))
	for p := range int32(parts) {
		c.apply(NewRecord(CreatePartition{TopicID: id, Partition: p, Replicas: []int32{1}, ISR: []int32{1}, Leader: 1}))
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for p := range int32(parts) {
		for s := range int64(segs) {
			sid := [16]byte{byte(p), byte(s), byte(s >> 8), 1}
			c.apply(NewRecord(RemoteSegment{TopicID: id, Partition: p, SegmentID: sid, BaseOffset: s * 1000, EndOffset: s*1000 + 999,
				MaxTimestamp: s, SizeBytes: 1 << 20, LeaderEpochs: []EpochStart{{Epoch: 0, StartOffset: s * 1000}}, Broker: 1}))
			c.apply(NewRecord(RemoteSegmentStateChange{TopicID: id, Partition: p, SegmentID: sid, State: RemoteCopyFinished, Broker: 1}))
		}
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	per := float64(after.HeapAlloc-before.HeapAlloc) / (parts * segs)
	t.Logf("image: %.0f bytes per remote segment (%d segments)", per, parts*segs)
	if got := len(c.img.RemoteSegments(TopicPartition{id, 7})); got != segs {
		t.Fatalf("%d segments in partition 7, want %d", got, segs)
	}
	if per > 1024 {
		t.Fatalf("%.0f bytes per segment", per)
	}
	runtime.KeepAlive(c.img)
}
