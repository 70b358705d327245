package brokertest

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordlog/fjord/broker/tier"
	"github.com/fjordlog/fjord/controller"
	"github.com/fjordlog/fjord/storage/remote"
)

// A damaged .txnindex in the store (issue 29, "never bad bytes"): a
// transactional producer commits and aborts transactions on a tiered
// topic until every replica's local log starts above them. Then one
// copied segment's .txnindex, which lists an aborted transaction, has one
// byte of its first entry's producer id flipped: it still parses, into an
// abort of another producer, so read unchecked it would let a
// read_committed consumer be served that transaction's aborted records.
// Its CRC in the segment's metadata refuses it: a read_committed Fetch of
// the segment is KAFKA_STORAGE_ERROR without records, the node logs the
// damaged object, and a read_committed franz-go consumer from offset 0
// gets committed records only, in order, and not past the damage (it
// retries there). A read_uncommitted consumer reads every record. The
// object deleted instead is refused the same way (not read as "no aborted
// transactions"); restored, the read_committed consumer gets exactly the
// committed records.
func TestTierDamagedTxnIndex(t *testing.T) {
	const topic = "txnindex-crc"
	mem := remote.NewMemStore()
	c, _, logs := tierCluster(t, 3, mem, topic, map[string]*string{
		"segment.bytes": kadm.StringPtr("1024"), "remote.storage.enable": kadm.StringPtr("true"),
		"local.retention.bytes": kadm.StringPtr("2048"), "retention.ms": kadm.StringPtr("-1"),
	})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	txn := txnProducer(t, c, topic, "txnindex-crc-producer", kgo.TransactionTimeout(30*time.Second))
	var all, committed []string
	lastAborted := int64(-1) // the last offset of the last aborted transaction of the first two thirds
	const txns = 24
	for i := range txns {
		abort := i%3 == 1
		if err := txn.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		var vals []string
		for j := range 6 {
			v := fmt.Sprintf("t%02d-%02d-%s-%s", i, j, map[bool]string{true: "aborted", false: "committed"}[abort], strings.Repeat("x", 60))
			r := &kgo.Record{Value: []byte(v)}
			if err := txn.ProduceSync(ctx, r).FirstErr(); err != nil {
				t.Fatalf("transaction %d: produce: %v", i, err)
			}
			if abort && i < txns*2/3 {
				lastAborted = r.Offset
			}
			vals = append(vals, v)
		}
		if err := txn.EndTransaction(ctx, map[bool]kgo.TransactionEndTry{true: kgo.TryAbort, false: kgo.TryCommit}[abort]); err != nil {
			t.Fatalf("transaction %d: end: %v", i, err)
		}
		all = append(all, vals...)
		if !abort {
			committed = append(committed, vals...)
		}
	}
	var segs []controller.RemoteSegmentMeta
	leader := int32(-1)
	eventually(t, 60*time.Second, "every replica's local log starts above an aborted transaction", func() bool {
		for id := int32(1); id <= 3; id++ {
			rs := readReplica(t, c, id, topic)
			if rs.LogStart <= lastAborted+1 || tier.CopiedEnd(rs.Remote)+1 < rs.LogStart {
				return false
			}
			if rs.Leader {
				leader, segs = id, rs.Remote
			}
		}
		return leader > 0
	})

	// The second copied segment listing a .txnindex (reads before it
	// find their aborts in the first): its first entry's producer id,
	// bytes 2-9 of 34, gets its low byte flipped.
	var seg controller.RemoteSegmentMeta
	with := 0
	for _, s := range segs {
		if _, ok := s.Object(controller.ObjectTxnIndex); ok && s.State == controller.RemoteCopyFinished {
			if with++; with == 2 {
				seg = s
				break
			}
		}
	}
	if seg.SegmentID == ([16]byte{}) {
		t.Fatal("fewer than two copied segments have a .txnindex")
	}
	key := tier.ObjectKey("", topic, seg.TopicID, 0, seg.BaseOffset, seg.SegmentID, "txnindex")
	orig := storeObject(t, mem, key)
	if !mem.Corrupt(key, 9) {
		t.Fatalf("corrupt %s", key)
	}
	t.Logf("segment [%d, %d] of %d copied: .txnindex (%d bytes) damaged", seg.BaseOffset, seg.EndOffset, len(segs), len(orig))

	// Fetches at the segment's base, on the leader: read_committed is
	// refused, read_uncommitted served.
	for _, isolation := range []int8{1, 0} {
		code, n := fetchIsolated(t, c, leader, topic, seg.TopicID, seg.BaseOffset, isolation)
		if isolation == 1 && (code != kerr.KafkaStorageError.Code || n != 0) {
			t.Fatalf("read_committed Fetch at %d: %v, %d bytes; want KAFKA_STORAGE_ERROR and none", seg.BaseOffset, kerr.ErrorForCode(code), n)
		}
		if isolation == 0 && (code != 0 || n == 0) {
			t.Fatalf("read_uncommitted Fetch at %d: %v, %d bytes", seg.BaseOffset, kerr.ErrorForCode(code), n)
		}
	}
	if logs.count("damaged remote object") == 0 || logs.count(`"kind":"damaged"`) == 0 {
		t.Errorf("no log line says the store's reads failing on a damaged object")
	}

	checkStuck := func(how string) {
		t.Helper()
		got := consumeUntilStuck(t, c, topic, kgo.FetchIsolationLevel(kgo.ReadCommitted()))
		for _, v := range got {
			if strings.Contains(v, "-aborted-") {
				t.Fatalf("%s: read_committed consumer received aborted record %q", how, v[:16])
			}
		}
		if len(got) == 0 || len(got) >= len(committed) || !slices.Equal(got, committed[:len(got)]) {
			t.Fatalf("%s: read_committed consumer received %d records, want those before the damage: a prefix of the %d committed, short of them", how, len(got), len(committed))
		}
		t.Logf("%s: read_committed consumer stopped after %d of %d committed records", how, len(got), len(committed))
	}
	checkStuck("flipped byte")
	if got := consumeValuesWith(t, c, topic, len(all)); !slices.Equal(got, all) {
		t.Fatalf("read_uncommitted consumed %d records, want all %d", len(got), len(all))
	}

	if err := mem.Delete(ctx, key); err != nil {
		t.Fatal(err)
	}
	checkStuck("deleted")

	if err := mem.Put(ctx, key, bytes.NewReader(orig), int64(len(orig))); err != nil {
		t.Fatal(err)
	}
	if got := consumeValuesWith(t, c, topic, len(committed), kgo.FetchIsolationLevel(kgo.ReadCommitted())); !slices.Equal(got, committed) {
		t.Fatalf("restored: read_committed consumed %d records, want the %d committed", len(got), len(committed))
	}
}

// fetchIsolated is fetchAt at an isolation level (0 read_uncommitted, 1
// read_committed).
func fetchIsolated(t *testing.T, c *Cluster, id int32, topic string, topicID [16]byte, offset int64, isolation int8) (int16, int) {
	t.Helper()
	req := kmsg.NewPtrFetchRequest()
	req.ReplicaID, req.MaxWaitMillis, req.MaxBytes, req.IsolationLevel = -1, 100, 1<<20, isolation
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic, rt.TopicID = topic, topicID
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.FetchOffset, rp.PartitionMaxBytes, rp.CurrentLeaderEpoch, rp.LogStartOffset = offset, 1<<20, -1, -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := request(t, c.Addr(id), req)
	if err != nil {
		t.Fatal(err)
	}
	fr := resp.(*kmsg.FetchResponse)
	if fr.ErrorCode != 0 || len(fr.Topics) != 1 || len(fr.Topics[0].Partitions) != 1 {
		t.Fatalf("fetch at %d: top-level code %d, %d topics", offset, fr.ErrorCode, len(fr.Topics))
	}
	p := fr.Topics[0].Partitions[0]
	return p.ErrorCode, len(p.RecordBatches)
}

// storeObject is key's bytes in store.
func storeObject(t *testing.T, store remote.Store, key string) []byte {
	t.Helper()
	rc, err := store.Get(context.Background(), key, 0, -1)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	var b bytes.Buffer
	if _, err := b.ReadFrom(rc); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// consumeUntilStuck consumes topic from its start until 3 s pass without
// a new record (or 30 s in all) and returns the values received.
func consumeUntilStuck(t *testing.T, c *Cluster, topic string, opts ...kgo.Opt) []string {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(c.Addrs()...), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(200 * time.Millisecond)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var out []string
	last := time.Now()
	for deadline := last.Add(30 * time.Second); time.Since(last) < 3*time.Second && time.Now().Before(deadline); {
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		fs := cl.PollFetches(ctx)
		cancel()
		fs.EachRecord(func(r *kgo.Record) { out, last = append(out, string(r.Value)), time.Now() })
	}
	return out
}
