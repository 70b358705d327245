package compattests

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestDescriptorBudget: partitions past what the node's descriptors can
// serve are refused at creation, with POLICY_VIOLATION and a message that
// names the limit, by CreateTopics, CreatePartitions and auto-creation
// alike, rather than accepted and left offline; what fits is created
// and serves; the node keeps accepting connections throughout.
// With RLIMIT_NOFILE 2048 the file cache gets 1024 descriptors (1024 are
// kept for connections) and the node hosts at most 960 replicas, 50 of
// which __consumer_offsets takes once a group needs it.
func TestDescriptorBudget(t *testing.T) {
	const nofile, limit, big = 2048, 960, 890
	b := startBrokerLimited(t, t.TempDir(), nofile, "num.partitions=1")
	adm := newAdmin(t, b.Addr)
	ctx := testCtx(t, 2*time.Minute)
	awaitOffsetsTopic(t, adm)

	refused := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, kerr.PolicyViolation) {
			t.Fatalf("%s: %v, want POLICY_VIOLATION", what, err)
		}
		if msg := err.Error(); !strings.Contains(msg, fmt.Sprint(limit)) || !strings.Contains(msg, "fjord.log.open.files.max") {
			t.Fatalf("%s: the message does not name the limit: %v", what, err)
		}
	}
	r, err := adm.CreateTopic(ctx, 2*limit, 1, nil, "huge")
	if err == nil {
		err = r.Err
	}
	refused("CreateTopics past the budget", withMessage(err, r.ErrMessage))

	// What fits is created, up to the limit, and serves.
	if r, err := adm.CreateTopic(ctx, big, 1, nil, "big"); err != nil || r.Err != nil {
		t.Fatalf("create big within the budget: %v %v", err, r.Err)
	}
	if r, err := adm.CreateTopic(ctx, 4, 1, nil, "small"); err != nil || r.Err != nil {
		t.Fatalf("create small within the budget: %v %v", err, r.Err)
	}
	// Growing past it is refused (50 + 890 + 4 + 36 > 960).
	cr, err := adm.CreatePartitions(ctx, 36, "small")
	if err == nil {
		err = cr["small"].Err
	}
	refused("CreatePartitions past the budget", withMessage(err, cr["small"].ErrMessage))

	// Auto-creation too: a default partition count past what is left.
	if _, err := adm.AlterBrokerConfigsState(ctx, []kadm.AlterConfig{{Name: "num.partitions", Value: kadm.StringPtr("50")}}); err != nil {
		t.Fatalf("set num.partitions: %v", err)
	}
	cl := newClient(t, b.Addr, kgo.AllowAutoTopicCreation(), kgo.RecordRetries(2), kgo.ProduceRequestTimeout(5*time.Second))
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	err = cl.ProduceSync(pctx, &kgo.Record{Topic: "auto", Value: []byte("x")}).FirstErr()
	cancel()
	if err == nil {
		t.Fatalf("produce auto-created a topic past the budget")
	}
	topics, err := adm.ListTopics(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if topics.Has("auto") || topics.Has("huge") {
		t.Fatalf("a topic past the budget exists: %v", topics.Names())
	}
	if !b.logContains("refused") || !b.logContains("file descriptor budget") {
		t.Fatalf("no log line about the budget or the refusals")
	}

	// The node still takes new connections and answers.
	for i := range 20 {
		if err := probe(b.Addr); err != nil {
			t.Fatalf("connection %d at the budget: %v", i, err)
		}
	}
	// Every created partition serves.
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "small", Value: []byte("y")}).FirstErr(); err != nil {
		t.Fatalf("produce to small: %v", err)
	}
	ends, err := adm.ListEndOffsets(ctx, "big")
	if err != nil || ends.Error() != nil {
		t.Fatalf("ListOffsets of big: %v %v", err, ends.Error())
	}
	if n := len(ends["big"]); n != big {
		t.Fatalf("big lists %d partitions, want %d", n, big)
	}

	// Deleting a topic gives its share back: the refused size now fits.
	if _, err := adm.DeleteTopics(ctx, "big"); err != nil {
		t.Fatalf("delete big: %v", err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		r, err := adm.CreateTopic(ctx, limit/2, 1, nil, "after")
		if err == nil && r.Err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("create after deleting big: %v %v", err, r.Err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	log := b.readLog()
	if strings.Contains(log, "too many open files") || strings.Contains(log, "panic:") {
		t.Fatalf("the node ran out of descriptors or panicked:\n%s", b.tailLog(30))
	}
}

// withMessage adds a topic's error message to its error, for the checks
// of what the message names.
func withMessage(err error, msg string) error {
	if err == nil || msg == "" {
		return err
	}
	return fmt.Errorf("%w: %s", err, msg)
}

// TestManySegmentsFewDescriptors: a node whose logs hold far more segment
// files than it has descriptors serves them all, through its file cache:
// 300 partitions of small segments, five or more each (1,500+ .log files,
// and as many of each index), with RLIMIT_NOFILE 1536 (512 for the
// cache); every record produced to every partition is consumed back, and
// again after a clean restart and after a kill -9.
func TestManySegmentsFewDescriptors(t *testing.T) {
	const nofile, parts, perPart = 1536, 300, 6
	b := startBrokerLimited(t, t.TempDir(), nofile, "num.partitions=1")
	adm := newAdmin(t, b.Addr)
	ctx := testCtx(t, 3*time.Minute)
	cfgs := map[string]*string{"segment.bytes": kadm.StringPtr("1024")}
	if r, err := adm.CreateTopic(ctx, parts, 1, cfgs, "segs"); err != nil || r.Err != nil {
		t.Fatalf("create: %v %v", err, r.Err)
	}
	cl := newClient(t, b.Addr, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(0),
		kgo.ProducerBatchCompression(kgo.NoCompression()))
	produce := func(round int) {
		t.Helper()
		// One record per partition per call: each is a batch of its own,
		// and at 700 bytes fills a segment of 1 KiB.
		for i := range perPart {
			var recs []*kgo.Record
			for p := range parts {
				v := fmt.Sprintf("%d-%d-%d-%s", round, p, i, strings.Repeat("v", 700))
				recs = append(recs, &kgo.Record{Topic: "segs", Partition: int32(p), Value: []byte(v)})
			}
			if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
				t.Fatalf("produce round %d: %v", round, err)
			}
		}
	}
	check := func(what string, rounds int) {
		t.Helper()
		want := parts * perPart * rounds
		got := consumeAll(t, b.Addr, "segs", want, 90*time.Second)
		seen := map[string]bool{}
		for _, r := range got {
			f := strings.SplitN(string(r.Value), "-", 4)
			if len(f) != 4 || f[1] != fmt.Sprint(r.Partition) || len(f[3]) != 700 {
				t.Fatalf("%s: partition %d offset %d holds %.40q", what, r.Partition, r.Offset, r.Value)
			}
			seen[strings.Join(f[:3], "-")] = true
		}
		for round := range rounds {
			for p := range parts {
				for i := range perPart {
					if k := fmt.Sprintf("%d-%d-%d", round, p, i); !seen[k] {
						t.Fatalf("%s: record %s not consumed (%d of %d read)", what, k, len(got), want)
					}
				}
			}
		}
		if len(got) != want {
			t.Fatalf("%s: %d records consumed, want %d", what, len(got), want)
		}
	}
	produce(0)
	check("live", 1)
	logs, _ := filepath.Glob(filepath.Join(b.DataDir, "*", "segs-*", "*.log"))
	if more, _ := filepath.Glob(filepath.Join(b.DataDir, "segs-*", "*.log")); len(more) > len(logs) {
		logs = more
	}
	if len(logs) <= nofile {
		out, _ := exec.Command("sh", "-c", "ls -la "+filepath.Join(b.DataDir, "segs-0")+"; ls "+b.DataDir+" | head").CombinedOutput()
		t.Fatalf("%d segment files, want more than the %d descriptors: the test does not exercise the cache\n%s", len(logs), nofile, out)
	}
	t.Logf("%d segment files on %d descriptors", len(logs), nofile)

	b.Stop()
	b.Restart()
	produce(1)
	check("after a clean restart", 2)

	b.Kill()
	b.Restart()
	check("after kill -9", 2)
	log := b.readLog()
	if strings.Contains(log, "too many open files") || strings.Contains(log, "panic:") {
		t.Fatalf("the node ran out of descriptors or panicked:\n%s", b.tailLog(30))
	}
}

// TestDescriptorBudgetLowered: the safety net behind the check at
// creation. A node restarted with fewer descriptors than its replicas
// need (RLIMIT_NOFILE lowered from 4096 to 1536: 480 replicas, for 550)
// opens what fits and keeps the rest offline, with KAFKA_STORAGE_ERROR to
// clients and a log line naming the budget, rather than run out of
// descriptors; it keeps accepting connections; and once a topic is
// deleted the offline replicas open on their next retry.
func TestDescriptorBudgetLowered(t *testing.T) {
	// 400 + 100 + the 50 of __consumer_offsets; 480 fit.
	const parts, total, fit = 400, 550, 480
	b := startBrokerLimited(t, t.TempDir(), 4096, "num.partitions=1")
	adm := newAdmin(t, b.Addr)
	ctx := testCtx(t, 3*time.Minute)
	awaitOffsetsTopic(t, adm)
	if r, err := adm.CreateTopic(ctx, parts, 1, nil, "wide"); err != nil || r.Err != nil {
		t.Fatalf("create wide: %v %v", err, r.Err)
	}
	if r, err := adm.CreateTopic(ctx, 100, 1, nil, "spare"); err != nil || r.Err != nil {
		t.Fatalf("create spare: %v %v", err, r.Err)
	}
	b.Stop()
	b.nofile = 1536
	b.Restart()
	adm = newAdmin(t, b.Addr)
	for i := range 20 {
		if err := probe(b.Addr); err != nil {
			t.Fatalf("connection %d past the budget: %v", i, err)
		}
	}
	offline := func() int {
		t.Helper()
		ends, err := adm.ListEndOffsets(ctx, "wide", "spare", "__consumer_offsets")
		if err != nil {
			t.Fatalf("ListOffsets: %v", err)
		}
		n := 0
		ends.Each(func(o kadm.ListedOffset) {
			if o.Err != nil {
				if !errors.Is(o.Err, kerr.KafkaStorageError) && !errors.Is(o.Err, kerr.NotLeaderForPartition) && !errors.Is(o.Err, kerr.LeaderNotAvailable) {
					t.Errorf("%s[%d]: %v, want a retriable storage error", o.Topic, o.Partition, o.Err)
				}
				n++
			}
		})
		return n
	}
	deadline := time.Now().Add(60 * time.Second)
	n := offline()
	for n > total-fit && time.Now().Before(deadline) {
		time.Sleep(500 * time.Millisecond) // the opens that fit are still going on
		n = offline()
	}
	if n != total-fit {
		t.Fatalf("%d replicas offline, want %d: the node opened other than what its budget allows", n, total-fit)
	}
	t.Logf("%d of %d replicas offline past the budget", n, total)
	if !b.logContains("file descriptor budget exhausted") {
		t.Fatalf("no log line names the exhausted budget")
	}
	// Deleting a topic frees its share; the rest open on a later retry.
	if _, err := adm.DeleteTopics(ctx, "spare"); err != nil {
		t.Fatalf("delete spare: %v", err)
	}
	deadline = time.Now().Add(90 * time.Second)
	for {
		ends, err := adm.ListEndOffsets(ctx, "wide")
		if err == nil && ends.Error() == nil && len(ends["wide"]) == parts {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("wide never served whole after spare was deleted: %v %v", err, ends.Error())
		}
		time.Sleep(500 * time.Millisecond)
	}
	log := b.readLog()
	if strings.Contains(log, "too many open files") || strings.Contains(log, "panic:") {
		t.Fatalf("the node ran out of descriptors or panicked:\n%s", b.tailLog(30))
	}
}
