package compattests

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestDescriptorBudget: a CreateTopics with more partitions than the
// process has file descriptors for must not take the node down. The
// replicas past the budget stay offline (KAFKA_STORAGE_ERROR to clients)
// and retry with a backoff, each logging once per state change rather
// than once per attempt; connections keep being accepted (descriptors are
// kept back for them); deleting the topic gives the descriptors back and
// the offline replicas of other topics open on their next try.
func TestDescriptorBudget(t *testing.T) {
	const nofile, parts = 2048, 600
	b := startBrokerLimited(t, t.TempDir(), nofile, "num.partitions=1")
	adm := newAdmin(t, b.Addr)
	ctx := testCtx(t, 2*time.Minute)
	if _, err := adm.CreateTopic(ctx, parts, 1, nil, "huge"); err != nil {
		t.Fatalf("create huge: %v", err)
	}
	// Past the budget now: a new topic cannot open its log either.
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, "small"); err != nil {
		t.Fatalf("create small: %v", err)
	}
	// The node still takes new connections and answers.
	for i := range 20 {
		if err := probe(b.Addr); err != nil {
			t.Fatalf("connection %d after exhausting the budget: %v", i, err)
		}
	}
	cl := newClient(t, b.Addr, kgo.RequestRetries(0), kgo.RecordRetries(1), kgo.ProduceRequestTimeout(5*time.Second))
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	err := cl.ProduceSync(pctx, &kgo.Record{Topic: "small", Value: []byte("x")}).FirstErr()
	cancel()
	if err == nil {
		t.Fatalf("produce to a replica past the descriptor budget succeeded; want a retriable storage error")
	}
	t.Logf("produce past the budget: %v", err)

	// Give the descriptors back; the small topic's replica opens on a
	// later try and takes writes.
	if _, err := adm.DeleteTopics(ctx, "huge"); err != nil {
		t.Fatalf("delete huge: %v", err)
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		err := cl.ProduceSync(pctx, &kgo.Record{Topic: "small", Value: []byte("y")}).FirstErr()
		cancel()
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("small never took a write after the budget was freed: %v", err)
		}
	}
	log := b.readLog()
	if strings.Contains(log, "accept4: too many open files") || strings.Contains(log, "panic:") {
		t.Fatalf("the node ran out of descriptors or panicked:\n%s", b.tailLog(30))
	}
	// Bounded logging: each offline replica logs its few state changes,
	// not one line per attempt (the issue saw 1.1 million lines).
	lines := strings.Count(log, "\n")
	if lines > parts*12 {
		t.Fatalf("%d log lines for %d partitions: logging is not bounded per state change", lines, parts)
	}
	t.Logf("%d log lines for %d partitions", lines, parts)
	if !b.logContains("file descriptor budget") {
		t.Fatalf("no log line names the descriptor budget")
	}
}
