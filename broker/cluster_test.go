package broker

import (
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordlog/fjord/broker/config"
	"github.com/fjordlog/fjord/broker/replicamgr"
)

// A replica whose open hangs does not stall the metadata pipeline: after
// fjord.partition.open.timeout.ms the topic shows in metadata while its
// replica stays Opening (produce gets the retriable
// NOT_LEADER_OR_FOLLOWER; with no other replica to take over, the broker
// keeps the leadership rather than leave the partition leaderless), later
// metadata changes still apply, and the replica serves once its open
// finishes.
func TestHungReplicaOpenIsAForcedExit(t *testing.T) {
	release := make(chan struct{})
	b := testBroker(t, t.TempDir(), func(c *config.Config) { c.PartitionOpenTimeoutMs = 300 })
	var once sync.Once
	unblock := func() { once.Do(func() { close(release) }) }
	t.Cleanup(unblock) // before the broker's Close, which waits for the open
	hook := func(topic string, _ int32) {
		if topic == "slow" {
			<-release
		}
	}
	b.replicas.SetOpenHook(hook)
	rc := dial(t, b)
	start := time.Now()
	if ec := rc.createTopic("slow", 1, nil); ec != 0 {
		t.Fatalf("create slow: %d", ec)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Fatalf("create waited %v for a hung open", d)
	}
	batch := makeBatch(batchSpec{values: []string{"x"}})
	if ec, _ := rc.produce("slow", 0, batch); ec != kerr.NotLeaderForPartition.Code {
		t.Fatalf("produce to a replica still opening: %v, want NOT_LEADER_OR_FOLLOWER", kerr.ErrorForCode(ec))
	}
	// The pipeline moves on.
	if ec := rc.createTopic("fast", 1, nil); ec != 0 {
		t.Fatalf("create fast: %d", ec)
	}
	if ec, _ := rc.produce("fast", 0, batch); ec != 0 {
		t.Fatalf("produce to fast: %v", kerr.ErrorForCode(ec))
	}
	unblock()
	deadline := time.Now().Add(10 * time.Second)
	for {
		ec, _ := rc.produce("slow", 0, batch)
		if ec == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("late replica never served: %v", kerr.ErrorForCode(ec))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Deleting a wide topic removes its replicas' files DeleteSlots at a
// time: a removal blocks in the kernel on an OS thread of its own, and a
// DeleteTopics of 10,000 partitions removed all at once would start
// thousands of threads (Go ends a process past 10,000). Every replica is
// still removed, and its directory is gone.
func TestWideTopicDeletionIsBounded(t *testing.T) {
	dir := t.TempDir()
	b := testBroker(t, dir, nil)
	var mu sync.Mutex
	var running, peak, done int
	b.replicas.SetDeleteHook(func(topic string, _ int32) {
		if topic != "wide" {
			return
		}
		mu.Lock()
		running++
		peak = max(peak, running)
		mu.Unlock()
		time.Sleep(5 * time.Millisecond) // a slow disk's removal
		mu.Lock()
		running--
		done++
		mu.Unlock()
	})
	rc := dial(t, b)
	const parts = 4 * replicamgr.DeleteSlots
	if ec := rc.createTopic("wide", parts, nil); ec != 0 {
		t.Fatalf("create wide: %v", kerr.ErrorForCode(ec))
	}
	req := kmsg.NewPtrDeleteTopicsRequest()
	req.SetVersion(5)
	req.TopicNames = []string{"wide"}
	if ec := rc.do(req).(*kmsg.DeleteTopicsResponse).Topics[0].ErrorCode; ec != 0 {
		t.Fatalf("delete wide: %v", kerr.ErrorForCode(ec))
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		mu.Lock()
		n := done
		mu.Unlock()
		if n == parts {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d replicas deleted after 20s", n, parts)
		}
		time.Sleep(10 * time.Millisecond)
	}
	mu.Lock()
	defer mu.Unlock()
	if peak > replicamgr.DeleteSlots {
		t.Errorf("%d replica deletions ran at once, want at most %d", peak, replicamgr.DeleteSlots)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		left, _ := filepath.Glob(filepath.Join(dir, "data", "wide-*"))
		if len(left) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d directories of the deleted topic left, first %s", len(left), left[0])
		}
	}
}
