package brokertest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordlog/fjord/broker"
	"github.com/fjordlog/fjord/broker/config"
	"github.com/fjordlog/fjord/storage/recordbatch"
)

// storedRecord is one record of a replica's log.
type storedRecord struct {
	offset     int64
	key, value string
}

// debugRead reads node id's own replica of topic-0, leader or follower,
// from its log start to its high watermark, as the debugging consumer
// (Fetch with ReplicaID -2) does, and returns every record and the high
// watermark the node reported.
func debugRead(t *testing.T, c *Cluster, id int32, topic string) ([]storedRecord, int64) {
	t.Helper()
	rs, err := c.Broker(id).Replica(topic, 0)
	if err != nil {
		t.Fatalf("node %d: %v", id, err)
	}
	tid := topicID(t, c, id, topic)
	var out []storedRecord
	off, hw := rs.LogStart, int64(-1)
	for hw < 0 || off < hw {
		req := kmsg.NewPtrFetchRequest()
		req.ReplicaID, req.ReplicaState.ID, req.ReplicaState.Epoch = -2, -2, -1
		req.MaxWaitMillis, req.MinBytes, req.MaxBytes = 0, 1, 4<<20
		req.SessionID, req.SessionEpoch = 0, -1
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic, rt.TopicID = topic, tid
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes = 0, off, 1<<20
		rp.CurrentLeaderEpoch, rp.LastFetchedEpoch, rp.LogStartOffset = -1, -1, -1
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp, err := request(t, c.Addr(id), req)
		if err != nil {
			t.Fatalf("debug fetch from node %d at %d: %v", id, off, err)
		}
		r := resp.(*kmsg.FetchResponse)
		if r.ErrorCode != 0 || len(r.Topics) != 1 || len(r.Topics[0].Partitions) != 1 {
			t.Fatalf("debug fetch from node %d at %d: error %d, %d topics", id, off, r.ErrorCode, len(r.Topics))
		}
		p := r.Topics[0].Partitions[0]
		if p.ErrorCode != 0 {
			t.Fatalf("debug fetch from node %d at %d: %v", id, off, kerr.ErrorForCode(p.ErrorCode))
		}
		hw = p.HighWatermark
		data := p.RecordBatches
		if len(data) == 0 && off < hw {
			t.Fatalf("debug fetch from node %d at %d: nothing below its high watermark %d", id, off, hw)
		}
		for len(data) > 0 {
			info, err := recordbatch.ParseHeader(data)
			if err != nil || info.Bytes > len(data) {
				t.Fatalf("node %d: bad batch at offset %d: %v", id, off, err)
			}
			base := recordbatch.BaseOffset(data)
			if base < off {
				t.Fatalf("node %d: batch at %d returned for a fetch from %d", id, base, off)
			}
			err = recordbatch.EachRecord(data[:info.Bytes], info, func(rec recordbatch.Record) bool {
				out = append(out, storedRecord{base + int64(rec.OffsetDelta), string(rec.Key), string(rec.Value)})
				return true
			})
			if err != nil {
				t.Fatalf("node %d: batch at %d: %v", id, base, err)
			}
			off = base + int64(info.LastDelta) + 1
			data = data[info.Bytes:]
		}
	}
	return out, hw
}

// latestPerKey is the last (highest offset) record of each key.
func latestPerKey(recs []storedRecord) map[string]storedRecord {
	out := map[string]storedRecord{}
	for _, r := range recs {
		if cur, ok := out[r.key]; !ok || r.offset > cur.offset {
			out[r.key] = r
		}
	}
	return out
}

// A follower of a compacted topic catches up from nothing. The leader has
// compacted its sealed segments, so what the follower fetches starts past
// its log end (offset 0) and has gaps between batches; it must append that
// as it is (Kafka's followers do), reach the leader's log end and rejoin
// the ISR, rather than refuse the first batch forever.
func TestReplicationCompactedTopicFollowerFromEmpty(t *testing.T) {
	const topic = "compacted"
	const keys, n, more = 4, 300, 20
	logs := &logBuf{}
	t.Cleanup(func() {
		if t.Failed() || os.Getenv("FJORD_SCENARIO_LOGS") != "" {
			for _, line := range logs.lines(topic) {
				t.Log(line)
			}
		}
	})
	dir := t.TempDir()
	var c *Cluster
	var err error
	for try := 0; ; try++ {
		c, err = Start(Options{Nodes: 3, Dir: dir, Logger: zerolog.New(logs).Level(zerolog.InfoLevel),
			Configure: func(_ int32, cfg *config.Config) {
				cfg.ReplicaLagTimeMaxMs = 2000
				cfg.CleanerBackoffMs = 100 // compact soon after every roll
				cfg.AutoLeaderRebalance = false
			}})
		if err == nil || try == 2 || !strings.Contains(err.Error(), "address already in use") {
			break
		}
		t.Logf("starting the cluster: %v; again", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	step := stepper(t)

	// Tiny segments (segment.bytes has a floor of 1024), so nearly every
	// batch ends up in a sealed segment the cleaner may rewrite.
	if code := createTopicWithConfigs(t, c.Addr(1), topic, 1, 3, map[string]string{
		"cleanup.policy": "compact",
		"segment.bytes":  "1024",
	}); code != 0 {
		t.Fatalf("create %s: %v", topic, kerr.ErrorForCode(code))
	}
	p := waitPartition(t, c, 1, topic, 10*time.Second, "the topic with a leader and the full ISR",
		func(p kmsg.MetadataResponseTopicPartition) bool { return p.Leader > 0 && len(p.ISR) == 3 })
	leader := p.Leader
	waitLeads(t, c, leader, topic, p.LeaderEpoch)
	follower := otherNodes(leader)[0]
	step("leader %d; stopping follower %d before any write", leader, follower)
	stopNode(t, c, follower)
	waitPartition(t, c, leader, topic, 15*time.Second, "the stopped follower out of the ISR",
		func(p kmsg.MetadataResponseTopicPartition) bool { return len(p.ISR) == 2 })

	// Many updates of few keys, one record per batch (values of 200 bytes,
	// batches of at most 512), so compaction removes whole batches and
	// leaves gaps between the survivors. history is what each acknowledged
	// offset holds.
	history := map[int64]storedRecord{}
	cl := producer(t, c, topic, kgo.ProducerBatchMaxBytes(512))
	produceKeys := func(from, count int) {
		t.Helper()
		var recs []*kgo.Record
		for i := from; i < from+count; i++ {
			v := fmt.Sprintf("v%04d-%s", i, strings.Repeat("x", 195))
			recs = append(recs, &kgo.Record{Key: []byte(fmt.Sprintf("key-%d", i%keys)), Value: []byte(v)})
		}
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		for _, r := range cl.ProduceSync(ctx, recs...) {
			if r.Err != nil {
				t.Fatalf("produce: %v", r.Err)
			}
			history[r.Record.Offset] = storedRecord{r.Record.Offset, string(r.Record.Key), string(r.Record.Value)}
		}
	}
	produceKeys(0, n)
	if len(history) != n {
		t.Fatalf("%d distinct offsets acknowledged for %d records", len(history), n)
	}
	step("%d records acknowledged", n)

	// The leader's cleaner has compacted its sealed segments.
	var leaderEnd int64
	eventually(t, 30*time.Second, "the leader's log compacted", func() bool {
		rs, err := c.Broker(leader).Replica(topic, 0)
		if err != nil {
			return false
		}
		leaderEnd = rs.LogEnd
		return rs.LogEnd == int64(n) && len(rs.Values) < n/4
	})
	step("leader compacted: end %d", leaderEnd)

	// The follower comes back with an empty replica directory (as a new
	// or replaced disk would): everything it has must come from the
	// compacted leader.
	pdir := filepath.Join(dir, fmt.Sprintf("node-%d", follower), topic+"-0")
	if _, err := os.Stat(pdir); err != nil {
		t.Fatalf("the follower's replica directory: %v", err)
	}
	if err := os.RemoveAll(pdir); err != nil {
		t.Fatal(err)
	}
	restartNode(t, c, follower)
	step("follower %d restarted with an empty replica", follower)
	waitPartition(t, c, leader, topic, 30*time.Second, "the follower back in the ISR",
		func(p kmsg.MetadataResponseTopicPartition) bool { return len(p.ISR) == 3 })
	var frs broker.ReplicaState
	eventually(t, 30*time.Second, "the follower at the leader's log end, committed", func() bool {
		frs, err = c.Broker(follower).Replica(topic, 0)
		return err == nil && frs.LogEnd == leaderEnd && frs.HighWater == leaderEnd
	})
	step("follower caught up: start %d end %d hw %d, %d records", frs.LogStart, frs.LogEnd, frs.HighWater, len(frs.Values))
	if frs.LogStart != 0 || int64(len(frs.Values)) >= frs.LogEnd {
		t.Fatalf("the follower's copy: start %d, %d records below end %d; want the leader's gaps", frs.LogStart, len(frs.Values), frs.LogEnd)
	}

	// It keeps up after, too.
	produceKeys(n, more)
	end := int64(n + more)
	eventually(t, 20*time.Second, "every replica at the new end, committed", func() bool {
		for id := int32(1); id <= 3; id++ {
			rs, err := c.Broker(id).Replica(topic, 0)
			if err != nil || rs.LogEnd != end || rs.HighWater != end {
				return false
			}
		}
		return true
	})

	// Compare the copies. Each replica compacts its own log, at its own
	// segment boundaries (the follower's segments hold already compacted
	// batches, so they span more offsets) and at its own times, so the
	// records a replica still holds may legitimately differ: one may yet
	// keep a record another has cleaned away. What must hold on every
	// replica: each record is the one acknowledged at that offset (nothing
	// moved, changed or invented), the latest record of each key is the
	// latest acknowledged, and the log ends (and is committed) at the same
	// offset.
	want := latestPerKey(func() []storedRecord {
		var all []storedRecord
		for _, r := range history {
			all = append(all, r)
		}
		return all
	}())
	for id := int32(1); id <= 3; id++ {
		recs, hw := debugRead(t, c, id, topic)
		if hw != end {
			t.Fatalf("node %d: high watermark %d, want %d", id, hw, end)
		}
		for _, r := range recs {
			if h, ok := history[r.offset]; !ok || h != r {
				t.Fatalf("node %d holds %+v at offset %d; %+v was acknowledged there", id, r, r.offset, h)
			}
		}
		got := latestPerKey(recs)
		if len(got) != keys {
			t.Fatalf("node %d: %d keys, want %d", id, len(got), keys)
		}
		for k, w := range want {
			if got[k] != w {
				t.Fatalf("node %d: latest of %s is %+v, want %+v", id, k, got[k], w)
			}
		}
		t.Logf("node %d: %d records below %d", id, len(recs), hw)
		if id == follower && int64(len(recs)) >= end-int64(more) {
			t.Fatalf("the follower's copy has %d records for %d offsets: not the compacted log", len(recs), end)
		}
	}
}
