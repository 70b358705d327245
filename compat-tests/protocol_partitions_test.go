package compattests

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"
)

// The data path at the versions Kafka 4.2 serves (issue 25): Produce v13
// (topic ids, KIP-516) and v12 (the produce adds its partition to the
// transaction, KIP-890 part 2), Fetch v18, ListOffsets v9-11 (the tiered
// storage timestamps, answered as Kafka answers for a topic without remote
// storage), each with real franz-go clients or raw requests at the exact
// version, on one node and on three at replication factor 3.

// maxProduceVersion caps a client's Produce version: raw requests that
// name topics (not ids) must not go out as v13, and some tests need an
// older producer's answers.
func maxProduceVersion(v int16) kgo.Opt {
	versions := kversion.Stable()
	versions.SetMaxKeyVersion(int16(kmsg.Produce), v)
	return kgo.MaxVersions(versions)
}

// wireVersions is a kgo.Logger that records the version of every request
// the client writes (kgo logs "wrote <Name> v<N>" at debug level): the
// version actually negotiated and sent, not the one hoped for.
type wireVersions struct {
	mu   sync.Mutex
	sent map[string]map[int16]int // request name: version: count
}

func (l *wireVersions) Level() kgo.LogLevel { return kgo.LogLevelDebug }

func (l *wireVersions) Log(_ kgo.LogLevel, msg string, _ ...any) {
	var name string
	var v int16
	if n, _ := fmt.Sscanf(msg, "wrote %s v%d", &name, &v); n != 2 {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.sent == nil {
		l.sent = map[string]map[int16]int{}
	}
	if l.sent[name] == nil {
		l.sent[name] = map[int16]int{}
	}
	l.sent[name][v]++
}

// versionsOf are the versions of name the client wrote, and how often.
func (l *wireVersions) versionsOf(name string) map[int16]int {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := map[int16]int{}
	for v, n := range l.sent[name] {
		out[v] = n
	}
	return out
}

// partitionsEnv is where a test of this file runs: one node or a cluster.
type partitionsEnv struct {
	seeds []string
	adm   *kadm.Client
	rf    int16
	addr  func(node int32) string // a node's client address
}

func singleEnv(t *testing.T) partitionsEnv {
	b := startBroker(t, t.TempDir())
	return partitionsEnv{seeds: []string{b.Addr}, adm: newAdmin(t, b.Addr), rf: 1,
		addr: func(int32) string { return b.Addr }}
}

func clusterEnv(t *testing.T) partitionsEnv {
	c := startCluster(t, 3)
	// An admin that reaches every node (c.Admin is pinned to one): offsets
	// are listed at each partition's leader.
	adm := kadm.NewClient(newClient(t, c.Addr(1), kgo.SeedBrokers(c.Addrs()...)))
	return partitionsEnv{seeds: c.Addrs(), adm: adm, rf: 3,
		addr: func(node int32) string { return c.Addr(int(node)) }}
}

// topic creates a topic of partitions at the environment's replication
// factor and returns its id and each partition's leader.
func (e partitionsEnv) topic(t *testing.T, name string, partitions int32) ([16]byte, map[int32]int32) {
	t.Helper()
	ctx := testCtx(t, 30*time.Second)
	if resp, err := e.adm.CreateTopic(ctx, partitions, e.rf, nil, name); err != nil {
		t.Fatalf("create topic %q: %v (%s)", name, err, resp.ErrMessage)
	}
	for {
		md, err := e.adm.Metadata(ctx, name)
		if err == nil {
			td := md.Topics[name]
			leaders := map[int32]int32{}
			for _, p := range td.Partitions {
				if p.Err == nil && p.Leader >= 0 && len(p.ISR) == int(e.rf) {
					leaders[p.Partition] = p.Leader
				}
			}
			if td.Err == nil && len(leaders) == int(partitions) {
				return td.ID, leaders
			}
		}
		if ctx.Err() != nil {
			t.Fatalf("topic %q: no leader and full ISR for every partition: %v", name, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestProtocolPartitions runs the Produce v13 and Fetch v18 checks on one
// node; TestProtocolPartitionsCluster on three at replication factor 3.
func TestProtocolPartitions(t *testing.T) {
	e := singleEnv(t)
	t.Run("ProduceV13FetchV18", func(t *testing.T) { testProduceV13FetchV18(t, e) })
	t.Run("ProduceV12AddsPartitionToTxn", func(t *testing.T) { testProduceV12AddsPartition(t, e) })
	t.Run("ListOffsetsTiered", func(t *testing.T) { testListOffsetsTiered(t, e) })
}

func TestProtocolPartitionsCluster(t *testing.T) {
	e := clusterEnv(t)
	t.Run("ProduceV13FetchV18", func(t *testing.T) { testProduceV13FetchV18(t, e) })
	// The transaction's coordinator on another node than the partition's
	// leader: the add goes over the network.
	t.Run("ProduceV12AddsPartitionToTxn", func(t *testing.T) { testProduceV12AddsPartition(t, e) })
}

// testProduceV13FetchV18: a non-transactional franz-go producer
// negotiates Produce v13 and a consumer Fetch v18, and the records come
// back; a raw Produce v13 naming an unknown topic id gets UNKNOWN_TOPIC_ID
// for its partitions while the known topic in the same request is written.
func testProduceV13FetchV18(t *testing.T, e partitionsEnv) {
	const topic, parts, n = "v13-roundtrip", 3, 30
	id, leaders := e.topic(t, topic, parts)

	var prodLog wireVersions
	prod := newClient(t, e.seeds[0], kgo.SeedBrokers(e.seeds...), kgo.WithLogger(&prodLog),
		kgo.RequiredAcks(kgo.AllISRAcks()), kgo.DefaultProduceTopic(topic))
	ctx := testCtx(t, 60*time.Second)
	var want []string
	for i := range n {
		v := fmt.Sprintf("record-%02d", i)
		want = append(want, v)
		if err := prod.ProduceSync(ctx, &kgo.Record{Key: []byte(v), Value: []byte(v)}).FirstErr(); err != nil {
			t.Fatalf("produce %s: %v", v, err)
		}
	}
	if got := prodLog.versionsOf("Produce"); len(got) != 1 || got[13] == 0 {
		t.Errorf("the producer wrote Produce at versions %v, want v13 only", got)
	}

	var consLog wireVersions
	recs := consumeAll(t, e.seeds[0], topic, n, 30*time.Second, kgo.SeedBrokers(e.seeds...), kgo.WithLogger(&consLog))
	var got []string
	for _, r := range recs {
		got = append(got, string(r.Value))
	}
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Errorf("consumed %v, want %v", got, want)
	}
	if v := consLog.versionsOf("Fetch"); len(v) != 1 || v[18] == 0 {
		t.Errorf("the consumer wrote Fetch at versions %v, want v18 only", v)
	}

	// A raw Produce v13 to partition 0's leader: the topic by its id, and
	// an id no topic has.
	c := dialRaw(t, e.addr(leaders[0]))
	unknown := [16]byte{0xde, 0xad, 0xbe, 0xef, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}
	req := kmsg.NewPtrProduceRequest()
	req.Version, req.Acks, req.TimeoutMillis = 13, -1, 10000
	for _, tid := range [][16]byte{id, unknown} {
		rt := kmsg.NewProduceRequestTopic()
		rt.TopicID = tid
		for _, p := range []int32{0, 1} {
			if tid == id && p != 0 {
				continue
			}
			rp := kmsg.NewProduceRequestTopicPartition()
			rp.Partition, rp.Records = p, recordBatch(t, nil, []byte("raw-v13"))
			rt.Partitions = append(rt.Partitions, rp)
		}
		req.Topics = append(req.Topics, rt)
	}
	resp := c.roundTripStrict(t, req).(*kmsg.ProduceResponse)
	if len(resp.Topics) != 2 {
		t.Fatalf("raw Produce v13: %d topics in the response, want 2: %+v", len(resp.Topics), resp.Topics)
	}
	for _, st := range resp.Topics {
		for _, sp := range st.Partitions {
			switch st.TopicID {
			case id:
				if sp.ErrorCode != 0 || sp.BaseOffset < 0 {
					t.Errorf("raw Produce v13 to %s[%d] by id: error %v base offset %d", topic, sp.Partition, kerr.ErrorForCode(sp.ErrorCode), sp.BaseOffset)
				}
			case unknown:
				if sp.ErrorCode != kerr.UnknownTopicID.Code {
					t.Errorf("raw Produce v13 to an unknown topic id, partition %d: %v, want UNKNOWN_TOPIC_ID", sp.Partition, kerr.ErrorForCode(sp.ErrorCode))
				}
			default:
				t.Errorf("raw Produce v13: response names topic id %x, asked %x and %x", st.TopicID, id, unknown)
			}
		}
	}
	if got := readTopic(t, e.seeds, topic, false, n+1); len(got) != n+1 || !slices.Contains(got, "raw-v13") {
		t.Errorf("after the raw Produce v13 the topic holds %d records (raw-v13 among them: %v), want %d", len(got), slices.Contains(got, "raw-v13"), n+1)
	}
}

// txnSetup finds id's transaction coordinator (creating
// __transaction_state on first use) and inits its producer id.
func txnSetup(t *testing.T, ctx context.Context, cl *kgo.Client, id string) (coordinator int32, pid int64, epoch int16) {
	t.Helper()
	for {
		fc := kmsg.NewPtrFindCoordinatorRequest()
		fc.CoordinatorKey, fc.CoordinatorType = id, 1
		fr, err := fc.RequestWith(ctx, cl)
		if err == nil && fr.ErrorCode == 0 {
			ip := kmsg.NewPtrInitProducerIDRequest()
			ip.TransactionalID, ip.TransactionTimeoutMillis = &id, 60000
			ir, err := ip.RequestWith(ctx, cl)
			if err == nil && ir.ErrorCode == 0 {
				return fr.NodeID, ir.ProducerID, ir.ProducerEpoch
			}
		}
		if ctx.Err() != nil {
			t.Fatalf("transactional id %q: no coordinator or producer id: %v", id, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// testProduceV12AddsPartition: after InitProducerId and without
// AddPartitionsToTxn, a transactional Produce v12 is written and adds its
// partition to the transaction (DescribeTransactions lists it), which
// commits and is read read_committed; the same batch at v11 is refused
// with TRANSACTION_ABORTABLE and at v10 with INVALID_TXN_STATE, and nothing
// of those is written. At v12 an unknown producer id and a fenced epoch
// get Kafka's errors. On a cluster the transactional id is chosen so that
// its coordinator is not the partition's leader.
func testProduceV12AddsPartition(t *testing.T, e partitionsEnv) {
	const topic = "v12-txn"
	_, leaders := e.topic(t, topic, 3)
	cl := newClient(t, e.seeds[0], kgo.SeedBrokers(e.seeds...))
	ctx := testCtx(t, 90*time.Second)

	id := ""
	var coord int32
	var pid int64
	var epoch int16
	for i := 0; id == ""; i++ {
		cand := fmt.Sprintf("v12-producer-%d", i)
		var c int32
		c, pid, epoch = txnSetup(t, ctx, cl, cand)
		if len(e.seeds) == 1 || c != leaders[0] || i == 50 {
			id, coord = cand, c
		}
	}
	t.Logf("transactional id %s: coordinator %d, partition 0 led by %d, producer id %d epoch %d", id, coord, leaders[0], pid, epoch)

	produce := func(version int16, p int32, pid int64, epoch int16, seq int32, value string) int16 {
		t.Helper()
		c := dialRaw(t, e.addr(leaders[p]))
		defer c.Close()
		req := kmsg.NewPtrProduceRequest()
		req.Version, req.Acks, req.TimeoutMillis = version, -1, 10000
		req.TransactionID = &id
		rt := kmsg.NewProduceRequestTopic()
		rt.Topic = topic
		rp := kmsg.NewProduceRequestTopicPartition()
		rp.Partition, rp.Records = p, rawTxnBatch(t, pid, epoch, seq, []byte(value))
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp := c.roundTripStrict(t, req).(*kmsg.ProduceResponse)
		if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
			t.Fatalf("Produce v%d: %+v", version, resp.Topics)
		}
		return resp.Topics[0].Partitions[0].ErrorCode
	}
	expect := func(what string, got, want int16) {
		t.Helper()
		if got != want {
			t.Errorf("%s: %v, want %v", what, kerr.ErrorForCode(got), kerr.ErrorForCode(want))
		}
	}

	// Partition 1 was never added: an older producer is refused.
	expect("Produce v10 to a partition not in the transaction", produce(10, 1, pid, epoch, 0, "v10"), kerr.InvalidTxnState.Code)
	expect("Produce v11 to a partition not in the transaction", produce(11, 1, pid, epoch, 0, "v11"), kerr.TransactionAbortable.Code)
	// v12 adds partition 0 and writes.
	expect("Produce v12 with no AddPartitionsToTxn", produce(12, 0, pid, epoch, 0, "txn-a"), 0)
	expect("Produce v12, the partition's second batch", produce(12, 0, pid, epoch, 1, "txn-b"), 0)
	// Kafka's errors for a bad producer at v12, nothing added.
	expect("Produce v12 with an unknown producer id", produce(12, 2, pid+1000, 0, 0, "stranger"), kerr.InvalidProducerIDMapping.Code)
	if epoch > 0 {
		expect("Produce v12 with a stale epoch", produce(12, 2, pid, epoch-1, 0, "stale"), kerr.InvalidProducerEpoch.Code)
	}

	dt := kmsg.NewPtrDescribeTransactionsRequest()
	dt.TransactionalIDs = []string{id}
	dr, err := dt.RequestWith(ctx, cl)
	if err != nil || len(dr.TransactionStates) != 1 {
		t.Fatalf("DescribeTransactions: %v %+v", err, dr)
	}
	ts := dr.TransactionStates[0]
	var in []string
	for _, tt := range ts.Topics {
		for _, p := range tt.Partitions {
			in = append(in, fmt.Sprintf("%s-%d", tt.Topic, p))
		}
	}
	if ts.ErrorCode != 0 || ts.State != "Ongoing" || !slices.Equal(in, []string{topic + "-0"}) {
		t.Errorf("DescribeTransactions: error %v state %s partitions %v, want Ongoing with %s-0 only", kerr.ErrorForCode(ts.ErrorCode), ts.State, in, topic)
	}

	et := kmsg.NewPtrEndTxnRequest()
	et.TransactionalID, et.ProducerID, et.ProducerEpoch, et.Commit = id, pid, epoch, true
	er, err := et.RequestWith(ctx, cl)
	if err != nil || er.ErrorCode != 0 {
		t.Fatalf("EndTxn commit: %v %+v", err, er)
	}
	got := readTopic(t, e.seeds, topic, true, 2)
	slices.Sort(got)
	if !slices.Equal(got, []string{"txn-a", "txn-b"}) {
		t.Errorf("read_committed after the commit: %v, want [txn-a txn-b]", got)
	}
	ends := endOffsets(t, e.adm, topic)
	if ends[1] != 0 || ends[2] != 0 {
		t.Errorf("refused batches were written: end offsets %v, want partitions 1 and 2 empty", ends)
	}

	// A producer fenced by a newer InitProducerId: its v12 batch, which
	// would open a new transaction, is INVALID_PRODUCER_EPOCH.
	if _, pid2, epoch2 := txnSetup(t, ctx, cl, id); pid2 != pid || epoch2 <= epoch {
		t.Fatalf("InitProducerId again: producer id %d epoch %d, want %d at an epoch above %d", pid2, epoch2, pid, epoch)
	}
	expect("Produce v12 from the fenced producer", produce(12, 1, pid, epoch, 0, "fenced"), kerr.InvalidProducerEpoch.Code)
	if ends := endOffsets(t, e.adm, topic); ends[1] != 0 {
		t.Errorf("the fenced producer's batch was written: end offsets %v", ends)
	}
}

// testListOffsetsTiered: ListOffsets v9-11's tiered storage timestamps on
// a topic without remote storage answer offset -1, timestamp -1 and
// leader epoch -1 (UnifiedLog.fetchOffsetByTimestamp), from the version
// that introduced each; before it, and for a timestamp below -6, the
// partition is UNSUPPORTED_VERSION (ReplicaManager.isListOffsetsTimestampUnsupported).
func testListOffsetsTiered(t *testing.T, e partitionsEnv) {
	const topic = "tiered-ts"
	_, leaders := e.topic(t, topic, 1)
	prod := newClient(t, e.seeds[0], kgo.DefaultProduceTopic(topic))
	for i := range 3 {
		if err := prod.ProduceSync(testCtx(t, 15*time.Second), &kgo.Record{Value: []byte(fmt.Sprint(i))}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	c := dialRaw(t, e.addr(leaders[0]))
	since := map[int64]int16{-1: 0, -2: 0, -3: 7, -4: 8, -5: 9, -6: 11}
	for v := int16(0); v <= 11; v++ {
		for _, ts := range []int64{-1, -2, -3, -4, -5, -6, -7, -100} {
			req := kmsg.NewPtrListOffsetsRequest()
			req.Version, req.ReplicaID, req.TimeoutMillis = v, -1, 5000
			rt := kmsg.NewListOffsetsRequestTopic()
			rt.Topic = topic
			rp := kmsg.NewListOffsetsRequestTopicPartition()
			rp.Partition, rp.Timestamp, rp.MaxNumOffsets, rp.CurrentLeaderEpoch = 0, ts, 1, -1
			rt.Partitions = append(rt.Partitions, rp)
			req.Topics = append(req.Topics, rt)
			resp := c.roundTripStrict(t, req).(*kmsg.ListOffsetsResponse)
			if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
				t.Fatalf("ListOffsets v%d ts %d: %+v", v, ts, resp.Topics)
			}
			sp := resp.Topics[0].Partitions[0]
			first, known := since[ts]
			if !known || v < first {
				if sp.ErrorCode != kerr.UnsupportedVersion.Code {
					t.Errorf("ListOffsets v%d timestamp %d: %v offset %d, want UNSUPPORTED_VERSION", v, ts, kerr.ErrorForCode(sp.ErrorCode), sp.Offset)
				}
				continue
			}
			if sp.ErrorCode != 0 {
				t.Errorf("ListOffsets v%d timestamp %d: %v", v, ts, kerr.ErrorForCode(sp.ErrorCode))
				continue
			}
			switch ts {
			case -5, -6:
				if sp.Offset != -1 || sp.Timestamp != -1 || (v >= 4 && sp.LeaderEpoch != -1) {
					t.Errorf("ListOffsets v%d timestamp %d: offset %d timestamp %d leader epoch %d, want -1 -1 -1", v, ts, sp.Offset, sp.Timestamp, sp.LeaderEpoch)
				}
			case -1:
				if off := listedOffset(v, sp); off != 3 {
					t.Errorf("ListOffsets v%d latest: offset %d, want 3", v, off)
				}
			case -2, -4:
				if off := listedOffset(v, sp); off != 0 {
					t.Errorf("ListOffsets v%d timestamp %d: offset %d, want 0", v, ts, off)
				}
			case -3:
				if sp.Offset < 0 || sp.Offset > 2 {
					t.Errorf("ListOffsets v%d max timestamp: offset %d", v, sp.Offset)
				}
			}
		}
	}
	if t.Failed() {
		t.Logf("advertised: %s", strings.Join(advertisedListOffsets(t, c), " "))
	}
}

// listedOffset is the offset a ListOffsets partition answer gives (v0: its
// one old-style offset).
func listedOffset(v int16, sp kmsg.ListOffsetsResponseTopicPartition) int64 {
	if v == 0 {
		if len(sp.OldStyleOffsets) != 1 {
			return -100
		}
		return sp.OldStyleOffsets[0]
	}
	return sp.Offset
}

// advertisedListOffsets is ListOffsets' range in ApiVersions, for a
// failure's log.
func advertisedListOffsets(t *testing.T, c *rawConn) []string {
	req := kmsg.NewPtrApiVersionsRequest()
	resp := c.roundTrip(t, req).(*kmsg.ApiVersionsResponse)
	var out []string
	for _, k := range resp.ApiKeys {
		if k.ApiKey == 2 {
			out = append(out, fmt.Sprintf("ListOffsets %d-%d", k.MinVersion, k.MaxVersion))
		}
	}
	return out
}
