package tier

import (
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"slices"

	"github.com/fjordlog/fjord/controller"
	"github.com/fjordlog/fjord/storage/remote"
)

// Checks of a copied segment's objects other than its .log (whose batches
// verifyBatches checks): the uploader records each one's length and
// CRC-32C in the segment's COPY_STARTED record (controller.ObjectSum),
// taken from the bytes it then uploads, and every read of one compares
// them before a byte of it is used. An object the record lists that the
// store does not have is damaged too: without the check a deleted
// .txnindex would read as "no aborted transactions" and a read_committed
// consumer would be served aborted records. An object the record does not
// list was not uploaded (a segment without aborted transactions has no
// .txnindex) and is not asked for.
//
// Unless the segment is gone: remote retention commits a segment's
// DELETE_STARTED before it deletes any of its objects, so a read that
// took the segment from an image and then finds an object missing, while
// the image now has the segment no longer COPY_FINISHED, raced its expiry.
// That is ErrSegmentGone, not damage: neither counted nor logged as such.
//
// A record from before checksums (controller.RemoteSegment.Checksummed
// false) says neither: its objects are read unchecked and a missing one
// is the store's remote.ErrNotFound, as before checksums. Those segments
// age out with retention.
//
// Cost: one CRC-32C pass over the object per read (the cache hands out
// the same bytes; checking them again is cheaper than tracking which
// cached bytes were checked, at hardware CRC speed a 2 MB .index of a
// 1 GB segment takes about 0.2 ms).

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// sumOf is the ObjectSum of b as kind k.
func sumOf(k controller.ObjectKind, b []byte) controller.ObjectSum {
	return controller.ObjectSum{Kind: k, Size: int64(len(b)), CRC: crc32.Checksum(b, castagnoli)}
}

// getObject reads seg's object of kind k whole, through the cache when
// shared (the slice is then read only), and checks it against seg's
// metadata. An object seg says was not uploaded is an error wrapping
// remote.ErrNotFound, without a Get; one it lists that is missing, or
// whose length or CRC differ, an error wrapping ErrDamaged (and never
// remote.ErrNotFound: it must not read as absent); a missing one of a
// segment since deleted (Reader.gone), ErrSegmentGone.
func (r *Reader) getObject(ctx context.Context, ref Ref, seg controller.RemoteSegmentMeta, k controller.ObjectKind, shared bool) ([]byte, error) {
	key := ObjectKey(r.Prefix, ref.Topic, ref.TopicID, ref.Partition, seg.BaseOffset, seg.SegmentID, k.String())
	get := func() ([]byte, error) {
		if shared {
			return r.getShared(ctx, key)
		}
		return r.get(ctx, key, 0, -1)
	}
	if !seg.Checksummed() {
		return get() // unchecked: a record from before checksums
	}
	want, ok := seg.Object(k)
	if !ok {
		return nil, fmt.Errorf("tier: %s: not uploaded (the segment's metadata lists no %s): %w", key, k, remote.ErrNotFound)
	}
	b, err := get()
	switch {
	case errors.Is(err, remote.ErrNotFound) && r.gone(ref, seg):
		return nil, fmt.Errorf("tier: %s: %w: missing from the store, the segment is no longer COPY_FINISHED", key, ErrSegmentGone)
	case errors.Is(err, remote.ErrNotFound):
		r.damaged.Add(1)
		return nil, fmt.Errorf("tier: %s: %w: missing from the store, the segment's metadata says it was uploaded (%d bytes)", key, ErrDamaged, want.Size)
	case err != nil:
		return nil, err
	}
	if got := sumOf(k, b); got != want {
		r.forget(key)
		r.damaged.Add(1)
		return nil, fmt.Errorf("tier: %s: %w: %d bytes with CRC-32C %08x, the segment's metadata says %d bytes with %08x",
			key, ErrDamaged, got.Size, got.CRC, want.Size, want.CRC)
	}
	return b, nil
}

// ErrSegmentGone marks a read of a segment that remote retention deleted
// while it was read: an object it needed was missing and the current
// image no longer has the segment COPY_FINISHED. Not damage: the offset
// is (most likely) below the remote log start now, which a fetch answers
// OFFSET_OUT_OF_RANGE. It never wraps remote.ErrNotFound (which would
// read as "not uploaded").
var ErrSegmentGone = errors.New("tier: remote segment deleted while read")

// gone reports whether seg is no longer COPY_FINISHED in the node's
// current image (Reader.Current); false when the reader has no image to
// ask.
func (r *Reader) gone(ref Ref, seg controller.RemoteSegmentMeta) bool {
	if r.Current == nil {
		return false
	}
	segs, ok := r.Current(controller.TopicPartition{TopicID: ref.TopicID, Partition: ref.Partition})
	return ok && !slices.ContainsFunc(segs, func(s controller.RemoteSegmentMeta) bool {
		return s.SegmentID == seg.SegmentID && s.State == controller.RemoteCopyFinished
	})
}
