package sharepart

import (
	"errors"
	"fmt"
	"math"

	"github.com/fjordlog/fjord/group/internal/wire"
)

// The __share_group_state record formats, in Kafka's encoding
// (group/internal/wire). See the package documentation for the byte layout.

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
	w := wire.Writer{B: wire.Key(int16(t), k.Group)}
	w.UUID(k.TopicID)
	w.Int32(k.Partition)
	return w.B
}

// EncodeSnapshot returns the ShareSnapshot record of v for k.
func EncodeSnapshot(k Key, v *SnapshotValue) Record {
	w := wire.Value(0)
	w.Int32(v.SnapshotEpoch)
	w.Int32(v.StateEpoch)
	w.Int32(v.LeaderEpoch)
	w.Int64(v.StartOffset)
	w.Int64(v.CreateTimestamp)
	w.Int64(v.WriteTimestamp)
	writeBatches(w, v.StateBatches)
	writeCompleteCount(w, v.DeliveryCompleteCount)
	return Record{Key: EncodeKey(SnapshotRecord, k), Value: w.B}
}

// EncodeUpdate returns the ShareUpdate record of v for k.
func EncodeUpdate(k Key, v *UpdateValue) Record {
	w := wire.Value(0)
	w.Int32(v.SnapshotEpoch)
	w.Int32(v.LeaderEpoch)
	w.Int64(v.StartOffset)
	writeBatches(w, v.StateBatches)
	writeCompleteCount(w, v.DeliveryCompleteCount)
	return Record{Key: EncodeKey(UpdateRecord, k), Value: w.B}
}

// Tombstone returns the record that deletes k's state, as Kafka's share
// coordinator writes it: a snapshot key with no value.
func Tombstone(k Key) Record {
	return Record{Key: EncodeKey(SnapshotRecord, k)}
}

// writeBatches writes a compact array of StateBatch structs, each with an
// empty tagged-field section.
func writeBatches(w *wire.Writer, batches []StateBatch) {
	w.CompactArrayLen(len(batches))
	for _, sb := range batches {
		w.Int64(sb.FirstOffset)
		w.Int64(sb.LastOffset)
		w.Int8(int8(sb.DeliveryState))
		w.Int16(sb.DeliveryCount)
		w.NoTags()
	}
}

// writeCompleteCount writes the top-level tagged fields: DeliveryCompleteCount
// as tag 0 unless it has its default, -1.
func writeCompleteCount(w *wire.Writer, n int32) {
	if n == -1 {
		w.NoTags()
		return
	}
	w.Uvarint(1) // one tag
	w.Uvarint(0) // tag 0
	w.Uvarint(4) // of 4 bytes
	w.Int32(n)
}

// DecodeKey decodes a __share_group_state key.
func DecodeKey(b []byte) (RecordType, Key, error) {
	r := wire.NewReader(b)
	t := RecordType(r.Int16())
	k := Key{Group: r.KeyString(), TopicID: r.UUID(), Partition: r.Int32()}
	if err := r.Done(); err != nil {
		return 0, Key{}, fmt.Errorf("%w: %w (in the key)", ErrCorrupt, err)
	}
	if t != SnapshotRecord && t != UpdateRecord {
		return 0, Key{}, corruptf("key: unknown record type %d", t)
	}
	return t, k, nil
}

// DecodeRecord decodes one __share_group_state record.
func DecodeRecord(rec Record) (Decoded, error) {
	t, k, err := DecodeKey(rec.Key)
	if err != nil {
		return Decoded{}, err
	}
	out := Decoded{Type: t, Key: k}
	if rec.Value == nil {
		return out, nil
	}
	r := wire.NewReader(rec.Value)
	if v := r.Int16(); r.Err() == nil && v != 0 {
		return Decoded{}, corruptf("%s: unsupported value version %d", k, v)
	}
	switch t {
	case SnapshotRecord:
		v := &SnapshotValue{
			SnapshotEpoch:   r.Int32(),
			StateEpoch:      r.Int32(),
			LeaderEpoch:     r.Int32(),
			StartOffset:     r.Int64(),
			CreateTimestamp: r.Int64(),
			WriteTimestamp:  r.Int64(),
		}
		v.StateBatches = readBatches(r)
		v.DeliveryCompleteCount = readCompleteCount(r)
		out.Snapshot = v
	case UpdateRecord:
		v := &UpdateValue{
			SnapshotEpoch: r.Int32(),
			LeaderEpoch:   r.Int32(),
			StartOffset:   r.Int64(),
		}
		v.StateBatches = readBatches(r)
		v.DeliveryCompleteCount = readCompleteCount(r)
		out.Update = v
	}
	if err := r.Done(); err != nil {
		return Decoded{}, fmt.Errorf("%w: %w (in the value of %s)", ErrCorrupt, err, k)
	}
	return out, nil
}

// batchSize is the smallest encoding of one StateBatch.
const batchSize = 8 + 8 + 1 + 2 + 1

// readBatches reads the StateBatches array, which may not be null.
func readBatches(r *wire.Reader) []StateBatch {
	n := r.Uvarint()
	if r.Err() != nil {
		return nil
	}
	if n == 0 {
		r.Failf("null state batches")
		return nil
	}
	n--
	if n > uint64(r.Len()/batchSize) {
		r.Failf("%d state batches in %d bytes", n, r.Len())
		return nil
	}
	out := make([]StateBatch, 0, n)
	for range n {
		sb := StateBatch{
			FirstOffset:   r.Int64(),
			LastOffset:    r.Int64(),
			DeliveryState: State(r.Int8()),
			DeliveryCount: r.Int16(),
		}
		r.Tags(nil)
		out = append(out, sb)
	}
	return out
}

// readCompleteCount reads the top-level tagged fields, returning tag 0
// (DeliveryCompleteCount) or its default -1. Tags must ascend.
func readCompleteCount(r *wire.Reader) int32 {
	count := int32(-1)
	prev := int64(-1)
	r.Tags(func(tag uint64, data []byte) {
		if int64(tag) <= prev {
			r.Failf("tagged fields out of order")
			return
		}
		prev = int64(min(tag, math.MaxInt32))
		if tag != 0 {
			return
		}
		if len(data) != 4 {
			r.Failf("DeliveryCompleteCount of %d bytes", len(data))
			return
		}
		count = wire.NewReader(data).Int32()
	})
	return count
}
