package sharefetch

import (
	"fmt"
	"time"

	"github.com/fjordlog/fjord/group"
	"github.com/fjordlog/fjord/group/sharepart"
)

// The expiry loop: one goroutine sleeps until the earliest acquisition
// lock deadline of any loaded share-partition, then ticks every
// share-partition whose deadline has come. Tick's records are written like
// any step's (in step order), but nobody waits for them; the fetches
// parked on a share-partition whose records came back wake. Every step
// also ends the locks due at its now, so the loop only matters when no
// request comes.
//
// Finding the earliest deadline is a scan of the loaded share-partitions
// (each keeps its own as an atomic), done once per wake: wakes come at
// most once per lock duration per share-partition, unless a step lowers
// the alarm. A heap would make a wake cheaper and every step dearer.

// noteDeadline lowers the loop's alarm to dl (a lock deadline a step just
// set) and kicks the loop if it would otherwise sleep past it.
func (m *Manager) noteDeadline(dl int64) {
	if dl < 0 {
		return
	}
	m.wakeMu.Lock()
	kick := m.wakeAt < 0 || dl < m.wakeAt
	if kick {
		m.wakeAt = dl
	}
	m.wakeMu.Unlock()
	if kick {
		select {
		case m.kick <- struct{}{}:
		default:
		}
	}
}

func (m *Manager) expiryLoop() {
	defer close(m.loopDone)
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		// While the scan runs, any new deadline kicks (wakeAt -1): the
		// scan may have passed its share-partition already.
		m.wakeMu.Lock()
		m.wakeAt = -1
		m.wakeMu.Unlock()
		next := m.tickDue(m.now())
		m.wakeMu.Lock()
		if next >= 0 && (m.wakeAt < 0 || next < m.wakeAt) {
			m.wakeAt = next
		}
		at := m.wakeAt
		m.wakeMu.Unlock()

		var alarm <-chan time.Time
		if at >= 0 {
			timer.Reset(time.Duration(max(0, at-m.now())) * time.Millisecond)
			alarm = timer.C
		}
		select {
		case <-m.ctx.Done():
			return
		case <-m.kick:
		case <-alarm:
		}
		// Since Go 1.23 a Reset timer delivers no stale tick: nothing to
		// drain.
	}
}

// tickDue ticks the share-partitions whose earliest lock deadline is at
// or before now and returns the earliest deadline left (-1: none).
func (m *Manager) tickDue(now int64) int64 {
	m.mu.Lock()
	parts := m.partsLocked(nil)
	m.mu.Unlock()
	next := int64(-1)
	for _, sp := range parts {
		dl := sp.deadline.Load()
		if dl >= 0 && dl <= now {
			m.tick(sp, now)
			dl = sp.deadline.Load()
		}
		if dl >= 0 && (next < 0 || dl < next) {
			next = dl
		}
	}
	return next
}

// tick ends sp's locks due at now, after checking this node still leads
// its partition at sp's epoch (a stale leader must not write).
func (m *Manager) tick(sp *sharePartition, now int64) {
	if epoch, leads := sp.rep.LeaderEpoch(); !leads || epoch != sp.leaderEpoch {
		sp.drop(fmt.Errorf("sharefetch: %s: leader epoch %d is gone: %w", sp.key, sp.leaderEpoch, group.ErrNotLeaderOrFollower))
		return
	}
	freed := false
	_, err := sp.step(false, func(p *sharepart.Partition) []sharepart.Record {
		before := p.Counts().Acquired
		recs := p.Tick(now)
		freed = p.Counts().Acquired < before
		return recs
	})
	if err != nil || !freed {
		return
	}
	sp.mu.Lock()
	waiters := sp.waitersLocked()
	retire := sp.mu.retire && sp.idleLocked()
	sp.mu.Unlock()
	signal(waiters)
	if retire {
		m.unload(sp, errUnloaded)
	}
}
