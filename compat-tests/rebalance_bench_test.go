package compattests

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// BenchmarkRebalance2to3 measures a consumer group's rebalance when a third
// franz-go member joins two stable ones: from the third client's start to
// the moment all three hold a non-empty assignment that covers the topic's
// six partitions. Members heartbeat every 100 ms, so the figure is the
// broker's rebalance plus at most one heartbeat interval.
//
//	cd compat-tests && go test -run '^$' -bench Rebalance2to3 -benchtime 5x
func BenchmarkRebalance2to3(b *testing.B) {
	br := startBroker(b, b.TempDir(), "group.initial.rebalance.delay.ms=0")
	adm := newAdmin(b, br.Addr)
	createTopic(b, adm, "rb", 6, nil)
	for i := range b.N {
		group := "rb-" + string(rune('a'+i%26)) + time.Now().Format("150405.000000")
		var mu sync.Mutex
		owned := map[int]map[int32]bool{}
		member := func(id int) *kgo.Client {
			return newClient(b, br.Addr,
				kgo.ConsumerGroup(group), kgo.ConsumeTopics("rb"),
				kgo.Balancers(kgo.CooperativeStickyBalancer()),
				kgo.HeartbeatInterval(100*time.Millisecond), kgo.SessionTimeout(6*time.Second),
				kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, m map[string][]int32) {
					mu.Lock()
					defer mu.Unlock()
					if owned[id] == nil {
						owned[id] = map[int32]bool{}
					}
					for _, p := range m["rb"] {
						owned[id][p] = true
					}
				}),
				kgo.OnPartitionsRevoked(func(_ context.Context, _ *kgo.Client, m map[string][]int32) {
					mu.Lock()
					defer mu.Unlock()
					for _, p := range m["rb"] {
						delete(owned[id], p)
					}
				}),
			)
		}
		balanced := func(n int) bool {
			mu.Lock()
			defer mu.Unlock()
			total := 0
			for id := range n {
				if len(owned[id]) == 0 {
					return false
				}
				total += len(owned[id])
			}
			return total == 6
		}
		var clients []*kgo.Client
		ctx, cancel := context.WithCancel(context.Background())
		poll := func(c *kgo.Client) {
			for ctx.Err() == nil {
				c.PollFetches(ctx)
			}
		}
		for id := range 2 {
			c := member(id)
			clients = append(clients, c)
			go poll(c)
		}
		waitUntilB(b, 30*time.Second, func() bool { return balanced(2) })
		b.StartTimer()
		start := time.Now()
		c := member(2)
		clients = append(clients, c)
		go poll(c)
		waitUntilB(b, 30*time.Second, func() bool { return balanced(3) })
		b.ReportMetric(float64(time.Since(start).Milliseconds()), "ms/rebalance")
		b.StopTimer()
		cancel()
		for _, c := range clients {
			c.Close()
		}
	}
}

func waitUntilB(tb testing.TB, d time.Duration, cond func() bool) {
	tb.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			tb.Fatal("condition not met in time")
		}
		time.Sleep(5 * time.Millisecond)
	}
}
