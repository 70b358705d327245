package compattests

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

const restartRecords = 10_000

// TestRestartClean: records survive a clean shutdown (SIGTERM) and new
// produces continue where the log ended.
func TestRestartClean(t *testing.T) {
	b := startBroker(t, t.TempDir())
	adm := newAdmin(t, b.Addr)
	const topic = "restart"
	createTopic(t, adm, topic, 1, nil)

	cl := newClient(t, b.Addr, kgo.DefaultProduceTopic(topic), kgo.RequiredAcks(kgo.AllISRAcks()))
	ctx := testCtx(t, time.Minute)
	base := time.Now().Add(-time.Hour).UnixMilli()
	var wg sync.WaitGroup
	var failed atomic.Int64
	for i := 0; i < restartRecords; i++ {
		wg.Add(1)
		// Distinct, increasing timestamps: the largest is the last record.
		r := &kgo.Record{Key: []byte(fmt.Sprintf("k%d", i%10)), Value: []byte(fmt.Sprintf("value-%05d", i)), Timestamp: time.UnixMilli(base + int64(i))}
		cl.Produce(ctx, r, func(r *kgo.Record, err error) {
			defer wg.Done()
			if err != nil {
				if failed.Add(1) == 1 {
					t.Errorf("produce: %v", err)
				}
			}
		})
	}
	wg.Wait()
	if failed.Load() > 0 {
		t.Fatalf("%d produces failed", failed.Load())
	}
	if ends := endOffsets(t, adm, topic); ends[0] != restartRecords {
		t.Fatalf("end offset before restart %d, want %d", ends[0], restartRecords)
	}
	maxBefore, err := adm.ListMaxTimestampOffsets(ctx, topic)
	if err != nil {
		t.Fatalf("max timestamp offsets: %v", err)
	}
	cl.Close()

	// A second topic with small segments where the largest timestamp sits
	// inside a multi-record batch of an older (inactive) segment.
	const segTopic = "restart-maxts"
	createTopic(t, adm, segTopic, 1, map[string]*string{"segment.bytes": kadmStr("1024")})
	batch := func(n int, ts int64, size int) {
		t.Helper()
		bc := manualPartitionClient(t, b.Addr, kgo.ManualFlushing(), kgo.ProducerBatchCompression(kgo.NoCompression()))
		var bw sync.WaitGroup
		for i := 0; i < n; i++ {
			bw.Add(1)
			bc.Produce(ctx, &kgo.Record{Topic: segTopic, Value: make([]byte, size), Timestamp: time.UnixMilli(ts + int64(i))}, func(_ *kgo.Record, err error) {
				defer bw.Done()
				if err != nil {
					t.Errorf("produce to %s: %v", segTopic, err)
				}
			})
		}
		if err := bc.Flush(ctx); err != nil {
			t.Fatalf("flush: %v", err)
		}
		bw.Wait()
		bc.Close()
	}
	batch(4, 90_000, 50)
	batch(4, 99_990, 50) // offsets 4-7; the largest timestamp, 99_993, is offset 7
	for i := 0; i < 12; i++ {
		batch(2, 50_000, 200)
	}
	segMaxBefore, err := adm.ListMaxTimestampOffsets(ctx, segTopic)
	if err != nil {
		t.Fatalf("max timestamp offsets: %v", err)
	}

	b.Stop()
	if !b.logContains("all logs flushed and closed") {
		t.Errorf("broker log lacks its clean-shutdown line")
	}
	b.Restart()
	adm = newAdmin(t, b.Addr)

	if ends := endOffsets(t, adm, topic); ends[0] != restartRecords {
		t.Errorf("end offset after restart %d, want %d", ends[0], restartRecords)
	}
	recs := consumeAll(t, b.Addr, topic, restartRecords, time.Minute)
	for i, r := range recs {
		if r.Offset != int64(i) || string(r.Value) != fmt.Sprintf("value-%05d", i) || r.Timestamp.UnixMilli() != base+int64(i) {
			t.Fatalf("after restart record %d: offset %d value %q ts %d", i, r.Offset, r.Value, r.Timestamp.UnixMilli())
		}
	}

	// ListOffsets max timestamp gives the same answer before and after.
	maxAfter, err := adm.ListMaxTimestampOffsets(ctx, topic)
	if err != nil {
		t.Fatalf("max timestamp offsets after restart: %v", err)
	}
	ob, _ := maxBefore.Lookup(topic, 0)
	oa, _ := maxAfter.Lookup(topic, 0)
	t.Logf("ListOffsets max timestamp: before restart offset %d ts %d; after offset %d ts %d", ob.Offset, ob.Timestamp-base, oa.Offset, oa.Timestamp-base)
	if ob.Offset != oa.Offset || ob.Timestamp != oa.Timestamp {
		t.Errorf("ListOffsets max timestamp (-3): before restart offset %d ts %d, after a clean restart offset %d ts %d (the record with the largest timestamp is offset %d)",
			ob.Offset, ob.Timestamp, oa.Offset, oa.Timestamp, restartRecords-1)
	}

	segMaxAfter, err := adm.ListMaxTimestampOffsets(ctx, segTopic)
	if err != nil {
		t.Fatalf("max timestamp offsets after restart: %v", err)
	}
	ob, _ = segMaxBefore.Lookup(segTopic, 0)
	oa, _ = segMaxAfter.Lookup(segTopic, 0)
	t.Logf("%s max timestamp: before restart offset %d ts %d; after offset %d ts %d", segTopic, ob.Offset, ob.Timestamp, oa.Offset, oa.Timestamp)
	if ob.Offset != oa.Offset || ob.Timestamp != oa.Timestamp {
		t.Errorf("%s: ListOffsets max timestamp (-3) changed across a clean restart: before offset %d ts %d, after offset %d ts %d (Kafka: offset 7 ts 99993 both times)",
			segTopic, ob.Offset, ob.Timestamp, oa.Offset, oa.Timestamp)
	}

	cl2 := newClient(t, b.Addr, kgo.DefaultProduceTopic(topic))
	r, err := cl2.ProduceSync(ctx, &kgo.Record{Value: []byte("after-restart")}).First()
	if err != nil {
		t.Fatalf("produce after restart: %v", err)
	}
	if r.Offset != restartRecords {
		t.Errorf("first produce after restart got offset %d, want %d", r.Offset, restartRecords)
	}
}

func kadmStr(s string) *string { return &s }

type ackedRec struct {
	part   int32
	offset int64
	value  string
}

// TestCrashRecovery: SIGKILL the broker three times while a producer
// (acks=all) is writing; every acknowledged record must be at its acked
// offset after each restart, and produces continue at the recovered end.
func TestCrashRecovery(t *testing.T) {
	b := startBroker(t, t.TempDir())
	const topic = "crash"
	const partitions = 3
	createTopic(t, newAdmin(t, b.Addr), topic, partitions, nil)

	var acked []ackedRec
	for cycle := 0; cycle < 3; cycle++ {
		n := produceUntilKilled(t, b, topic, cycle, 2*time.Second)
		acked = append(acked, n...)
		t.Logf("cycle %d: %d records acknowledged before SIGKILL", cycle, len(n))
		if len(n) == 0 {
			t.Fatalf("cycle %d: no record was acknowledged in 2s", cycle)
		}

		b.Restart()
		adm := newAdmin(t, b.Addr)
		ends := endOffsets(t, adm, topic)
		verifyAcked(t, b.Addr, topic, acked, ends)
		if t.Failed() {
			return
		}

		// New produces continue right after the recovered end.
		cl := newClient(t, b.Addr, kgo.RecordPartitioner(kgo.ManualPartitioner()))
		ctx := testCtx(t, 30*time.Second)
		for p := int32(0); p < partitions; p++ {
			v := fmt.Sprintf("after-restart-%d-%d", cycle, p)
			r, err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Partition: p, Value: []byte(v)}).First()
			if err != nil {
				t.Fatalf("cycle %d: produce after restart to partition %d: %v", cycle, p, err)
			}
			if r.Offset != ends[p] {
				t.Errorf("cycle %d: partition %d: first produce after restart at offset %d, recovered end is %d", cycle, p, r.Offset, ends[p])
			}
			acked = append(acked, ackedRec{p, r.Offset, v})
		}
		cl.Close()
	}
	verifyAcked(t, b.Addr, topic, acked, endOffsets(t, newAdmin(t, b.Addr), topic))
}

// produceUntilKilled produces continuously (acks=all) from a goroutine,
// SIGKILLs the broker after d, and returns the acknowledged records.
func produceUntilKilled(t *testing.T, b *Broker, topic string, cycle int, d time.Duration) []ackedRec {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr), kgo.DefaultProduceTopic(topic),
		kgo.RequiredAcks(kgo.AllISRAcks()), kgo.MaxBufferedRecords(5000))
	if err != nil {
		t.Fatalf("client: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var (
		mu     sync.Mutex
		acked  []ackedRec
		wg     sync.WaitGroup
		done   = make(chan struct{})
		sent   atomic.Int64
		okOnce atomic.Bool
	)
	go func() {
		defer close(done)
		for i := 0; ctx.Err() == nil; i++ {
			v := fmt.Sprintf("cycle%d-rec%08d-%s", cycle, i, "payload-payload-payload-payload")
			if i%50 == 49 {
				time.Sleep(time.Millisecond) // keep the volume to verify modest
			}
			wg.Add(1)
			sent.Add(1)
			cl.Produce(ctx, &kgo.Record{Key: []byte(fmt.Sprintf("k%d", i%16)), Value: []byte(v)}, func(r *kgo.Record, err error) {
				defer wg.Done()
				if err != nil {
					return // not acknowledged: may or may not be there
				}
				okOnce.Store(true)
				mu.Lock()
				acked = append(acked, ackedRec{r.Partition, r.Offset, string(r.Value)})
				mu.Unlock()
			})
		}
	}()
	time.Sleep(d) // let the producer run; the kill lands mid-stream
	if !okOnce.Load() {
		t.Logf("cycle %d: no acknowledgement yet after %v", cycle, d)
	}
	b.Kill()
	cancel()
	<-done
	cl.Close() // fails whatever is still buffered or in flight
	wg.Wait()
	t.Logf("cycle %d: %d records handed to the producer", cycle, sent.Load())
	mu.Lock()
	defer mu.Unlock()
	return acked
}

// verifyAcked reads every partition to its end and checks each acked record
// is at its offset, offsets are contiguous and no value appears twice.
func verifyAcked(t *testing.T, addr, topic string, acked []ackedRec, ends map[int32]int64) {
	t.Helper()
	var total int64
	maxAcked := map[int32]int64{}
	for _, a := range acked {
		if a.offset+1 > maxAcked[a.part] {
			maxAcked[a.part] = a.offset + 1
		}
	}
	for p, end := range ends {
		total += end
		if end < maxAcked[p] {
			t.Errorf("partition %d: recovered end offset %d, but offset %d was acknowledged", p, end, maxAcked[p]-1)
		}
	}
	recs := consumeAll(t, addr, topic, int(total), 2*time.Minute)
	got := map[int32]map[int64]string{}
	seen := map[string]int64{}
	next := map[int32]int64{}
	bad := 0
	for _, r := range recs {
		if got[r.Partition] == nil {
			got[r.Partition] = map[int64]string{}
		}
		if r.Offset != next[r.Partition] {
			bad++
			if bad < 10 {
				t.Errorf("partition %d: offset %d follows %d", r.Partition, r.Offset, next[r.Partition]-1)
			}
		}
		next[r.Partition] = r.Offset + 1
		got[r.Partition][r.Offset] = string(r.Value)
		if prev, dup := seen[string(r.Value)]; dup {
			bad++
			if bad < 10 {
				t.Errorf("value %q appears twice (offsets %d and %d of partition %d)", r.Value, prev, r.Offset, r.Partition)
			}
		}
		seen[string(r.Value)] = r.Offset
	}
	missing := 0
	var examples []string
	for _, a := range acked {
		if v, ok := got[a.part][a.offset]; !ok || v != a.value {
			missing++
			if len(examples) < 10 {
				examples = append(examples, fmt.Sprintf("%d/%d want %q got %q (present %v)", a.part, a.offset, a.value, v, ok))
			}
		}
	}
	if missing > 0 {
		sort.Strings(examples)
		t.Errorf("%d of %d acknowledged records are missing or changed after recovery; e.g.:\n%v", missing, len(acked), examples)
	}
}

// TestCrashIdempotentProducerSurvives: one idempotent producer keeps
// running while the broker is SIGKILLed and restarted on the same port.
// Batches whose answer was lost are retried with their old sequence
// numbers, so the recovered producer state must deduplicate them: every
// record ends up acknowledged and in the log exactly once, in order.
func TestCrashIdempotentProducerSurvives(t *testing.T) {
	b := startBroker(t, t.TempDir())
	const topic = "crash-idem"
	const partitions = 2
	const total = 40_000
	createTopic(t, newAdmin(t, b.Addr), topic, partitions, nil)

	cl := newClient(t, b.Addr, kgo.DefaultProduceTopic(topic), kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.RecordDeliveryTimeout(90*time.Second), kgo.RetryBackoffFn(func(int) time.Duration { return 50 * time.Millisecond }))
	ctx := testCtx(t, 2*time.Minute)
	var (
		mu       sync.Mutex
		acked    []ackedRec
		failures []error
		wg       sync.WaitGroup
		sent     atomic.Int64
	)
	go func() {
		for i := 0; i < total && ctx.Err() == nil; i++ {
			if i%50 == 49 {
				time.Sleep(time.Millisecond)
			}
			wg.Add(1)
			sent.Add(1)
			v := fmt.Sprintf("k%d|%08d", i%8, i)
			cl.Produce(ctx, &kgo.Record{Key: []byte(fmt.Sprintf("k%d", i%8)), Value: []byte(v)}, func(r *kgo.Record, err error) {
				defer wg.Done()
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					failures = append(failures, err)
					return
				}
				acked = append(acked, ackedRec{r.Partition, r.Offset, string(r.Value)})
			})
		}
	}()
	for kill := 0; kill < 2; kill++ {
		time.Sleep(700 * time.Millisecond)
		port := b.Addr
		b.Kill()
		time.Sleep(100 * time.Millisecond)
		b.Restart()
		if b.Addr != port {
			t.Fatalf("broker came back on %s, not %s: the producer cannot follow", b.Addr, port)
		}
		t.Logf("kill %d done after %d records were handed to the producer", kill, sent.Load())
	}
	for sent.Load() < total && ctx.Err() == nil {
		time.Sleep(10 * time.Millisecond)
	}
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	if len(failures) > 0 {
		t.Errorf("%d of %d records failed; first: %v", len(failures), total, failures[0])
	}
	if len(acked) != total {
		t.Errorf("%d of %d records acknowledged", len(acked), total)
	}
	ends := endOffsets(t, newAdmin(t, b.Addr), topic)
	verifyAcked(t, b.Addr, topic, acked, ends)
	var sum int64
	for _, e := range ends {
		sum += e
	}
	if sum != total {
		t.Errorf("log holds %d records, %d were produced once each (end offsets %v)", sum, total, ends)
	}
	// Per key, order is the production order.
	recs := consumeAll(t, b.Addr, topic, int(sum), time.Minute)
	last := map[string]string{}
	for _, r := range recs {
		if prev, ok := last[string(r.Key)]; ok && string(r.Value) <= prev {
			t.Errorf("key %s: %q after %q (order broken) at %d/%d", r.Key, r.Value, prev, r.Partition, r.Offset)
			break
		}
		last[string(r.Key)] = string(r.Value)
	}
}
