package group

import (
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Join handles a JoinGroup (v0-9). meta describes the client; token comes
// back in the Reply for this request. The group keeps copies of what it
// needs from req, never req itself.
//
// The reply is immediate for errors, for MEMBER_ID_REQUIRED, and for a
// rejoin that changes nothing outside a rebalance; otherwise the request is
// parked until its join phase ends, and its reply comes from whichever call
// ends it (possibly this one, possibly Tick). Checks, in Kafka's order:
// group Dead (COORDINATOR_NOT_AVAILABLE), session timeout bounds
// (INVALID_SESSION_TIMEOUT), protocol type and a protocol shared with
// every other member (INCONSISTENT_GROUP_PROTOCOL), then by member id:
//
//   - empty, with a known instance id: the static member is replaced
//     (replaceStatic);
//   - empty otherwise: GROUP_MAX_SIZE_REACHED if full; v4+ without an
//     instance id gets MEMBER_ID_REQUIRED with a new id, remembered as
//     pending; else the member is added;
//   - a pending id: the member is added;
//   - else the member must exist (UNKNOWN_MEMBER_ID, FENCED_INSTANCE_ID).
func (g *Group) Join(now int64, req *kmsg.JoinGroupRequest, meta JoinMeta, token any) []Reply {
	g.out = nil
	fail := func(memberID string, err error) []Reply {
		g.reply(token, joinError(req.Version, memberID, err))
		return g.flush()
	}
	if g.state == stateDead {
		return fail(req.MemberID, ErrGroupDead)
	}
	if st := req.SessionTimeoutMillis; st < g.cfg.MinSessionTimeoutMs || st > g.cfg.MaxSessionTimeoutMs {
		return fail(req.MemberID, ErrInvalidSessionTimeout)
	}
	inst := instanceID(req.InstanceID, req.Version, 5)
	self := req.MemberID
	var known *member // the static member an empty member id takes over
	if self == "" && inst != nil {
		if known = g.static[*inst]; known != nil {
			self = known.id
		}
	}
	if !g.supportsProtocols(self, req.ProtocolType, req.Protocols) {
		return fail(req.MemberID, ErrInconsistentProtocol)
	}
	w := &parked{token: token, version: req.Version}

	switch _, isPending := g.pending[req.MemberID]; {
	case known != nil:
		g.replaceStatic(now, known, req, meta, w)
		return g.flush()
	case req.MemberID == "":
		if g.full() {
			return fail("", ErrGroupMaxSize)
		}
		prefix := meta.ClientID
		if inst != nil {
			prefix = *inst
		}
		id := g.newMemberID(prefix)
		if req.Version >= 4 && inst == nil {
			g.pending[id] = now + int64(req.SessionTimeoutMillis)
			return fail(id, ErrMemberIDRequired)
		}
		g.addMember(now, id, inst, req, meta, w)
		return g.flush()
	case isPending && inst == nil:
		delete(g.pending, req.MemberID)
		g.addMember(now, req.MemberID, nil, req, meta, w)
		return g.flush()
	}

	m, err := g.validateMember(req.MemberID, inst)
	if err != nil {
		return fail(req.MemberID, err)
	}
	switch g.state {
	case statePreparingRebalance:
		g.park(m, req, meta, w)
		g.maybeCompleteJoin(now)
	case stateCompletingRebalance:
		if m.matches(req.Protocols) {
			// Same metadata: likely a lost response. Answer with the
			// current generation.
			m.refreshSession(now)
			g.reply(token, g.joinOK(m, req.Version, g.leader, m.id == g.leader))
			break
		}
		g.park(m, req, meta, w)
		g.forceRebalance(now, m, CauseMetadataChange)
	case stateStable:
		if m.id != g.leader && m.matches(req.Protocols) {
			m.refreshSession(now)
			g.reply(token, g.joinOK(m, req.Version, g.leader, false))
			break
		}
		// The leader rejoining forces a rebalance even without changes:
		// that is how it reacts to changes outside member metadata
		// (new partitions, for a consumer).
		cause := CauseMetadataChange
		if m.id == g.leader && m.matches(req.Protocols) {
			cause = CauseLeaderRejoined
		}
		g.park(m, req, meta, w)
		g.forceRebalance(now, m, cause)
	}
	return g.flush()
}

// park updates m from its JoinGroup and parks the request. A JoinGroup the
// member had parked before is answered REBALANCE_IN_PROGRESS: one client
// has one join in flight, so the old one was abandoned.
func (g *Group) park(m *member, req *kmsg.JoinGroupRequest, meta JoinMeta, w *parked) {
	if m.join != nil {
		g.reply(m.join.token, joinError(m.join.version, m.id, ErrRebalanceInProgress))
	}
	m.update(req, meta)
	m.join = w
}

// addMember adds a new member with a parked JoinGroup. The first member of
// an empty group sets the protocol type; the first member overall, or the
// first after the leader left, becomes the leader.
func (g *Group) addMember(now int64, id string, inst *string, req *kmsg.JoinGroupRequest, meta JoinMeta, w *parked) {
	m := &member{id: id, instanceID: inst}
	m.update(req, meta)
	m.join = w
	m.refreshSession(now)
	if len(g.members) == 0 {
		g.protocolType = req.ProtocolType
	}
	g.members[id] = m
	g.order = append(g.order, m)
	if inst != nil {
		g.static[*inst] = m
	}
	if g.leader == "" {
		g.leader = id
	}
	if g.state == statePreparingRebalance {
		if g.initialDelay {
			g.newMemberAdded = true
		}
		g.maybeCompleteJoin(now)
		return
	}
	g.forceRebalance(now, m, CauseMemberJoined)
}

// replaceStatic hands the instance id of old to a new member id (KIP-345):
// the member keeps its place, leadership and assignment; old's parked
// requests get FENCED_INSTANCE_ID, as do later requests with old's id.
//
// In Stable, if the chosen protocol would not change, there is no
// rebalance: the new member id gets the current generation and syncs to
// receive the old assignment. Below v9 the response names the leader as it
// was before the replacement, so a replaced leader does not reassign; from
// v9 (KIP-814) a replaced leader is told it leads, with every member's
// metadata and SkipAssignment set. In CompletingRebalance the leader may be
// assigning to the old id, so the group rebalances; in PreparingRebalance
// the new member simply joins the phase.
func (g *Group) replaceStatic(now int64, old *member, req *kmsg.JoinGroupRequest, meta JoinMeta, w *parked) {
	m := old
	oldID := m.id
	if m.join != nil {
		g.reply(m.join.token, joinError(m.join.version, oldID, ErrFencedInstance))
		m.join = nil
	}
	if m.sync != nil {
		g.reply(m.sync.token, syncError(m.sync.version, ErrFencedInstance))
		m.sync = nil
	}
	leaderBefore := g.leader
	newID := g.newMemberID(*m.instanceID)
	delete(g.members, oldID)
	m.id = newID
	g.members[newID] = m
	if m.replaced != "" {
		delete(g.fenced, m.replaced)
	}
	g.fenced[oldID] = *m.instanceID
	m.replaced = oldID
	if g.leader == oldID {
		g.leader = newID
	}
	if g.pendingSync[oldID] {
		delete(g.pendingSync, oldID)
		g.pendingSync[newID] = true
	}
	m.update(req, meta)
	m.refreshSession(now)

	switch g.state {
	case stateStable:
		if g.selectProtocol() == g.protocol {
			isLeader := newID == g.leader
			if req.Version >= 9 {
				r := g.joinOK(m, req.Version, g.leader, isLeader)
				r.SkipAssignment = isLeader
				g.reply(w.token, r)
			} else {
				g.reply(w.token, g.joinOK(m, req.Version, leaderBefore, false))
			}
			g.noteInPlace(now, CauseStaticReplaced, *m.instanceID)
			return
		}
		m.join = w
		g.forceRebalance(now, m, CauseStaticReplaced)
	case stateCompletingRebalance:
		m.join = w
		g.forceRebalance(now, m, CauseStaticReplaced)
	case statePreparingRebalance:
		m.join = w
		g.maybeCompleteJoin(now)
	}
}
