package txn

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"testing"
)

// The bytes Kafka's TransactionLog writes, built by hand from its schemas
// (TransactionLogKey v0, TransactionLogValue v0 and v1), so a change in
// kmsg or in value() that Kafka's tools could not read shows here.
func TestRecordBytes(t *testing.T) {
	be16 := func(b []byte, v int16) []byte { return binary.BigEndian.AppendUint16(b, uint16(v)) }
	be32 := func(b []byte, v int32) []byte { return binary.BigEndian.AppendUint32(b, uint32(v)) }
	be64 := func(b []byte, v int64) []byte { return binary.BigEndian.AppendUint64(b, uint64(v)) }

	// Key: int16 version 0, string (int16 length, bytes).
	var key []byte
	key = be16(key, 0)
	key = be16(key, 3)
	key = append(key, "txn"...)
	if got := encodeKey("txn"); !bytes.Equal(got, key) {
		t.Errorf("key: %x, want %x", got, key)
	}

	m := meta{pid: 4242, prevPid: 4241, nextPid: -1, epoch: 7, timeoutMs: 60000, state: PrepareCommit,
		parts: []TopicPartition{{"a", 0}, {"a", 2}, {"b", 1}}, startMs: 1000, updateMs: 2000, tv: 2}

	// Value v0: version, producer id, epoch, timeout, state byte,
	// partitions (int32 count; topic string, int32 count of int32 ids),
	// last update, start.
	var v0 []byte
	v0 = be16(v0, 0)
	v0 = be64(v0, 4242)
	v0 = be16(v0, 7)
	v0 = be32(v0, 60000)
	v0 = append(v0, 2)
	v0 = be32(v0, 2)
	v0 = be16(v0, 1)
	v0 = append(v0, 'a')
	v0 = be32(v0, 2)
	v0 = be32(v0, 0)
	v0 = be32(v0, 2)
	v0 = be16(v0, 1)
	v0 = append(v0, 'b')
	v0 = be32(v0, 1)
	v0 = be32(v0, 1)
	v0 = be64(v0, 2000)
	v0 = be64(v0, 1000)
	if got := m.value(0).AppendTo(nil); !bytes.Equal(got, v0) {
		t.Errorf("value v0:\n%x\nwant\n%x", got, v0)
	}

	// Value v1 (flexible): compact arrays and strings (uvarint n+1),
	// per-element tag buffers, and the tagged fields: 0 previous producer
	// id, 1 next producer id (-1, the default: absent), 2 client
	// transaction version.
	var v1 []byte
	v1 = be16(v1, 1)
	v1 = be64(v1, 4242)
	v1 = be16(v1, 7)
	v1 = be32(v1, 60000)
	v1 = append(v1, 2)
	v1 = append(v1, 3) // 2 topics
	v1 = append(v1, 2, 'a', 3)
	v1 = be32(v1, 0)
	v1 = be32(v1, 2)
	v1 = append(v1, 0) // no tags
	v1 = append(v1, 2, 'b', 2)
	v1 = be32(v1, 1)
	v1 = append(v1, 0)
	v1 = be64(v1, 2000)
	v1 = be64(v1, 1000)
	v1 = append(v1, 2)    // two tagged fields
	v1 = append(v1, 0, 8) // tag 0, 8 bytes
	v1 = be64(v1, 4241)
	v1 = append(v1, 2, 2) // tag 2, 2 bytes
	v1 = be16(v1, 2)
	if got := m.value(1).AppendTo(nil); !bytes.Equal(got, v1) {
		t.Errorf("value v1:\n%x\nwant\n%x", got, v1)
	}

	// Empty writes a null partition array (Kafka: "if Empty null").
	e := meta{pid: 1, prevPid: 1, nextPid: -1, epoch: 0, timeoutMs: 1, state: Empty, startMs: -1}
	if got := e.value(0).AppendTo(nil); !bytes.Equal(got[2+8+2+4+1:][:4], []byte{0xff, 0xff, 0xff, 0xff}) {
		t.Errorf("Empty v0 partitions: %x, want null", got)
	}

	// Round trips.
	for _, v := range []int16{0, 1} {
		got, err := decodeValue(m.value(v).AppendTo(nil))
		if err != nil {
			t.Fatal(err)
		}
		want := m
		want.lastEpoch = -1
		if v == 0 {
			want.prevPid, want.tv = -1, 0
		}
		if got.String() != want.String() {
			t.Errorf("v%d round trip: %v, want %v", v, got, want)
		}
	}
	if id, ok, err := decodeKey(key); id != "txn" || !ok || err != nil {
		t.Errorf("decodeKey: %q %v %v", id, ok, err)
	}
	if _, ok, err := decodeKey([]byte{0, 1, 0, 0}); ok || err != nil {
		t.Errorf("decodeKey of version 1: %v %v, want skipped", ok, err)
	}
	if _, _, err := decodeKey([]byte{0}); err == nil {
		t.Error("decodeKey of one byte: no error")
	}
	if _, err := decodeValue([]byte{0, 9, 1}); err == nil {
		t.Error("decodeValue of garbage: no error")
	}
}

func (m meta) String() string {
	return fmtMeta(m)
}

func fmtMeta(m meta) string {
	return fmt.Sprintf("%d/%d prev=%d next=%d last=%d to=%d %s %v start=%d update=%d tv=%d",
		m.pid, m.epoch, m.prevPid, m.nextPid, m.lastEpoch, m.timeoutMs, m.state, m.parts, m.startMs, m.updateMs, m.tv)
}
