package replica

import (
	"errors"

	"github.com/fjordlog/fjord/storage"
)

// Damaged replicas. A read that finds a stored batch failing its CRC (bit
// rot, a sealed segment damaged while the broker was down: startup recovery
// re-checks only the active segment) never hands those bytes out; the
// fetch gets KAFKA_STORAGE_ERROR for the partition. The core is told
// (DamageFound) and repairs the replica the only safe way:
//
//   - as leader, it resigns (AlterPartition leaving itself out of the ISR)
//     when another live ISR member can take over; as the sole live ISR
//     member it keeps the leadership but serves nothing at or past the
//     damage (refusing, not losing or inventing, records);
//   - as a follower outside the ISR, its fetcher truncates the log to the
//     damage and fetches the rest again from the leader, rejoining the ISR
//     once caught up like any lagging follower. A follower still in the ISR
//     stops fetching (phase Damaged), so that its leader drops it from the
//     ISR after replica.lag.time.max.ms, and is repaired then: cutting
//     committed records from an ISR member could make it an electable
//     leader without them, and an ISR member that lacks a committed batch
//     overstates how many copies of it exist.

// ReadFailed takes an error from reading the log for a fetch: a damaged
// log is reported to the core, which logs and decides (see above). It
// reports whether the damage is news.
func (p *Partition) ReadFailed(err error) bool {
	var ce *storage.CorruptLogError
	if !errors.As(err, &ce) {
		return false
	}
	before := p.view.Load().DamagedFrom
	p.Step(DamageFound{Offset: ce.Offset})
	if p.view.Load().DamagedFrom < before {
		p.Logger.Error().Err(err).Msg("log is damaged")
		return true
	}
	return false
}
