package storage

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/fjordlog/fjord/storage/recordbatch"
)

// The leader-epoch cache is Kafka's leader-epoch-checkpoint (KIP-101): for
// each leader epoch that wrote to the log, the offset of its first batch.
// A follower that finds a new leader asks it, with OffsetForLeaderEpoch,
// where its own latest epoch ends in the leader's log, and truncates there;
// KIP-279 repeats the question with older epochs until both logs agree.
//
// The cache is a function of the log (each batch carries its
// PartitionLeaderEpoch, bytes 12-16), plus at most one entry a new leader
// recorded at its log end before writing anything. The checkpoint file only
// spares a scan of every segment at start-up, so one that is missing,
// unreadable, or does not know the last batch's epoch is rebuilt from the
// batch headers.
//
// Durability: an entry reaches the checkpoint (fsync, rename, fsync dir)
// before the first batch of its epoch is written, as Kafka does. A crash can
// then leave entries past the recovered log end, never a batch whose epoch
// the checkpoint lacks; Open drops entries at or past the log end.
//
// The entry a new leader records before writing (AssignEpoch) is such an
// entry until its first batch: Open would drop it, so writing it durably at
// once buys nothing. It is kept in memory (epochPending) and written by
// that first batch's append, before the batch, unless SaveEpochs (which
// the broker runs in the background after a leader change) got there
// first. This keeps the two fsyncs off partition creation and off the
// leader change itself: a restart or failover of 1,000 partitions serves
// before their checkpoints are written.
//
// Alternatives rejected: syncing the checkpoint lazily in Flush would keep
// the fsync off Log.mu, but data reaches disk without Flush (writeback), and
// then a crash leaves batches of an epoch the checkpoint does not know.
// New epochs are rare (a leader change), so one fsync under Log.mu for each
// is cheap. Open backs this up: a checkpoint that does not know the last
// batch's epoch is rebuilt from the log.

// epochCheckpointFile holds the cache in Kafka's text format:
//
//	0                 version
//	<n>               number of entries
//	<epoch> <offset>  n lines, ascending
const epochCheckpointFile = "leader-epoch-checkpoint"

// epochEntry says that leader epoch epoch wrote the log from offset start
// (up to the next entry's start, or the log end).
type epochEntry struct {
	epoch int32
	start int64
}

// epochCache is an immutable list of epoch entries. A change makes a new
// one: the Log publishes it with an atomic pointer so readers
// (OffsetForLeaderEpoch) never take the writer's lock.
//
// Invariant: epochs are >= 0 and start offsets >= 0, both strictly
// increasing along the list.
type epochCache []epochEntry

// latest returns the latest entry; ok is false for an empty cache.
func (c epochCache) latest() (e epochEntry, ok bool) {
	if len(c) == 0 {
		return epochEntry{epoch: -1, start: -1}, false
	}
	return c[len(c)-1], true
}

// latestEpoch is the latest epoch, -1 when empty.
func (c epochCache) latestEpoch() int32 {
	e, _ := c.latest()
	return e.epoch
}

// truncateFromEnd drops entries starting at or after end: epochs with no
// batch below end.
func (c epochCache) truncateFromEnd(end int64) epochCache {
	n := len(c)
	for n > 0 && c[n-1].start >= end {
		n--
	}
	return c[:n:n] // capacity cut: a later append copies, never shares
}

// truncateFromStart forgets epochs wholly below a new log start offset, as
// Kafka does when retention moves the start: the last entry starting below
// start is kept, moved up to start (its epoch still wrote the first
// remaining batch).
func (c epochCache) truncateFromStart(start int64) epochCache {
	i := 0
	for i < len(c) && c[i].start < start {
		i++
	}
	if i == 0 {
		return c
	}
	out := make(epochCache, 0, len(c)-i+1)
	if i == len(c) || c[i].start > start {
		out = append(out, epochEntry{c[i-1].epoch, start})
	}
	return append(out, c[i:]...)
}

// next returns the cache after a batch of leader epoch epoch is appended at
// base, the log end, and whether it changed. A negative epoch (a batch
// nobody stamped) changes nothing.
//
// A leader (replica false) may not write below the latest epoch: that is a
// write from a leadership that has ended, racing the new leader's
// AssignEpoch. A follower (replica true) takes the leader's word: entries
// at or past its log end cover no batch (an epoch it recorded as a leader
// and never wrote) and give way; an older epoch below that is still an
// error, since the follower should have truncated first.
func (c epochCache) next(epoch int32, base int64, replica bool) (epochCache, bool, error) {
	if epoch < 0 {
		return c, false, nil
	}
	cur := c
	if replica {
		if l, ok := cur.latest(); ok && epoch < l.epoch {
			cur = cur.truncateFromEnd(base)
		}
	}
	l, ok := cur.latest()
	switch {
	case ok && epoch == l.epoch:
		return cur, len(cur) != len(c), nil
	case ok && epoch < l.epoch:
		return c, false, fmt.Errorf("%w: batch at %d has leader epoch %d; the log has epoch %d from offset %d",
			ErrStaleLeaderEpoch, base, epoch, l.epoch, l.start)
	}
	return cur.with(epoch, base), true, nil
}

// with returns the cache with (epoch, start) appended, where epoch is
// above every cached epoch and start is the log end. An entry starting at
// or after start covers no batch and is replaced.
func (c epochCache) with(epoch int32, start int64) epochCache {
	c = c.truncateFromEnd(start)
	out := make(epochCache, len(c), len(c)+1)
	copy(out, c)
	return append(out, epochEntry{epoch, start})
}

// endOffsetFor answers OffsetForLeaderEpoch (KIP-279): the largest cached
// epoch at or below epoch, and where it ends: the next entry's start, or
// logEnd for the latest epoch. An epoch below every cached one (or an empty
// cache) gives (-1, -1). The result never exceeds logEnd.
func (c epochCache) endOffsetFor(epoch int32, logEnd int64) (int32, int64) {
	i := len(c)
	for i > 0 && c[i-1].epoch > epoch {
		i--
	}
	if i == 0 {
		return -1, -1
	}
	if i == len(c) {
		return c[i-1].epoch, logEnd
	}
	return c[i-1].epoch, min(c[i].start, logEnd)
}

// encode writes the cache in Kafka's checkpoint format.
func (c epochCache) encode() []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "0\n%d\n", len(c))
	for _, e := range c {
		fmt.Fprintf(&b, "%d %d\n", e.epoch, e.start)
	}
	return b.Bytes()
}

var errBadEpochCheckpoint = errors.New("storage: bad leader-epoch-checkpoint")

// decodeEpochCheckpoint parses a checkpoint file, refusing anything but a
// well-formed version-0 file whose entries keep the cache's invariant.
func decodeEpochCheckpoint(b []byte) (epochCache, error) {
	lines := strings.Split(string(b), "\n")
	if n := len(lines); n > 0 && lines[n-1] == "" {
		lines = lines[:n-1] // the final newline
	}
	if len(lines) < 2 || strings.TrimSpace(lines[0]) != "0" {
		return nil, fmt.Errorf("%w: version line", errBadEpochCheckpoint)
	}
	n, err := strconv.Atoi(strings.TrimSpace(lines[1]))
	if err != nil || n < 0 || n != len(lines)-2 {
		return nil, fmt.Errorf("%w: count %q for %d entries", errBadEpochCheckpoint, lines[1], len(lines)-2)
	}
	c := make(epochCache, 0, n)
	for i, line := range lines[2:] {
		f := strings.Fields(line)
		if len(f) != 2 {
			return nil, fmt.Errorf("%w: entry %d: %q", errBadEpochCheckpoint, i, line)
		}
		epoch, err1 := strconv.ParseInt(f[0], 10, 32)
		start, err2 := strconv.ParseInt(f[1], 10, 64)
		if err1 != nil || err2 != nil || epoch < 0 || start < 0 {
			return nil, fmt.Errorf("%w: entry %d: %q", errBadEpochCheckpoint, i, line)
		}
		if l, ok := c.latest(); ok && (int32(epoch) <= l.epoch || start <= l.start) {
			return nil, fmt.Errorf("%w: entry %d (%d, %d) does not follow (%d, %d)", errBadEpochCheckpoint, i, epoch, start, l.epoch, l.start)
		}
		c = append(c, epochEntry{int32(epoch), start})
	}
	return c, nil
}

// readEpochCheckpoint loads dir's checkpoint; a missing file is reported
// with an error satisfying errors.Is(err, os.ErrNotExist).
func readEpochCheckpoint(fs FS, dir string) (epochCache, error) {
	b, err := readFile(fs, filepath.Join(dir, epochCheckpointFile))
	if err != nil {
		return nil, err
	}
	return decodeEpochCheckpoint(b)
}

func writeEpochCheckpoint(fs FS, dir string, c epochCache) error {
	if err := WriteFileSyncFS(fs, filepath.Join(dir, epochCheckpointFile), c.encode()); err != nil {
		return fmt.Errorf("leader-epoch-checkpoint: %w", err)
	}
	return nil
}

// scanEpochs rebuilds the cache from the batch headers of segs: an entry at
// the first batch of each epoch above all before it.
func scanEpochs(segs []*segment) (epochCache, error) {
	var c epochCache
	for _, s := range segs {
		err := s.walkHeaders(0, s.size, func(_ int64, hdr []byte) (bool, error) {
			epoch := recordbatch.PartitionLeaderEpoch(hdr)
			if epoch >= 0 && epoch > c.latestEpoch() {
				c = append(c, epochEntry{epoch, recordbatch.BaseOffset(hdr)})
			}
			return true, nil
		})
		if err != nil {
			return nil, err
		}
	}
	return c, nil
}

// epochCache returns the published cache; the caller must not modify it.
func (l *Log) epochCache() epochCache {
	if c := l.epochs.Load(); c != nil {
		return *c
	}
	return nil
}

// saveEpochsLocked writes c to the checkpoint and then publishes it; on
// failure nothing changes in memory.
// REQUIRES: l.mu held.
func (l *Log) saveEpochsLocked(c epochCache) error {
	// An fsync of the checkpoint and its directory under mu, as a roll's.
	if l.syncSince.CompareAndSwap(0, time.Now().UnixMilli()) {
		defer l.syncSince.Store(0)
	}
	if err := writeEpochCheckpoint(l.fs, l.dir, c); err != nil {
		return fmt.Errorf("log %s: %w", l.dir, err)
	}
	l.epochs.Store(&c)
	l.mu.epochsUnsaved = false
	l.epochPending.Store(false)
	l.mu.dirUnsynced = false // the checkpoint's rename synced the directory
	return nil
}

// loadEpochs sets up the cache at Open from the checkpoint, or from the
// batch headers when the checkpoint is missing, unreadable, or does not
// know the last batch's epoch (written by something that did not keep it).
// Entries at or past the log end are dropped: recovery may have cut the
// batches they described, or the leader that recorded one never wrote.
func (l *Log) loadEpochs(segs []*segment, start, end int64) error {
	c, err := readEpochCheckpoint(l.fs, l.dir)
	missing := errors.Is(err, os.ErrNotExist)
	rebuild := err != nil
	if err != nil && !missing {
		l.log.Warn().Err(err).Msg("unreadable leader-epoch-checkpoint; rebuilding from the log")
	}
	if err == nil {
		trimmed := c.truncateFromEnd(end).truncateFromStart(start)
		l.mu.epochsUnsaved = !slices.Equal(trimmed, c)
		c = trimmed
		if last := lastEpochOf(segs); last > c.latestEpoch() {
			l.log.Warn().Int32("checkpoint_epoch", c.latestEpoch()).Int32("log_epoch", last).
				Msg("leader-epoch-checkpoint is behind the log; rebuilding from the log")
			rebuild = true
		}
	}
	if rebuild {
		if c, err = scanEpochs(segs); err != nil {
			return fmt.Errorf("rebuild leader epochs: %w", err)
		}
		l.mu.epochsUnsaved = false
		// An empty log needs no file: partition creation stays free of
		// this fsync.
		if len(c) > 0 || !missing {
			if err := writeEpochCheckpoint(l.fs, l.dir, c); err != nil {
				l.log.Warn().Err(err).Msg("writing the rebuilt leader-epoch-checkpoint failed; the next open rebuilds again")
			}
		}
	}
	l.epochs.Store(&c)
	return nil
}

// lastEpochOf is the leader epoch of the log's last batch, -1 when the log
// is empty or the batch unstamped.
func lastEpochOf(segs []*segment) int32 {
	for i := len(segs) - 1; i >= 0; i-- {
		if segs[i].size > 0 {
			return segs[i].lastEpoch
		}
	}
	return -1
}

// AssignEpoch records that leader epoch epoch writes the log from
// startOffset, which must be the log end offset: a new leader calls it
// before taking writes, so that followers asking OffsetForLeaderEpoch find
// where the previous epoch ended. The record is in memory when it returns,
// and durable before the first batch of the epoch is written (epochPending),
// at SaveEpochs, or at Close.
//
// An epoch at or below the latest cached one is a no-op (a repeated call,
// or a stale one). A startOffset below the latest entry's start, or other
// than the log end (a batch appended since the caller read EndOffset would
// belong to the previous epoch) is ErrOffsetOutOfRange; the leader's first
// Append records the epoch anyway.
func (l *Log) AssignEpoch(epoch int32, startOffset int64) error {
	if epoch < 0 {
		return fmt.Errorf("log %s: assign leader epoch %d: negative epoch", l.dir, epoch)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.writableLocked(); err != nil {
		return err
	}
	c := l.epochCache()
	latest, ok := c.latest()
	if ok && epoch <= latest.epoch {
		return nil
	}
	if ok && startOffset < latest.start {
		return fmt.Errorf("log %s: %w: leader epoch %d at %d is before epoch %d at %d",
			l.dir, ErrOffsetOutOfRange, epoch, startOffset, latest.epoch, latest.start)
	}
	if end := l.end.Load(); startOffset != end {
		return fmt.Errorf("log %s: %w: leader epoch %d must start at the log end %d, not %d",
			l.dir, ErrOffsetOutOfRange, epoch, end, startOffset)
	}
	// Not saved: an entry at the log end covers no batch, and Open drops
	// it after a crash anyway (see the top of this file).
	nc := c.with(epoch, startOffset)
	l.epochs.Store(&nc)
	l.epochPending.Store(true)
	return nil
}

// EpochPending reports whether an entry AssignEpoch recorded is not yet
// in the checkpoint file (SaveEpochs would write it).
func (l *Log) EpochPending() bool { return l.epochPending.Load() }

// SaveEpochs writes the entry AssignEpoch recorded, if the epoch's first
// batch has not already: the broker calls it in the background after a
// leader change, so that the first produce of the epoch seldom waits for
// the two fsyncs. It holds the log's mutex while it writes, so a leader
// change of the same log in that moment (AssignEpoch) waits for it.
// ErrClosed or the log's failure when it cannot write.
func (l *Log) SaveEpochs() error {
	if !l.epochPending.Load() {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.epochPending.Load() {
		return nil
	}
	if err := l.writableLocked(); err != nil {
		return err
	}
	return l.saveEpochsLocked(l.epochCache())
}

// LatestEpoch is the latest leader epoch in the cache, -1 when it is empty.
func (l *Log) LatestEpoch() int32 { return l.epochCache().latestEpoch() }

// EndOffsetForEpoch answers OffsetForLeaderEpoch (KIP-279): foundEpoch is
// the largest cached epoch at or below epoch, and endOffset where it ends:
// the start of the next cached epoch, or the log end offset when it is the
// latest. For an epoch below every cached one, or an empty cache, it
// returns (-1, -1). Safe to call concurrently with the writer: the end
// offset is read before the cache, so the answer never runs past the end.
func (l *Log) EndOffsetForEpoch(epoch int32) (foundEpoch int32, endOffset int64) {
	end := l.end.Load()
	return l.epochCache().endOffsetFor(epoch, end)
}
