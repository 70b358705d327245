package broker

import (
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordlog/fjord/broker/config"
	"github.com/fjordlog/fjord/broker/coordinator"
)

func TestProduceFetchRoundTrip(t *testing.T) {
	b := testBroker(t, t.TempDir(), nil)
	rc := dial(t, b)
	if ec := rc.createTopic("orders", 2, nil); ec != 0 {
		t.Fatalf("create: %d", ec)
	}
	for i, vals := range [][]string{{"a", "b"}, {"c"}, {"d", "e", "f"}} {
		ec, off := rc.produce("orders", 1, makeBatch(batchSpec{values: vals, baseTime: 1000}))
		if ec != 0 || off != []int64{0, 2, 3}[i] {
			t.Fatalf("produce %d: error %d offset %d", i, ec, off)
		}
	}
	ec, got := rc.fetchValues("orders", 1, 0)
	if ec != 0 || !slices.Equal(got, []string{"a", "b", "c", "d", "e", "f"}) {
		t.Fatalf("fetch: %d %v", ec, got)
	}
	// From the middle of a batch: the whole batch comes back (clients skip).
	if _, got := rc.fetchValues("orders", 1, 4); !slices.Equal(got, []string{"d", "e", "f"}) {
		t.Fatalf("fetch from 4: %v", got)
	}
	if ec, _ := rc.fetchValues("orders", 1, 7); ec != kerr.OffsetOutOfRange.Code {
		t.Fatalf("fetch past end: %d", ec)
	}
	if ec, _ := rc.produce("nope", 0, makeBatch(batchSpec{values: []string{"x"}})); ec != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("produce to unknown topic: %d", ec)
	}
}

func TestLongPollWokenByAppend(t *testing.T) {
	b := testBroker(t, t.TempDir(), nil)
	rc, prod := dial(t, b), dial(t, b)
	rc.createTopic("t", 1, nil)
	req := fetchReq("t", 0, 0, 10000, 1)
	rc.send(req)
	parked := func() bool { n, _ := b.replicas.Topic("t").Parts[0].Waiting(); return n > 0 }
	for deadline := time.Now().Add(10 * time.Second); !parked(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the fetch never parked")
		}
	}
	start := time.Now()
	if ec, _ := prod.produce("t", 0, makeBatch(batchSpec{values: []string{"wake"}})); ec != 0 {
		t.Fatal(ec)
	}
	resp := rc.recv(req).(*kmsg.FetchResponse)
	if waited := time.Since(start); waited > 5*time.Second {
		t.Fatalf("fetch not woken by the append (took %v)", waited)
	}
	if got := recordValues(t, resp.Topics[0].Partitions[0].RecordBatches); !slices.Equal(got, []string{"wake"}) {
		t.Fatalf("got %v", got)
	}
}

func TestLongPollTimesOutEmpty(t *testing.T) {
	b := testBroker(t, t.TempDir(), nil)
	rc := dial(t, b)
	rc.createTopic("t", 1, nil)
	start := time.Now()
	resp := rc.do(fetchReq("t", 0, 0, 200, 1)).(*kmsg.FetchResponse)
	if time.Since(start) < 150*time.Millisecond {
		t.Fatal("empty fetch did not wait")
	}
	if p := resp.Topics[0].Partitions[0]; p.ErrorCode != 0 || len(p.RecordBatches) != 0 {
		t.Fatalf("got %+v", p)
	}
}

// The idempotent producer's state is kept per (producer id, partition): a
// client that bumps its epoch on one partition still has its in-flight
// retries on another recognised as duplicates.
func TestIdempotentEpochPerPartition(t *testing.T) {
	b := testBroker(t, t.TempDir(), nil)
	rc := dial(t, b)
	rc.createTopic("t", 2, nil)
	pid := int64(4242)
	p0 := makeBatch(batchSpec{pid: pid, epoch: 0, seq: 0, values: []string{"a", "b"}})
	p1 := makeBatch(batchSpec{pid: pid, epoch: 0, seq: 0, values: []string{"x"}})
	rc.produce("t", 0, slices.Clone(p0))
	rc.produce("t", 1, slices.Clone(p1))
	// Epoch bump on partition 0 only.
	if ec, off := rc.produce("t", 0, makeBatch(batchSpec{pid: pid, epoch: 1, seq: 0, values: []string{"c"}})); ec != 0 || off != 2 {
		t.Fatalf("new epoch on p0: %d %d", ec, off)
	}
	// A retry of the old-epoch batch on partition 1 is still a duplicate.
	if ec, off := rc.produce("t", 1, slices.Clone(p1)); ec != 0 || off != 0 {
		t.Fatalf("retry on p1: %d %d", ec, off)
	}
	if _, got := rc.fetchValues("t", 1, 0); !slices.Equal(got, []string{"x"}) {
		t.Fatalf("p1 holds %v: duplicate written", got)
	}
	// The old epoch on partition 0 is fenced.
	if ec, _ := rc.produce("t", 0, makeBatch(batchSpec{pid: pid, epoch: 0, seq: 2, values: []string{"z"}})); ec != kerr.InvalidProducerEpoch.Code {
		t.Fatalf("stale epoch: %d", ec)
	}
	// A gap is refused.
	if ec, _ := rc.produce("t", 0, makeBatch(batchSpec{pid: pid, epoch: 1, seq: 5, values: []string{"g"}})); ec != kerr.OutOfOrderSequenceNumber.Code {
		t.Fatalf("gap: %d", ec)
	}
}

func TestIdempotentStateSurvivesRestart(t *testing.T) {
	dir := t.TempDir()
	b := testBroker(t, dir, nil)
	rc := dial(t, b)
	rc.createTopic("t", 1, nil)
	batch := makeBatch(batchSpec{pid: 77, epoch: 3, seq: 0, values: []string{"once"}})
	rc.produce("t", 0, slices.Clone(batch))
	b.Close()
	b2 := testBroker(t, dir, nil)
	rc2 := dial(t, b2)
	if ec, off := rc2.produce("t", 0, slices.Clone(batch)); ec != 0 || off != 0 {
		t.Fatalf("retry after restart: %d %d", ec, off)
	}
	if _, got := rc2.fetchValues("t", 0, 0); !slices.Equal(got, []string{"once"}) {
		t.Fatalf("got %v", got)
	}
}

func TestAcksAllRefusedBelowMinISR(t *testing.T) {
	b := testBroker(t, t.TempDir(), nil)
	rc := dial(t, b)
	rc.createTopic("strict", 1, map[string]string{"min.insync.replicas": "2"})
	if ec, _ := rc.produce("strict", 0, makeBatch(batchSpec{values: []string{"x"}})); ec != kerr.NotEnoughReplicas.Code {
		t.Fatalf("acks=all with ISR 1 < min 2: %d", ec)
	}
	if _, got := rc.fetchValues("strict", 0, 0); len(got) != 0 {
		t.Fatalf("refused write was appended: %v", got)
	}
	resp := rc.do(produceReq("strict", 0, 1, makeBatch(batchSpec{values: []string{"y"}}))).(*kmsg.ProduceResponse)
	if ec := resp.Topics[0].Partitions[0].ErrorCode; ec != 0 {
		t.Fatalf("acks=1: %d", ec)
	}
}

func TestCorruptBatchRefused(t *testing.T) {
	b := testBroker(t, t.TempDir(), nil)
	rc := dial(t, b)
	rc.createTopic("t", 1, nil)
	batch := makeBatch(batchSpec{values: []string{"x"}})
	batch[len(batch)-1] ^= 0xff
	if ec, _ := rc.produce("t", 0, batch); ec != kerr.CorruptMessage.Code {
		t.Fatalf("bad crc: %d", ec)
	}
	if ec, _ := rc.produce("t", 0, makeBatch(batchSpec{values: []string{"ok"}})); ec != 0 {
		t.Fatalf("partition stuck after a bad batch: %d", ec)
	}
}

func TestAcksZeroErrorClosesConnection(t *testing.T) {
	b := testBroker(t, t.TempDir(), nil)
	rc := dial(t, b)
	rc.createTopic("t", 1, nil)
	rc.send(produceReq("t", 0, 0, makeBatch(batchSpec{values: []string{"fire"}})))
	// acks=0 gets no response: the next response is the fetch's, which
	// waits for the record to become visible.
	freq := fetchReq("t", 0, 0, 5000, 1)
	resp := rc.do(freq).(*kmsg.FetchResponse)
	if got := recordValues(t, resp.Topics[0].Partitions[0].RecordBatches); !slices.Equal(got, []string{"fire"}) {
		t.Fatalf("got %v", got)
	}
	bad := makeBatch(batchSpec{values: []string{"x"}})
	bad[30] ^= 1
	rc.send(produceReq("t", 0, 0, bad))
	rc.c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := rc.br.ReadByte(); err == nil {
		t.Fatal("acks=0 error did not close the connection")
	}
}

func TestLogAppendTime(t *testing.T) {
	b := testBroker(t, t.TempDir(), nil)
	rc := dial(t, b)
	rc.createTopic("lat", 1, map[string]string{"message.timestamp.type": "LogAppendTime"})
	before := time.Now().UnixMilli()
	resp := rc.do(produceReq("lat", 0, -1, makeBatch(batchSpec{values: []string{"x"}, baseTime: 5}))).(*kmsg.ProduceResponse)
	p := resp.Topics[0].Partitions[0]
	if p.ErrorCode != 0 || p.LogAppendTime < before {
		t.Fatalf("got %+v", p)
	}
}

func TestRetentionMovesLogStart(t *testing.T) {
	b := testBroker(t, t.TempDir(), nil)
	rc := dial(t, b)
	rc.createTopic("r", 1, map[string]string{"segment.bytes": "1024", "retention.bytes": "2048"})
	long := string(make([]byte, 600))
	for range 10 {
		if ec, _ := rc.produce("r", 0, makeBatch(batchSpec{values: []string{long}, baseTime: time.Now().UnixMilli()})); ec != 0 {
			t.Fatal(ec)
		}
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		req := kmsg.NewPtrListOffsetsRequest()
		req.SetVersion(4)
		req.ReplicaID = -1
		rt := kmsg.NewListOffsetsRequestTopic()
		rt.Topic = "r"
		rt.Partitions = []kmsg.ListOffsetsRequestTopicPartition{{Partition: 0, Timestamp: -2, CurrentLeaderEpoch: -1}}
		req.Topics = []kmsg.ListOffsetsRequestTopic{rt}
		start := rc.do(req).(*kmsg.ListOffsetsResponse).Topics[0].Partitions[0].Offset
		if start > 0 {
			if ec, _ := rc.fetchValues("r", 0, 0); ec != kerr.OffsetOutOfRange.Code {
				t.Fatalf("fetch below log start: %d", ec)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("retention never deleted a segment")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestTopicAdminErrors(t *testing.T) {
	b := testBroker(t, t.TempDir(), nil)
	rc := dial(t, b)
	if ec := rc.createTopic("dup", 1, nil); ec != 0 {
		t.Fatal(ec)
	}
	for _, c := range []struct {
		name  string
		parts int32
		cfg   map[string]string
		want  int16
	}{
		{"dup", 3, nil, kerr.TopicAlreadyExists.Code},
		{"bad/name", 1, nil, kerr.InvalidTopicException.Code},
		{"zero", 0, nil, kerr.InvalidPartitions.Code},
		{"cfg", 1, map[string]string{"no.such.config": "1"}, kerr.InvalidConfig.Code},
		{"cfgval", 1, map[string]string{"retention.ms": "soon"}, kerr.InvalidConfig.Code},
		// Kafka's own topic configs Fjord does not act on: accepted when
		// ignoring them is safe, refused when not, type-checked either way.
		{"kafka-ignored", 1, map[string]string{"preallocate": "true", "max.compaction.lag.ms": "60000", "confluent.placement.constraints": "{}"}, 0},
		{"kafka-unsafe", 1, map[string]string{"min.compaction.lag.ms": "60000"}, kerr.InvalidConfig.Code},
		{"kafka-badval", 1, map[string]string{"max.compaction.lag.ms": "soon"}, kerr.InvalidConfig.Code},
		{"kafka-broker-key", 1, map[string]string{"log.retention.hours": "1"}, kerr.InvalidConfig.Code},
	} {
		if ec := rc.createTopic(c.name, c.parts, c.cfg); ec != c.want {
			t.Errorf("%s: got %d want %d", c.name, ec, c.want)
		}
	}
}

func TestOffsetsExpireForEmptyGroups(t *testing.T) {
	b := testBroker(t, t.TempDir(), func(c *config.Config) {
		c.OffsetsRetentionMinutes = 1
		c.OffsetsRetentionCheckMs = 20
	})
	rc := dial(t, b)
	rc.createTopic("t", 1, nil)
	waitLoaded(t, b)
	if ec := rc.commitOffsets(8, "fresh", "t", 5); ec[0] != 0 {
		t.Fatal(ec)
	}
	// A commit made two minutes ago, past retention.
	old := map[coordinator.TopicPartition]*coordinator.Committed{
		{Topic: "t", Partition: 0}: {Offset: 5, LeaderEpoch: -1, CommitTimeMs: time.Now().UnixMilli() - 2*60*1000},
	}
	done := make(chan error, 1)
	b.coord.Commit("old", old, func(err error) { done <- err })
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for len(b.coord.Offsets("old")) > 0 {
		if time.Now().After(deadline) {
			t.Fatal("expired offset not deleted")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if len(b.coord.Offsets("fresh")) != 1 {
		t.Fatal("an offset within retention was deleted")
	}
}

// waitLoaded has the offsets topic created, as a group's first
// FindCoordinator does, and waits until the coordinator serves the test's
// groups.
func waitLoaded(t *testing.T, b *Broker) {
	t.Helper()
	b.ensureOffsetsTopic()
	deadline := time.Now().Add(10 * time.Second)
	for b.coord.Status("old") != nil || b.coord.Status("g") != nil || b.coord.Status("fresh") != nil {
		if time.Now().After(deadline) {
			t.Fatal("offsets never loaded")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// Committed offsets are durable and come back after a restart.
func TestCommittedOffsetsSurviveRestart(t *testing.T) {
	dir := t.TempDir()
	b := testBroker(t, dir, nil)
	rc := dial(t, b)
	rc.createTopic("t", 2, nil)
	waitLoaded(t, b)
	if ec := rc.commitOffsets(2, "g", "t", 42, 7); ec[0] != 0 || ec[1] != 0 {
		t.Fatal(ec)
	}
	b.Close()
	b2 := testBroker(t, dir, nil)
	waitLoaded(t, b2)
	rc2 := dial(t, b2)
	fetch := kmsg.NewPtrOffsetFetchRequest()
	fetch.SetVersion(8)
	fg := kmsg.NewOffsetFetchRequestGroup()
	fg.Group = "g"
	fg.Topics = []kmsg.OffsetFetchRequestGroupTopic{{Topic: "t", Partitions: []int32{0, 1}}}
	fetch.Groups = []kmsg.OffsetFetchRequestGroup{fg}
	resp := rc2.do(fetch).(*kmsg.OffsetFetchResponse)
	ps := resp.Groups[0].Topics[0].Partitions
	if ps[0].Offset != 42 || ps[1].Offset != 7 {
		t.Fatalf("after restart: %+v", ps)
	}
}

// A Stable group is stored in the offsets topic and comes back after a
// restart: its member's heartbeat at the same generation is accepted.
func TestGroupSurvivesRestart(t *testing.T) {
	dir := t.TempDir()
	b := testBroker(t, dir, func(c *config.Config) { c.GroupInitialRebalanceMs = 0 })
	rc := dial(t, b)
	rc.createTopic("t", 1, nil)
	waitLoaded(t, b)
	join := kmsg.NewPtrJoinGroupRequest()
	join.SetVersion(5)
	join.Group, join.ProtocolType = "g", "consumer"
	join.SessionTimeoutMillis, join.RebalanceTimeoutMillis = 30000, 30000
	join.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range", Metadata: []byte("m")}}
	jr := rc.do(join).(*kmsg.JoinGroupResponse)
	if jr.ErrorCode == kerr.MemberIDRequired.Code {
		join.MemberID = jr.MemberID
		jr = rc.do(join).(*kmsg.JoinGroupResponse)
	}
	if jr.ErrorCode != 0 {
		t.Fatalf("join: %d", jr.ErrorCode)
	}
	sync := kmsg.NewPtrSyncGroupRequest()
	sync.SetVersion(3)
	sync.Group, sync.MemberID, sync.Generation = "g", jr.MemberID, jr.Generation
	sync.GroupAssignment = []kmsg.SyncGroupRequestGroupAssignment{{MemberID: jr.MemberID, MemberAssignment: []byte("a")}}
	if sr := rc.do(sync).(*kmsg.SyncGroupResponse); sr.ErrorCode != 0 {
		t.Fatalf("sync: %d", sr.ErrorCode)
	}
	b.Close()
	b2 := testBroker(t, dir, nil)
	waitLoaded(t, b2)
	rc2 := dial(t, b2)
	hb := kmsg.NewPtrHeartbeatRequest()
	hb.SetVersion(3)
	hb.Group, hb.MemberID, hb.Generation = "g", jr.MemberID, jr.Generation
	if r := rc2.do(hb).(*kmsg.HeartbeatResponse); r.ErrorCode != 0 {
		t.Fatalf("heartbeat after restart: %d", r.ErrorCode)
	}
}

// commitOffsets makes a simple (generation -1) commit of offsets[i] for
// partition i of topic and returns the partitions' error codes.
func (rc *rawClient) commitOffsets(version int16, group, topic string, offsets ...int64) []int16 {
	rc.t.Helper()
	commit := kmsg.NewPtrOffsetCommitRequest()
	commit.SetVersion(version)
	commit.Group, commit.Generation = group, -1
	rt := kmsg.NewOffsetCommitRequestTopic()
	rt.Topic = topic
	for i, off := range offsets {
		rt.Partitions = append(rt.Partitions, kmsg.OffsetCommitRequestTopicPartition{Partition: int32(i), Offset: off, LeaderEpoch: -1})
	}
	commit.Topics = []kmsg.OffsetCommitRequestTopic{rt}
	var codes []int16
	for _, p := range rc.do(commit).(*kmsg.OffsetCommitResponse).Topics[0].Partitions {
		codes = append(codes, p.ErrorCode)
	}
	return codes
}
