package broker

import (
	"errors"

	"github.com/fjordlog/fjord/broker/replica"
	"github.com/fjordlog/fjord/storage"
)

// Damaged replicas. A read that finds a stored batch failing its CRC (bit
// rot, a sealed segment damaged while the broker was down: startup recovery
// re-checks only the active segment) never hands those bytes out; the
// fetch gets KAFKA_STORAGE_ERROR for the partition. The replica's core is
// told (DamageFound) and repairs it the only safe way (see replica.Core):
//
//   - as leader, it resigns (AlterPartition leaving itself out of the ISR)
//     when another live ISR member can take over; as the sole live ISR
//     member it keeps the leadership but serves nothing at or past the
//     damage (refusing, not losing or inventing, records);
//   - as a follower outside the ISR, its fetcher truncates the log to the
//     damage and fetches the rest again from the leader, rejoining the ISR
//     once caught up like any lagging follower. A follower still in the ISR
//     stops fetching, so that its leader drops it from the ISR after
//     replica.lag.time.max.ms, and is repaired then: cutting committed
//     records from an ISR member could make it an electable leader without
//     them, and an ISR member that lacks a committed batch overstates how
//     many copies of it exist.

// readFailed handles an error from reading p's log for a fetch: a damaged
// log is reported to the core, which logs it once and decides.
func (b *Broker) readFailed(p *partition, err error) {
	var ce *storage.CorruptLogError
	if !errors.As(err, &ce) {
		return
	}
	before := p.view.Load().DamagedFrom
	p.step(replica.DamageFound{Offset: ce.Offset})
	if p.view.Load().DamagedFrom < before {
		b.metrics.logDamage.Inc()
		p.logger.Error().Err(err).Msg("log is damaged")
	}
}

// repairDamaged truncates a damaged follower's log to the damage once the
// core asks (it is out of the ISR), so the fetcher copies the rest again.
// Run by the fetcher, the follower log's one writer.
func (b *Broker) repairDamaged(p *partition, lg *storage.Log, v *replica.View) {
	to := p.repairTo.Load()
	if to < 0 {
		return
	}
	if err := p.truncateTo(lg, v.Leader, v.LeaderEpoch, to, true); err != nil {
		p.logger.Error().Err(err).Int64("damaged_from", to).Msg("truncating a damaged log; retrying")
		return
	}
	p.repairTo.CompareAndSwap(to, -1)
	b.metrics.logRepairs.Inc()
}
