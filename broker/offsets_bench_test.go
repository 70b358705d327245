package broker

import (
	"fmt"
	"path/filepath"

	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/fjordlog/fjord/broker/config"
	"github.com/fjordlog/fjord/broker/coordinator"
)

// BenchmarkOffsetsLoad measures how long a coordinator takes to load 1
// million committed offsets from the offsets topic at start-up:
//
//	go test -run '^$' -bench OffsetsLoad -benchtime 1x ./broker
func BenchmarkOffsetsLoad(b *testing.B) {
	const groups, perGroup = 1000, 1000 // 1M offsets
	dir := b.TempDir()
	br := testBroker(&testing.T{}, dir, func(c *config.Config) { c.OffsetsTopicPartitions = 50 })
	ids := make([]string, groups)
	for g := range ids {
		ids[g] = fmt.Sprintf("group-%d", g)
	}
	waitLoadedB(b, br, ids)
	done := make(chan error, groups)
	for g, id := range ids {
		offs := make(map[coordinator.TopicPartition]*coordinator.Committed, perGroup)
		for p := range perGroup {
			offs[coordinator.TopicPartition{Topic: "orders", Partition: int32(p)}] = &coordinator.Committed{Offset: int64(g*p + 1), LeaderEpoch: -1, CommitTimeMs: 1}
		}
		br.coord.Commit(id, offs, func(err error) { done <- err })
	}
	for range groups {
		if err := <-done; err != nil {
			b.Fatal(err)
		}
	}
	br.Close()
	b.ResetTimer()
	for range b.N {
		// New recovers the logs and starts loading the offsets partitions
		// the metadata log says this node leads: time both.
		cfg := config.Default()
		cfg.Listeners = "PLAINTEXT://127.0.0.1:0"
		cfg.LogDirs = filepath.Join(dir, "data")
		start := time.Now()
		br2, err := New(cfg, zerolog.Nop())
		if err != nil {
			b.Fatal(err)
		}
		br2.Start()
		waitLoadedB(b, br2, ids)
		took := time.Since(start)
		n := 0
		for _, id := range ids {
			n += len(br2.coord.Offsets(id))
		}
		if n != groups*perGroup {
			b.Fatalf("loaded %d offsets, want %d", n, groups*perGroup)
		}
		b.ReportMetric(took.Seconds(), "s/load")
		b.ReportMetric(float64(n)/took.Seconds(), "offsets/s")
		br2.Close()
	}
}

// waitLoadedB waits until br serves the offsets partitions of every group
// of ids.
func waitLoadedB(b *testing.B, br *Broker, ids []string) {
	deadline := time.Now().Add(30 * time.Second)
	for _, id := range ids {
		for br.coord.Status(id) != nil {
			if time.Now().After(deadline) {
				b.Fatal("offsets never loaded")
			}
			time.Sleep(2 * time.Millisecond)
		}
	}
}
