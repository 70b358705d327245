package brokertest

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func startCluster(t *testing.T, n int) *Cluster {
	t.Helper()
	c, err := Start(Options{Nodes: n, Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// request sends req to the node at addr only.
func request(t *testing.T, addr string, req kmsg.Request) (kmsg.Response, error) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.RequestRetries(0))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return cl.SeedBrokers()[0].Request(ctx, req)
}

func createTopic(t *testing.T, addr, name string, partitions int32, rf int16) int16 {
	t.Helper()
	return createTopicWithConfigs(t, addr, name, partitions, rf, nil)
}

// createTopicWithConfigs creates topic with the given topic configs and
// returns the topic's error code.
func createTopicWithConfigs(t *testing.T, addr, name string, partitions int32, rf int16, configs map[string]string) int16 {
	t.Helper()
	req := kmsg.NewPtrCreateTopicsRequest()
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = name, partitions, rf
	for k, v := range configs {
		c := kmsg.NewCreateTopicsRequestTopicConfig()
		c.Name, c.Value = k, kmsg.StringPtr(v)
		rt.Configs = append(rt.Configs, c)
	}
	req.Topics = append(req.Topics, rt)
	req.TimeoutMillis = 10000
	resp, err := request(t, addr, req)
	if err != nil {
		return kerr.RequestTimedOut.Code
	}
	return resp.(*kmsg.CreateTopicsResponse).Topics[0].ErrorCode
}

// layout is a topic's partitions as one node's Metadata shows them.
func layout(t *testing.T, addr, topic string) ([]kmsg.MetadataResponseTopicPartition, []int32) {
	t.Helper()
	req := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(topic)
	req.Topics = append(req.Topics, rt)
	resp, err := request(t, addr, req)
	if err != nil {
		t.Fatalf("metadata from %s: %v", addr, err)
	}
	m := resp.(*kmsg.MetadataResponse)
	var brokers []int32
	for _, b := range m.Brokers {
		brokers = append(brokers, b.NodeID)
	}
	slices.Sort(brokers)
	if len(m.Topics) != 1 || m.Topics[0].ErrorCode != 0 {
		return nil, brokers
	}
	return m.Topics[0].Partitions, brokers
}

func describe(ps []kmsg.MetadataResponseTopicPartition) string {
	s := ""
	for _, p := range ps {
		s += fmt.Sprintf("[%d leader=%d epoch=%d replicas=%v isr=%v]", p.Partition, p.Leader, p.LeaderEpoch, p.Replicas, p.ISR)
	}
	return s
}

func eventually(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("after %v: %s", d, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Every node answers Metadata from its own image, and they agree; an RF-3
// topic is placed on all three nodes with leaders spread evenly.
func TestClusterMetadataAgrees(t *testing.T) {
	c := startCluster(t, 3)
	if code := createTopic(t, c.Addr(2), "orders", 6, 3); code != 0 {
		t.Fatalf("create: %v", kerr.ErrorForCode(code))
	}
	var want []kmsg.MetadataResponseTopicPartition
	start := time.Now()
	eventually(t, 5*time.Second, "node 1 sees the topic", func() bool {
		want, _ = layout(t, c.Addr(1), "orders")
		return len(want) == 6
	})
	t.Logf("created through node 2, visible on node 1 after %v", time.Since(start))
	leads := map[int32]int{}
	for _, p := range want {
		if len(p.Replicas) != 3 || len(p.ISR) != 3 {
			t.Fatalf("partition %d: replicas %v isr %v", p.Partition, p.Replicas, p.ISR)
		}
		leads[p.Leader]++
	}
	if leads[1] != 2 || leads[2] != 2 || leads[3] != 2 {
		t.Fatalf("leaders not spread evenly: %v", leads)
	}
	for id := int32(1); id <= 3; id++ {
		eventually(t, time.Second, "node sees the same layout", func() bool {
			got, brokers := layout(t, c.Addr(id), "orders")
			return describe(got) == describe(want) && slices.Equal(brokers, []int32{1, 2, 3})
		})
	}
}

// Cutting the active controller off elects another; admin requests work
// through the others; the cut node catches up once healed.
func TestClusterCutController(t *testing.T) {
	c := startCluster(t, 3)
	var old int32
	eventually(t, 5*time.Second, "an agreed controller", func() bool { old = c.Controller(); return old != -1 })
	others := []int32{}
	for id := int32(1); id <= 3; id++ {
		if id != old {
			others = append(others, id)
		}
	}
	c.Cut(old)
	start := time.Now()
	eventually(t, 15*time.Second, "a topic is created through the majority", func() bool {
		return createTopic(t, c.Addr(others[0]), "after-cut", 1, 1) == 0
	})
	t.Logf("controller cut off: topic created through the majority after %v", time.Since(start))
	if l := c.Broker(others[1]).ActiveController(); l == old {
		t.Fatalf("majority still follows the cut controller %d", old)
	}
	c.Heal(old)
	eventually(t, 10*time.Second, "healed node sees the topic", func() bool {
		ps, _ := layout(t, c.Addr(old), "after-cut")
		return len(ps) == 1
	})
}

// A paused broker is fenced after its session; the partitions it led get
// new leaders with a higher epoch; after Resume it is unfenced again.
func TestClusterPausedBrokerFenced(t *testing.T) {
	c := startCluster(t, 3)
	if code := createTopic(t, c.Addr(1), "t", 3, 3); code != 0 {
		t.Fatalf("create: %v", kerr.ErrorForCode(code))
	}
	var ctl int32
	eventually(t, 5*time.Second, "an agreed controller", func() bool { ctl = c.Controller(); return ctl != -1 })
	victim := int32(1)
	for victim == ctl {
		victim++
	}
	var before []kmsg.MetadataResponseTopicPartition
	eventually(t, 5*time.Second, "the controller's node sees the topic", func() bool {
		before, _ = layout(t, c.Addr(ctl), "t")
		return len(before) == 3
	})
	c.Pause(victim)
	eventually(t, 10*time.Second, "victim fenced and its partitions moved", func() bool {
		ps, brokers := layout(t, c.Addr(ctl), "t")
		if slices.Contains(brokers, victim) || len(ps) != len(before) {
			return false
		}
		for i, p := range ps {
			if p.Leader == victim || slices.Contains(p.ISR, victim) {
				return false
			}
			if before[i].Leader == victim && p.LeaderEpoch <= before[i].LeaderEpoch {
				return false
			}
		}
		return true
	})
	c.Resume(victim)
	eventually(t, 10*time.Second, "victim unfenced", func() bool {
		_, brokers := layout(t, c.Addr(ctl), "t")
		return slices.Contains(brokers, victim)
	})
}

// A stopped node restarts on its data and rejoins.
func TestClusterStopRestart(t *testing.T) {
	c := startCluster(t, 3)
	if err := c.Stop(3); err != nil {
		t.Fatal(err)
	}
	eventually(t, 15*time.Second, "topic created with node 3 down", func() bool {
		return createTopic(t, c.Addr(1), "while-down", 2, 2) == 0
	})
	if err := c.Restart(3); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "restarted node sees the topic", func() bool {
		ps, brokers := layout(t, c.Addr(3), "while-down")
		return len(ps) == 2 && slices.Equal(brokers, []int32{1, 2, 3})
	})
}

// A broker-only node follows the metadata log without voting: it answers
// Metadata like the others, is given replicas and leaderships, and keeps
// following when the active controller changes.
func TestClusterBrokerOnlyNode(t *testing.T) {
	c, err := Start(Options{Nodes: 3, Brokers: 1, Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if code := createTopic(t, c.Addr(4), "spread", 8, 2); code != 0 {
		t.Fatalf("create through the broker-only node: %v", kerr.ErrorForCode(code))
	}
	var want []kmsg.MetadataResponseTopicPartition
	eventually(t, 5*time.Second, "controller node sees the topic", func() bool {
		want, _ = layout(t, c.Addr(1), "spread")
		return len(want) == 8
	})
	leads4 := 0
	for _, p := range want {
		if p.Leader == 4 {
			leads4++
		}
	}
	if leads4 != 2 {
		t.Fatalf("broker-only node leads %d of 8 partitions, want 2: %s", leads4, describe(want))
	}
	eventually(t, 5*time.Second, "broker-only node answers the same", func() bool {
		got, brokers := layout(t, c.Addr(4), "spread")
		return describe(got) == describe(want) && slices.Equal(brokers, []int32{1, 2, 3, 4})
	})
	old := c.Controller()
	if old == 4 || old == -1 {
		t.Fatalf("controller %d", old)
	}
	if err := c.Stop(old); err != nil {
		t.Fatal(err)
	}
	eventually(t, 15*time.Second, "a topic created after the controller stopped reaches the broker-only node", func() bool {
		other := int32(1)
		for other == old {
			other++
		}
		if code := createTopic(t, c.Addr(other), "later", 1, 1); code != 0 && code != kerr.TopicAlreadyExists.Code {
			return false
		}
		ps, _ := layout(t, c.Addr(4), "later")
		return len(ps) == 1
	})
}
