package compattests

// DeleteRecords, DescribeLogDirs and AlterReplicaLogDirs with kadm and
// sarama's ClusterAdmin, on one node and on a three-node cluster with RF=3:
// the log start offset moves, is replicated to the followers before the
// answer, survives a failover and a restart, and the fetch and ListOffsets
// paths respect it.

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// produceBatches writes n batches of per records each to partition p of
// topic, one ProduceSync per batch, so offsets [i*per, (i+1)*per) share a
// batch and a DeleteRecords offset can fall inside one.
func produceBatches(t *testing.T, cl *kgo.Client, topic string, p int32, n, per int) {
	t.Helper()
	ctx := testCtx(t, 30*time.Second)
	for i := 0; i < n; i++ {
		var rs []*kgo.Record
		for j := 0; j < per; j++ {
			rs = append(rs, &kgo.Record{Topic: topic, Partition: p, Value: []byte(fmt.Sprintf("v%d-%d", i, j))})
		}
		if err := cl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
			t.Fatalf("produce batch %d to %s[%d]: %v", i, topic, p, err)
		}
	}
}

func manualClient(t *testing.T, addr string, opts ...kgo.Opt) *kgo.Client {
	return newClient(t, addr, append([]kgo.Opt{kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(0)}, opts...)...)
}

func startOffsetOf(t *testing.T, adm *kadm.Client, topic string, p int32) int64 {
	t.Helper()
	lo, err := adm.ListStartOffsets(testCtx(t, 15*time.Second), topic)
	if err != nil {
		t.Fatalf("list start offsets %s: %v", topic, err)
	}
	o, ok := lo.Lookup(topic, p)
	if !ok || o.Err != nil {
		t.Fatalf("list start offsets %s[%d]: %v (present %v)", topic, p, o.Err, ok)
	}
	return o.Offset
}

// deleteRecords asks kadm to delete below offset and returns the answer.
func deleteRecords(t *testing.T, adm *kadm.Client, topic string, p int32, offset int64) kadm.DeleteRecordsResponse {
	t.Helper()
	os := kadm.Offsets{}
	os.Add(kadm.Offset{Topic: topic, Partition: p, At: offset})
	resp, err := adm.DeleteRecords(testCtx(t, 20*time.Second), os)
	if err != nil {
		t.Fatalf("DeleteRecords %s[%d] at %d: %v", topic, p, offset, err)
	}
	r, ok := resp.Lookup(topic, p)
	if !ok {
		t.Fatalf("DeleteRecords %s[%d]: no answer for the partition: %v", topic, p, resp)
	}
	return r
}

// consumerFetchCode sends one consumer Fetch v12 of topic[p] at offset to
// addr and returns the partition's error code and the log start it reports.
func consumerFetchCode(t *testing.T, addr, topic string, p int32, offset int64) (int16, int64) {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 3*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	conn := &rawConn{Conn: c}
	req := kmsg.NewPtrFetchRequest()
	req.Version = 12
	req.ReplicaID = -1
	req.MaxWaitMillis, req.MinBytes, req.MaxBytes = 0, 0, 1<<20
	req.SessionID, req.SessionEpoch = 0, -1
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes = p, offset, 1<<20
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	if _, err := conn.Write(conn.frame(req)); err != nil {
		t.Fatal(err)
	}
	buf, err := conn.readFrame(10 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	resp := req.ResponseKind().(*kmsg.FetchResponse)
	resp.SetVersion(req.Version)
	if err := parseResponse(buf, conn.corr, resp, true); err != nil {
		t.Fatal(err)
	}
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		t.Fatalf("fetch %s[%d]: malformed response", topic, p)
	}
	sp := resp.Topics[0].Partitions[0]
	return sp.ErrorCode, sp.LogStartOffset
}

// replicaLogStart is node addr's own log start offset for topic[p], read
// as Kafka's debugging consumer (ReplicaID -2), which any replica answers.
func replicaLogStart(addr, topic string, p int32) (int64, error) {
	c, err := net.DialTimeout("tcp", addr, 3*time.Second)
	if err != nil {
		return -1, err
	}
	defer c.Close()
	sp, err := diskFetch(&rawConn{Conn: c}, topic, p, 0)
	if err != nil {
		return -1, err
	}
	switch sp.ErrorCode {
	case 0, kerr.OffsetOutOfRange.Code:
		return sp.LogStartOffset, nil
	}
	return -1, kerr.ErrorForCode(sp.ErrorCode)
}

// firstOffsetFromStart consumes topic[p] from the start and returns the
// first offset and how many records it read before the end offset end.
func firstOffsetFromStart(t *testing.T, addr, topic string, p int32, end int64) (int64, int) {
	t.Helper()
	cl := newClient(t, addr, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {p: kgo.NewOffset().AtStart()}}))
	ctx := testCtx(t, 15*time.Second)
	first, n := int64(-1), 0
	for {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("consuming %s[%d] from the start: %d records before the timeout", topic, p, n)
		}
		fs.EachError(func(_ string, _ int32, err error) { t.Fatalf("consuming %s[%d]: %v", topic, p, err) })
		for _, r := range fs.Records() {
			if first < 0 {
				first = r.Offset
			}
			n++
			if r.Offset == end-1 {
				return first, n
			}
		}
	}
}

func logDirSize(t *testing.T, adm *kadm.Client, broker int32, topic string, p int32) (kadm.DescribedLogDir, kadm.DescribedLogDirPartition) {
	t.Helper()
	dirs, err := adm.DescribeBrokerLogDirs(testCtx(t, 10*time.Second), broker, nil)
	if err != nil {
		t.Fatalf("DescribeBrokerLogDirs(%d): %v", broker, err)
	}
	for _, d := range dirs {
		if d.Err != nil {
			continue
		}
		if dp, ok := d.Topics.Lookup(topic, p); ok {
			return d, dp
		}
	}
	t.Fatalf("DescribeBrokerLogDirs(%d): %s[%d] in no healthy dir: %v", broker, topic, p, dirs)
	return kadm.DescribedLogDir{}, kadm.DescribedLogDirPartition{}
}

func saramaAdmin(t *testing.T, addrs ...string) sarama.ClusterAdmin {
	t.Helper()
	cfg := sarama.NewConfig()
	cfg.Version = sarama.V3_6_0_0 // DeleteRecords v2, DescribeLogDirs v4
	cfg.Admin.Timeout = 20 * time.Second
	adm, err := sarama.NewClusterAdmin(addrs, cfg)
	if err != nil {
		t.Fatalf("sarama.NewClusterAdmin: %v", err)
	}
	t.Cleanup(func() { adm.Close() })
	return adm
}

func TestDeleteRecordsSingleNode(t *testing.T) {
	b := startBroker(t, t.TempDir())
	adm := newAdmin(t, b.Addr)
	const topic = "delrec"
	createTopic(t, adm, topic, 2, nil)
	cl := manualClient(t, b.Addr)
	produceBatches(t, cl, topic, 0, 10, 10) // offsets [0, 100), batches of 10

	dir, before := logDirSize(t, adm, 1, topic, 0)
	if before.Size <= 0 || before.OffsetLag != 0 || before.IsFuture {
		t.Fatalf("DescribeLogDirs %s[0]: %+v", topic, before)
	}
	if !filepath.IsAbs(dir.Dir) {
		t.Fatalf("log dir %q is not absolute", dir.Dir)
	}

	// kadm: delete below 35, inside the batch [30, 40).
	if r := deleteRecords(t, adm, topic, 0, 35); r.Err != nil || r.LowWatermark != 35 {
		t.Fatalf("DeleteRecords at 35: low watermark %d, %v", r.LowWatermark, r.Err)
	}
	if got := startOffsetOf(t, adm, topic, 0); got != 35 {
		t.Fatalf("ListOffsets earliest after DeleteRecords: %d, want 35", got)
	}
	if first, n := firstOffsetFromStart(t, b.Addr, topic, 0, 100); first != 35 || n != 65 {
		t.Fatalf("consuming from the start: first offset %d, %d records; want 35, 65", first, n)
	}
	if code, start := consumerFetchCode(t, b.Addr, topic, 0, 20); code != kerr.OffsetOutOfRange.Code || start != 35 {
		t.Fatalf("fetch below the start: code %d, log start %d; want OFFSET_OUT_OF_RANGE, 35", code, start)
	}
	// Backwards is a no-op that still succeeds, with the current start.
	if r := deleteRecords(t, adm, topic, 0, 10); r.Err != nil || r.LowWatermark != 35 {
		t.Fatalf("DeleteRecords at 10 after 35: %d, %v", r.LowWatermark, r.Err)
	}

	// Error paths.
	if r := deleteRecords(t, adm, topic, 0, 101); !errors.Is(r.Err, kerr.OffsetOutOfRange) {
		t.Fatalf("DeleteRecords past the high watermark: %v, want OFFSET_OUT_OF_RANGE", r.Err)
	}
	raw := kmsg.NewPtrDeleteRecordsRequest()
	raw.TimeoutMillis = 5000
	for _, tp := range []struct {
		topic string
		p     int32
	}{{topic, 7}, {"no-such-topic", 0}} {
		rt := kmsg.NewDeleteRecordsRequestTopic()
		rt.Topic = tp.topic
		rp := kmsg.NewDeleteRecordsRequestTopicPartition()
		rp.Partition, rp.Offset = tp.p, 1
		rt.Partitions = append(rt.Partitions, rp)
		raw.Topics = append(raw.Topics, rt)
	}
	kresp, err := cl.SeedBrokers()[0].Request(testCtx(t, 10*time.Second), raw)
	if err != nil {
		t.Fatal(err)
	}
	for _, rt := range kresp.(*kmsg.DeleteRecordsResponse).Topics {
		for _, rp := range rt.Partitions {
			if rp.ErrorCode != kerr.UnknownTopicOrPartition.Code || rp.LowWatermark != -1 {
				t.Errorf("DeleteRecords %s[%d]: code %d, low watermark %d; want UNKNOWN_TOPIC_OR_PARTITION, -1", rt.Topic, rp.Partition, rp.ErrorCode, rp.LowWatermark)
			}
		}
	}
	// A compacted topic refuses, as Kafka does.
	compact := "compact"
	createTopic(t, adm, "delrec-compacted", 1, map[string]*string{"cleanup.policy": &compact})
	produceBatches(t, cl, "delrec-compacted", 0, 1, 3)
	if r := deleteRecords(t, adm, "delrec-compacted", 0, 1); !errors.Is(r.Err, kerr.PolicyViolation) {
		t.Fatalf("DeleteRecords on a compacted topic: %v, want POLICY_VIOLATION", r.Err)
	}

	// -1 is the high watermark.
	produceBatches(t, cl, topic, 1, 3, 5)
	if r := deleteRecords(t, adm, topic, 1, -1); r.Err != nil || r.LowWatermark != 15 {
		t.Fatalf("DeleteRecords at -1 on p1: %d, %v; want 15", r.LowWatermark, r.Err)
	}

	// sarama.
	sadm := saramaAdmin(t, b.Addr)
	if err := sadm.DeleteRecords(topic, map[int32]int64{0: 50}); err != nil {
		t.Fatalf("sarama DeleteRecords at 50: %v", err)
	}
	if got := startOffsetOf(t, adm, topic, 0); got != 50 {
		t.Fatalf("start after sarama's DeleteRecords: %d, want 50", got)
	}
	if err := sadm.DeleteRecords(topic, map[int32]int64{0: 500}); !errors.Is(err, sarama.ErrOffsetOutOfRange) {
		t.Fatalf("sarama DeleteRecords past the high watermark: %v, want an offset-out-of-range error", err)
	}
	sdirs, err := sadm.DescribeLogDirs([]int32{1})
	if err != nil {
		t.Fatalf("sarama DescribeLogDirs: %v", err)
	}
	var saramaSize int64 = -1
	for _, d := range sdirs[1] {
		if d.ErrorCode != sarama.ErrNoError {
			continue
		}
		if d.TotalBytes <= 0 || d.UsableBytes <= 0 || d.UsableBytes > d.TotalBytes {
			t.Errorf("sarama DescribeLogDirs %s: total %d usable %d", d.Path, d.TotalBytes, d.UsableBytes)
		}
		for _, st := range d.Topics {
			for _, sp := range st.Partitions {
				if st.Topic == topic && sp.PartitionID == 0 {
					saramaSize = sp.Size
				}
			}
		}
	}
	if saramaSize <= 0 {
		t.Fatalf("sarama DescribeLogDirs: %s[0] size %d: %+v", topic, saramaSize, sdirs)
	}

	// Sizes grow with new records.
	produceBatches(t, cl, topic, 0, 5, 10)
	if _, after := logDirSize(t, adm, 1, topic, 0); after.Size <= saramaSize {
		t.Fatalf("log dir size %d after producing, was %d", after.Size, saramaSize)
	}

	// AlterReplicaLogDirs: staying is NONE; an unknown directory
	// LOG_DIR_NOT_FOUND.
	for _, tc := range []struct {
		dir  string
		want error
	}{{dir.Dir, nil}, {"/no/such/fjord/dir", kerr.LogDirNotFound}} {
		req := kadm.AlterReplicaLogDirsReq{}
		req.Add(tc.dir, kadm.TopicsSet{topic: {0: {}}})
		resp, err := adm.AlterBrokerReplicaLogDirs(testCtx(t, 10*time.Second), 1, req)
		if err != nil {
			t.Fatalf("AlterBrokerReplicaLogDirs(%s): %v", tc.dir, err)
		}
		r := resp[topic][0]
		if !errors.Is(r.Err, tc.want) && !(tc.want == nil && r.Err == nil) {
			t.Errorf("AlterBrokerReplicaLogDirs(%s): %v, want %v", tc.dir, r.Err, tc.want)
		}
	}

	// A restart keeps the start (clean), and a crash too.
	b.Stop()
	b.Restart()
	if got := startOffsetOf(t, adm, topic, 0); got != 50 {
		t.Fatalf("start after a restart: %d, want 50", got)
	}
	if r := deleteRecords(t, adm, topic, 0, 73); r.Err != nil || r.LowWatermark != 73 {
		t.Fatalf("DeleteRecords at 73: %d, %v", r.LowWatermark, r.Err)
	}
	b.Kill()
	b.Restart()
	if got := startOffsetOf(t, adm, topic, 0); got != 73 {
		t.Fatalf("start after a crash: %d, want 73", got)
	}
	if code, _ := consumerFetchCode(t, b.Addr, topic, 0, 72); code != kerr.OffsetOutOfRange.Code {
		t.Fatalf("fetch at 72 after the crash: code %d, want OFFSET_OUT_OF_RANGE", code)
	}
}

func TestDeleteRecordsCluster(t *testing.T) {
	c := startCluster(t, 3)
	all := c.IDs()
	ctrl, _ := c.awaitController(t, 10*time.Second, all)
	const topic = "delrec-rf3"
	c.createOn(t, ctrl, topic, 1, 3)
	td, _ := c.awaitTopic(t, 15*time.Second, topic, all, func(td kadm.TopicDetail) string {
		p := td.Partitions[0]
		if len(p.ISR) != 3 || p.Leader < 0 {
			return fmt.Sprintf("isr %v leader %d", p.ISR, p.Leader)
		}
		return ""
	})
	leader := int(td.Partitions[0].Leader)
	cl := manualClient(t, c.Addr(leader), kgo.RequiredAcks(kgo.AllISRAcks()))
	produceBatches(t, cl, topic, 0, 10, 10)

	// The answer waits for every live replica to move its start: each
	// replica reports 35 at once afterwards.
	adm := c.Admin(leader)
	start := time.Now()
	if r := deleteRecords(t, adm, topic, 0, 35); r.Err != nil || r.LowWatermark != 35 {
		t.Fatalf("DeleteRecords at 35: low watermark %d, %v", r.LowWatermark, r.Err)
	}
	t.Logf("DeleteRecords on RF=3 answered in %v", time.Since(start).Round(time.Millisecond))
	for _, id := range all {
		if got, err := replicaLogStart(c.Addr(id), topic, 0); err != nil || got != 35 {
			t.Errorf("node %d's replica starts at %d (%v) once DeleteRecords answered, want 35", id, got, err)
		}
	}
	// Every broker describes its replica, followers with a lag of 0 once
	// caught up.
	dirs, err := adm.DescribeAllLogDirs(testCtx(t, 10*time.Second), nil)
	if err != nil {
		t.Fatalf("DescribeAllLogDirs: %v", err)
	}
	for _, id := range all {
		found := false
		for _, d := range dirs[int32(id)] {
			if p, ok := d.Topics.Lookup(topic, 0); ok && d.Err == nil {
				found = true
				if p.Size <= 0 || p.OffsetLag < 0 {
					t.Errorf("node %d: %s[0] size %d lag %d", id, topic, p.Size, p.OffsetLag)
				}
			}
		}
		if !found {
			t.Errorf("DescribeAllLogDirs: node %d does not list %s[0]: %+v", id, topic, dirs[int32(id)])
		}
	}

	// Kill the leader: the new one, elected from the ISR, still starts at 35.
	c.Kill(leader)
	survivors := others(all, leader)
	td, _ = c.awaitTopic(t, 15*time.Second, topic, survivors, func(td kadm.TopicDetail) string {
		if p := td.Partitions[0]; p.Leader < 0 || int(p.Leader) == leader {
			return fmt.Sprintf("leader %d", p.Leader)
		}
		return ""
	})
	next := int(td.Partitions[0].Leader)
	nadm := c.Admin(next)
	if got := startOffsetOf(t, nadm, topic, 0); got != 35 {
		t.Fatalf("new leader %d starts at %d, want 35", next, got)
	}
	if first, _ := firstOffsetFromStart(t, c.Addr(next), topic, 0, 100); first != 35 {
		t.Fatalf("consuming from the new leader's start: first offset %d, want 35", first)
	}

	// sarama on the new leader; the dead node does not hold the answer.
	sadm := saramaAdmin(t, c.Addr(next))
	if err := sadm.DeleteRecords(topic, map[int32]int64{0: 60}); err != nil {
		t.Fatalf("sarama DeleteRecords at 60 with a replica down: %v", err)
	}
	for _, id := range survivors {
		if got, err := replicaLogStart(c.Addr(id), topic, 0); err != nil || got != 60 {
			t.Errorf("node %d starts at %d (%v), want 60", id, got, err)
		}
	}
	// The old leader comes back at the start it had (35, from its file)
	// and follows the new leader's to 60.
	c.Restart(leader)
	c.Await(t, 20*time.Second, fmt.Sprintf("node %d follows the log start to 60", leader), func() (bool, string) {
		got, err := replicaLogStart(c.Addr(leader), topic, 0)
		return got == 60, fmt.Sprintf("start %d (%v)", got, err)
	})
	if r := deleteRecords(t, nadm, topic, 0, 101); !errors.Is(r.Err, kerr.OffsetOutOfRange) {
		t.Fatalf("DeleteRecords past the high watermark: %v", r.Err)
	}
	// A follower refuses: only the leader moves the start.
	raw := kmsg.NewPtrDeleteRecordsRequest()
	raw.TimeoutMillis = 5000
	rt := kmsg.NewDeleteRecordsRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewDeleteRecordsRequestTopicPartition()
	rp.Partition, rp.Offset = 0, 70
	rt.Partitions = append(rt.Partitions, rp)
	raw.Topics = append(raw.Topics, rt)
	kresp, err := c.Client(leader).SeedBrokers()[0].Request(testCtx(t, 10*time.Second), raw)
	if err != nil {
		t.Fatalf("DeleteRecords to follower %d: %v", leader, err)
	}
	if got := kresp.(*kmsg.DeleteRecordsResponse).Topics[0].Partitions[0].ErrorCode; got != kerr.NotLeaderForPartition.Code {
		t.Fatalf("DeleteRecords on follower %d: code %d, want NOT_LEADER_OR_FOLLOWER", leader, got)
	}
}

// TestAdminRecordsVersionSweep sends every advertised version of
// DeleteRecords, DescribeLogDirs and AlterReplicaLogDirs over raw TCP and
// checks each answer decodes exactly at its version and says the right
// thing.
func TestAdminRecordsVersionSweep(t *testing.T) {
	b := startBroker(t, t.TempDir())
	adm := newAdmin(t, b.Addr)
	const topic = "sweep-records"
	createTopic(t, adm, topic, 1, nil)
	produceBatches(t, manualClient(t, b.Addr), topic, 0, 10, 1)
	c := dialRaw(t, b.Addr)
	avReq := kmsg.NewPtrApiVersionsRequest()
	av := c.roundTripStrict(t, avReq).(*kmsg.ApiVersionsResponse)
	ranges := map[int16][2]int16{}
	for _, k := range av.ApiKeys {
		ranges[k.ApiKey] = [2]int16{k.MinVersion, k.MaxVersion}
	}
	for key, want := range map[int16][2]int16{21: {0, 2}, 34: {0, 2}, 35: {0, 5}} {
		if got, ok := ranges[key]; !ok || got != want {
			t.Fatalf("ApiVersions: key %d advertised %v (%v), want %v", key, got, ok, want)
		}
	}

	for v := int16(0); v <= 2; v++ {
		req := kmsg.NewPtrDeleteRecordsRequest()
		req.Version, req.TimeoutMillis = v, 5000
		rt := kmsg.NewDeleteRecordsRequestTopic()
		rt.Topic = topic
		rp := kmsg.NewDeleteRecordsRequestTopicPartition()
		rp.Partition, rp.Offset = 0, int64(v)+1
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp := c.roundTripStrict(t, req).(*kmsg.DeleteRecordsResponse)
		if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
			t.Fatalf("DeleteRecords v%d: %+v", v, resp)
		}
		if p := resp.Topics[0].Partitions[0]; p.ErrorCode != 0 || p.LowWatermark != int64(v)+1 {
			t.Errorf("DeleteRecords v%d: code %d low watermark %d, want 0, %d", v, p.ErrorCode, p.LowWatermark, v+1)
		}
	}

	var dir string
	for v := int16(0); v <= 5; v++ {
		for _, all := range []bool{true, false} {
			req := kmsg.NewPtrDescribeLogDirsRequest()
			req.Version = v
			if !all {
				rt := kmsg.NewDescribeLogDirsRequestTopic()
				rt.Topic, rt.Partitions = topic, []int32{0, 5}
				req.Topics = append(req.Topics, rt)
			}
			resp := c.roundTripStrict(t, req).(*kmsg.DescribeLogDirsResponse)
			if resp.ErrorCode != 0 || len(resp.Dirs) != 1 || resp.Dirs[0].ErrorCode != 0 {
				t.Fatalf("DescribeLogDirs v%d: %+v", v, resp)
			}
			d := resp.Dirs[0]
			dir = d.Dir
			if v >= 4 && (d.TotalBytes <= 0 || d.UsableBytes < 0 || d.UsableBytes > d.TotalBytes) {
				t.Errorf("DescribeLogDirs v%d: total %d usable %d", v, d.TotalBytes, d.UsableBytes)
			}
			if d.IsCordoned {
				t.Errorf("DescribeLogDirs v%d: the log directory is reported cordoned", v)
			}
			found := 0
			for _, dt := range d.Topics {
				if !all && dt.Topic != topic {
					t.Errorf("DescribeLogDirs v%d for %s only: lists %s", v, topic, dt.Topic)
				}
				for _, dp := range dt.Partitions {
					if dt.Topic == topic {
						found++
						if dp.Partition != 0 || dp.Size <= 0 || dp.OffsetLag != 0 || dp.IsFuture {
							t.Errorf("DescribeLogDirs v%d: %s %+v", v, topic, dp)
						}
					}
				}
			}
			if found != 1 {
				t.Errorf("DescribeLogDirs v%d (all %v): %s listed %d times, want once (partition 5 does not exist)", v, all, topic, found)
			}
		}
	}

	for v := int16(0); v <= 2; v++ {
		req := kmsg.NewPtrAlterReplicaLogDirsRequest()
		req.Version = v
		for i, d := range []string{dir, "relative/dir"} {
			rd := kmsg.NewAlterReplicaLogDirsRequestDir()
			rd.Dir = d
			rt := kmsg.NewAlterReplicaLogDirsRequestDirTopic()
			rt.Topic, rt.Partitions = topic, []int32{int32(i)}
			rd.Topics = append(rd.Topics, rt)
			req.Dirs = append(req.Dirs, rd)
		}
		resp := c.roundTripStrict(t, req).(*kmsg.AlterReplicaLogDirsResponse)
		if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 2 {
			t.Fatalf("AlterReplicaLogDirs v%d: %+v", v, resp)
		}
		if got := []int16{resp.Topics[0].Partitions[0].ErrorCode, resp.Topics[0].Partitions[1].ErrorCode}; got[0] != 0 || got[1] != kerr.LogDirNotFound.Code {
			t.Errorf("AlterReplicaLogDirs v%d: codes %v, want [0 %d]", v, got, kerr.LogDirNotFound.Code)
		}
	}
}

// TestLogDirsSecondDirectory: Fjord stores everything in the first of
// log.dirs; the others are described as offline and refuse moves, with
// kadm and sarama.
func TestLogDirsSecondDirectory(t *testing.T) {
	data, other := t.TempDir(), t.TempDir()
	b := startBroker(t, data, "log.dirs="+data+","+other)
	adm := newAdmin(t, b.Addr)
	const topic = "two-dirs"
	createTopic(t, adm, topic, 1, nil)
	produceBatches(t, manualClient(t, b.Addr), topic, 0, 2, 5)

	dirs, err := adm.DescribeBrokerLogDirs(testCtx(t, 10*time.Second), 1, nil)
	if err != nil {
		t.Fatalf("DescribeBrokerLogDirs: %v", err)
	}
	if len(dirs) != 2 {
		t.Fatalf("DescribeBrokerLogDirs: %d dirs, want 2: %+v", len(dirs), dirs)
	}
	if d := dirs[data]; d.Err != nil || d.Size() <= 0 {
		t.Errorf("first dir %s: %v, size %d", data, d.Err, d.Size())
	}
	if d := dirs[other]; !errors.Is(d.Err, kerr.KafkaStorageError) || len(d.Topics) != 0 {
		t.Errorf("second dir %s: %v, %d topics; want KAFKA_STORAGE_ERROR and none", other, d.Err, len(d.Topics))
	}
	req := kadm.AlterReplicaLogDirsReq{}
	req.Add(other, kadm.TopicsSet{topic: {0: {}}})
	req.Add(data, kadm.TopicsSet{"no-such-topic": {0: {}}})
	resp, err := adm.AlterBrokerReplicaLogDirs(testCtx(t, 10*time.Second), 1, req)
	if err != nil {
		t.Fatalf("AlterBrokerReplicaLogDirs: %v", err)
	}
	if r := resp[topic][0]; !errors.Is(r.Err, kerr.KafkaStorageError) {
		t.Errorf("move to the unused dir: %v, want KAFKA_STORAGE_ERROR", r.Err)
	}
	if r := resp["no-such-topic"][0]; !errors.Is(r.Err, kerr.UnknownTopicOrPartition) {
		t.Errorf("unknown topic: %v, want UNKNOWN_TOPIC_OR_PARTITION", r.Err)
	}

	sdirs, err := saramaAdmin(t, b.Addr).DescribeLogDirs([]int32{1})
	if err != nil {
		t.Fatalf("sarama DescribeLogDirs: %v", err)
	}
	codes := map[string]sarama.KError{}
	for _, d := range sdirs[1] {
		codes[d.Path] = d.ErrorCode
	}
	if codes[data] != sarama.ErrNoError || codes[other] != sarama.ErrKafkaStorageError {
		t.Errorf("sarama DescribeLogDirs codes %v", codes)
	}
}

// TestDeleteRecordsLaggingFollower: a follower that was down while the
// records below a start inside a batch were deleted comes back behind the
// leader's start, restarts its log there (taking the batch that holds the
// start whole, as Kafka's follower does), keeps the start, and rejoins the
// ISR.
func TestDeleteRecordsLaggingFollower(t *testing.T) {
	c := startCluster(t, 3)
	all := c.IDs()
	ctrl, _ := c.awaitController(t, 10*time.Second, all)
	const topic = "delrec-lag"
	c.createOn(t, ctrl, topic, 1, 3)
	td, _ := c.awaitTopic(t, 15*time.Second, topic, all, func(td kadm.TopicDetail) string {
		if p := td.Partitions[0]; len(p.ISR) != 3 || p.Leader < 0 {
			return fmt.Sprintf("isr %v leader %d", p.ISR, p.Leader)
		}
		return ""
	})
	leader := int(td.Partitions[0].Leader)
	lagger := others(all, leader)[0]
	c.Kill(lagger)
	c.awaitTopic(t, 15*time.Second, topic, others(all, lagger), func(td kadm.TopicDetail) string {
		if p := td.Partitions[0]; len(p.ISR) != 2 {
			return fmt.Sprintf("isr %v", p.ISR)
		}
		return ""
	})
	produceBatches(t, manualClient(t, c.Addr(leader), kgo.RequiredAcks(kgo.AllISRAcks())), topic, 0, 10, 10)
	if r := deleteRecords(t, c.Admin(leader), topic, 0, 35); r.Err != nil || r.LowWatermark != 35 {
		t.Fatalf("DeleteRecords at 35 with node %d down: %d, %v", lagger, r.LowWatermark, r.Err)
	}

	c.Restart(lagger)
	c.awaitTopic(t, 20*time.Second, topic, all, func(td kadm.TopicDetail) string {
		if p := td.Partitions[0]; len(p.ISR) != 3 {
			return fmt.Sprintf("isr %v", p.ISR)
		}
		return ""
	})
	if got, err := replicaLogStart(c.Addr(lagger), topic, 0); err != nil || got != 35 {
		t.Fatalf("node %d rejoined starting at %d (%v), want 35", lagger, got, err)
	}
	if !c.Node(lagger).logContains("restarting the log at the batch") {
		t.Errorf("node %d did not restart its log at the batch holding the start", lagger)
	}
	// Its own copy, read as the debugging consumer, holds [35, 100) whole
	// and in order, from the batch at 30 that holds 35.
	conn, err := net.DialTimeout("tcp", c.Addr(lagger), 3*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	raw := &rawConn{Conn: conn}
	offset, firstBase := int64(35), int64(-1)
	for offset < 100 {
		sp, err := diskFetch(raw, topic, 0, offset)
		if err != nil || sp.ErrorCode != 0 {
			t.Fatalf("node %d's copy at %d: %v, code %d", lagger, offset, err, sp.ErrorCode)
		}
		if sp.LogStartOffset != 35 || len(sp.RecordBatches) == 0 {
			t.Fatalf("node %d's copy at %d: start %d, %d bytes, hw %d", lagger, offset, sp.LogStartOffset, len(sp.RecordBatches), sp.HighWatermark)
		}
		for b := sp.RecordBatches; len(b) >= 61; {
			n := int(int32(binary.BigEndian.Uint32(b[8:12]))) + 12
			if n > len(b) {
				break
			}
			base := int64(binary.BigEndian.Uint64(b))
			last := base + int64(int32(binary.BigEndian.Uint32(b[23:27])))
			if firstBase < 0 {
				firstBase = base
			} else if base != offset {
				t.Fatalf("node %d's copy: batch at %d after offset %d", lagger, base, offset)
			}
			offset = last + 1
			b = b[n:]
		}
	}
	if firstBase != 30 {
		t.Fatalf("node %d's copy starts with the batch at %d, want 30 (the one holding 35)", lagger, firstBase)
	}
}
