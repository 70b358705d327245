package brokertest

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordlog/fjord/broker/config"
	"github.com/fjordlog/fjord/broker/tier"
	"github.com/fjordlog/fjord/storage/remote"
)

// read_committed from tiered storage: a transactional franz-go producer
// commits and aborts transactions (aborted ones long enough to span
// segments, so an abort marker lands segments after its transaction's
// first batch) on a tiered topic with 1 KiB segments; once every
// replica's local log starts above an aborted transaction (its segments
// deleted locally, read only from the store), a read_committed franz-go
// consumer from offset 0 sees exactly the committed records, in order,
// and a read_uncommitted one every record produced. Before that, with
// the store failing only its .txnindex reads, a read_committed Fetch from
// 0 is KAFKA_STORAGE_ERROR without records, while a read_uncommitted one
// is served.
func TestTieredReadCommitted(t *testing.T) {
	store := &txnIndexFaults{MemStore: remote.NewMemStore()}
	c, err := Start(Options{Nodes: 3, Dir: t.TempDir(), RemoteStore: store, RemoteTaskInterval: 100 * time.Millisecond,
		Configure: func(_ int32, cfg *config.Config) {
			cfg.RetentionCheckInterval = 100
			cfg.MinInsyncReplicas = 2
			cfg.ReplicaLagTimeMaxMs = 2000
		}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	const topic = "tiered-txn"
	adm := kadm.NewClient(producer(t, c, topic))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	res, err := adm.CreateTopic(ctx, 1, 3, map[string]*string{
		"segment.bytes": kadm.StringPtr("1024"), "remote.storage.enable": kadm.StringPtr("true"),
		"local.retention.bytes": kadm.StringPtr("2048"), "retention.ms": kadm.StringPtr("-1"),
	}, topic)
	if err != nil || res.Err != nil {
		t.Fatalf("create: %v %v", err, res.Err)
	}
	waitTopic(t, c, topic, 1)
	txn := txnProducer(t, c, topic, "tiered-txn-producer", kgo.TransactionTimeout(30*time.Second))

	var all, committed []string
	lastAborted := int64(-1) // the first offset of the last aborted transaction of the first two thirds
	const txns = 24
	for i := range txns {
		abort := i%3 == 1
		n := 4
		if abort {
			n = 12 // about 1.5 segments of one-record batches
		}
		if err := txn.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		var vals []string
		first := int64(-1)
		for j := range n {
			v := fmt.Sprintf("t%02d-%02d-%t-%s", i, j, abort, strings.Repeat("x", 60))
			r := &kgo.Record{Value: []byte(v)}
			if err := txn.ProduceSync(ctx, r).FirstErr(); err != nil {
				t.Fatalf("transaction %d: produce: %v", i, err)
			}
			if first < 0 {
				first = r.Offset
			}
			vals = append(vals, v)
		}
		commit := kgo.TryCommit
		if abort {
			commit = kgo.TryAbort
			if i < txns*2/3 {
				lastAborted = first
			}
		}
		if err := txn.EndTransaction(ctx, commit); err != nil {
			t.Fatalf("transaction %d: end: %v", i, err)
		}
		all = append(all, vals...)
		if !abort {
			committed = append(committed, vals...)
		}
	}
	live := []int32{1, 2, 3}
	leader := int32(-1)
	start := time.Now()
	eventually(t, 60*time.Second, "every replica's local log starts above an aborted transaction", func() bool {
		for _, id := range live {
			rs, err := c.Broker(id).Replica(topic, 0)
			if err != nil {
				t.Fatal(err)
			}
			if rs.LogStart <= lastAborted+12 || tier.CopiedEnd(rs.Remote)+1 < rs.LogStart {
				return false
			}
			if rs.Leader {
				leader = id
			}
		}
		return true
	})
	txnIndexes := 0
	for _, key := range storeKeys(t, store) {
		if strings.HasSuffix(key, ".txnindex") {
			txnIndexes++
		}
	}
	if txnIndexes == 0 {
		t.Fatal("no .txnindex object in the store: no aborted transaction was copied")
	}
	t.Logf("local logs trimmed past offset %d in %v; %d objects in the store, %d of them .txnindex",
		lastAborted+12, time.Since(start).Round(time.Millisecond), store.Len(), txnIndexes)

	// The .txnindex reads fail (nothing is cached yet: no read_committed
	// read has been served): the records are not served without them.
	tds, err := adm.ListTopics(ctx, topic)
	if err != nil || tds[topic].Err != nil {
		t.Fatalf("list: %v %v", err, tds[topic].Err)
	}
	if leader < 0 {
		t.Fatal("no leader among the replicas")
	}
	lcl, err := kgo.NewClient(kgo.SeedBrokers(c.Addr(leader)))
	if err != nil {
		t.Fatal(err)
	}
	defer lcl.Close()
	fetch0 := func(isolation int8) kmsg.FetchResponseTopicPartition {
		t.Helper()
		req := kmsg.NewPtrFetchRequest()
		req.ReplicaID, req.MaxBytes, req.IsolationLevel = -1, 1<<20, isolation
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic, rt.TopicID = topic, tds[topic].ID
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.FetchOffset, rp.PartitionMaxBytes, rp.CurrentLeaderEpoch, rp.LogStartOffset = 0, 1<<20, -1, -1
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		kresp, err := lcl.SeedBrokers()[0].Request(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		return kresp.(*kmsg.FetchResponse).Topics[0].Partitions[0]
	}
	store.failTxnIndex.Store(true)
	if p := fetch0(1); p.ErrorCode != kerr.KafkaStorageError.Code || len(p.RecordBatches) != 0 {
		t.Fatalf("read_committed Fetch from 0 with .txnindex reads failing: %v, %d bytes", kerr.ErrorForCode(p.ErrorCode), len(p.RecordBatches))
	}
	if p := fetch0(0); p.ErrorCode != 0 || len(p.RecordBatches) == 0 {
		t.Fatalf("read_uncommitted Fetch from 0 with .txnindex reads failing: %v, %d bytes", kerr.ErrorForCode(p.ErrorCode), len(p.RecordBatches))
	}
	store.failTxnIndex.Store(false)
	if p := fetch0(1); p.ErrorCode != 0 || len(p.RecordBatches) == 0 {
		t.Fatalf("read_committed Fetch from 0: %v, %d bytes", kerr.ErrorForCode(p.ErrorCode), len(p.RecordBatches))
	}

	if got := consumeValuesWith(t, c, topic, len(committed), kgo.FetchIsolationLevel(kgo.ReadCommitted())); !slices.Equal(got, committed) {
		t.Fatalf("read_committed consumed %d records, want the %d committed (first %q)", len(got), len(committed), got[:min(1, len(got))])
	}
	if got := consumeValuesWith(t, c, topic, len(all)); !slices.Equal(got, all) {
		t.Fatalf("read_uncommitted consumed %d records, want all %d (first %q)", len(got), len(all), got[:min(1, len(got))])
	}
}

// txnIndexFaults is a store whose .txnindex reads fail while
// failTxnIndex is set.
type txnIndexFaults struct {
	*remote.MemStore
	failTxnIndex atomic.Bool
}

func (s *txnIndexFaults) Get(ctx context.Context, key string, off, n int64) (io.ReadCloser, error) {
	if s.failTxnIndex.Load() && strings.HasSuffix(key, ".txnindex") {
		return nil, fmt.Errorf("get %s: %w: injected", key, remote.ErrUnavailable)
	}
	return s.MemStore.Get(ctx, key, off, n)
}

// consumeValuesWith is consumeValues with more client options.
func consumeValuesWith(t *testing.T, c *Cluster, topic string, want int, opts ...kgo.Opt) []string {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(c.Addrs()...), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(200 * time.Millisecond)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var out []string
	deadline := time.Now().Add(30 * time.Second)
	for len(out) < want && time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		fs := cl.PollFetches(ctx)
		cancel()
		fs.EachError(func(topic string, p int32, err error) {
			if err != context.DeadlineExceeded {
				t.Logf("fetch %s-%d: %v", topic, p, err)
			}
		})
		fs.EachRecord(func(r *kgo.Record) { out = append(out, string(r.Value)) })
	}
	return out
}

// txnProducer is a transactional franz-go producer to topic with id,
// quick to retry (a leader moved, a coordinator loading); closed when the
// test ends.
func txnProducer(t *testing.T, c *Cluster, topic, id string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(c.Addrs()...), kgo.DefaultProduceTopic(topic),
		kgo.TransactionalID(id), kgo.ProduceRequestTimeout(5 * time.Second), kgo.MetadataMinAge(100 * time.Millisecond),
		kgo.RetryBackoffFn(func(int) time.Duration { return 100 * time.Millisecond })}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}
