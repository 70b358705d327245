package brokertest

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestChurnReplicas creates and deletes topics of 1-10 partitions at RF 3
// from three clients, through every node, re-creating names as it goes,
// while an acks=all producer writes to a steady topic. In one process
// under the race detector: a replica met "not open yet" or "being
// deleted" by a fetcher, a handler or a loop is a Kafka error code or a
// data race report, never a panic. At the end every deleted topic is gone
// from every node's metadata, its replicas gone from every node, and every
// acknowledged record of the steady topic is readable.
func TestChurnReplicas(t *testing.T) {
	c := replicatedCluster(t)
	if code := createTopic(t, c.Addrs()[0], "steady", 3, 3); code != 0 {
		t.Fatalf("create steady: %v", kerr.ErrorForCode(code))
	}
	waitTopic(t, c, "steady", 3)
	cl := producer(t, c, "steady")

	const churners, rounds = 3, 12
	deadline := time.Now().Add(45 * time.Second)
	var wg sync.WaitGroup
	var mu sync.Mutex
	gone := map[string]bool{} // name -> deleted last
	for w := range churners {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 1))
			for r := range rounds {
				if time.Now().After(deadline) {
					return
				}
				// Names repeat across rounds: create-delete-create of one
				// name lands on the same directories.
				name := fmt.Sprintf("churn-%d-%d", w, r%4)
				addr := c.Addrs()[rng.IntN(3)]
				code := createTopic(t, addr, name, int32(1+rng.IntN(10)), 3)
				if code != 0 && code != kerr.TopicAlreadyExists.Code {
					t.Logf("create %s via %s: %v", name, addr, kerr.ErrorForCode(code))
					continue
				}
				mu.Lock()
				gone[name] = false
				mu.Unlock()
				if rng.IntN(3) > 0 {
					if code := deleteTopic(t, c.Addrs()[rng.IntN(3)], name); code == 0 {
						mu.Lock()
						gone[name] = true
						mu.Unlock()
					}
				}
			}
		}()
	}
	acked := 0
	for i := 0; time.Now().Before(deadline) && i < 40; i++ {
		n, err := produce(t, cl, acked, 50)
		if err != nil {
			t.Fatalf("acks=all produce to the steady topic during churn: %v", err)
		}
		acked += n
		if !churning(&wg) {
			break
		}
	}
	wg.Wait()
	for name, deleted := range gone {
		for _, addr := range c.Addrs() {
			eventually(t, 15*time.Second, fmt.Sprintf("%s %s on %s", name, map[bool]string{true: "gone", false: "present"}[deleted], addr), func() bool {
				ps, _ := layout(t, addr, name)
				return (len(ps) == 0) == deleted
			})
		}
	}
	for id := int32(1); id <= 3; id++ {
		for name, deleted := range gone {
			if _, err := c.Broker(id).Replica(name, 0); deleted && err == nil {
				t.Fatalf("node %d still holds a replica of deleted %s", id, name)
			}
		}
	}
	got := consumeValues(t, c, "steady", acked)
	checkAll(t, got, acked)
	t.Logf("%d acks=all records during churn of %d topics", acked, len(gone))
}

// churning reports whether the churners are still at work.
func churning(wg *sync.WaitGroup) bool {
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
		return false
	case <-time.After(10 * time.Millisecond):
		return true
	}
}

func deleteTopic(t *testing.T, addr, name string) int16 {
	t.Helper()
	req := kmsg.NewPtrDeleteTopicsRequest()
	req.TopicNames = []string{name}
	rt := kmsg.NewDeleteTopicsRequestTopic()
	rt.Topic = kmsg.StringPtr(name)
	req.Topics = append(req.Topics, rt)
	req.TimeoutMillis = 10000
	resp, err := request(t, addr, req)
	if err != nil {
		return kerr.RequestTimedOut.Code
	}
	return resp.(*kmsg.DeleteTopicsResponse).Topics[0].ErrorCode
}
