package brokertest

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Committed offsets are replicated like records: they survive the loss of
// the group's coordinator, and the new coordinator serves them.
func TestCommittedOffsetsSurviveCoordinatorLoss(t *testing.T) {
	c := replicatedCluster(t)
	if code := createTopic(t, c.Addr(1), "g", 2, 3); code != 0 {
		t.Fatalf("create: %v", kerr.ErrorForCode(code))
	}
	waitTopic(t, c, "g", 2)
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.Addrs()...), kgo.ConsumerGroup("orders-app"),
		kgo.RetryBackoffFn(func(int) time.Duration { return 100 * time.Millisecond }))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	commit := map[string]map[int32]kgo.EpochOffset{"g": {0: {Epoch: -1, Offset: 17}, 1: {Epoch: -1, Offset: 42}}}
	eventually(t, 20*time.Second, "offsets committed", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		var failed error
		cl.CommitOffsetsSync(ctx, commit, func(_ *kgo.Client, _ *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
			if err != nil {
				failed = err
				return
			}
			for _, t := range resp.Topics {
				for _, p := range t.Partitions {
					if p.ErrorCode != 0 {
						failed = kerr.ErrorForCode(p.ErrorCode)
					}
				}
			}
		})
		return failed == nil
	})
	coord := coordinatorOf(t, c, "orders-app")
	if err := c.Stop(coord); err != nil {
		t.Fatal(err)
	}
	eventually(t, 20*time.Second, "a new coordinator serves the committed offsets", func() bool {
		for _, addr := range c.Addrs() {
			req := kmsg.NewPtrOffsetFetchRequest()
			req.Group = "orders-app" // v0-7
			g := kmsg.NewOffsetFetchRequestGroup()
			g.Group = "orders-app" // v8+; nil topics: all
			req.Groups = append(req.Groups, g)
			n := coordinatorOfAddr(t, addr, "orders-app")
			if n < 0 || n == coord {
				return false
			}
			resp, err := request(t, c.Addr(n), req)
			if err != nil {
				return false
			}
			r := resp.(*kmsg.OffsetFetchResponse)
			got := map[int32]int64{}
			for _, g := range r.Groups {
				if g.ErrorCode != 0 {
					return false
				}
				for _, tp := range g.Topics {
					for _, p := range tp.Partitions {
						got[p.Partition] = p.Offset
					}
				}
			}
			return got[0] == 17 && got[1] == 42
		}
		return false
	})
}

func coordinatorOf(t *testing.T, c *Cluster, group string) int32 {
	t.Helper()
	for _, addr := range c.Addrs() {
		if n := coordinatorOfAddr(t, addr, group); n >= 0 {
			return n
		}
	}
	t.Fatal("no coordinator")
	return -1
}

func coordinatorOfAddr(t *testing.T, addr, group string) int32 {
	req := kmsg.NewPtrFindCoordinatorRequest()
	req.CoordinatorKey = group
	req.CoordinatorKeys = []string{group}
	resp, err := request(t, addr, req)
	if err != nil {
		return -1
	}
	r := resp.(*kmsg.FindCoordinatorResponse)
	if len(r.Coordinators) > 0 {
		if r.Coordinators[0].ErrorCode != 0 {
			return -1
		}
		return r.Coordinators[0].NodeID
	}
	if r.ErrorCode != 0 {
		return -1
	}
	return r.NodeID
}
