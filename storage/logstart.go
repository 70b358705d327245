package storage

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"slices"
)

// The log start offset can sit inside the first segment: DeleteRecords
// (Kafka's maybeIncrementLogStartOffset) moves it to any offset up to the
// high watermark, and a follower follows its leader's. Retention, by
// contrast, moves it to segment boundaries only, which the segment list
// itself records; a start inside a segment is recorded in the file
// log-start-offset, so that a restart does not bring deleted records back:
//
//	"FJLS" | uint8 version (1) | int64 offset | uint32 CRC-32C of the 13 bytes before it
//
// big-endian, 17 bytes, replaced atomically (WriteFileSyncFS) before the
// move is published. Kafka keeps one log-start-offset-checkpoint per log
// directory, written every minute; a file per partition costs one fsync per
// move but makes the move durable before DeleteRecords answers.
//
// At Open the start is the larger of the file's offset and the first
// segment's base. A file past the log end (a crash between a restart of
// the log below the recorded start and the file's rewrite, or records
// below the high watermark lost on a topic that acknowledges before
// fsync) restarts the log empty at the recorded start: those offsets were
// deleted, and the next append must not land below the start. An
// unreadable file is ignored with a warning: the worst outcome is that
// records deleted by DeleteRecords come back, never that kept ones go.

const (
	logStartFile    = "log-start-offset"
	logStartMagic   = "FJLS"
	logStartVersion = 1
	logStartLen     = 4 + 1 + 8 + 4
)

var errBadLogStart = errors.New("storage: bad log-start-offset file")

func encodeLogStart(offset int64) []byte {
	b := make([]byte, logStartLen)
	copy(b, logStartMagic)
	b[4] = logStartVersion
	binary.BigEndian.PutUint64(b[5:], uint64(offset))
	binary.BigEndian.PutUint32(b[13:], crc32.Checksum(b[:13], castagnoli))
	return b
}

// decodeLogStart parses a log-start-offset file, refusing anything but a
// whole version-1 file with a good CRC and an offset a log can have.
func decodeLogStart(b []byte) (int64, error) {
	switch {
	case len(b) != logStartLen:
		return 0, fmt.Errorf("%w: %d bytes, want %d", errBadLogStart, len(b), logStartLen)
	case string(b[:4]) != logStartMagic:
		return 0, fmt.Errorf("%w: magic %q", errBadLogStart, b[:4])
	case b[4] != logStartVersion:
		return 0, fmt.Errorf("%w: version %d", errBadLogStart, b[4])
	}
	if got, want := crc32.Checksum(b[:13], castagnoli), binary.BigEndian.Uint32(b[13:]); got != want {
		return 0, fmt.Errorf("%w: crc %08x, want %08x", errBadLogStart, got, want)
	}
	off := int64(binary.BigEndian.Uint64(b[5:]))
	if off < 0 || off > maxBaseOffset {
		return 0, fmt.Errorf("%w: offset %d", errBadLogStart, off)
	}
	return off, nil
}

// readLogStart returns the recorded start, -1 when there is no file.
func readLogStart(fs FS, dir string) (int64, error) {
	b, err := readFile(fs, filepath.Join(dir, logStartFile))
	if errors.Is(err, os.ErrNotExist) {
		return -1, nil
	}
	if err != nil {
		return -1, err
	}
	return decodeLogStart(b)
}

func writeLogStart(fs FS, dir string, offset int64) error {
	if err := WriteFileSyncFS(fs, filepath.Join(dir, logStartFile), encodeLogStart(offset)); err != nil {
		return fmt.Errorf("%s: %w", logStartFile, err)
	}
	return nil
}

// AdvanceStartOffset moves the log start offset forward to offset (Kafka's
// maybeIncrementLogStartOffset): offsets below it are no longer read
// (ErrOffsetOutOfRange), ListOffsets earliest gives it, and the segments
// wholly below it are deleted (after FileDeleteDelay, as retention's). It
// returns false, changing nothing, when the start is already at or past
// offset; an offset past the log end is ErrOffsetOutOfRange. The caller
// bounds it by the high watermark (a leader never deletes what is not
// committed; a follower moves to its leader's start only within what it
// knows is committed).
//
// The new start is durable (log-start-offset) before it is published. The
// file is written holding flushMu but not mu: appends and reads go on,
// while Truncate, which needs flushMu, cannot lower the end under it.
func (l *Log) AdvanceStartOffset(offset int64) (bool, error) {
	l.flushMu.Lock()
	defer l.flushMu.Unlock()
	l.mu.Lock()
	err := l.writableLocked()
	start, end := l.startOffset.Load(), l.end.Load()
	l.mu.Unlock()
	switch {
	case err != nil:
		return false, err
	case offset <= start:
		return false, nil
	case offset > end:
		return false, fmt.Errorf("log %s: move start to %d: %w: log ends at %d", l.dir, offset, ErrOffsetOutOfRange, end)
	}
	if err := writeLogStart(l.fs, l.dir, offset); err != nil {
		// Nothing changed in memory; the file is either side of the
		// rename, both of which Open reads correctly.
		return false, fmt.Errorf("log %s: move start to %d: %w", l.dir, offset, err)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.mu.savedStart = offset
	if l.mu.closed {
		return false, ErrClosed // the next Open starts there
	}
	if offset <= l.startOffset.Load() {
		return false, nil // retention went further meanwhile
	}
	n, err := l.dropBelowLocked(offset)
	if err != nil {
		l.log.Warn().Err(err).Msg("removing segments below the log start offset")
	}
	l.log.Info().Int64("log_start_offset", offset).Int64("previous", start).Int("segments_deleted", n).
		Msg("moved the log start offset")
	return true, nil
}

// dropBelowLocked makes start (> the current start) the log start offset:
// the inactive segments wholly below it go (the active one always stays,
// as in Kafka, even when start is its end), the transactions and leader
// epochs below it are forgotten. It returns how many segments went, and
// the first removal that failed.
// Retention's removals are not synced (see the package doc); a crash may
// bring such a segment back, which the next check deletes again.
// REQUIRES: l.mu held.
func (l *Log) dropBelowLocked(start int64) (int, error) {
	segs := l.segments()
	n := 0
	for n < len(segs)-1 && segs[n+1].base <= start {
		n++
	}
	l.startOffset.Store(start)
	if n > 0 {
		l.publishSegs(append([]*segment(nil), segs[n:]...))
	}
	if l.txnPub.Load() != nil {
		l.publishTxnsLocked() // forgets transactions ended below the new start
	}
	// Epochs wholly below the new start go from the cache, in memory only:
	// Open drops them too, so the checkpoint can wait for Close (no fsync
	// under mu here).
	if c, nc := l.epochCache(), l.epochCache().truncateFromStart(start); !slices.Equal(c, nc) {
		l.epochs.Store(&nc)
		l.mu.epochsUnsaved = true
	}
	var firstErr error
	for _, s := range segs[:n] {
		delete(l.mu.dirty, s)
		l.indexes.retire(s)
		if err := s.remove(l.cfg.FileDeleteDelay); err != nil && firstErr == nil {
			firstErr = err
		}
		l.log.Info().Int64("segment", s.base).Int64("bytes", s.size).Int64("log_start_offset", start).Msg("deleted segment below the log start offset")
	}
	return n, firstErr
}

// keepStartLocked records start as the log start offset in log-start-offset
// when the segment list alone would not say it: start above the first
// segment's base must be in the file; a file above it must go down to it.
// REQUIRES: l.mu held.
func (l *Log) keepStartLocked(start, firstBase int64) error {
	if l.mu.savedStart == start || (start <= firstBase && l.mu.savedStart <= start) {
		return nil
	}
	if err := writeLogStart(l.fs, l.dir, start); err != nil {
		return fmt.Errorf("log %s: %w", l.dir, err)
	}
	l.mu.savedStart = start
	return nil
}
