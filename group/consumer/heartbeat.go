package consumer

import (
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordlog/fjord/group"
	"github.com/fjordlog/fjord/group/internal/ptr"
)

// Client is what the connection knows of the client sending a heartbeat:
// its client id (request header) and its address as Kafka shows it
// ("/10.0.0.1"). The group records both with the member and reports them
// in ConsumerGroupDescribe.
type Client struct {
	ID   string
	Host string
	// MayDescribe is the member's principal's DESCRIBE on topics; nil
	// for every topic (no authorizer). See Visibility.
	MayDescribe Visibility
}

// Visibility tells whether a principal may DESCRIBE a topic. A regular
// expression is resolved to the topics of the image that match it and
// that the principal of the member whose heartbeat resolves it may
// describe, as Kafka does since KAFKA-18813: a member must not learn the
// names, ids or partition counts of topics hidden from it. Kafka's
// limit holds here too: the resolution is the group's, so a member
// sharing an expression with a more privileged one may be assigned
// partitions of a topic it may not describe.
type Visibility func(topic string) bool

// AllTopics is the Visibility of a node without an authorizer.
func AllTopics(string) bool { return true }

// Heartbeat is HeartbeatFrom with an empty Client.
func (g *Group) Heartbeat(now int64, img *Image, req *kmsg.ConsumerGroupHeartbeatRequest) (*kmsg.ConsumerGroupHeartbeatResponse, []Record) {
	return g.HeartbeatFrom(now, img, req, Client{})
}

// HeartbeatFrom handles one ConsumerGroupHeartbeat (v0 and v1): a join
// (epoch 0), a heartbeat (epoch > 0) or a leave (-1, or -2 for a static
// member that will be back). It returns the response, with the request's
// version, and the records to persist, in order. On an error the response
// carries Kafka's code and message, nothing changed and no records are
// returned. The group keeps no reference to req.
//
// The caller must persist the records before sending the response (as
// Kafka does: the response is sent once the records are committed), and
// should drop a group whose Epoch is still 0 afterwards: nothing created
// it.
func (g *Group) HeartbeatFrom(now int64, img *Image, req *kmsg.ConsumerGroupHeartbeatRequest, client Client) (*kmsg.ConsumerGroupHeartbeatResponse, []Record) {
	resp := req.ResponseKind().(*kmsg.ConsumerGroupHeartbeatResponse)
	err := g.validate(req)
	if err == nil {
		switch {
		case g.dead:
			err = errf(group.ErrGroupDead, "The group %s was deleted.", g.id)
		case req.MemberEpoch == epochLeave || req.MemberEpoch == epochStaticLeave:
			err = g.leave(now, img, req, resp)
		default:
			err = g.heartbeat(now, img, req, client, resp)
		}
	}
	if err != nil {
		if len(g.out) > 0 {
			panic(fmt.Sprintf("consumer: group %q: %d records emitted before error %v", g.id, len(g.out), err))
		}
		resp = req.ResponseKind().(*kmsg.ConsumerGroupHeartbeatResponse)
		resp.ErrorCode = group.ErrorCode(err)
		resp.ErrorMessage = errorMessage(err)
		return resp, nil
	}
	return resp, g.flush()
}

// blank is Kafka's Utils.throwIfEmptyString test: present, and empty once
// Java's String.trim removed the characters <= ' ' at both ends.
func blank(s string) bool {
	return strings.TrimFunc(s, func(r rune) bool { return r <= ' ' }) == ""
}

// validate applies Kafka's request checks
// (GroupCoordinatorService.throwIfConsumerGroupHeartbeatRequestIsInvalid),
// in its order, with its messages.
func (g *Group) validate(req *kmsg.ConsumerGroupHeartbeatRequest) error {
	invalid := func(msg string) error { return errf(group.ErrInvalidRequest, "%s", msg) }
	// v1 clients generate their member id (KIP-1082); v0 clients get one
	// from their join.
	if (req.Version >= 1 || req.MemberEpoch > 0 || req.MemberEpoch == epochLeave) && blank(req.MemberID) {
		return invalid("MemberId can't be empty.")
	}
	switch {
	case blank(req.Group):
		return invalid("GroupId can't be empty.")
	case req.InstanceID != nil && blank(*req.InstanceID):
		return invalid("InstanceId can't be empty.")
	case req.RackID != nil && blank(*req.RackID):
		return invalid("RackId can't be empty.")
	}
	switch {
	case req.MemberEpoch == epochJoin:
		switch {
		case req.RebalanceTimeoutMillis == -1:
			return invalid("RebalanceTimeoutMs must be provided in first request.")
		case req.Topics == nil || len(req.Topics) > 0:
			return invalid("TopicPartitions must be empty when (re-)joining.")
		case req.SubscribedTopicNames == nil && req.SubscribedTopicRegex == nil:
			return invalid("Either SubscribedTopicNames or SubscribedTopicRegex must be non-null when (re-)joining.")
		}
	case req.MemberEpoch == epochStaticLeave:
		if req.InstanceID == nil {
			return invalid("InstanceId can't be null.")
		}
	case req.MemberEpoch < epochStaticLeave:
		return invalid("MemberEpoch is invalid.")
	}
	if a := req.ServerAssignor; a != nil {
		if _, ok := g.cfg.assignor(*a); !ok {
			return errf(group.ErrUnsupportedAssignor, "ServerAssignor %s is not supported. Supported assignors: %s.",
				*a, strings.Join(g.cfg.assignorNames(), ", "))
		}
	}
	return nil
}

// joinPlan is what a heartbeat found out about its member before changing
// anything.
type joinPlan struct {
	id  string
	old *member // the member as it is in the group; nil for a new member
	// replace is the static member, gone with epoch -2, whose instance id
	// the joining member takes over (with its assignment).
	replace *member
	// rejoin: old left with epoch -2 and comes back under its own member
	// id; its epoch restarts at 0.
	rejoin bool
}

// base is the member the heartbeat starts from: the one it replaces, the
// existing one, or a new one.
func (p joinPlan) base() (memberMeta, currentState) {
	switch {
	case p.replace != nil:
		cur := p.replace.cur
		cur.epoch, cur.prevEpoch = 0, 0
		return p.replace.meta, cur
	case p.old != nil:
		cur := p.old.cur
		if p.rejoin {
			cur.epoch, cur.prevEpoch = 0, 0
		}
		return p.old.meta, cur
	}
	return memberMeta{topics: []string{}, rebalanceTimeoutMs: -1}, newMemberState()
}

// heartbeat handles a join or a regular heartbeat (Kafka's
// GroupMetadataManager.consumerGroupHeartbeat): every check first, then
// (1) the member is created or updated and the group epoch bumped if the
// subscriptions changed, (2) a new target assignment is computed if the
// group epoch moved past it, (3) the member is reconciled one step towards
// its target.
func (g *Group) heartbeat(now int64, img *Image, req *kmsg.ConsumerGroupHeartbeatRequest, client Client, resp *kmsg.ConsumerGroupHeartbeatResponse) error {
	joining := req.MemberEpoch == epochJoin
	if !joining && !g.exists() {
		return errf(group.ErrGroupNotFound, "Consumer group %s not found.", g.id)
	}
	if int64(len(g.members)) >= int64(g.cfg.MaxSize) && (req.MemberID == "" || g.members[req.MemberID] == nil) {
		return errf(group.ErrGroupMaxSize, "The consumer group has reached its maximum capacity of %d members.", g.cfg.MaxSize)
	}
	id := strings.Clone(req.MemberID)
	if id == "" {
		id = g.newMemberID()
	}
	plan, err := g.lookup(id, req)
	if err != nil {
		return err
	}
	baseMeta, baseCur := plan.base()
	if err := g.checkRegex(req, baseMeta); err != nil {
		return err
	}
	if baseCur.state == memberUnknown && (req.Topics == nil || len(req.Topics) > 0) {
		return errf(group.ErrFencedMemberEpoch, "The consumer group member is in a unknown state. The member must abandon all its partitions and rejoin.")
	}

	// Checks done: from here on the heartbeat succeeds.
	topicsBefore := g.topicsOf(baseMeta)
	if plan.replace != nil {
		g.replaceStatic(plan.replace, id)
	}
	assignedBefore := baseCur.assigned

	// 1. The member and the group epoch.
	meta := updatedMeta(baseMeta, req, client)
	if g.members[id] == nil || !meta.equal(baseMeta) {
		g.emit(memberRec{id: id, meta: meta})
	}
	namesChanged := !slices.Equal(meta.topics, baseMeta.topics)
	oldRe, newRe := baseMeta.regexOrEmpty(), meta.regexOrEmpty()
	bump := g.epoch == 0 || namesChanged
	if oldRe != newRe {
		if oldRe != "" && g.countRegex(oldRe) == 0 {
			g.emit(regexRec{regex: oldRe, tomb: true})
		}
		if newRe != "" {
			if _, ok := g.regexes[newRe]; ok {
				bump = true // Kafka: REGEX_UPDATED_AND_RESOLVED
			} else {
				// Kafka resolves a new regular expression asynchronously
				// and bumps the epoch when it matched something.
				r := g.resolve(newRe, img, now, client.MayDescribe)
				g.emit(regexRec{regex: newRe, r: r})
				bump = bump || len(r.topics) > 0
			}
		}
		// Kafka bumps for a new expression only if it matched something,
		// which leaves the partitions of the member's old subscription
		// unassigned until the next rebalance when the topics they belong
		// to stay subscribed by others. Here any change of the member's
		// topics moves the epoch.
		if !slices.Equal(topicsBefore, g.topicsOf(meta)) {
			bump = true
		}
	}
	subChanged := namesChanged || oldRe != newRe
	if bump || subChanged {
		if hash := img.MetadataHash(g.groupTopics()); hash != g.metadataHash || bump {
			g.bumpEpoch(hash)
		}
	}

	// 2. The target assignment.
	if g.epoch > g.assignmentEpoch {
		g.updateTarget(img)
	}

	// 3. Reconciliation.
	m := g.members[id]
	next := g.reconcile(m, baseCur, g.assignmentEpoch, g.target[id], subChanged, ownedOf(req.Topics), img)
	if !next.equal(m.cur) {
		g.emit(currentRec{id: id, cur: next})
		m.rebalanceDeadline = -1
		if next.state == memberUnrevoked {
			m.rebalanceDeadline = now + int64(m.meta.rebalanceTimeoutMs)
			m.rebalanceEpoch = next.epoch
		}
	}
	m.sessionDeadline = now + int64(g.cfg.SessionTimeoutMs)
	m.joinDeadline, m.syncDeadline = -1, -1

	resp.MemberID = &id
	resp.MemberEpoch = m.cur.epoch
	resp.HeartbeatIntervalMillis = g.cfg.HeartbeatIntervalMs
	// Kafka sends the assignment to a join, to a full request (a client
	// that lost track sends every field), and when it changed.
	full := req.RebalanceTimeoutMillis != -1 && (req.SubscribedTopicNames != nil || req.SubscribedTopicRegex != nil) && req.Topics != nil
	if joining || full || !assignedBefore.equal(m.cur.assigned) {
		resp.Assignment = responseAssignment(m.cur.assigned)
	}
	return nil
}

// lookup finds the member a heartbeat is for and checks its identity and
// epoch, in Kafka's order, changing nothing.
func (g *Group) lookup(id string, req *kmsg.ConsumerGroupHeartbeatRequest) (joinPlan, error) {
	p := joinPlan{id: id, old: g.members[id]}
	inst := req.InstanceID
	if req.MemberEpoch == epochJoin {
		// A known member id may not change its instance id, so that a
		// known member id on a join is always the member itself coming
		// back (the fix of Kafka PR 23542; released Kafka answers
		// UNRELEASED_INSTANCE_ID to a static member rejoining under its
		// own id).
		if p.old != nil && inst != nil && !ptr.Equal(p.old.meta.instanceID, inst) {
			return p, errf(group.ErrInvalidRequest, "Member %s can't join with instance id %s: it joined with instance id %s.",
				id, *inst, ptrOr(p.old.meta.instanceID, "null"))
		}
		if inst != nil {
			if holder, ok := g.static[*inst]; ok && holder != id {
				h := g.members[holder]
				// A classic holder is replaced whatever its epoch, as
				// Kafka does: it cannot leave with -2.
				if h.cur.epoch != epochStaticLeave && h.meta.classic == nil {
					return p, errf(group.ErrUnreleasedInstanceID, "Static member %s with instance id %s cannot join the group because the instance id is owned by %s member.",
						id, *inst, holder)
				}
				p.replace = h
			}
		}
		// A member rejoining with epoch 0 gets its current state back
		// (KAFKA-19233: the response to its join may have been lost, or it
		// was fenced and abandoned its partitions).
		p.rejoin = p.old != nil && p.old.cur.epoch == epochStaticLeave
		return p, nil
	}
	if inst == nil {
		if p.old == nil {
			return p, errf(group.ErrUnknownMember, "Member %s is not a member of group %s.", id, g.id)
		}
	} else {
		holder, ok := g.static[*inst]
		switch {
		case !ok:
			return p, errf(group.ErrUnknownMember, "Instance id %s is unknown.", *inst)
		case holder != id:
			return p, errf(group.ErrFencedInstance, "Static member %s with instance id %s was fenced by member %s.", id, *inst, holder)
		}
		p.old = g.members[holder]
	}
	return p, checkEpoch(p.old, req)
}

// checkEpoch is Kafka's throwIfConsumerGroupMemberEpochIsInvalid: the
// member's epoch, or its previous one if it owns only partitions it is
// assigned (the response that bumped its epoch was lost).
func checkEpoch(m *member, req *kmsg.ConsumerGroupHeartbeatRequest) error {
	e := req.MemberEpoch
	switch {
	case e > m.cur.epoch:
		return errf(group.ErrFencedMemberEpoch, "The consumer group member has a greater member epoch (%d) than the one known by the group coordinator (%d). The member must abandon all its partitions and rejoin.",
			e, m.cur.epoch)
	case e < m.cur.epoch && (e != m.cur.prevEpoch || !ownedSubset(req.Topics, m.cur.assigned)):
		return errf(group.ErrFencedMemberEpoch, "The consumer group member has a smaller member epoch (%d) than the one known by the group coordinator (%d). The member must abandon all its partitions and rejoin.",
			e, m.cur.epoch)
	}
	return nil
}

// ownedSubset is Kafka's isSubset: the request reports its partitions and
// every one is assigned.
func ownedSubset(owned []kmsg.ConsumerGroupHeartbeatRequestTopic, a assignment) bool {
	if owned == nil {
		return false
	}
	for _, t := range owned {
		if _, ok := a[t.TopicID]; !ok {
			return false
		}
		for _, p := range t.Partitions {
			if !a.contains(t.TopicID, p) {
				return false
			}
		}
	}
	return true
}

// ownedOf converts the request's owned partitions; nil if not reported.
func ownedOf(owned []kmsg.ConsumerGroupHeartbeatRequestTopic) assignment {
	if owned == nil {
		return nil
	}
	raw := map[TopicID][]int32{}
	for _, t := range owned {
		raw[t.TopicID] = append(raw[t.TopicID], t.Partitions...)
	}
	return normalize(raw)
}

// checkRegex compiles a regular expression new to the group, as Kafka does
// when the first member subscribes to it.
func (g *Group) checkRegex(req *kmsg.ConsumerGroupHeartbeatRequest, base memberMeta) error {
	re := req.SubscribedTopicRegex
	if re == nil || *re == "" || *re == base.regexOrEmpty() || g.countRegex(*re) > 0 {
		return nil
	}
	if _, err := g.compile(*re); err != nil {
		return errf(group.ErrInvalidRegularExpression, "SubscribedTopicRegex `%s` is not a valid regular expression: %s.", *re, regexErrorDescription(err))
	}
	return nil
}

// updatedMeta is base with what the request changes: a null field means
// unchanged. The client id and host are always the connection's.
func updatedMeta(base memberMeta, req *kmsg.ConsumerGroupHeartbeatRequest, client Client) memberMeta {
	m := base
	if req.InstanceID != nil {
		m.instanceID = cloneString(req.InstanceID)
	}
	if req.RackID != nil {
		m.rackID = cloneString(req.RackID)
	}
	if req.RebalanceTimeoutMillis != -1 {
		m.rebalanceTimeoutMs = req.RebalanceTimeoutMillis
	}
	if req.ServerAssignor != nil {
		m.assignor = cloneString(req.ServerAssignor)
	}
	if req.SubscribedTopicNames != nil {
		m.topics = sortedNames(req.SubscribedTopicNames)
		for i, t := range m.topics {
			m.topics[i] = strings.Clone(t)
		}
	}
	if req.SubscribedTopicRegex != nil {
		m.regex = cloneString(req.SubscribedTopicRegex)
	}
	m.clientID, m.clientHost = strings.Clone(client.ID), strings.Clone(client.Host)
	// A member heartbeating with this protocol uses it from now on (Kafka
	// drops the classic member metadata).
	m.classic = nil
	return m
}

// replaceStatic writes the records of a joining member taking over the
// instance id (and the assignment) of old, which left with epoch -2
// (Kafka's replaceMember).
func (g *Group) replaceStatic(old *member, id string) {
	meta, cur := old.meta, old.cur
	cur.epoch, cur.prevEpoch = 0, 0
	target := g.target[old.id]
	if target == nil {
		target = assignment{}
	}
	g.removeMember(old.id)
	g.emit(memberRec{id: id, meta: meta})
	g.emit(targetMemberRec{id: id, a: target})
	g.emit(currentRec{id: id, cur: cur})
}

// removeMember writes a member's tombstones, in Kafka's order.
func (g *Group) removeMember(id string) {
	g.emit(currentRec{id: id, tomb: true})
	g.emit(targetMemberRec{id: id, tomb: true})
	g.emit(memberRec{id: id, tomb: true})
}

// bumpEpoch moves the group epoch on, with the subscribed topics'
// fingerprint.
func (g *Group) bumpEpoch(hash int64) {
	g.emit(groupRec{epoch: g.epoch + 1, hash: hash})
	if g.partitionMeta {
		g.emit(partitionMetaRec{tomb: true})
	}
}

// leave handles epoch -1 (leave) and -2 (a static member leaves for now,
// keeping its assignment until its session expires), as Kafka's
// consumerGroupLeave.
func (g *Group) leave(now int64, img *Image, req *kmsg.ConsumerGroupHeartbeatRequest, resp *kmsg.ConsumerGroupHeartbeatResponse) error {
	if !g.exists() {
		return errf(group.ErrGroupNotFound, "Group %s not found.", g.id)
	}
	var m *member
	if inst := req.InstanceID; inst == nil {
		if m = g.members[req.MemberID]; m == nil {
			return errf(group.ErrUnknownMember, "Member %s is not a member of group %s.", req.MemberID, g.id)
		}
	} else {
		holder, ok := g.static[*inst]
		switch {
		case !ok:
			return errf(group.ErrUnknownMember, "Instance id %s is unknown.", *inst)
		case holder != req.MemberID:
			return errf(group.ErrFencedInstance, "Static member %s with instance id %s was fenced by member %s.", req.MemberID, *inst, holder)
		}
		m = g.members[holder]
	}
	id := strings.Clone(req.MemberID)
	resp.MemberID, resp.MemberEpoch = &id, req.MemberEpoch
	if req.InstanceID != nil && req.MemberEpoch == epochStaticLeave {
		cur := m.cur
		cur.epoch = epochStaticLeave
		cur.revoking = assignment{}
		// Whoever takes the instance id over starts at epoch 0 and holds
		// the partitions from then (Kafka 4.3's
		// resetAssignedPartitionsEpochsToZero).
		cur.since = epochsOf(cur.assigned, 0)
		g.emit(currentRec{id: m.id, cur: cur})
		m.rebalanceDeadline = -1
		return nil
	}
	g.fence(now, m.id, img)
	return nil
}

// fence removes a member (it left, its session expired, or it did not
// revoke, rejoin or sync in time) and bumps the group epoch, as Kafka's
// consumerGroupFenceMember; when the member was the last one using
// ConsumerGroupHeartbeat, the group becomes a classic group instead
// (convert.go).
func (g *Group) fence(now int64, id string, img *Image) {
	if g.canDowngrade(id) {
		g.downgrade(now, id, img)
		return
	}
	re := g.members[id].meta.regexOrEmpty()
	g.removeMember(id)
	if re != "" && g.countRegex(re) == 0 {
		g.emit(regexRec{regex: re, tomb: true})
	}
	g.bumpEpoch(img.MetadataHash(g.groupTopics()))
}

// newMemberID generates a member id for a v0 join: 22 characters of
// base64url, like Kafka's random Uuid, but a function of the group, the
// nonce and a counter, so tests repeat.
func (g *Group) newMemberID() string {
	for {
		g.nextID++
		sum := sha256.Sum256(fmt.Appendf(nil, "%s\x00%s\x00%d", g.cfg.MemberIDNonce, g.id, g.nextID))
		id := base64.RawURLEncoding.EncodeToString(sum[:16])
		if g.members[id] == nil {
			return id
		}
	}
}

func responseAssignment(a assignment) *kmsg.ConsumerGroupHeartbeatResponseAssignment {
	ra := kmsg.NewConsumerGroupHeartbeatResponseAssignment()
	ra.Topics = []kmsg.ConsumerGroupHeartbeatResponseAssignmentTopic{}
	for _, t := range a.topics() {
		rt := kmsg.NewConsumerGroupHeartbeatResponseAssignmentTopic()
		rt.TopicID = t
		rt.Partitions = slices.Clone(a[t])
		ra.Topics = append(ra.Topics, rt)
	}
	return &ra
}

func ptrOr(s *string, def string) string {
	if s == nil {
		return def
	}
	return *s
}
