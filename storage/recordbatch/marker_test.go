package recordbatch

import (
	"testing"

	"github.com/fjordlog/fjord/storage/recordbatch/batchtest"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestMarkerBatchMatchesKmsg: the marker BuildMarker writes is Kafka's, as
// franz-go decodes it.
func TestMarkerBatchMatchesKmsg(t *testing.T) {
	for _, commit := range []bool{false, true} {
		b := BuildMarker(EndTxnMarker{Commit: commit, CoordinatorEpoch: 9}, 77, 5, 1_700_000_000_123)
		rb, recs := batchtest.Decode(t, b)
		if rb.Magic != 2 || rb.Attributes != 0x30 || rb.ProducerID != 77 || rb.ProducerEpoch != 5 || rb.FirstSequence != -1 ||
			rb.NumRecords != 1 || rb.LastOffsetDelta != 0 || rb.FirstTimestamp != 1_700_000_000_123 || rb.MaxTimestamp != 1_700_000_000_123 {
			t.Fatalf("header %+v", rb)
		}
		if err := CheckCRC(b); err != nil {
			t.Fatal(err)
		}
		var key kmsg.ControlRecordKey
		var val kmsg.EndTxnMarker
		if err := key.ReadFrom(recs[0].Key); err != nil {
			t.Fatal(err)
		}
		if err := val.ReadFrom(recs[0].Value); err != nil {
			t.Fatal(err)
		}
		want := kmsg.ControlRecordKeyTypeAbort
		if commit {
			want = kmsg.ControlRecordKeyTypeCommit
		}
		if key.Version != 0 || key.Type != want || val.Version != 0 || val.CoordinatorEpoch != 9 || len(recs[0].Headers) != 0 {
			t.Fatalf("marker record: key %+v value %+v", key, val)
		}
		info, err := Validate(b, 0)
		if err != nil {
			t.Fatal(err)
		}
		m, err := ParseEndTxnMarker(b, info)
		if err != nil || m.Commit != commit || m.CoordinatorEpoch != 9 {
			t.Fatalf("ParseEndTxnMarker: %+v, %v", m, err)
		}
	}
}

// TestValidateControlBatch: a control batch must be a transaction marker;
// anything else is refused as corrupt, never a panic.
func TestValidateControlBatch(t *testing.T) {
	rec := func(key, val []byte) batchtest.Record { return batchtest.Record{Key: key, Value: val} }
	ctl := int16(attrControl | attrTransactional)
	good := batchtest.MarkerRecord(false, 3)
	v1 := rec([]byte{0, 1, 0, 1, 0xee}, []byte{0, 1, 0, 0, 0, 3, 0xee}) // newer versions read as 0, extra bytes ignored (Kafka)
	for _, c := range []struct {
		name string
		o    batchtest.Opts
		ok   bool
	}{
		{"abort", batchtest.Opts{Attrs: ctl, Idempotent: true, PID: 1, Seq: -1, Records: []batchtest.Record{good}}, true},
		{"commit gzip", batchtest.Opts{Attrs: ctl, Idempotent: true, PID: 1, Seq: -1, Codec: CodecGzip, Records: []batchtest.Record{batchtest.MarkerRecord(true, 0)}}, true},
		{"version 1", batchtest.Opts{Attrs: ctl, Idempotent: true, PID: 1, Seq: -1, Records: []batchtest.Record{v1}}, true},
		{"not transactional", batchtest.Opts{Attrs: attrControl, Idempotent: true, PID: 1, Seq: -1, Records: []batchtest.Record{good}}, false},
		{"no producer id", batchtest.Opts{Attrs: ctl, Records: []batchtest.Record{good}}, false},
		{"two records", batchtest.Opts{Attrs: ctl, Idempotent: true, PID: 1, Seq: -1, Records: []batchtest.Record{good, {OffsetDelta: 1, Key: good.Key, Value: good.Value}}}, false},
		{"short key", batchtest.Opts{Attrs: ctl, Idempotent: true, PID: 1, Seq: -1, Records: []batchtest.Record{rec([]byte{0, 0, 0}, good.Value)}}, false},
		{"null key", batchtest.Opts{Attrs: ctl, Idempotent: true, PID: 1, Seq: -1, Records: []batchtest.Record{rec(nil, good.Value)}}, false},
		{"negative key version", batchtest.Opts{Attrs: ctl, Idempotent: true, PID: 1, Seq: -1, Records: []batchtest.Record{rec([]byte{0xff, 0xff, 0, 0}, good.Value)}}, false},
		{"leader change type", batchtest.Opts{Attrs: ctl, Idempotent: true, PID: 1, Seq: -1, Records: []batchtest.Record{rec([]byte{0, 0, 0, 2}, good.Value)}}, false},
		{"short value", batchtest.Opts{Attrs: ctl, Idempotent: true, PID: 1, Seq: -1, Records: []batchtest.Record{rec(good.Key, []byte{0, 0, 0, 0, 0})}}, false},
		{"negative value version", batchtest.Opts{Attrs: ctl, Idempotent: true, PID: 1, Seq: -1, Records: []batchtest.Record{rec(good.Key, []byte{0x80, 0, 0, 0, 0, 0})}}, false},
	} {
		b := batchtest.Build(t, c.o)
		_, err := Validate(b, 0)
		if c.ok != (err == nil) {
			t.Fatalf("%s: Validate: %v", c.name, err)
		}
		if err != nil {
			wantErrIs(t, err, ErrCorrupt)
		}
	}
	// An empty control batch (Kafka's cleaner leaves them) is not a
	// produced batch: a record count of 0 is refused before.
	_, err := Validate(batchtest.Build(t, batchtest.Opts{Attrs: ctl, Idempotent: true, PID: 1, Records: []batchtest.Record{}, Count: batchtest.I32(0)}), 0)
	wantErrIs(t, err, ErrCorrupt)
}
