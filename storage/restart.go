package storage

import (
	"fmt"
	"slices"
	"time"
)

// RestartFromCopy is KIP-405's follower path on the log's side: a replica
// whose log ends below its leader's local log start (a new replica, a
// wiped disk, a follower far behind) restarts at offset, the end of a
// segment the remote store holds, with the state of the records below it
// that the copy carries instead of the records themselves:
//
//   - epochs, the leader epochs in force over the copied offsets (the
//     remote segment metadata's), kept up to offset so OffsetForLeaderEpoch
//     answers as the leader's log would; entries at or past offset are
//     dropped (the first batch appended there records its own);
//   - snapshot, the producer snapshot taken at offset (the copy's
//     .snapshot object, Fjord's format); nil when the copy has none, which
//     leaves the table empty. Its producers keep deduplicating and its open
//     transactions (txnFirst) keep the last stable offset down after this
//     replica becomes leader.
//
// The log is emptied and restarted at offset as TruncateFullyAndStartAt
// does, with the snapshot written (durably) before any segment goes
// (truncateFullyWithLocked: no crash leaves the new log without it), then
// the epochs. A snapshot that does not decode, or was taken at another
// offset, is refused before anything changes. The log start is offset;
// consumers see the remote log start (the broker's read path), as on the
// leader.
func (l *Log) RestartFromCopy(offset int64, epochs []EpochStart, snapshot []byte) error {
	prods := producers{}
	if snapshot != nil {
		p, end, err := decodeSnapshotAt(snapshot, time.Now().UnixMilli())
		if err != nil {
			return fmt.Errorf("log %s: restart at %d from a copy: %w", l.dir, offset, err)
		}
		if end != offset {
			return fmt.Errorf("log %s: restart at %d from a copy: %w: snapshot taken at %d", l.dir, offset, errBadSnapshot, end)
		}
		prods = p
	}
	var c epochCache
	for _, e := range epochs {
		if e.Epoch < 0 || e.Start < 0 || e.Start >= offset {
			continue
		}
		if n := len(c); n > 0 && (e.Epoch <= c[n-1].epoch || e.Start <= c[n-1].start) {
			return fmt.Errorf("log %s: restart at %d from a copy: leader epoch %d at %d does not follow epoch %d at %d",
				l.dir, offset, e.Epoch, e.Start, c[n-1].epoch, c[n-1].start)
		}
		c = append(c, epochEntry{e.Epoch, e.Start})
	}
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
	if err := l.truncateFullyWithLocked(offset, offset, prods); err != nil {
		return err
	}
	l.mu.producers = prods
	// Last, and not fatal: a checkpoint that lost them (a crash now, a
	// failed write) only forgets epochs below the log start, which Open
	// trims anyway (the first batch fetched records its own).
	if err := l.saveEpochsLocked(slices.Clip(c)); err != nil {
		l.log.Warn().Err(err).Msg("restart from a tiered copy: saving its leader epochs failed")
	}
	l.mu.txns = newTxnState(prods)
	l.publishTxnsLocked()
	l.log.Info().Int64("offset", offset).Int("producers", len(prods)).Int("leader_epochs", len(c)).
		Msg("restarted the log from a tiered copy")
	return nil
}
