package storage

import (
	"fmt"
	"time"

	"github.com/fjordlog/fjord/storage/recordbatch"
)

// AppendReplicaResult says what AppendReplica did with one fetched chunk.
type AppendReplicaResult struct {
	Batches      int   // batches appended
	Records      int64 // records in them, as their headers count
	Bytes        int64 // bytes appended
	Skipped      int   // leading batches ending below the log end: already here
	PartialBytes int   // bytes of a torn batch ending the input, ignored
	FirstOffset  int64 // base offset of the first batch appended; -1 if none
	LastOffset   int64 // last offset appended; -1 if none
	EndOffset    int64 // the log end offset afterwards
}

// replicaBatch is one fetched batch accepted for appending.
type replicaBatch struct {
	at     int // position in the fetched bytes
	b      []byte
	info   recordbatch.Info
	base   int64
	epoch  int32
	marker *recordbatch.EndTxnMarker // a control batch's; nil for data or an empty control batch
}

// AppendReplica appends batches fetched from the leader, as a follower: a
// concatenation of whole v2 batches, written verbatim, so offsets,
// timestamps and PartitionLeaderEpoch are the leader's. batches is only
// read; the caller keeps it.
//
// Leading batches that end below the log end are skipped (a refetch of what
// is here). The batches kept must have strictly increasing offsets, none
// below the log end: each starts at or after the offset following the
// previous one (the log end, for the first). Gaps are allowed, as Kafka's
// followers allow them: log compaction on the leader removes whole batches
// from older segments, so a fetch from the log end may start with a batch
// past it and skip offsets between batches. The log end afterwards is the
// last batch's last offset + 1, and a Read of an offset inside a gap
// returns the batch after it. A batch overlapping what is already here (or
// an earlier batch of the same input), or going backwards, is
// ErrUnexpectedOffset. Nothing bounds a gap: the base offset is not under
// the CRC, so a corrupted one that lands past the log end is taken as a
// gap, as in Kafka; if it takes the log end past the leader's, the leader
// answers the next fetch with OFFSET_OUT_OF_RANGE and the follower
// truncates back (OffsetForLeaderEpoch).
//
// Each kept batch is checked like a stored one: magic, length, CRC-32C,
// codec, offset range (not the records inside: the CRC proves these are
// the bytes the leader validated, and decompressing every replicated batch
// would double the follower's work, as Kafka's follower also declines to).
// A bad batch is recordbatch.ErrCorrupt, a leader epoch older than the log's
// ErrStaleLeaderEpoch. On any of these, the batches before the bad one are
// appended and the error returned with the result; the caller should find
// the divergence point again (OffsetForLeaderEpoch). A partial batch at the
// very end of the input is ignored: Fetch responses may end mid-batch.
//
// Segments roll where Append would roll them, judged at each batch's own
// offsets, and also when a batch after a gap would not fit the active
// segment's int32 relative offsets (even an empty segment: the new one
// starts at the batch's base). Producer state is updated as on the leader
// but never refuses a batch (the leader decided), so that this replica
// deduplicates correctly if it becomes leader; so is the transaction state
// (markers included, which must be well-formed: recordbatch.ErrCorrupt otherwise),
// with this replica's own aborted transaction index. A batch of a leader epoch
// above the cached ones extends the epoch cache at the batch's base offset
// (durably, before the batch is written), as Kafka's follower assigns it.
// Durability is as for Append: Flush makes the data durable and advances
// DurableOffset.
//
// One batch may start below the log end: the first of an empty log
// (start == end) that holds its end, which happens when the leader's log
// start, where this log restarted (TruncateFullyAndStartAt), lies inside
// a batch (DeleteRecords). The log then restarts at that batch's base and
// takes it, keeping its start offset, as Kafka's follower does on
// UnexpectedAppendOffsetException.
func (l *Log) AppendReplica(batches []byte) (AppendReplicaResult, error) {
	now := time.Now().UnixMilli()
	if straddlesEnd(batches, l.startOffset.Load(), l.end.Load()) {
		return l.appendReplicaBelowStart(batches, now)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.appendReplicaLocked(batches, now)
}

// straddlesEnd reports whether an empty log (start == end) is handed a
// first batch that begins below end and holds it.
func straddlesEnd(batches []byte, start, end int64) bool {
	if start != end || len(batches) < recordbatch.HeaderLen || recordbatch.Length(batches) > int64(len(batches)) {
		return false
	}
	base, last := recordbatch.BaseOffset(batches), recordbatch.LastOffset(batches)
	return base >= 0 && base < end && last >= end
}

// appendReplicaBelowStart is AppendReplica for a first batch that holds
// the end of an empty log: the log restarts at the batch's base with its
// start offset kept (truncateFullyLocked records it first), then appends.
func (l *Log) appendReplicaBelowStart(batches []byte, now int64) (AppendReplicaResult, error) {
	l.flushMu.Lock()
	defer l.flushMu.Unlock()
	l.mu.Lock()
	defer l.mu.Unlock()
	start := l.startOffset.Load()
	if err := l.writableLocked(); err != nil || !straddlesEnd(batches, start, l.end.Load()) {
		return l.appendReplicaLocked(batches, now) // changed meanwhile
	}
	base := recordbatch.BaseOffset(batches)
	if _, err := checkStoredBatch(batches[:recordbatch.Length(batches)]); err != nil {
		res := AppendReplicaResult{FirstOffset: -1, LastOffset: -1, EndOffset: l.end.Load()}
		return res, fmt.Errorf("log %s: fetched batches: batch at offset %d: %w", l.dir, base, err)
	}
	l.log.Info().Int64("log_start_offset", start).Int64("batch_base", base).
		Msg("the first fetched batch begins below the log start offset; restarting the log at the batch")
	if err := l.truncateFullyLocked(base, start); err != nil {
		return AppendReplicaResult{FirstOffset: -1, LastOffset: -1, EndOffset: l.end.Load()}, err
	}
	res, err := l.appendReplicaLocked(batches, now)
	if end := l.end.Load(); end < start {
		// Nothing landed: keep start <= end in memory (the file keeps the
		// start, and Open restarts there).
		l.startOffset.Store(end)
	}
	return res, err
}

// appendReplicaLocked is AppendReplica without the restart below the start.
// REQUIRES: l.mu held.
func (l *Log) appendReplicaLocked(batches []byte, now int64) (AppendReplicaResult, error) {
	res := AppendReplicaResult{FirstOffset: -1, LastOffset: -1, EndOffset: l.end.Load()}
	if err := l.writableLocked(); err != nil {
		return res, err
	}
	kept, badErr := parseReplicaBatches(batches, l.end.Load(), l.epochCache(), &res)
	err := l.writeReplicaLocked(batches, kept, now, &res)
	res.EndOffset = l.end.Load()
	if err != nil {
		return res, err
	}
	if badErr != nil {
		return res, fmt.Errorf("log %s: fetched batches: %w", l.dir, badErr)
	}
	return res, nil
}

// parseReplicaBatches splits fetched bytes into the batches to append,
// given the log end and epoch cache, and returns them with the error that
// stopped it early, if any. Skipped and partial bytes go into res.
func parseReplicaBatches(in []byte, end int64, epochs epochCache, res *AppendReplicaResult) ([]replicaBatch, error) {
	var kept []replicaBatch
	for at := 0; at < len(in); {
		rest := in[at:]
		if len(rest) < recordbatch.PrefixLen {
			res.PartialBytes = len(rest)
			break
		}
		n := recordbatch.Length(rest)
		if n < recordbatch.HeaderLen {
			return kept, fmt.Errorf("%w: at byte %d: batch length %d", recordbatch.ErrCorrupt, at, n-recordbatch.PrefixLen)
		}
		if n > int64(len(rest)) {
			res.PartialBytes = len(rest)
			break
		}
		b := rest[:n]
		base := recordbatch.BaseOffset(b)
		if len(kept) == 0 && recordbatch.LastOffset(b) < end && recordbatch.LastOffset(b) >= base {
			res.Skipped++
			at += int(n)
			continue
		}
		if base < end {
			after := "the log ends"
			if len(kept) > 0 {
				after = "the previous batch ends"
			}
			return kept, fmt.Errorf("%w: batch at byte %d has offsets [%d, %d], overlapping or going back: %s at %d",
				ErrUnexpectedOffset, at, base, recordbatch.LastOffset(b), after, end)
		}
		info, err := checkStoredBatch(b)
		if err != nil {
			return kept, fmt.Errorf("batch at offset %d: %w", base, err)
		}
		var marker *recordbatch.EndTxnMarker
		if info.Control && info.Records > 0 {
			// A marker the leader wrote: it must be one. (An empty control
			// batch, which Kafka's cleaner leaves, ends nothing.)
			m, err := recordbatch.ParseEndTxnMarker(b, info)
			if err != nil {
				return kept, fmt.Errorf("batch at offset %d: %w", base, err)
			}
			marker = &m
		}
		epoch := recordbatch.PartitionLeaderEpoch(b)
		if epochs, _, err = replicaEpochs(epochs, epoch, base, end); err != nil {
			return kept, err
		}
		kept = append(kept, replicaBatch{at: at, b: b, info: info, base: base, epoch: epoch, marker: marker})
		end = base + int64(info.LastDelta) + 1
		at += int(n)
	}
	return kept, nil
}

// checkStoredBatch checks a whole batch as it is stored: magic, length,
// CRC-32C, codec and offset range. Unlike recordbatch.Validate it accepts what
// compaction leaves (fewer records than the offset range, gaps between
// their offset deltas) and does not look inside the records.
func checkStoredBatch(b []byte) (recordbatch.Info, error) {
	info, err := recordbatch.ParseHeader(b)
	if err != nil {
		return info, err
	}
	if info.Bytes != len(b) {
		return info, fmt.Errorf("%w: batch length says %d bytes, %d present", recordbatch.ErrCorrupt, info.Bytes, len(b))
	}
	if err := recordbatch.CheckCRC(b); err != nil {
		return info, err
	}
	switch {
	case info.Codec > recordbatch.CodecZstd:
		return info, fmt.Errorf("%w: unknown compression codec %d", recordbatch.ErrCorrupt, info.Codec)
	case info.LastDelta < 0:
		return info, fmt.Errorf("%w: last offset delta %d", recordbatch.ErrCorrupt, info.LastDelta)
	case info.Records < 0 || int64(info.Records) > int64(info.LastDelta)+1:
		return info, fmt.Errorf("%w: %d records in an offset range of %d", recordbatch.ErrCorrupt, info.Records, int64(info.LastDelta)+1)
	case recordbatch.BaseOffset(b) < 0 || recordbatch.BaseOffset(b) > maxBaseOffset:
		return info, fmt.Errorf("%w: base offset %d", recordbatch.ErrCorrupt, recordbatch.BaseOffset(b))
	}
	return info, nil
}

// maxBaseOffset bounds a base offset so that base + lastOffsetDelta + 1
// cannot overflow (recovery applies the same bound).
const maxBaseOffset = 1<<62 - 1

// replicaEpochs is epochCache.next for a follower's batch of leader epoch
// epoch at base, appended to a log ending at end <= base (base > end after
// a gap left by compaction on the leader). The entry a new epoch adds
// starts at base, as Kafka's follower assigns it. An entry at end (an epoch
// this replica recorded as leader and never wrote; see epochCache.next)
// covers no batch and gives way to any other epoch, as it does when base
// is end.
func replicaEpochs(c epochCache, epoch int32, base, end int64) (epochCache, bool, error) {
	cur := c
	if l, ok := c.latest(); ok && epoch >= 0 && epoch != l.epoch {
		cur = c.truncateFromEnd(end)
	}
	next, changed, err := cur.next(epoch, base, true)
	if err != nil {
		return c, false, err
	}
	return next, changed || len(cur) != len(c), nil
}

// maxRelOffset is the largest offset, relative to its segment's base, that
// a batch may end at: the indexes store relative offsets as int32. Writers
// roll before it (see rollNeeded); recovery refuses anything beyond it.
const maxRelOffset = 1<<31 - 1

// writeReplicaLocked appends kept (slices of in, adjacent and in order, with
// increasing offsets that may leave gaps) in runs: each run is the batches
// of one leader epoch that fit in the active segment, written with one
// pwrite.
// REQUIRES: l.mu held.
func (l *Log) writeReplicaLocked(in []byte, kept []replicaBatch, now int64, res *AppendReplicaResult) error {
	if len(kept) > 0 {
		if err := l.dirDurableLocked(); err != nil {
			return err
		}
	}
	for i := 0; i < len(kept); {
		s := l.active()
		first := kept[i]
		// Judged at the batch's own base offset, not the log end: after a
		// gap the batch may not fit the segment's relative offsets. An empty
		// segment whose base is too far behind is left empty; the new one
		// starts at the batch (Kafka rolls there too).
		firstLast := first.base + int64(first.info.LastDelta)
		if l.rollNeeded(s, s.size, first.base, s.firstAppend.UnixMilli(), len(first.b), first.info.LastDelta, now) ||
			(s.size == 0 && first.base > s.base && firstLast-s.base > maxRelOffset-1) {
			var err error
			if s, err = l.rollLocked(first.base, now); err != nil {
				return err
			}
		}
		// Extend the run while the segment would take the next batch
		// without rolling, by the same rule Append applies one at a time,
		// and the leader epoch stays the same: a new epoch's entry must be
		// on disk before its first batch, and only the latest entry may
		// start at the log end.
		firstAppend := s.firstAppend.UnixMilli()
		if s.firstAppend.IsZero() {
			firstAppend = now
		}
		size := s.size + int64(len(first.b))
		j := i + 1
		for ; j < len(kept); j++ {
			k := kept[j]
			if k.epoch != first.epoch || l.rollNeeded(s, size, k.base, firstAppend, len(k.b), k.info.LastDelta, now) {
				break
			}
			size += int64(len(k.b))
		}
		run := kept[i:j]

		// parseReplicaBatches has checked the epoch against the cache.
		if c, changed, _ := replicaEpochs(l.epochCache(), first.epoch, first.base, l.end.Load()); changed || l.epochPending.Load() {
			if err := l.saveEpochsLocked(c); err != nil {
				return err
			}
		}

		last := run[len(run)-1]
		data := in[first.at : last.at+len(last.b)]
		s.ensureSpace(len(data), max(l.cfg.SegmentBytes, s.size+int64(len(data))))
		if _, err := s.f.WriteAt(data, s.size); err != nil {
			if terr := s.f.Truncate(s.size); terr != nil {
				l.mu.failed = fmt.Errorf("segment %d: write failed (%v) and truncate failed: %w", s.base, err, terr)
			}
			return fmt.Errorf("segment %d: append fetched batches: %w", s.base, err)
		}
		pos := s.size
		var idxErr error
		for _, rb := range run {
			lastOff := rb.base + int64(rb.info.LastDelta)
			s.noteAppended(pos, len(rb.b), lastOff, rb.info.MaxTimestamp, rb.epoch, now, l.cfg.IndexIntervalBytes)
			if err := l.applyLocked(s, rb.info, rb.marker, rb.base, lastOff, now); err != nil && idxErr == nil {
				idxErr = err
			}
			pos += int64(len(rb.b))
			res.Batches++
			res.Records += int64(rb.info.Records)
			res.Bytes += int64(len(rb.b))
			if res.FirstOffset < 0 {
				res.FirstOffset = rb.base
			}
			res.LastOffset = lastOff
		}
		l.mu.dirty[s] = struct{}{}
		s.publish()
		l.end.Store(s.next)
		if idxErr != nil {
			return idxErr // the log is failed (applyLocked)
		}
		i = j
	}
	return nil
}
