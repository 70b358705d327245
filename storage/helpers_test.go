package storage

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
	"github.com/rs/zerolog"
)

// testRecord is one record as buildBatch encodes it.
type testRecord struct {
	TSDelta     int64
	OffsetDelta int32
	Key         []byte // nil encodes a null key (length -1)
	Value       []byte // nil encodes a null value
	Headers     [][2][]byte
}

// batchOpts describes a magic-2 record batch for buildBatch. The zero value
// is one uncompressed, non-idempotent record at timestamp 1000.
type batchOpts struct {
	N         int          // records to generate when Records is nil (0 means 1)
	Records   []testRecord // explicit records (override N)
	ValueSize int          // generated values are padded to at least this size
	TSDeltas  []int64      // generated records' timestamp deltas (default: i)

	Codec  int8 // CodecNone .. CodecZstd (or anything, raw, for negative tests)
	Xerial bool // snappy: use the xerial framing the Java client uses

	Idempotent bool // set producer id/epoch/base sequence below; else -1s
	PID        int64
	Epoch      int16
	Seq        int32

	BaseTS          int64 // base timestamp (0 means 1000)
	Attrs           int16 // extra attribute bits (transactional, control, ...)
	LeaderEpoch     int32
	BaseOffset      int64
	LastDelta       *int32 // override lastOffsetDelta
	Count           *int32 // override recordCount
	MaxTS           *int64 // override maxTimestamp
	NoCRC           bool   // leave the CRC zero
	XerialChunkSize int    // split the xerial body into blocks of this size (default 64)
}

func i32(v int32) *int32 { return &v }
func (o batchOpts) records() []testRecord {
	if o.Records != nil {
		return o.Records
	}
	n := o.N
	if n == 0 {
		n = 1
	}
	recs := make([]testRecord, n)
	for i := range recs {
		v := fmt.Appendf(nil, "value-%d", i)
		for len(v) < o.ValueSize {
			v = append(v, byte('a'+len(v)%26))
		}
		ts := int64(i)
		if i < len(o.TSDeltas) {
			ts = o.TSDeltas[i]
		}
		recs[i] = testRecord{TSDelta: ts, OffsetDelta: int32(i), Key: fmt.Appendf(nil, "key-%d", i), Value: v}
		if i%3 == 2 {
			recs[i].Headers = [][2][]byte{{[]byte("h"), []byte("hv")}}
		}
	}
	return recs
}

func appendVarBytes(b, v []byte) []byte {
	if v == nil {
		return binary.AppendVarint(b, -1)
	}
	b = binary.AppendVarint(b, int64(len(v)))
	return append(b, v...)
}

// encodeRecord encodes one record with its varint length prefix.
func encodeRecord(r testRecord) []byte {
	body := []byte{0} // attributes
	body = binary.AppendVarint(body, r.TSDelta)
	body = binary.AppendVarint(body, int64(r.OffsetDelta))
	body = appendVarBytes(body, r.Key)
	body = appendVarBytes(body, r.Value)
	body = binary.AppendVarint(body, int64(len(r.Headers)))
	for _, h := range r.Headers {
		body = appendVarBytes(body, h[0])
		body = appendVarBytes(body, h[1])
	}
	return append(binary.AppendVarint(nil, int64(len(body))), body...)
}

func encodeRecords(recs []testRecord) []byte {
	var out []byte
	for _, r := range recs {
		out = append(out, encodeRecord(r)...)
	}
	return out
}

// compressBody compresses raw record bytes the way Kafka clients do.
func compressBody(t testing.TB, codec int8, xerial bool, chunk int, raw []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	switch codec {
	case CodecNone:
		return raw
	case CodecGzip:
		w := gzip.NewWriter(&buf)
		mustNoErr(t, w.Write, raw)
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
	case CodecSnappy:
		if !xerial {
			return s2.EncodeSnappy(nil, raw)
		}
		if chunk <= 0 {
			chunk = 64
		}
		out := append([]byte(nil), xerialMagic...)
		out = binary.BigEndian.AppendUint32(out, 1) // version
		out = binary.BigEndian.AppendUint32(out, 1) // compatible version
		for len(raw) > 0 {
			n := min(chunk, len(raw))
			blk := s2.EncodeSnappy(nil, raw[:n])
			out = binary.BigEndian.AppendUint32(out, uint32(len(blk)))
			out = append(out, blk...)
			raw = raw[n:]
		}
		return out
	case CodecLZ4:
		w := lz4.NewWriter(&buf)
		mustNoErr(t, w.Write, raw)
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
	case CodecZstd:
		w, err := zstd.NewWriter(&buf, zstd.WithEncoderConcurrency(1))
		if err != nil {
			t.Fatal(err)
		}
		mustNoErr(t, w.Write, raw)
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
	default:
		t.Fatalf("compressBody: codec %d", codec)
	}
	return buf.Bytes()
}

func mustNoErr(t testing.TB, f func([]byte) (int, error), b []byte) {
	t.Helper()
	if _, err := f(b); err != nil {
		t.Fatal(err)
	}
}

// buildBatch produces a complete magic-2 record batch, by hand.
func buildBatch(t testing.TB, o batchOpts) []byte {
	t.Helper()
	recs := o.records()
	return buildBatchBody(t, o, recs, compressBody(t, o.Codec, o.Xerial, o.XerialChunkSize, encodeRecords(recs)))
}

// buildBatchBody wraps an already encoded (maybe compressed) body in a header
// derived from recs and o.
func buildBatchBody(t testing.TB, o batchOpts, recs []testRecord, body []byte) []byte {
	t.Helper()
	baseTS := o.BaseTS
	if baseTS == 0 {
		baseTS = 1000
	}
	maxTS := baseTS
	var lastDelta int32
	for i, r := range recs {
		if i == 0 || baseTS+r.TSDelta > maxTS {
			maxTS = baseTS + r.TSDelta
		}
		lastDelta = max(lastDelta, r.OffsetDelta)
	}
	if o.LastDelta != nil {
		lastDelta = *o.LastDelta
	}
	count := int32(len(recs))
	if o.Count != nil {
		count = *o.Count
	}
	if o.MaxTS != nil {
		maxTS = *o.MaxTS
	}
	pid, epoch, seq := int64(-1), int16(-1), int32(-1)
	if o.Idempotent {
		pid, epoch, seq = o.PID, o.Epoch, o.Seq
	}
	b := make([]byte, BatchHeaderLen, BatchHeaderLen+len(body))
	be := binary.BigEndian
	be.PutUint64(b[0:], uint64(o.BaseOffset))
	be.PutUint32(b[8:], uint32(BatchHeaderLen-12+len(body)))
	be.PutUint32(b[12:], uint32(o.LeaderEpoch))
	b[16] = 2
	be.PutUint16(b[21:], uint16(int16(o.Codec)&7|o.Attrs))
	be.PutUint32(b[23:], uint32(lastDelta))
	be.PutUint64(b[27:], uint64(baseTS))
	be.PutUint64(b[35:], uint64(maxTS))
	be.PutUint64(b[43:], uint64(pid))
	be.PutUint16(b[51:], uint16(epoch))
	be.PutUint32(b[53:], uint32(seq))
	be.PutUint32(b[57:], uint32(count))
	b = append(b, body...)
	if !o.NoCRC {
		fixCRC(b)
	}
	return b
}

// fixCRC recomputes a batch's CRC-32C after a deliberate edit.
func fixCRC(b []byte) {
	binary.BigEndian.PutUint32(b[17:], crc32.Checksum(b[21:], crc32.MakeTable(crc32.Castagnoli)))
}

// splitBatches cuts a concatenation of stored batches into batches.
func splitBatches(t testing.TB, b []byte) [][]byte {
	t.Helper()
	var out [][]byte
	for len(b) > 0 {
		if len(b) < 12 {
			t.Fatalf("splitBatches: %d trailing bytes", len(b))
		}
		n := int(int32(binary.BigEndian.Uint32(b[8:]))) + 12
		if n < BatchHeaderLen || n > len(b) {
			t.Fatalf("splitBatches: batch length %d with %d bytes left", n, len(b))
		}
		out = append(out, b[:n])
		b = b[n:]
	}
	return out
}

// testConfig is Kafka's defaults with retention off, so nothing a test does
// not ask for is deleted.
func testConfig() Config {
	cfg := DefaultConfig()
	cfg.RetentionMs = -1
	cfg.RetentionBytes = -1
	cfg.FileDeleteDelay = 10 * time.Millisecond
	return cfg
}

func openLog(t testing.TB, dir string, cfg Config) *Log {
	t.Helper()
	l, err := Open(dir, cfg, zerolog.Nop())
	if err != nil {
		t.Fatalf("Open(%s): %v", dir, err)
	}
	openLogs.Store(filepath.Clean(dir), l)
	t.Cleanup(func() { openLogs.CompareAndDelete(filepath.Clean(dir), l); l.Close() })
	return l
}

// openLogs maps the directory of each log openLog opened to it, for
// activeIndexToDisk.
var openLogs sync.Map

// activeIndexToDisk writes the active segment's in-memory indexes to its
// files, as a clean Close would, when dir is the directory of a log still
// open: checks of the index files then check the indexes the log serves
// lookups from. A closed log's files are left as they are.
func activeIndexToDisk(t testing.TB, dir string) {
	t.Helper()
	v, ok := openLogs.Load(filepath.Clean(dir))
	if !ok {
		return
	}
	l := v.(*Log)
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.mu.closed {
		return
	}
	if err := l.active().writeIndexFiles(false); err != nil {
		t.Fatal(err)
	}
}

// appendOpts builds, validates and appends one batch.
func appendOpts(t testing.TB, l *Log, o batchOpts, now int64) AppendResult {
	t.Helper()
	b := buildBatch(t, o)
	res, err := appendRaw(l, b, now)
	if err != nil {
		t.Fatalf("Append: %v", err)
	}
	return res
}

func appendRaw(l *Log, b []byte, now int64) (AppendResult, error) {
	info, err := ValidateBatch(b, 0)
	if err != nil {
		return AppendResult{}, err
	}
	return l.Append(b, info, 7, now)
}

// readAll reads every batch from offset to the end, in whatever steps Read
// takes, and returns them one by one.
func readAll(t testing.TB, l *Log, from int64) [][]byte {
	t.Helper()
	var out [][]byte
	off := from
	for off < l.EndOffset() {
		data, err := l.Read(off, 1<<20, l.EndOffset(), nil)
		if err != nil {
			t.Fatalf("Read(%d): %v", off, err)
		}
		if len(data) == 0 {
			t.Fatalf("Read(%d) returned nothing before end %d", off, l.EndOffset())
		}
		for _, b := range splitBatches(t, data) {
			out = append(out, b)
			off = LastOffset(b) + 1
		}
	}
	return out
}

func copyDir(t testing.TB, src, dst string) {
	t.Helper()
	if err := os.MkdirAll(dst, 0o755); err != nil {
		t.Fatal(err)
	}
	ents, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if e.IsDir() {
			continue
		}
		b, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dst, e.Name()), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// filesWithExt lists dir's file names ending in ext, sorted.
func filesWithExt(t testing.TB, dir, ext string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		if filepath.Ext(e.Name()) == ext {
			out = append(out, e.Name())
		}
	}
	sort.Strings(out)
	return out
}

func fileSize(t testing.TB, path string) int64 {
	t.Helper()
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return st.Size()
}

func wantErrIs(t testing.TB, err, target error) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Fatalf("error %v, want errors.Is %v", err, target)
	}
}

// recordsOf decodes every record of a batch with EachRecord.
func recordsOf(t testing.TB, b []byte) []Record {
	t.Helper()
	info, err := ParseHeader(b)
	if err != nil {
		t.Fatal(err)
	}
	var out []Record
	if err := EachRecord(b, info, func(r Record) bool {
		out = append(out, Record{TimestampDelta: r.TimestampDelta, OffsetDelta: r.OffsetDelta, Key: bytes.Clone(r.Key), Value: bytes.Clone(r.Value)})
		return true
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

func removeFile(t testing.TB, dir, name string) {
	t.Helper()
	if err := os.Remove(filepath.Join(dir, name)); err != nil {
		t.Fatal(err)
	}
}

// segmentBytes reads a .log file's batches. The active segment of an open
// log may run on into a preallocated zero tail, which is checked and left
// out.
func segmentBytes(t testing.TB, path string) []byte {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	pos := 0
	for pos+12 <= len(data) {
		n := int(int32(binary.BigEndian.Uint32(data[pos+8:]))) + 12
		if n == 12 && binary.BigEndian.Uint64(data[pos:]) == 0 {
			break // zero header: preallocated space
		}
		if n < BatchHeaderLen || pos+n > len(data) {
			t.Fatalf("%s: bad batch at %d (length %d, file %d bytes)", path, pos, n, len(data))
		}
		pos += n
	}
	for i, c := range data[pos:] {
		if c != 0 {
			t.Fatalf("%s: non-zero byte at %d after the last batch (ends at %d)", path, pos+i, pos)
		}
	}
	return data[:pos]
}

func segmentSize(t testing.TB, path string) int64 {
	t.Helper()
	return int64(len(segmentBytes(t, path)))
}

// markerRecord is the one record of a transaction marker (a control batch):
// key ControlRecordKey v0 (type 1 commit, 0 abort), value EndTxnMarker v0.
func markerRecord(commit bool, coordEpoch int32) testRecord {
	key := []byte{0, 0, 0, 0}
	if commit {
		key[3] = 1
	}
	val := binary.BigEndian.AppendUint32([]byte{0, 0}, uint32(coordEpoch))
	return testRecord{Key: key, Value: val}
}
