package recordbatch

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
)

// Errors a caller classifies with errors.Is. Each maps to one Kafka error
// code in the broker.
var (
	// ErrCorrupt: the bytes are not a well-formed batch (CORRUPT_MESSAGE).
	ErrCorrupt = errors.New("recordbatch: corrupt record batch")
	// ErrTooLarge: a batch over the size allowed (MESSAGE_TOO_LARGE).
	ErrTooLarge = errors.New("recordbatch: record batch too large")
	// ErrUnsupportedMagic: a batch in an older format than magic 2
	// (UNSUPPORTED_FOR_MESSAGE_FORMAT).
	ErrUnsupportedMagic = errors.New("recordbatch: unsupported record batch magic")
)

// Byte positions of the record batch header fields (see the package doc).
const (
	offBaseOffset     = 0
	offLength         = 8
	offLeaderEpoch    = 12
	offMagic          = 16
	offCRC            = 17
	offAttributes     = 21
	offLastDelta      = 23
	offBaseTimestamp  = 27
	offMaxTimestamp   = 35
	offProducerID     = 43
	offProducerEpoch  = 51
	offBaseSequence   = 53
	offRecordCount    = 57
	attrCodecMask     = 0x07
	attrLogAppendTime = 0x08
	attrTransactional = 0x10
	attrControl       = 0x20
)

const (
	// HeaderLen is the length of a batch's header, the bytes before its
	// records.
	HeaderLen = 61
	// PrefixLen is the length of baseOffset and batchLength, the bytes
	// batchLength does not count: what Length reads a batch's size from.
	PrefixLen = 12
)

// Compression codecs, from the attributes' low three bits.
const (
	CodecNone   = 0
	CodecGzip   = 1
	CodecSnappy = 2
	CodecLZ4    = 3
	CodecZstd   = 4
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Info is what the broker needs to know about a batch, from its header.
type Info struct {
	Bytes          int   // whole batch length including the 12-byte prefix
	Codec          int8  // compression codec
	LastDelta      int32 // lastOffsetDelta: records-1 for a batch as produced
	Records        int32
	BaseTimestamp  int64
	MaxTimestamp   int64
	ProducerID     int64
	ProducerEpoch  int16
	BaseSequence   int32
	Transactional  bool
	Control        bool
	LogAppendTimed bool
}

// LastSequence is the sequence number of the batch's last record, with the
// int32 wrap-around Kafka uses.
func (b Info) LastSequence() int32 {
	if b.BaseSequence < 0 {
		return -1
	}
	return int32((int64(b.BaseSequence) + int64(b.LastDelta)) % (1 << 31))
}

// Idempotent reports whether the batch carries a producer id.
func (b Info) Idempotent() bool { return b.ProducerID >= 0 }

// ParseHeader reads a batch header without validating the CRC or records.
// b must hold at least the header; the returned Bytes may exceed len(b).
func ParseHeader(b []byte) (Info, error) {
	if len(b) < HeaderLen {
		return Info{}, fmt.Errorf("%w: %d bytes, need %d for a header", ErrCorrupt, len(b), HeaderLen)
	}
	length := int32(binary.BigEndian.Uint32(b[offLength:]))
	if length < HeaderLen-PrefixLen {
		return Info{}, fmt.Errorf("%w: batch length %d", ErrCorrupt, length)
	}
	if magic := int8(b[offMagic]); magic != 2 {
		return Info{}, fmt.Errorf("%w: magic %d", ErrUnsupportedMagic, magic)
	}
	attrs := int16(binary.BigEndian.Uint16(b[offAttributes:]))
	info := Info{
		Bytes:          int(length) + PrefixLen,
		Codec:          int8(attrs & attrCodecMask),
		LastDelta:      int32(binary.BigEndian.Uint32(b[offLastDelta:])),
		BaseTimestamp:  int64(binary.BigEndian.Uint64(b[offBaseTimestamp:])),
		MaxTimestamp:   int64(binary.BigEndian.Uint64(b[offMaxTimestamp:])),
		ProducerID:     int64(binary.BigEndian.Uint64(b[offProducerID:])),
		ProducerEpoch:  int16(binary.BigEndian.Uint16(b[offProducerEpoch:])),
		BaseSequence:   int32(binary.BigEndian.Uint32(b[offBaseSequence:])),
		Records:        int32(binary.BigEndian.Uint32(b[offRecordCount:])),
		Transactional:  attrs&attrTransactional != 0,
		Control:        attrs&attrControl != 0,
		LogAppendTimed: attrs&attrLogAppendTime != 0,
	}
	return info, nil
}

// BaseOffset and LastOffset read a stored batch's offsets.
func BaseOffset(b []byte) int64 { return int64(binary.BigEndian.Uint64(b[offBaseOffset:])) }
func LastOffset(b []byte) int64 {
	return BaseOffset(b) + int64(int32(binary.BigEndian.Uint32(b[offLastDelta:])))
}

// PartitionLeaderEpoch reads the leader epoch the broker stamped on a
// stored batch (-1: none). b must hold at least 16 bytes.
func PartitionLeaderEpoch(b []byte) int32 {
	return int32(binary.BigEndian.Uint32(b[offLeaderEpoch:]))
}

// Length reads the whole length of a batch (prefix included) from its
// first PrefixLen bytes; it may be nonsense (even negative) for a corrupt
// batch.
func Length(b []byte) int64 {
	return int64(int32(binary.BigEndian.Uint32(b[offLength:]))) + PrefixLen
}

// CheckCRC verifies the CRC-32C over the batch's covered bytes.
func CheckCRC(b []byte) error {
	want := binary.BigEndian.Uint32(b[offCRC:])
	if got := crc32.Checksum(b[offAttributes:], castagnoli); got != want {
		return fmt.Errorf("%w: crc %08x, computed %08x", ErrCorrupt, want, got)
	}
	return nil
}

// Validate checks one produced record batch completely: exact length,
// magic, CRC-32C, codec, record count against the records actually present
// (decompressing when needed), offset deltas, and for a control batch its
// transaction marker (ParseEndTxnMarker). maxBytes bounds the batch
// (message.max.bytes). It never panics on any input.
func Validate(b []byte, maxBytes int) (Info, error) {
	info, err := ParseHeader(b)
	if err != nil {
		return info, err
	}
	if info.Bytes != len(b) {
		return info, fmt.Errorf("%w: batch length says %d bytes, %d present", ErrCorrupt, info.Bytes, len(b))
	}
	if maxBytes > 0 && info.Bytes > maxBytes {
		return info, fmt.Errorf("%w: %d bytes > %d", ErrTooLarge, info.Bytes, maxBytes)
	}
	if err := CheckCRC(b); err != nil {
		return info, err
	}
	if info.Codec > CodecZstd {
		return info, fmt.Errorf("%w: unknown compression codec %d", ErrCorrupt, info.Codec)
	}
	if info.Records <= 0 {
		return info, fmt.Errorf("%w: record count %d", ErrCorrupt, info.Records)
	}
	if info.LastDelta != info.Records-1 {
		// A producer's batch numbers its records 0..n-1; Kafka refuses any
		// other range ("inconsistent batch offset range").
		return info, fmt.Errorf("%w: last offset delta %d for %d records", ErrCorrupt, info.LastDelta, info.Records)
	}
	var n int32
	var recErr error
	err = EachRecord(b, info, func(r Record) bool {
		if r.OffsetDelta != n {
			recErr = fmt.Errorf("%w: record %d has offset delta %d", ErrCorrupt, n, r.OffsetDelta)
			return false
		}
		n++
		return true
	})
	if err == nil {
		err = recErr
	}
	if err != nil {
		return info, err
	}
	if n != info.Records {
		return info, fmt.Errorf("%w: header says %d records, found %d", ErrCorrupt, info.Records, n)
	}
	if info.Control {
		// A control batch must be a well-formed transaction marker (the
		// partition log refuses a produced one anyway: only its leader
		// writes markers).
		if _, err := ParseEndTxnMarker(b, info); err != nil {
			return info, err
		}
	}
	return info, nil
}

// Record is one record's fields that the broker looks at; Key and Value
// alias the batch (or its decompressed body).
type Record struct {
	TimestampDelta int64
	OffsetDelta    int32
	Key, Value     []byte
	Headers        [][2][]byte
}

// maxDecompressed bounds one batch's decompressed body, against
// decompression bombs.
const maxDecompressed = 256 << 20

// EachRecord walks the records of a batch, decompressing if needed, calling
// fn until it returns false. Malformed records end the walk with an error.
func EachRecord(b []byte, info Info, fn func(Record) bool) error {
	return EachRecordWithin(b, info, maxDecompressed, fn)
}

// EachRecordWithin is EachRecord for a reader with a smaller memory budget:
// a compressed batch whose body decompresses past limit bytes is an error.
func EachRecordWithin(b []byte, info Info, limit int, fn func(Record) bool) error {
	if len(b) < HeaderLen {
		// A short read: the segment was truncated under a reader.
		return fmt.Errorf("%w: %d bytes, need %d for a header", ErrCorrupt, len(b), HeaderLen)
	}
	body := b[HeaderLen:]
	if info.Codec != CodecNone {
		var err error
		if body, err = decompress(info.Codec, body, min(limit, maxDecompressed)); err != nil {
			return fmt.Errorf("%w: %v", ErrCorrupt, err)
		}
	}
	for len(body) > 0 {
		length, n := binary.Varint(body)
		if n <= 0 || length < 0 || length > int64(len(body)-n) {
			return fmt.Errorf("%w: bad record length", ErrCorrupt)
		}
		rec, err := parseRecord(body[n : n+int(length)])
		if err != nil {
			return err
		}
		body = body[n+int(length):]
		if !fn(rec) {
			return nil
		}
	}
	return nil
}

// parseRecord decodes one record body:
// attributes int8 | timestampDelta varlong | offsetDelta varint |
// key varbytes | value varbytes | headers varint count × (key varstring, value varbytes)
func parseRecord(b []byte) (Record, error) {
	var r Record
	bad := func(what string) (Record, error) {
		return Record{}, fmt.Errorf("%w: bad record %s", ErrCorrupt, what)
	}
	if len(b) < 1 {
		return bad("attributes")
	}
	b = b[1:]
	var n int
	if r.TimestampDelta, n = binary.Varint(b); n <= 0 {
		return bad("timestamp")
	}
	b = b[n:]
	od, n := binary.Varint(b)
	if n <= 0 || od > 1<<31-1 || od < -1<<31 {
		return bad("offset delta")
	}
	r.OffsetDelta = int32(od)
	b = b[n:]
	var ok bool
	if r.Key, b, ok = varBytes(b); !ok {
		return bad("key")
	}
	if r.Value, b, ok = varBytes(b); !ok {
		return bad("value")
	}
	nh, n := binary.Varint(b)
	if n <= 0 || nh < 0 || nh > int64(len(b)) {
		return bad("header count")
	}
	b = b[n:]
	for range nh {
		var hk, hv []byte
		if hk, b, ok = varBytes(b); !ok {
			return bad("header key")
		}
		if hv, b, ok = varBytes(b); !ok {
			return bad("header value")
		}
		r.Headers = append(r.Headers, [2][]byte{hk, hv})
	}
	if len(b) != 0 {
		return bad("trailing bytes")
	}
	return r, nil
}

func varBytes(b []byte) (v, rest []byte, ok bool) {
	l, n := binary.Varint(b)
	if n <= 0 || l < -1 || l > int64(len(b)-n) {
		return nil, nil, false
	}
	if l == -1 {
		return nil, b[n:], true
	}
	return b[n : n+int(l)], b[n+int(l):], true
}

// Stamp sets the broker-owned fields of a batch about to be appended:
// base offset and leader epoch (neither under the CRC), and for
// LogAppendTime topics the timestamp type and max timestamp, which are under
// the CRC and so recompute it.
func Stamp(b []byte, baseOffset int64, leaderEpoch int32, logAppendTime int64) {
	binary.BigEndian.PutUint64(b[offBaseOffset:], uint64(baseOffset))
	binary.BigEndian.PutUint32(b[offLeaderEpoch:], uint32(leaderEpoch))
	if logAppendTime >= 0 {
		attrs := binary.BigEndian.Uint16(b[offAttributes:])
		binary.BigEndian.PutUint16(b[offAttributes:], attrs|attrLogAppendTime)
		binary.BigEndian.PutUint64(b[offMaxTimestamp:], uint64(logAppendTime))
		binary.BigEndian.PutUint32(b[offCRC:], crc32.Checksum(b[offAttributes:], castagnoli))
	}
}
