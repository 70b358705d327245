package replica

import (
	"fmt"
	"slices"
)

// Config is a replica's fixed settings. Times are milliseconds.
type Config struct {
	// ID is this broker's id.
	ID int32
	// SyncOnAck: records count toward the high watermark once fsynced
	// (flush.messages=1), else once appended.
	SyncOnAck bool
	// LagMs is replica.lag.time.max.ms: a follower not caught up for this
	// long leaves the ISR.
	LagMs int64
	// OpenTimeoutMs bounds an open; past it a leadership placed here is
	// resigned (the open keeps running and is adopted if it finishes).
	OpenTimeoutMs int64
	// AlterTimeoutMs bounds an AlterPartition without an answer.
	AlterTimeoutMs int64
	// Open spaces failed opens; Alter spaces refused or unanswered
	// AlterPartitions (ISR changes and resignations).
	Open, Alter Backoff
}

// Backoff is a retry schedule: Initial, doubling up to Max, at most
// Attempts tries in a row (0: no bound on the count, only on the rate).
type Backoff struct {
	InitialMs, MaxMs int64
	Attempts         int
}

// delay is the wait before try n+1 after n failures (n >= 1).
func (b Backoff) delay(n int) int64 {
	d := max(b.InitialMs, 1)
	for i := 1; i < n && d < b.MaxMs; i++ {
		d *= 2
	}
	return min(d, max(b.MaxMs, b.InitialMs))
}

// Assignment is what the metadata image says about the partition.
type Assignment struct {
	Leader         int32 // -1: none
	LeaderEpoch    int32
	PartitionEpoch int32
	Replicas, ISR  []int32 // read-only
	// Live are the replicas the image shows unfenced; a damaged leader
	// resigns only to a live ISR member.
	Live []int32
}

// Events. Each is a value the owner passes to Step.
type (
	// Assign carries the partition's state in a new metadata image.
	Assign struct{ Assignment }
	// Unassign: the image no longer places the replica here.
	Unassign struct{ TopicDeleted bool }
	// OpenDone answers Ready.Open: the log's offsets, or the error.
	OpenDone struct {
		Err                 error
		Start, End, Durable int64
	}
	// Appended: the log end moved to End (a leader's or a follower's append).
	Appended struct{ End int64 }
	// Flushed: everything below Durable is fsynced.
	Flushed struct{ Durable int64 }
	// FollowerFetched: follower ID fetched at Offset (its durable log end).
	FollowerFetched struct {
		ID     int32
		Offset int64
	}
	// LeaderHW is the high watermark in the leader's fetch response.
	LeaderHW struct{ HW int64 }
	// Truncated: the log was cut to End (divergence, or a damage repair
	// when Repaired), or restarted at End (behind the leader's start).
	Truncated struct {
		Start, End int64
		Repaired   bool
	}
	// Reconciled: a follower's log now matches its leader's, at
	// LeaderEpoch, up to its end.
	Reconciled struct{ LeaderEpoch int32 }
	// Diverged: a follower's fetch at LeaderEpoch found its log no longer
	// matches (an append refused, an offset out of range): reconcile again.
	Diverged struct{ LeaderEpoch int32 }
	// DamageFound: a read found the log damaged from Offset on.
	DamageFound struct{ Offset int64 }
	// LeaderDamaged: the leader answered KAFKA_STORAGE_ERROR: its copy is
	// damaged and it is handing the partition on; pause fetching briefly.
	LeaderDamaged struct{}
	// AlterAnswered answers Ready.Propose: the partition's error code, or
	// -1 when no answer came.
	AlterAnswered struct {
		Proposal Proposal
		Code     int16
	}
	// LogDeleted answers Ready.Delete.
	LogDeleted struct{}
)

// Proposal is an AlterPartition to send from this leader: an ISR change,
// or, without this broker in ISR, a resignation (the controller then
// elects another ISR member).
type Proposal struct {
	LeaderEpoch, PartitionEpoch int32
	ISR                         []int32
	Resign                      bool
	Why                         string
}

// Ready is what a Step or Tick asks of the owner, in this order: publish
// View (when ViewChanged) and HW, record StartEpoch in the log before any
// append of the new leader, wake waiters, then do the I/O (Open, Propose,
// TruncateTo, Delete) and answer each with its event.
type Ready struct {
	ViewChanged bool
	HWMoved     bool // HW moved (up on a leader; a follower's may drop)
	HW          int64
	// StartEpoch >= 0: this broker leads from now at that epoch, starting
	// at StartOffset; the log must record it before the first append.
	StartEpoch  int32
	StartOffset int64
	WakeHW      bool // acks=all and long-poll waiters look again
	WakeAppend  bool // replica long polls look again
	Open        bool // open the log, answer OpenDone
	Propose     *Proposal
	TruncateTo  int64 // >= 0: cut the log there (damage repair), answer Truncated{Repaired}
	Delete      bool  // close and remove the log, answer LogDeleted
	// Notes are state changes worth one log line each.
	Notes []string
}

func (r *Ready) note(format string, args ...any) {
	r.Notes = append(r.Notes, fmt.Sprintf(format, args...))
}

// follower is the leader's view of one follower.
type follower struct {
	leo           int64 // its fetch offset: its durable log end
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
//     of every ISR member it counts, and of a member joining it.
//   - At most one proposal (ISR change or resignation) is in flight.
//   - phase.logOpen() implies the log is open; Deleting and Deleted never
//     go back.
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
	opening      bool  // an open is running
	openSince    int64 // when it began
	openFails    int   // failed opens in a row
	openNext     int64 // when the next open is due
	openOverrun  bool  // the running open passed OpenTimeoutMs (noted once)
	deleteQueued bool  // Deleting waits for the running open first

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
		PartitionEpoch: c.asg.PartitionEpoch, Replicas: c.asg.Replicas, ISR: c.asg.ISR,
		InISR: slices.Contains(c.asg.ISR, c.cfg.ID), DamagedFrom: c.damagedFrom, TopicDeleted: c.topicDeleted}
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
	case FollowerFetched:
		c.followerFetched(now, e.ID, e.Offset, &rd)
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
		if !c.opening && c.phase == Offline && c.openRetriesLeft() && now >= c.openNext {
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
	return c.cfg.Open.Attempts == 0 || c.openFails < c.cfg.Open.Attempts
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
		case !c.openRetriesLeft():
			rd.note("open failed %d times in a row; giving up until restart: %v", c.openFails, e.Err)
		case c.openFails == 1:
			rd.note("open failed; retrying with backoff (%d tries at most): %v", c.cfg.Open.Attempts, e.Err)
		}
		if c.openRetriesLeft() {
			c.openNext = now + c.cfg.Open.delay(c.openFails)
		}
		c.maybeResignUnserved(now, rd)
		return
	}
	if c.openOverrun {
		rd.note("log opened after overrunning the open timeout; adopted")
	}
	c.openFails = 0
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
	case !c.phase.logOpen():
		c.maybeResignUnserved(now, rd)
		return
	case roleChanged:
		c.becomeRole(now, rd)
		return
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
	if c.cfg.Alter.Attempts > 0 && c.alterFails >= c.cfg.Alter.Attempts {
		// Past the bound, keep the longest spacing rather than stop: an
		// ISR that cannot shrink holds acks=all back until it does.
		c.alterNext = now + c.cfg.Alter.MaxMs
	} else {
		c.alterNext = now + c.cfg.Alter.delay(c.alterFails)
	}
	if c.alterFails == 1 || c.alterFails == c.cfg.Alter.Attempts {
		rd.note("AlterPartition not accepted (code %d, %d in a row); next try in %d ms", e.Code, c.alterFails, c.alterNext-now)
	}
	if e.Proposal.Resign && c.phase == Resigning && !c.otherLiveISR() {
		c.phase = Leading // nobody to hand over to: keep serving
	}
}

func sameProposal(a, b Proposal) bool {
	return a.LeaderEpoch == b.LeaderEpoch && a.PartitionEpoch == b.PartitionEpoch && a.Resign == b.Resign && slices.Equal(a.ISR, b.ISR)
}

func (c *Core) followerFetched(now int64, id int32, offset int64, rd *Ready) {
	if (c.phase != Leading && c.phase != Resigning) || id == c.cfg.ID || !slices.Contains(c.asg.Replicas, id) {
		return
	}
	f := c.followers[id]
	if f == nil {
		f = &follower{lastCaughtUp: now}
		c.followers[id] = f
	}
	// Caught up: asking for the leader's log end, or for at least what the
	// leader's end was at its previous fetch (Kafka's rule, so a steady
	// stream of appends does not make a keeping-up follower look behind).
	if offset >= c.logEnd {
		f.lastCaughtUp = now
	} else if f.fetched && offset >= f.lastLeaderEnd {
		f.lastCaughtUp = f.lastFetch
	}
	f.leo, f.lastFetch, f.lastLeaderEnd, f.fetched = offset, now, c.logEnd, true
	c.maybeAdvanceHW(rd)
}

// localEnd is this replica's end as the high watermark counts it.
func (c *Core) localEnd() int64 {
	if c.cfg.SyncOnAck {
		return c.durable
	}
	return c.logEnd
}

// maybeAdvanceHW recomputes a leader's high watermark: the minimum end
// over the ISR, counting a member whose expansion is in flight (KIP-497's
// maximal ISR). A member that has not fetched since this broker began
// leading holds it where it is.
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
			next = min(next, f.leo)
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
// differs: members not caught up within LagMs leave, replicas whose log
// reaches the high watermark and this epoch's start join.
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
		if slices.Contains(c.asg.ISR, id) {
			continue
		}
		f := c.followers[id]
		if f != nil && f.fetched && f.leo >= c.hw && f.leo >= c.epochStart && now-f.lastFetch <= c.cfg.LagMs {
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
