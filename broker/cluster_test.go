package broker

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// A replica whose open hangs does not stall the metadata pipeline: after
// fjord.partition.open.timeout.ms the broker resigns its leadership (here,
// with no other replica, the partition goes leaderless rather than be led
// by a broker that cannot serve it), later metadata changes still apply,
// and the replica is adopted once its open finishes.
func TestHungReplicaOpenIsAForcedExit(t *testing.T) {
	release := make(chan struct{})
	b := testBroker(t, t.TempDir(), func(c *Config) { c.PartitionOpenTimeoutMs = 300 })
	hook := func(topic string, _ int32) {
		if topic == "slow" {
			<-release
		}
	}
	b.openHook.Store(&hook)
	rc := dial(t, b)
	start := time.Now()
	if ec := rc.createTopic("slow", 1, nil); ec != 0 {
		t.Fatalf("create slow: %d", ec)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Fatalf("create waited %v for a hung open", d)
	}
	leaderOf := func(name string) int32 {
		req := kmsg.NewPtrMetadataRequest()
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(name)
		req.Topics = append(req.Topics, rt)
		resp := rc.do(req).(*kmsg.MetadataResponse)
		if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
			return -2
		}
		return resp.Topics[0].Partitions[0].Leader
	}
	deadline := time.Now().Add(10 * time.Second)
	for leaderOf("slow") != -1 {
		if time.Now().After(deadline) {
			t.Fatalf("hung replica still leads: leader %d", leaderOf("slow"))
		}
		time.Sleep(20 * time.Millisecond)
	}
	// The pipeline moves on.
	if ec := rc.createTopic("fast", 1, nil); ec != 0 {
		t.Fatalf("create fast: %d", ec)
	}
	if leaderOf("fast") != b.cfg.NodeID {
		t.Fatalf("fast topic not led here")
	}
	close(release)
	for {
		if tp := b.lookup("slow"); tp != nil && tp.parts[0] != nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("late replica never adopted")
		}
		time.Sleep(20 * time.Millisecond)
	}
}
