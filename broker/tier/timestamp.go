package tier

import (
	"context"
	"errors"
	"fmt"

	"github.com/fjordlog/fjord/controller"
	"github.com/fjordlog/fjord/storage"
	"github.com/fjordlog/fjord/storage/recordbatch"
	"github.com/fjordlog/fjord/storage/remote"
)

// OffsetForTimestamp finds, in a partition's copied segments (segs, the
// image's entries in offset order), the first record whose timestamp is
// at or after ts: ListOffsets by timestamp below the local log start, as
// Kafka's RemoteLogManager.findOffsetByTimestamp answers it before the
// local log is searched. A segment whose MaxTimestamp (in its metadata)
// is below ts is skipped unread; in the first that reaches ts, the
// .timeindex and .index objects say where to start, and the .log is
// scanned from there. ok is false when no copied record reaches ts.
// For a LogAppendTime batch the answer is its first offset and its
// timestamp, as for the local log (storage.Log.OffsetForTimestamp).
func (r *Reader) OffsetForTimestamp(ctx context.Context, ref Ref, segs []controller.RemoteSegmentMeta, ts int64) (offset, recordTS int64, ok bool, err error) {
	next := int64(-1) // offsets below it were searched (segments may overlap)
	for _, seg := range segs {
		if seg.State != controller.RemoteCopyFinished || seg.EndOffset < next {
			continue
		}
		from := max(seg.BaseOffset, next)
		next = seg.EndOffset + 1
		if seg.MaxTimestamp < ts {
			continue
		}
		offset, recordTS, ok, err = r.searchSegment(ctx, ref, seg, from, ts)
		if err != nil || ok {
			return offset, recordTS, ok, err
		}
	}
	return 0, 0, false, nil
}

// searchSegment scans seg from offset from for the first record at or
// after ts.
func (r *Reader) searchSegment(ctx context.Context, ref Ref, seg controller.RemoteSegmentMeta, from, ts int64) (int64, int64, bool, error) {
	key := func(suffix string) string {
		return ObjectKey(r.Prefix, ref.Topic, ref.TopicID, ref.Partition, seg.BaseOffset, seg.SegmentID, suffix)
	}
	start := from
	switch times, err := r.getObject(ctx, ref, seg, controller.ObjectTimeIndex, true); {
	case errors.Is(err, remote.ErrNotFound):
		// No time index object uploaded: scan from from.
	case err != nil:
		return 0, 0, false, err
	default:
		at, err := storage.TimeIndexOffset(times, seg.BaseOffset, ts)
		if err != nil {
			return 0, 0, false, fmt.Errorf("tier: %s: %w", key("timeindex"), err)
		}
		start = max(start, min(at, seg.EndOffset))
	}
	index, err := r.getObject(ctx, ref, seg, controller.ObjectIndex, true)
	if err != nil {
		return 0, 0, false, err
	}
	pos, err := storage.IndexPosition(index, seg.BaseOffset, start)
	if err != nil {
		return 0, 0, false, fmt.Errorf("tier: %s: %w", key("index"), err)
	}
	for pos < seg.SizeBytes {
		hdr, err := r.getLog(ctx, key("log"), seg.SizeBytes, pos, recordbatch.HeaderLen)
		if err != nil {
			return 0, 0, false, err
		}
		info, err := recordbatch.ParseHeader(hdr)
		if err != nil {
			return 0, 0, false, fmt.Errorf("tier: %s at %d: %w", key("log"), pos, err)
		}
		base := recordbatch.BaseOffset(hdr)
		if base+int64(info.LastDelta) < from || info.MaxTimestamp < ts {
			pos += int64(info.Bytes)
			continue
		}
		if info.LogAppendTimed {
			return max(base, from), info.MaxTimestamp, true, nil
		}
		b, err := r.getLog(ctx, key("log"), seg.SizeBytes, pos, int64(info.Bytes))
		if err != nil {
			return 0, 0, false, err
		}
		var offset, recordTS int64
		found := false
		err = recordbatch.EachRecord(b, info, func(rec recordbatch.Record) bool {
			if rts := info.BaseTimestamp + rec.TimestampDelta; rts >= ts && base+int64(rec.OffsetDelta) >= from {
				offset, recordTS, found = base+int64(rec.OffsetDelta), rts, true
				return false
			}
			return true
		})
		if err != nil {
			return 0, 0, false, fmt.Errorf("tier: %s at %d: %w", key("log"), pos, err)
		}
		if found {
			return offset, recordTS, true, nil
		}
		pos += int64(info.Bytes)
	}
	return 0, 0, false, nil
}
