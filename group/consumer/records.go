package consumer

import (
	"fmt"
	"slices"
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

func (r resolvedRegex) equal(o resolvedRegex) bool {
	return slices.Equal(r.topics, o.topics) && r.version == o.version && r.timestamp == o.timestamp
}

func key(typ int16, group string, more ...string) []byte {
	w := writer{b: make([]byte, 0, 4+len(group)+8*len(more))}
	w.int16(typ)
	w.string(group)
	for _, s := range more {
		w.string(s)
	}
	return w.b
}

// value starts a value with its version (0 for every type here).
func value() *writer {
	w := &writer{b: make([]byte, 0, 64)}
	w.int16(0)
	return w
}

func (r groupRec) encode(group string) Record {
	rec := Record{Key: key(typeGroupMetadata, group)}
	if r.tomb {
		return rec
	}
	w := value()
	w.int32(r.epoch)
	if r.hash != 0 { // tag 0 MetadataHash, default 0
		w.uvarint(1)
		w.uvarint(0)
		w.uvarint(8)
		w.int64(r.hash)
	} else {
		w.noTags()
	}
	rec.Value = w.b
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
	w.compactNullableString(m.instanceID)
	w.compactNullableString(m.rackID)
	w.compactString(m.clientID)
	w.compactString(m.clientHost)
	w.compactStrings(m.topics)
	w.compactNullableString(m.regex)
	w.int32(m.rebalanceTimeoutMs)
	w.compactNullableString(m.assignor)
	w.noTags() // ClassicMemberMetadata (tag 0): classic members are not supported
	rec.Value = w.b
	return rec
}

func (r targetEpochRec) encode(group string) Record {
	rec := Record{Key: key(typeTargetMetadata, group)}
	if r.tomb {
		return rec
	}
	w := value()
	w.int32(r.epoch)
	w.noTags()
	rec.Value = w.b
	return rec
}

// topicPartitions writes Kafka's []TopicPartitions (TopicId, Partitions),
// topics sorted by id.
func (w *writer) topicPartitions(a assignment) {
	ts := a.topics()
	w.compactArrayLen(len(ts))
	for _, t := range ts {
		w.uuid(t)
		w.compactInt32s(a[t])
		w.noTags()
	}
}

func (r *reader) topicPartitions() assignment {
	n := r.length()
	raw := map[TopicID][]int32{}
	for range max(n, 0) {
		t := r.uuid()
		raw[t] = append(raw[t], r.compactInt32s()...)
		r.tags(nil)
	}
	if n < 0 && r.err == nil {
		r.fail("null partitions")
	}
	return normalize(raw)
}

func (r targetMemberRec) encode(group string) Record {
	rec := Record{Key: key(typeTargetMember, group, r.id)}
	if r.tomb {
		return rec
	}
	w := value()
	w.topicPartitions(r.a)
	w.noTags()
	rec.Value = w.b
	return rec
}

func (r currentRec) encode(group string) Record {
	rec := Record{Key: key(typeCurrentAssignment, group, r.id)}
	if r.tomb {
		return rec
	}
	w := value()
	w.int32(r.cur.epoch)
	w.int32(r.cur.prevEpoch)
	w.int8(int8(r.cur.state))
	w.topicPartitions(r.cur.assigned)
	w.topicPartitions(r.cur.revoking)
	w.noTags()
	rec.Value = w.b
	return rec
}

func (r regexRec) encode(group string) Record {
	rec := Record{Key: key(typeRegex, group, r.regex)}
	if r.tomb {
		return rec
	}
	w := value()
	w.compactStrings(r.r.topics)
	w.int64(r.r.version)
	w.int64(r.r.timestamp)
	w.noTags()
	rec.Value = w.b
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
	r := reader{b: k}
	typ = r.int16()
	if r.err != nil {
		return 0, "", "", r.err
	}
	switch typ {
	case typeGroupMetadata, typePartitionMetadata, typeTargetMetadata:
		group = r.string()
	case typeMemberMetadata, typeTargetMember, typeCurrentAssignment, typeRegex:
		group = r.string()
		sub = r.string()
	default:
		return 0, "", "", nil
	}
	if err := r.done(); err != nil {
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
	var r reader
	if !tomb {
		r.b = v
		if ver := r.int16(); r.err == nil && ver != 0 && typ != typePartitionMetadata {
			return "", nil, fmt.Errorf("consumer: record type %d: unknown value version %d", typ, ver)
		}
	}
	var rec record
	switch typ {
	case typeGroupMetadata:
		g := groupRec{tomb: tomb}
		if !tomb {
			g.epoch = r.int32()
			r.tags(func(tag uint64, data []byte) {
				if tag == 0 {
					if len(data) != 8 {
						r.fail("metadata hash of %d bytes", len(data))
						return
					}
					d := reader{b: data}
					g.hash = d.int64()
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
			m.meta.instanceID = r.compactNullableString()
			m.meta.rackID = r.compactNullableString()
			m.meta.clientID = r.compactString()
			m.meta.clientHost = r.compactString()
			m.meta.topics = sortedNames(r.compactStrings())
			m.meta.regex = r.compactNullableString()
			m.meta.rebalanceTimeoutMs = r.int32()
			m.meta.assignor = r.compactNullableString()
			r.tags(nil) // ClassicMemberMetadata: see the package documentation
		}
		rec = m
	case typeTargetMetadata:
		t := targetEpochRec{tomb: tomb}
		if !tomb {
			t.epoch = r.int32()
			r.tags(nil)
		}
		rec = t
	case typeTargetMember:
		t := targetMemberRec{id: sub, tomb: tomb}
		if !tomb {
			t.a = r.topicPartitions()
			r.tags(nil)
		}
		rec = t
	case typeCurrentAssignment:
		c := currentRec{id: sub, tomb: tomb}
		if !tomb {
			c.cur.epoch = r.int32()
			c.cur.prevEpoch = r.int32()
			c.cur.state = memberStateOf(r.int8())
			c.cur.assigned = r.topicPartitions()
			c.cur.revoking = r.topicPartitions()
			r.tags(nil)
		}
		rec = c
	case typeRegex:
		x := regexRec{regex: sub, tomb: tomb}
		if !tomb {
			x.r.topics = sortedNames(r.compactStrings())
			x.r.version = r.int64()
			x.r.timestamp = r.int64()
			r.tags(nil)
		}
		rec = x
	}
	if !tomb {
		if err := r.done(); err != nil {
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
