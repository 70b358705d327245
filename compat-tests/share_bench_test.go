package compattests

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// BenchmarkShareGroupThroughput measures how fast a share group drains
// ONE partition with 1, 4 and 16 franz-go share consumers: what share
// groups add over consumer groups is consumers beyond the partition
// count. 20000 records of 100 bytes are produced once; each op is a fresh
// group (share.auto.offset.reset=earliest) whose consumers poll and
// accept everything (r.Ack(kgo.AckAccept), sent with the next fetch), from
// their start until every record was accepted and the acknowledgements
// flushed (FlushAcks). records/s is accepted records per second;
// redelivered/op counts deliveries with a delivery count above 1. The
// group settings are the broker's defaults (500 records a fetch, 2000
// records in flight per share-partition: at most four fetches' worth).
//
//	cd compat-tests && go test -run '^$' -bench ShareGroupThroughput -benchtime 3x
func BenchmarkShareGroupThroughput(b *testing.B) {
	const topic, records = "sharebench", 20000
	br := startBroker(b, b.TempDir(), shareBrokerOverrides...)
	cl := newClient(b, br.Addr)
	createTopic(b, kadm.NewClient(cl), topic, 1, nil)
	value := []byte(strings.Repeat("x", 100))
	for i := 0; i < records; i += 1000 {
		var recs []*kgo.Record
		for j := range 1000 {
			recs = append(recs, &kgo.Record{Topic: topic, Key: []byte(fmt.Sprint(i + j)), Value: value})
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		err := cl.ProduceSync(ctx, recs...).FirstErr()
		cancel()
		if err != nil {
			b.Fatalf("producing: %v", err)
		}
	}
	for _, n := range []int{1, 4, 16} {
		b.Run(fmt.Sprintf("consumers=%d", n), func(b *testing.B) {
			var total time.Duration
			var redelivered int64
			for i := range b.N {
				b.StopTimer()
				group := fmt.Sprintf("sharebench-%d-%d-%d", n, i, time.Now().UnixNano())
				setShareConfigs(b, group, []*kgo.Client{cl}, "share.auto.offset.reset", "earliest")
				seen := make([]atomic.Bool, records)
				var distinct, again, stray atomic.Int64
				ctx, cancel := context.WithCancel(context.Background())
				var wg sync.WaitGroup
				var clients []*kgo.Client
				b.StartTimer()
				t0 := time.Now()
				for c := range n {
					sc := newClient(b, br.Addr, kgo.ClientID(fmt.Sprintf("bench%d", c)), kgo.ShareGroup(group), kgo.ConsumeTopics(topic))
					clients = append(clients, sc)
					wg.Add(1)
					go func() {
						defer wg.Done()
						for ctx.Err() == nil {
							sc.PollFetches(ctx).EachRecord(func(r *kgo.Record) {
								r.Ack(kgo.AckAccept)
								if r.DeliveryCount() > 1 {
									again.Add(1)
								}
								if r.Offset < 0 || r.Offset >= records {
									stray.Add(1)
								} else if !seen[r.Offset].Swap(true) {
									distinct.Add(1)
								}
							})
						}
					}()
				}
				waitUntilB(b, 2*time.Minute, func() bool { return distinct.Load() == records })
				cancel()
				wg.Wait()
				for _, sc := range clients {
					fctx, fcancel := context.WithTimeout(context.Background(), 10*time.Second)
					if err := sc.FlushAcks(fctx); err != nil {
						b.Errorf("FlushAcks: %v", err)
					}
					fcancel()
				}
				total += time.Since(t0)
				b.StopTimer()
				for _, sc := range clients {
					sc.Close()
				}
				if stray.Load() > 0 {
					b.Fatalf("%d records delivered at offsets outside [0, %d)", stray.Load(), records)
				}
				redelivered += again.Load()
			}
			b.ReportMetric(float64(records*b.N)/total.Seconds(), "records/s")
			b.ReportMetric(float64(redelivered)/float64(b.N), "redelivered/op")
		})
	}
}
