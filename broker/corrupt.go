package broker

import (
	"errors"
	"math"
	"slices"
	"time"

	"github.com/fjordlog/fjord/storage"
)

// Damaged replicas. A read that finds a stored batch failing its CRC (bit
// rot, a sealed segment damaged while the broker was down: startup recovery
// re-checks only the active segment) never hands those bytes out; the
// fetch gets KAFKA_STORAGE_ERROR for the partition. The replica is then
// marked damaged from that offset and repaired the only safe way:
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

// noCorruption is damagedFrom's value while the replica reads clean.
const noCorruption = math.MaxInt64

// resignRetry spaces a damaged leader's requests to resign.
const resignRetry = 5 * time.Second

// noteDamaged records that p's log cannot be trusted from offset on. It
// reports whether this is news (the first damage seen, or an earlier one).
func (p *partition) noteDamaged(offset int64) bool {
	for {
		cur := p.damagedFrom.Load()
		if offset >= cur {
			return false
		}
		if p.damagedFrom.CompareAndSwap(cur, offset) {
			return true
		}
	}
}

// readFailed handles an error from reading p's log for a fetch: a damaged
// log is logged once, marked and, where safe, given up by its leader.
func (b *Broker) readFailed(p *partition, err error) {
	var ce *storage.CorruptLogError
	if !errors.As(err, &ce) {
		return
	}
	st := p.state.Load()
	if p.noteDamaged(ce.Offset) {
		b.metrics.logDamage.Inc()
		p.logger.Error().Err(err).Int64("damaged_from", ce.Offset).Bool("leader", st != nil && st.leader).
			Msg("log is damaged: nothing at or past this offset will be served; the replica gives up leading it and re-fetches it from another replica")
		if st != nil && !st.leader && slices.Contains(st.isr, p.me) {
			p.logger.Warn().Msg("damaged follower stops fetching until its leader drops it from the ISR; then it truncates at the damage and fetches again")
		}
	}
	if st == nil || !st.leader {
		return
	}
	// A leader asks to resign again while reads keep meeting the damage,
	// at most every resignRetry: a request may fail (no controller), or
	// another ISR member may have come back since.
	now := time.Now().UnixNano()
	if last := p.lastResign.Load(); now-last < int64(resignRetry) || !p.lastResign.CompareAndSwap(last, now) {
		return
	}
	img := b.image()
	ip, ok := img.Partition(p.topicID, p.index)
	if !ok || ip.Leader != b.cfg.NodeID || ip.LeaderEpoch != st.leaderEpoch {
		return
	}
	other := slices.ContainsFunc(ip.ISR, func(id int32) bool {
		bs, ok := img.Broker(id)
		return id != b.cfg.NodeID && ok && !bs.Fenced
	})
	if !other {
		p.logger.Error().Ints32("isr", ip.ISR).
			Msg("damaged log has no other live in-sync replica to take over; keeping the leadership, serving only what precedes the damage")
		return
	}
	b.resignIfLeader(img, p.topicID, p.index, "its log is damaged")
}

// repairDamaged truncates a damaged follower's log to the damage once
// this broker is out of the ISR, so the fetcher copies the rest again. It
// reports whether p may be fetched now: not while damaged and in the ISR.
func (b *Broker) repairDamaged(p *partition) bool {
	st := p.state.Load()
	if st == nil {
		return false
	}
	if time.Now().UnixNano() < p.fetchPausedUntil.Load() {
		return false
	}
	from := p.damagedFrom.Load()
	if from == noCorruption {
		return true
	}
	if slices.Contains(st.isr, p.me) {
		return false // not fetching gets it out of the ISR; repair then
	}
	if err := p.truncateTo(from); err != nil {
		p.logger.Error().Err(err).Int64("damaged_from", from).Msg("truncating a damaged log; retrying")
		return false
	}
	p.damagedFrom.CompareAndSwap(from, noCorruption)
	p.needTruncate.Store(true)
	b.metrics.logRepairs.Inc()
	p.logger.Warn().Int64("log_end", p.log.EndOffset()).Msg("damaged log truncated; fetching the rest again from the leader")
	return true
}

// leaderDamaged is a follower's answer to KAFKA_STORAGE_ERROR from its
// leader: the leader's copy is damaged and it is handing the partition on.
// The partition's fetches pause briefly rather than ask again at once.
func (p *partition) leaderDamaged() {
	p.fetchPausedUntil.Store(time.Now().Add(time.Second).UnixNano())
}
