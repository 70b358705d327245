package brokertest

import (
	"context"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/fjordlog/fjord/broker/config"
	"github.com/fjordlog/fjord/broker/tier"
	"github.com/fjordlog/fjord/storage/recordbatch"
	"github.com/fjordlog/fjord/storage/remote"
)

// slowStore delays every Get of a .log or .index object by delay (none
// while zero): a store far away, or struggling.
type slowStore struct {
	remote.Store
	delay   atomic.Int64 // nanoseconds
	gets    atomic.Int64
	allKeys bool // delay every Get, not only .log and .index ones
}

func (s *slowStore) Get(ctx context.Context, key string, off, n int64) (io.ReadCloser, error) {
	s.gets.Add(1)
	if d := time.Duration(s.delay.Load()); d > 0 && (s.allKeys || strings.HasSuffix(key, ".log") || strings.HasSuffix(key, ".index")) {
		select {
		case <-time.After(d):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return s.Store.Get(ctx, key, off, n)
}

// tieredOneNode starts one node tiering to store and a topic of 1 KiB
// segments keeping about 2 KiB locally, fills it with n records of about
// valueBytes each, timestamped t0 + i seconds, and waits until the local
// log starts above from (those offsets read only from the store). It
// returns the cluster, the values and t0.
func tieredOneNode(t *testing.T, store remote.Store, topic string, n, valueBytes int, from int64, configure func(*config.Config)) (*Cluster, []string, time.Time) {
	t.Helper()
	return tieredOneNodeAt(t, store, topic, n, valueBytes, max(1024, 4*valueBytes), from, configure)
}

// tieredOneNodeSized is tieredOneNode with segments of segment bytes,
// waiting until all but the last local.retention.bytes (2 segments) are
// only in the store.
func tieredOneNodeSized(t *testing.T, store remote.Store, topic string, n, valueBytes, segment int, configure func(*config.Config)) (*Cluster, []string, time.Time) {
	t.Helper()
	return tieredOneNodeAt(t, store, topic, n, valueBytes, segment, int64(n-3*segment/valueBytes), configure)
}

func tieredOneNodeAt(t *testing.T, store remote.Store, topic string, n, valueBytes, segment int, from int64, configure func(*config.Config)) (*Cluster, []string, time.Time) {
	t.Helper()
	c, err := Start(Options{Nodes: 1, Dir: t.TempDir(), RemoteStore: store, RemoteTaskInterval: 100 * time.Millisecond,
		Configure: func(_ int32, cfg *config.Config) {
			cfg.RetentionCheckInterval = 100
			if configure != nil {
				configure(cfg)
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	// No delivery timeout: franz-go counts it from a record's own timestamp.
	cl := producer(t, c, topic, kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.RecordDeliveryTimeout(0))
	adm := kadm.NewClient(cl)
	res, err := adm.CreateTopic(ctx, 1, 1, map[string]*string{
		"segment.bytes": kadm.StringPtr(fmt.Sprint(segment)), "remote.storage.enable": kadm.StringPtr("true"),
		"local.retention.bytes": kadm.StringPtr(fmt.Sprint(2 * segment)), "retention.ms": kadm.StringPtr("-1"),
	}, topic)
	if err != nil || res.Err != nil {
		t.Fatalf("create: %v %v", err, res.Err)
	}
	waitTopic(t, c, topic, 1)
	t0 := time.Now().Add(-time.Duration(n+10) * time.Second).Truncate(time.Second)
	var values []string
	for len(values) < n {
		var recs []*kgo.Record
		for j := 0; j < 4 && len(values)+len(recs) < n; j++ {
			i := len(values) + len(recs)
			v := fmt.Sprintf("v-%06d-", i)
			recs = append(recs, &kgo.Record{Value: []byte(v + strings.Repeat("x", max(0, valueBytes-len(v)))), Timestamp: t0.Add(time.Duration(i) * time.Second)})
		}
		if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			t.Fatalf("produce: %v", err)
		}
		for _, r := range recs {
			values = append(values, string(r.Value))
		}
	}
	eventually(t, 90*time.Second, fmt.Sprintf("local log start above %d, copied", from), func() bool {
		rs, err := c.Broker(1).Replica(topic, 0)
		return err == nil && rs.LogStart > from && tier.CopiedEnd(rs.Remote) >= rs.LogStart-1
	})
	return c, values, t0
}

// A fetch of a local partition and a cold one (below the local log
// start, in a slow store) answers the local records at once, without
// waiting for the store: the cold partition comes back without records
// and no error, and a later fetch of it gets its records from the read
// that the first one started.
func TestTierSlowRemoteReadDoesNotBlockLocal(t *testing.T) {
	store := &slowStore{Store: remote.NewMemStore()}
	const cold, hot = "tier-cold", "tier-hot"
	metricsAddr, err := freeAddr()
	if err != nil {
		t.Fatal(err)
	}
	c, values, _ := tieredOneNode(t, store, cold, 200, 60, 0, func(cfg *config.Config) { cfg.MetricsAddr = metricsAddr })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cl := producer(t, c, hot)
	if res, err := kadm.NewClient(cl).CreateTopic(ctx, 1, 1, nil, hot); err != nil || res.Err != nil {
		t.Fatalf("create: %v %v", err, res.Err)
	}
	waitTopic(t, c, hot, 1)
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("hot-0")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	store.delay.Store(int64(time.Second))
	// Fetch v12 names topics (v13 would need their ids).
	fcl, err := kgo.NewClient(kgo.SeedBrokers(c.Addrs()...), kgo.MaxVersions(kversion.V3_0_0()))
	if err != nil {
		t.Fatal(err)
	}
	defer fcl.Close()

	fetch := func(topics ...string) (*kmsg.FetchResponse, time.Duration) {
		t.Helper()
		req := kmsg.NewPtrFetchRequest()
		req.Version = 12
		req.ReplicaID, req.MaxWaitMillis, req.MinBytes, req.MaxBytes = -1, 5000, 1, 1<<20
		for _, name := range topics {
			rt := kmsg.NewFetchRequestTopic()
			rt.Topic = name
			rp := kmsg.NewFetchRequestTopicPartition()
			rp.PartitionMaxBytes = 1 << 20
			rt.Partitions = append(rt.Partitions, rp)
			req.Topics = append(req.Topics, rt)
		}
		start := time.Now()
		kresp, err := req.RequestWith(ctx, fcl)
		if err != nil {
			t.Fatal(err)
		}
		return kresp, time.Since(start)
	}
	resp, took := fetch(cold, hot)
	got := map[string]kmsg.FetchResponseTopicPartition{}
	for _, rt := range resp.Topics {
		got[rt.Topic] = rt.Partitions[0]
	}
	if p := got[hot]; p.ErrorCode != 0 || len(p.RecordBatches) == 0 {
		t.Fatalf("hot partition: code %d, %d record bytes; want its record", p.ErrorCode, len(p.RecordBatches))
	}
	if p := got[cold]; p.ErrorCode != 0 || len(p.RecordBatches) != 0 || p.LogStartOffset != 0 {
		t.Fatalf("cold partition: code %d, %d record bytes, log start %d; want no records yet (the store takes a second a Get), no error, log start 0",
			p.ErrorCode, len(p.RecordBatches), p.LogStartOffset)
	}
	t.Logf("local + cold fetch answered in %v with the local record (store Get delay 1s)", took.Round(time.Millisecond))

	// The cold partition alone: the fetch waits for the read under way
	// (or a new one) and answers with records from offset 0.
	var recs []string
	for attempt := 0; len(recs) == 0; attempt++ {
		if attempt == 10 {
			t.Fatal("no records from the cold partition in 10 fetches")
		}
		resp, took = fetch(cold)
		p := resp.Topics[0].Partitions[0]
		if p.ErrorCode != 0 {
			t.Fatalf("cold fetch: code %d", p.ErrorCode)
		}
		recs = batchValues(t, p.RecordBatches)
		t.Logf("cold fetch %d: %d records in %v", attempt, len(recs), took.Round(time.Millisecond))
	}
	for i, v := range recs {
		if v != values[i] {
			t.Fatalf("cold record %d: %q, want %q", i, v, values[i])
		}
	}

	// The copy's size is a metric (Kafka's RemoteLogSizeBytes), the
	// bytes of the copied segments.
	rs, err := c.Broker(1).Replica(cold, 0)
	if err != nil {
		t.Fatal(err)
	}
	want := tier.CopiedBytes(rs.Remote)
	found := false
	for _, smp := range scrapeAll(t, metricsAddr) {
		if smp.name == "fjord_remote_log_size_bytes" && strings.Contains(smp.labels, `topic="`+cold+`"`) {
			found = true
			if smp.value <= 0 || smp.value < float64(want)/2 {
				t.Fatalf("fjord_remote_log_size_bytes%s %v; the image's copied segments hold %d", smp.labels, smp.value, want)
			}
		}
	}
	if !found {
		t.Fatal("no fjord_remote_log_size_bytes for the tiered partition")
	}
}

// batchValues decodes the record values of a fetch's record batches.
func batchValues(t *testing.T, b []byte) []string {
	t.Helper()
	var out []string
	for len(b) > 0 {
		info, err := recordbatch.ParseHeader(b)
		if err != nil || info.Bytes > len(b) {
			t.Fatalf("record batch: %v (%d bytes left)", err, len(b))
		}
		if err := recordbatch.EachRecord(b[:info.Bytes], info, func(r recordbatch.Record) bool {
			out = append(out, string(r.Value))
			return true
		}); err != nil {
			t.Fatal(err)
		}
		b = b[info.Bytes:]
	}
	return out
}

// ListOffsets by timestamp (kadm's ListOffsetsAfterMilli) finds records
// only in the store, below the local log start, as well as local ones:
// record i is timestamped t0 + i seconds, so a time between records i-1
// and i answers i.
func TestTierListOffsetsByTimestamp(t *testing.T) {
	store := &slowStore{Store: remote.NewMemStore()}
	const topic = "tier-times"
	c, values, t0 := tieredOneNode(t, store, topic, 200, 60, 60, nil)
	rs, err := c.Broker(1).Replica(topic, 0)
	if err != nil {
		t.Fatal(err)
	}
	cl := producer(t, c, topic)
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	localStart := rs.LogStart
	for _, i := range []int64{0, 1, 17, 59, localStart - 1, localStart, localStart + 1, int64(len(values)) - 1} {
		for _, ms := range []int64{t0.Add(time.Duration(i) * time.Second).UnixMilli(), t0.Add(time.Duration(i)*time.Second - 300*time.Millisecond).UnixMilli()} {
			gets := store.gets.Load()
			res, err := adm.ListOffsetsAfterMilli(ctx, ms, topic)
			if err != nil {
				t.Fatal(err)
			}
			o, ok := res.Lookup(topic, 0)
			if !ok || o.Err != nil || o.Offset != i {
				t.Fatalf("ListOffsets after %d (record %d; local log from %d): offset %d err %v, want %d", ms, i, localStart, o.Offset, o.Err, i)
			}
			if i < localStart && store.gets.Load() == gets {
				t.Fatalf("record %d below the local log start %d found without reading the store", i, localStart)
			}
		}
	}
	res, err := adm.ListOffsetsAfterMilli(ctx, t0.Add(time.Hour).UnixMilli(), topic)
	if err != nil {
		t.Fatal(err)
	}
	if o, _ := res.Lookup(topic, 0); o.Err != nil || o.Offset != -1 && o.Offset != int64(len(values)) {
		t.Fatalf("ListOffsets after the last record: offset %d err %v", o.Offset, o.Err)
	}
	t.Logf("local log from %d of %d records; store Gets %d", localStart, len(values), store.gets.Load())

	// The store down: an error the client retries, not a local answer
	// that skips the copied records.
	store.Store.(*remote.MemStore).SetFault(fmt.Errorf("%w: injected", remote.ErrUnavailable))
	defer store.Store.(*remote.MemStore).SetFault(nil)
	req := kmsg.NewPtrListOffsetsRequest()
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewListOffsetsRequestTopicPartition()
	rp.Timestamp = t0.UnixMilli()
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	if p := resp.Topics[0].Partitions[0]; p.ErrorCode != kerr.KafkaStorageError.Code {
		t.Fatalf("ListOffsets with the store down: offset %d code %d, want KAFKA_STORAGE_ERROR", p.Offset, p.ErrorCode)
	}
}

// Figures for the read cache (FJORD_TIER_FIGURES=1; no assertion on
// speed): a consumer reads a cold 64 MiB partition, all of it below the
// local log start, from a store that takes 5 ms a Get, with the read
// cache off and on.
func TestTierReadFigures(t *testing.T) {
	if os.Getenv("FJORD_TIER_FIGURES") == "" {
		t.Skip("FJORD_TIER_FIGURES=1 runs it")
	}
	for _, cache := range []bool{false, true} {
		t.Run(fmt.Sprintf("cache=%t", cache), func(t *testing.T) {
			store := &slowStore{Store: remote.NewMemStore(), allKeys: true}
			topic := "figures"
			const n, size = 80_000, 1000 // about 64 MiB cold, the last 3 segments local
			c, _, _ := tieredOneNodeSized(t, store, topic, n, size, 4<<20, func(cfg *config.Config) {
				if cache {
					cfg.Remote.S3.ChunkCacheClass = config.AivenMemoryChunkCache
					cfg.Remote.S3.ChunkCacheSize = 128 << 20
				}
			})
			rs, err := c.Broker(1).Replica(topic, 0)
			if err != nil {
				t.Fatal(err)
			}
			cold := rs.LogStart
			store.delay.Store(int64(5 * time.Millisecond))
			gets := store.gets.Load()
			cl, err := kgo.NewClient(kgo.SeedBrokers(c.Addrs()...), kgo.ConsumeTopics(topic),
				kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxBytes(50<<20), kgo.FetchMaxPartitionBytes(1<<20))
			if err != nil {
				t.Fatal(err)
			}
			defer cl.Close()
			start := time.Now()
			var got, bytes int64
			deadline := time.Now().Add(5 * time.Minute)
			for got < cold && time.Now().Before(deadline) {
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				fs := cl.PollFetches(ctx)
				cancel()
				fs.EachRecord(func(r *kgo.Record) {
					if r.Offset < cold {
						got++
						bytes += int64(len(r.Value))
					}
				})
			}
			took := time.Since(start)
			if got < cold {
				t.Fatalf("read %d of %d cold records", got, cold)
			}
			t.Logf("cache %t: %d cold records (%.1f MiB) in %v: %.0f records/s, %.1f MiB/s; %d store Gets",
				cache, got, float64(bytes)/(1<<20), took.Round(time.Millisecond), float64(got)/took.Seconds(), float64(bytes)/(1<<20)/took.Seconds(), store.gets.Load()-gets)
		})
	}
}

// With the read cache on and chunks smaller than a batch (every read
// crosses chunk boundaries), a franz-go consumer from offset 0 reads every
// record, those only in the store included, byte for byte; the cache
// counts hits and read-ahead.
func TestTierReadCacheConsumesAll(t *testing.T) {
	store := &slowStore{Store: remote.NewMemStore()}
	const topic = "tier-cached"
	c, values, _ := tieredOneNode(t, store, topic, 300, 60, 100, func(cfg *config.Config) {
		cfg.Remote.S3.ChunkCacheClass = config.AivenMemoryChunkCache
		cfg.Remote.S3.ChunkCacheSize = 64 << 10
		cfg.Remote.S3.ChunkSize = 100
	})
	for round := 0; round < 2; round++ { // cold, then warm
		gets := store.gets.Load()
		if got := consumeValues(t, c, topic, len(values)); !slices.Equal(got, values) {
			t.Fatalf("round %d: consumed %d records, want the %d produced", round, len(got), len(values))
		}
		t.Logf("round %d: %d store Gets", round, store.gets.Load()-gets)
	}
}

// Remote reads beyond remote.log.reader.threads running and
// remote.log.reader.max.pending.tasks queued are refused: the partition
// is answered UNKNOWN_SERVER_ERROR (Kafka's answer when its reader pool
// rejects the task), the fetch itself at once, and the node holds no
// more reads than the bound.
func TestTierReaderPoolBound(t *testing.T) {
	store := &slowStore{Store: remote.NewMemStore()}
	const topic = "tier-bound"
	c, _, _ := tieredOneNode(t, store, topic, 200, 60, 60, func(cfg *config.Config) {
		cfg.Remote.ReaderThreads, cfg.Remote.ReaderMaxPending, cfg.Remote.FetchMaxWaitMs = 1, 1, 50
	})
	store.delay.Store(int64(time.Minute)) // every read stays under way
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.Addrs()...), kgo.MaxVersions(kversion.V3_0_0()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	fetchAt := func(offset int64) kmsg.FetchResponseTopicPartition { return fetchNoWait(t, ctx, cl, topic, offset) }
	for i, off := range []int64{0, 20} { // one running, one queued
		if p := fetchAt(off); p.ErrorCode != 0 || len(p.RecordBatches) != 0 {
			t.Fatalf("read %d: code %d, %d bytes; want none yet, no error", i, p.ErrorCode, len(p.RecordBatches))
		}
	}
	if p := fetchAt(40); p.ErrorCode != kerr.UnknownServerError.Code {
		t.Fatalf("a third read with 1 thread and 1 pending: code %d, want UNKNOWN_SERVER_ERROR", p.ErrorCode)
	}
	if p := fetchAt(0); p.ErrorCode != 0 {
		t.Fatalf("the read under way asked again: code %d, want none (it is shared)", p.ErrorCode)
	}
}

// fetchNoWait sends one consumer Fetch (v12, no wait, 1 MiB) of
// topic-0 at offset and returns its partition's answer.
func fetchNoWait(t *testing.T, ctx context.Context, cl *kgo.Client, topic string, offset int64) kmsg.FetchResponseTopicPartition {
	t.Helper()
	req := kmsg.NewPtrFetchRequest()
	req.Version = 12
	req.ReplicaID, req.MaxWaitMillis, req.MinBytes, req.MaxBytes = -1, 0, 1, 1<<20
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.FetchOffset, rp.PartitionMaxBytes = offset, 1<<20
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	return resp.Topics[0].Partitions[0]
}
