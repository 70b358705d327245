package broker

import (
	"fmt"
	"path/filepath"

	"testing"
	"time"

	"github.com/rs/zerolog"
)

// BenchmarkOffsetsLoad measures how long a coordinator takes to load 1
// million committed offsets from the offsets topic at start-up:
//
//	go test -run '^$' -bench OffsetsLoad -benchtime 1x ./broker
func BenchmarkOffsetsLoad(b *testing.B) {
	const groups, perGroup = 1000, 1000 // 1M offsets
	dir := b.TempDir()
	br := testBroker(&testing.T{}, dir, func(c *Config) { c.OffsetsTopicPartitions = 50 })
	waitLoadedB(b, br)
	done := make(chan error, groups)
	for g := range groups {
		offs := make(map[topicPartition]*committedOffset, perGroup)
		for p := range perGroup {
			offs[topicPartition{"orders", int32(p)}] = &committedOffset{offset: int64(g*p + 1), leaderEpoch: -1, commitTime: 1}
		}
		br.offsets.commit(fmt.Sprintf("group-%d", g), offs, func(err error) { done <- err })
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
		cfg := DefaultConfig()
		cfg.Listeners = "PLAINTEXT://127.0.0.1:0"
		cfg.LogDirs = filepath.Join(dir, "data")
		start := time.Now()
		br2, err := New(cfg, zerolog.Nop())
		if err != nil {
			b.Fatal(err)
		}
		br2.Start()
		waitLoadedB(b, br2)
		took := time.Since(start)
		n := 0
		for _, id := range br2.offsets.groupsWithOffsets() {
			n += len(br2.offsets.groupOffsets(id))
		}
		if n != groups*perGroup {
			b.Fatalf("loaded %d offsets, want %d", n, groups*perGroup)
		}
		b.ReportMetric(took.Seconds(), "s/load")
		b.ReportMetric(float64(n)/took.Seconds(), "offsets/s")
		br2.Close()
	}
}

func waitLoadedB(b *testing.B, br *Broker) {
	deadline := time.Now().Add(30 * time.Second)
	for !br.offsets.allLoaded() {
		if time.Now().After(deadline) {
			b.Fatal("offsets never loaded")
		}
		time.Sleep(2 * time.Millisecond)
	}
}
