package compattests

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// topicPartitions asks the broker (raw Metadata, no client cache) how many
// partitions topic has; -1 if it does not exist.
func topicPartitions(t testing.TB, cl *kgo.Client, topic string) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(topic)
	req.Topics = append(req.Topics, rt)
	req.AllowAutoTopicCreation = false
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatalf("metadata %q: %v", topic, err)
	}
	for _, mt := range resp.Topics {
		if mt.Topic != nil && *mt.Topic == topic {
			if mt.ErrorCode != 0 {
				return -1
			}
			return len(mt.Partitions)
		}
	}
	return -1
}

// TestAutoCreateTopic: producing to an unknown topic creates it with
// num.partitions partitions.
func TestAutoCreateTopic(t *testing.T) {
	b := startBroker(t, t.TempDir(), "num.partitions=3", "auto.create.topics.enable=true")
	cl := newClient(t, b.Addr, kgo.AllowAutoTopicCreation())
	ctx := testCtx(t, 30*time.Second)
	const topic = "auto-created"
	if n := topicPartitions(t, cl, topic); n != -1 {
		t.Fatalf("topic exists before the test (%d partitions)", n)
	}
	for i := 0; i < 30; i++ {
		r := &kgo.Record{Topic: topic, Key: []byte{byte('a' + i)}, Value: []byte("v")}
		if _, err := cl.ProduceSync(ctx, r).First(); err != nil {
			t.Fatalf("produce to unknown topic: %v", err)
		}
	}
	if n := topicPartitions(t, cl, topic); n != 3 {
		t.Errorf("auto-created topic has %d partitions, want num.partitions=3", n)
	}
	recs := consumeAll(t, b.Addr, topic, 30, 15*time.Second)
	if len(recs) != 30 {
		t.Errorf("read back %d records, want 30", len(recs))
	}

	// CreateTopics with partitions -1 also takes num.partitions.
	if _, err := newAdmin(t, b.Addr).CreateTopic(ctx, -1, -1, nil, "default-parts"); err != nil {
		t.Fatalf("create with default partitions: %v", err)
	}
	if n := topicPartitions(t, cl, "default-parts"); n != 3 {
		t.Errorf("topic created with partitions=-1 has %d partitions, want 3", n)
	}
}

// TestAutoCreateDisabled: with auto.create.topics.enable=false a produce to
// an unknown topic fails and creates nothing.
func TestAutoCreateDisabled(t *testing.T) {
	b := startBroker(t, t.TempDir(), "num.partitions=3", "auto.create.topics.enable=false")
	cl := newClient(t, b.Addr, kgo.AllowAutoTopicCreation(), kgo.RecordDeliveryTimeout(3*time.Second))
	ctx := testCtx(t, 30*time.Second)
	_, err := cl.ProduceSync(ctx, &kgo.Record{Topic: "not-created", Value: []byte("v")}).First()
	if err == nil {
		t.Fatalf("produce to unknown topic succeeded with auto-create disabled")
	}
	if !errors.Is(err, kerr.UnknownTopicOrPartition) && !errors.Is(err, kgo.ErrRecordTimeout) {
		t.Errorf("produce error: %v, want UNKNOWN_TOPIC_OR_PARTITION or a record timeout", err)
	}
	t.Logf("produce to unknown topic failed as expected: %v", err)
	if n := topicPartitions(t, cl, "not-created"); n != -1 {
		t.Errorf("topic was created (%d partitions) with auto.create.topics.enable=false", n)
	}
}
