package storage

import (
	"testing"

	"github.com/fjordlog/fjord/storage/recordbatch"
)

// BenchmarkRead reads a log of 1 KiB-record batches front to back in 1 MiB
// fetches, as a consumer or follower catching up does: the cost of the read
// path, CRC verification of every batch included (bytes/s is data served).
func BenchmarkRead(b *testing.B) {
	cfg := testConfig()
	l := openLog(b, b.TempDir(), cfg)
	const batches = 2048 // 16 records of 1 KiB each: 32 MiB
	for i := range batches {
		appendOpts(b, l, batchOpts{N: 16, ValueSize: 1024, BaseTS: int64(i)}, int64(i))
	}
	end := l.EndOffset()
	buf := make([]byte, 0, 1<<20+64<<10)
	var total int64
	b.ResetTimer()
	for range b.N {
		for off := int64(0); off < end; {
			data, err := l.Read(off, 1<<20, end, buf)
			if err != nil {
				b.Fatal(err)
			}
			for _, bt := range splitBatches(b, data) {
				off = recordbatch.LastOffset(bt) + 1
			}
			total += int64(len(data))
		}
	}
	b.SetBytes(total / int64(b.N))
}

// BenchmarkReadSealedParallel reads single small batches at scattered
// offsets of sealed segments from every core at once, as many consumers
// reading old data do: each read looks up its segment's indexes in the
// node-wide IndexCache (a hit here), whose mutex every core takes. Run
// with -cpu 1,2,...: ns/op falling with the cores means the lock does not
// serialize the reads.
func BenchmarkReadSealedParallel(b *testing.B) {
	cfg := testConfig()
	cfg.SegmentBytes = 256 << 10
	cfg.IndexIntervalBytes = 4096
	cfg.Indexes = NewIndexCache(64 << 20)
	l := openLog(b, b.TempDir(), cfg)
	const batches = 8192 // one 1 KiB record each: 8 MiB, 32 segments
	for i := range batches {
		appendOpts(b, l, batchOpts{N: 1, ValueSize: 1024, BaseTS: int64(i)}, int64(i))
	}
	end := l.EndOffset()
	sealedEnd := l.segments()[l.SegmentCount()-1].base
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		buf := make([]byte, 0, 4096)
		off := int64(0)
		for pb.Next() {
			off = (off + 997) % sealedEnd
			if _, err := l.Read(off, 2048, end, buf); err != nil {
				b.Error(err)
				return
			}
		}
	})
}
