package tier

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/fjordlog/fjord/controller"
	"github.com/fjordlog/fjord/storage"
	"github.com/fjordlog/fjord/storage/remote"
)

// Aborted transactions for a read_committed read from the store (Kafka's
// RemoteLogManager.collectAbortedTransactions). A copied segment's
// .txnindex object lists the aborted transactions whose abort marker is in
// that segment (storage's 34-byte entries); the copier uploads it only
// when the segment has one and says so in the segment's metadata, so an
// object not listed means none, while a listed one that is missing or
// damaged, or any other store failure, is an error: records must never be
// served without their aborts. (A segment from before checksums lists
// nothing: there a missing object means none, unchecked.) A transaction
// that began in the segment read may end in any later one, so the search
// walks the copied segments from the one read on, in offset order, until
// an entry's last stable offset reaches the end of what was read
// (storage.CollectAborted's complete), or the copied segments end: then
// the caller goes on in its local log (storage.Log.AbortedTransactions),
// which local retention keeps from the copied end on.
//
// Cost: one Get per copied segment walked that is not in the cache; the
// walk ends at the first abort whose last stable offset passes the read,
// so a stretch of segments without aborts after the read is walked whole
// (once, then cached). Kafka bounds this the same way, with its index
// cache on local disk. Not done: stopping at the producer snapshot of a
// segment's end with no transaction open that began in the read.

// txnCacheMax bounds the txnindex cache: segments' entries (nil for a
// segment without a .txnindex). A segment id names one upload attempt's
// immutable objects, so an entry never goes stale; a full cache is
// emptied rather than ordered (a consumer reading the copy walks the same
// few segments fetch after fetch).
const txnCacheMax = 512

// txnCache is the Reader's cache of decoded .txnindex objects by segment
// id. Invariant: len(mu.m) <= txnCacheMax. mu is a leaf, never held
// across a Get.
type txnCache struct {
	mu struct {
		sync.Mutex
		m map[[16]byte][]storage.AbortedTxn
	}
}

// TxnIndex returns the aborted transactions whose marker is in seg, from
// its .txnindex object: nil when it has none (no object uploaded), an
// error when the store fails, or the object is missing though uploaded,
// does not match its checksum or does not parse (ErrDamaged;
// objects.go). The slice is shared (cached): the caller must not change
// it.
func (r *Reader) TxnIndex(ctx context.Context, ref Ref, seg controller.RemoteSegmentMeta) ([]storage.AbortedTxn, error) {
	r.txn.mu.Lock()
	es, ok := r.txn.mu.m[seg.SegmentID]
	r.txn.mu.Unlock()
	if ok {
		return es, nil
	}
	b, err := r.getObject(ctx, ref, seg, controller.ObjectTxnIndex, false)
	switch {
	case errors.Is(err, remote.ErrNotFound):
		es = nil // not uploaded (checked: getObject): no aborted transactions
	case err != nil:
		return nil, err // ErrDamaged included: never read as none
	default:
		if es, err = storage.DecodeTxnIndex(b); err != nil {
			r.damaged.Add(1)
			return nil, fmt.Errorf("tier: %s: %w: %w", ObjectKey(r.Prefix, ref.Topic, ref.TopicID, ref.Partition, seg.BaseOffset, seg.SegmentID, "txnindex"), ErrDamaged, err)
		}
	}
	r.txn.mu.Lock()
	if r.txn.mu.m == nil || len(r.txn.mu.m) >= txnCacheMax {
		r.txn.mu.m = make(map[[16]byte][]storage.AbortedTxn)
	}
	r.txn.mu.m[seg.SegmentID] = es
	r.txn.mu.Unlock()
	return es, nil
}

// Aborted returns the aborted transactions a read_committed read of the
// copy from fetchOffset, whose records end before upperBound
// (storage.ReadEnd), must report, from the txnindex of the COPY_FINISHED
// segment holding fetchOffset in segs (the image's entries) and of the
// copied segments after it. complete says the search ended (an entry's
// last stable offset reached upperBound); otherwise the copied segments
// ran out at next, from where the caller searches its local log. walked
// are the segments read, whose objects the caller may check are still
// COPY_FINISHED afterwards (a segment deleted meanwhile by remote
// retention would read as having no aborts).
func (r *Reader) Aborted(ctx context.Context, ref Ref, segs []controller.RemoteSegmentMeta, fetchOffset, upperBound int64) (out []storage.AbortedTxn, complete bool, next int64, walked []controller.RemoteSegmentMeta, err error) {
	for off := fetchOffset; ; {
		seg, ok := SegmentFor(segs, off)
		if !ok {
			return out, false, off, walked, nil
		}
		walked = append(walked, seg)
		es, err := r.TxnIndex(ctx, ref, seg)
		if err != nil {
			return nil, false, off, walked, err
		}
		found, done := storage.CollectAborted(es, fetchOffset, upperBound)
		out = append(out, found...)
		if done {
			return out, true, seg.EndOffset + 1, walked, nil
		}
		off = seg.EndOffset + 1
	}
}

// StillCopied checks that every segment walked (Aborted's) is still
// COPY_FINISHED in now, the image's entries read after the walk: a
// segment that remote retention deleted meanwhile may have read as having
// no .txnindex (its DELETE_STARTED is committed before any object is
// deleted, so an image without it vouches for the read).
func StillCopied(walked, now []controller.RemoteSegmentMeta) error {
	for _, w := range walked {
		if !slices.ContainsFunc(now, func(s controller.RemoteSegmentMeta) bool {
			return s.SegmentID == w.SegmentID && s.State == controller.RemoteCopyFinished
		}) {
			return fmt.Errorf("tier: segment [%d, %d] deleted while its aborted transactions were read", w.BaseOffset, w.EndOffset)
		}
	}
	return nil
}
