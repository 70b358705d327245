package compattests

import (
	"context"
	"fmt"
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

// BenchmarkRebalance10Join measures a group of ten franz-go members on a
// 30-partition topic when an eleventh joins, under the three protocols a
// Fjord group can run: the classic protocol with the eager range
// balancer (every member gives up everything), the classic protocol with
// cooperative-sticky (two rounds, only moved partitions are revoked), and
// KIP-848 (the coordinator assigns; only moved partitions are revoked).
// ms/rebalance runs from the eleventh client's start until all eleven hold
// a non-empty share covering the topic; revoked/op counts the partitions
// members gave up meanwhile. Heartbeats every 100 ms under every protocol.
//
//	cd compat-tests && go test -run '^$' -bench Rebalance10Join -benchtime 5x
func BenchmarkRebalance10Join(b *testing.B) {
	const topic, partitions, members = "rb10", 30, 10
	br := startBroker(b, b.TempDir(), "group.initial.rebalance.delay.ms=0",
		"group.consumer.heartbeat.interval.ms=100", "group.consumer.session.timeout.ms=6000")
	adm := newAdmin(b, br.Addr)
	createTopic(b, adm, topic, partitions, nil)
	for _, mode := range []struct {
		name string
		opts []kgo.Opt
	}{
		{"classic-eager", []kgo.Opt{kgo.Balancers(kgo.RangeBalancer())}},
		{"classic-cooperative", []kgo.Opt{kgo.Balancers(kgo.CooperativeStickyBalancer())}},
		{"kip848", []kgo.Opt{kgo.Balancers(kgo.CooperativeStickyBalancer()), kip848()}},
	} {
		b.Run(mode.name, func(b *testing.B) {
			revokedTotal, msTotal := 0, 0.0
			for i := range b.N {
				b.StopTimer()
				group := fmt.Sprintf("rb10-%s-%d-%d", mode.name, i, time.Now().UnixNano())
				var mu sync.Mutex
				owned := map[int]map[int32]bool{}
				revoked := 0
				member := func(id int) *kgo.Client {
					return newClient(b, br.Addr, append([]kgo.Opt{
						kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
						kgo.HeartbeatInterval(100 * time.Millisecond), kgo.SessionTimeout(6 * time.Second),
						kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, m map[string][]int32) {
							mu.Lock()
							defer mu.Unlock()
							if owned[id] == nil {
								owned[id] = map[int32]bool{}
							}
							for _, p := range m[topic] {
								owned[id][p] = true
							}
						}),
						kgo.OnPartitionsRevoked(func(_ context.Context, _ *kgo.Client, m map[string][]int32) {
							mu.Lock()
							defer mu.Unlock()
							for _, p := range m[topic] {
								delete(owned[id], p)
								revoked++
							}
						}),
					}, mode.opts...)...)
				}
				balanced := func(n int) bool {
					mu.Lock()
					defer mu.Unlock()
					seen := map[int32]bool{}
					for id := range n {
						if len(owned[id]) == 0 {
							return false
						}
						for p := range owned[id] {
							seen[p] = true
						}
					}
					return len(seen) == partitions
				}
				ctx, cancel := context.WithCancel(context.Background())
				var clients []*kgo.Client
				var wg sync.WaitGroup
				start := func(id int) {
					c := member(id)
					clients = append(clients, c)
					wg.Add(1)
					go func() {
						defer wg.Done()
						for ctx.Err() == nil {
							c.PollFetches(ctx)
						}
					}()
				}
				for id := range members {
					start(id)
				}
				waitUntilB(b, 60*time.Second, func() bool { return balanced(members) })
				mu.Lock()
				revoked = 0
				mu.Unlock()
				b.StartTimer()
				t0 := time.Now()
				start(members)
				waitUntilB(b, 60*time.Second, func() bool { return balanced(members + 1) })
				msTotal += float64(time.Since(t0).Microseconds()) / 1000
				b.StopTimer()
				mu.Lock()
				revokedTotal += revoked
				mu.Unlock()
				cancel()
				for _, c := range clients {
					c.Close()
				}
				wg.Wait()
			}
			b.ReportMetric(msTotal/float64(b.N), "ms/rebalance")
			b.ReportMetric(float64(revokedTotal)/float64(b.N), "revoked/op")
		})
	}
}
