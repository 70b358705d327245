package storage

import (
	"path/filepath"
	"testing"
	"unsafe"

	"github.com/fjordlog/fjord/storage/recordbatch"
)

// BenchmarkIndexMemory reports what the sparse offset and time indexes
// cost per GiB of log, at the default index.interval.bytes with 1 KiB
// single-record batches a millisecond apart (so the time index grows with
// the offset index), in 8 MiB segments: what the segments hold in memory
// themselves (the active one's indexes: segment-MiB/GiB), what the index
// files hold (files-MiB/GiB: what every sealed segment held in memory
// before the IndexCache), and what the node's cache holds (cache-KiB, at
// most its budget, 1 MiB here, whatever the data). Run with -benchtime 1x.
func BenchmarkIndexMemory(b *testing.B) {
	cfg := testConfig()
	cfg.SegmentBytes = 8 << 20
	for range b.N {
		cfg.Indexes = NewIndexCache(1 << 20)
		dir := b.TempDir()
		l := openLog(b, dir, cfg)
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
		var held int64
		oe, te := int64(unsafe.Sizeof(offsetEntry{})), int64(unsafe.Sizeof(timeEntry{}))
		l.view.RLock()
		for _, s := range l.view.segs {
			st := s.pub.Load()
			held += int64(cap(st.offs))*oe + int64(cap(st.times))*te
		}
		l.view.RUnlock()
		var files int64
		for _, ext := range []string{".index", ".timeindex"} {
			for _, f := range filesWithExt(b, dir, ext) {
				files += fileSize(b, filepath.Join(dir, f))
			}
		}
		perGiB := func(n int64) float64 { return float64(n) / float64(logBytes) * 1024 }
		b.ReportMetric(perGiB(held), "segment-MiB/GiB")
		b.ReportMetric(perGiB(files), "files-MiB/GiB")
		b.ReportMetric(float64(cfg.Indexes.Stats().Bytes)/1024, "cache-KiB")
	}
}
