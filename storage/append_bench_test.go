package storage

import (
	"testing"

	"github.com/fjordlog/fjord/storage/recordbatch"
)

// BenchmarkAppend appends 16 KiB batches (16 records of 1 KiB) without
// flushing, as a leader does between group commits: the cost of the write
// path under the writer's lock (stamping, the write syscall, preallocation,
// indexes, producer state), with rolls every 64 MiB.
func BenchmarkAppend(b *testing.B) {
	cfg := testConfig()
	cfg.SegmentBytes = 64 << 20
	l := openLog(b, b.TempDir(), cfg)
	tmpl := buildBatch(b, batchOpts{N: 16, ValueSize: 1024})
	info, err := recordbatch.Validate(tmpl, 0)
	if err != nil {
		b.Fatal(err)
	}
	batch := make([]byte, len(tmpl))
	b.SetBytes(int64(len(tmpl)))
	b.ResetTimer()
	for i := range b.N {
		copy(batch, tmpl) // Append stamps the batch in place
		if _, err := l.Append(batch, info, 7, int64(i)); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkAppendFlush appends one 1 KiB-record batch and flushes it, as an
// acks=all produce of one small batch does alone: dominated by fdatasync,
// so it shows any syscall added to the durable path.
func BenchmarkAppendFlush(b *testing.B) {
	cfg := testConfig()
	l := openLog(b, b.TempDir(), cfg)
	tmpl := buildBatch(b, batchOpts{N: 1, ValueSize: 1024})
	info, err := recordbatch.Validate(tmpl, 0)
	if err != nil {
		b.Fatal(err)
	}
	batch := make([]byte, len(tmpl))
	b.SetBytes(int64(len(tmpl)))
	b.ResetTimer()
	for i := range b.N {
		copy(batch, tmpl)
		if _, err := l.Append(batch, info, 7, int64(i)); err != nil {
			b.Fatal(err)
		}
		if err := l.Flush(); err != nil {
			b.Fatal(err)
		}
	}
}
