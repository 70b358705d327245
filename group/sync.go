package group

import (
	"bytes"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Sync handles a SyncGroup (v0-5); token comes back in the Reply for this
// request.
//
// Checks, in Kafka's order: group Dead (COORDINATOR_NOT_AVAILABLE); member
// (UNKNOWN_MEMBER_ID, FENCED_INSTANCE_ID); generation (ILLEGAL_GENERATION);
// v5+ protocol type and name, when given (INCONSISTENT_GROUP_PROTOCOL);
// PreparingRebalance (REBALANCE_IN_PROGRESS: rejoin).
//
// In CompletingRebalance the request is parked. The leader's SyncGroup
// carries the assignment: every member gets its part (a member the leader
// left out gets an empty one; entries for non-members are ignored), every
// parked SyncGroup is answered, and the group is Stable. In Stable the
// member's assignment is returned at once.
func (g *Group) Sync(now int64, req *kmsg.SyncGroupRequest, token any) []Reply {
	g.out = nil
	fail := func(err error) []Reply {
		g.reply(token, syncError(req.Version, err))
		return g.flush()
	}
	if g.state == stateDead {
		return fail(ErrGroupDead)
	}
	m, err := g.validateMember(req.MemberID, instanceID(req.InstanceID, req.Version, 3))
	if err != nil {
		return fail(err)
	}
	if req.Generation != g.generation {
		return fail(ErrIllegalGeneration)
	}
	if req.Version >= 5 {
		if req.ProtocolType != nil && *req.ProtocolType != g.protocolType {
			return fail(ErrInconsistentProtocol)
		}
		if req.Protocol != nil && g.protocol != "" && *req.Protocol != g.protocol {
			return fail(ErrInconsistentProtocol)
		}
	}
	switch g.state {
	case statePreparingRebalance:
		return fail(ErrRebalanceInProgress)
	case stateCompletingRebalance:
		if m.sync != nil {
			// Superseded by this one; see park.
			g.reply(m.sync.token, syncError(m.sync.version, ErrRebalanceInProgress))
		}
		m.sync = &parked{token: token, version: req.Version}
		g.synced(m)
		if m.id == g.leader {
			g.completeSync(now, req.GroupAssignment)
		}
	case stateStable:
		g.synced(m)
		m.refreshSession(now)
		g.reply(token, g.syncOK(m, req.Version))
	}
	return g.flush()
}

// synced notes that m sent its SyncGroup for this generation.
func (g *Group) synced(m *member) {
	delete(g.pendingSync, m.id)
	if len(g.pendingSync) == 0 {
		g.syncDeadline = -1
	}
}

// completeSync applies the leader's assignment, answers every parked
// SyncGroup and makes the group Stable, which resets every member's count
// of forced rebalances.
func (g *Group) completeSync(now int64, assignments []kmsg.SyncGroupRequestGroupAssignment) {
	for _, m := range g.order {
		m.assignment = nil
	}
	for _, a := range assignments {
		if m := g.members[a.MemberID]; m != nil {
			m.assignment = bytes.Clone(a.MemberAssignment)
		}
	}
	g.state = stateStable
	g.endRebalance(now, OutcomeStable)
	for _, m := range g.order {
		m.forced = 0
		if m.sync != nil {
			g.reply(m.sync.token, g.syncOK(m, m.sync.version))
			m.sync = nil
			m.refreshSession(now)
		}
	}
}
