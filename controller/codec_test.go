package controller

import (
	"bytes"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// sampleRecords has every record type, with optional fields both ways.
func sampleRecords() []Record {
	id := [16]byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}
	bodies := []Body{
		RegisterBroker{ID: 3, Incarnation: id, Rack: "r1", Epoch: 42,
			Endpoints: []Endpoint{{"PLAINTEXT", "a.example", 9092}, {"SSL", "b", 9093}}},
		RegisterBroker{ID: 0},
		FenceBroker{ID: 1, Epoch: 7},
		UnfenceBroker{ID: 1, Epoch: -1},
		UnregisterBroker{ID: 9},
		CreateTopic{Name: "orders", ID: id, Configs: map[string]string{"retention.ms": "1", "cleanup.policy": "compact"}},
		CreateTopic{Name: "x", ID: id},
		CreatePartition{TopicID: id, Partition: 2, Replicas: []int32{1, 2, 3}, ISR: []int32{2, 1}, Leader: 2, LeaderEpoch: 5, PartitionEpoch: 9},
		ChangePartition{TopicID: id, Partition: 1},
		ChangePartition{TopicID: id, Partition: 1, ISR: ptr([]int32{3}), Leader: ptr(int32(-1))},
		ChangePartition{TopicID: id, Partition: 1, ISR: ptr([]int32(nil))},
		DeleteTopic{ID: id},
		SetConfig{Resource: TopicResource("t"), Key: "k", Value: ptr("v")},
		SetConfig{Resource: ClusterResource(), Key: "k"},
		SetConfig{Resource: BrokerResource(4), Key: "k", Value: ptr("")},
		SetConfig{Resource: GroupResource("g"), Key: "share.auto.offset.reset", Value: ptr("earliest")},
		ProducerIDs{Broker: 1, First: 1000, Count: 1000},
		ClientQuota{Entity: []QuotaEntityPart{{Type: QuotaUser, Name: ptr("alice")}, {Type: QuotaClientID}}, Key: QuotaProducerByteRate, Value: ptr(1048576.0)},
		ClientQuota{Entity: []QuotaEntityPart{{Type: QuotaIP, Name: ptr("")}}, Key: QuotaConnectionCreationRate},
		ClientQuota{Key: "k", Value: ptr(-0.5)},
		ScramCredential{User: "alice", Mechanism: ScramSHA512, Salt: []byte("salt"), StoredKey: []byte("st"), ServerKey: []byte("sv"), Iterations: 8192},
		ScramCredential{User: "alice", Mechanism: ScramSHA256, Remove: true},
		ChangeReplicas{TopicID: id, Partition: 3, Replicas: []int32{2, 3, 4, 1}, Adding: []int32{4}, Removing: []int32{1}, ISR: []int32{1, 2}, Leader: -1},
		ChangeReplicas{TopicID: id, Replicas: []int32{1}, ISR: []int32{1}, Leader: 1},
		ACLChange{ACL: ACL{ResourceType: 2, Name: "mf.settlement.", PatternType: 4, Principal: "User:alice", Host: "*", Operation: 4, Permission: 3}},
		ACLChange{ACL: ACL{ResourceType: 4, Name: "kafka-cluster", PatternType: 3, Principal: "User:*", Host: "10.0.0.1", Operation: 2, Permission: 2}, Remove: true},
		RemoteSegment{TopicID: id, Partition: 2, SegmentID: [16]byte{9, 8}, BaseOffset: 100, EndOffset: 199, MaxTimestamp: -1, SizeBytes: 4096,
			LeaderEpochs: []EpochStart{{Epoch: 3, StartOffset: 100}, {Epoch: 5, StartOffset: 150}}, Broker: 2, LeaderEpoch: 5},
		RemoteSegment{TopicID: id, SegmentID: [16]byte{1}},
		RemoteSegment{TopicID: id, Partition: 2, SegmentID: [16]byte{9, 9}, BaseOffset: 200, EndOffset: 299, MaxTimestamp: 5, SizeBytes: 8192,
			LeaderEpochs: []EpochStart{{Epoch: 5, StartOffset: 200}}, Broker: 2, LeaderEpoch: 5,
			Objects: []ObjectSum{{ObjectIndex, 16, 0xdeadbeef}, {ObjectTimeIndex, 0, 0}, {ObjectEpochCheckpoint, 8, 1}, {ObjectTxnIndex, 34, 0xffffffff}}},
		RemoteSegmentStateChange{TopicID: id, Partition: 2, SegmentID: [16]byte{9, 8}, State: RemoteDeleteStarted, Broker: 3, LeaderEpoch: 6},
	}
	out := make([]Record, len(bodies))
	for i, b := range bodies {
		out[i] = NewRecord(b)
	}
	// Batches: of one record, and of every other sample.
	out = append(out, NewRecord(Batch{Records: []Record{out[2]}}), NewRecord(Batch{Records: slices.Clone(out)}))
	return out
}

func TestRecordRoundTrip(t *testing.T) {
	for _, r := range sampleRecords() {
		b := Encode(r)
		got, err := Decode(b)
		if err != nil {
			t.Fatalf("%v: %v", r, err)
		}
		if !reflect.DeepEqual(got, r) {
			t.Errorf("round trip:\n got %v\nwant %v", got, r)
		}
		if again := Encode(got); !bytes.Equal(again, b) {
			t.Errorf("%v: re-encoding differs", r)
		}
	}
}

func TestEncodeCanonicalMaps(t *testing.T) {
	m := map[string]string{}
	for _, k := range []string{"e", "d", "c", "b", "a", "f", "g"} {
		m[k] = k
	}
	want := Encode(NewRecord(CreateTopic{Name: "t", ID: [16]byte{1}, Configs: m}))
	for range 20 {
		if got := Encode(NewRecord(CreateTopic{Name: "t", ID: [16]byte{1}, Configs: m})); !bytes.Equal(got, want) {
			t.Fatal("map encoding depends on iteration order")
		}
	}
}

func TestDecodeRejects(t *testing.T) {
	good := Encode(NewRecord(FenceBroker{ID: 1, Epoch: 2}))
	mut := func(f func(b []byte) []byte) []byte { return f(bytes.Clone(good)) }
	cases := map[string][]byte{
		"empty":     nil,
		"short":     good[:5],
		"format":    mut(func(b []byte) []byte { b[0] = 2; return b }),
		"checksum":  mut(func(b []byte) []byte { b[len(b)-1] ^= 1; return b }),
		"truncated": fixCRC(good[:len(good)-1]),
		"trailing":  fixCRC(append(bytes.Clone(good), 0)),
		"type":      fixCRC(mut(func(b []byte) []byte { b[1] = 200; return b })),
		"version":   fixCRC(mut(func(b []byte) []byte { b[2] = 2; return b })),
		// a count of 2^31 strings with 3 bytes left must not allocate
		"huge count": fixCRC(append(Encode(NewRecord(CreateTopic{Name: "t", ID: [16]byte{1}}))[:headerLen+2+16],
			0x80, 0x80, 0x80, 0x80, 0x08, 1, 2, 3)),
		"non-minimal varint": fixCRC(append([]byte{1, byte(TypeCreateTopic), 1, 0, 0, 0, 0, 0x80, 0},
			append(make([]byte, 16), 0)...)),
		"unsorted map": fixCRC(append([]byte{1, byte(TypeCreateTopic), 1, 0, 0, 0, 0, 1, 't'},
			append(make([]byte, 16), 2, 1, 'b', 0, 1, 'a', 0)...)),
		"presence byte": fixCRC(append(Encode(NewRecord(ChangePartition{}))[:headerLen+20], 2, 0)),
	}
	for name, b := range cases {
		if _, err := Decode(b); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: err %v, want ErrCorrupt", name, err)
		}
	}
}

func TestBatchCodec(t *testing.T) {
	fence := NewRecord(FenceBroker{ID: 1, Epoch: 2})
	create := NewRecord(CreateTopic{Name: "t", ID: [16]byte{1}})
	good := Encode(NewRecord(Batch{Records: []Record{fence, create}}))

	// The body is the count, then each record's length and whole encoding.
	var want []byte
	want = append(want, 2)
	for _, r := range []Record{fence, create} {
		e := Encode(r)
		want = append(append(want, byte(len(e))), e...)
	}
	if !bytes.Equal(good[headerLen:], want) {
		t.Fatalf("body %x, want %x", good[headerLen:], want)
	}
	if good[1] != byte(TypeBatch) || TypeBatch.String() != "Batch" {
		t.Fatalf("type byte %d, %q", good[1], TypeBatch)
	}
	if s := NewRecord(Batch{Records: []Record{fence, create}}).String(); !strings.HasPrefix(s, "Batch{Records:[FenceBroker{") {
		t.Errorf("String: %s", s)
	}

	body := func(parts ...[]byte) []byte {
		return fixCRC(append([]byte{formatV1, byte(TypeBatch), currentVersion, 0, 0, 0, 0}, bytes.Join(parts, nil)...))
	}
	fenceEnc := Encode(fence)
	badInner := bytes.Clone(fenceEnc)
	badInner[len(badInner)-1] ^= 1 // the inner record's own checksum catches it
	cases := map[string][]byte{
		"empty batch":        body([]byte{0}),
		"no count":           body(),
		"nested batch":       body([]byte{1, byte(len(good))}, good),
		"inner checksum":     body([]byte{1, byte(len(badInner))}, badInner),
		"inner length short": body([]byte{1, byte(len(fenceEnc) - 1)}, fenceEnc),
		"inner length long":  body([]byte{1, byte(len(fenceEnc) + 1)}, fenceEnc),
		"count high":         body([]byte{2, byte(len(fenceEnc))}, fenceEnc),
		"count low":          body([]byte{1, byte(len(fenceEnc))}, fenceEnc, []byte{byte(len(fenceEnc))}, fenceEnc),
		"non-minimal count":  body([]byte{0x81, 0, byte(len(fenceEnc))}, fenceEnc),
		"non-minimal length": body([]byte{1, byte(len(fenceEnc)) | 0x80, 0}, fenceEnc),
		"huge count":         body([]byte{0xff, 0xff, 0xff, 0xff, 0x07, byte(len(fenceEnc))}, fenceEnc),
	}
	for name, b := range cases {
		if _, err := Decode(b); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: err %v, want ErrCorrupt", name, err)
		}
	}
	// The same bytes with a minimal count decode.
	if _, err := Decode(body([]byte{1, byte(len(fenceEnc))}, fenceEnc)); err != nil {
		t.Fatal(err)
	}

	for name, r := range map[string]Record{
		"empty":  NewRecord(Batch{}),
		"nested": NewRecord(Batch{Records: []Record{fence, NewRecord(Batch{Records: []Record{create}})}}),
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("Encode of a %s batch did not panic", name)
				}
			}()
			Encode(r)
		}()
	}
}

// fixCRC rewrites the checksum of b (if it has a header) so that Decode
// gets past it to the body.
func fixCRC(b []byte) []byte {
	if len(b) >= headerLen {
		b[0] = formatV1
		c := checksum(b)
		b[3], b[4], b[5], b[6] = byte(c>>24), byte(c>>16), byte(c>>8), byte(c)
	}
	return b
}

// FuzzDecode checks that Decode never panics and that whatever it accepts
// re-encodes to the same bytes. Each input is tried as is and with a valid
// checksum, so the fuzzer reaches the body decoders.
func FuzzDecode(f *testing.F) {
	for _, r := range sampleRecords() {
		f.Add(Encode(r))
	}
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, b := range [][]byte{data, fixCRC(bytes.Clone(data))} {
			r, err := Decode(b)
			if err != nil {
				if !errors.Is(err, ErrCorrupt) {
					t.Fatalf("error %v is not ErrCorrupt", err)
				}
				continue
			}
			if again := Encode(r); !bytes.Equal(again, b) {
				t.Fatalf("accepted %x but re-encodes to %x", b, again)
			}
		}
	})
}

// TestRemoteSegmentVersions: a RemoteSegment without object checksums is
// written at version 1, exactly as before checksums (the golden bytes are
// a record written by code from before them), and decodes unchecked; one
// with checksums is version 2; a version-2 body with no objects, or a
// version-1 body carrying them, is not a record.
func TestRemoteSegmentVersions(t *testing.T) {
	old := RemoteSegment{TopicID: [16]byte{1}, Partition: 2, SegmentID: [16]byte{9, 8}, BaseOffset: 100, EndOffset: 199, MaxTimestamp: -1,
		SizeBytes: 4096, LeaderEpochs: []EpochStart{{Epoch: 3, StartOffset: 100}}, Broker: 2, LeaderEpoch: 5}
	const golden = "0110018dd9960c0100000000000000000000000000000000000002090800000000000000000000000000000000000000" +
		"00006400000000000000c7ffffffffffffffff0000000000001000010000000300000000000000640000000200000005"
	b := Encode(NewRecord(old))
	if got := fmt.Sprintf("%x", b); got != golden {
		t.Fatalf("version-1 encoding changed:\n got %s\nwant %s", got, golden)
	}
	r, err := Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	if r.Version != 1 || r.Body.(RemoteSegment).Checksummed() {
		t.Fatalf("decoded %+v: want version 1, unchecked", r)
	}

	sums := old
	sums.Objects = []ObjectSum{{ObjectIndex, 8, 7}, {ObjectEpochCheckpoint, 12, 9}}
	b2 := Encode(NewRecord(sums))
	if b2[2] != 2 {
		t.Fatalf("version byte %d, want 2", b2[2])
	}
	r, err = Decode(b2)
	if err != nil || !reflect.DeepEqual(r.Body, sums) || !r.Body.(RemoteSegment).Checksummed() {
		t.Fatalf("Decode = %+v, %v", r, err)
	}

	// Version 2 with an empty object list (Encode writes version 1 then).
	empty := append(bytes.Clone(b), 0)
	empty[2] = 2
	// Version 1 followed by objects (trailing bytes).
	trailing := bytes.Clone(b2)
	trailing[2] = 1
	for name, bad := range map[string][]byte{"v2 without objects": fixCRC(empty), "v1 with objects": fixCRC(trailing)} {
		if _, err := Decode(bad); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: Decode error %v, want ErrCorrupt", name, err)
		}
	}
}
