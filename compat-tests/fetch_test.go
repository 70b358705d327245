package compattests

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// rawFetch sends one Fetch v11 for partition 0 of topic at offset.
func rawFetch(t testing.TB, c *rawConn, topic string, offset int64, maxWait, minBytes int32) kmsg.FetchResponseTopicPartition {
	t.Helper()
	req := kmsg.NewPtrFetchRequest()
	req.Version = 11
	req.ReplicaID = -1
	req.MaxWaitMillis, req.MinBytes, req.MaxBytes = maxWait, minBytes, 1<<20
	req.SessionEpoch = -1
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes, rp.LogStartOffset, rp.CurrentLeaderEpoch = 0, offset, 1<<20, -1, -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp := c.roundTrip(t, req).(*kmsg.FetchResponse)
	if resp.ErrorCode != 0 || len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		t.Fatalf("fetch: error %d, %+v", resp.ErrorCode, resp.Topics)
	}
	return resp.Topics[0].Partitions[0]
}

// TestFetchLongPollAndOutOfRange: a fetch at the end waits up to
// MaxWaitMillis, wakes up when a record arrives, and an offset past the end
// is OFFSET_OUT_OF_RANGE.
func TestFetchLongPollAndOutOfRange(t *testing.T) {
	b := startBroker(t, t.TempDir())
	const topic = "longpoll"
	createTopic(t, newAdmin(t, b.Addr), topic, 1, nil)
	c := dialRaw(t, b.Addr)

	start := time.Now()
	sp := rawFetch(t, c, topic, 0, 400, 1)
	if el := time.Since(start); el < 300*time.Millisecond || el > 3*time.Second {
		t.Errorf("empty fetch with MaxWaitMillis=400 answered after %v", el)
	}
	if sp.ErrorCode != 0 || len(sp.RecordBatches) != 0 || sp.HighWatermark != 0 {
		t.Errorf("empty fetch: error %d, %d bytes, HW %d", sp.ErrorCode, len(sp.RecordBatches), sp.HighWatermark)
	}

	cl := newClient(t, b.Addr, kgo.DefaultProduceTopic(topic))
	go func() {
		time.Sleep(300 * time.Millisecond)
		cl.ProduceSync(testCtx(t, 10*time.Second), &kgo.Record{Value: []byte("wake up")})
	}()
	start = time.Now()
	sp = rawFetch(t, c, topic, 0, 5000, 1)
	el := time.Since(start)
	if n, _ := countRecords(sp.RecordBatches); sp.ErrorCode != 0 || n != 1 {
		t.Errorf("long-poll fetch: error %d, %d records, want the one produced", sp.ErrorCode, n)
	}
	if el > 3*time.Second {
		t.Errorf("long-poll fetch returned after %v: a produce should end the wait (MaxWaitMillis=5000)", el)
	}

	sp = rawFetch(t, c, topic, 1000, 0, 0)
	if sp.ErrorCode != kerr.OffsetOutOfRange.Code {
		t.Errorf("fetch at offset 1000 of a 1-record log: error %d, want 1 (OFFSET_OUT_OF_RANGE)", sp.ErrorCode)
	}
	sp = rawFetch(t, c, topic, 1, 0, 0)
	if sp.ErrorCode != 0 || len(sp.RecordBatches) != 0 {
		t.Errorf("fetch at the end offset: error %d, %d bytes; want no error and no data", sp.ErrorCode, len(sp.RecordBatches))
	}
}

// TestRetention: with time retention the log start moves forward; ListOffsets
// earliest, consumers from the start and fetches below it agree.
func TestRetention(t *testing.T) {
	b := startBroker(t, t.TempDir(), "log.retention.check.interval.ms=100")
	const topic = "retained"
	adm := newAdmin(t, b.Addr)
	createTopic(t, adm, topic, 1, map[string]*string{"segment.bytes": kadmStr("1024"), "retention.ms": kadmStr("60000")})
	cl := newClient(t, b.Addr, kgo.DefaultProduceTopic(topic), kgo.ProducerBatchCompression(kgo.NoCompression()))
	ctx := testCtx(t, time.Minute)
	old := time.Now().Add(-time.Hour)
	const n = 50
	for i := 0; i < n; i++ {
		// One batch per record, timestamps an hour old: past retention.
		if _, err := cl.ProduceSync(ctx, &kgo.Record{Value: make([]byte, 100), Timestamp: old}).First(); err != nil {
			t.Fatalf("produce: %v", err)
		}
	}
	var startOff int64
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		lo, err := adm.ListStartOffsets(ctx, topic)
		if err != nil {
			t.Fatalf("list start offsets: %v", err)
		}
		if o, _ := lo.Lookup(topic, 0); o.Offset > 0 {
			startOff = o.Offset
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if startOff == 0 {
		t.Fatalf("log start offset still 0 after 20s with retention.ms=60000 and records an hour old")
	}
	if startOff > n {
		t.Fatalf("log start offset %d beyond the end %d", startOff, n)
	}
	if ends := endOffsets(t, adm, topic); ends[0] != n {
		t.Errorf("end offset %d after retention, want %d", ends[0], n)
	}
	t.Logf("retention moved the log start to %d", startOff)
	// Retention may go on in the background; read whatever is left from
	// the start: offsets contiguous up to the end.
	if startOff < n {
		recs := consumeAll(t, b.Addr, topic, int(n-startOff), 15*time.Second)
		if len(recs) > 0 && recs[0].Offset < startOff {
			t.Errorf("consumer from the start got offset %d, below the log start %d", recs[0].Offset, startOff)
		}
	}
	sp := rawFetch(t, dialRaw(t, b.Addr), topic, 0, 0, 0)
	if sp.ErrorCode != kerr.OffsetOutOfRange.Code {
		t.Errorf("fetch at offset 0 below log start %d: error %d, want OFFSET_OUT_OF_RANGE", startOff, sp.ErrorCode)
	}
	// A restart keeps the new log start.
	b.Stop()
	b.Restart()
	lo, err := newAdmin(t, b.Addr).ListStartOffsets(ctx, topic)
	if err != nil {
		t.Fatalf("list start offsets after restart: %v", err)
	}
	if o, _ := lo.Lookup(topic, 0); o.Offset < startOff {
		t.Errorf("log start offset after restart %d, was %d", o.Offset, startOff)
	}
}
