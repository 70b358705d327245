package tier

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/fjordlog/fjord/controller"
	"github.com/fjordlog/fjord/storage"
	"github.com/fjordlog/fjord/storage/recordbatch"
	"github.com/fjordlog/fjord/storage/remote"
)

// Reader reads copied records back from the store: what the read path
// (Fetch and ListOffsets below the local log start; a follower rebuilding
// from the store, KIP-405's follower path) uses. It reads only
// COPY_FINISHED segments, which the caller finds in its image with
// SegmentFor.
//
// Invariant: used by pointer (txn, its cache of .txnindex objects, is
// shared by every read; aborted.go).
type Reader struct {
	Store  remote.Store
	Prefix string
	// Cache, when set, serves the .log and .index reads in chunks, with
	// read-ahead (chunkcache.go); nil: every read is a ranged Get.
	Cache *ChunkCache
	// Current, when set, is a partition's entries in the node's current
	// image (false: none yet). A read that finds an object missing asks
	// it whether the segment was deleted meanwhile (ErrSegmentGone)
	// rather than damaged.
	Current func(controller.TopicPartition) ([]controller.RemoteSegmentMeta, bool)
	txn     txnCache
	// damaged counts reads refused for a damaged object (ErrDamaged).
	damaged atomic.Int64
}

// Damaged is how many reads were refused because an object was damaged
// (ErrDamaged): for the metrics.
func (r *Reader) Damaged() int64 { return r.damaged.Load() }

// SegmentFor is the COPY_FINISHED segment holding offset in a partition's
// image entries (controller.Image.RemoteSegments); false when none does
// (below the remote log start, or not copied). Where a new leader's copy
// overlaps an older one, the older (lower base) is taken: both hold the
// same committed records.
func SegmentFor(segs []controller.RemoteSegmentMeta, offset int64) (controller.RemoteSegmentMeta, bool) {
	for _, s := range segs {
		if s.State == controller.RemoteCopyFinished && s.BaseOffset <= offset && offset <= s.EndOffset {
			return s, true
		}
	}
	return controller.RemoteSegmentMeta{}, false
}

// Read returns whole record batches of seg from the one holding offset
// on: at most maxBytes of them, but always the first whole (as a Fetch
// returns at least one batch). It reads the segment's .index to start
// near offset, then a ranged Get of the .log. The caller owns the bytes.
func (r *Reader) Read(ctx context.Context, ref Ref, seg controller.RemoteSegmentMeta, offset int64, maxBytes int) ([]byte, error) {
	key := func(suffix string) string {
		return ObjectKey(r.Prefix, ref.Topic, ref.TopicID, ref.Partition, seg.BaseOffset, seg.SegmentID, suffix)
	}
	index, err := r.getObject(ctx, ref, seg, controller.ObjectIndex, true)
	if err != nil {
		return nil, err
	}
	pos, err := storage.IndexPosition(index, seg.BaseOffset, offset)
	if err != nil {
		return nil, fmt.Errorf("tier: %s: %w", key("index"), err)
	}
	for pos < seg.SizeBytes {
		// One batch's header says how long it is and where it ends.
		hdr, err := r.getLog(ctx, key("log"), seg.SizeBytes, pos, recordbatch.HeaderLen)
		if err != nil {
			return nil, r.goneErr(ref, seg, err)
		}
		info, err := recordbatch.ParseHeader(hdr)
		if err != nil {
			r.forget(key("log"), key("index"))
			r.damaged.Add(1)
			return nil, fmt.Errorf("tier: %s at %d: %w: %w", key("log"), pos, ErrDamaged, err)
		}
		if recordbatch.BaseOffset(hdr)+int64(info.LastDelta) < offset {
			pos += int64(info.Bytes)
			continue
		}
		n := min(max(int64(maxBytes), int64(info.Bytes)), seg.SizeBytes-pos)
		data, err := r.getLog(ctx, key("log"), seg.SizeBytes, pos, n)
		if err != nil {
			return nil, r.goneErr(ref, seg, err)
		}
		if err := verifyBatches(seg, pos, data, n, offset); err != nil {
			r.forget(key("log"), key("index"))
			r.damaged.Add(1)
			return nil, fmt.Errorf("tier: %s: %w", key("log"), err)
		}
		return wholeBatches(data), nil
	}
	// SegmentFor's segment holds offset: running off its end means the
	// index or a batch length sent the walk past it.
	r.forget(key("log"), key("index"))
	r.damaged.Add(1)
	return nil, fmt.Errorf("tier: %s: %w: offset %d not found before the segment's end at %d", key("log"), ErrDamaged, offset, seg.SizeBytes)
}

// goneErr is err, a failed Get of seg's .log, as ErrSegmentGone when the
// object was missing because the segment was deleted meanwhile.
func (r *Reader) goneErr(ref Ref, seg controller.RemoteSegmentMeta, err error) error {
	if errors.Is(err, remote.ErrNotFound) && r.gone(ref, seg) {
		return fmt.Errorf("%w: %v", ErrSegmentGone, err)
	}
	return err
}

// wholeBatches is data cut after its last complete batch.
func wholeBatches(data []byte) []byte {
	n := 0
	for n+recordbatch.HeaderLen <= len(data) {
		info, err := recordbatch.ParseHeader(data[n:])
		if err != nil || n+info.Bytes > len(data) {
			break
		}
		n += info.Bytes
	}
	return data[:n]
}

func (r *Reader) get(ctx context.Context, key string, off, n int64) ([]byte, error) {
	return getAll(ctx, r.Store, key, off, n)
}

// getLog reads n bytes at off of a .log object of size bytes, through
// the cache when there is one. The slice is the caller's.
func (r *Reader) getLog(ctx context.Context, key string, size, off, n int64) ([]byte, error) {
	if r.Cache != nil {
		return r.Cache.Read(ctx, key, size, off, n)
	}
	return r.get(ctx, key, off, n)
}

// getShared reads a whole (small) object, through the cache when there
// is one; the slice may be the cache's: read only.
func (r *Reader) getShared(ctx context.Context, key string) ([]byte, error) {
	if r.Cache != nil {
		return r.Cache.chunk(ctx, chunkKey{key, -1}, 0, -1)
	}
	return r.get(ctx, key, 0, -1)
}

// forget drops objects found damaged from the cache, so a read again
// gets the store's bytes (a damaged read in transit is not kept).
func (r *Reader) forget(objects ...string) {
	if r.Cache != nil {
		for _, o := range objects {
			r.Cache.Forget(o)
		}
	}
}

// CopiedBytes is the bytes of a partition's COPY_FINISHED segments (their
// .log objects) in segs, the image's entries: its remote log size, as
// Kafka's RemoteLogSizeBytes counts it.
func CopiedBytes(segs []controller.RemoteSegmentMeta) int64 {
	var n int64
	for _, s := range segs {
		if s.State == controller.RemoteCopyFinished {
			n += s.SizeBytes
		}
	}
	return n
}
