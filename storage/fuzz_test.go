package storage

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/rs/zerolog"
)

// fixBatchFraming makes b's length field and CRC agree with its bytes, so a
// fuzzer's mutations reach the checks behind the CRC.
func fixBatchFraming(b []byte) {
	if len(b) < BatchHeaderLen {
		return
	}
	binary.BigEndian.PutUint32(b[offLength:], uint32(len(b)-lengthFieldEnd))
	fixCRC(b)
}

func FuzzValidateBatch(f *testing.F) {
	for _, c := range allCodecs {
		for _, n := range []int{1, 4} {
			b := buildBatch(f, batchOpts{N: n, Codec: c.codec, Xerial: c.xerial, Idempotent: true, PID: 1, Seq: 3, ValueSize: 30})
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
	three := batchOpts{N: 3}
	f.Add(buildBatch(f, batchOpts{N: 3, Count: i32(2)}), false)
	f.Add(withBodyTB(f, three, encodeRecords(append(three.records(), testRecord{OffsetDelta: 1}))), false)
	f.Add(buildBatch(f, batchOpts{Attrs: attrControl}), true)
	// Control batches: markers as leaders write them, and malformed ones.
	ctl := int16(attrControl | attrTransactional)
	for _, b := range [][]byte{
		buildMarkerBatch(TxnMarker{ProducerID: 3, ProducerEpoch: 1, Commit: true, CoordinatorEpoch: 2}, 1000),
		buildMarkerBatch(TxnMarker{ProducerID: 3, ProducerEpoch: 1}, 1000),
		buildBatch(f, batchOpts{Attrs: ctl, Idempotent: true, PID: 3, Seq: -1, Codec: CodecZstd, Records: []testRecord{markerRecord(false, 9)}}),
		buildBatch(f, batchOpts{Attrs: ctl, Idempotent: true, PID: 3, Seq: -1, Records: []testRecord{markerRecord(true, 1), {OffsetDelta: 1, Key: []byte{0, 0, 0, 1}, Value: make([]byte, 6)}}}),
		buildBatch(f, batchOpts{Attrs: ctl, Idempotent: true, PID: 3, Seq: -1, Records: []testRecord{{Key: []byte{0, 0, 0, 2}, Value: make([]byte, 6)}}}),
		buildBatch(f, batchOpts{Attrs: attrControl, Idempotent: true, PID: 3, Seq: -1, Records: []testRecord{markerRecord(true, 1)}}),
	} {
		f.Add(b, false)
		f.Add(b, true)
		m := bytes.Clone(b)
		m[len(m)-3] ^= 0x80
		f.Add(m, true)
	}
	f.Add(make([]byte, BatchHeaderLen), true)
	f.Add([]byte{}, false)

	f.Fuzz(func(t *testing.T, b []byte, fix bool) {
		if fix {
			fixBatchFraming(b)
		}
		info, err := ValidateBatch(b, 0)
		if err != nil {
			if !errors.Is(err, ErrCorruptBatch) && !errors.Is(err, ErrBatchTooLarge) && !errors.Is(err, ErrUnsupportedMagic) {
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
		if _, err := ValidateBatch(b, info.Bytes-1); !errors.Is(err, ErrBatchTooLarge) {
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
				tb, err := decodeTBatch(b)
				if err != nil || !tb.marker || tb.commit != m.Commit {
					t.Fatalf("accepted control batch: kmsg reads %+v, %v; ParseEndTxnMarker %+v", tb, err, m)
				}
			}
		}
	})
}

func withBodyTB(t testing.TB, o batchOpts, body []byte) []byte {
	return buildBatchBody(t, o, o.records(), body)
}

// fuzzSegment is a valid active segment of a few stored batches: an
// idempotent producer's, then transactions: producer 6's aborted, 7's
// committed while 8's is open, then 8's aborted.
func fuzzSegment(t testing.TB) []byte {
	var seg []byte
	off := int64(0)
	add := func(b []byte) {
		StampBatch(b, off, 1, -1)
		seg = append(seg, b...)
		off = LastOffset(b) + 1
	}
	for i, c := range allCodecs[:4] {
		add(buildBatch(t, batchOpts{N: 1 + i, Codec: c.codec, Xerial: c.xerial, Idempotent: true, PID: 5, Seq: int32(off), BaseTS: 1000 + int64(i)}))
	}
	txn := func(pid int64, n int) []byte {
		return buildBatch(t, batchOpts{N: n, Idempotent: true, PID: pid, Attrs: attrTransactional, BaseTS: 1010})
	}
	add(txn(6, 2))
	add(buildMarkerBatch(TxnMarker{ProducerID: 6}, 1011))
	add(txn(7, 1))
	add(txn(8, 2))
	add(buildMarkerBatch(TxnMarker{ProducerID: 7, Commit: true}, 1012))
	add(buildMarkerBatch(TxnMarker{ProducerID: 8, CoordinatorEpoch: 3}, 1013))
	return seg
}

// storedTBatch is the transaction model's view of a stored batch that
// passed recovery (no kmsg: a fuzzed body need not be one it decodes).
func storedTBatch(b []byte) tbatch {
	info, _ := ParseHeader(b)
	tb := tbatch{base: BaseOffset(b), last: LastOffset(b), pid: info.ProducerID, epoch: info.ProducerEpoch, txn: info.Transactional, control: info.Control}
	if m := markerOf(b, info); m != nil {
		tb.marker, tb.commit = true, m.Commit
	}
	return tb
}

// fixSegmentFraming recomputes the CRC of every batch whose length fits.
func fixSegmentFraming(b []byte) {
	for pos := 0; pos+BatchHeaderLen <= len(b); {
		n := int(int32(binary.BigEndian.Uint32(b[pos+offLength:]))) + lengthFieldEnd
		if n < BatchHeaderLen || pos+n > len(b) {
			return
		}
		fixCRC(b[pos : pos+n])
		pos += n
	}
}

func FuzzRecovery(f *testing.F) {
	seg := fuzzSegment(f)
	bs := splitBatches(f, seg)
	f.Add([]byte{}, uint16(0), false, false)
	f.Add(make([]byte, 100), uint16(0), false, false)
	f.Add(bs[1][:40], uint16(0), false, false)
	f.Add(bs[3], uint16(0), false, false)
	f.Add([]byte{0xff}, uint16(len(bs[0])+20), true, false)
	f.Add([]byte{0x00, 0x00, 0x00, 0x05}, uint16(len(bs[0])+8), true, false)
	f.Add([]byte{0x7f}, uint16(len(bs[0])+23), true, true) // lastOffsetDelta, CRC fixed
	f.Add([]byte{0x10}, uint16(len(bs[0])+5), true, false) // base offset
	f.Add([]byte("garbage garbage garbage"), uint16(len(seg)-10), true, false)
	// Batches after a gap, as a follower of a compacted log stores them:
	// kept while they end within the segment's int32 relative offsets.
	end := LastOffset(bs[len(bs)-1]) + 1
	for _, at := range []int64{end + 1, end + 1000, maxRelOffset - 1, maxRelOffset, 1 << 40} {
		b := buildBatch(f, batchOpts{N: 2, Idempotent: true, PID: 5, Seq: 10})
		StampBatch(b, at, 1, -1)
		f.Add(b, uint16(0), false, false)
	}

	f.Fuzz(func(t *testing.T, tail []byte, at uint16, overwrite, fix bool) {
		data := bytes.Clone(seg)
		if overwrite {
			pos := int(at) % (len(data) + 1)
			if end := pos + len(tail); end > len(data) {
				data = append(data, make([]byte, end-len(data))...)
			}
			copy(data[pos:], tail)
		} else {
			data = append(data, tail...)
		}
		if fix {
			fixSegmentFraming(data)
		}
		// Half the inputs recover as a compacted log (gaps allowed), half not:
		// one Open per input keeps the fuzzer fast.
		compacted := at%2 == 1
		// What recovery should keep: the longest prefix of whole, CRC-valid
		// batches whose offsets go forward within the segment's int32
		// relative offsets: contiguously, unless the log is compacted.
		want := recoveryModel(data, compacted)
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "00000000000000000000.log"), data, 0o644); err != nil {
			t.Fatal(err)
		}
		cfg := testConfig()
		cfg.IndexIntervalBytes = 64
		cfg.Compacted = compacted
		l, err := Open(dir, cfg, zerolog.Nop())
		if err != nil {
			t.Fatalf("Open: %v", err)
		}
		defer l.Close()

		// The file was cut on a batch boundary, every batch kept is intact.
		kept, err := os.ReadFile(filepath.Join(dir, "00000000000000000000.log"))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.HasPrefix(data, kept) {
			t.Fatalf("recovered file is not a prefix of the original")
		}
		var batches [][]byte
		forward := true
		next := int64(0)
		for pos := 0; pos < len(kept); {
			if len(kept)-pos < BatchHeaderLen {
				t.Fatalf("recovered file ends with %d bytes of a partial header", len(kept)-pos)
			}
			info, err := ParseHeader(kept[pos:])
			if err != nil || pos+info.Bytes > len(kept) {
				t.Fatalf("recovered file has a bad batch at %d: %v", pos, err)
			}
			b := kept[pos : pos+info.Bytes]
			if err := CheckCRC(b); err != nil {
				t.Fatalf("recovered file keeps a batch failing its CRC at %d: %v", pos, err)
			}
			if BaseOffset(b) < next || (!compacted && BaseOffset(b) != next) || info.LastDelta < 0 || LastOffset(b) > maxRelOffset {
				forward = false
			}
			next = LastOffset(b) + 1
			batches = append(batches, b)
			pos += info.Bytes
		}
		if !forward {
			t.Fatalf("regression: recovery (compacted=%v) kept a batch whose base offset goes back, leaves a gap in a log that is not compacted, or runs past the segment's relative offsets (or whose lastOffsetDelta is negative)", compacted)
		}
		if l.Size() != int64(len(kept)) || l.EndOffset() != next || l.StartOffset() != 0 {
			t.Fatalf("size %d end %d start %d; file %d bytes ending at offset %d", l.Size(), l.EndOffset(), l.StartOffset(), len(kept), next)
		}
		if len(kept) != want {
			t.Fatalf("recovery (compacted=%v) kept %d bytes, want %d", compacted, len(kept), want)
		}
		if !overwrite && len(kept) < len(seg) {
			t.Fatalf("recovery cut into the valid batches before an appended tail: kept %d of %d bytes", len(kept), len(seg))
		}

		// Reads return exactly the kept batches, each intact.
		got, err := l.Read(l.StartOffset(), math.MaxInt32, math.MaxInt64, nil)
		if err != nil {
			t.Fatalf("Read(start): %v", err)
		}
		if !bytes.Equal(got, kept) {
			t.Fatalf("Read(start) returned %d bytes, the segment holds %d", len(got), len(kept))
		}
		for _, b := range batches {
			probes := []int64{BaseOffset(b), BaseOffset(b) + (LastOffset(b)-BaseOffset(b))/2, LastOffset(b)}
			for _, off := range probes {
				r, err := l.Read(off, 1, math.MaxInt64, nil)
				if err != nil {
					t.Fatalf("Read(%d): %v", off, err)
				}
				if !bytes.Equal(r, b) {
					t.Fatalf("Read(%d) did not return its batch", off)
				}
			}
		}
		// The transaction state is a replay of what was kept.
		tbs := make([]tbatch, len(batches))
		for i, b := range batches {
			tbs[i] = storedTBatch(b)
		}
		if d := diffTxnState(l, replayTxns(tbs, nil), []int64{0, next / 2, next}); d != "" {
			t.Fatalf("after recovery: %s", d)
		}
		if _, _, _, err := l.OffsetForTimestamp(0, math.MaxInt64); err != nil {
			// Recovery checks the CRC but not the records; a CRC-valid
			// batch with a broken body may make the query fail, never panic.
			t.Logf("OffsetForTimestamp: %v", err)
		}

		// The log takes appends right after what was kept, from a leader at
		// an epoch no older than the recovered log's (an older one is
		// refused as stale, which is right).
		nb := buildBatch(t, batchOpts{N: 2, Idempotent: true, PID: 9, Seq: 0})
		info, err := ValidateBatch(nb, 0)
		if err != nil {
			t.Fatal(err)
		}
		res, err := l.Append(nb, info, max(l.LatestEpoch(), 7), 1)
		if err != nil {
			t.Fatalf("append after recovery: %v", err)
		}
		if res.BaseOffset != next {
			t.Fatalf("append after recovery at %d, want %d", res.BaseOffset, next)
		}
	})
}

// recoveryModel returns the length of the prefix of data that recovery
// should keep: whole batches with a valid header and CRC, each starting
// where the one before ended (from 0) or, in a compacted log, at or after
// it (gaps allowed, as compaction and a follower's copy of it leave them),
// and ending within the int32 offsets relative to the segment base (0).
func recoveryModel(data []byte, compacted bool) int {
	pos, next := 0, int64(0)
	for pos+BatchHeaderLen <= len(data) {
		info, err := ParseHeader(data[pos:])
		if err != nil || pos+info.Bytes > len(data) || CheckCRC(data[pos:pos+info.Bytes]) != nil {
			break
		}
		base := BaseOffset(data[pos:])
		if base < next || (!compacted && base != next) || info.LastDelta < 0 || base > maxBaseOffset || base+int64(info.LastDelta) > maxRelOffset {
			break
		}
		next = base + int64(info.LastDelta) + 1
		pos += info.Bytes
	}
	return pos
}
