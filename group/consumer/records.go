package consumer

import (
	"fmt"
	"slices"

	"github.com/fjordlog/fjord/group/internal/wire"
)

// Record is one record for the offsets topic (__consumer_offsets): Key
// and Value in Kafka's own format (see the package documentation). Value
// nil is a tombstone.
type Record struct {
	Key, Value []byte
}

// Record types: the int16 that starts every key (Kafka's key version,
// since 4.0 the record type's "apiKey").
const (
	typeGroupMetadata     int16 = 3  // ConsumerGroupMetadata: group epoch, metadata hash
	typePartitionMetadata int16 = 4  // ConsumerGroupPartitionMetadata: before Kafka 4.1; only replayed and tombstoned
	typeMemberMetadata    int16 = 5  // ConsumerGroupMemberMetadata: a member's subscription
	typeTargetMetadata    int16 = 6  // ConsumerGroupTargetAssignmentMetadata: target assignment epoch
	typeTargetMember      int16 = 7  // ConsumerGroupTargetAssignmentMember: a member's target assignment
	typeCurrentAssignment int16 = 8  // ConsumerGroupCurrentMemberAssignment: a member's reconciliation state
	typeRegex             int16 = 16 // ConsumerGroupRegularExpression: a resolved regular expression
)

// record is a decoded record of one group. apply (apply.go) changes the
// group accordingly; encode produces its Key and Value.
type record interface {
	encode(group string) Record
	apply(g *Group) error
}

type (
	groupRec struct { // type 3
		tomb  bool
		epoch int32
		hash  int64
	}
	partitionMetaRec struct{ tomb bool } // type 4
	memberRec        struct {            // type 5
		id   string
		tomb bool
		meta memberMeta
	}
	targetEpochRec struct { // type 6
		tomb  bool
		epoch int32
	}
	targetMemberRec struct { // type 7
		id   string
		tomb bool
		a    assignment
	}
	currentRec struct { // type 8
		id   string
		tomb bool
		cur  currentState
	}
	regexRec struct { // type 16
		regex string
		tomb  bool
		r     resolvedRegex
	}
)

// resolvedRegex is a regular expression resolved against an image
// (ConsumerGroupRegularExpressionValue).
//
// Invariant: topics sorted and distinct, non-nil.
type resolvedRegex struct {
	topics    []string
	version   int64 // Kafka: the metadata image's offset; here always 0
	timestamp int64 // when it was resolved (unix ms)
}

// key is a record's key: its type, the group id, and the member id or
// regular expression of the types that have one.
func key(typ int16, group string, more ...string) []byte {
	return wire.Key(typ, append([]string{group}, more...)...)
}

// value starts a value with its version (0 for every type here).
func value() *wire.Writer { return wire.Value(0) }

func (r groupRec) encode(group string) Record {
	rec := Record{Key: key(typeGroupMetadata, group)}
	if r.tomb {
		return rec
	}
	w := value()
	w.Int32(r.epoch)
	if r.hash != 0 { // tag 0 MetadataHash, default 0
		w.Uvarint(1)
		w.Uvarint(0)
		w.Uvarint(8)
		w.Int64(r.hash)
	} else {
		w.NoTags()
	}
	rec.Value = w.B
	return rec
}

func (r partitionMetaRec) encode(group string) Record {
	if !r.tomb {
		panic("consumer: ConsumerGroupPartitionMetadata records are never written")
	}
	return Record{Key: key(typePartitionMetadata, group)}
}

func (r memberRec) encode(group string) Record {
	rec := Record{Key: key(typeMemberMetadata, group, r.id)}
	if r.tomb {
		return rec
	}
	m := r.meta
	w := value()
	w.CompactNullableString(m.instanceID)
	w.CompactNullableString(m.rackID)
	w.CompactString(m.clientID)
	w.CompactString(m.clientHost)
	w.CompactStrings(m.topics)
	w.CompactNullableString(m.regex)
	w.Int32(m.rebalanceTimeoutMs)
	w.CompactNullableString(m.assignor)
	if c := m.classic; c != nil {
		// Tag 0 ClassicMemberMetadata, a nullable struct: Kafka's
		// generated code writes a presence varint (1) before it.
		var t wire.Writer
		t.Uvarint(1)
		t.Int32(c.sessionTimeoutMs)
		t.CompactArrayLen(len(c.protocols))
		for _, p := range c.protocols {
			t.CompactString(p.name)
			t.CompactArrayLen(len(p.metadata)) // COMPACT_BYTES: length+1
			t.B = append(t.B, p.metadata...)
			t.NoTags()
		}
		t.NoTags()
		w.Uvarint(1)
		w.Uvarint(0)
		w.Uvarint(uint64(len(t.B)))
		w.B = append(w.B, t.B...)
	} else {
		w.NoTags()
	}
	rec.Value = w.B
	return rec
}

// readClassicMeta reads tag 0 of ConsumerGroupMemberMetadataValue; nil
// for a null struct.
func readClassicMeta(data []byte) (*classicMeta, error) {
	r := wire.NewReader(data)
	if r.Uvarint() == 0 {
		return nil, r.Done()
	}
	c := &classicMeta{sessionTimeoutMs: r.Int32()}
	r.Array("supported protocols", func() {
		name := r.CompactString()
		n := r.CompactLength()
		if n < 0 {
			r.Failf("null protocol metadata")
			return
		}
		c.protocols = append(c.protocols, classicProtocol{name: name, metadata: slices.Clone(r.Bytes(n))})
		r.Tags(nil)
	})
	r.Tags(nil)
	if err := r.Done(); err != nil {
		return nil, fmt.Errorf("classic member metadata: %w", err)
	}
	if len(c.protocols) == 0 {
		return nil, fmt.Errorf("classic member metadata without protocols")
	}
	return c, nil
}

func (r targetEpochRec) encode(group string) Record {
	rec := Record{Key: key(typeTargetMetadata, group)}
	if r.tomb {
		return rec
	}
	w := value()
	w.Int32(r.epoch)
	w.NoTags()
	rec.Value = w.B
	return rec
}

// readTopicPartitions reads Kafka's []TopicPartitions (TopicId,
// Partitions) as wire.Reader.TopicPartitions does, except that a null
// partition list reads as empty: this package has always accepted it
// (Kafka's schema does not allow it; no writer produces it).
func readTopicPartitions(r *wire.Reader) assignment {
	raw := map[TopicID][]int32{}
	r.Array("topic partitions", func() {
		t := r.UUID()
		raw[t] = append(raw[t], r.CompactNullableInt32s()...)
		r.Tags(nil)
	})
	return normalize(raw)
}

// writeTopicPartitionEpochs writes the []TopicPartitions of
// ConsumerGroupCurrentMemberAssignmentValue (Kafka 4.3, KIP-1251): as
// wire.Writer.TopicPartitions, topics sorted by id, each entry with tag 0
// AssignmentEpochs, the assignment epoch of each of its Partitions, in the
// same order. Kafka writes the tag on every entry.
func writeTopicPartitionEpochs(w *wire.Writer, a assignment, since partitionEpochs) {
	w.CompactArrayLen(len(a))
	for _, t := range a.topics() {
		ps := a[t]
		w.UUID(t)
		w.CompactInt32s(ps)
		es := make([]int32, len(ps))
		for i, p := range ps {
			es[i], _ = since.of(t, p)
		}
		var tag wire.Writer
		tag.CompactInt32s(es)
		w.Uvarint(1) // one tagged field
		w.Uvarint(0) // tag 0
		w.Uvarint(uint64(len(tag.B)))
		w.B = append(w.B, tag.B...)
	}
}

// readTopicPartitionEpochs reads what writeTopicPartitionEpochs writes
// into a and since (which may already hold the other list's epochs).
// Where tag 0 is absent or null (a record written before KIP-1251) every
// partition gets defaultEpoch, as Kafka does (it passes the record's member
// epoch, at least 0). A partition listed twice keeps the higher epoch.
func readTopicPartitionEpochs(r *wire.Reader, since partitionEpochs, defaultEpoch int32) assignment {
	raw := map[TopicID][]int32{}
	r.Array("topic partitions", func() {
		t := r.UUID()
		ps := r.CompactNullableInt32s()
		var es []int32
		r.Tags(func(tag uint64, data []byte) {
			if tag != 0 {
				return
			}
			tr := wire.NewReader(data)
			es = tr.CompactNullableInt32s()
			if err := tr.Done(); err != nil {
				r.Failf("assignment epochs: %v", err)
			}
		})
		if es != nil && len(es) != len(ps) {
			r.Failf("%d assignment epochs for %d partitions", len(es), len(ps))
			return
		}
		for i, p := range ps {
			e := defaultEpoch
			if es != nil {
				e = es[i]
			}
			if old, ok := since.of(t, p); ok {
				e = max(e, old)
			}
			since.set(t, p, e)
		}
		raw[t] = append(raw[t], ps...)
	})
	return normalize(raw)
}

func (r targetMemberRec) encode(group string) Record {
	rec := Record{Key: key(typeTargetMember, group, r.id)}
	if r.tomb {
		return rec
	}
	w := value()
	w.TopicPartitions(r.a)
	w.NoTags()
	rec.Value = w.B
	return rec
}

func (r currentRec) encode(group string) Record {
	rec := Record{Key: key(typeCurrentAssignment, group, r.id)}
	if r.tomb {
		return rec
	}
	w := value()
	w.Int32(r.cur.epoch)
	w.Int32(r.cur.prevEpoch)
	w.Int8(int8(r.cur.state))
	writeTopicPartitionEpochs(w, r.cur.assigned, r.cur.since)
	writeTopicPartitionEpochs(w, r.cur.revoking, r.cur.since)
	w.NoTags()
	rec.Value = w.B
	return rec
}

func (r regexRec) encode(group string) Record {
	rec := Record{Key: key(typeRegex, group, r.regex)}
	if r.tomb {
		return rec
	}
	w := value()
	w.CompactStrings(r.r.topics)
	w.Int64(r.r.version)
	w.Int64(r.r.timestamp)
	w.NoTags()
	rec.Value = w.B
	return rec
}

// GroupOfKey reports the group id a stored record's key belongs to, and
// whether the key is one of this package's record types (3-8 and 16; 4 is
// Kafka's pre-4.1 ConsumerGroupPartitionMetadata, which this package only
// replays and deletes).
func GroupOfKey(k []byte) (string, bool) {
	typ, group, _, err := parseKey(k)
	return group, err == nil && typ != 0
}

// parseKey splits a key into its type, group id and second string (member
// id or regular expression; "" for the group-level types). typ is 0 for a
// key of another record type.
func parseKey(k []byte) (typ int16, group, sub string, err error) {
	r := wire.NewReader(k)
	typ = r.Int16()
	if err := r.Err(); err != nil {
		return 0, "", "", fmt.Errorf("consumer: key: %w", err)
	}
	switch typ {
	case typeGroupMetadata, typePartitionMetadata, typeTargetMetadata:
		group = r.KeyString()
	case typeMemberMetadata, typeTargetMember, typeCurrentAssignment, typeRegex:
		group = r.KeyString()
		sub = r.KeyString()
	default:
		return 0, "", "", nil
	}
	if err := r.Done(); err != nil {
		return 0, "", "", fmt.Errorf("consumer: key of type %d: %w", typ, err)
	}
	return typ, group, sub, nil
}

// decode parses a stored record of this package's types.
func decode(k, v []byte) (string, record, error) {
	typ, group, sub, err := parseKey(k)
	if err != nil {
		return "", nil, err
	}
	if typ == 0 {
		return "", nil, fmt.Errorf("consumer: key %x is not a consumer group record", k[:min(len(k), 2)])
	}
	tomb := v == nil
	r := wire.NewReader(v)
	if !tomb {
		if ver := r.Int16(); r.Err() == nil && ver != 0 && typ != typePartitionMetadata {
			return "", nil, fmt.Errorf("consumer: record type %d: unknown value version %d", typ, ver)
		}
	}
	var rec record
	switch typ {
	case typeGroupMetadata:
		g := groupRec{tomb: tomb}
		if !tomb {
			g.epoch = r.Int32()
			r.Tags(func(tag uint64, data []byte) {
				if tag == 0 {
					if len(data) != 8 {
						r.Failf("metadata hash of %d bytes", len(data))
						return
					}
					g.hash = wire.NewReader(data).Int64()
				}
			})
		}
		rec = g
	case typePartitionMetadata:
		// The pre-4.1 subscription metadata: its content is replaced by the
		// metadata hash, only its presence matters (it is tombstoned at the
		// next epoch bump, as Kafka 4.1 does).
		return group, partitionMetaRec{tomb: tomb}, nil
	case typeMemberMetadata:
		m := memberRec{id: sub, tomb: tomb}
		if !tomb {
			m.meta.instanceID = r.CompactNullableString()
			m.meta.rackID = r.CompactNullableString()
			m.meta.clientID = r.CompactString()
			m.meta.clientHost = r.CompactString()
			m.meta.topics = sortedNames(r.CompactNullableStrings())
			m.meta.regex = r.CompactNullableString()
			m.meta.rebalanceTimeoutMs = r.Int32()
			m.meta.assignor = r.CompactNullableString()
			r.Tags(func(tag uint64, data []byte) {
				if tag != 0 {
					return
				}
				c, err := readClassicMeta(data)
				if err != nil {
					r.Failf("%v", err)
					return
				}
				m.meta.classic = c
			})
		}
		rec = m
	case typeTargetMetadata:
		t := targetEpochRec{tomb: tomb}
		if !tomb {
			t.epoch = r.Int32()
			r.Tags(nil)
		}
		rec = t
	case typeTargetMember:
		t := targetMemberRec{id: sub, tomb: tomb}
		if !tomb {
			t.a = readTopicPartitions(r)
			r.Tags(nil)
		}
		rec = t
	case typeCurrentAssignment:
		c := currentRec{id: sub, tomb: tomb}
		if !tomb {
			c.cur.epoch = r.Int32()
			c.cur.prevEpoch = r.Int32()
			c.cur.state = memberStateOf(r.Int8())
			c.cur.since = partitionEpochs{}
			c.cur.assigned = readTopicPartitionEpochs(r, c.cur.since, max(c.cur.epoch, 0))
			c.cur.revoking = readTopicPartitionEpochs(r, c.cur.since, max(c.cur.epoch, 0))
			r.Tags(nil)
		}
		rec = c
	case typeRegex:
		x := regexRec{regex: sub, tomb: tomb}
		if !tomb {
			x.r.topics = sortedNames(r.CompactNullableStrings())
			x.r.version = r.Int64()
			x.r.timestamp = r.Int64()
			r.Tags(nil)
		}
		rec = x
	}
	if !tomb {
		if err := r.Done(); err != nil {
			return "", nil, fmt.Errorf("consumer: value of record type %d: %w", typ, err)
		}
	}
	return group, rec, nil
}

// sortedNames returns names sorted and distinct, never nil.
func sortedNames(names []string) []string {
	out := slices.Clone(names)
	if out == nil {
		out = []string{}
	}
	slices.Sort(out)
	return slices.Compact(out)
}
