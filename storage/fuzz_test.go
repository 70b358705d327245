package storage

import (
	"bytes"
	"encoding/binary"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/fjordlog/fjord/storage/recordbatch"
	"github.com/fjordlog/fjord/storage/recordbatch/batchtest"
	"github.com/rs/zerolog"
)

// fuzzSegment is a valid active segment of a few stored batches: an
// idempotent producer's, then transactions: producer 6's aborted, 7's
// committed while 8's is open, then 8's aborted.
func fuzzSegment(t testing.TB) []byte {
	var seg []byte
	off := int64(0)
	add := func(b []byte) {
		recordbatch.Stamp(b, off, 1, -1)
		seg = append(seg, b...)
		off = recordbatch.LastOffset(b) + 1
	}
	for i, c := range allCodecs[:4] {
		add(buildBatch(t, batchOpts{N: 1 + i, Codec: c.Codec, Xerial: c.Xerial, Idempotent: true, PID: 5, Seq: int32(off), BaseTS: 1000 + int64(i)}))
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
	info, _ := recordbatch.ParseHeader(b)
	tb := tbatch{base: recordbatch.BaseOffset(b), last: recordbatch.LastOffset(b), pid: info.ProducerID, epoch: info.ProducerEpoch, txn: info.Transactional, control: info.Control}
	if m := markerOf(b, info); m != nil {
		tb.marker, tb.commit = true, m.Commit
	}
	return tb
}

// fixSegmentFraming recomputes the CRC of every batch whose length fits.
func fixSegmentFraming(b []byte) {
	for pos := 0; pos+recordbatch.HeaderLen <= len(b); {
		n := int(int32(binary.BigEndian.Uint32(b[pos+batchtest.OffLength:]))) + recordbatch.PrefixLen
		if n < recordbatch.HeaderLen || pos+n > len(b) {
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
	end := recordbatch.LastOffset(bs[len(bs)-1]) + 1
	for _, at := range []int64{end + 1, end + 1000, maxRelOffset - 1, maxRelOffset, 1 << 40} {
		b := buildBatch(f, batchOpts{N: 2, Idempotent: true, PID: 5, Seq: 10})
		recordbatch.Stamp(b, at, 1, -1)
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
			if len(kept)-pos < recordbatch.HeaderLen {
				t.Fatalf("recovered file ends with %d bytes of a partial header", len(kept)-pos)
			}
			info, err := recordbatch.ParseHeader(kept[pos:])
			if err != nil || pos+info.Bytes > len(kept) {
				t.Fatalf("recovered file has a bad batch at %d: %v", pos, err)
			}
			b := kept[pos : pos+info.Bytes]
			if err := recordbatch.CheckCRC(b); err != nil {
				t.Fatalf("recovered file keeps a batch failing its CRC at %d: %v", pos, err)
			}
			if recordbatch.BaseOffset(b) < next || (!compacted && recordbatch.BaseOffset(b) != next) || info.LastDelta < 0 || recordbatch.LastOffset(b) > maxRelOffset {
				forward = false
			}
			next = recordbatch.LastOffset(b) + 1
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
			probes := []int64{recordbatch.BaseOffset(b), recordbatch.BaseOffset(b) + (recordbatch.LastOffset(b)-recordbatch.BaseOffset(b))/2, recordbatch.LastOffset(b)}
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
		info, err := recordbatch.Validate(nb, 0)
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
	for pos+recordbatch.HeaderLen <= len(data) {
		info, err := recordbatch.ParseHeader(data[pos:])
		if err != nil || pos+info.Bytes > len(data) || recordbatch.CheckCRC(data[pos:pos+info.Bytes]) != nil {
			break
		}
		base := recordbatch.BaseOffset(data[pos:])
		if base < next || (!compacted && base != next) || info.LastDelta < 0 || base > maxBaseOffset || base+int64(info.LastDelta) > maxRelOffset {
			break
		}
		next = base + int64(info.LastDelta) + 1
		pos += info.Bytes
	}
	return pos
}
