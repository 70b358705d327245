package recordbatch

import (
	"encoding/binary"
	"hash/crc32"
)

// KV is a record to encode: a nil Value is a tombstone (null value).
type KV struct {
	Key, Value []byte
}

// Build encodes records as one uncompressed magic-2 batch with the given
// timestamp and no producer id, base offset 0, ready for a log's append
// (which assigns the offsets). The broker uses it for records it writes
// itself, such as committed consumer offsets.
func Build(records []KV, timestamp int64) []byte {
	var body []byte
	for i, r := range records {
		var rec []byte
		rec = append(rec, 0)                     // attributes
		rec = binary.AppendVarint(rec, 0)        // timestamp delta
		rec = binary.AppendVarint(rec, int64(i)) // offset delta
		rec = putVarBytes(rec, r.Key)
		rec = putVarBytes(rec, r.Value)
		rec = binary.AppendVarint(rec, 0) // no headers
		body = binary.AppendVarint(body, int64(len(rec)))
		body = append(body, rec...)
	}
	b := make([]byte, HeaderLen, HeaderLen+len(body))
	b = append(b, body...)
	binary.BigEndian.PutUint32(b[offLength:], uint32(len(b)-PrefixLen))
	b[offMagic] = 2
	binary.BigEndian.PutUint32(b[offLastDelta:], uint32(len(records)-1))
	binary.BigEndian.PutUint64(b[offBaseTimestamp:], uint64(timestamp))
	binary.BigEndian.PutUint64(b[offMaxTimestamp:], uint64(timestamp))
	binary.BigEndian.PutUint64(b[offProducerID:], ^uint64(0)) // -1
	binary.BigEndian.PutUint16(b[offProducerEpoch:], ^uint16(0))
	binary.BigEndian.PutUint32(b[offBaseSequence:], ^uint32(0))
	binary.BigEndian.PutUint32(b[offRecordCount:], uint32(len(records)))
	binary.BigEndian.PutUint32(b[offCRC:], crc32.Checksum(b[offAttributes:], castagnoli))
	return b
}

// appendRecord appends one record, with its varint length prefix, in the
// record batch v2 format (see parseRecord).
func appendRecord(dst []byte, r Record) []byte {
	var rec []byte
	rec = append(rec, 0) // attributes
	rec = binary.AppendVarint(rec, r.TimestampDelta)
	rec = binary.AppendVarint(rec, int64(r.OffsetDelta))
	rec = putVarBytes(rec, r.Key)
	rec = putVarBytes(rec, r.Value)
	rec = binary.AppendVarint(rec, int64(len(r.Headers)))
	for _, h := range r.Headers {
		rec = putVarBytes(rec, h[0])
		rec = putVarBytes(rec, h[1])
	}
	dst = binary.AppendVarint(dst, int64(len(rec)))
	return append(dst, rec...)
}

func putVarBytes(b, v []byte) []byte {
	if v == nil {
		return binary.AppendVarint(b, -1)
	}
	b = binary.AppendVarint(b, int64(len(v)))
	return append(b, v...)
}

// BuildTxn is Build for a transaction coordinator's own records that
// belong to producer pid's transaction at epoch (the group coordinator's
// TxnOffsetCommit): a transactional batch of that producer, base sequence
// 0 as Kafka writes it.
func BuildTxn(records []KV, timestamp int64, pid int64, epoch int16) []byte {
	b := Build(records, timestamp)
	binary.BigEndian.PutUint16(b[offAttributes:], attrTransactional)
	binary.BigEndian.PutUint64(b[offProducerID:], uint64(pid))
	binary.BigEndian.PutUint16(b[offProducerEpoch:], uint16(epoch))
	binary.BigEndian.PutUint32(b[offBaseSequence:], 0)
	binary.BigEndian.PutUint32(b[offCRC:], crc32.Checksum(b[offAttributes:], castagnoli))
	return b
}

// AppendRewritten appends to dst a copy of the batch orig, whose header
// info describes, holding only the records keep (compaction's survivors,
// in order): orig's base offset, offset range, timestamps, producer
// fields, leader epoch and compression codec are kept, and the record
// count, length and CRC recomputed. It fails only if the codec does.
func AppendRewritten(dst, orig []byte, info Info, keep []Record) ([]byte, error) {
	var body []byte
	for _, r := range keep {
		body = appendRecord(body, r)
	}
	body, err := compress(info.Codec, body)
	if err != nil {
		return nil, err
	}
	start := len(dst)
	dst = append(dst, orig[:HeaderLen]...)
	dst = append(dst, body...)
	b := dst[start:]
	binary.BigEndian.PutUint32(b[offLength:], uint32(len(b)-PrefixLen))
	binary.BigEndian.PutUint32(b[offRecordCount:], uint32(len(keep)))
	binary.BigEndian.PutUint32(b[offCRC:], crc32.Checksum(b[offAttributes:], castagnoli))
	return dst, nil
}
