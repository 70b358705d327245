package compattests

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestOffsetsOfDeletedTopic: deleting a topic deletes the groups'
// committed offsets of it, as Kafka does, so a topic created again under
// the same name is consumed from its reset point, not from the old
// topic's offsets. Checked with kadm (OffsetFetch after the deletion and
// after the re-creation: nothing committed for the topic, while the
// group's offsets of another topic stay) and with a franz-go group
// consumer, which would start each partition of the new topic at the old
// offset 5, skipping records, had it survived. On one node and on three
// at RF 3.
func TestOffsetsOfDeletedTopic(t *testing.T) {
	for _, nodes := range []int{1, 3} {
		t.Run(fmt.Sprintf("nodes=%d", nodes), func(t *testing.T) {
			ctx := testCtx(t, 90*time.Second)
			var addr string
			if nodes == 1 {
				addr = startBroker(t, t.TempDir()).Addr
			} else {
				c := startCluster(t, 3, "offsets.topic.replication.factor=3", "default.replication.factor=3", "min.insync.replicas=2")
				addr = c.Addr(1)
			}
			adm := newAdmin(t, addr)
			const topic, other, group = "recreated", "kept", "recreated-group"
			createTopic(t, adm, topic, 2, nil)
			createTopic(t, adm, other, 1, nil)

			// The group has consumed the old topic to offset 5.
			offs := kadm.Offsets{}
			offs.Add(kadm.Offset{Topic: topic, Partition: 0, At: 5, LeaderEpoch: -1})
			offs.Add(kadm.Offset{Topic: topic, Partition: 1, At: 5, LeaderEpoch: -1})
			offs.Add(kadm.Offset{Topic: other, Partition: 0, At: 7, LeaderEpoch: -1})
			if err := adm.CommitAllOffsets(ctx, group, offs); err != nil {
				t.Fatalf("commit: %v", err)
			}

			if _, err := adm.DeleteTopic(ctx, topic); err != nil {
				t.Fatalf("delete %s: %v", topic, err)
			}
			committed := func() (old, kept int) {
				resp, err := adm.FetchOffsets(ctx, group)
				if err != nil {
					t.Fatalf("fetch offsets: %v", err)
				}
				old = len(resp[topic])
				if o, ok := resp.Lookup(other, 0); ok {
					kept = int(o.At)
				}
				return old, kept
			}
			waitUntil(t, 20*time.Second, "the deleted topic's offsets are gone", func() (bool, string) {
				old, kept := committed()
				return old == 0, fmt.Sprintf("%d partitions of %s still committed (%s at %d)", old, topic, other, kept)
			})
			if _, kept := committed(); kept != 7 {
				t.Fatalf("the offset of %s, a topic not deleted, is %d, want 7", other, kept)
			}

			// Created again, with 20 records (one partition at least has 10):
			// the group reads them all, from offset 0.
			waitUntil(t, 30*time.Second, "topic created again", func() (bool, string) {
				resp, err := adm.CreateTopic(ctx, 2, int16(nodes), nil, topic)
				if err == nil && resp.Err == nil {
					return true, ""
				}
				time.Sleep(200 * time.Millisecond)
				return false, fmt.Sprintf("%v %v", err, resp.Err)
			})
			if old, _ := committed(); old != 0 {
				t.Fatalf("the re-created topic has %d partitions committed", old)
			}
			const n = 20
			prod := newClient(t, addr, kgo.DefaultProduceTopic(topic))
			for i := range n {
				if err := prod.ProduceSync(ctx, kgo.StringRecord(fmt.Sprintf("new-%d", i))).FirstErr(); err != nil {
					t.Fatalf("produce: %v", err)
				}
			}
			cons := newClient(t, addr, kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
				kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(500*time.Millisecond))
			got := 0
			deadline := time.Now().Add(20 * time.Second)
			for got < n && time.Now().Before(deadline) {
				pctx, cancel := context.WithTimeout(ctx, time.Second)
				fs := cons.PollFetches(pctx)
				cancel()
				got += fs.NumRecords()
			}
			if got != n {
				t.Fatalf("the group read %d of the %d records of the re-created topic", got, n)
			}
		})
	}
}
