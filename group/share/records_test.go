package share

import (
	"bytes"
	"encoding/hex"
	"errors"
	"strings"
	"testing"

	"github.com/fjordlog/fjord/group"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// unhex reads hex with spaces and comments ("# ...") for readability.
func unhex(t *testing.T, s string) []byte {
	t.Helper()
	var clean strings.Builder
	for _, line := range strings.Split(s, "\n") {
		line, _, _ = strings.Cut(line, "#")
		clean.WriteString(strings.Join(strings.Fields(line), ""))
	}
	b, err := hex.DecodeString(clean.String())
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestRecordBytes pins every record's bytes to Kafka 4.2's schemas
// (group-coordinator/src/main/resources/common/message/ShareGroup*.json),
// written out by hand, and checks that they decode back.
func TestRecordBytes(t *testing.T) {
	rack := "r1"
	tid := TopicID{0xaa, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 0xbb}
	const uuid = "aa0102030405060708090a0b0c0d0ebb"
	for _, c := range []struct {
		name     string
		r        record
		key, val string
	}{{
		name: "member metadata",
		r:    record{typ: typeMemberMetadata, member: "m1", meta: memberMeta{rack: &rack, clientID: "c", clientHost: "/h", topics: []string{"a", "b"}}},
		key:  "000a 0001 67 0002 6d31",
		val: `0000            # version 0
		      03 7231         # RackId "r1" (compact nullable)
		      02 63           # ClientId "c"
		      03 2f68         # ClientHost "/h"
		      03 02 61 02 62  # SubscribedTopicNames [a b]
		      00              # tagged fields`,
	}, {
		name: "member metadata without rack",
		r:    record{typ: typeMemberMetadata, member: "m1", meta: memberMeta{clientID: "", clientHost: "", topics: []string{"a"}}},
		key:  "000a 0001 67 0002 6d31",
		val:  "0000 00 01 01 02 02 61 00",
	}, {
		name: "group metadata",
		r:    record{typ: typeGroupMetadata, epoch: 5, hash: 0x0102030405060708},
		key:  "000b 0001 67",
		val:  "0000 00000005 0102030405060708 00",
	}, {
		name: "target assignment metadata",
		r:    record{typ: typeTargetMetadata, epoch: 7},
		key:  "000c 0001 67",
		val:  "0000 00000007 00",
	}, {
		name: "target assignment member",
		r:    record{typ: typeTargetMember, member: "m1", a: assignment{tid: {0, 2}}},
		key:  "000d 0001 67 0002 6d31",
		val: `0000
		      02 ` + uuid + ` 03 00000000 00000002 00  # one TopicPartitions: [0 2]
		      00`,
	}, {
		name: "target assignment member, empty",
		r:    record{typ: typeTargetMember, member: "m1", a: assignment{}},
		key:  "000d 0001 67 0002 6d31",
		val:  "0000 01 00",
	}, {
		name: "current member assignment",
		r:    record{typ: typeCurrentAssignment, member: "m1", cur: currentState{epoch: 3, prevEpoch: 1, assigned: assignment{tid: {1}}}},
		key:  "000e 0001 67 0002 6d31",
		val: `0000
		      00000003 00000001  # MemberEpoch, PreviousMemberEpoch
		      00                 # State STABLE
		      02 ` + uuid + ` 02 00000001 00
		      00`,
	}, {
		name: "state partition metadata",
		r: record{typ: typeStatePartitions, sp: statePartitions{
			initialized: []spTopic{{id: tid, name: "a", parts: []int32{0, 1}}},
			deleting:    []spTopic{{id: tid, name: "a"}},
		}},
		key: "000f 0001 67",
		val: `0000
		      01                                              # InitializingTopics []
		      02 ` + uuid + ` 02 61 03 00000000 00000001 00  # InitializedTopics [{a [0 1]}]
		      02 ` + uuid + ` 02 61 00                       # DeletingTopics [{a}]
		      00`,
	}} {
		t.Run(c.name, func(t *testing.T) {
			got := c.r.encode("g")
			if want := unhex(t, c.key); !bytes.Equal(got.Key, want) {
				t.Errorf("key\n got %x\nwant %x", got.Key, want)
			}
			if want := unhex(t, c.val); !bytes.Equal(got.Value, want) {
				t.Errorf("value\n got %x\nwant %x", got.Value, want)
			}
			back, group, err := decode(got.Key, got.Value)
			if err != nil || group != "g" {
				t.Fatalf("decode: %q %v", group, err)
			}
			if again := back.encode("g"); !bytes.Equal(again.Key, got.Key) || !bytes.Equal(again.Value, got.Value) {
				t.Errorf("decode then encode gives %x %x", again.Key, again.Value)
			}
			tomb := c.r
			tomb.tomb = true
			if enc := tomb.encode("g"); enc.Value != nil || !bytes.Equal(enc.Key, got.Key) {
				t.Errorf("tombstone %x %x", enc.Key, enc.Value)
			}
		})
	}
}

// TestDecodeSkipsTags: values written by a later Kafka with tagged fields
// (such as KIP-1263's AssignmentTimestamp on the target assignment
// metadata) still decode.
func TestDecodeSkipsTags(t *testing.T) {
	key := unhex(t, "000c 0001 67")
	val := unhex(t, "0000 00000007 01 00 08 0000000000000001") // tag 0, 8 bytes
	r, _, err := decode(key, val)
	if err != nil || r.epoch != 7 {
		t.Fatalf("%+v %v", r, err)
	}
}

func TestGroupOfKey(t *testing.T) {
	for _, c := range []struct {
		key   string
		group string
		ok    bool
	}{
		{"000a 0002 6731 0002 6d31", "g1", true}, // member metadata
		{"000b 0002 6731", "g1", true},           // group metadata
		{"000f 0000", "", true},                  // state partitions, empty id
		{"0009 0002 6731", "g1", true},           // Kafka 4.0's partition metadata
		{"0003 0002 6731", "", false},            // consumer group metadata
		{"0001 0002 6731 0001 74 00000000", "", false},
		{"0010 0002 6731 0001 78", "", false}, // consumer group regex
		{"0002 0002 6731", "", false},         // classic group
		{"000b 0005 67", "", false},           // truncated
		{"000b 0001 67 00", "", false},        // trailing byte
		{"00", "", false},
	} {
		group, ok := GroupOfKey(unhex(t, c.key))
		if group != c.group || ok != c.ok {
			t.Errorf("%s: got %q %v, want %q %v", c.key, group, ok, c.group, c.ok)
		}
	}
}

// TestReplayRefuses: records that cannot be decoded or that Kafka's replay
// refuses are errors and leave the group unchanged.
func TestReplayRefuses(t *testing.T) {
	cfg := DefaultConfig()
	img := NewImage([]Topic{{Name: "a", ID: topicID("a", 0), Partitions: 2}})
	live := New("g", cfg)
	req := kmsg.NewPtrShareGroupHeartbeatRequest()
	req.GroupID, req.MemberID, req.SubscribedTopicNames = "g", "m1", []string{"a"}
	_, recs := live.HeartbeatFrom(0, img, req, Client{ID: "c", Host: "/h"})

	load := func() *Group {
		g := New("g", cfg)
		for _, r := range recs {
			if err := g.Replay(r.Key, r.Value); err != nil {
				t.Fatal(err)
			}
		}
		return g
	}
	mkey := func(typ int16) []byte { return key(typ, "g", "m1") }
	gkey := func(typ int16) []byte { return key(typ, "g") }
	for _, c := range []struct {
		name       string
		key, value []byte
		want       string
	}{
		{"another group", key(typeGroupMetadata, "h"), unhex(t, "0000 00000001 0000000000000000 00"), `replaying a record of group "h"`},
		{"value version 1", gkey(typeTargetMetadata), unhex(t, "0001 00000001 00"), "value version 1"},
		{"truncated value", gkey(typeGroupMetadata), unhex(t, "0000 0000"), "truncated"},
		{"trailing bytes", gkey(typeTargetMetadata), unhex(t, "0000 00000001 00 ff"), "trailing"},
		{"not a share record", key(3, "g"), unhex(t, "0000"), "not a share group record"},
		{"metadata tombstone first", mkey(typeMemberMetadata), nil, "current assignment"},
		{"group tombstone with members", gkey(typeGroupMetadata), nil, "1 members"},
		{"target epoch tombstone with targets", gkey(typeTargetMetadata), nil, "1 member targets"},
		{"null subscription", mkey(typeMemberMetadata), unhex(t, "0000 00 01 01 00 00"), "null string array"},
	} {
		t.Run(c.name, func(t *testing.T) {
			g := load()
			before := g.durable()
			err := g.Replay(c.key, c.value)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want an error with %q", err, c.want)
			}
			if g.durable() != before {
				t.Fatalf("a refused record changed the group")
			}
		})
	}

	// A tombstone sequence in Kafka's order removes the member; tombstones
	// of what is gone already are accepted.
	g := load()
	for _, k := range [][]byte{mkey(typeCurrentAssignment), mkey(typeTargetMember), mkey(typeMemberMetadata), mkey(typeMemberMetadata), mkey(typeCurrentAssignment)} {
		if err := g.Replay(k, nil); err != nil {
			t.Fatal(err)
		}
	}
	if g.NumMembers() != 0 {
		t.Fatalf("%d members", g.NumMembers())
	}
	// Kafka 4.0's ShareGroupPartitionMetadata is replayed as nothing.
	before := g.durable()
	if err := g.Replay(gkey(typePartitionMetadata), []byte{0, 0, 1, 0}); err != nil || g.durable() != before {
		t.Fatalf("partition metadata: %v", err)
	}
}

// TestReplayAfterDelete: a record after the group's tombstone starts a new
// group with that id, as a group deleted and created again.
func TestReplayAfterDelete(t *testing.T) {
	cfg := DefaultConfig()
	g := New("g", cfg)
	for _, r := range []record{
		{typ: typeGroupMetadata, epoch: 9},
		{typ: typeTargetMetadata, epoch: 9},
		{typ: typeTargetMetadata, tomb: true},
		{typ: typeGroupMetadata, tomb: true},
	} {
		enc := r.encode("g")
		if err := g.Replay(enc.Key, enc.Value); err != nil {
			t.Fatal(err)
		}
	}
	if g.State() != "Dead" {
		t.Fatalf("state %s", g.State())
	}
	enc := record{typ: typeGroupMetadata, epoch: 1}.encode("g")
	if err := g.Replay(enc.Key, enc.Value); err != nil {
		t.Fatal(err)
	}
	if g.State() != "Empty" || g.Epoch() != 1 || g.targetEpoch != 0 {
		t.Fatalf("revived: %s", g.durable())
	}
}

// TestLoaded: a group loaded from its records carries on where it was: the
// sessions restart at the load, and members heartbeating at their epochs
// change nothing.
func TestLoaded(t *testing.T) {
	cfg := DefaultConfig()
	img := NewImage([]Topic{{Name: "a", ID: topicID("a", 0), Partitions: 3}})
	live := New("g", cfg)
	var log []Record
	hb := func(g *Group, now int64, id string, epoch int32, subs []string) *kmsg.ShareGroupHeartbeatResponse {
		req := kmsg.NewPtrShareGroupHeartbeatRequest()
		req.GroupID, req.MemberID, req.MemberEpoch, req.SubscribedTopicNames = "g", id, epoch, subs
		resp, recs := g.HeartbeatFrom(now, img, req, Client{ID: "c", Host: "/h"})
		if resp.ErrorCode != 0 {
			t.Fatalf("%s: error %d", id, resp.ErrorCode)
		}
		log = append(log, recs...)
		return resp
	}
	hb(live, 0, "m1", 0, []string{"a"})
	e2 := hb(live, 0, "m2", 0, []string{"a"}).MemberEpoch
	e1 := hb(live, 0, "m1", 1, nil).MemberEpoch

	g := New("g", cfg)
	for _, r := range log {
		if err := g.Replay(r.Key, r.Value); err != nil {
			t.Fatal(err)
		}
	}
	if g.NextDeadline() != -1 {
		t.Fatalf("deadlines before Loaded: %d", g.NextDeadline())
	}
	g.Loaded(100000)
	if err := g.checkInvariants(true); err != nil {
		t.Fatal(err)
	}
	if g.NextDeadline() != 100000+int64(cfg.SessionTimeoutMs) {
		t.Fatalf("next deadline %d", g.NextDeadline())
	}
	if recs := g.Tick(100000+int64(cfg.SessionTimeoutMs)-1, img); len(recs) > 0 {
		t.Fatalf("tick before the restarted sessions expire removed members")
	}
	n := len(log)
	if resp := hb(g, 100001, "m1", e1, nil); resp.MemberEpoch != e1 || resp.Assignment != nil {
		t.Fatalf("m1 after load: epoch %d, assignment %v", resp.MemberEpoch, resp.Assignment)
	}
	if resp := hb(g, 100001, "m2", e2, nil); resp.MemberEpoch != e2 || len(log) != n {
		t.Fatalf("m2 after load: epoch %d, %d records", resp.MemberEpoch, len(log)-n)
	}
	if g.durable() != live.durable() {
		t.Fatalf("loaded group differs:\n%s\nlive:\n%s", g.durable(), live.durable())
	}
}

func TestConfigValidate(t *testing.T) {
	if err := DefaultConfig().Validate(); err != nil {
		t.Fatal(err)
	}
	c := Config{SessionTimeoutMs: 0, HeartbeatIntervalMs: 0, MaxSize: 0}
	err := c.Validate()
	for _, want := range []string{"session.timeout", "heartbeat.interval", "max.size", "assignor"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%v: want a complaint about %s", err, want)
		}
	}
	c = DefaultConfig()
	c.HeartbeatIntervalMs = c.SessionTimeoutMs
	if c.Validate() == nil {
		t.Error("heartbeat interval = session timeout accepted")
	}
	defer func() {
		if recover() == nil {
			t.Error("New with a bad config did not panic")
		}
	}()
	New("g", Config{})
}

// TestErrorCodes: every refusal maps to its Kafka code through group's one
// table.
func TestErrorCodes(t *testing.T) {
	g := New("g", DefaultConfig())
	for err, code := range map[error]int16{
		refuse(group.ErrInvalidRequest, "x"):    42,
		refuse(group.ErrFencedMemberEpoch, "x"): 110,
		refuse(group.ErrUnknownMember, "x"):     25,
		refuse(group.ErrGroupMaxSize, "x"):      81,
		g.IsMember("nope", -1):                  25,
	} {
		if got := group.ErrorCode(err); got != code {
			t.Errorf("%v: code %d, want %d", err, got, code)
		}
		if !errors.Is(err, group.ErrInvalidRequest) && code == 42 {
			t.Errorf("%v is not ErrInvalidRequest", err)
		}
	}
}

// TestBlankFields: Kafka trims before it checks for empty strings.
func TestBlankFields(t *testing.T) {
	g := New("g", DefaultConfig())
	img := NewImage(nil)
	rack := " \t"
	for _, req := range []*kmsg.ShareGroupHeartbeatRequest{
		{GroupID: "g", MemberID: " ", SubscribedTopicNames: []string{"a"}},
		{GroupID: "\n", MemberID: "m", SubscribedTopicNames: []string{"a"}},
		{GroupID: "g", MemberID: "m", RackID: &rack, SubscribedTopicNames: []string{"a"}},
	} {
		resp, recs := g.Heartbeat(0, img, req)
		if resp.ErrorCode != 42 || len(recs) > 0 {
			t.Errorf("%+v: code %d, %d records", req, resp.ErrorCode, len(recs))
		}
	}
	// Heartbeat records an empty client.
	resp, _ := g.Heartbeat(0, img, &kmsg.ShareGroupHeartbeatRequest{GroupID: "g", MemberID: "m", SubscribedTopicNames: []string{"a"}})
	if resp.ErrorCode != 0 || g.members["m"].clientID != "" || g.members["m"].clientHost != "" {
		t.Fatalf("code %d, member %+v", resp.ErrorCode, g.members["m"])
	}
}
