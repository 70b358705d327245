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
