package brokertest

import (
	"context"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"regexp"
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

	"github.com/fjordlog/fjord/broker"
	"github.com/fjordlog/fjord/broker/config"
	"github.com/fjordlog/fjord/broker/tier"
	"github.com/fjordlog/fjord/controller"
	"github.com/fjordlog/fjord/storage/remote"
)

// KIP-405's follower path on three nodes with a MemStore as the bucket.
// A tiered RF-2 topic is written (idempotent batches, a committed and an
// aborted transaction, then enough to tier all of them off the leader's
// disk); the follower's replica directory is wiped, as a replaced disk
// would leave it. It must catch up from the leader's local log start,
// not from offset 0 (which the leader no longer has): it restarts at the
// end of the copy with the copy's producer snapshot, reading no .log
// object from the store, and rejoins the ISR holding only the local
// part. Then the old leader is stopped and the new replica leads: a
// retry of an idempotent batch that is only in the store is answered as
// the duplicate it is, a gap is OUT_OF_ORDER_SEQUENCE_NUMBER, the
// producer continues; the new leader copies on where the old one
// stopped; and consumers from offset 0 read every record, byte for
// byte, read_uncommitted and read_committed.
func TestTieredFollowerRestart(t *testing.T) {
	store := &countingStore{MemStore: remote.NewMemStore()}
	const topic = "tiered-follow"
	c, dir, leader, follower := tieredPair(t, store, topic)
	step := stepper(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	step("leader %d, follower %d", leader, follower)

	var all, committed []string // values in offset order; committed: without the aborted ones
	// Idempotent batches of one producer, one record each.
	pid, pepoch := initProducerID(t, c)
	idemAt := map[int32]int64{} // sequence -> offset
	idem := func(seq int32) string { return fmt.Sprintf("idem-%02d-%s", seq, strings.Repeat("i", 80)) }
	for seq := int32(0); seq < 10; seq++ {
		code, at := produceIdem(t, c, leader, topic, pid, pepoch, seq, idem(seq))
		if code != 0 {
			t.Fatalf("idempotent batch %d: %v", seq, kerr.ErrorForCode(code))
		}
		idemAt[seq] = at
		all, committed = append(all, idem(seq)), append(committed, idem(seq))
	}
	// A committed, then an aborted transaction.
	txn := txnProducer(t, c, topic, "tiered-follow-txn")
	for _, commit := range []bool{true, false} {
		if err := txn.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		for i := range 3 {
			v := fmt.Sprintf("txn-%t-%d-%s", commit, i, strings.Repeat("t", 60))
			if err := txn.ProduceSync(ctx, &kgo.Record{Value: []byte(v)}).FirstErr(); err != nil {
				t.Fatal(err)
			}
			all = append(all, v)
			if commit {
				committed = append(committed, v)
			}
		}
		if err := txn.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
			t.Fatal(err)
		}
	}
	cl := producer(t, c, topic, kgo.ProducerBatchCompression(kgo.NoCompression()))
	send := func(n int) {
		t.Helper()
		for range n {
			var recs []*kgo.Record
			for range 4 {
				recs = append(recs, &kgo.Record{Value: []byte(fmt.Sprintf("v-%06d-%s", len(all)+len(recs), strings.Repeat("x", 80)))})
			}
			if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
				t.Fatalf("produce: %v", err)
			}
			for _, r := range recs {
				all, committed = append(all, string(r.Value)), append(committed, string(r.Value))
			}
		}
	}
	send(60)
	var lrs, frs replicaView
	eventually(t, 60*time.Second, "everything up to the bulk tiered off the leader's disk", func() bool {
		lrs = viewOf(c, leader, topic)
		return lrs.ok && lrs.LogStart > idemAt[9]+20 && tier.CopiedEnd(lrs.Remote) >= lrs.LogStart-1
	})
	step("leader %d: local log [%d, %d), copied to %d", leader, lrs.LogStart, lrs.LogEnd, tier.CopiedEnd(lrs.Remote))

	tieredOff := lrs.LogStart // the leader's local log start before the follower's restart
	// The follower's disk is replaced.
	if err := c.Stop(follower); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(filepath.Join(dir, fmt.Sprintf("node-%d", follower), topic+"-0")); err != nil {
		t.Fatal(err)
	}
	store.logGets.Store(0)
	store.snapshotGets.Store(0)
	restartNode(t, c, follower)
	step("follower %d restarted with an empty replica directory", follower)
	waitPartition(t, c, leader, topic, 60*time.Second, "the follower back in the ISR",
		func(p kmsg.MetadataResponseTopicPartition) bool { return len(p.ISR) == 2 })
	eventually(t, 30*time.Second, "the follower at the leader's log end", func() bool {
		lrs, frs = viewOf(c, leader, topic), viewOf(c, follower, topic)
		return lrs.ok && frs.ok && frs.LogEnd == lrs.LogEnd && frs.HighWater == lrs.LogEnd
	})
	step("follower in the ISR: local log [%d, %d), %d bytes; leader [%d, %d); .log reads from the store %d, .snapshot reads %d",
		frs.LogStart, frs.LogEnd, frs.LocalBytes, lrs.LogStart, lrs.LogEnd, store.logGets.Load(), store.snapshotGets.Load())
	if frs.LogStart < tieredOff || frs.LogStart <= idemAt[9] {
		t.Fatalf("the follower's log starts at %d; want at or above the leader's local start %d", frs.LogStart, tieredOff)
	}
	if n := store.logGets.Load(); n != 0 {
		t.Fatalf("the follower's catch-up read %d .log objects from the store; replication must not", n)
	}
	if store.snapshotGets.Load() == 0 {
		t.Fatal("the follower restarted without reading the copy's producer snapshot")
	}
	for i, v := range frs.Values {
		if got := frs.LogStart + int64(i); v != nil && !slices.Contains(all, string(v)) {
			t.Fatalf("follower offset %d: %q was never produced", got, v)
		}
	}

	// The old leader goes: the restarted replica leads.
	if err := c.Stop(leader); err != nil {
		t.Fatal(err)
	}
	waitPartition(t, c, follower, topic, 30*time.Second, "the restarted replica leading alone",
		func(p kmsg.MetadataResponseTopicPartition) bool { return p.Leader == follower && len(p.ISR) == 1 })
	step("node %d leads", follower)
	// A retry of the last idempotent batch, which only the copy in the
	// store holds now, is a duplicate: answered with its first offset,
	// not written again.
	var code int16
	var at int64
	eventually(t, 20*time.Second, "the retry answered", func() bool {
		code, at = produceIdem(t, c, follower, topic, pid, pepoch, 9, idem(9))
		return code == 0
	})
	if at != idemAt[9] {
		t.Fatalf("retry of sequence 9 (at offset %d) written again at %d: the new leader lost the producer's state", idemAt[9], at)
	}
	if code, _ := produceIdem(t, c, follower, topic, pid, pepoch, 11, idem(11)); code != kerr.OutOfOrderSequenceNumber.Code {
		t.Fatalf("sequence 11 after 9: %v, want OUT_OF_ORDER_SEQUENCE_NUMBER", kerr.ErrorForCode(code))
	}
	if code, _ := produceIdem(t, c, follower, topic, pid, pepoch, 10, idem(10)); code != 0 {
		t.Fatalf("sequence 10: %v", kerr.ErrorForCode(code))
	}
	all, committed = append(all, idem(10)), append(committed, idem(10))
	restartAt := frs.LogStart
	send(30)
	eventually(t, 60*time.Second, "the new leader copying on and trimming its disk", func() bool {
		frs = viewOf(c, follower, topic)
		mine := slices.ContainsFunc(frs.Remote, func(s controller.RemoteSegmentMeta) bool {
			return s.Broker == follower && s.State == controller.RemoteCopyFinished
		})
		return frs.ok && mine && frs.LogStart > restartAt && tier.CopiedEnd(frs.Remote) >= frs.LogStart-1
	})
	step("new leader %d: local log [%d, %d), copied to %d", follower, frs.LogStart, frs.LogEnd, tier.CopiedEnd(frs.Remote))
	// The copy runs from 0 without a hole where the leadership changed.
	copiedTo := int64(-1)
	for _, s := range frs.Remote {
		if s.State != controller.RemoteCopyFinished {
			continue
		}
		if s.BaseOffset > copiedTo+1 {
			t.Fatalf("a hole in the copy: offsets [%d, %d) are in no copied segment", copiedTo+1, s.BaseOffset)
		}
		copiedTo = max(copiedTo, s.EndOffset)
	}

	if got := consumeValues(t, c, topic, len(all)); !slices.Equal(got, all) {
		t.Fatalf("read_uncommitted from 0: %d records, want %d; first difference at %d", len(got), len(all), firstDiff(got, all))
	}
	if got := consumeValuesWith(t, c, topic, len(committed), kgo.FetchIsolationLevel(kgo.ReadCommitted())); !slices.Equal(got, committed) {
		t.Fatalf("read_committed from 0: %d records, want %d; first difference at %d", len(got), len(committed), firstDiff(got, committed))
	}
	step("consumers from 0 read %d records (read_uncommitted) and %d (read_committed)", len(all), len(committed))

	// A reassignment to the node that never held the partition: the new
	// replica starts empty, restarts from the copy the same way, and the
	// move completes; it then leads and serves everything from offset 0.
	third := int32(6) - leader - follower
	store.logGets.Store(0)
	var req kadm.AlterPartitionAssignmentsReq
	req.Assign(topic, 0, []int32{follower, third})
	ars, err := kadm.NewClient(producer(t, c, topic)).AlterPartitionAssignments(ctx, req)
	if err == nil {
		err = ars[topic][0].Err
	}
	if err != nil {
		t.Fatalf("reassign to %d and %d: %v", follower, third, err)
	}
	waitPartition(t, c, follower, topic, 60*time.Second, "the move done: the new replica in the ISR",
		func(p kmsg.MetadataResponseTopicPartition) bool {
			return len(p.Replicas) == 2 && slices.Contains(p.ISR, third) && slices.Contains(p.ISR, follower)
		})
	var nrs replicaView
	eventually(t, 30*time.Second, "the new replica at the leader's log end", func() bool {
		frs, nrs = viewOf(c, follower, topic), viewOf(c, third, topic)
		return frs.ok && nrs.ok && nrs.LogEnd == frs.LogEnd
	})
	step("reassigned to node %d: its local log [%d, %d), %d bytes; .log reads from the store %d", third, nrs.LogStart, nrs.LogEnd, nrs.LocalBytes, store.logGets.Load())
	if nrs.LogStart <= restartAt || store.logGets.Load() != 0 {
		t.Fatalf("the reassigned replica starts at %d (want above %d) after %d .log reads from the store (want 0)", nrs.LogStart, restartAt, store.logGets.Load())
	}
	// The old leader comes back (no longer a replica: it deletes its copy
	// as a stray), so the metadata quorum survives the next stop.
	restartNode(t, c, leader)
	if err := c.Stop(follower); err != nil {
		t.Fatal(err)
	}
	waitPartition(t, c, third, topic, 30*time.Second, "the reassigned replica leading",
		func(p kmsg.MetadataResponseTopicPartition) bool { return p.Leader == third })
	if got := consumeValues(t, c, topic, len(all)); !slices.Equal(got, all) {
		t.Fatalf("read_uncommitted from 0 on node %d: %d records, want %d; first difference at %d", third, len(got), len(all), firstDiff(got, all))
	}
	step("node %d leads; a consumer from 0 read all %d records", third, len(all))
	eventually(t, 60*time.Second, "the reassigned leader's disk down to about local.retention.bytes", func() bool {
		nrs = viewOf(c, third, topic)
		return nrs.ok && nrs.LocalBytes <= 2048+2*1024
	})
	step("node %d: local log [%d, %d), %d bytes; copied to %d", third, nrs.LogStart, nrs.LogEnd, nrs.LocalBytes, tier.CopiedEnd(nrs.Remote))
}

func firstDiff(a, b []string) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// replicaView is a node's replica of topic-0, ok false while it has none.
type replicaView struct {
	ok bool
	broker.ReplicaState
}

func viewOf(c *Cluster, id int32, topic string) replicaView {
	b := c.Broker(id)
	if b == nil {
		return replicaView{}
	}
	rs, err := b.Replica(topic, 0)
	return replicaView{err == nil, rs}
}

// countingStore counts the reads of .log and .snapshot objects.
type countingStore struct {
	*remote.MemStore
	logGets, snapshotGets atomic.Int64
}

func (s *countingStore) Get(ctx context.Context, key string, off, n int64) (io.ReadCloser, error) {
	switch {
	case strings.HasSuffix(key, ".log"):
		s.logGets.Add(1)
	case strings.HasSuffix(key, ".snapshot"):
		s.snapshotGets.Add(1)
	}
	return s.MemStore.Get(ctx, key, off, n)
}

// initProducerID gets an idempotent producer id and epoch.
func initProducerID(t *testing.T, c *Cluster) (int64, int16) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.Addrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	req := kmsg.NewPtrInitProducerIDRequest()
	req.TransactionTimeoutMillis = -1
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	kresp, err := cl.Request(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	resp := kresp.(*kmsg.InitProducerIDResponse)
	if resp.ErrorCode != 0 {
		t.Fatalf("InitProducerID: %v", kerr.ErrorForCode(resp.ErrorCode))
	}
	return resp.ProducerID, resp.ProducerEpoch
}

// produceIdem produces one idempotent batch (one record, value v, base
// sequence seq) to node id's topic-0 with acks=all, and returns the
// error code and the offset the batch was given (or already had).
func produceIdem(t *testing.T, c *Cluster, id int32, topic string, pid int64, epoch int16, seq int32, v string) (int16, int64) {
	t.Helper()
	b := rawBatch(v)
	binary.BigEndian.PutUint64(b[43:], uint64(pid))
	binary.BigEndian.PutUint16(b[51:], uint16(epoch))
	binary.BigEndian.PutUint32(b[53:], uint32(seq))
	binary.BigEndian.PutUint32(b[17:], crc32.Checksum(b[21:], crc32.MakeTable(crc32.Castagnoli)))
	req := kmsg.NewPtrProduceRequest()
	req.Acks, req.TimeoutMillis = -1, 5000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Partition, rp.Records = 0, b
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	versions := kversion.Stable()
	versions.SetMaxKeyVersion(int16(kmsg.Produce), 12) // names the topic, not its id
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.Addr(id)), kgo.RequestRetries(0), kgo.MaxVersions(versions),
		kgo.RequiredAcks(kgo.AllISRAcks()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := cl.SeedBrokers()[0].Request(ctx, req)
	if err != nil {
		t.Logf("produce to node %d: %v", id, err)
		return -1, -1
	}
	r := resp.(*kmsg.ProduceResponse)
	if len(r.Topics) != 1 || len(r.Topics[0].Partitions) != 1 {
		t.Fatalf("produce to node %d: malformed response %+v", id, r)
	}
	return r.Topics[0].Partitions[0].ErrorCode, r.Topics[0].Partitions[0].BaseOffset
}

// A transaction open across the follower's restart point: its first
// record is below it (only in the copy), its abort marker above (fetched
// from the leader). The restarted follower knows the transaction from
// the copy's producer snapshot, so the abort it fetches records the
// aborted transaction from its first offset; once it leads, a
// read_committed consumer from 0 does not see the aborted record. (The
// marker's segment is the active one when the follower restarts, so no
// copy made by the old leader lists the abort.)
func TestTieredFollowerRestartOpenTxn(t *testing.T) {
	const topic = "tiered-follow-txn"
	c, dir, leader, follower := tieredPair(t, remote.NewMemStore(), topic)
	step := stepper(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	txn := txnProducer(t, c, topic, "tiered-follow-open", kgo.TransactionTimeout(60*time.Second))
	if err := txn.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	r, err := txn.ProduceSync(ctx, &kgo.Record{Value: []byte("aborted-across-the-restart")}).First()
	if err != nil {
		t.Fatal(err)
	}
	first := r.Offset
	var committed []string
	cl := producer(t, c, topic, kgo.ProducerBatchCompression(kgo.NoCompression()))
	for range 60 {
		var recs []*kgo.Record
		for range 4 {
			recs = append(recs, &kgo.Record{Value: []byte(fmt.Sprintf("v-%06d-%s", len(committed)+len(recs), strings.Repeat("x", 80)))})
		}
		if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			t.Fatalf("produce: %v", err)
		}
		for _, r := range recs {
			committed = append(committed, string(r.Value))
		}
	}
	if err := txn.EndTransaction(ctx, kgo.TryAbort); err != nil {
		t.Fatal(err)
	}
	var lrs replicaView
	eventually(t, 60*time.Second, "the leader's local log above the transaction's first offset", func() bool {
		lrs = viewOf(c, leader, topic)
		return lrs.ok && lrs.LogStart > first && tier.CopiedEnd(lrs.Remote) >= lrs.LogStart-1 && lrs.LocalBytes <= 2048+2*1024
	})
	marker := lrs.LogEnd - 1
	step("transaction from %d aborted at %d; leader %d: local log [%d, %d), copied to %d", first, marker, leader, lrs.LogStart, lrs.LogEnd, tier.CopiedEnd(lrs.Remote))

	if err := c.Stop(follower); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(filepath.Join(dir, fmt.Sprintf("node-%d", follower), topic+"-0")); err != nil {
		t.Fatal(err)
	}
	restartNode(t, c, follower)
	var frs replicaView
	eventually(t, 60*time.Second, "the follower at the leader's log end", func() bool {
		lrs, frs = viewOf(c, leader, topic), viewOf(c, follower, topic)
		return lrs.ok && frs.ok && frs.LogEnd == lrs.LogEnd && frs.HighWater == lrs.LogEnd
	})
	waitPartition(t, c, leader, topic, 30*time.Second, "the follower back in the ISR",
		func(p kmsg.MetadataResponseTopicPartition) bool { return len(p.ISR) == 2 })
	step("follower %d restarted at %d, in the ISR", follower, frs.LogStart)
	if frs.LogStart <= first || frs.LogStart > marker {
		t.Fatalf("the follower restarted at %d, not between the transaction's first offset %d and its marker %d: the test no longer tests that", frs.LogStart, first, marker)
	}
	if err := c.Stop(leader); err != nil {
		t.Fatal(err)
	}
	waitPartition(t, c, follower, topic, 30*time.Second, "the restarted replica leading",
		func(p kmsg.MetadataResponseTopicPartition) bool { return p.Leader == follower })
	got := consumeValuesWith(t, c, topic, len(committed), kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	if !slices.Equal(got, committed) {
		t.Fatalf("read_committed from 0 on the restarted leader: %d records, want %d; first difference at %d (%q)", len(got), len(committed), firstDiff(got, committed), got[:min(1, len(got))])
	}
	step("read_committed from 0 on node %d: the %d committed records, not the aborted one", follower, len(committed))
}

// tieredPair starts a three-node cluster on store (its tier tasks every
// 100 ms) and creates topic: one partition at RF 2 with 1 KiB segments,
// 2 KiB kept locally, everything kept in all, min.insync.replicas 1. It
// returns once both replicas are in sync: the cluster, its directory,
// the partition's leader and its follower.
func tieredPair(t *testing.T, store remote.Store, topic string, configure ...func(id int32, cfg *config.Config)) (c *Cluster, dir string, leader, follower int32) {
	t.Helper()
	dir = t.TempDir()
	c, err := Start(Options{Nodes: 3, Dir: dir, RemoteStore: store, RemoteTaskInterval: 100 * time.Millisecond,
		Configure: func(id int32, cfg *config.Config) {
			cfg.RetentionCheckInterval = 100
			cfg.ReplicaLagTimeMaxMs = 2000
			for _, f := range configure {
				f(id, cfg)
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := kadm.NewClient(producer(t, c, topic)).CreateTopic(ctx, 1, 2, map[string]*string{
		"segment.bytes": kadm.StringPtr("1024"), "remote.storage.enable": kadm.StringPtr("true"),
		"local.retention.bytes": kadm.StringPtr("2048"), "retention.ms": kadm.StringPtr("-1"),
		"min.insync.replicas": kadm.StringPtr("1"),
	}, topic)
	if err != nil || res.Err != nil {
		t.Fatalf("create: %v %v", err, res.Err)
	}
	p := waitPartition(t, c, 1, topic, 20*time.Second, "both replicas in sync",
		func(p kmsg.MetadataResponseTopicPartition) bool { return len(p.ISR) == 2 && p.Leader >= 0 })
	leader, follower = p.Leader, p.Replicas[0]
	if follower == leader {
		follower = p.Replicas[1]
	}
	return c, dir, leader, follower
}

// A follower restarting from the tiered copy while the store is slow
// keeps replicating the leader's other partitions: the snapshot read of
// the restart is held for 20 s (a store that answers slowly, or not at
// all until restartTimeout), and meanwhile records written to a plain
// topic on the same leader and follower reach the follower, which stays
// in that topic's ISR (replica.lag.time.max.ms is 2 s here). Once the
// store answers, the restart completes and the follower catches up.
func TestTieredFollowerRestartSlowStore(t *testing.T) {
	store := &gatedStore{MemStore: remote.NewMemStore(), gate: make(chan struct{})}
	const topic, plain = "tiered-slow", "plain-beside"
	metrics := map[int32]string{}
	for id := int32(1); id <= 3; id++ {
		addr, err := freeAddr()
		if err != nil {
			t.Fatal(err)
		}
		metrics[id] = addr
	}
	c, dir, leader, follower := tieredPair(t, store, topic, func(id int32, cfg *config.Config) { cfg.MetricsAddr = metrics[id] })
	createOn(t, c, plain, leader, follower)
	step := stepper(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cl := producer(t, c, topic, kgo.ProducerBatchCompression(kgo.NoCompression()))
	for i := range 60 {
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte(fmt.Sprintf("v-%03d-%s", i, strings.Repeat("x", 200)))}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, 60*time.Second, "the first records tiered off the leader's disk", func() bool {
		lrs := viewOf(c, leader, topic)
		return lrs.ok && lrs.LogStart > 5 && tier.CopiedEnd(lrs.Remote) >= lrs.LogStart-1
	})
	if err := c.Stop(follower); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(filepath.Join(dir, fmt.Sprintf("node-%d", follower), topic+"-0")); err != nil {
		t.Fatal(err)
	}
	store.hold.Store(true)
	restartNode(t, c, follower)
	eventually(t, 30*time.Second, "the follower's restart reading the copy's snapshot", func() bool { return store.held.Load() > 0 })
	held := time.Now()
	step("follower %d restarting %s from the copy; the store holds its snapshot read", follower, topic)

	pl := producer(t, c, plain)
	for i := range 20 {
		if err := pl.ProduceSync(ctx, &kgo.Record{Value: []byte(fmt.Sprintf("p-%03d", i))}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, 10*time.Second, plain+" replicated to the follower while the store is slow", func() bool {
		lrs, frs := viewOf(c, leader, plain), viewOf(c, follower, plain)
		return lrs.ok && frs.ok && frs.LogEnd == lrs.LogEnd && lrs.LogEnd >= 20
	})
	// Past two lag bounds into the held read the follower is still in
	// the ISR (it could have dropped out and come back under a loaded
	// test machine: only a follower stalled behind the store stays out).
	time.Sleep(time.Until(held.Add(5 * time.Second)))
	waitPartition(t, c, leader, plain, 5*time.Second, "the follower in "+plain+"'s ISR while the store is slow",
		func(p kmsg.MetadataResponseTopicPartition) bool { return len(p.ISR) == 2 })
	if store.held.Load() == 0 || viewOf(c, follower, topic).LogEnd > 0 {
		t.Fatalf("the restart did not wait for the store (held reads %d)", store.held.Load())
	}
	step("%s replicated to the follower and stayed in sync %v into the held read", plain, time.Since(held).Round(time.Millisecond))

	close(store.gate)
	eventually(t, 60*time.Second, "the follower restarted from the copy and in sync", func() bool {
		lrs, frs := viewOf(c, leader, topic), viewOf(c, follower, topic)
		return lrs.ok && frs.ok && frs.LogStart > 0 && frs.LogEnd == lrs.LogEnd
	})
	// At least one restart: more if the leader's local start moved on
	// (its local retention goes on) while the held read waited.
	m := regexp.MustCompile(`(?m)^fjord_remote_follower_restarts_total (\d+)$`).FindStringSubmatch(scrape(t, metrics[follower]))
	if m == nil || m[1] == "0" {
		t.Errorf("the follower's fjord_remote_follower_restarts_total: %v, want at least 1", m)
	} else {
		step("the follower restarted from the copy %s times", m[1])
	}
}

// gatedStore holds every .snapshot read while hold is set, until gate
// is closed or the read's context ends; held counts the reads held.
type gatedStore struct {
	*remote.MemStore
	hold atomic.Bool
	held atomic.Int64
	gate chan struct{}
}

func (s *gatedStore) Get(ctx context.Context, key string, off, n int64) (io.ReadCloser, error) {
	if strings.HasSuffix(key, ".snapshot") && s.hold.Load() {
		s.held.Add(1)
		select {
		case <-s.gate:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return s.MemStore.Get(ctx, key, off, n)
}
