package brokertest

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Read-your-writes across the cluster (replicamgr/peerbarrier.go): once a
// metadata change is answered through one node, every node acts on it, so
// a client that goes straight from the answer to another node — the new
// partition's leader, any node's Metadata or DescribeConfigs — sees it
// without retrying. Several rounds, each through another node, because a
// lagging node shows only sometimes (followers apply within milliseconds).
func TestReadYourWritesAcrossCluster(t *testing.T) {
	c := startCluster(t, 3)
	for round := 0; round < 6; round++ {
		via := int32(round%3 + 1)
		topic := "ryw-" + string(rune('a'+round))
		if code := createTopic(t, c.Addr(via), topic, 1, 3); code != 0 {
			t.Fatalf("round %d: create through %d: %v", round, via, kerr.ErrorForCode(code))
		}
		// Every node lists it, and its leader takes an acks=all write, at once.
		leader := int32(-1)
		for id := int32(1); id <= 3; id++ {
			ps, _ := layout(t, c.Addr(id), topic)
			if len(ps) != 1 || ps[0].Leader < 1 {
				t.Fatalf("round %d: created through %d, node %d shows %s", round, via, id, describe(ps))
			}
			leader = ps[0].Leader
		}
		if code := produceTo(t, c, leader, topic, -1, 5000, "v"); code != 0 {
			t.Fatalf("round %d: created through %d, its leader %d answers %v", round, via, leader, kerr.ErrorForCode(code))
		}

		// A config change through one node holds on every node.
		other := via%3 + 1
		alter := kmsg.NewPtrIncrementalAlterConfigsRequest()
		res := kmsg.NewIncrementalAlterConfigsRequestResource()
		res.ResourceType, res.ResourceName = kmsg.ConfigResourceTypeTopic, topic
		cfg := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
		cfg.Name, cfg.Value = "retention.ms", kmsg.StringPtr("4242")
		res.Configs = append(res.Configs, cfg)
		alter.Resources = append(alter.Resources, res)
		if r, err := request(t, c.Addr(other), alter); err != nil || r.(*kmsg.IncrementalAlterConfigsResponse).Resources[0].ErrorCode != 0 {
			t.Fatalf("round %d: alter config through %d: %v %+v", round, other, err, r)
		}
		for id := int32(1); id <= 3; id++ {
			if got := topicConfig(t, c.Addr(id), topic, "retention.ms"); got != "4242" {
				t.Fatalf("round %d: config altered through %d, node %d shows retention.ms=%q", round, other, id, got)
			}
		}

		// A deletion through one node: no node lists the topic any more.
		del := kmsg.NewPtrDeleteTopicsRequest()
		dt := kmsg.NewDeleteTopicsRequestTopic()
		dt.Topic = kmsg.StringPtr(topic)
		del.Topics, del.TopicNames, del.TimeoutMillis = append(del.Topics, dt), []string{topic}, 10000
		if r, err := request(t, c.Addr(leader), del); err != nil || r.(*kmsg.DeleteTopicsResponse).Topics[0].ErrorCode != 0 {
			t.Fatalf("round %d: delete through %d: %v %+v", round, leader, err, r)
		}
		for id := int32(1); id <= 3; id++ {
			if ps, _ := layout(t, c.Addr(id), topic); ps != nil {
				t.Fatalf("round %d: deleted through %d, node %d still shows %s", round, leader, id, describe(ps))
			}
		}
	}
}

// A node that cannot be asked (its inter-broker links cut, still in the
// quorum so never fenced) does not make the change fail: the answer comes
// at the request's timeout, a success naming the lagging node.
func TestReadYourWritesLaggingNodeNamed(t *testing.T) {
	c := startCluster(t, 3)
	c.CutReplication(3)
	req := kmsg.NewPtrCreateTopicsRequest()
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = "lagging", 1, 1
	req.Topics, req.TimeoutMillis = append(req.Topics, rt), 1500
	r, err := request(t, c.Addr(1), req)
	if err != nil {
		t.Fatal(err)
	}
	got := r.(*kmsg.CreateTopicsResponse).Topics[0]
	if got.ErrorCode != 0 {
		t.Fatalf("create with node 3 unreachable: %v", kerr.ErrorForCode(got.ErrorCode))
	}
	if got.ErrorMessage == nil || !strings.Contains(*got.ErrorMessage, "[3]") {
		t.Fatalf("the answer does not name the lagging node 3: %v", got.ErrorMessage)
	}
	c.Heal(3)
}

// topicConfig is topic's value of key as node addr describes it.
func topicConfig(t *testing.T, addr, topic, key string) string {
	t.Helper()
	req := kmsg.NewPtrDescribeConfigsRequest()
	res := kmsg.NewDescribeConfigsRequestResource()
	res.ResourceType, res.ResourceName, res.ConfigNames = kmsg.ConfigResourceTypeTopic, topic, []string{key}
	req.Resources = append(req.Resources, res)
	r, err := request(t, addr, req)
	if err != nil {
		t.Fatalf("describe configs at %s: %v", addr, err)
	}
	for _, rr := range r.(*kmsg.DescribeConfigsResponse).Resources {
		for _, cv := range rr.Configs {
			if cv.Name == key && cv.Value != nil {
				return *cv.Value
			}
		}
	}
	return ""
}

// BenchmarkCreateTopicRF3 is the latency of one CreateTopics (one
// partition, RF 3) through a node that is not the active controller, on
// three nodes: the forward, the commit, and the wait for every node to
// apply it (replicamgr/peerbarrier.go). Compare with the wait disabled to
// measure what read-your-writes costs.
func BenchmarkCreateTopicRF3(b *testing.B) {
	c, err := Start(Options{Nodes: 3, Dir: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	via := int32(1)
	for ctl := c.Controller(); ctl == -1 || ctl == via; ctl = c.Controller() {
		if ctl == via {
			via++
		}
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.Addr(via)), kgo.RequestRetries(0))
	if err != nil {
		b.Fatal(err)
	}
	defer cl.Close()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		req := kmsg.NewPtrCreateTopicsRequest()
		rt := kmsg.NewCreateTopicsRequestTopic()
		rt.Topic, rt.NumPartitions, rt.ReplicationFactor = fmt.Sprintf("bench-%d", i), 1, 3
		req.Topics, req.TimeoutMillis = append(req.Topics, rt), 10000
		r, err := cl.SeedBrokers()[0].Request(context.Background(), req)
		if err != nil || r.(*kmsg.CreateTopicsResponse).Topics[0].ErrorCode != 0 {
			b.Fatalf("create %d: %v %+v", i, err, r)
		}
	}
}
