package storage

import (
	"fmt"
	"math"
	"os"
	"slices"
	"sort"
	"time"

	"github.com/fjordlog/fjord/storage/recordbatch"
)

// Truncation is the follower's side of a leader change (KIP-101): the log is
// cut back to where it diverges from the new leader's, found with
// OffsetForLeaderEpoch. It removes whole batches only, as Kafka's truncateTo
// does: a batch straddling the offset goes entirely.
//
// Crash safety. Every step is durable before the next, in an order that
// leaves, at any crash, a log recovery reads as either the old one or a
// prefix of it no shorter than the new one:
//
//  1. producer snapshots past the new end are unlinked (directory fsynced):
//     they describe batches about to go, and a later log that grows past
//     them again must not pick them up;
//  2. later segments are unlinked newest first, the directory fsynced after
//     each, so no crash leaves a hole with old batches after it;
//  3. the segment holding the cut is truncated and fdatasynced (the
//     preallocated tail goes with it), its index files cut to match;
//  4. the epoch checkpoint drops entries at or past the new end.
//
// A crash between 3 and 4 leaves checkpoint entries past the log end, which
// Open drops. Readers see the new segment list and end as soon as step 1 is
// done; one already reading the old state may get an error from a short
// read, never a crash or bytes from past its own limit.

// Truncate removes every batch whose last offset is at or after offset, so
// that afterwards EndOffset() <= offset: the log ends at the first such
// batch's base (or after the last batch before it). Segments past that
// point are deleted, the one holding it is cut with its indexes, the epoch
// cache drops entries starting at or after the new end, and producer state
// is rebuilt for the new end (the latest snapshot at or below it, plus
// replay). The result is durable, and DurableOffset equal to the new end,
// when it returns.
//
// An offset at or past the log end removes nothing, but still drops
// epoch-cache entries at or past the end: an epoch this replica recorded as
// leader and never wrote (Kafka does the same). An offset below StartOffset
// is TruncateFullyAndStartAt(offset).
//
// A failure part way leaves the log failed (no more appends): the files and
// the in-memory state may disagree until it is reopened, and recovery then
// finds one of the states above.
func (l *Log) Truncate(offset int64) error {
	if offset < 0 {
		return fmt.Errorf("log %s: truncate to %d: %w", l.dir, offset, ErrOffsetOutOfRange)
	}
	l.flushMu.Lock()
	defer l.flushMu.Unlock()
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.writableLocked(); err != nil {
		return err
	}
	if end := l.end.Load(); offset >= end {
		c := l.epochCache()
		if nc := c.truncateFromEnd(end); len(nc) != len(c) {
			return l.saveEpochsLocked(nc)
		}
		return nil
	}
	if offset < l.startOffset.Load() {
		return l.truncateFullyLocked(offset, offset)
	}
	return l.truncateLocked(offset)
}

// TruncateFullyAndStartAt empties the log and restarts it at offset, which
// becomes both its start and end (Kafka's truncateFullyAndStartAt): a
// follower that fell behind the leader's log start, or truncates below its
// own. Producer state and the epoch cache are cleared. Durable when it
// returns; a failure part way leaves the log failed.
func (l *Log) TruncateFullyAndStartAt(offset int64) error {
	if offset < 0 || offset > maxBaseOffset {
		return fmt.Errorf("log %s: restart at %d: %w", l.dir, offset, ErrOffsetOutOfRange)
	}
	l.flushMu.Lock()
	defer l.flushMu.Unlock()
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.writableLocked(); err != nil {
		return err
	}
	return l.truncateFullyLocked(offset, offset)
}

// cutInfo is where truncation to an offset cuts a segment.
type cutInfo struct {
	pos        int64 // position of the first batch removed; the size if none is
	end        int64 // offset after the last batch kept; the segment base if none is
	epoch      int32 // leader epoch of the last batch kept; -1 if none is
	offs       int   // offset-index entries kept
	sinceIndex int32 // bytes of the kept batches after the last indexed one
}

// cutPoint finds where truncation to offset cuts s: before the first batch
// whose last offset is at or after offset. The walk starts at the last
// index entry below offset, which names the last indexed batch kept.
// REQUIRES: Log.mu held.
func (s *segment) cutPoint(offset int64) (cutInfo, error) {
	rel := int32(min(offset-s.base, math.MaxInt32))
	k := sort.Search(len(s.ix.offs), func(i int) bool { return s.ix.offs[i].rel >= rel })
	if k > 0 {
		// The entry's batch must end at its offset (the index of a sealed
		// segment was read back from its files): else walk from the start.
		e := s.ix.offs[k-1]
		if hdr, err := s.readAt(int64(e.pos), recordbatch.HeaderLen); err != nil || len(hdr) < recordbatch.HeaderLen ||
			recordbatch.LastOffset(hdr) != s.base+int64(e.rel) {
			k = 0
		}
	}
	c := cutInfo{end: s.base, epoch: -1, offs: k}
	if k > 0 {
		c.pos = int64(s.ix.offs[k-1].pos)
	}
	indexed := k > 0 // the first batch walked is the indexed one
	err := s.walkHeaders(c.pos, s.size, func(pos int64, hdr []byte) (bool, error) {
		last := recordbatch.LastOffset(hdr)
		if last >= offset {
			return false, nil
		}
		n := recordbatch.Length(hdr)
		if indexed {
			indexed = false
		} else {
			c.sinceIndex += int32(n)
		}
		c.end, c.epoch, c.pos = last+1, recordbatch.PartitionLeaderEpoch(hdr), pos+n
		return true, nil
	})
	return c, err
}

// truncateLocked is Truncate for StartOffset() <= offset < EndOffset().
// REQUIRES: l.flushMu and l.mu held.
func (l *Log) truncateLocked(offset int64) error {
	if err := l.dirDurableLocked(); err != nil {
		return err
	}
	segs := l.segments()
	i := sort.Search(len(segs), func(i int) bool { return segs[i].base > offset }) - 1
	s := segs[i]
	// s becomes the active segment, whose indexes the writer holds; back
	// to its files if the truncation fails before changing anything.
	sealed := s.ixOnDisk
	l.indexInMemory(s)
	unchanged := func(err error) error {
		if sealed {
			s.ix, s.ixOnDisk = index{}, true
		}
		return fmt.Errorf("log %s: truncate to %d: %w", l.dir, offset, err)
	}
	cut, err := s.cutPoint(offset)
	if err != nil {
		return unchanged(err)
	}
	newEnd := cut.end
	// 1. Snapshots past the new end. Nothing else has changed yet, so a
	// failure here leaves the log as it was.
	if err := removeSnapshotsAbove(l.fs, l.dir, newEnd); err != nil {
		return unchanged(err)
	}
	fail := func(err error) error {
		l.mu.failed = fmt.Errorf("log %s: truncate to %d: %w", l.dir, offset, err)
		return l.mu.failed
	}
	l.truncations.Add(1) // odd while it runs: see Log.truncations
	defer l.truncations.Add(1)

	// The writer's state for segment s, then the readers' view. Index
	// slices are copied: readers may hold the old ones, and appends after
	// the cut must not write into arrays they read.
	s.ix.offs = slices.Clone(s.ix.offs[:cut.offs])
	nt := sort.Search(len(s.ix.times), func(j int) bool { return s.base+int64(s.ix.times[j].rel) >= newEnd })
	s.ix.times = slices.Clone(s.ix.times[:nt])
	s.maxTS, s.maxTSOffset = -1, -1
	if nt > 0 {
		t := s.ix.times[nt-1]
		s.maxTS, s.maxTSOffset = t.ts, s.base+int64(t.rel)
	}
	s.size, s.next, s.lastEpoch, s.bytesSinceIndex = cut.pos, newEnd, cut.epoch, cut.sinceIndex
	// The time index is sparse: batches kept after its last kept entry
	// may carry a larger timestamp. Read their headers for the exact
	// maximum (MaxTimestamp, the files' last entry, and time lookups skip
	// a segment below it).
	from := int64(0)
	if nt > 0 {
		if from, err = s.findBatch(s.ix.offs, s.maxTSOffset, s.size); err != nil {
			return fail(err)
		}
	}
	if err := s.walkHeaders(from, s.size, func(_ int64, hdr []byte) (bool, error) {
		info, err := recordbatch.ParseHeader(hdr)
		if err != nil {
			return false, err
		}
		if info.MaxTimestamp > s.maxTS {
			s.maxTS, s.maxTSOffset = info.MaxTimestamp, recordbatch.LastOffset(hdr)
		}
		return true, nil
	}); err != nil {
		return fail(err)
	}
	switch {
	case s.size == 0:
		s.firstAppend = time.Time{}
	case s.firstAppend.IsZero():
		// An older segment, opened from disk, becomes the active one: its
		// time-based roll counts from now, as Open does for the active one.
		s.firstAppend = time.Now()
	}
	// Its aborted transactions of the markers removed go too, from memory
	// and the file, so no reader sees them once the cut is published (the
	// entries of the markers kept stay: a replay up to them makes the
	// same). A crash after this finds a snapshot at or below newEnd (step
	// 1), from which recovery rebuilds every entry of this segment past it.
	if err := s.cutTxnIndex(newEnd); err != nil {
		return fail(err)
	}
	dead := segs[i+1:]
	l.durable.Store(min(l.durable.Load(), newEnd))
	l.publishSegs(append([]*segment(nil), segs[:i+1]...))
	l.end.Store(newEnd)

	// 2. Later segments, newest first.
	for k := len(dead) - 1; k >= 0; k-- {
		d := dead[k]
		delete(l.mu.dirty, d)
		l.indexes.retire(d)
		if err := d.remove(l.cfg.FileDeleteDelay); err != nil {
			return fail(err)
		}
		if err := l.fs.SyncDir(l.dir); err != nil {
			return fail(fmt.Errorf("sync directory: %w", err))
		}
	}
	// 3. The segment holding the cut.
	if err := s.cutFiles(); err != nil {
		return fail(err)
	}
	delete(l.mu.dirty, s)

	p, t, err := l.replayProducers(segs[:i+1], newEnd)
	if err != nil {
		return fail(err)
	}
	l.mu.producers, l.mu.txns = p, t
	l.lowerHighWatermarkLocked(newEnd)
	l.publishTxnsLocked()
	// 4. The epoch checkpoint.
	c := l.epochCache()
	if nc := c.truncateFromEnd(newEnd); len(nc) != len(c) {
		if err := l.saveEpochsLocked(nc); err != nil {
			return fail(err)
		}
	}
	// A cut below the start (the batch holding a start that DeleteRecords
	// moved inside it goes whole) leaves the log empty at its new end;
	// the file must say so before anything is appended there.
	if newEnd < l.startOffset.Load() {
		if err := l.keepStartLocked(newEnd, segs[0].base); err != nil {
			return fail(err)
		}
		l.startOffset.Store(newEnd)
	}
	// Segment s was just fdatasynced and every earlier one at its roll.
	l.durable.Store(newEnd)
	l.log.Info().Int64("offset", offset).Int64("end_offset", newEnd).Int("segments_removed", len(dead)).Msg("truncated log")
	return nil
}

// cutFiles makes s's files match its state after a truncation: the .log cut
// to size (taking any preallocated tail with it) and fdatasynced, the
// index files removed.
// REQUIRES: Log.mu held.
func (s *segment) cutFiles() error {
	// s becomes the active segment: the writer pins its file.
	if err := s.pinWriter(); err != nil {
		return err
	}
	if err := s.f.Truncate(s.size); err != nil {
		return fmt.Errorf("segment %d: truncate to %d bytes: %w", s.base, s.size, err)
	}
	s.allocated = s.size
	if err := s.f.SyncData(); err != nil {
		return fmt.Errorf("segment %d: sync after truncate: %w", s.base, err)
	}
	// As the active segment its indexes live in memory; files that
	// describe the longer segment go (not synced: after a crash this
	// segment is the active one, whose indexes recovery rebuilds).
	return s.removeIndexFiles()
}

// replayProducers rebuilds the producer table and transaction state for a
// log of segs ending at end: the newest snapshot at or below end, then the
// batches from there (a control batch's body read for its marker). The
// aborted-transaction entries the replay makes are those already in the
// indexes, and are dropped.
func (l *Log) replayProducers(segs []*segment, end int64) (producers, txnState, error) {
	p, from := loadLatestSnapshot(l.fs, l.dir, end)
	t := newTxnState(p)
	now := time.Now().UnixMilli()
	for _, s := range segs {
		if s.next <= from {
			continue // wholly covered by the snapshot
		}
		var pos int64
		if from > s.base {
			var err error
			offs, _ := l.writerIndexes(s)
			if pos, err = s.findBatch(offs, from, s.size); err != nil {
				return nil, t, err
			}
		}
		err := s.walkHeaders(pos, s.size, func(pos int64, hdr []byte) (bool, error) {
			base := recordbatch.BaseOffset(hdr)
			if base >= end {
				return false, nil
			}
			if base >= from {
				info, err := recordbatch.ParseHeader(hdr)
				if err != nil {
					return false, fmt.Errorf("segment %d: replay producers at offset %d: %w", s.base, base, err)
				}
				var m *recordbatch.EndTxnMarker
				if info.Control {
					b, err := s.readAt(pos, info.Bytes)
					if err != nil {
						return false, err
					}
					if len(b) < info.Bytes {
						return false, fmt.Errorf("%w: segment %d: replay producers: short control batch at offset %d", recordbatch.ErrCorrupt, s.base, base)
					}
					if err := recordbatch.CheckCRC(b); err != nil {
						return false, fmt.Errorf("segment %d: replay producers at offset %d: %w", s.base, base, err)
					}
					m = markerOf(b, info)
				}
				applyBatch(p, &t, info, m, base, base+int64(info.LastDelta), now)
			}
			return true, nil
		})
		if err != nil {
			return nil, t, err
		}
	}
	return p, t, nil
}

// lowerHighWatermarkLocked brings the high watermark UpdateHighWatermark
// was given down to a new log end (Kafka's truncation does the same).
// REQUIRES: l.mu held.
func (l *Log) lowerHighWatermarkLocked(end int64) {
	for {
		cur := l.hwMark.Load()
		if cur <= end || l.hwMark.CompareAndSwap(cur, end) {
			return
		}
	}
}

// removeSnapshotsAbove unlinks the producer snapshots past offset, durably.
func removeSnapshotsAbove(fs FS, dir string, offset int64) error {
	snaps, err := listSnapshots(fs, dir)
	if err != nil {
		return fmt.Errorf("list producer snapshots: %w", err)
	}
	removed := false
	for _, off := range snaps {
		if off <= offset {
			continue
		}
		if err := fs.Remove(segmentPath(dir, off, snapshotExt)); err != nil && !os.IsNotExist(err) {
			return fmt.Errorf("producer snapshot %d: %w", off, err)
		}
		removed = true
	}
	if removed {
		if err := fs.SyncDir(dir); err != nil {
			return fmt.Errorf("sync directory: %w", err)
		}
	}
	return nil
}

// truncateFullyLocked empties the log and restarts it at offset, with
// log start offset start >= offset (above it only for AppendReplica's
// restart below its start; the log is empty in between, start > end, until
// the append lands).
//
// Order: the producer snapshots go and the epoch checkpoint is emptied
// first (a crash then leaves the old log, whose producers Open replays and
// whose epochs it rebuilds from the batches, since the checkpoint lacks
// them). Then the segments starting at or past offset, or running past it,
// go, newest first, so a crash never leaves old batches after the new
// start (a segment that began below offset but ran past it would overlap
// the new one, and Open does not untangle overlapping segments; one that
// began at offset has the new one's file names); then the new segment is
// created (durably); then the segments wholly below offset go, oldest
// first, like retention. A start above offset is recorded
// (log-start-offset) before any segment goes, so no crash shows the
// records below it; a recorded start above a start at offset is lowered
// once the new segment exists (a crash before that restarts the log at
// the recorded start, Open's rule: offsets deleted anyway).
// REQUIRES: l.flushMu and l.mu held.
func (l *Log) truncateFullyLocked(offset, start int64) error {
	return l.truncateFullyWithLocked(offset, start, nil)
}

// truncateFullyWithLocked is truncateFullyLocked that leaves snap (when
// not nil) as the producer snapshot at offset (RestartFromCopy). It is
// written right after the old snapshots go, before any segment does: a
// crash before the new segment exists leaves it past the old log's end,
// which Open discards (rebuilding from the old log), and a crash after
// finds it at the new log's end. Producer state in memory is the
// caller's to set.
// REQUIRES: l.flushMu and l.mu held.
func (l *Log) truncateFullyWithLocked(offset, start int64, snap producers) error {
	if err := l.dirDurableLocked(); err != nil {
		return err
	}
	// Failures before the first segment goes leave the log as it was.
	if err := removeSnapshotsAbove(l.fs, l.dir, -1); err != nil {
		return fmt.Errorf("log %s: restart at %d: %w", l.dir, offset, err)
	}
	if snap != nil {
		if err := writeSnapshot(l.fs, l.dir, snap, offset, math.MaxInt64); err != nil {
			return fmt.Errorf("log %s: restart at %d: %w", l.dir, offset, err)
		}
	}
	if start > offset {
		if err := l.keepStartLocked(start, offset); err != nil {
			return err
		}
	}
	if err := l.saveEpochsLocked(nil); err != nil {
		return err
	}
	fail := func(err error) error {
		l.mu.failed = fmt.Errorf("log %s: restart at %d: %w", l.dir, offset, err)
		return l.mu.failed
	}
	l.truncations.Add(1) // odd while it runs: see Log.truncations
	defer l.truncations.Add(1)
	l.mu.producers = producers{}
	l.mu.txns = txnState{}
	l.lowerHighWatermarkLocked(offset)
	if l.txnPub.Load() != nil {
		l.publishTxnsLocked()
	}
	segs := l.segments()
	remove := func(s *segment) error {
		delete(l.mu.dirty, s)
		l.indexes.retire(s)
		if err := s.remove(l.cfg.FileDeleteDelay); err != nil {
			return err
		}
		if err := l.fs.SyncDir(l.dir); err != nil {
			return fmt.Errorf("sync directory: %w", err)
		}
		return nil
	}
	below := len(segs)
	for below > 0 && (segs[below-1].base >= offset || segs[below-1].next > offset) {
		below--
		if err := remove(segs[below]); err != nil {
			return fail(err)
		}
	}
	// An aborted transaction index left at this base by a removal that
	// failed must not become the new segment's (see segment.remove).
	if err := l.fs.Remove(segmentPath(l.dir, offset, txnIndexExt)); err != nil && !os.IsNotExist(err) {
		return fail(err)
	}
	ns, err := createSegment(l.fs, l.files, l.dir, offset)
	if err != nil {
		return fail(err)
	}
	for _, s := range segs[:below] {
		if err := remove(s); err != nil {
			ns.close()
			return fail(err)
		}
	}
	if err := l.keepStartLocked(start, offset); err != nil {
		ns.close()
		return fail(err)
	}
	l.durable.Store(min(l.durable.Load(), offset))
	l.publishSegs([]*segment{ns})
	l.end.Store(offset)
	l.startOffset.Store(start)
	l.durable.Store(offset)
	l.log.Info().Int64("offset", offset).Int("segments_removed", len(segs)).Msg("truncated log fully; restarting it")
	return nil
}
