package replica

import (
	"errors"
	"syscall"
	"time"

	"github.com/fjordlog/fjord/storage"
)

// stallReportMin is the shortest running fsync Tick reports to the core:
// below it, a sync is not worth a step.
const stallReportMin = 100 * time.Millisecond

// StorageState is what the disk under a replica is doing, as the console
// and the metrics show it.
type StorageState string

const (
	StorageOK StorageState = ""
	// StorageFull: its last write failed for lack of space (ENOSPC,
	// EDQUOT). Produces get KAFKA_STORAGE_ERROR; the next write that fits
	// clears it.
	StorageFull StorageState = "full"
	// StorageFailed: its log failed (a failed fsync, an EIO) and is being
	// repaired (failure.go); the replica serves nothing meanwhile.
	StorageFailed StorageState = "failed"
	// StorageStalled: an fsync of its log has run longer than
	// fjord.log.flush.stall.max.ms (or a second, when that is off).
	StorageStalled StorageState = "stalled"
)

// isFull reports whether err is a disk out of space or over quota.
func isFull(err error) bool {
	return errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT)
}

// wrote notes the outcome of a write to lg (an append, a follower's
// append, a flush): a write that failed for lack of space marks the
// replica full until one succeeds; a log that failed for good is reported
// to the core (LogFailed), once per log, which moves the partition on and
// repairs the copy.
func (p *Partition) wrote(lg *storage.Log, err error) {
	if err == nil {
		if p.full.Load() {
			p.full.Store(false)
			p.Logger.Info().Msg("disk has room again: writes go through")
		}
		return
	}
	if isFull(err) && !p.full.Swap(true) {
		p.Logger.Warn().Err(err).Msg("disk full: writes to this partition are refused (KAFKA_STORAGE_ERROR) until room returns")
	}
	if lg == nil {
		return
	}
	if errors.Is(err, syscall.EIO) {
		// A disk that answered EIO is not trusted with more of this log,
		// even where the write was undone.
		lg.Fail(err)
	}
	failed := lg.Failed()
	if failed == nil {
		return
	}
	if !p.view.Load().Failed && p.view.Load().Phase.logOpen() {
		p.Logger.Error().Err(failed).Msg("log failed on a disk error: the replica goes offline and is repaired")
	}
	p.Step(LogFailed{Why: err.Error(), SetAside: !isFull(failed)})
}

// StorageState is the replica's disk state now (unix ms).
func (p *Partition) StorageState(now int64) StorageState {
	v := p.view.Load()
	if v.Failed {
		return StorageFailed
	}
	if lg := p.Log(); lg != nil && v.Phase.logOpen() {
		bound := time.Second
		if ms := p.stallMs; ms > 0 {
			bound = time.Duration(ms) * time.Millisecond
		}
		if lg.SyncStalledFor(now) >= bound {
			return StorageStalled
		}
	}
	if p.full.Load() {
		return StorageFull
	}
	return StorageOK
}
