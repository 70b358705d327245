package group

import "strings"

// The rebalance timeline: what started each rebalance of a group, which
// generation it produced and how long it took. Kafka logs these lines on
// the coordinator; here they are kept, bounded, for the console.

// Cause is why a rebalance started.
type Cause string

const (
	CauseMemberJoined   Cause = "member joined"
	CauseMemberLeft     Cause = "member left"
	CauseSessionTimeout Cause = "session timeout"
	// CauseMetadataChange: a member rejoined with other protocols or
	// metadata (a consumer's subscription changed).
	CauseMetadataChange Cause = "metadata change"
	// CauseLeaderRejoined: the leader rejoined a Stable group, which is how
	// it reacts to changes outside member metadata (new partitions).
	CauseLeaderRejoined Cause = "leader rejoined"
	// CauseStaticReplaced: a static member's instance id joined with a new
	// member id (KIP-345); without a rebalance when nothing else changed.
	CauseStaticReplaced Cause = "static member replaced"
	// CauseSyncTimeout: members never sent SyncGroup after a join phase.
	CauseSyncTimeout Cause = "sync timeout"
	// CauseRebalanceLimit: a member forced Config.MaxRebalanceAttempts
	// rebalances and was removed.
	CauseRebalanceLimit Cause = "rebalance limit"
	// CauseDowngrade: a consumer group became this classic group when its
	// last ConsumerGroupHeartbeat member left (KIP-848's online
	// downgrade); its members rejoin.
	CauseDowngrade Cause = "downgraded from a consumer group"
)

// Outcomes of a rebalance.
const (
	OutcomeStable      = "Stable"       // the leader's assignment arrived
	OutcomeEmpty       = "Empty"        // the join phase ended with no members
	OutcomeSuperseded  = "superseded"   // another rebalance began before Stable
	OutcomeNoRebalance = "no rebalance" // a static member replaced in place
)

// TimelineLen is how many rebalances a group remembers (the newest).
const TimelineLen = 32

// maxWhoLen clips the member id kept per entry: ids embed client ids,
// which clients choose.
const maxWhoLen = 128

// Rebalance is one entry of a group's timeline. Times are Unix ms.
//
// Invariant: JoinEnd and End are -1 until reached, JoinEnd is set when End
// is, and End is set iff Outcome is. Times are the caller's clock, which
// may step back: durations can come out negative.
type Rebalance struct {
	Cause Cause
	// Member is the member (id, or instance id) whose join, leave or
	// silence caused it.
	Member string
	// From is the generation before; Generation the one the join phase
	// produced (== From until it ends, and for OutcomeNoRebalance).
	From, Generation int32
	Start            int64 // the rebalance began (PreparingRebalance)
	JoinEnd          int64 // the join phase ended: Generation was assigned
	End              int64 // Stable, Empty or superseded
	// Members is the number of members of the new generation.
	Members int
	Outcome string
}

// Timeline returns a copy of the group's remembered rebalances, oldest
// first.
func (g *Group) Timeline() []Rebalance {
	return append([]Rebalance(nil), g.timeline...)
}

// openRebalance is the rebalance in progress, nil when none.
func (g *Group) openRebalance() *Rebalance {
	if n := len(g.timeline); n > 0 && g.timeline[n-1].End < 0 {
		return &g.timeline[n-1]
	}
	return nil
}

// noteRebalance records a rebalance starting now, ending the one in
// progress as superseded.
func (g *Group) noteRebalance(now int64, cause Cause, who string) {
	g.endRebalance(now, OutcomeSuperseded)
	g.appendTimeline(Rebalance{Cause: cause, Member: clip(who), From: g.generation, Generation: g.generation,
		Start: now, JoinEnd: -1, End: -1, Members: len(g.members)})
}

// noteInPlace records a change that did not rebalance.
func (g *Group) noteInPlace(now int64, cause Cause, who string) {
	g.appendTimeline(Rebalance{Cause: cause, Member: clip(who), From: g.generation, Generation: g.generation,
		Start: now, JoinEnd: now, End: now, Members: len(g.members), Outcome: OutcomeNoRebalance})
}

// noteJoinEnd records the end of the join phase: the new generation.
func (g *Group) noteJoinEnd(now int64) {
	if r := g.openRebalance(); r != nil {
		r.JoinEnd, r.Generation, r.Members = now, g.generation, len(g.members)
	}
}

// endRebalance ends the rebalance in progress, if any, with outcome.
func (g *Group) endRebalance(now int64, outcome string) {
	if r := g.openRebalance(); r != nil {
		r.End, r.Outcome = now, outcome
		if r.JoinEnd < 0 {
			r.JoinEnd = now
		}
	}
}

func (g *Group) appendTimeline(r Rebalance) {
	if len(g.timeline) >= TimelineLen {
		g.timeline = append(g.timeline[:0], g.timeline[len(g.timeline)-TimelineLen+1:]...)
	}
	g.timeline = append(g.timeline, r)
}

func clip(s string) string {
	if len(s) > maxWhoLen {
		return strings.Clone(s[:maxWhoLen])
	}
	return s
}
