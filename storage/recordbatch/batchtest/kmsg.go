package batchtest

import (
	"encoding/binary"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Decode reads a batch with franz-go alone: kmsg for the framing, kgo's
// decompressor for the body, kmsg.Record for each record. Anything it
// cannot read fails the test.
func Decode(t testing.TB, b []byte) (kmsg.RecordBatch, []kmsg.Record) {
	t.Helper()
	var rb kmsg.RecordBatch
	if err := rb.ReadFrom(b); err != nil {
		t.Fatalf("kmsg.RecordBatch.ReadFrom: %v", err)
	}
	raw, err := kgo.DefaultDecompressor().Decompress(rb.Records, kgo.CompressionCodecType(rb.Attributes&7))
	if err != nil {
		t.Fatalf("kgo decompress codec %d: %v", rb.Attributes&7, err)
	}
	var recs []kmsg.Record
	for len(raw) > 0 {
		l, n := binary.Varint(raw)
		if n <= 0 || l < 0 || int(l) > len(raw)-n {
			t.Fatalf("bad record length prefix")
		}
		var r kmsg.Record
		if err := r.ReadFrom(raw[:n+int(l)]); err != nil {
			t.Fatalf("kmsg.Record.ReadFrom: %v", err)
		}
		recs = append(recs, r)
		raw = raw[n+int(l):]
	}
	return rb, recs
}

// MarkerOf reads the transaction marker of a control batch that kmsg has
// read, with kmsg alone: ok is false unless rb is an uncompressed control
// batch of one record whose key and value kmsg reads as a ControlRecordKey
// of type abort or commit and an EndTxnMarker, neither of a negative
// version. (A compressed marker is not read: false.)
func MarkerOf(rb kmsg.RecordBatch) (commit, ok bool) {
	if rb.Attributes&AttrControl == 0 || rb.NumRecords != 1 || rb.Attributes&7 != 0 {
		return false, false
	}
	raw := rb.Records
	l, n := binary.Varint(raw)
	if n <= 0 || l < 0 || int(l) > len(raw)-n {
		return false, false
	}
	var r kmsg.Record
	if err := r.ReadFrom(raw[:n+int(l)]); err != nil {
		return false, false
	}
	var key kmsg.ControlRecordKey
	var val kmsg.EndTxnMarker
	if key.ReadFrom(r.Key) != nil || val.ReadFrom(r.Value) != nil || key.Version < 0 || val.Version < 0 ||
		(key.Type != kmsg.ControlRecordKeyTypeAbort && key.Type != kmsg.ControlRecordKeyTypeCommit) {
		return false, false
	}
	return key.Type == kmsg.ControlRecordKeyTypeCommit, true
}
