package consumer

import (
	"bytes"
	"encoding/hex"
	"strings"
	"testing"

	"github.com/fjordlog/fjord/group/assign"
)

// unhex reads hex with spaces and "|" as separators.
func unhex(t *testing.T, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(strings.NewReplacer(" ", "", "|", "", "\n", "", "\t", "").Replace(s))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

var topicX = TopicID{0xaa, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 0xbb}

const topicXHex = "aa0102030405060708090a0b0c0d0ebb"

var topicY = TopicID{0xcc, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 0xdd}

const topicYHex = "cc0102030405060708090a0b0c0d0edd"

// TestRecordBytes pins each record type to Kafka's format, worked out by
// hand from the group coordinator's message schemas: key = int16 type,
// then the key's strings (int16 length); value = int16 version 0, then the
// flexible encoding (uvarint length+1 for compact strings and arrays, an
// empty tagged-field section 00 after every struct).
func TestRecordBytes(t *testing.T) {
	inst := "i"
	for _, c := range []struct {
		name       string
		rec        record
		key, value string
	}{
		{"group", groupRec{epoch: 5}, "0003 0001 67", "0000 00000005 00"},
		{"group with hash", groupRec{epoch: 5, hash: 0x0102030405060708},
			"0003 0001 67", "0000 00000005 | 01 00 08 0102030405060708"},
		{"group tombstone", groupRec{tomb: true}, "0003 0001 67", ""},
		{"member", memberRec{id: "m", meta: memberMeta{instanceID: &inst, clientID: "c", clientHost: "h", topics: []string{"a", "b"}, rebalanceTimeoutMs: 30000}},
			"0005 0001 67 0001 6d",
			"0000 | 02 69 | 00 | 02 63 | 02 68 | 03 02 61 02 62 | 00 | 00007530 | 00 | 00"},
		{"target epoch", targetEpochRec{epoch: 7}, "0006 0001 67", "0000 00000007 00"},
		{"target member", targetMemberRec{id: "m", a: assignment{topicX: {0, 3}}},
			"0007 0001 67 0001 6d",
			"0000 | 02 " + topicXHex + " 03 00000000 00000003 00 | 00"},
		// Each TopicPartitions entry carries tag 0 AssignmentEpochs (Kafka
		// 4.3, KIP-1251): 01 (one tag) 00 (tag 0) 05 (bytes) 02 00000001.
		{"current", currentRec{id: "m", cur: currentState{epoch: 2, prevEpoch: 1, state: memberUnrevoked,
			assigned: assignment{topicX: {1}}, revoking: assignment{topicY: {0, 2}},
			since: partitionEpochs{topicX: {1: 1}, topicY: {0: 2, 2: 1}}}},
			"0008 0001 67 0001 6d",
			"0000 | 00000002 00000001 01 | 02 " + topicXHex + " 02 00000001 | 01 00 05 02 00000001" +
				" | 02 " + topicYHex + " 03 00000000 00000002 | 01 00 09 03 00000002 00000001 | 00"},
		{"current tombstone", currentRec{id: "m", tomb: true}, "0008 0001 67 0001 6d", ""},
		{"regex", regexRec{regex: "a.*", r: resolvedRegex{topics: []string{"ab"}, timestamp: 9}},
			"0010 0001 67 0003 612e2a",
			"0000 | 02 03 6162 | 0000000000000000 | 0000000000000009 | 00"},
	} {
		r := c.rec.encode("g")
		if want := unhex(t, c.key); !bytes.Equal(r.Key, want) {
			t.Errorf("%s: key %x, want %x", c.name, r.Key, want)
		}
		var want []byte
		if c.value != "" {
			want = unhex(t, c.value)
		}
		if !bytes.Equal(r.Value, want) || (want == nil) != (r.Value == nil) {
			t.Errorf("%s: value %x, want %x", c.name, r.Value, want)
		}
		if g, ok := GroupOfKey(r.Key); !ok || g != "g" {
			t.Errorf("%s: GroupOfKey = %q, %v", c.name, g, ok)
		}
		g, back, err := decode(r.Key, r.Value)
		if err != nil || g != "g" {
			t.Errorf("%s: decode: %q, %v", c.name, g, err)
			continue
		}
		if again := back.encode("g"); !bytes.Equal(again.Key, r.Key) || !bytes.Equal(again.Value, r.Value) {
			t.Errorf("%s: decode/encode round trip: %x %x", c.name, again.Key, again.Value)
		}
	}
}

// TestReplayKafkaRecords replays records as Kafka writes them that this
// package never writes: a pre-4.1 ConsumerGroupPartitionMetadata record
// (tombstoned with the next epoch bump) and a member with classic member
// metadata (tag 0: a presence varint, then the struct).
func TestReplayKafkaRecords(t *testing.T) {
	g := New("g", DefaultConfig())
	replay := func(key, value string) {
		t.Helper()
		var v []byte
		if value != "" {
			v = unhex(t, value)
		}
		if err := g.Replay(unhex(t, key), v); err != nil {
			t.Fatal(err)
		}
	}
	// ConsumerGroupMemberMetadataValue with ClassicMemberMetadata (tag 0,
	// 17 bytes: present, session 10000, one protocol "range" with 2 bytes
	// of metadata).
	replay("0005 0001 67 0001 6d", "0000 | 00 | 00 | 02 63 | 02 68 | 02 02 61 | 00 | 00007530 | 00 | 01 00 11 01 00002710 02 0672616e6765 03aabb 00 00")
	replay("0003 0001 67", "0000 00000003 00")
	replay("0004 0001 67", "0000 01 00") // partition metadata: content ignored
	replay("0006 0001 67", "0000 00000003 00")
	replay("0007 0001 67 0001 6d", "0000 01 00")
	replay("0008 0001 67 0001 6d", "0000 | 00000003 00000002 00 | 01 | 01 | 00")
	g.Loaded(1000)
	if g.State() != "Stable" || g.Epoch() != 3 || g.NumMembers() != 1 || !g.partitionMeta {
		t.Fatalf("replayed: %s epoch %d members %d partition metadata %v", g.State(), g.Epoch(), g.NumMembers(), g.partitionMeta)
	}
	if c := g.members["m"].meta.classic; c == nil || c.sessionTimeoutMs != 10000 || len(c.protocols) != 1 ||
		c.protocols[0].name != "range" || !bytes.Equal(c.protocols[0].metadata, []byte{0xaa, 0xbb}) {
		t.Fatalf("classic member metadata: %+v", c)
	}
	// Written back byte for byte.
	want := unhex(t, "0000 | 00 | 00 | 02 63 | 02 68 | 02 02 61 | 00 | 00007530 | 00 | 01 00 11 01 00002710 02 0672616e6765 03aabb 00 00")
	if got := (memberRec{id: "m", meta: g.members["m"].meta}).encode("g").Value; !bytes.Equal(got, want) {
		t.Fatalf("member record re-encoded as %x, want %x", got, want)
	}
	img := NewImage([]Topic{{Name: "a", ID: topicX, Partitions: 2}})
	recs := g.MetadataChanged(1000, img, AllTopics)
	if len(recs) != 2 || recs[1].Value != nil || !bytes.Equal(recs[1].Key, unhex(t, "0004 0001 67")) {
		t.Fatalf("the epoch bump should tombstone the partition metadata: %x", recs)
	}
	if g.partitionMeta {
		t.Fatal("partition metadata still present")
	}
}

// TestReplayAssignmentEpochs replays current assignments as Kafka writes
// them: before 4.3 without AssignmentEpochs, where every partition counts
// as assigned at the member's epoch (0 for a static member that left with
// -2), as Kafka's replay does; from 4.3 with them.
func TestReplayAssignmentEpochs(t *testing.T) {
	for _, c := range []struct {
		name, value string
		want        partitionEpochs
	}{
		{"before KIP-1251", "0000 | 00000005 00000004 00 | 02 " + topicXHex + " 03 00000000 00000001 00 | 01 | 00",
			partitionEpochs{topicX: {0: 5, 1: 5}}},
		{"static member that left", "0000 | fffffffe 00000004 00 | 02 " + topicXHex + " 02 00000001 00 | 01 | 00",
			partitionEpochs{topicX: {1: 0}}},
		{"null epochs", "0000 | 00000005 00000004 00 | 02 " + topicXHex + " 02 00000001 | 01 00 01 00 | 01 | 00",
			partitionEpochs{topicX: {1: 5}}},
		{"KIP-1251", "0000 | 00000005 00000004 01 | 02 " + topicXHex + " 02 00000001 | 01 00 05 02 00000003" +
			" | 02 " + topicYHex + " 02 00000002 | 01 00 05 02 00000004 | 00",
			partitionEpochs{topicX: {1: 3}, topicY: {2: 4}}},
		{"an unknown tag beside", "0000 | 00000005 00000004 00 | 02 " + topicXHex + " 02 00000001 | 02 00 05 02 00000002 07 01 ff | 01 | 00",
			partitionEpochs{topicX: {1: 2}}},
	} {
		g := New("g", DefaultConfig())
		if err := g.Replay(unhex(t, "0008 0001 67 0001 6d"), unhex(t, c.value)); err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		if got := g.members["m"].cur.since; !got.equal(c.want) {
			t.Errorf("%s: epochs %v, want %v", c.name, got, c.want)
		}
	}
}

func TestReplayErrors(t *testing.T) {
	g := New("g", DefaultConfig())
	for _, c := range []struct{ name, key, value string }{
		{"another group", "0003 0001 68", "0000 00000001 00"},
		{"offset commit key", "0001 0001 67", "0000"},
		{"truncated key", "0005 0001 67", "0000"},
		{"unknown value version", "0003 0001 67", "0001 00000001 00"},
		{"truncated value", "0008 0001 67 0001 6d", "0000 00000003"},
		{"trailing bytes", "0006 0001 67", "0000 00000003 00 ff"},
		{"overlong array", "0007 0001 67 0001 6d", "0000 7f 00"},
		{"more epochs than partitions", "0008 0001 67 0001 6d", "0000 | 00000005 00000004 00 | 02 " + topicXHex + " 02 00000001 | 01 00 09 03 00000001 00000001 | 01 | 00"},
		{"epochs with trailing bytes", "0008 0001 67 0001 6d", "0000 | 00000005 00000004 00 | 02 " + topicXHex + " 02 00000001 | 01 00 06 02 00000001 ff | 01 | 00"},
	} {
		var v []byte
		if c.value != "" {
			v = unhex(t, c.value)
		}
		if err := g.Replay(unhex(t, c.key), v); err == nil {
			t.Errorf("%s: no error", c.name)
		}
	}
	if _, ok := GroupOfKey(unhex(t, "0001 0001 67 0001 74 00000000")); ok {
		t.Error("an offset commit key is not a consumer group record")
	}
	// A partition owned by two members is corruption.
	replay := func(key, value string) error { return g.Replay(unhex(t, key), unhex(t, value)) }
	if err := replay("0008 0001 67 0001 61", "0000 | 00000001 00000000 00 | 02 "+topicXHex+" 02 00000000 00 | 01 | 00"); err != nil {
		t.Fatal(err)
	}
	if err := replay("0008 0001 67 0001 62", "0000 | 00000001 00000000 00 | 02 "+topicXHex+" 02 00000000 00 | 01 | 00"); err == nil {
		t.Error("a partition owned twice replayed without error")
	}
}

func TestConfigValidate(t *testing.T) {
	if err := DefaultConfig().Validate(); err != nil {
		t.Fatal(err)
	}
	bad := Config{SessionTimeoutMs: 0, HeartbeatIntervalMs: 5, MaxSize: 0,
		Assignors: []assign.Assignor{assign.Uniform(), assign.Uniform()}}
	err := bad.Validate()
	for _, want := range []string{"session.timeout", "heartbeat.interval", "max.size", "listed twice"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Validate: %v, want a complaint about %s", err, want)
		}
	}
	if err := (Config{SessionTimeoutMs: 10, HeartbeatIntervalMs: 1, MaxSize: 1}).Validate(); err == nil {
		t.Error("no assignors accepted")
	}
}
