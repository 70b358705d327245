package replica

import (
	"fmt"
	"slices"
)

// Sick disks: a log that failed, and a leader whose fsync stalls.
//
// A failed log (LogFailed: an fsync failed, after which the page cache
// cannot be trusted, or a write could not be undone) takes no appends;
// without more, its replica would lead on refusing every write
// (KAFKA_STORAGE_ERROR), or follow without catching up, until a restart.
// The core moves the partition on and repairs the copy instead:
//
//   - a leader resigns (AlterPartition leaving itself out of the ISR) when
//     another live ISR member can take over, as for a damaged log;
//   - a follower stops fetching (phase Offline: clients get
//     KAFKA_STORAGE_ERROR) and, once out of the ISR, is repaired: the host
//     closes the log, sets its directory aside for the operator when the
//     disk failed (EIO: Repair.SetAside), and opens it again, empty then,
//     so the follower fetches the partition afresh from the leader and
//     rejoins the ISR like any replica that caught up. A follower still in
//     the ISR waits for its leader to drop it (replica.lag.time.max.ms): an
//     emptied ISR member could be elected without the committed records;
//   - the only live in-sync copy (no one to resign to) is reopened where
//     it is, never set aside: recovery keeps what is whole and cuts a torn
//     tail, and the replica leads again once it opens;
//   - a repair whose open fails (the disk still full) is retried with the
//     open backoff, spaced at most Open.Max apart, with no bound on their
//     number: space coming back must bring the partition back without a
//     restart. Repairs in a row (the repaired log failing again before the
//     replica rejoined the ISR: the disk is still bad) are spaced by the
//     same backoff, so a dead disk costs a set-aside copy per Open.Max at
//     most, not a loop.
//
// A stalled fsync (FlushStalled, the driver's report that one has run for
// ForMs) is a gray failure: the disk answers nothing, so acks=all
// producers wait on a leader that appends but never commits. A leader
// whose fsync has run FlushStallMs resigns like a damaged one, and takes
// the leadership back only by a later election (its in-sync followers
// keep the committed records; what it appended and never fsynced was never
// acknowledged, since the high watermark counts durable ends). A follower
// with a stalled disk needs nothing here: its fetch offset is its durable
// end, which stops moving, so its leader drops it from the ISR after
// replica.lag.time.max.ms.

func (c *Core) logFailed(now int64, e LogFailed, rd *Ready) {
	if !c.phase.logOpen() || c.failedWhy != "" {
		return
	}
	c.failedWhy, c.setAside = e.Why, e.SetAside
	rd.ViewChanged = true
	rd.note("log failed, takes no more writes: %s", e.Why)
	c.failedRole(now, rd)
}

// failedRole is what a replica with a failed, open log does in its role.
func (c *Core) failedRole(now int64, rd *Ready) {
	if c.asg.Leader == c.cfg.ID && c.assigned {
		if c.phase != Leading && c.phase != Resigning {
			c.phase = Leading
			c.followers = map[int32]*follower{}
			c.leaderSince, c.epochStart = now, c.logEnd
		}
		if c.otherLiveISR() {
			c.wantResign(now, "its log failed", rd)
			return
		}
		rd.note("the only live in-sync copy: reopening it in place")
		c.repair(now, false, rd)
		return
	}
	c.followers = nil
	c.phase = Offline
	if slices.Contains(c.asg.ISR, c.cfg.ID) {
		rd.note("failed follower stops fetching until its leader drops it from the ISR")
	}
	c.maybeRepair(now, rd)
}

// maybeRepair repairs a failed follower's log once it is out of the ISR
// (or, elected meanwhile, as the only live in-sync copy, in place).
func (c *Core) maybeRepair(now int64, rd *Ready) {
	inISR := slices.Contains(c.asg.ISR, c.cfg.ID)
	switch {
	case c.asg.Leader == c.cfg.ID && !c.otherLiveISR():
		c.repair(now, false, rd)
	case !inISR && now < c.repairNext:
		// Due at repairNext; Tick starts it.
	case !inISR:
		c.repair(now, c.setAside, rd)
	case c.asg.Leader == c.cfg.ID:
		c.maybeResignUnserved(now, rd)
	}
}

// repair asks the host to bring the failed log back (Ready.Repair).
func (c *Core) repair(now int64, setAside bool, rd *Ready) {
	if setAside {
		rd.note("repairing: setting the failed copy aside and fetching the partition again")
	} else {
		rd.note("repairing: reopening the failed log in place")
	}
	c.failedWhy, c.setAside = "", false
	c.repairing = true
	c.repairsInRow++
	c.repairNext = now + retryIn(c.cfg.Open, c.repairsInRow)
	c.openFails = 0
	c.proposal = nil
	c.followers = nil
	c.phase = Opening
	c.opening, c.openSince, c.openOverrun = true, now, false
	rd.Repair = &Repair{SetAside: setAside}
	rd.ViewChanged = true
}

func (c *Core) flushStalled(now int64, e FlushStalled, rd *Ready) {
	if c.phase != Leading || c.cfg.FlushStallMs <= 0 || e.ForMs < c.cfg.FlushStallMs {
		return
	}
	c.wantResign(now, fmt.Sprintf("its disk stalled: an fsync has run over %d ms", c.cfg.FlushStallMs), rd)
}
