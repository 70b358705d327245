package storage

import (
	"fmt"
	"math"

	"github.com/fjordlog/fjord/storage/recordbatch"
)

// OffsetForTimestamp finds the first record at or after ts (in ms) below
// limit, returning its offset and timestamp; ok is false when there is none.
// The time index narrows the search to a segment position; the batches from
// there are read to find the record. Records below the log start offset
// are not considered (Kafka's search starts there too).
func (l *Log) OffsetForTimestamp(ts int64, limit int64) (offset, recordTS int64, ok bool, err error) {
	start := l.startOffset.Load()
	for _, s := range l.segments() {
		st := s.pub.Load()
		if st.maxTS < ts {
			continue // nothing in this segment reaches ts
		}
		offs, t := l.indexesOf(s, st)
		from := s.base + int64(lookupTime(t, ts))
		pos := int64(0)
		if from > s.base {
			if pos, err = s.findBatch(offs, from, st.size); err != nil {
				return 0, 0, false, err
			}
		}
		for pos < st.size {
			hdr, err := s.readAt(pos, recordbatch.HeaderLen)
			if err != nil {
				return 0, 0, false, err
			}
			info, err := recordbatch.ParseHeader(hdr)
			if err != nil {
				return 0, 0, false, fmt.Errorf("segment %d at %d: %w", s.base, pos, err)
			}
			base := recordbatch.BaseOffset(hdr)
			if base >= limit {
				return 0, 0, false, nil
			}
			if info.MaxTimestamp >= ts && base+int64(info.LastDelta) >= start {
				b, err := s.readAt(pos, info.Bytes)
				if err != nil {
					return 0, 0, false, err
				}
				if info.LogAppendTimed {
					return max(base, start), info.MaxTimestamp, true, nil
				}
				found := false
				err = recordbatch.EachRecord(b, info, func(r recordbatch.Record) bool {
					if rts := info.BaseTimestamp + r.TimestampDelta; rts >= ts && base+int64(r.OffsetDelta) >= start {
						offset, recordTS, found = base+int64(r.OffsetDelta), rts, true
						return false
					}
					return true
				})
				if err != nil {
					return 0, 0, false, err
				}
				if found && offset < limit {
					return offset, recordTS, true, nil
				}
				if found {
					return 0, 0, false, nil
				}
			}
			pos += int64(info.Bytes)
		}
	}
	return 0, 0, false, nil
}

// MaxTimestamp returns the offset and timestamp of the first record holding
// the largest timestamp in the log (ListOffsets MAX_TIMESTAMP, KIP-734, with
// KAFKA-16310's record-level offset); ok is false for an empty log. Segments
// remember which batch carried their maximum; that one batch is read to find
// the record.
func (l *Log) MaxTimestamp() (offset, ts int64, ok bool, err error) {
	l.mu.Lock()
	var best *segment
	ts = -1
	var size int64
	var bestSt *segState
	for _, s := range l.segments() {
		if s.maxTS > ts {
			st := s.pub.Load()
			best, ts, offset, size, bestSt = s, s.maxTS, s.maxTSOffset, st.size, st
		}
	}
	l.mu.Unlock()
	if best == nil {
		return 0, 0, false, nil
	}
	idx, _ := l.indexesOf(best, bestSt)
	pos, err := best.findBatch(idx, offset, size)
	if err != nil || pos >= size {
		return offset, ts, true, err
	}
	hdr, err := best.readAt(pos, recordbatch.HeaderLen)
	if err != nil {
		return 0, 0, false, err
	}
	info, err := recordbatch.ParseHeader(hdr)
	if err != nil {
		return 0, 0, false, err
	}
	base := recordbatch.BaseOffset(hdr)
	if info.LogAppendTimed {
		return base, ts, true, nil
	}
	b, err := best.readAt(pos, info.Bytes)
	if err != nil {
		return 0, 0, false, err
	}
	found := base
	err = recordbatch.EachRecord(b, info, func(r recordbatch.Record) bool {
		if info.BaseTimestamp+r.TimestampDelta == info.MaxTimestamp {
			found = base + int64(r.OffsetDelta)
			return false
		}
		return true
	})
	return found, ts, true, err
}

// DeleteOldSegments applies time and size retention at wall-clock time now
// (ms). Only whole, inactive segments are deleted, oldest first, so the log
// start offset moves forward to a segment boundary (never back: a start
// AdvanceStartOffset moved further stays). It returns how many segments
// went. A tiered log (Config.Tier) keeps every segment the store does not
// hold yet and applies its local retention to the rest.
func (l *Log) DeleteOldSegments(now int64) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.mu.closed {
		return 0, ErrClosed
	}
	l.view.RLock()
	segs := l.view.segs
	l.view.RUnlock()
	var total int64
	for _, s := range segs {
		total += s.size
	}
	retMs, retBytes := l.cfg.RetentionMs, l.cfg.RetentionBytes
	copied := int64(math.MaxInt64) // an untiered log deletes regardless
	if t := l.cfg.Tier; t.Enabled && l.mu.copiedEnd != nil {
		retMs, retBytes = t.local(t.LocalRetentionMs, retMs), t.local(t.LocalRetentionBytes, retBytes)
		copied = l.mu.copiedEnd()
	}
	n := 0
	for n < len(segs)-1 {
		s := segs[n]
		if segs[n+1].base-1 > copied {
			break // a tiered segment not yet in the store stays, however old
		}
		expired := retMs >= 0 && s.maxTS >= 0 && now-s.maxTS > retMs
		oversize := retBytes >= 0 && total-s.size >= retBytes
		if !expired && !oversize {
			break
		}
		total -= s.size
		n++
	}
	// Idle producers go too; this runs on every retention check.
	l.mu.producers.expire(now, l.producerTTL())
	if n == 0 {
		return 0, nil
	}
	// A start moved inside a later segment (AdvanceStartOffset) stays.
	_, err := l.dropBelowLocked(max(l.startOffset.Load(), segs[n].base))
	return n, err
}

// SetRemoteCopiedEnd gives a tiered log (Config.Tier) the highest offset
// of the partition the remote store holds a finished copy of (-1: none).
// f is called under the log's lock: it must not block or call into the
// log (broker/tier's reads the metadata image). Until it is set (a node
// without a remote store never sets it) a tiered log's retention is an
// untiered one's.
func (l *Log) SetRemoteCopiedEnd(f func() int64) {
	l.mu.Lock()
	l.mu.copiedEnd = f
	l.mu.Unlock()
}

// SetConfig changes the log's policy (a topic config change).
func (l *Log) SetConfig(cfg Config) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if cfg.FileDeleteDelay == 0 {
		cfg.FileDeleteDelay = l.cfg.FileDeleteDelay
	}
	l.cfg = cfg
}

// Size is the log's total bytes.
func (l *Log) Size() int64 {
	var n int64
	for _, s := range l.segments() {
		n += s.pub.Load().size
	}
	return n
}

// Close flushes, writes a producer snapshot and the clean-shutdown marker,
// and closes the files. Appends after Close fail with ErrClosed.
func (l *Log) Close() error {
	flushErr := l.Flush()
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.mu.closed {
		return nil
	}
	l.mu.closed = true
	l.view.RLock()
	segs := l.view.segs
	l.view.RUnlock()
	var err error
	if flushErr == nil && l.mu.failed == nil {
		end := l.end.Load()
		if active := segs[len(segs)-1]; active.allocated > active.size {
			if err = active.trimTail(); err == nil {
				err = active.f.SyncData()
			}
		}
		// The active segment's indexes, which lived in memory, go to their
		// files for the next start to trust (sealed ones were written at
		// their roll).
		if e := segs[len(segs)-1].writeIndexFiles(true); e != nil && err == nil {
			err = e
		}
		for _, s := range segs {
			// Before the snapshot below vouches for its entries.
			if e := s.syncTxnIndex(); e != nil && err == nil {
				err = e
			}
		}
		if err == nil {
			err = writeSnapshot(l.fs, l.dir, l.mu.producers, end, l.snapshotKeepAboveLocked())
		}
		if err == nil && (l.mu.epochsUnsaved || l.epochPending.Load()) {
			err = writeEpochCheckpoint(l.fs, l.dir, l.epochCache())
		}
		if err == nil {
			err = WriteFileSyncFS(l.fs, l.dir+"/"+cleanShutdownFile, nil)
		}
	}
	for _, s := range segs {
		l.indexes.retire(s)
		s.close()
	}
	if flushErr != nil {
		return flushErr
	}
	return err
}

// Delete closes the log and removes its directory (topic deletion).
func (l *Log) Delete() error {
	l.mu.Lock()
	l.mu.closed = true
	l.view.RLock()
	segs := l.view.segs
	l.view.RUnlock()
	l.mu.Unlock()
	for _, s := range segs {
		l.indexes.retire(s)
		s.close()
	}
	return DeletePartitionDir(l.fs, l.dir)
}

// SegmentCount is the number of segments, the active one included.
func (l *Log) SegmentCount() int { return len(l.segments()) }
