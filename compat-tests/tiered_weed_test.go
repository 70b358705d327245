package compattests

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fjordlog/fjord/storage/remote/s3/weedtest"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestTieredStorageSeaweedFS is tiered storage as a user runs it: three
// fjord processes with remote.log.storage.system.enable and Aiven's S3
// keys pointing at a real SeaweedFS (weed mini, built by `make weed`), a
// topic at RF 3 with remote.storage.enable=true, small segments and a
// small local.retention.bytes. Once the segments are copied, every node
// keeps only about local.retention.bytes of each partition on disk (the
// .log files in its data directory), ListOffsets' earliest-local offset
// (-4) has moved past 0 while earliest (-2) stays 0, and franz-go,
// kafka-python and kcat (read_committed and read_uncommitted) read every
// record from offset 0, byte for byte, most of them from the store.
//
// Skipped without FJORD_WEED_BIN (failed with FJORD_REQUIRE_WEED=1), as
// the weedtest package does.
func TestTieredStorageSeaweedFS(t *testing.T) {
	weed := weedtest.Start(t)
	const bucket = "fjord-tiered"
	weed.CreateBucket(t, bucket)

	const (
		segmentBytes   = 16 << 10
		localRetention = 32 << 10
		partitions     = 3
		records        = 3000
	)
	c := startCluster(t, 3,
		"remote.log.storage.system.enable=true",
		"remote.log.storage.manager.class.name=io.aiven.kafka.tieredstorage.RemoteStorageManager",
		"rsm.config.storage.backend.class=io.aiven.kafka.tieredstorage.storage.s3.S3Storage",
		"rsm.config.storage.s3.endpoint.url="+weed.Endpoint,
		"rsm.config.storage.s3.bucket.name="+bucket,
		"rsm.config.storage.s3.region="+weed.Region,
		"rsm.config.storage.s3.path.style.access.enabled=true",
		"rsm.config.storage.aws.access.key.id="+weed.AccessKey,
		"rsm.config.storage.aws.secret.access.key="+weed.SecretKey,
		"rsm.config.key.prefix=compat/",
		"remote.log.manager.task.interval.ms=200",
		"log.retention.check.interval.ms=200",
	)
	const topic = "tiered-weed"
	adm := c.Admin(c.IDs()[0])
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	resp, err := adm.CreateTopic(ctx, partitions, 3, map[string]*string{
		"remote.storage.enable": kadm.StringPtr("true"),
		"segment.bytes":         kadm.StringPtr(strconv.Itoa(segmentBytes)),
		"local.retention.bytes": kadm.StringPtr(strconv.Itoa(localRetention)),
		"retention.bytes":       kadm.StringPtr("-1"),
	}, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		t.Fatalf("create %s: %v", topic, err)
	}

	// Values are distinct, a few hundred bytes and incompressible, and
	// batches are small and uncompressed, so each partition rolls about a
	// dozen segments (compressed repetitive values fit in one or two).
	rng := rand.New(rand.NewPCG(1, 2))
	want := make([]string, records)
	for i := range want {
		b := make([]byte, 100)
		for k := range b {
			b[k] = byte(rng.IntN(256))
		}
		want[i] = fmt.Sprintf("tiered-%05d-%x", i, b)
	}
	prod, err := kgo.NewClient(append(c.ClientOpts(), kgo.SeedBrokers(c.Addrs()...), kgo.DefaultProduceTopic(topic),
		kgo.RequiredAcks(kgo.AllISRAcks()), kgo.ProducerBatchMaxBytes(2048), kgo.ProducerBatchCompression(kgo.NoCompression()))...)
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	for _, v := range want {
		prod.Produce(ctx, &kgo.Record{Value: []byte(v)}, func(_ *kgo.Record, err error) {
			if err != nil {
				t.Errorf("produce: %v", err)
			}
		})
	}
	if err := prod.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if t.Failed() {
		t.FailNow()
	}

	// Copied and trimmed: each partition's earliest-local offset moves
	// past 0 while its earliest stays 0, and the nodes' disks hold about
	// local.retention.bytes per partition (plus the active segment and
	// the segment that crosses the bound).
	var localStart map[int32]int64
	took := c.Await(t, 2*time.Minute, "every partition's local log trimmed after its segments were copied", func() (bool, string) {
		early, err := listOffsets(ctx, prod, topic, partitions, -4)
		if err != nil {
			return false, err.Error()
		}
		earliest, err := listOffsets(ctx, prod, topic, partitions, -2)
		if err != nil {
			return false, err.Error()
		}
		localStart = early
		for p := range int32(partitions) {
			if early[p] == 0 || earliest[p] != 0 {
				latestTiered, err := listOffsets(ctx, prod, topic, partitions, -5)
				return false, fmt.Sprintf("earliest-local %v, earliest %v, latest tiered %v (%v)", early, earliest, latestTiered, err)
			}
		}
		for _, id := range c.IDs() {
			for p := range int32(partitions) {
				n := localLogBytes(t, c.Node(id).DataDir, topic, p)
				if n > localRetention+2*segmentBytes {
					return false, fmt.Sprintf("node %d holds %d bytes of partition %d on disk", id, n, p)
				}
			}
		}
		return true, ""
	})
	tiered := int64(0)
	for _, off := range localStart {
		tiered += off
	}
	t.Logf("trimmed %v after the last ack: earliest-local offsets %v (%d of %d records only in the store)", took.Round(10*time.Millisecond), localStart, tiered, records)

	check := func(who string, got []string) {
		t.Helper()
		slices.Sort(got)
		if !slices.Equal(got, want) {
			missing, extra := diffSorted(want, got)
			t.Errorf("%s read %d records from offset 0, want %d: %d missing (e.g. %.40q), %d unexpected (e.g. %.40q)", who, len(got), len(want), len(missing), first(missing), len(extra), first(extra))
		}
	}

	// franz-go from the start.
	cons, err := kgo.NewClient(append(c.ClientOpts(), kgo.SeedBrokers(c.Addrs()...), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))...)
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	var got []string
	for len(got) < records && ctx.Err() == nil {
		fs := cons.PollFetches(ctx)
		fs.EachError(func(topic string, p int32, err error) { t.Logf("franz-go fetch %s[%d]: %v", topic, p, err) })
		fs.EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
	}
	check("franz-go", got)

	// kafka-python from the start.
	if py, ok := kafkaPython(t); ok {
		script := `
import json, sys
from kafka import KafkaConsumer
c = KafkaConsumer(sys.argv[2], bootstrap_servers=sys.argv[1].split(","), auto_offset_reset="earliest",
                  enable_auto_commit=False, consumer_timeout_ms=20000)
out = []
for m in c:
    out.append(m.value.decode())
    if len(out) >= int(sys.argv[3]):
        break
print(json.dumps(out))
`
		pctx, pcancel := context.WithTimeout(ctx, 90*time.Second)
		out, err := exec.CommandContext(pctx, py, "-c", script, strings.Join(c.Addrs(), ","), topic, strconv.Itoa(records)).Output()
		pcancel()
		if err != nil {
			stderr := ""
			if ee, ok := err.(*exec.ExitError); ok {
				stderr = string(ee.Stderr)
			}
			t.Errorf("kafka-python: %v\n%s", err, tail(stderr))
		} else {
			var vals []string
			if err := json.Unmarshal(out, &vals); err != nil {
				t.Errorf("kafka-python output: %v", err)
			}
			check("kafka-python", vals)
		}
	}

	// kcat, at librdkafka's default read_committed and at read_uncommitted.
	kcat := kcatPath(t)
	for _, iso := range []string{"read_committed", "read_uncommitted"} {
		out := runKcat(t, kcat, "", "-C", "-b", strings.Join(c.Addrs(), ","), "-t", topic, "-o", "beginning", "-e", "-q",
			"-X", "isolation.level="+iso, "-f", "%s\n")
		check("kcat "+iso, strings.Split(strings.TrimSuffix(out, "\n"), "\n"))
	}
}

// listOffsets asks each partition's leader for the offset at timestamp ts
// (-2 earliest, -4 earliest local, -5 latest tiered).
func listOffsets(ctx context.Context, cl *kgo.Client, topic string, partitions int32, ts int64) (map[int32]int64, error) {
	req := kmsg.NewPtrListOffsetsRequest()
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = topic
	for p := range partitions {
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Partition, rp.Timestamp, rp.CurrentLeaderEpoch = p, ts, -1
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	shards := cl.RequestSharded(ctx, req)
	out := map[int32]int64{}
	for _, sh := range shards {
		if sh.Err != nil {
			return nil, sh.Err
		}
		for _, t := range sh.Resp.(*kmsg.ListOffsetsResponse).Topics {
			for _, p := range t.Partitions {
				if p.ErrorCode != 0 {
					return nil, fmt.Errorf("ListOffsets(%d) %s[%d]: error code %d", ts, t.Topic, p.Partition, p.ErrorCode)
				}
				out[p.Partition] = p.Offset
			}
		}
	}
	return out, nil
}

// localLogBytes sums the .log files of topic's partition p in a node's
// data directory.
func localLogBytes(t *testing.T, dataDir, topic string, p int32) int64 {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(dataDir, fmt.Sprintf("%s-%d", topic, p), "*.log"))
	var n int64
	for _, f := range files {
		if st, err := os.Stat(f); err == nil {
			n += st.Size()
		}
	}
	return n
}

// kafkaPython returns python3 when kafka-python is installed; without
// it the caller skips that client (fails with FJORD_REQUIRE_KAFKA_PYTHON).
func kafkaPython(t *testing.T) (string, bool) {
	t.Helper()
	py := "/usr/bin/python3"
	if err := exec.Command(py, "-c", "import kafka").Run(); err != nil {
		if os.Getenv("FJORD_REQUIRE_KAFKA_PYTHON") != "" {
			t.Fatalf("python3-kafka missing and FJORD_REQUIRE_KAFKA_PYTHON is set: %v", err)
		}
		t.Logf("python3-kafka not installed (%v): kafka-python not checked", err)
		return "", false
	}
	return py, true
}

// diffSorted returns what is in want and not in got, and the reverse
// (both sorted).
func diffSorted(want, got []string) (missing, extra []string) {
	i, j := 0, 0
	for i < len(want) || j < len(got) {
		switch {
		case j == len(got) || (i < len(want) && want[i] < got[j]):
			missing = append(missing, want[i])
			i++
		case i == len(want) || got[j] < want[i]:
			extra = append(extra, got[j])
			j++
		default:
			i++
			j++
		}
	}
	return missing, extra
}
