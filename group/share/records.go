package share

import (
	"fmt"
	"slices"
)

// Record is one record for the offsets topic (__consumer_offsets): Key and
// Value in Kafka's own format (drawn in the package documentation). Value
// nil is a tombstone.
type Record struct {
	Key, Value []byte
}

// Record types: the int16 that starts every key (Kafka's key version; since
// Kafka 4.0 the record type's "apiKey" in its coordinator-key schema).
const (
	typePartitionMetadata int16 = 9  // ShareGroupPartitionMetadata: Kafka 4.0 only; replayed as nothing
	typeMemberMetadata    int16 = 10 // ShareGroupMemberMetadata: a member's subscription and client
	typeGroupMetadata     int16 = 11 // ShareGroupMetadata: group epoch, metadata hash
	typeTargetMetadata    int16 = 12 // ShareGroupTargetAssignmentMetadata: target assignment epoch
	typeTargetMember      int16 = 13 // ShareGroupTargetAssignmentMember: a member's target assignment
	typeCurrentAssignment int16 = 14 // ShareGroupCurrentMemberAssignment: a member's epoch and assignment
	typeStatePartitions   int16 = 15 // ShareGroupStatePartitionMetadata: share-partition state initialized
)

// memberStateStable is Kafka's MemberState.STABLE, the only state a share
// group member is ever in (there is no revocation to wait for).
const memberStateStable int8 = 0

// record is a decoded record of one group. The live path builds records and
// applies them (apply.go) exactly as Replay does, so a group rebuilt from
// its records equals the group that wrote them.
//
// Fields used per type: member for 10, 13, 14; meta for 10; epoch and hash
// for 11; epoch for 12; a for 13; cur for 14; sp for 15. tomb: a tombstone
// (no value).
type record struct {
	typ    int16
	member string
	tomb   bool

	meta  memberMeta
	epoch int32
	hash  int64
	a     assignment
	cur   currentState
	sp    statePartitions
}

// statePartitions is ShareGroupStatePartitionMetadataValue: which
// share-partitions have state (see doc.go on how this package uses it).
//
// Invariant: each list sorted by topic id with distinct ids and normalized
// partitions; deleting entries have no partitions.
type statePartitions struct {
	initializing, initialized, deleting []spTopic
}

type spTopic struct {
	id    TopicID
	name  string
	parts []int32
}

func (s statePartitions) empty() bool {
	return len(s.initializing) == 0 && len(s.initialized) == 0 && len(s.deleting) == 0
}

func (s statePartitions) equal(o statePartitions) bool {
	eq := func(a, b []spTopic) bool {
		return slices.EqualFunc(a, b, func(x, y spTopic) bool {
			return x.id == y.id && x.name == y.name && slices.Equal(x.parts, y.parts)
		})
	}
	return eq(s.initializing, o.initializing) && eq(s.initialized, o.initialized) && eq(s.deleting, o.deleting)
}

func key(typ int16, group string, member ...string) []byte {
	w := writer{b: make([]byte, 0, 4+len(group)+40)}
	w.int16(typ)
	w.string(group)
	for _, m := range member {
		w.string(m)
	}
	return w.b
}

func (r record) encode(group string) Record {
	var rec Record
	switch r.typ {
	case typeMemberMetadata, typeTargetMember, typeCurrentAssignment:
		rec.Key = key(r.typ, group, r.member)
	default:
		rec.Key = key(r.typ, group)
	}
	if r.tomb {
		return rec
	}
	w := &writer{b: make([]byte, 0, 64)}
	w.int16(0) // every value here is version 0
	switch r.typ {
	case typeMemberMetadata:
		w.compactNullableString(r.meta.rack)
		w.compactString(r.meta.clientID)
		w.compactString(r.meta.clientHost)
		w.compactStrings(r.meta.topics)
	case typeGroupMetadata:
		w.int32(r.epoch)
		w.int64(r.hash)
	case typeTargetMetadata:
		w.int32(r.epoch)
	case typeTargetMember:
		w.topicPartitions(r.a)
	case typeCurrentAssignment:
		w.int32(r.cur.epoch)
		w.int32(r.cur.prevEpoch)
		w.int8(r.cur.state)
		w.topicPartitions(r.cur.assigned)
	case typeStatePartitions:
		w.spTopics(r.sp.initializing, true)
		w.spTopics(r.sp.initialized, true)
		w.spTopics(r.sp.deleting, false)
	default:
		panic(fmt.Sprintf("share: encoding record type %d", r.typ))
	}
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
	if n < 0 {
		if r.err == nil {
			r.fail("null topic partitions")
		}
		return assignment{}
	}
	raw := map[TopicID][]int32{}
	for range n {
		t := r.uuid()
		raw[t] = append(raw[t], r.compactInt32s()...)
		r.tags()
	}
	return normalize(raw)
}

// spTopics writes []TopicPartitionsInfo (TopicId, TopicName, Partitions)
// or, without partitions, []TopicInfo (TopicId, TopicName).
func (w *writer) spTopics(ts []spTopic, withParts bool) {
	w.compactArrayLen(len(ts))
	for _, t := range ts {
		w.uuid(t.id)
		w.compactString(t.name)
		if withParts {
			w.compactInt32s(t.parts)
		}
		w.noTags()
	}
}

func (r *reader) spTopics(withParts bool) []spTopic {
	n := r.length()
	if n < 0 {
		if r.err == nil {
			r.fail("null topic list")
		}
		return nil
	}
	byID := map[TopicID]*spTopic{}
	for range n {
		t := spTopic{id: r.uuid(), name: r.compactString()}
		if withParts {
			t.parts = r.compactInt32s()
		}
		r.tags()
		if prev := byID[t.id]; prev != nil {
			prev.parts = append(prev.parts, t.parts...)
			continue
		}
		byID[t.id] = &t
	}
	out := make([]spTopic, 0, len(byID))
	for _, t := range byID {
		if withParts {
			t.parts = normalize(map[TopicID][]int32{t.id: t.parts})[t.id]
		}
		out = append(out, *t)
	}
	slices.SortFunc(out, func(a, b spTopic) int { return compareIDs(a.id, b.id) })
	return out
}

// parseKey splits a key into its type, group and (for member records)
// member id. ok is false for keys that are not share group records.
func parseKey(k []byte) (typ int16, group, member string, ok bool, err error) {
	r := &reader{b: k}
	typ = r.int16()
	if r.err != nil || typ < typePartitionMetadata || typ > typeStatePartitions {
		return typ, "", "", false, nil
	}
	group = r.string()
	switch typ {
	case typeMemberMetadata, typeTargetMember, typeCurrentAssignment:
		member = r.string()
	}
	if err := r.done(); err != nil {
		return typ, "", "", true, fmt.Errorf("share: key of record type %d: %w", typ, err)
	}
	return typ, group, member, true, nil
}

// GroupOfKey returns the group id of a share group record's key, and false
// for any other record of the offsets topic (offset commits, classic,
// consumer and streams groups).
func GroupOfKey(key []byte) (string, bool) {
	_, group, _, ok, err := parseKey(key)
	if !ok || err != nil {
		return "", false
	}
	return group, true
}

// decode parses a record. value nil is a tombstone.
func decode(key, value []byte) (record, string, error) {
	typ, group, member, ok, err := parseKey(key)
	if err != nil {
		return record{}, "", err
	}
	if !ok {
		return record{}, "", fmt.Errorf("share: record type %d is not a share group record", typ)
	}
	rec := record{typ: typ, member: member, tomb: value == nil}
	if rec.tomb || typ == typePartitionMetadata {
		return rec, group, nil
	}
	r := &reader{b: value}
	if v := r.int16(); r.err == nil && v != 0 {
		return record{}, "", fmt.Errorf("share: record type %d of group %q: value version %d, only 0 is known", typ, group, v)
	}
	switch typ {
	case typeMemberMetadata:
		rec.meta.rack = r.compactNullableString()
		rec.meta.clientID = r.compactString()
		rec.meta.clientHost = r.compactString()
		rec.meta.topics = sortedTopics(r.compactStrings())
	case typeGroupMetadata:
		rec.epoch = r.int32()
		rec.hash = r.int64()
	case typeTargetMetadata:
		rec.epoch = r.int32()
	case typeTargetMember:
		rec.a = r.topicPartitions()
	case typeCurrentAssignment:
		rec.cur.epoch = r.int32()
		rec.cur.prevEpoch = r.int32()
		rec.cur.state = r.int8()
		rec.cur.assigned = r.topicPartitions()
	case typeStatePartitions:
		rec.sp.initializing = r.spTopics(true)
		rec.sp.initialized = r.spTopics(true)
		rec.sp.deleting = r.spTopics(false)
	}
	r.tags()
	if err := r.done(); err != nil {
		return record{}, "", fmt.Errorf("share: value of record type %d of group %q: %w", typ, group, err)
	}
	return rec, group, nil
}

// sortedTopics returns names sorted and distinct, empty names dropped.
func sortedTopics(names []string) []string {
	out := make([]string, 0, len(names))
	for _, n := range names {
		if n != "" {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}
