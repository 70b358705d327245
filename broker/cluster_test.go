package broker

import (
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/fjordlog/fjord/broker/config"
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
