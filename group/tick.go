package group

import (
	"slices"
	"sort"
)

// Tick applies every deadline at or before now and returns the replies that
// became ready. In order, repeated until nothing changes:
//
//  1. Pending member ids (MEMBER_ID_REQUIRED) whose session timeout passed
//     are forgotten; a join phase that waited only for them ends.
//  2. Members whose session expired are removed, except members parked in
//     JoinGroup or SyncGroup. Removal rebalances the others.
//  3. The join deadline: during the initial delay, if new members arrived
//     since it was set and the cap is not reached, it moves on by the delay
//     (at most to the cap); otherwise the join phase ends without the
//     members that did not rejoin (see completeJoin).
//  4. The sync deadline: members that have not sent SyncGroup since the
//     join phase ended are removed, and the group rebalances.
//
// Calling Tick early, late or more than once is harmless: it only compares
// deadlines with now.
func (g *Group) Tick(now int64) []Reply {
	g.out = nil
	for g.tickOnce(now) {
	}
	return g.flush()
}

// tickOnce applies what is due and reports whether anything changed. Each
// change removes a member or a pending id, or moves a deadline forward, so
// the loop in Tick ends.
func (g *Group) tickOnce(now int64) bool {
	if g.state == stateDead {
		return false
	}
	changed := false
	var expired []string
	for id, t := range g.pending {
		if now >= t {
			expired = append(expired, id)
		}
	}
	if len(expired) > 0 {
		sort.Strings(expired) // (order does not matter; keep it fixed anyway)
		for _, id := range expired {
			delete(g.pending, id)
		}
		g.maybeCompleteJoin(now)
		changed = true
	}

	for _, m := range slices.Clone(g.order) {
		if g.members[m.id] == m && !m.waiting() && now >= m.sessionDeadline {
			g.removeMember(now, m, CauseSessionTimeout)
			changed = true
		}
	}

	if g.state == statePreparingRebalance && now >= g.joinDeadline {
		if g.initialDelay && g.newMemberAdded && g.joinDeadline < g.initialCap {
			g.newMemberAdded = false
			g.joinDeadline = min(g.joinDeadline+int64(g.cfg.InitialRebalanceDelayMs), g.initialCap)
		} else {
			g.completeJoin(now)
		}
		changed = true
	}

	if (g.state == stateCompletingRebalance || g.state == stateStable) && g.syncDeadline >= 0 && now >= g.syncDeadline {
		who := ""
		for _, m := range slices.Clone(g.order) {
			if g.pendingSync[m.id] {
				// Not parked anywhere: it has not synced, and joins are
				// only parked in PreparingRebalance.
				if who == "" {
					who = m.who()
				}
				g.detach(m)
			}
		}
		g.prepareRebalance(now, CauseSyncTimeout, who)
		changed = true
	}
	return changed
}

// NextDeadline is the earliest now at which Tick would do something, or -1
// if nothing is pending. Tick(t) for t < NextDeadline() does nothing.
func (g *Group) NextDeadline() int64 {
	next := int64(-1)
	at := func(t int64) {
		if next < 0 || t < next {
			next = t
		}
	}
	if g.state == stateDead {
		return -1
	}
	for _, t := range g.pending {
		at(t)
	}
	for _, m := range g.order {
		if !m.waiting() {
			at(m.sessionDeadline)
		}
	}
	if g.state == statePreparingRebalance {
		at(g.joinDeadline)
	}
	if (g.state == stateCompletingRebalance || g.state == stateStable) && g.syncDeadline >= 0 {
		at(g.syncDeadline)
	}
	return next
}
