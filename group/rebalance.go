package group

import "slices"

// forceRebalance starts a rebalance because of m's join, unless m has
// already forced Config.MaxRebalanceAttempts of them since the group was
// last Stable: then m is removed instead (its parked JoinGroup gets
// UNKNOWN_MEMBER_ID), which rebalances the others without it.
func (g *Group) forceRebalance(now int64, m *member, cause Cause) {
	m.forced++
	if m.forced > g.cfg.MaxRebalanceAttempts {
		g.removeMember(now, m, CauseRebalanceLimit)
		return
	}
	g.prepareRebalance(now, cause, m.who())
}

// prepareRebalance enters PreparingRebalance from Empty, CompletingRebalance
// or Stable. SyncGroups parked in CompletingRebalance are answered
// REBALANCE_IN_PROGRESS and the half-made assignment is dropped. From Empty
// the phase gets the initial delay; otherwise its deadline is the rebalance
// timeout, and it ends at once if everyone has already rejoined. The
// timeline records the rebalance with its cause and the member (who) that
// caused it.
func (g *Group) prepareRebalance(now int64, cause Cause, who string) {
	g.noteRebalance(now, cause, who)
	if g.state == stateCompletingRebalance {
		for _, m := range g.order {
			m.assignment = nil
			if m.sync != nil {
				g.reply(m.sync.token, syncError(m.sync.version, ErrRebalanceInProgress))
				m.sync = nil
				m.refreshSession(now)
			}
		}
	}
	clear(g.pendingSync)
	g.syncDeadline = -1
	g.newMemberAdded = false
	if g.state == stateEmpty && g.cfg.InitialRebalanceDelayMs > 0 {
		d := int64(g.cfg.InitialRebalanceDelayMs)
		g.state = statePreparingRebalance
		g.initialDelay = true
		g.joinDeadline = now + d
		g.initialCap = now + max(d, g.rebalanceTimeout())
		return
	}
	g.state = statePreparingRebalance
	g.initialDelay = false
	g.joinDeadline = now + g.rebalanceTimeout()
	g.maybeCompleteJoin(now)
}

// allJoined reports whether every member has a parked JoinGroup and no
// pending member id is outstanding (one may be about to join).
func (g *Group) allJoined() bool {
	if len(g.pending) > 0 {
		return false
	}
	for _, m := range g.order {
		if m.join == nil {
			return false
		}
	}
	return true
}

// maybeCompleteJoin ends the join phase early when nobody else is expected:
// everyone rejoined, outside the initial delay, or nobody is left at all.
func (g *Group) maybeCompleteJoin(now int64) {
	if g.state == statePreparingRebalance && g.allJoined() && (!g.initialDelay || len(g.members) == 0) {
		g.completeJoin(now)
	}
}

// completeJoin ends the join phase. Members that did not rejoin are removed,
// except static members when at least one member rejoined (they keep their
// place and may still come back; their sessions still run). If the leader
// did not rejoin, the first member that did leads. The generation goes up;
// with no members the group is Empty, else the protocol is chosen, every
// parked JoinGroup is answered, and the group waits in CompletingRebalance
// for the SyncGroups, until the sync deadline.
func (g *Group) completeJoin(now int64) {
	var firstJoined *member
	for _, m := range g.order {
		if m.join != nil {
			firstJoined = m
			break
		}
	}
	for _, m := range slices.Clone(g.order) {
		if m.join == nil && (m.instanceID == nil || firstJoined == nil) {
			g.detach(m)
		}
	}
	if l := g.members[g.leader]; l == nil || l.join == nil {
		g.leader = ""
		if firstJoined != nil {
			g.leader = firstJoined.id
		}
	}
	g.nextGeneration()
	g.initialDelay = false
	g.newMemberAdded = false
	g.joinDeadline = -1
	g.noteJoinEnd(now)
	if len(g.members) == 0 {
		g.state = stateEmpty
		g.protocol = ""
		g.endRebalance(now, OutcomeEmpty)
		return
	}
	g.protocol = g.selectProtocol()
	g.state = stateCompletingRebalance
	for _, m := range g.order {
		if m.join != nil {
			g.reply(m.join.token, g.joinOK(m, m.join.version, g.leader, m.id == g.leader))
			m.join = nil
		}
		m.refreshSession(now)
		g.pendingSync[m.id] = true
	}
	g.syncDeadline = now + g.rebalanceTimeout()
}

// removeMember removes m and moves the group along: a rebalance from
// CompletingRebalance or Stable, a possible end of the join phase from
// PreparingRebalance. Parked requests of m get UNKNOWN_MEMBER_ID, so the
// client rejoins as a new member if it is still alive. cause is the
// timeline's, should the removal start a rebalance.
func (g *Group) removeMember(now int64, m *member, cause Cause) {
	if m.join != nil {
		g.reply(m.join.token, joinError(m.join.version, "", ErrUnknownMember))
		m.join = nil
	}
	if m.sync != nil {
		g.reply(m.sync.token, syncError(m.sync.version, ErrUnknownMember))
		m.sync = nil
	}
	g.detach(m)
	switch g.state {
	case stateCompletingRebalance, stateStable:
		g.prepareRebalance(now, cause, m.who())
	case statePreparingRebalance:
		g.maybeCompleteJoin(now)
	}
}

// detach deletes m from every index. It answers nothing and does not move
// the state; callers do. A departing leader is succeeded by the earliest
// remaining member.
func (g *Group) detach(m *member) {
	delete(g.members, m.id)
	if i := slices.Index(g.order, m); i >= 0 {
		g.order = slices.Delete(g.order, i, i+1)
	}
	if m.instanceID != nil && g.static[*m.instanceID] == m {
		delete(g.static, *m.instanceID)
	}
	if m.replaced != "" {
		delete(g.fenced, m.replaced)
	}
	delete(g.pendingSync, m.id)
	if len(g.pendingSync) == 0 {
		g.syncDeadline = -1
	}
	if g.leader == m.id {
		g.leader = ""
		if len(g.order) > 0 {
			g.leader = g.order[0].id
		}
	}
}
