package storage

import (
	"testing"
	"unsafe"

	"github.com/fjordlog/fjord/storage/recordbatch"
)

// BenchmarkIndexMemory reports what the sparse offset and time indexes
// hold in memory per GiB of log (index-MiB/GiB), at the default
// index.interval.bytes with 1 KiB single-record batches a millisecond
// apart (so the time index grows with the offset index): every segment's
// indexes stay in memory, sealed ones included (docs/operations.md,
// "Memory"), so this is what a node's retained data costs it in RAM
// besides the page cache. Run with -benchtime 1x.
func BenchmarkIndexMemory(b *testing.B) {
	cfg := testConfig()
	cfg.SegmentBytes = 8 << 20
	for range b.N {
		l := openLog(b, b.TempDir(), cfg)
		var logBytes int64
		for i := 0; logBytes < 64<<20; i++ {
			batch := buildBatch(b, batchOpts{N: 1, ValueSize: 1024, BaseTS: 1_700_000_000_000 + int64(i)})
			info, err := recordbatch.Validate(batch, 0)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := l.Append(batch, info, 7, int64(i)); err != nil {
				b.Fatal(err)
			}
			logBytes += int64(len(batch))
		}
		// Allocated (the slices' capacity, as appends grew them) and used
		// (their length: what a restart loads, sized exactly).
		var allocated, used int64
		oe, te := int64(unsafe.Sizeof(offsetEntry{})), int64(unsafe.Sizeof(timeEntry{}))
		l.view.RLock()
		for _, s := range l.view.segs {
			st := s.pub.Load()
			allocated += int64(cap(st.offs))*oe + int64(cap(st.times))*te
			used += int64(len(st.offs))*oe + int64(len(st.times))*te
		}
		l.view.RUnlock()
		b.ReportMetric(float64(allocated)/float64(logBytes)*1024, "index-MiB/GiB")
		b.ReportMetric(float64(used)/float64(logBytes)*1024, "used-MiB/GiB")
	}
}
