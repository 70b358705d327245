// Package batchtest builds Kafka record batches (magic 2) by hand for
// tests, with knobs to build wrong ones, and reads them back with franz-go
// alone. It shares no code with recordbatch, the codec under test: every
// field is put at the byte the format gives it (see the recordbatch
// package doc) and compressed with the codec libraries directly, so a
// mistake in the codec is not repeated here. It imports nothing of Fjord,
// so recordbatch's own tests use it as much as storage's do.
//
// Files:
//
//	batchtest.go  Opts, Build, BuildBody, EncodeRecords, Compress, FixCRC, the layout constants
//	kmsg.go       Decode and MarkerOf: franz-go's reading of a batch
package batchtest

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"testing"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
)

// Byte positions of a batch's header fields, and its length (the package
// doc of recordbatch draws them), for tests that damage one field.
const (
	OffBaseOffset    = 0
	OffLength        = 8
	OffLeaderEpoch   = 12
	OffMagic         = 16
	OffCRC           = 17
	OffAttributes    = 21
	OffLastDelta     = 23
	OffBaseTimestamp = 27
	OffMaxTimestamp  = 35
	OffProducerID    = 43
	OffProducerEpoch = 51
	OffBaseSequence  = 53
	OffRecordCount   = 57
	HeaderLen        = 61
	PrefixLen        = 12 // baseOffset and batchLength, which batchLength does not count
)

// Attribute bits beyond the codec's three.
const (
	AttrTransactional = 0x10
	AttrControl       = 0x20
)

// Compression codecs, the attributes' low three bits.
const (
	codecNone   = 0
	codecGzip   = 1
	codecSnappy = 2
	codecLZ4    = 3
	codecZstd   = 4
)

// Codec is one way of compressing a batch body.
type Codec struct {
	Name   string
	Codec  int8
	Xerial bool // snappy in the Java client's xerial framing
}

// Codecs is every way of compressing a batch body that Kafka clients use:
// the uncompressed one first, then one per codec, snappy twice.
var Codecs = []Codec{
	{"none", codecNone, false},
	{"gzip", codecGzip, false},
	{"snappy", codecSnappy, false},
	{"snappy-xerial", codecSnappy, true},
	{"lz4", codecLZ4, false},
	{"zstd", codecZstd, false},
}

// XerialMagic starts a snappy body in the xerial framing: the magic, two
// int32 versions, then int32-length-prefixed raw snappy blocks.
var XerialMagic = []byte{0x82, 'S', 'N', 'A', 'P', 'P', 'Y', 0}

// Record is one record as Build encodes it.
type Record struct {
	TSDelta     int64
	OffsetDelta int32
	Key         []byte // nil encodes a null key (length -1)
	Value       []byte // nil encodes a null value
	Headers     [][2][]byte
}

// Opts describes a batch for Build. The zero value is one uncompressed,
// non-idempotent record at timestamp 1000.
type Opts struct {
	N         int      // records to generate when Records is nil (0 means 1)
	Records   []Record // explicit records (override N)
	ValueSize int      // generated values are padded to at least this size
	TSDeltas  []int64  // generated records' timestamp deltas (default: i)

	Codec  int8 // 0 (none) .. 4 (zstd), or anything, raw, for negative tests
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

// I32 is a pointer to v, for Opts' overrides.
func I32(v int32) *int32 { return &v }

// Recs is o.Records, or the records o generates when that is nil: N of
// them with keys "key-i", values "value-i" padded to ValueSize, offset
// deltas i, timestamp deltas TSDeltas[i] or i, and one header on every
// third.
func (o Opts) Recs() []Record {
	if o.Records != nil {
		return o.Records
	}
	n := o.N
	if n == 0 {
		n = 1
	}
	recs := make([]Record, n)
	for i := range recs {
		v := fmt.Appendf(nil, "value-%d", i)
		for len(v) < o.ValueSize {
			v = append(v, byte('a'+len(v)%26))
		}
		ts := int64(i)
		if i < len(o.TSDeltas) {
			ts = o.TSDeltas[i]
		}
		recs[i] = Record{TSDelta: ts, OffsetDelta: int32(i), Key: fmt.Appendf(nil, "key-%d", i), Value: v}
		if i%3 == 2 {
			recs[i].Headers = [][2][]byte{{[]byte("h"), []byte("hv")}}
		}
	}
	return recs
}

// AppendVarBytes appends v as a varint length (-1 for nil) and its bytes.
func AppendVarBytes(b, v []byte) []byte {
	if v == nil {
		return binary.AppendVarint(b, -1)
	}
	b = binary.AppendVarint(b, int64(len(v)))
	return append(b, v...)
}

// EncodeRecord encodes one record with its varint length prefix.
func EncodeRecord(r Record) []byte {
	body := []byte{0} // attributes
	body = binary.AppendVarint(body, r.TSDelta)
	body = binary.AppendVarint(body, int64(r.OffsetDelta))
	body = AppendVarBytes(body, r.Key)
	body = AppendVarBytes(body, r.Value)
	body = binary.AppendVarint(body, int64(len(r.Headers)))
	for _, h := range r.Headers {
		body = AppendVarBytes(body, h[0])
		body = AppendVarBytes(body, h[1])
	}
	return append(binary.AppendVarint(nil, int64(len(body))), body...)
}

// EncodeRecords encodes records one after the other, as a batch body.
func EncodeRecords(recs []Record) []byte {
	var out []byte
	for _, r := range recs {
		out = append(out, EncodeRecord(r)...)
	}
	return out
}

// Compress compresses raw record bytes the way Kafka clients do; chunk is
// the xerial block size (0: 64).
func Compress(t testing.TB, codec int8, xerial bool, chunk int, raw []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	switch codec {
	case codecNone:
		return raw
	case codecGzip:
		w := gzip.NewWriter(&buf)
		mustWrite(t, w.Write, raw)
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
	case codecSnappy:
		if !xerial {
			return s2.EncodeSnappy(nil, raw)
		}
		if chunk <= 0 {
			chunk = 64
		}
		out := append([]byte(nil), XerialMagic...)
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
	case codecLZ4:
		w := lz4.NewWriter(&buf)
		mustWrite(t, w.Write, raw)
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
	case codecZstd:
		w, err := zstd.NewWriter(&buf, zstd.WithEncoderConcurrency(1))
		if err != nil {
			t.Fatal(err)
		}
		mustWrite(t, w.Write, raw)
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
	default:
		t.Fatalf("batchtest.Compress: codec %d", codec)
	}
	return buf.Bytes()
}

func mustWrite(t testing.TB, f func([]byte) (int, error), b []byte) {
	t.Helper()
	if _, err := f(b); err != nil {
		t.Fatal(err)
	}
}

// Build produces a complete batch as o describes it.
func Build(t testing.TB, o Opts) []byte {
	t.Helper()
	recs := o.Recs()
	return BuildBody(t, o, recs, Compress(t, o.Codec, o.Xerial, o.XerialChunkSize, EncodeRecords(recs)))
}

// BuildBody wraps an already encoded (maybe compressed, maybe damaged)
// body in a header derived from recs and o.
func BuildBody(t testing.TB, o Opts, recs []Record, body []byte) []byte {
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
	b := make([]byte, HeaderLen, HeaderLen+len(body))
	be := binary.BigEndian
	be.PutUint64(b[OffBaseOffset:], uint64(o.BaseOffset))
	be.PutUint32(b[OffLength:], uint32(HeaderLen-PrefixLen+len(body)))
	be.PutUint32(b[OffLeaderEpoch:], uint32(o.LeaderEpoch))
	b[OffMagic] = 2
	be.PutUint16(b[OffAttributes:], uint16(int16(o.Codec)&7|o.Attrs))
	be.PutUint32(b[OffLastDelta:], uint32(lastDelta))
	be.PutUint64(b[OffBaseTimestamp:], uint64(baseTS))
	be.PutUint64(b[OffMaxTimestamp:], uint64(maxTS))
	be.PutUint64(b[OffProducerID:], uint64(pid))
	be.PutUint16(b[OffProducerEpoch:], uint16(epoch))
	be.PutUint32(b[OffBaseSequence:], uint32(seq))
	be.PutUint32(b[OffRecordCount:], uint32(count))
	b = append(b, body...)
	if !o.NoCRC {
		FixCRC(b)
	}
	return b
}

// FixCRC recomputes a batch's CRC-32C after a deliberate edit.
func FixCRC(b []byte) {
	binary.BigEndian.PutUint32(b[OffCRC:], crc32.Checksum(b[OffAttributes:], crc32.MakeTable(crc32.Castagnoli)))
}

// FixFraming makes b's length field and CRC agree with its bytes, so a
// fuzzer's mutations reach the checks behind the CRC. Shorter than a
// header, b is left alone.
func FixFraming(b []byte) {
	if len(b) < HeaderLen {
		return
	}
	binary.BigEndian.PutUint32(b[OffLength:], uint32(len(b)-PrefixLen))
	FixCRC(b)
}

// MarkerRecord is the one record of a transaction marker (a control
// batch): key ControlRecordKey v0 (type 1 commit, 0 abort), value
// EndTxnMarker v0.
func MarkerRecord(commit bool, coordEpoch int32) Record {
	key := []byte{0, 0, 0, 0}
	if commit {
		key[3] = 1
	}
	val := binary.BigEndian.AppendUint32([]byte{0, 0}, uint32(coordEpoch))
	return Record{Key: key, Value: val}
}
