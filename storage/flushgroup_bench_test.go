package storage

import (
	"fmt"
	"path/filepath"
	"sync"
	"testing"

	"github.com/fjordlog/fjord/storage/recordbatch"
)

// BenchmarkFlushGroup is one acks=all produce request to 1,000 partitions
// on one node, storage's share of it: one 1 KiB-record batch appended to
// each of 1,000 logs, then made durable. It compares the ways of making
// them durable (docs/benchmarks.md, "Produce to 1,000 partitions: group
// flush"):
//
//   - syncfs: FlushGroup, one syncfs for the file system (what the broker
//     does);
//   - pool-N: N goroutines each calling Flush (an fdatasync per log) on
//     their share of the logs, a bounded pool of fdatasyncs;
//   - syncfs-overlap: FlushGroup of request k runs while request k+1's
//     batches are appended, as a pipelined produce path would (the client
//     would then have two requests in flight); an op ends when both are
//     done, so it measures throughput, not one request's latency.
func BenchmarkFlushGroup(b *testing.B) {
	const n = 1000
	tmpl := buildBatch(b, batchOpts{N: 1, ValueSize: 1024})
	info, err := recordbatch.Validate(tmpl, 0)
	if err != nil {
		b.Fatal(err)
	}
	setup := func(b *testing.B) []*Log {
		cfg := testConfig()
		dir := b.TempDir()
		logs := make([]*Log, n)
		for i := range logs {
			logs[i] = openLog(b, filepath.Join(dir, fmt.Sprintf("t-%d", i)), cfg)
		}
		return logs
	}
	appendAll := func(b *testing.B, logs []*Log, seq int64) {
		batch := make([]byte, len(tmpl))
		for _, l := range logs {
			copy(batch, tmpl)
			if _, err := l.Append(batch, info, 7, seq); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.Run("syncfs", func(b *testing.B) {
		logs := setup(b)
		b.ResetTimer()
		for i := range b.N {
			appendAll(b, logs, int64(i))
			for _, err := range FlushGroup(logs) {
				if err != nil {
					b.Fatal(err)
				}
			}
		}
	})
	for _, workers := range []int{16, 64} {
		b.Run(fmt.Sprintf("pool-%d", workers), func(b *testing.B) {
			logs := setup(b)
			b.ResetTimer()
			for i := range b.N {
				appendAll(b, logs, int64(i))
				var wg sync.WaitGroup
				errs := make(chan error, workers)
				for w := range workers {
					wg.Add(1)
					go func() {
						defer wg.Done()
						for j := w; j < len(logs); j += workers {
							if err := logs[j].Flush(); err != nil {
								errs <- err
								return
							}
						}
					}()
				}
				wg.Wait()
				close(errs)
				for err := range errs {
					b.Fatal(err)
				}
			}
		})
	}
	b.Run("syncfs-overlap", func(b *testing.B) {
		logs := setup(b)
		appendAll(b, logs, 0)
		b.ResetTimer()
		for i := range b.N {
			done := make(chan []error, 1)
			go func() { done <- FlushGroup(logs) }()
			appendAll(b, logs, int64(i+1))
			for _, err := range <-done {
				if err != nil {
					b.Fatal(err)
				}
			}
		}
		b.StopTimer()
		FlushGroup(logs)
	})
}
