package tier

import (
	"errors"
	"fmt"

	"github.com/fjordlog/fjord/controller"
	"github.com/fjordlog/fjord/storage/recordbatch"
)

// ErrDamaged marks a remote object whose bytes do not hold what its
// metadata says: a batch whose CRC-32C does not match, offsets outside
// the segment's [BaseOffset, EndOffset] or going backwards, a header
// that does not parse, or an object shorter than the segment's size. A
// read that meets one fails (the Fetch gets KAFKA_STORAGE_ERROR): no byte
// of it is served. It is not storage.ErrCorruptLog, which would make the
// broker repair the local log, which is fine.
var ErrDamaged = errors.New("tier: damaged remote object")

// verifyBatches checks data, whole batches read from seg's .log from
// position pos, before any of it is served: each batch's CRC, and that
// the batches' offsets lie within the segment, in order, and reach
// offset. want is how many bytes the read asked for: an object that gave
// fewer was cut short.
func verifyBatches(seg controller.RemoteSegmentMeta, pos int64, data []byte, want int64, offset int64) error {
	if int64(len(data)) < want {
		return fmt.Errorf("%w: %d bytes at position %d, the segment's metadata says %d (size %d)", ErrDamaged, len(data), pos, want, seg.SizeBytes)
	}
	next := seg.BaseOffset
	for n := 0; n+recordbatch.HeaderLen <= len(data); {
		info, err := recordbatch.ParseHeader(data[n:])
		if err != nil {
			return fmt.Errorf("%w: batch at position %d: %w", ErrDamaged, pos+int64(n), err)
		}
		if n+info.Bytes > len(data) {
			break // the read's cut: wholeBatches drops it
		}
		b := data[n : n+info.Bytes]
		if err := recordbatch.CheckCRC(b); err != nil {
			return fmt.Errorf("%w: batch at position %d: %w", ErrDamaged, pos+int64(n), err)
		}
		base := recordbatch.BaseOffset(b)
		last := base + int64(info.LastDelta)
		if base < next || last < base || last > seg.EndOffset {
			return fmt.Errorf("%w: batch at position %d holds offsets [%d, %d]: outside the segment's [%d, %d] or out of order", ErrDamaged, pos+int64(n), base, last, seg.BaseOffset, seg.EndOffset)
		}
		// A tiered log is never compacted: its batches leave no gap, so
		// the first one read holds offset, or records would be skipped.
		if n == 0 && (base > offset || last < offset) {
			return fmt.Errorf("%w: the batch at position %d holds offsets [%d, %d], not %d", ErrDamaged, pos, base, last, offset)
		}
		next = last + 1
		n += info.Bytes
	}
	return nil
}
