package consumer

import (
	"bytes"
	"cmp"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordlog/fjord/group"
	"github.com/fjordlog/fjord/group/internal/ptr"
)

// Classic-protocol members of a consumer group (Kafka's
// classicGroupJoinToConsumerGroup, classicGroupSyncToConsumerGroup,
// classicGroupHeartbeatToConsumerGroup and classicGroupLeaveToConsumerGroup):
// a consumer that still speaks JoinGroup, SyncGroup, Heartbeat and
// LeaveGroup is a member like any other, assigned by the group's server
// assignor. Its JoinGroup is its reconciliation step: the coordinator
// reconciles it then, from the owned partitions its subscription reports,
// and answers with its member epoch as the generation; its SyncGroup
// hands it the assigned partitions as a ConsumerProtocolAssignment; its
// Heartbeat answers REBALANCE_IN_PROGRESS whenever it must rejoin to move
// on: its epoch is behind the group's, it has partitions to revoke, or the
// partitions it waits for were released. It is never given a partition
// another member still owns: like any member it first gets what is free,
// and rejoins for the rest once released. A classic member has no
// rebalance timeout of its own; it must rejoin within its rebalance
// timeout once told to (join deadline) and sync within it after its
// JoinGroup (sync deadline), else it is removed.

// ConsumerProtocolType is the classic protocol type of consumers, the only
// one a consumer group accepts from classic members.
const ConsumerProtocolType = "consumer"

// errMalformed is Kafka's IllegalStateException for a subscription that
// does not parse: UNKNOWN_SERVER_ERROR (ErrorCode's answer for an error it
// does not map).
var errMalformed = errf(errUnmapped{}, "Malformed embedded consumer protocol in subscription deserialization.")

type errUnmapped struct{}

func (errUnmapped) Error() string { return "consumer: unmapped error" }

// ClassicJoin handles a JoinGroup (v0-9) to this consumer group from a
// member that uses the classic protocol: it creates or updates the member
// (and its ClassicMemberMetadata), bumps the group epoch if its
// subscription changed, computes the target assignment and reconciles the
// member one step, as a ConsumerGroupHeartbeat would. The response is
// immediate, with the member's epoch as the generation, no leader and no
// member list: the member only syncs to get its assignment. On an error
// nothing changed and no records are returned. The caller checks the
// session timeout against group.min/max.session.timeout.ms first (Kafka's
// service does) and persists the records before answering.
func (g *Group) ClassicJoin(now int64, img *Image, req *kmsg.JoinGroupRequest, client Client) (*kmsg.JoinGroupResponse, []Record) {
	resp := req.ResponseKind().(*kmsg.JoinGroupResponse)
	id, err := g.classicJoin(now, img, req, client, resp)
	if err != nil {
		if len(g.out) > 0 {
			panic("consumer: records emitted before a JoinGroup error")
		}
		resp = req.ResponseKind().(*kmsg.JoinGroupResponse)
		resp.ErrorCode = group.ErrorCode(err)
		resp.MemberID = id
		return resp, nil
	}
	return resp, g.flush()
}

// classicJoin returns the member id to echo on an error (the generated
// one for MEMBER_ID_REQUIRED).
func (g *Group) classicJoin(now int64, img *Image, req *kmsg.JoinGroupRequest, client Client, resp *kmsg.JoinGroupResponse) (string, error) {
	if g.dead {
		return req.MemberID, errf(group.ErrGroupDead, "The group %s was deleted.", g.id)
	}
	if st := req.SessionTimeoutMillis; st < g.cfg.ClassicMinSessionTimeoutMs || st > g.cfg.ClassicMaxSessionTimeoutMs {
		return req.MemberID, errf(group.ErrInvalidSessionTimeout, "The session timeout %d is outside [%d, %d].",
			st, g.cfg.ClassicMinSessionTimeoutMs, g.cfg.ClassicMaxSessionTimeoutMs)
	}
	var inst *string
	if req.Version >= 5 && req.InstanceID != nil {
		inst = cloneString(req.InstanceID)
	}
	unknown := req.MemberID == ""
	id := strings.Clone(req.MemberID)
	if unknown {
		id = g.newMemberID()
	}
	if int64(len(g.members)) >= int64(g.cfg.MaxSize) && g.members[id] == nil {
		return req.MemberID, errf(group.ErrGroupMaxSize, "The consumer group has reached its maximum capacity of %d members.", g.cfg.MaxSize)
	}
	if !g.supportsClassicProtocols(req.ProtocolType, req.Protocols) {
		return req.MemberID, errf(group.ErrInconsistentProtocol, "Member %s's protocols are not supported.", id)
	}
	if unknown && inst == nil && req.Version >= 4 {
		// KIP-394: a new dynamic member learns its id first. Nothing is
		// kept: the id is a member's once it joins with it.
		return id, errf(group.ErrMemberIDRequired, "Member id required.")
	}

	// The member: a dynamic one is created under any id it brings; a
	// static one joining without an id takes its instance over (whatever
	// protocol the holder used), with one it must be the holder.
	var old, replace *member
	if inst == nil {
		old = g.members[id]
	} else if holder, ok := g.static[*inst]; unknown {
		if ok {
			replace = g.members[holder]
		}
	} else {
		switch {
		case !ok:
			return req.MemberID, errf(group.ErrUnknownMember, "Instance id %s is unknown.", *inst)
		case holder != id:
			return req.MemberID, errf(group.ErrFencedInstance, "Static member %s with instance id %s was fenced by member %s.", id, *inst, holder)
		}
		old = g.members[holder]
	}
	sub, protocols, err := parseClassicProtocols(req.Protocols)
	if err != nil {
		return req.MemberID, err
	}

	// Checks done: from here on the join succeeds. A static member taking
	// over the instance of the last member using ConsumerGroupHeartbeat
	// makes the group classic (Kafka's
	// validateOnlineDowngradeWithReplacedMemberId), once it joined.
	downgrade := false
	if inst != nil {
		if holder, ok := g.static[*inst]; ok {
			downgrade = g.canDowngradeReplacing(holder)
		}
	}
	plan := joinPlan{id: id, old: old, replace: replace}
	baseMeta, baseCur := plan.base()
	if replace != nil {
		g.replaceStatic(replace, id)
	}
	meta := baseMeta
	if inst != nil {
		meta.instanceID = inst
	}
	if sub.Rack != nil {
		meta.rackID = cloneString(sub.Rack)
	}
	meta.rebalanceTimeoutMs = classicRebalanceTimeout(req)
	meta.topics = sortedNames(sub.Topics)
	for i, t := range meta.topics {
		meta.topics[i] = strings.Clone(t)
	}
	meta.clientID, meta.clientHost = strings.Clone(client.ID), strings.Clone(client.Host)
	meta.classic = &classicMeta{sessionTimeoutMs: req.SessionTimeoutMillis, protocols: protocols}
	if g.members[id] == nil || !meta.equal(baseMeta) {
		g.emit(memberRec{id: id, meta: meta})
	}
	namesChanged := !slices.Equal(meta.topics, baseMeta.topics)
	if g.epoch == 0 || namesChanged {
		g.bumpEpoch(img.MetadataHash(g.groupTopics()))
	}
	if g.epoch > g.assignmentEpoch {
		g.updateTarget(img)
	}
	m := g.members[id]
	next := g.reconcile(m, baseCur, g.assignmentEpoch, g.target[id], namesChanged, ownedByName(sub.OwnedPartitions, img), img)
	if !next.equal(m.cur) {
		g.emit(currentRec{id: id, cur: next})
	}
	m.rebalanceDeadline = -1
	m.joinDeadline = -1
	m.sessionDeadline = now + g.sessionTimeout(m)
	m.syncDeadline = now + int64(m.meta.rebalanceTimeoutMs)

	resp.MemberID = id
	resp.Generation = m.cur.epoch
	resp.ProtocolType = kmsg.StringPtr(ConsumerProtocolType)
	resp.Protocol = kmsg.StringPtr(protocols[0].name)
	resp.Members = []kmsg.JoinGroupResponseMember{}
	if downgrade {
		// Every member stays (the joining one in its predecessor's place),
		// and the classic group does not rebalance: its members rejoin as
		// their generations fall behind.
		g.downgrade(now, "", img)
		g.downgradeRebalance = false
	}
	return id, nil
}

// classicRebalanceTimeout is a JoinGroup's rebalance timeout; v0 has none
// and uses the session timeout, as the classic group does.
func classicRebalanceTimeout(req *kmsg.JoinGroupRequest) int32 {
	if req.Version < 1 || req.RebalanceTimeoutMillis <= 0 {
		return req.SessionTimeoutMillis
	}
	return req.RebalanceTimeoutMillis
}

// supportsClassicProtocols is Kafka's ConsumerGroup.supportsClassicProtocols:
// the consumer protocol type, and (unless the group is empty) a protocol
// that every classic member supports.
func (g *Group) supportsClassicProtocols(protocolType string, protocols []kmsg.JoinGroupRequestProtocol) bool {
	if protocolType != ConsumerProtocolType || len(protocols) == 0 {
		return false
	}
	for _, p := range protocols {
		all := true
		for _, m := range g.members {
			if c := m.meta.classic; c != nil && !c.supports(p.Name) {
				all = false
				break
			}
		}
		if all {
			return true
		}
	}
	return false
}

// parseClassicProtocols reads the subscription of a JoinGroup (its first
// protocol's metadata: all carry the same subscription) and copies the
// protocols.
func parseClassicProtocols(ps []kmsg.JoinGroupRequestProtocol) (kmsg.ConsumerMemberMetadata, []classicProtocol, error) {
	var sub kmsg.ConsumerMemberMetadata
	if err := sub.ReadFrom(ps[0].Metadata); err != nil {
		return sub, nil, errMalformed
	}
	out := make([]classicProtocol, len(ps))
	for i, p := range ps {
		out[i] = classicProtocol{name: strings.Clone(p.Name), metadata: bytes.Clone(p.Metadata)}
	}
	return sub, out, nil
}

// ownedByName converts a subscription's owned partitions to topic ids;
// topics img does not know are left out. Never nil: a classic member
// always reports what it owns (nothing, for an eager one).
func ownedByName(owned []kmsg.ConsumerMemberMetadataOwnedPartition, img *Image) assignment {
	raw := map[TopicID][]int32{}
	for _, o := range owned {
		if t, ok := img.ByName(o.Topic); ok {
			raw[t.ID] = append(raw[t.ID], o.Partitions...)
		}
	}
	return normalize(raw)
}

// classicMember finds the classic member a SyncGroup, Heartbeat or
// LeaveGroup speaks for (Kafka's validateConsumerGroupMember and
// throwIfMemberDoesNotUseClassicProtocol).
func (g *Group) classicMember(memberID string, inst *string) (*member, error) {
	var m *member
	if inst == nil {
		if m = g.members[memberID]; m == nil {
			return nil, errf(group.ErrUnknownMember, "Member %s is not a member of group %s.", memberID, g.id)
		}
	} else {
		holder, ok := g.static[*inst]
		switch {
		case !ok:
			return nil, errf(group.ErrUnknownMember, "Member with instance id %s is not a member of group %s.", *inst, g.id)
		case holder != memberID:
			return nil, errf(group.ErrFencedInstance, "Static member %s with instance id %s was fenced by member %s.", memberID, *inst, holder)
		}
		m = g.members[holder]
	}
	if m.meta.classic == nil {
		return nil, errf(group.ErrUnknownMember, "Member %s does not use the classic protocol.", m.id)
	}
	return m, nil
}

func checkGeneration(m *member, generation int32) error {
	if generation != m.cur.epoch {
		return errf(group.ErrIllegalGeneration, "The request generation id %d is not equal to the member epoch %d of member %s.",
			generation, m.cur.epoch, m.id)
	}
	return nil
}

// armJoin tells m to rejoin within its rebalance timeout, unless it was
// told already (Kafka's scheduleConsumerGroupJoinTimeoutIfAbsent).
func armJoin(now int64, m *member) {
	if m.joinDeadline < 0 {
		m.joinDeadline = now + int64(m.meta.rebalanceTimeoutMs)
	}
}

// ClassicSync handles a SyncGroup (v0-5) from a classic member: it gets
// its assigned partitions (not those it still waits for) as a
// ConsumerProtocolAssignment of its subscription's version. Nothing is
// written. A member whose epoch the group moved past must rejoin first
// (REBALANCE_IN_PROGRESS), unless it is revoking, which it does between
// this sync and its next join.
func (g *Group) ClassicSync(now int64, img *Image, req *kmsg.SyncGroupRequest) *kmsg.SyncGroupResponse {
	resp := req.ResponseKind().(*kmsg.SyncGroupResponse)
	if err := g.classicSync(now, img, req, resp); err != nil {
		resp = req.ResponseKind().(*kmsg.SyncGroupResponse)
		resp.ErrorCode = group.ErrorCode(err)
	}
	return resp
}

func (g *Group) classicSync(now int64, img *Image, req *kmsg.SyncGroupRequest, resp *kmsg.SyncGroupResponse) error {
	if g.dead {
		return errf(group.ErrGroupDead, "The group %s was deleted.", g.id)
	}
	m, err := g.classicMember(req.MemberID, versioned(req.InstanceID, req.Version, 3))
	if err != nil {
		return err
	}
	if err := checkGeneration(m, req.Generation); err != nil {
		return err
	}
	protocol := m.meta.classic.protocols[0]
	if req.Version >= 5 {
		if t := req.ProtocolType; t != nil && *t != ConsumerProtocolType {
			return errf(group.ErrInconsistentProtocol, "The protocol type %s from member %s request is not equal to the group protocol type %s.",
				*t, m.id, ConsumerProtocolType)
		}
		if p := req.Protocol; p != nil && *p != protocol.name {
			return errf(group.ErrInconsistentProtocol, "The protocol name %s from member %s request is not equal to the protocol name %s returned in the join response.",
				*p, m.id, protocol.name)
		}
	}
	if g.epoch > m.cur.epoch && m.cur.state != memberUnrevoked {
		armJoin(now, m)
		return errf(group.ErrRebalanceInProgress, "A new rebalance is triggered in group %s and member %s should rejoin to catch up.", g.id, m.id)
	}
	m.syncDeadline = -1
	m.sessionDeadline = now + g.sessionTimeout(m)
	resp.ProtocolType = ptr.Clone(req.ProtocolType)
	resp.Protocol = ptr.Clone(req.Protocol)
	resp.MemberAssignment = encodeClassicAssignment(m.cur.assigned, img, protocol.metadata)
	return nil
}

// versioned is a request's instance id, nil below the version that
// carries it.
func versioned(inst *string, version, since int16) *string {
	if version < since {
		return nil
	}
	return inst
}

// encodeClassicAssignment is Kafka's ConsumerProtocol.serializeAssignment
// of a: topics by name (those img does not know are left out), sorted, in
// the version of the member's subscription (at most 3), no user data.
func encodeClassicAssignment(a assignment, img *Image, metadata []byte) []byte {
	ca := kmsg.NewConsumerMemberAssignment()
	ca.Version = 0
	if len(metadata) >= 2 {
		ca.Version = min(max(int16(metadata[0])<<8|int16(metadata[1]), 0), 3)
	}
	for t, ps := range a {
		topic, ok := img.ByID(t)
		if !ok {
			continue
		}
		at := kmsg.NewConsumerMemberAssignmentTopic()
		at.Topic, at.Partitions = topic.Name, slices.Clone(ps)
		ca.Topics = append(ca.Topics, at)
	}
	slices.SortFunc(ca.Topics, func(x, y kmsg.ConsumerMemberAssignmentTopic) int { return cmp.Compare(x.Topic, y.Topic) })
	return ca.AppendTo(nil)
}

// ClassicHeartbeat handles a Heartbeat (v0-4) from a classic member: it
// refreshes the session and answers REBALANCE_IN_PROGRESS when the member
// must rejoin: the group epoch moved past it, it has partitions to revoke,
// or every partition it waits for was released.
func (g *Group) ClassicHeartbeat(now int64, req *kmsg.HeartbeatRequest) *kmsg.HeartbeatResponse {
	resp := req.ResponseKind().(*kmsg.HeartbeatResponse)
	resp.ErrorCode = group.ErrorCode(g.classicHeartbeat(now, req))
	return resp
}

func (g *Group) classicHeartbeat(now int64, req *kmsg.HeartbeatRequest) error {
	if g.dead {
		return errf(group.ErrGroupDead, "The group %s was deleted.", g.id)
	}
	m, err := g.classicMember(req.MemberID, versioned(req.InstanceID, req.Version, 3))
	if err != nil {
		return err
	}
	if err := checkGeneration(m, req.Generation); err != nil {
		return err
	}
	m.sessionDeadline = now + g.sessionTimeout(m)
	if m.cur.epoch < g.epoch || m.cur.state == memberUnrevoked ||
		m.cur.state == memberUnreleased && !g.waitingOnUnreleased(m) {
		armJoin(now, m)
		return errf(group.ErrRebalanceInProgress, "The member must rejoin.")
	}
	return nil
}

// waitingOnUnreleased reports whether some partition of m's target that
// it does not have is still owned by another member (Kafka's
// waitingOnUnreleasedPartition).
func (g *Group) waitingOnUnreleased(m *member) bool {
	for t, ps := range g.target[m.id] {
		for _, p := range ps {
			if m.cur.assigned.contains(t, p) {
				continue
			}
			if o, ok := g.owners[t][p]; ok && o != m.id {
				return true
			}
		}
	}
	return false
}

// ClassicLeave handles a LeaveGroup (v0-5) naming classic members of this
// group: each named member (by member id, or by instance id with or
// without its member id) is removed, and the group epoch moves once if any
// was. v0-2 name one member, whose error is the response's; v3+ answer
// per member. A member that uses ConsumerGroupHeartbeat cannot be removed
// this way (UNKNOWN_MEMBER_ID), so this never downgrades the group.
func (g *Group) ClassicLeave(now int64, img *Image, req *kmsg.LeaveGroupRequest) (*kmsg.LeaveGroupResponse, []Record) {
	resp := req.ResponseKind().(*kmsg.LeaveGroupResponse)
	if g.dead {
		resp.ErrorCode = group.ErrorCode(group.ErrGroupDead)
		return resp, nil
	}
	type leaver struct {
		id   string
		inst *string
	}
	var ls []leaver
	if req.Version < 3 {
		ls = []leaver{{id: req.MemberID}}
	} else {
		for _, rm := range req.Members {
			ls = append(ls, leaver{id: rm.MemberID, inst: rm.InstanceID})
		}
	}
	removed := false
	for _, l := range ls {
		var m *member
		var err error
		if l.inst == nil {
			m, err = g.classicMember(l.id, nil)
		} else if holder, ok := g.static[*l.inst]; !ok {
			err = errf(group.ErrUnknownMember, "Instance id %s is unknown.", *l.inst)
		} else if l.id != "" && l.id != holder {
			err = errf(group.ErrFencedInstance, "Static member %s with instance id %s was fenced by member %s.", l.id, *l.inst, holder)
		} else {
			m, err = g.classicMember(holder, nil)
		}
		if req.Version < 3 {
			resp.ErrorCode = group.ErrorCode(err)
		} else {
			rm := kmsg.NewLeaveGroupResponseMember()
			rm.MemberID, rm.InstanceID = strings.Clone(l.id), cloneString(l.inst)
			if m != nil {
				rm.MemberID = m.id
			}
			rm.ErrorCode = group.ErrorCode(err)
			resp.Members = append(resp.Members, rm)
		}
		if err == nil {
			g.removeMember(m.id)
			removed = true
		}
	}
	if removed {
		g.bumpEpoch(img.MetadataHash(g.groupTopics()))
	}
	return resp, g.flush()
}
