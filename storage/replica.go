package storage

import (
	"fmt"
	"time"
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
	at    int // position in the fetched bytes
	b     []byte
	info  BatchInfo
	base  int64
	epoch int32
}

// AppendReplica appends batches fetched from the leader, as a follower: a
// concatenation of whole v2 batches, written verbatim, so offsets,
// timestamps and PartitionLeaderEpoch are the leader's. batches is only
// read; the caller keeps it.
//
// Leading batches that end below the log end are skipped (a refetch of what
// is here). The first batch kept must start exactly at the log end and each
// next one where the previous ended; a gap or an overlap is
// ErrUnexpectedOffset. Each kept batch is checked like a stored one: magic,
// length, CRC-32C, codec, offset range (not the records inside: the CRC
// proves these are the bytes the leader validated, and decompressing every
// replicated batch would double the follower's work, as Kafka's follower
// also declines to). A bad batch is ErrCorruptBatch, a leader epoch older
// than the log's ErrStaleLeaderEpoch. On any of these, the batches before
// the bad one are appended and the error returned with the result; the
// caller should find the divergence point again (OffsetForLeaderEpoch).
// A partial batch at the very end of the input is ignored: Fetch responses
// may end mid-batch.
//
// Producer state is updated as on the leader but never refuses a batch (the
// leader decided), so that this replica deduplicates correctly if it
// becomes leader. A batch of a leader epoch above the cached ones extends
// the epoch cache (durably, before the batch is written). Durability is as
// for Append: Flush makes the data durable and advances DurableOffset.
func (l *Log) AppendReplica(batches []byte) (AppendReplicaResult, error) {
	now := time.Now().UnixMilli()
	l.mu.Lock()
	defer l.mu.Unlock()
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
		if len(rest) < lengthFieldEnd {
			res.PartialBytes = len(rest)
			break
		}
		n := batchLen(rest)
		if n < BatchHeaderLen {
			return kept, fmt.Errorf("%w: at byte %d: batch length %d", ErrCorruptBatch, at, n-lengthFieldEnd)
		}
		if n > int64(len(rest)) {
			res.PartialBytes = len(rest)
			break
		}
		b := rest[:n]
		base := BaseOffset(b)
		if len(kept) == 0 && LastOffset(b) < end && LastOffset(b) >= base {
			res.Skipped++
			at += int(n)
			continue
		}
		if base != end {
			what := "a gap"
			if base < end {
				what = "an overlap"
			}
			return kept, fmt.Errorf("%w: batch at byte %d has offsets [%d, %d], the log ends at %d (%s)",
				ErrUnexpectedOffset, at, base, LastOffset(b), end, what)
		}
		info, err := checkStoredBatch(b)
		if err != nil {
			return kept, fmt.Errorf("batch at offset %d: %w", base, err)
		}
		epoch := PartitionLeaderEpoch(b)
		if epochs, _, err = epochs.next(epoch, base, true); err != nil {
			return kept, err
		}
		kept = append(kept, replicaBatch{at: at, b: b, info: info, base: base, epoch: epoch})
		end = base + int64(info.LastDelta) + 1
		at += int(n)
	}
	return kept, nil
}

// checkStoredBatch checks a whole batch as it is stored: magic, length,
// CRC-32C, codec and offset range. Unlike ValidateBatch it accepts what
// compaction leaves (fewer records than the offset range, gaps between
// their offset deltas) and does not look inside the records.
func checkStoredBatch(b []byte) (BatchInfo, error) {
	info, err := ParseHeader(b)
	if err != nil {
		return info, err
	}
	if info.Bytes != len(b) {
		return info, fmt.Errorf("%w: batch length says %d bytes, %d present", ErrCorruptBatch, info.Bytes, len(b))
	}
	if err := CheckCRC(b); err != nil {
		return info, err
	}
	switch {
	case info.Codec > CodecZstd:
		return info, fmt.Errorf("%w: unknown compression codec %d", ErrCorruptBatch, info.Codec)
	case info.LastDelta < 0:
		return info, fmt.Errorf("%w: last offset delta %d", ErrCorruptBatch, info.LastDelta)
	case info.Records < 0 || int64(info.Records) > int64(info.LastDelta)+1:
		return info, fmt.Errorf("%w: %d records in an offset range of %d", ErrCorruptBatch, info.Records, int64(info.LastDelta)+1)
	case BaseOffset(b) < 0 || BaseOffset(b) > maxBaseOffset:
		return info, fmt.Errorf("%w: base offset %d", ErrCorruptBatch, BaseOffset(b))
	}
	return info, nil
}

// maxBaseOffset bounds a base offset so that base + lastOffsetDelta + 1
// cannot overflow (recovery applies the same bound).
const maxBaseOffset = 1<<62 - 1

// writeReplicaLocked appends kept (slices of in, in order and contiguous)
// in runs: each run is the batches of one leader epoch that fit in the
// active segment, written with one pwrite.
// REQUIRES: l.mu held.
func (l *Log) writeReplicaLocked(in []byte, kept []replicaBatch, now int64, res *AppendReplicaResult) error {
	for i := 0; i < len(kept); {
		s := l.active()
		first := kept[i]
		if l.shouldRoll(s, len(first.b), first.info, now) {
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
		if c, changed, _ := l.epochCache().next(first.epoch, first.base, true); changed {
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
		for _, rb := range run {
			lastOff := rb.base + int64(rb.info.LastDelta)
			s.noteAppended(pos, len(rb.b), lastOff, rb.info.MaxTimestamp, rb.epoch, now, l.cfg.IndexIntervalBytes)
			l.mu.producers.record(rb.info, rb.base, lastOff, now)
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
		i = j
	}
	return nil
}
