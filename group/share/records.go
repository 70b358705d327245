package share

import (
	"fmt"
	"slices"

	"github.com/fjordlog/fjord/group/internal/wire"
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

// key is a record's key: its type, the group id, and the member id of the
// member records.
func key(typ int16, group string, member ...string) []byte {
	return wire.Key(typ, append([]string{group}, member...)...)
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
	w := wire.Value(0) // every value here is version 0
	switch r.typ {
	case typeMemberMetadata:
		w.CompactNullableString(r.meta.rack)
		w.CompactString(r.meta.clientID)
		w.CompactString(r.meta.clientHost)
		w.CompactStrings(r.meta.topics)
	case typeGroupMetadata:
		w.Int32(r.epoch)
		w.Int64(r.hash)
	case typeTargetMetadata:
		w.Int32(r.epoch)
	case typeTargetMember:
		w.TopicPartitions(r.a)
	case typeCurrentAssignment:
		w.Int32(r.cur.epoch)
		w.Int32(r.cur.prevEpoch)
		w.Int8(r.cur.state)
		w.TopicPartitions(r.cur.assigned)
	case typeStatePartitions:
		writeSPTopics(w, r.sp.initializing, true)
		writeSPTopics(w, r.sp.initialized, true)
		writeSPTopics(w, r.sp.deleting, false)
	default:
		panic(fmt.Sprintf("share: encoding record type %d", r.typ))
	}
	w.NoTags()
	rec.Value = w.B
	return rec
}

// writeSPTopics writes []TopicPartitionsInfo (TopicId, TopicName, Partitions)
// or, without partitions, []TopicInfo (TopicId, TopicName).
func writeSPTopics(w *wire.Writer, ts []spTopic, withParts bool) {
	w.CompactArrayLen(len(ts))
	for _, t := range ts {
		w.UUID(t.id)
		w.CompactString(t.name)
		if withParts {
			w.CompactInt32s(t.parts)
		}
		w.NoTags()
	}
}

// readSPTopics reads what writeSPTopics writes: sorted by id, a topic
// listed twice merged.
func readSPTopics(r *wire.Reader, withParts bool) []spTopic {
	byID := map[TopicID]*spTopic{}
	r.Array("topic list", func() {
		t := spTopic{id: r.UUID(), name: r.CompactString()}
		if withParts {
			t.parts = r.CompactInt32s()
		}
		r.Tags(nil)
		if prev := byID[t.id]; prev != nil {
			prev.parts = append(prev.parts, t.parts...)
			return
		}
		byID[t.id] = &t
	})
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
	r := wire.NewReader(k)
	typ = r.Int16()
	if r.Err() != nil || typ < typePartitionMetadata || typ > typeStatePartitions {
		return typ, "", "", false, nil
	}
	group = r.KeyString()
	switch typ {
	case typeMemberMetadata, typeTargetMember, typeCurrentAssignment:
		member = r.KeyString()
	}
	if err := r.Done(); err != nil {
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
	r := wire.NewReader(value)
	if v := r.Int16(); r.Err() == nil && v != 0 {
		return record{}, "", fmt.Errorf("share: record type %d of group %q: value version %d, only 0 is known", typ, group, v)
	}
	switch typ {
	case typeMemberMetadata:
		rec.meta.rack = r.CompactNullableString()
		rec.meta.clientID = r.CompactString()
		rec.meta.clientHost = r.CompactString()
		rec.meta.topics = sortedTopics(r.CompactStrings())
	case typeGroupMetadata:
		rec.epoch = r.Int32()
		rec.hash = r.Int64()
	case typeTargetMetadata:
		rec.epoch = r.Int32()
	case typeTargetMember:
		rec.a = normalize(r.TopicPartitions())
	case typeCurrentAssignment:
		rec.cur.epoch = r.Int32()
		rec.cur.prevEpoch = r.Int32()
		rec.cur.state = r.Int8()
		rec.cur.assigned = normalize(r.TopicPartitions())
	case typeStatePartitions:
		rec.sp.initializing = readSPTopics(r, true)
		rec.sp.initialized = readSPTopics(r, true)
		rec.sp.deleting = readSPTopics(r, false)
	}
	r.Tags(nil)
	if err := r.Done(); err != nil {
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
