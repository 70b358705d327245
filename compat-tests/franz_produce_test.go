package compattests

import (
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

const (
	// Records produced per codec: the uncompressed case is the big one.
	franzRecordsNone       = 100_000
	franzRecordsCompressed = 20_000
	franzPartitions        = 6
	franzKeys              = 1000
)

// TestFranzProduceConsumeCodecs produces keyed records with every codec
// (acks=all, idempotent) and reads them back with a direct consumer.
func TestFranzProduceConsumeCodecs(t *testing.T) {
	codecs := []struct {
		name  string
		codec kgo.CompressionCodec
		id    int8 // attributes&7 of a batch compressed with it
		n     int
	}{
		{"none", kgo.NoCompression(), 0, franzRecordsNone},
		{"gzip", kgo.GzipCompression(), 1, franzRecordsCompressed},
		{"snappy", kgo.SnappyCompression(), 2, franzRecordsCompressed},
		{"lz4", kgo.Lz4Compression(), 3, franzRecordsCompressed},
		{"zstd", kgo.ZstdCompression(), 4, franzRecordsCompressed},
	}
	for _, c := range codecs {
		t.Run(c.name, func(t *testing.T) {
			b := startBroker(t, t.TempDir())
			adm := newAdmin(t, b.Addr)
			topic := "codec-" + c.name
			createTopic(t, adm, topic, franzPartitions, nil)

			pcl := newClient(t, b.Addr,
				kgo.RequiredAcks(kgo.AllISRAcks()), // also the default; idempotence stays on
				kgo.ProducerBatchCompression(c.codec),
				kgo.DefaultProduceTopic(topic),
			)
			ctx := testCtx(t, 2*time.Minute)
			var (
				wg       sync.WaitGroup
				failed   atomic.Int64
				firstErr atomic.Value
				mu       sync.Mutex
				keyPart  = map[string]int32{}
				acked    int
			)
			start := time.Now()
			for i := 0; i < c.n; i++ {
				key := fmt.Sprintf("key-%04d", i%franzKeys)
				seq := i / franzKeys
				// A little variety in value sizes; values are unique.
				val := fmt.Sprintf("%s|%07d|%s", key, seq, strings.Repeat("v", i%64))
				wg.Add(1)
				pcl.Produce(ctx, &kgo.Record{Key: []byte(key), Value: []byte(val)}, func(r *kgo.Record, err error) {
					defer wg.Done()
					if err != nil {
						failed.Add(1)
						firstErr.CompareAndSwap(nil, err)
						return
					}
					mu.Lock()
					acked++
					if p, ok := keyPart[string(r.Key)]; ok && p != r.Partition {
						t.Errorf("key %s went to partitions %d and %d", r.Key, p, r.Partition)
					}
					keyPart[string(r.Key)] = r.Partition
					mu.Unlock()
				})
			}
			wg.Wait()
			if n := failed.Load(); n > 0 {
				t.Fatalf("%d of %d produces failed; first error: %v", n, c.n, firstErr.Load())
			}
			t.Logf("produced %d records (%s) in %v", c.n, c.name, time.Since(start))

			// Keys should be spread over all partitions.
			used := map[int32]bool{}
			for _, p := range keyPart {
				used[p] = true
			}
			if len(used) != franzPartitions {
				t.Errorf("keys landed on %d of %d partitions", len(used), franzPartitions)
			}
			ends := endOffsets(t, adm, topic)
			var total int64
			for _, o := range ends {
				total += o
			}
			if total != int64(c.n) {
				t.Errorf("end offsets %v sum to %d, want %d", ends, total, c.n)
			}

			start = time.Now()
			recs := consumeAll(t, b.Addr, topic, c.n, 2*time.Minute)
			t.Logf("consumed %d records in %v", len(recs), time.Since(start))
			checkConsumed(t, recs, c.n, ends)

			// The broker keeps the producer's batches as they came
			// (compression.type=producer, Kafka's default).
			checkStoredCodec(t, batchCodecs(t, b.Addr, topic, 0), c.id, "franz-go "+c.name)
		})
	}
}

// checkConsumed verifies offsets are contiguous from 0 per partition, every
// produced value arrived exactly once, and per-key order is kept.
func checkConsumed(t *testing.T, recs []*kgo.Record, n int, ends map[int32]int64) {
	t.Helper()
	nextOff := map[int32]int64{}
	seen := make(map[string]bool, n)
	lastSeq := map[string]int{}
	errs := 0
	errorf := func(format string, args ...any) {
		errs++
		if errs <= 20 {
			t.Errorf(format, args...)
		}
	}
	for _, r := range recs {
		if want := nextOff[r.Partition]; r.Offset != want {
			errorf("partition %d: offset %d, want %d (not contiguous)", r.Partition, r.Offset, want)
		}
		nextOff[r.Partition] = r.Offset + 1
		v := string(r.Value)
		if seen[v] {
			errorf("duplicate record %s at %d/%d", v, r.Partition, r.Offset)
		}
		seen[v] = true
		parts := strings.SplitN(v, "|", 3)
		if len(parts) != 3 || parts[0] != string(r.Key) {
			errorf("record at %d/%d has key %q value %q", r.Partition, r.Offset, r.Key, v)
			continue
		}
		seq, _ := strconv.Atoi(parts[1])
		if last, ok := lastSeq[parts[0]]; ok && seq != last+1 {
			errorf("key %s: seq %d after %d (order broken) at %d/%d", parts[0], seq, last, r.Partition, r.Offset)
		} else if !ok && seq != 0 {
			errorf("key %s: first seq is %d", parts[0], seq)
		}
		lastSeq[parts[0]] = seq
	}
	if len(seen) != n {
		errorf("received %d distinct records, want %d", len(seen), n)
	}
	for p, end := range ends {
		if nextOff[p] != end {
			errorf("partition %d: consumed up to %d, end offset is %d", p, nextOff[p], end)
		}
	}
	if errs > 20 {
		t.Errorf("... %d errors in all", errs)
	}
}
