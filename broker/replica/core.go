package replica

import (
	"fmt"
	"slices"
)

// follower is the leader's view of one follower.
//
// Invariants: durable <= leo as the last fetch reported them (a fetch
// reports at most its own offset as durable); durable is what counts for
// the high watermark and for joining the ISR, leo only for whether the
// follower keeps up (lastCaughtUp).
type follower struct {
	leo int64 // its fetch offset: its log end, fsynced or not
	// durable is its durable end as its last fetch reported it: the
	// DurableEndTag when the fetch carries one (a pipelining follower
	// fetches before its fsync ends), else the fetch offset (a follower
	// that fsyncs before it fetches again: older Fjord nodes, Kafka's
	// rule). Negative: unknown (a damaged tag), which counts for nothing.
	durable       int64
	logStart      int64 // its log start offset as its last fetch reported it; -1 unknown
	lastFetch     int64
	lastCaughtUp  int64
	lastLeaderEnd int64 // the leader's log end at lastFetch
	fetched       bool
}

// Core is one replica's replication state. Not safe for concurrent use:
// its owner runs one Step or Tick at a time.
//
// Invariants:
//   - hw <= logEnd while the log is open; on a leader hw only grows within
//     one leader epoch.
//   - A leader's hw is at most the durable (or appended, !SyncOnAck) end
//     of every ISR member it counts, this leader's own included, and of a
//     member joining it. A follower's durable end is what its fetch
//     reports as durable (follower.durable), never its fetch offset alone
//     when the two differ: followers fetch again before their fsync ends,
//     and this leader serves them past its own durable end (up to its log
//     end), so a record may be on every ISR member's page cache well
//     before it counts.
//   - A replica becomes leader with whatever tail it appended as a
//     follower, fsynced or not; the tail counts toward hw only once a
//     Flushed says it is durable here.
//   - At most one proposal (ISR change or resignation) is in flight.
//   - phase.logOpen() implies the log is open; Deleting and Deleted never
//     go back.
//   - failedWhy != "" only while the log is open and cannot be appended
//     to; a failed replica never counts as caught up (it stops fetching).
type Core struct {
	cfg   Config
	phase Phase
	asg   Assignment
	// assigned: asg came from an image (else only Unassign may come).
	assigned     bool
	topicDeleted bool

	logStart, logEnd, durable int64
	hw                        int64
	damagedFrom               int64

	// Opening.
	opening     bool  // an open is running
	openSince   int64 // when it began
	openFails   int   // failed opens in a row
	openNext    int64 // when the next open is due
	openOverrun bool  // the running open passed OpenTimeoutMs (noted once)

	// Leading.
	followers   map[int32]*follower
	leaderSince int64
	epochStart  int64 // the log end when this leader epoch began here

	// Proposals.
	proposal   *Proposal // in flight
	proposedAt int64
	alterFails int
	alterNext  int64 // no proposal before this
	// resignWhy is why this leader wants to give the leadership away ("":
	// it does not). Kept while the resignation is refused, to retry.
	resignWhy string

	// Failed logs (failure.go). failedWhy is why the open log takes no
	// appends ("": it does); setAside, whether its repair sets the copy
	// aside. repairing: a repair's open is running or being retried (its
	// retries are not bounded in number, only spaced).
	failedWhy string
	setAside  bool
	repairing bool
	// repairsInRow counts repairs since this replica was last in the ISR
	// with a sound log; the next is not due before repairNext.
	repairsInRow int
	repairNext   int64

	pausedUntil int64 // a follower's fetching paused until then
}

// New returns the core of a replica whose log is about to be opened.
func New(cfg Config) *Core {
	return &Core{cfg: cfg, phase: Opening, damagedFrom: NoDamage, asg: Assignment{Leader: -1}}
}

// Phase is the current phase.
func (c *Core) Phase() Phase { return c.phase }

// HW is the high watermark.
func (c *Core) HW() int64 { return c.hw }

// PausedUntil is when a follower paused by LeaderDamaged may fetch again.
func (c *Core) PausedUntil() int64 { return c.pausedUntil }

// View returns the state request handlers see.
func (c *Core) View() *View {
	return &View{Phase: c.phase, Leader: c.asg.Leader, LeaderEpoch: c.asg.LeaderEpoch,
		PartitionEpoch: c.asg.PartitionEpoch, Replicas: c.asg.Replicas, ISR: c.asg.ISR, Removing: c.asg.Removing,
		InISR: slices.Contains(c.asg.ISR, c.cfg.ID), DamagedFrom: c.damagedFrom, TopicDeleted: c.topicDeleted,
		Failed: c.failedWhy != "" || c.repairing, EpochStart: c.epochStart}
}

// Step applies one event at time now (ms).
func (c *Core) Step(now int64, ev any) Ready {
	rd := Ready{StartEpoch: -1, TruncateTo: -1}
	before := c.phase
	switch e := ev.(type) {
	case Assign:
		c.assign(now, e.Assignment, &rd)
	case Unassign:
		c.unassign(e.TopicDeleted, &rd)
	case OpenDone:
		c.openDone(now, e, &rd)
	case Appended:
		if c.phase.logOpen() {
			c.logEnd = e.End
			if !c.cfg.SyncOnAck {
				c.durable = e.End
			}
			rd.WakeAppend = true
			c.maybeAdvanceHW(&rd)
		}
	case Flushed:
		if c.phase.logOpen() {
			c.durable = min(e.Durable, c.logEnd)
			c.maybeAdvanceHW(&rd)
		}
	case Reconfigured:
		// Records appended while relaxed already count as durable (they
		// were acknowledged on append); from now on, strict counts only
		// fsynced ones, and relaxed counts every appended one.
		c.cfg.SyncOnAck = e.SyncOnAck
		if !e.SyncOnAck && c.phase.logOpen() {
			c.durable = c.logEnd
			c.maybeAdvanceHW(&rd)
		}
	case FollowerFetched:
		c.followerFetched(now, e, &rd)
	case StartMoved:
		// DeleteRecords on a leader, or a follower following its leader's
		// start. Waiters look again: a leader's DeleteRecords, replica
		// fetches parked on the log end (they carry the new start).
		if c.phase.logOpen() && e.Start > c.logStart {
			c.logStart = e.Start
			rd.WakeLow, rd.WakeAppend = true, true
		}
	case LeaderHW:
		if c.phase == Following || c.phase == Reconciling {
			c.setHW(max(min(e.HW, c.logEnd), 0), &rd)
		}
	case Truncated:
		c.truncated(e, &rd)
	case Reconciled:
		// Only for the epoch asked: a newer leader needs its own check.
		if c.phase == Reconciling && e.LeaderEpoch == c.asg.LeaderEpoch {
			c.phase = Following
		}
	case Diverged:
		if c.phase == Following && e.LeaderEpoch == c.asg.LeaderEpoch {
			c.phase = Reconciling
		}
	case DamageFound:
		c.damaged(now, e.Offset, &rd)
	case LogFailed:
		c.logFailed(now, e, &rd)
	case FlushStalled:
		c.flushStalled(now, e, &rd)
	case LeaderDamaged:
		c.pausedUntil = now + 1000
	case AlterAnswered:
		c.alterAnswered(now, e, &rd)
	case LogDeleted:
		if c.phase == Deleting {
			c.phase = Deleted
		}
	default:
		panic(fmt.Sprintf("replica: unknown event %T", ev))
	}
	c.finish(before, &rd)
	return rd
}

// Tick applies the passage of time: retries and timeouts fire here.
func (c *Core) Tick(now int64) Ready {
	rd := Ready{StartEpoch: -1, TruncateTo: -1}
	before := c.phase
	if c.proposal != nil && now-c.proposedAt >= c.cfg.AlterTimeoutMs {
		c.alterAnswered(now, AlterAnswered{Proposal: *c.proposal, Code: -1}, &rd)
	}
	switch c.phase {
	case Opening, Offline:
		if c.opening && !c.openOverrun && now-c.openSince >= c.cfg.OpenTimeoutMs {
			c.openOverrun = true
			rd.note("log did not open within %d ms; it stays offline here until it does", c.cfg.OpenTimeoutMs)
		}
		if c.phase == Offline && c.failedWhy != "" && now >= c.repairNext && !slices.Contains(c.asg.ISR, c.cfg.ID) {
			c.repair(now, c.setAside, &rd)
		}
		if !c.opening && c.phase == Offline && c.failedWhy == "" && c.openRetriesLeft() && now >= c.openNext {
			// A retry keeps the phase (and clients' KAFKA_STORAGE_ERROR):
			// only its outcome is news.
			c.opening, c.openSince, c.openOverrun = true, now, false
			rd.Open = true
		}
		c.maybeResignUnserved(now, &rd)
	case Leading:
		c.maybeChangeISR(now, &rd)
	case Resigning:
		c.maybeResign(now, &rd)
	}
	c.finish(before, &rd)
	return rd
}

func (c *Core) finish(before Phase, rd *Ready) {
	if c.phase != before {
		rd.ViewChanged = true
		rd.WakeHW, rd.WakeAppend = true, true
		rd.note("%s -> %s", before, c.phase)
	}
}

// Start begins the replica's life: it asks for its log to be opened.
func (c *Core) Start(now int64) Ready {
	rd := Ready{StartEpoch: -1, TruncateTo: -1}
	c.startOpen(now, &rd)
	return rd
}

func (c *Core) startOpen(now int64, rd *Ready) {
	c.phase = Opening
	c.opening, c.openSince, c.openOverrun = true, now, false
	rd.Open = true
}

func (c *Core) openRetriesLeft() bool {
	return c.repairing || c.cfg.OpenAttempts == 0 || c.openFails < c.cfg.OpenAttempts
}

func (c *Core) openDone(now int64, e OpenDone, rd *Ready) {
	if !c.opening {
		return
	}
	c.opening = false
	if c.phase == Deleting {
		if e.Err == nil {
			rd.Delete = true // the log opened after all: remove it now
		} else {
			c.phase = Deleted
		}
		return
	}
	if e.Err != nil {
		c.openFails++
		c.phase = Offline
		switch {
		case c.repairing:
			if c.openFails == 1 {
				rd.note("repair failed; retrying with backoff (at most every %d ms) until it opens: %v", c.cfg.Open.Max.Milliseconds(), e.Err)
			}
		case !c.openRetriesLeft():
			rd.note("open failed %d times in a row; giving up until restart: %v", c.openFails, e.Err)
		case c.openFails == 1:
			rd.note("open failed; retrying with backoff (%d tries at most): %v", c.cfg.OpenAttempts, e.Err)
		}
		if c.openRetriesLeft() {
			c.openNext = now + retryIn(c.cfg.Open, c.openFails)
		}
		c.maybeResignUnserved(now, rd)
		return
	}
	if c.openOverrun {
		rd.note("log opened after overrunning the open timeout; adopted")
	}
	c.openFails = 0
	if c.repairing {
		rd.note("repaired: log open again at offsets [%d, %d)", e.Start, e.End)
		c.repairing = false
	}
	c.logStart, c.logEnd, c.durable = e.Start, e.End, e.Durable
	// The high watermark is not on disk: start from the log start and let
	// a leader's ISR move it. Starting at the log end could show consumers
	// records a failover is about to drop.
	c.hw = e.Start
	rd.HWMoved, rd.HW = true, c.hw
	c.phase = Reconciling // a placeholder until becomeRole picks the role
	c.resignWhy = ""
	if c.assigned {
		c.becomeRole(now, rd)
	}
}

func (c *Core) assign(now int64, a Assignment, rd *Ready) {
	if c.phase == Deleting || c.phase == Deleted {
		return
	}
	prev, had := c.asg, c.assigned
	c.asg, c.assigned = a, true
	roleChanged := !had || (prev.Leader == c.cfg.ID) != (a.Leader == c.cfg.ID) || prev.LeaderEpoch != a.LeaderEpoch
	if prev.PartitionEpoch != a.PartitionEpoch || roleChanged {
		rd.ViewChanged = true
		if c.proposal != nil {
			// The image answers an in-flight proposal, one way or the
			// other, with a new partition epoch.
			c.proposal = nil
			c.alterFails = 0
		}
	}
	switch {
	case c.failedWhy != "" && c.phase == Offline:
		c.maybeRepair(now, rd)
		return
	case !c.phase.logOpen():
		c.maybeResignUnserved(now, rd)
		return
	case roleChanged:
		c.becomeRole(now, rd)
		return
	}
	if c.repairsInRow > 0 && c.failedWhy == "" && slices.Contains(a.ISR, c.cfg.ID) {
		c.repairsInRow = 0 // repaired and back in the ISR
	}
	switch c.phase {
	case Leading, Resigning:
		c.maybeAdvanceHW(rd)
		if c.phase == Leading && c.damagedFrom != NoDamage {
			c.wantResign(now, "its log is damaged", rd)
		}
	case Damaged:
		if !slices.Contains(a.ISR, c.cfg.ID) {
			rd.TruncateTo = c.damagedFrom
		}
	}
}

// becomeRole takes the role asg gives this broker, with an open log.
func (c *Core) becomeRole(now int64, rd *Ready) {
	rd.ViewChanged = true
	c.proposal = nil
	c.alterFails, c.alterNext = 0, 0
	c.resignWhy = ""
	if c.failedWhy != "" {
		c.failedRole(now, rd)
		return
	}
	if c.asg.Leader == c.cfg.ID {
		c.phase = Leading
		c.followers = map[int32]*follower{}
		c.leaderSince, c.epochStart = now, c.logEnd
		rd.StartEpoch, rd.StartOffset = c.asg.LeaderEpoch, c.logEnd
		rd.note("leading at epoch %d from offset %d, isr %v", c.asg.LeaderEpoch, c.logEnd, c.asg.ISR)
		if c.damagedFrom != NoDamage {
			c.wantResign(now, "its log is damaged", rd)
		}
		c.maybeAdvanceHW(rd)
		return
	}
	c.followers = nil
	switch {
	case c.damagedFrom != NoDamage && slices.Contains(c.asg.ISR, c.cfg.ID):
		c.phase = Damaged
	case c.damagedFrom != NoDamage:
		c.phase = Damaged
		rd.TruncateTo = c.damagedFrom
	default:
		c.phase = Reconciling
	}
	rd.note("following %d at epoch %d", c.asg.Leader, c.asg.LeaderEpoch)
}

func (c *Core) unassign(topicDeleted bool, rd *Ready) {
	if c.phase == Deleting || c.phase == Deleted {
		return
	}
	c.topicDeleted = topicDeleted
	c.proposal = nil
	switch {
	case c.opening:
		c.phase = Deleting // the running open's answer finishes it
	case c.phase == Offline && c.failedWhy != "":
		c.failedWhy = ""
		c.phase = Deleting // a failed follower's log is still open
		rd.Delete = true
	case c.phase == Opening || c.phase == Offline:
		c.phase = Deleted // no log to remove
	default:
		c.phase = Deleting
		rd.Delete = true
	}
}

func (c *Core) truncated(e Truncated, rd *Ready) {
	if !c.phase.logOpen() {
		return
	}
	c.logStart, c.logEnd = min(e.Start, e.End), e.End
	c.durable = min(c.durable, e.End)
	if e.Start == e.End && c.durable < e.Start {
		c.durable = e.End // restarted empty at End: nothing below it to lose
	}
	if c.hw > e.End || c.hw < c.logStart {
		c.setHW(min(max(c.hw, c.logStart), e.End), rd)
	}
	if e.Repaired && c.phase == Damaged {
		c.damagedFrom = NoDamage
		c.phase = Reconciling
		rd.note("damaged log truncated at %d; fetching the rest again", e.End)
	}
}

func (c *Core) damaged(now, offset int64, rd *Ready) {
	if !c.phase.logOpen() || offset >= c.damagedFrom {
		return
	}
	c.damagedFrom = offset
	rd.ViewChanged = true
	rd.note("log damaged from offset %d: nothing at or past it is served", offset)
	switch c.phase {
	case Leading:
		c.wantResign(now, "its log is damaged", rd)
	case Reconciling, Following:
		c.phase = Damaged
		if !slices.Contains(c.asg.ISR, c.cfg.ID) {
			rd.TruncateTo = offset
		} else {
			rd.note("damaged follower stops fetching until its leader drops it from the ISR")
		}
	}
}

// wantResign makes a leader give its leadership away, if another live ISR
// member can take it; else it keeps leading (serving what precedes the
// damage: refusing, not losing, records).
func (c *Core) wantResign(now int64, why string, rd *Ready) {
	if !c.otherLiveISR() {
		if c.resignWhy != why {
			rd.note("%s, but no other live in-sync replica can take over: keeping the leadership", why)
		}
		c.resignWhy = why
		return
	}
	c.resignWhy = why
	c.phase = Resigning
	c.maybeResign(now, rd)
}

func (c *Core) otherLiveISR() bool {
	return slices.ContainsFunc(c.asg.ISR, func(id int32) bool {
		return id != c.cfg.ID && slices.Contains(c.asg.Live, id)
	})
}

// maybeResign sends a Resigning leader's resignation, spaced by backoff.
func (c *Core) maybeResign(now int64, rd *Ready) {
	if c.proposal != nil || now < c.alterNext {
		return
	}
	c.propose(now, Proposal{LeaderEpoch: c.asg.LeaderEpoch, PartitionEpoch: c.asg.PartitionEpoch,
		ISR: without(c.asg.ISR, c.cfg.ID), Resign: true, Why: c.resignWhy}, rd)
}

// maybeResignUnserved resigns a leadership placed here while the log is
// not open — once the open overran its timeout or failed — to another live
// ISR member. With none, it keeps the leadership (clients get
// KAFKA_STORAGE_ERROR and retry) and leads once a later try opens the log:
// resigning then would leave the partition leaderless for good.
func (c *Core) maybeResignUnserved(now int64, rd *Ready) {
	unserved := c.phase == Offline || (c.opening && c.openOverrun)
	if !c.assigned || c.asg.Leader != c.cfg.ID || !unserved || !c.otherLiveISR() {
		return
	}
	if c.proposal != nil || now < c.alterNext {
		return
	}
	c.propose(now, Proposal{LeaderEpoch: c.asg.LeaderEpoch, PartitionEpoch: c.asg.PartitionEpoch,
		ISR: without(c.asg.ISR, c.cfg.ID), Resign: true, Why: "its log cannot open"}, rd)
}

func (c *Core) propose(now int64, p Proposal, rd *Ready) {
	c.proposal, c.proposedAt = &p, now
	rd.Propose = &p
	if c.alterFails > 0 {
		return // a retry: its first try and its refusals were noted
	}
	if p.Resign {
		rd.note("resigning the leadership at epoch %d: %s", p.LeaderEpoch, p.Why)
	} else {
		rd.note("proposing isr %v (was %v)", p.ISR, c.asg.ISR)
	}
}

func (c *Core) alterAnswered(now int64, e AlterAnswered, rd *Ready) {
	if c.proposal == nil || !sameProposal(*c.proposal, e.Proposal) {
		return // an answer to a proposal the image already settled
	}
	if e.Code == 0 {
		return // accepted: the image will show it
	}
	c.proposal = nil
	c.alterFails++
	if c.cfg.AlterAttempts > 0 && c.alterFails >= c.cfg.AlterAttempts {
		// Past the bound, keep the longest spacing rather than stop: an
		// ISR that cannot shrink holds acks=all back until it does.
		c.alterNext = now + c.cfg.Alter.Max.Milliseconds()
	} else {
		c.alterNext = now + retryIn(c.cfg.Alter, c.alterFails)
	}
	if c.alterFails == 1 || c.alterFails == c.cfg.AlterAttempts {
		rd.note("AlterPartition not accepted (code %d, %d in a row); next try in %d ms", e.Code, c.alterFails, c.alterNext-now)
	}
	if e.Proposal.Resign && c.phase == Resigning && !c.otherLiveISR() {
		c.phase = Leading // nobody to hand over to: keep serving
		if c.failedWhy != "" {
			c.repair(now, false, rd) // the only copy: reopen it where it is
		}
	}
}

func sameProposal(a, b Proposal) bool {
	return a.LeaderEpoch == b.LeaderEpoch && a.PartitionEpoch == b.PartitionEpoch && a.Resign == b.Resign && slices.Equal(a.ISR, b.ISR)
}

func (c *Core) followerFetched(now int64, e FollowerFetched, rd *Ready) {
	id, offset := e.ID, e.Offset
	if (c.phase != Leading && c.phase != Resigning) || id == c.cfg.ID || !slices.Contains(c.asg.Replicas, id) ||
		e.LeaderEpoch != c.asg.LeaderEpoch {
		return
	}
	f := c.followers[id]
	if f == nil {
		f = &follower{lastCaughtUp: now, logStart: -1}
		c.followers[id] = f
	}
	if e.LogStart >= 0 && e.LogStart != f.logStart {
		f.logStart = e.LogStart
		rd.WakeLow = true // a DeleteRecords may be waiting for it
	}
	// Caught up: asking for the leader's log end, or for at least what the
	// leader's end was at its previous fetch (Kafka's rule, so a steady
	// stream of appends does not make a keeping-up follower look behind).
	if offset >= c.logEnd {
		f.lastCaughtUp = now
	} else if f.fetched && offset >= f.lastLeaderEnd {
		f.lastCaughtUp = f.lastFetch
	}
	f.leo, f.durable, f.lastFetch, f.lastLeaderEnd, f.fetched = offset, min(e.Durable, offset), now, c.logEnd, true
	c.maybeAdvanceHW(rd)
}

// LowWatermark is a leader's low watermark (Kafka's lowWatermarkIfLeader):
// the smallest log start offset among its own and those of the replicas
// the image shows live, as their fetches last reported them (-1 for one
// that has not fetched since this broker began leading). DeleteRecords
// answers once it reaches the requested offset. ok is false when this
// replica does not lead.
//
// Kafka's rule counts every live replica, in the ISR or not: a lagging
// follower still fetches, learns the leader's start from the response and
// follows it, so a DeleteRecords answered with success means every replica
// that is up has dropped the records. A replica that is down (fenced) does
// not hold it: it learns the start when it returns.
func (c *Core) LowWatermark() (int64, bool) {
	if c.phase != Leading && c.phase != Resigning {
		return -1, false
	}
	lw := c.logStart
	for _, id := range c.asg.Replicas {
		if id == c.cfg.ID || !slices.Contains(c.asg.Live, id) {
			continue
		}
		f := c.followers[id]
		if f == nil {
			return -1, true
		}
		lw = min(lw, f.logStart)
	}
	return lw, true
}

// localEnd is this replica's end as the high watermark counts it.
func (c *Core) localEnd() int64 {
	if c.cfg.SyncOnAck {
		return c.durable
	}
	return c.logEnd
}

// maybeAdvanceHW recomputes a leader's high watermark: the minimum durable
// end over the ISR, this leader's own included, counting a member whose
// expansion is in flight (KIP-497's maximal ISR). A member that has not
// fetched since this broker began leading holds it where it is.
func (c *Core) maybeAdvanceHW(rd *Ready) {
	if c.phase != Leading && c.phase != Resigning {
		return
	}
	next := c.localEnd()
	count := func(id int32) {
		if id == c.cfg.ID {
			return
		}
		if f := c.followers[id]; f != nil {
			next = min(next, f.durable)
		} else {
			next = min(next, c.hw)
		}
	}
	for _, id := range c.asg.ISR {
		count(id)
	}
	if c.proposal != nil && !c.proposal.Resign {
		for _, id := range c.proposal.ISR {
			if !slices.Contains(c.asg.ISR, id) {
				count(id)
			}
		}
	}
	if next > c.hw {
		c.setHW(next, rd)
	}
}

func (c *Core) setHW(hw int64, rd *Ready) {
	if hw == c.hw {
		return
	}
	c.hw = hw
	rd.HWMoved, rd.HW, rd.WakeHW = true, hw, true
}

// maybeChangeISR proposes the ISR this leader should have now, if it
// differs: members not caught up within LagMs leave, replicas whose
// durable end reaches the high watermark and this epoch's start join (a
// member must hold everything acknowledged on disk, not only in its page
// cache, from the moment it counts).
func (c *Core) maybeChangeISR(now int64, rd *Ready) {
	if c.proposal != nil || now < c.alterNext {
		return
	}
	next := make([]int32, 0, len(c.asg.Replicas))
	for _, id := range c.asg.ISR {
		if id == c.cfg.ID {
			next = append(next, id)
			continue
		}
		caught := c.leaderSince
		if f := c.followers[id]; f != nil && f.lastCaughtUp > caught {
			caught = f.lastCaughtUp
		}
		if now-caught <= c.cfg.LagMs {
			next = append(next, id)
		}
	}
	for _, id := range c.asg.Replicas {
		// A fenced broker never joins (KIP-841): the controller would
		// refuse the whole proposal, and keep refusing it while the
		// broker's last fetches still count as recent, holding back every
		// other expansion (a partition move's new replica among them).
		if slices.Contains(c.asg.ISR, id) || !slices.Contains(c.asg.Live, id) {
			continue
		}
		f := c.followers[id]
		if f != nil && f.fetched && f.durable >= c.hw && f.durable >= c.epochStart && now-f.lastFetch <= c.cfg.LagMs {
			next = append(next, id)
		}
	}
	if sameMembers(next, c.asg.ISR) {
		return
	}
	c.propose(now, Proposal{LeaderEpoch: c.asg.LeaderEpoch, PartitionEpoch: c.asg.PartitionEpoch, ISR: next}, rd)
}

func sameMembers(a, b []int32) bool {
	if len(a) != len(b) {
		return false
	}
	for _, x := range a {
		if !slices.Contains(b, x) {
			return false
		}
	}
	return true
}

func without(ids []int32, id int32) []int32 {
	return slices.DeleteFunc(slices.Clone(ids), func(x int32) bool { return x == id })
}
