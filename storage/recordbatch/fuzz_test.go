package recordbatch

import (
	"bytes"
	"errors"
	"testing"

	"github.com/fjordlog/fjord/storage/recordbatch/batchtest"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// FuzzValidateBatch: Validate never panics and classifies every refusal;
// what it accepts is framed right, agrees with ParseHeader, walks to
// exactly its record count with offset deltas in range, and, for a
// control batch, is a marker that kmsg reads the same.
func FuzzValidateBatch(f *testing.F) {
	for _, c := range batchtest.Codecs {
		for _, n := range []int{1, 4} {
			b := batchtest.Build(f, batchtest.Opts{N: n, Codec: c.Codec, Xerial: c.Xerial, Idempotent: true, PID: 1, Seq: 3, ValueSize: 30})
			f.Add(b, false)
			f.Add(b, true)
			f.Add(b[:len(b)-1], false)
			f.Add(b[:len(b)-3], true)
			m := bytes.Clone(b)
			m[len(m)/2] ^= 0x55
			f.Add(m, false)
			f.Add(bytes.Clone(m), true)
		}
	}
	three := batchtest.Opts{N: 3}
	f.Add(batchtest.Build(f, batchtest.Opts{N: 3, Count: batchtest.I32(2)}), false)
	f.Add(withBody(f, three, batchtest.EncodeRecords(append(three.Recs(), batchtest.Record{OffsetDelta: 1}))), false)
	f.Add(batchtest.Build(f, batchtest.Opts{Attrs: attrControl}), true)
	// Control batches: markers as leaders write them, and malformed ones.
	ctl := int16(attrControl | attrTransactional)
	for _, b := range [][]byte{
		BuildMarker(EndTxnMarker{Commit: true, CoordinatorEpoch: 2}, 3, 1, 1000),
		BuildMarker(EndTxnMarker{}, 3, 1, 1000),
		batchtest.Build(f, batchtest.Opts{Attrs: ctl, Idempotent: true, PID: 3, Seq: -1, Codec: CodecZstd, Records: []batchtest.Record{batchtest.MarkerRecord(false, 9)}}),
		batchtest.Build(f, batchtest.Opts{Attrs: ctl, Idempotent: true, PID: 3, Seq: -1, Records: []batchtest.Record{batchtest.MarkerRecord(true, 1), {OffsetDelta: 1, Key: []byte{0, 0, 0, 1}, Value: make([]byte, 6)}}}),
		batchtest.Build(f, batchtest.Opts{Attrs: ctl, Idempotent: true, PID: 3, Seq: -1, Records: []batchtest.Record{{Key: []byte{0, 0, 0, 2}, Value: make([]byte, 6)}}}),
		batchtest.Build(f, batchtest.Opts{Attrs: attrControl, Idempotent: true, PID: 3, Seq: -1, Records: []batchtest.Record{batchtest.MarkerRecord(true, 1)}}),
	} {
		f.Add(b, false)
		f.Add(b, true)
		m := bytes.Clone(b)
		m[len(m)-3] ^= 0x80
		f.Add(m, true)
	}
	f.Add(make([]byte, HeaderLen), true)
	f.Add([]byte{}, false)

	f.Fuzz(func(t *testing.T, b []byte, fix bool) {
		if fix {
			batchtest.FixFraming(b)
		}
		info, err := Validate(b, 0)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrTooLarge) && !errors.Is(err, ErrUnsupportedMagic) {
				t.Fatalf("unclassified error: %v", err)
			}
			return
		}
		if info.Bytes != len(b) || CheckCRC(b) != nil {
			t.Fatalf("accepted a batch with bad framing: info %+v, %d bytes", info, len(b))
		}
		if h, err := ParseHeader(b); err != nil || h != info {
			t.Fatalf("ParseHeader disagrees: %+v %v", h, err)
		}
		if _, err := Validate(b, info.Bytes-1); !errors.Is(err, ErrTooLarge) {
			t.Fatalf("maxBytes one short: %v", err)
		}
		var n int32
		var bad *Record
		err = EachRecord(b, info, func(r Record) bool {
			if (r.OffsetDelta < 0 || r.OffsetDelta > info.LastDelta) && bad == nil {
				bad = &r
			}
			n++
			return true
		})
		if err != nil {
			t.Fatalf("EachRecord on an accepted batch: %v", err)
		}
		if n > info.Records && bad != nil {
			// Known: see TestValidateBatchExtraRecordWithBadOffsetDelta.
			t.Fatalf("regression: accepted batch with recordCount %d holds %d records (an extra record with offsetDelta %d)", info.Records, n, bad.OffsetDelta)
		}
		if n != info.Records {
			t.Fatalf("accepted batch says %d records, EachRecord walked %d", info.Records, n)
		}
		if bad != nil {
			t.Fatalf("accepted batch has a record with offset delta %d outside [0, %d]", bad.OffsetDelta, info.LastDelta)
		}
		if info.Control {
			// An accepted control batch is a marker, as kmsg reads it too.
			m, err := ParseEndTxnMarker(b, info)
			if err != nil || info.Records != 1 || !info.Transactional || info.ProducerID < 0 {
				t.Fatalf("accepted control batch %+v: marker %+v, %v", info, m, err)
			}
			if info.Codec == CodecNone {
				var rb kmsg.RecordBatch
				err := rb.ReadFrom(b)
				commit, ok := batchtest.MarkerOf(rb)
				if err != nil || !ok || commit != m.Commit {
					t.Fatalf("accepted control batch: kmsg reads commit %v ok %v, %v; ParseEndTxnMarker %+v", commit, ok, err, m)
				}
			}
		}
	})
}
