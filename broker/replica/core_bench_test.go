package replica

import (
	"testing"

	"github.com/rs/zerolog"

	"github.com/fjordlog/fjord/storage"
)

// BenchmarkCoreProducePath is the core's share of one acks=all produce on
// a leader at RF 3: an append, its fsync, and both followers' fetches.
func BenchmarkCoreProducePath(b *testing.B) {
	c := New(Config{ID: 1, SyncOnAck: true, LagMs: 30_000, OpenTimeoutMs: 1000, AlterTimeoutMs: 1000})
	c.Step(0, Assign{Assignment{Leader: 1, LeaderEpoch: 1, PartitionEpoch: 1, Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2, 3}, Live: []int32{1, 2, 3}}})
	c.Start(0)
	c.Step(0, OpenDone{})
	b.ReportAllocs()
	for i := range b.N {
		end := int64(i + 1)
		c.Step(int64(i), Appended{End: end})
		c.Step(int64(i), Flushed{Durable: end})
		c.Step(int64(i), FollowerFetched{ID: 2, LeaderEpoch: 1, Offset: end, Durable: end})
		c.Step(int64(i), FollowerFetched{ID: 3, LeaderEpoch: 1, Offset: end, Durable: end})
	}
	if c.HW() != int64(b.N) {
		b.Fatalf("hw %d, want %d", c.HW(), b.N)
	}
}

// BenchmarkPartitionProducePath is the same through the driver (locks,
// publication, waking): what the broker adds per produce.
func BenchmarkPartitionProducePath(b *testing.B) {
	h := &benchHost{}
	p := NewPartition(PartitionConfig{Topic: "t", Settings: Settings{FlushMessages: 1},
		Core: Config{ID: 1, SyncOnAck: true, LagMs: 30_000, OpenTimeoutMs: 1000, AlterTimeoutMs: 1000}}, h)
	p.Step(Assign{Assignment{Leader: 1, LeaderEpoch: 1, PartitionEpoch: 1, Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2, 3}, Live: []int32{1, 2, 3}}})
	p.Start()
	lg, err := storage.Open(b.TempDir(), storage.DefaultConfig(), zerolog.Nop())
	if err != nil {
		b.Fatal(err)
	}
	defer lg.Close()
	p.Opened(lg, nil) // the log stays empty: the benchmark drives the events only
	b.ReportAllocs()
	for i := range b.N {
		end := int64(i + 1)
		p.Step(Appended{End: end})
		p.Step(Flushed{Durable: end})
		p.FollowerFetched(2, p.View().LeaderEpoch, end, end, -1)
		p.FollowerFetched(3, p.View().LeaderEpoch, end, end, -1)
	}
	if p.HW() != int64(b.N) {
		b.Fatalf("hw %d, want %d", p.HW(), b.N)
	}
}

type benchHost struct{}

func (benchHost) Open(*Partition)              {}
func (benchHost) Delete(*Partition)            {}
func (benchHost) Repair(*Partition, Repair)    {}
func (benchHost) Propose(*Partition, Proposal) {}
func (benchHost) Ended(*Partition)             {}
func (benchHost) Changed(*Partition)           {}
