package sharepart

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
)

// The __share_group_state record formats, encoded by hand. See the package
// documentation for the byte layout.

// Key names one share-partition: share group, topic and partition.
type Key struct {
	Group     string
	TopicID   [16]byte
	Partition int32
}

func (k Key) String() string {
	return fmt.Sprintf("%s/%x/%d", k.Group, k.TopicID, k.Partition)
}

// Record is one record for the __share_group_state topic: the key and value
// bytes of a Kafka record. A nil Value is a tombstone.
type Record struct {
	Key, Value []byte
}

// RecordType is the int16 that starts a key: Kafka's coordinator record
// type (the apiKey of ShareSnapshotKey and ShareUpdateKey).
type RecordType int16

const (
	// SnapshotRecord keys hold ShareSnapshotValue: the full state.
	SnapshotRecord RecordType = 0
	// UpdateRecord keys hold ShareUpdateValue: a delta on the last snapshot.
	UpdateRecord RecordType = 1
)

// StateBatch is the state of the records [FirstOffset, LastOffset], as
// Kafka's PersisterStateBatch.
type StateBatch struct {
	FirstOffset, LastOffset int64
	// DeliveryState is Available, Acknowledged or Archived (0, 2, 4).
	DeliveryState State
	DeliveryCount int16
}

// SnapshotValue is Kafka's ShareSnapshotValue, version 0.
type SnapshotValue struct {
	SnapshotEpoch   int32
	StateEpoch      int32
	LeaderEpoch     int32
	StartOffset     int64
	CreateTimestamp int64
	WriteTimestamp  int64
	// DeliveryCompleteCount (KIP-1226, tagged field 0) is the number of
	// acknowledged or archived offsets at or above StartOffset; -1 unknown.
	DeliveryCompleteCount int32
	StateBatches          []StateBatch
}

// UpdateValue is Kafka's ShareUpdateValue, version 0.
type UpdateValue struct {
	SnapshotEpoch int32
	LeaderEpoch   int32
	// StartOffset is the new SPSO, or -1 if it did not change.
	StartOffset           int64
	DeliveryCompleteCount int32 // as SnapshotValue's
	StateBatches          []StateBatch
}

// Decoded is one decoded record. Exactly one of Snapshot and Update is set,
// or neither for a tombstone (which Kafka writes with a snapshot key).
type Decoded struct {
	Type     RecordType
	Key      Key
	Snapshot *SnapshotValue
	Update   *UpdateValue
}

// ErrCorrupt marks records that cannot be decoded or do not describe a
// possible state.
var ErrCorrupt = errors.New("sharepart: corrupt share state record")

func corruptf(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrCorrupt, fmt.Sprintf(format, args...))
}

// EncodeKey returns the key bytes of a record of type t for k.
func EncodeKey(t RecordType, k Key) []byte {
	b := make([]byte, 0, 2+2+len(k.Group)+16+4)
	b = binary.BigEndian.AppendUint16(b, uint16(t))
	b = binary.BigEndian.AppendUint16(b, uint16(len(k.Group)))
	b = append(b, k.Group...)
	b = append(b, k.TopicID[:]...)
	return binary.BigEndian.AppendUint32(b, uint32(k.Partition))
}

// EncodeSnapshot returns the ShareSnapshot record of v for k.
func EncodeSnapshot(k Key, v *SnapshotValue) Record {
	b := make([]byte, 0, 64+20*len(v.StateBatches))
	b = binary.BigEndian.AppendUint16(b, 0) // value version
	b = binary.BigEndian.AppendUint32(b, uint32(v.SnapshotEpoch))
	b = binary.BigEndian.AppendUint32(b, uint32(v.StateEpoch))
	b = binary.BigEndian.AppendUint32(b, uint32(v.LeaderEpoch))
	b = binary.BigEndian.AppendUint64(b, uint64(v.StartOffset))
	b = binary.BigEndian.AppendUint64(b, uint64(v.CreateTimestamp))
	b = binary.BigEndian.AppendUint64(b, uint64(v.WriteTimestamp))
	b = appendBatches(b, v.StateBatches)
	b = appendCompleteCount(b, v.DeliveryCompleteCount)
	return Record{Key: EncodeKey(SnapshotRecord, k), Value: b}
}

// EncodeUpdate returns the ShareUpdate record of v for k.
func EncodeUpdate(k Key, v *UpdateValue) Record {
	b := make([]byte, 0, 32+20*len(v.StateBatches))
	b = binary.BigEndian.AppendUint16(b, 0) // value version
	b = binary.BigEndian.AppendUint32(b, uint32(v.SnapshotEpoch))
	b = binary.BigEndian.AppendUint32(b, uint32(v.LeaderEpoch))
	b = binary.BigEndian.AppendUint64(b, uint64(v.StartOffset))
	b = appendBatches(b, v.StateBatches)
	b = appendCompleteCount(b, v.DeliveryCompleteCount)
	return Record{Key: EncodeKey(UpdateRecord, k), Value: b}
}

// Tombstone returns the record that deletes k's state, as Kafka's share
// coordinator writes it: a snapshot key with no value.
func Tombstone(k Key) Record {
	return Record{Key: EncodeKey(SnapshotRecord, k)}
}

// appendBatches writes a compact array of StateBatch structs, each with an
// empty tagged-field section.
func appendBatches(b []byte, batches []StateBatch) []byte {
	b = binary.AppendUvarint(b, uint64(len(batches))+1)
	for _, sb := range batches {
		b = binary.BigEndian.AppendUint64(b, uint64(sb.FirstOffset))
		b = binary.BigEndian.AppendUint64(b, uint64(sb.LastOffset))
		b = append(b, byte(sb.DeliveryState))
		b = binary.BigEndian.AppendUint16(b, uint16(sb.DeliveryCount))
		b = append(b, 0) // no tagged fields
	}
	return b
}

// appendCompleteCount writes the top-level tagged fields: DeliveryCompleteCount
// as tag 0 unless it has its default, -1.
func appendCompleteCount(b []byte, n int32) []byte {
	if n == -1 {
		return append(b, 0)
	}
	b = append(b, 1, 0, 4) // one tag; tag 0; 4 bytes
	return binary.BigEndian.AppendUint32(b, uint32(n))
}

// DecodeKey decodes a __share_group_state key.
func DecodeKey(b []byte) (RecordType, Key, error) {
	d := decoder{b: b}
	t := RecordType(d.int16())
	n := d.int16()
	if d.err == nil && n < 0 {
		d.fail("null group id")
	}
	k := Key{Group: string(d.bytes(int(n)))}
	copy(k.TopicID[:], d.bytes(16))
	k.Partition = d.int32()
	d.end()
	if d.err != nil {
		return 0, Key{}, fmt.Errorf("%w (in the key)", d.err)
	}
	if t != SnapshotRecord && t != UpdateRecord {
		return 0, Key{}, corruptf("key: unknown record type %d", t)
	}
	return t, k, nil
}

// DecodeRecord decodes one __share_group_state record.
func DecodeRecord(r Record) (Decoded, error) {
	t, k, err := DecodeKey(r.Key)
	if err != nil {
		return Decoded{}, err
	}
	out := Decoded{Type: t, Key: k}
	if r.Value == nil {
		return out, nil
	}
	d := decoder{b: r.Value}
	if v := d.int16(); d.err == nil && v != 0 {
		return Decoded{}, corruptf("%s: unsupported value version %d", k, v)
	}
	switch t {
	case SnapshotRecord:
		v := &SnapshotValue{
			SnapshotEpoch:   d.int32(),
			StateEpoch:      d.int32(),
			LeaderEpoch:     d.int32(),
			StartOffset:     d.int64(),
			CreateTimestamp: d.int64(),
			WriteTimestamp:  d.int64(),
		}
		v.StateBatches = d.batches()
		v.DeliveryCompleteCount = d.completeCount()
		out.Snapshot = v
	case UpdateRecord:
		v := &UpdateValue{
			SnapshotEpoch: d.int32(),
			LeaderEpoch:   d.int32(),
			StartOffset:   d.int64(),
		}
		v.StateBatches = d.batches()
		v.DeliveryCompleteCount = d.completeCount()
		out.Update = v
	}
	d.end()
	if d.err != nil {
		return Decoded{}, fmt.Errorf("%w (in the value of %s)", d.err, k)
	}
	return out, nil
}

// decoder reads Kafka's binary primitives with a sticky error: after the
// first failure every read returns zero.
type decoder struct {
	b   []byte
	err error
}

func (d *decoder) fail(format string, args ...any) {
	if d.err == nil {
		d.err = corruptf(format, args...)
	}
}

func (d *decoder) bytes(n int) []byte {
	if d.err != nil {
		return nil
	}
	if n < 0 || n > len(d.b) {
		d.fail("need %d bytes, have %d", n, len(d.b))
		return nil
	}
	v := d.b[:n]
	d.b = d.b[n:]
	return v
}

func (d *decoder) int8() int8 {
	if b := d.bytes(1); b != nil {
		return int8(b[0])
	}
	return 0
}

func (d *decoder) int16() int16 {
	if b := d.bytes(2); b != nil {
		return int16(binary.BigEndian.Uint16(b))
	}
	return 0
}

func (d *decoder) int32() int32 {
	if b := d.bytes(4); b != nil {
		return int32(binary.BigEndian.Uint32(b))
	}
	return 0
}

func (d *decoder) int64() int64 {
	if b := d.bytes(8); b != nil {
		return int64(binary.BigEndian.Uint64(b))
	}
	return 0
}

func (d *decoder) uvarint() uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.fail("bad unsigned varint")
		return 0
	}
	d.b = d.b[n:]
	return v
}

// batchSize is the smallest encoding of one StateBatch.
const batchSize = 8 + 8 + 1 + 2 + 1

func (d *decoder) batches() []StateBatch {
	n := d.uvarint()
	if d.err != nil {
		return nil
	}
	if n == 0 {
		d.fail("null state batches")
		return nil
	}
	n--
	if n > uint64(len(d.b)/batchSize) {
		d.fail("%d state batches in %d bytes", n, len(d.b))
		return nil
	}
	out := make([]StateBatch, 0, n)
	for range n {
		sb := StateBatch{
			FirstOffset:   d.int64(),
			LastOffset:    d.int64(),
			DeliveryState: State(d.int8()),
			DeliveryCount: d.int16(),
		}
		d.skipTags()
		out = append(out, sb)
	}
	return out
}

// skipTags skips a tagged-field section this package has no use for.
func (d *decoder) skipTags() {
	for n := d.uvarint(); n > 0 && d.err == nil; n-- {
		d.uvarint()
		d.bytes(d.size())
	}
}

// size reads a tagged field's size.
func (d *decoder) size() int {
	n := d.uvarint()
	if n > math.MaxInt32 {
		d.fail("tagged field of %d bytes", n)
		return 0
	}
	return int(n)
}

// completeCount reads the top-level tagged fields, returning tag 0
// (DeliveryCompleteCount) or its default -1.
func (d *decoder) completeCount() int32 {
	count := int32(-1)
	prev := int64(-1)
	for n := d.uvarint(); n > 0 && d.err == nil; n-- {
		tag := d.uvarint()
		if d.err == nil && int64(tag) <= prev {
			d.fail("tagged fields out of order")
		}
		prev = int64(min(tag, math.MaxInt32))
		size := d.size()
		if tag != 0 {
			d.bytes(size)
			continue
		}
		if d.err == nil && size != 4 {
			d.fail("DeliveryCompleteCount of %d bytes", size)
		}
		count = d.int32()
	}
	return count
}

func (d *decoder) end() {
	if d.err == nil && len(d.b) > 0 {
		d.fail("%d trailing bytes", len(d.b))
	}
}
