package storage

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/fjordlog/fjord/storage/recordbatch"
	"github.com/rs/zerolog"
)

// readAllKV returns offset → (key, value, "null"|"value") for the whole log,
// checking every batch's CRC.
func readAllKV(t *testing.T, l *Log) map[int64][3]string {
	t.Helper()
	out := map[int64][3]string{}
	off := l.StartOffset()
	for off < l.EndOffset() {
		data, err := l.Read(off, 1<<20, math.MaxInt64, nil)
		if err != nil {
			t.Fatal(err)
		}
		if len(data) == 0 {
			break
		}
		for len(data) > 0 {
			info, err := recordbatch.ParseHeader(data)
			if err != nil {
				t.Fatal(err)
			}
			if err := recordbatch.CheckCRC(data[:info.Bytes]); err != nil {
				t.Fatal(err)
			}
			base := recordbatch.BaseOffset(data)
			recordbatch.EachRecord(data[:info.Bytes], info, func(r recordbatch.Record) bool {
				null := "value"
				if r.Value == nil {
					null = "null"
				}
				out[base+int64(r.OffsetDelta)] = [3]string{string(r.Key), string(r.Value), null}
				return true
			})
			off = base + int64(info.LastDelta) + 1
			data = data[info.Bytes:]
		}
	}
	return out
}

func appendKV(t *testing.T, l *Log, now int64, recs ...recordbatch.KV) {
	t.Helper()
	b := recordbatch.Build(recs, now)
	info, err := recordbatch.Validate(b, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Append(b, info, 0, now); err != nil {
		t.Fatal(err)
	}
}

func TestCompactKeepsLatestPerKey(t *testing.T) {
	dir := t.TempDir()
	cfg := DefaultConfig()
	cfg.SegmentBytes = 2048
	l, err := Open(dir, cfg, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	const keys, rounds = 5, 60
	latest := map[string]int64{}
	for r := range rounds {
		for k := range keys {
			key := fmt.Sprintf("k%d", k)
			appendKV(t, l, 1000, recordbatch.KV{Key: []byte(key), Value: []byte(fmt.Sprintf("v%d-%d", k, r))})
			latest[key] = l.EndOffset() - 1
		}
	}
	// A tombstone for k0, then a big record so the tombstone's segment is
	// no longer the active one.
	appendKV(t, l, 1000, recordbatch.KV{Key: []byte("k0")})
	delete(latest, "k0")
	appendKV(t, l, 1000, recordbatch.KV{Key: []byte("filler"), Value: make([]byte, 3000)})
	appendKV(t, l, 1000, recordbatch.KV{Key: []byte("filler2"), Value: []byte("x")})
	before := readAllKV(t, l)
	end := l.EndOffset()
	segs := l.segments()
	activeBase := segs[len(segs)-1].base

	st, err := l.Compact(1000+10, 1<<40) // tombstones not yet expired
	if err != nil {
		t.Fatal(err)
	}
	if st.Segments == 0 || st.RecordsPurged == 0 {
		t.Fatalf("nothing compacted: %+v", st)
	}
	after := readAllKV(t, l)
	if l.EndOffset() != end {
		t.Fatalf("end offset moved %d -> %d", end, l.EndOffset())
	}
	for off, kv := range after {
		if before[off] != kv {
			t.Fatalf("offset %d changed: %v -> %v", off, before[off], kv)
		}
		if want, ok := latest[kv[0]]; ok && off < activeBase && want != off {
			t.Fatalf("superseded record %v kept at %d (latest %d)", kv, off, want)
		}
	}
	for k, off := range latest {
		if after[off][0] != k {
			t.Fatalf("latest record of %s at %d lost", k, off)
		}
	}
	hasTomb := false
	for _, kv := range after {
		hasTomb = hasTomb || (kv[0] == "k0" && kv[2] == "null")
	}
	if !hasTomb {
		t.Fatal("unexpired tombstone removed")
	}
	// Tombstones go once older than delete.retention.ms.
	if _, err := l.Compact(10_000_000, 1000); err != nil {
		t.Fatal(err)
	}
	for _, kv := range readAllKV(t, l) {
		if kv[0] == "k0" {
			t.Fatalf("expired tombstone (or a superseded k0) still there: %v", kv)
		}
	}
	// The cleaned log survives a restart with the same content.
	final := readAllKV(t, l)
	l.Close()
	l2, err := Open(dir, cfg, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	defer l2.Close()
	again := readAllKV(t, l2)
	if len(again) != len(final) || l2.EndOffset() != end {
		t.Fatalf("after reopen: %d records (want %d), end %d (want %d)", len(again), len(final), l2.EndOffset(), end)
	}
	appendKV(t, l2, 6000, recordbatch.KV{Key: []byte("k1"), Value: []byte("new")})
	if l2.EndOffset() != end+1 {
		t.Fatalf("append after reopen at %d", l2.EndOffset()-1)
	}
}

func TestCompactLeftoverCleanedFileRemoved(t *testing.T) {
	dir := t.TempDir()
	l, err := Open(dir, DefaultConfig(), zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	appendKV(t, l, 1, recordbatch.KV{Key: []byte("a"), Value: []byte("1")})
	l.Close()
	junk := filepath.Join(dir, "00000000000000000000.log"+cleanedExt)
	os.WriteFile(junk, []byte("partial"), 0o644)
	l2, err := Open(dir, DefaultConfig(), zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	defer l2.Close()
	if _, err := os.Stat(junk); !os.IsNotExist(err) {
		t.Fatal("leftover .cleaned file not removed")
	}
	if len(readAllKV(t, l2)) != 1 {
		t.Fatal("log changed")
	}
}

func BenchmarkCompact(b *testing.B) {
	for range b.N {
		b.StopTimer()
		dir := b.TempDir()
		cfg := DefaultConfig()
		cfg.SegmentBytes = 8 << 20
		l, _ := Open(dir, cfg, zerolog.Nop())
		val := make([]byte, 200)
		for i := range 200000 {
			recs := []recordbatch.KV{{Key: []byte(fmt.Sprintf("key-%d", i%1000)), Value: val}}
			bt := recordbatch.Build(recs, 1)
			info, _ := recordbatch.Validate(bt, 0)
			l.Append(bt, info, 0, 1)
		}
		b.StartTimer()
		st, err := l.Compact(2, 1<<40)
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(st.BytesRead)/st.Duration.Seconds()/1e6, "MB/s")
		l.Close()
	}
}

// A compressed batch that loses records is rewritten in its own codec,
// with its headers and offsets kept.
func TestCompactKeepsCodec(t *testing.T) {
	for _, codec := range []int8{recordbatch.CodecGzip, recordbatch.CodecSnappy, recordbatch.CodecLZ4, recordbatch.CodecZstd} {
		dir := t.TempDir()
		cfg := DefaultConfig()
		cfg.SegmentBytes = 1024
		l, err := Open(dir, cfg, zerolog.Nop())
		if err != nil {
			t.Fatal(err)
		}
		b := buildBatch(t, batchOpts{Codec: codec, Records: []testRecord{
			{OffsetDelta: 0, Key: []byte("a"), Value: []byte("1")},
			{OffsetDelta: 1, Key: []byte("b"), Value: []byte("2"), Headers: [][2][]byte{{[]byte("h"), []byte("v")}}},
			{OffsetDelta: 2, Key: []byte("a"), Value: []byte("3")},
		}})
		info, err := recordbatch.Validate(b, 0)
		if err != nil {
			t.Fatal(err)
		}
		l.Append(b, info, 0, 1)
		appendKV(t, l, 1, recordbatch.KV{Key: []byte("filler"), Value: make([]byte, 2000)}) // roll
		appendKV(t, l, 1, recordbatch.KV{Key: []byte("x"), Value: []byte("y")})
		if _, err := l.Compact(2, 1<<40); err != nil {
			t.Fatal(err)
		}
		data, err := l.Read(0, 1<<20, math.MaxInt64, nil)
		if err != nil {
			t.Fatal(err)
		}
		got, err := recordbatch.ParseHeader(data)
		if err != nil || recordbatch.CheckCRC(data[:got.Bytes]) != nil {
			t.Fatalf("codec %d: %v", codec, err)
		}
		if got.Codec != codec || got.Records != 2 || got.LastDelta != 2 {
			t.Fatalf("codec %d: rewritten batch has codec %d, %d records, last delta %d", codec, got.Codec, got.Records, got.LastDelta)
		}
		var seen []string
		recordbatch.EachRecord(data[:got.Bytes], got, func(r recordbatch.Record) bool {
			seen = append(seen, fmt.Sprintf("%d:%s=%s/%d", r.OffsetDelta, r.Key, r.Value, len(r.Headers)))
			return true
		})
		if fmt.Sprint(seen) != "[1:b=2/1 2:a=3/0]" {
			t.Fatalf("codec %d: kept %v", codec, seen)
		}
		l.Close()
	}
}
