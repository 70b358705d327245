package storage

import (
	"encoding/binary"
	"fmt"
	"math"
	"os"
)

// What tiered storage (broker/tier) reads of a log to copy its sealed
// segments to a remote store. Read-only: copying never changes the log,
// and a tiered log's retention (Config.Tier) keeps a segment until the
// store holds it, so its files stay while they are read.

// SealedSegment is a sealed segment: offsets [Base, Last], Size bytes of
// .log, MaxTimestamp its largest batch timestamp (-1: none).
type SealedSegment struct {
	Base, Last   int64
	Size         int64
	MaxTimestamp int64
}

// EpochStart is a leader epoch's first offset.
type EpochStart struct {
	Epoch int32
	Start int64
}

// SealedSegments returns the log's sealed segments, oldest first (every
// segment but the active one). The caller owns the slice.
func (l *Log) SealedSegments() []SealedSegment {
	segs := l.segments()
	var out []SealedSegment
	for i := 0; i+1 < len(segs); i++ {
		s := segs[i]
		l.mu.Lock() // maxTS is the writer's; a sealed segment's no longer changes
		maxTS := s.maxTS
		l.mu.Unlock()
		out = append(out, SealedSegment{Base: s.base, Last: segs[i+1].base - 1, Size: s.pub.Load().size, MaxTimestamp: maxTS})
	}
	return out
}

// OpenSegmentFile opens a sealed segment's file (ext one of ".log",
// ".index", ".timeindex", ".txnindex"; the last exists only for a
// segment with aborted transactions) for reading and returns it with its
// size; an error satisfying errors.Is(err, os.ErrNotExist) when the
// segment has no such file. The caller closes the file.
func (l *Log) OpenSegmentFile(base int64, ext string) (File, int64, error) {
	f, err := l.fs.OpenFile(segmentPath(l.dir, base, ext), os.O_RDONLY, 0)
	if err != nil {
		return nil, 0, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, 0, fmt.Errorf("segment %d%s: %w", base, ext, err)
	}
	size := st.Size()
	if ext == ".log" {
		// A sealed .log is cut at its size at roll; this guards a tail
		// that a crash before the cut left.
		for _, s := range l.segments() {
			if s.base == base {
				size = min(size, s.pub.Load().size)
			}
		}
	}
	return f, size, nil
}

// ProducerSnapshot returns the producer snapshot taken at offset end (a
// roll writes one at the new segment's base), or an error satisfying
// errors.Is(err, os.ErrNotExist): the log keeps only its newest two.
func (l *Log) ProducerSnapshot(end int64) ([]byte, error) {
	return readFile(l.fs, segmentPath(l.dir, end, snapshotExt))
}

// EpochsIn returns the leader epochs of the offsets [base, last]: the one
// in force at base (its start given as base), then each that starts
// within. Empty when the log has no epochs for them.
func (l *Log) EpochsIn(base, last int64) []EpochStart {
	var out []EpochStart
	for _, e := range l.epochCache() {
		switch {
		case e.start <= base:
			out = append(out[:0], EpochStart{e.epoch, base})
		case e.start <= last:
			out = append(out, EpochStart{e.epoch, e.start})
		}
	}
	return out
}

// IndexPosition is where to start scanning a segment's .log for offset,
// given the bytes of its .index file (as a tiered copy holds it) and its
// base offset: the byte position of a batch at or before the one holding
// offset. It reads nothing else, so a remote reader can fetch the .log
// from there with a ranged read.
func IndexPosition(index []byte, base, offset int64) (int64, error) {
	if len(index)%offsetEntryLen != 0 {
		return 0, fmt.Errorf("storage: offset index of %d bytes is not whole entries", len(index))
	}
	offs := make([]offsetEntry, 0, len(index)/offsetEntryLen)
	for b := index; len(b) > 0; b = b[offsetEntryLen:] {
		offs = append(offs, offsetEntry{int32(binary.BigEndian.Uint32(b)), int32(binary.BigEndian.Uint32(b[4:]))})
	}
	rel := offset - base
	if rel < 0 || rel > math.MaxInt32 {
		return 0, fmt.Errorf("storage: offset %d outside the segment at %d", offset, base)
	}
	return int64(lookupPos(offs, int32(rel))), nil
}

// TimeIndexOffset is where to start looking for the first record with a
// timestamp at or after ts in a segment, given the bytes of its
// .timeindex file (as a tiered copy holds it) and its base offset: an
// offset at or before that record (the segment's base when the index
// says nothing). A remote reader then scans the .log from
// IndexPosition's byte for it.
func TimeIndexOffset(timeindex []byte, base, ts int64) (int64, error) {
	if len(timeindex)%timeEntryLen != 0 {
		return 0, fmt.Errorf("storage: time index of %d bytes is not whole entries", len(timeindex))
	}
	times := make([]timeEntry, 0, len(timeindex)/timeEntryLen)
	for b := timeindex; len(b) > 0; b = b[timeEntryLen:] {
		times = append(times, timeEntry{int64(binary.BigEndian.Uint64(b)), int32(binary.BigEndian.Uint32(b[8:]))})
	}
	return base + int64(lookupTime(times, ts)), nil
}
