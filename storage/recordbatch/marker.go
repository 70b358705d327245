package recordbatch

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
)

// EndTxnMarker is what a control batch's one record says: Kafka's
// ControlRecordKey (int16 version, int16 type: 0 abort, 1 commit) and
// EndTxnMarker value (int16 version, int32 coordinator epoch).
type EndTxnMarker struct {
	Commit           bool
	CoordinatorEpoch int32
}

// Control record types (Kafka's ControlRecordType) that end a transaction.
const (
	controlTypeAbort  = 0
	controlTypeCommit = 1
)

// ParseEndTxnMarker checks a control batch, whose framing and CRC have
// been checked (Validate does, and so must a reader of stored batches),
// and returns its marker: the batch must be transactional with a producer
// id, and hold exactly one record whose key is a control record key of
// type abort or commit and whose value is an end-transaction marker. As in
// Kafka, versions above 0 are read as version 0 (negative ones are
// refused) and bytes after the fields are ignored. Malformed input is
// ErrCorrupt; it never panics.
func ParseEndTxnMarker(b []byte, info Info) (EndTxnMarker, error) {
	var m EndTxnMarker
	switch {
	case !info.Control:
		return m, fmt.Errorf("%w: not a control batch", ErrCorrupt)
	case !info.Transactional:
		return m, fmt.Errorf("%w: control batch is not transactional", ErrCorrupt)
	case !info.Idempotent():
		return m, fmt.Errorf("%w: control batch has no producer id", ErrCorrupt)
	case info.Records != 1:
		return m, fmt.Errorf("%w: control batch has %d records, want 1", ErrCorrupt, info.Records)
	}
	n := 0
	var recErr error
	err := EachRecord(b, info, func(r Record) bool {
		n++
		if n > 1 {
			recErr = fmt.Errorf("%w: control batch holds more than one record", ErrCorrupt)
			return false
		}
		m, recErr = parseMarkerRecord(r)
		return recErr == nil
	})
	if err == nil {
		err = recErr
	}
	if err == nil && n != 1 {
		err = fmt.Errorf("%w: control batch holds %d records", ErrCorrupt, n)
	}
	return m, err
}

func parseMarkerRecord(r Record) (EndTxnMarker, error) {
	var m EndTxnMarker
	if len(r.Key) < 4 {
		return m, fmt.Errorf("%w: control record key of %d bytes", ErrCorrupt, len(r.Key))
	}
	if v := int16(binary.BigEndian.Uint16(r.Key)); v < 0 {
		return m, fmt.Errorf("%w: control record key version %d", ErrCorrupt, v)
	}
	switch t := int16(binary.BigEndian.Uint16(r.Key[2:])); t {
	case controlTypeAbort:
	case controlTypeCommit:
		m.Commit = true
	default:
		return m, fmt.Errorf("%w: control record type %d is not a transaction marker", ErrCorrupt, t)
	}
	if len(r.Value) < 6 {
		return m, fmt.Errorf("%w: end transaction marker value of %d bytes", ErrCorrupt, len(r.Value))
	}
	if v := int16(binary.BigEndian.Uint16(r.Value)); v < 0 {
		return m, fmt.Errorf("%w: end transaction marker version %d", ErrCorrupt, v)
	}
	m.CoordinatorEpoch = int32(binary.BigEndian.Uint32(r.Value[2:]))
	return m, nil
}

// BuildMarker encodes marker m, ending producer pid's transaction at
// epoch, as Kafka's leaders write it: magic 2, uncompressed,
// transactional and control attributes, one record (offset delta 0, no
// headers, key and value version 0), both timestamps ts, base sequence -1,
// base offset 0 and leader epoch 0 until stamped.
func BuildMarker(m EndTxnMarker, pid int64, epoch int16, ts int64) []byte {
	typ := uint16(controlTypeAbort)
	if m.Commit {
		typ = controlTypeCommit
	}
	var key [4]byte
	binary.BigEndian.PutUint16(key[2:], typ)
	var val [6]byte
	binary.BigEndian.PutUint32(val[2:], uint32(m.CoordinatorEpoch))
	body := appendRecord(nil, Record{Key: key[:], Value: val[:]})
	b := make([]byte, HeaderLen, HeaderLen+len(body))
	b = append(b, body...)
	binary.BigEndian.PutUint32(b[offLength:], uint32(len(b)-PrefixLen))
	b[offMagic] = 2
	binary.BigEndian.PutUint16(b[offAttributes:], attrTransactional|attrControl)
	binary.BigEndian.PutUint64(b[offBaseTimestamp:], uint64(ts))
	binary.BigEndian.PutUint64(b[offMaxTimestamp:], uint64(ts))
	binary.BigEndian.PutUint64(b[offProducerID:], uint64(pid))
	binary.BigEndian.PutUint16(b[offProducerEpoch:], uint16(epoch))
	binary.BigEndian.PutUint32(b[offBaseSequence:], ^uint32(0))
	binary.BigEndian.PutUint32(b[offRecordCount:], 1)
	binary.BigEndian.PutUint32(b[offCRC:], crc32.Checksum(b[offAttributes:], castagnoli))
	return b
}
