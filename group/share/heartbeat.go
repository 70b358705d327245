package share

import (
	"fmt"
	"slices"
	"strings"

	"github.com/fjordlog/fjord/group"
	"github.com/fjordlog/fjord/group/assign"
	"github.com/fjordlog/fjord/group/internal/ptr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Client is what the coordinator knows of the connection a request came
// on; Kafka keeps both with the member (ShareGroupMemberMetadataValue) and
// ShareGroupDescribe reports them.
type Client struct {
	ID   string // the request header's client id
	Host string // the client's address as Kafka prints it: "/" + IP
}

// leaveEpoch is the member epoch a member leaves the group with.
const leaveEpoch = -1

// apiError is a refusal: a group sentinel (for the error code, through
// group.ErrorCode) and the message Kafka sends with it.
type apiError struct {
	err error
	msg string
}

func (e *apiError) Error() string { return "share: " + e.msg }
func (e *apiError) Unwrap() error { return e.err }

func refuse(err error, format string, args ...any) error {
	return &apiError{err: err, msg: fmt.Sprintf(format, args...)}
}

// Heartbeat is HeartbeatFrom with an empty Client.
func (g *Group) Heartbeat(now int64, img *Image, req *kmsg.ShareGroupHeartbeatRequest) (*kmsg.ShareGroupHeartbeatResponse, []Record) {
	return g.HeartbeatFrom(now, img, req, Client{})
}

// HeartbeatFrom handles a ShareGroupHeartbeat (v0 and v1): a join (epoch
// 0), a heartbeat (the member's epoch), or a leave (epoch -1). It returns
// the response, with the request's version, and the records the caller
// must append to the offsets topic before it sends the response. A refused
// request returns no records and changes nothing. The group keeps no
// reference to req.
//
// Order of checks, as Kafka 4.2's: the request's own fields
// (INVALID_REQUEST with Kafka's messages); then for a leave that the
// member exists; otherwise the group's size (GROUP_MAX_SIZE_REACHED for a
// member that is not in it), the member (UNKNOWN_MEMBER_ID unless
// joining), its epoch (FENCED_MEMBER_EPOCH). The caller answers
// GROUP_ID_NOT_FOUND itself for a group it does not have unless the epoch
// is 0, and for a group id that belongs to another type of group; it
// should drop a group whose Epoch is still 0 after the call (nothing
// created it).
//
// A successful heartbeat updates the member's subscription, client and
// rack, bumps the group epoch if they or the subscribed topics changed,
// computes a new target assignment if the epoch moved past the last one,
// moves the member to it at once (share groups have no revocation), and
// restarts its session. The response carries the assignment when the
// member joined, sent its subscription (a full request), or got a new one.
func (g *Group) HeartbeatFrom(now int64, img *Image, req *kmsg.ShareGroupHeartbeatRequest, cl Client) (*kmsg.ShareGroupHeartbeatResponse, []Record) {
	resp := req.ResponseKind().(*kmsg.ShareGroupHeartbeatResponse)
	err := g.validate(req)
	if err == nil {
		switch {
		case g.dead:
			err = refuse(group.ErrGroupDead, "The group %s was deleted.", g.id)
		case req.MemberEpoch == leaveEpoch:
			err = g.leave(img, req, resp)
		default:
			err = g.heartbeat(now, img, req, cl, resp)
		}
	}
	if err != nil {
		if len(g.out) > 0 {
			panic(fmt.Sprintf("share: group %q: refused a heartbeat after emitting records: %v", g.id, err))
		}
		resp = req.ResponseKind().(*kmsg.ShareGroupHeartbeatResponse)
		resp.ErrorCode = group.ErrorCode(err)
		if ae, ok := err.(*apiError); ok {
			resp.ErrorMessage = &ae.msg
		}
		return resp, nil
	}
	return resp, g.flush()
}

// blank is Kafka's Utils.throwIfEmptyString test: present, and empty once
// Java's String.trim removed the characters <= ' ' at both ends.
func blank(s string) bool {
	return strings.TrimFunc(s, func(r rune) bool { return r <= ' ' }) == ""
}

// validate is Kafka's GroupCoordinatorService.throwIfShareGroupHeartbeat
// RequestIsInvalid, which runs before the group is looked at.
func (g *Group) validate(req *kmsg.ShareGroupHeartbeatRequest) error {
	switch {
	case blank(req.MemberID):
		return refuse(group.ErrInvalidRequest, "MemberId can't be empty.")
	case blank(req.GroupID):
		return refuse(group.ErrInvalidRequest, "GroupId can't be empty.")
	case req.RackID != nil && blank(*req.RackID):
		return refuse(group.ErrInvalidRequest, "RackId can't be empty.")
	case req.MemberEpoch == 0 && len(req.SubscribedTopicNames) == 0:
		return refuse(group.ErrInvalidRequest, "SubscribedTopicNames must be set in first request.")
	case req.MemberEpoch < leaveEpoch:
		return refuse(group.ErrInvalidRequest, "MemberEpoch is invalid.")
	case req.GroupID != g.id:
		// The coordinator routes by group id; this is its bug, refused
		// rather than applied to the wrong group.
		return refuse(group.ErrInvalidRequest, "GroupId %s sent to share group %s.", req.GroupID, g.id)
	}
	return nil
}

// leave is Kafka's shareGroupLeave: the member is removed whatever epoch
// it is at.
func (g *Group) leave(img *Image, req *kmsg.ShareGroupHeartbeatRequest, resp *kmsg.ShareGroupHeartbeatResponse) error {
	m := g.members[req.MemberID]
	if m == nil {
		return refuse(group.ErrUnknownMember, "Member %s is not a member of group %s.", req.MemberID, g.id)
	}
	g.remove(img, m)
	id := req.MemberID
	resp.MemberID = &id
	resp.MemberEpoch = leaveEpoch
	return nil
}

// remove is Kafka's shareGroupFenceMember: tombstones for the member's
// current assignment, target and metadata, in that order, then a new group
// epoch with the metadata hash of the remaining subscriptions. The target
// assignment of the others is recomputed by the next heartbeat.
func (g *Group) remove(img *Image, m *member) {
	g.emit(record{typ: typeCurrentAssignment, member: m.id, tomb: true})
	g.emit(record{typ: typeTargetMember, member: m.id, tomb: true})
	g.emit(record{typ: typeMemberMetadata, member: m.id, tomb: true})
	g.emit(record{typ: typeGroupMetadata, epoch: g.epoch + 1, hash: img.MetadataHash(g.subscribedNames())})
	g.left = append(g.left, m.id)
}

func (g *Group) heartbeat(now int64, img *Image, req *kmsg.ShareGroupHeartbeatRequest, cl Client, resp *kmsg.ShareGroupHeartbeatResponse) error {
	joining := req.MemberEpoch == 0
	m := g.members[req.MemberID]
	if m == nil && int64(len(g.members)) >= int64(g.cfg.MaxSize) {
		return refuse(group.ErrGroupMaxSize, "The share group has reached its maximum capacity of %d members.", g.cfg.MaxSize)
	}
	if m == nil && !joining {
		return refuse(group.ErrUnknownMember, "Member %s is not a member of group %s.", req.MemberID, g.id)
	}
	if m != nil && !joining {
		// Kafka's throwIfShareGroupMemberEpochIsInvalid. Epoch 0 from a
		// member is a rejoin after it was fenced (KAFKA-19233) and passes.
		switch {
		case req.MemberEpoch > m.epoch:
			return refuse(group.ErrFencedMemberEpoch, "The share group member has a greater member epoch (%d) than the one known by the group coordinator (%d). The member must abandon all its partitions and rejoin.",
				req.MemberEpoch, m.epoch)
		case req.MemberEpoch < m.epoch && req.MemberEpoch != m.prevEpoch:
			return refuse(group.ErrFencedMemberEpoch, "The share group member has a smaller member epoch (%d) than the one known by the group coordinator (%d), and it does not match the previous member epoch (%d). The member must abandon all its partitions and rejoin.",
				req.MemberEpoch, m.epoch, m.prevEpoch)
		}
	}

	// 1. The member: its metadata record if anything changed, and a new
	// group epoch if its subscription or the subscribed topics did.
	var old memberMeta
	var oldAssigned assignment
	if m != nil {
		old, oldAssigned = m.memberMeta, m.assigned
	}
	meta := memberMeta{rack: ptr.Clone(old.rack), clientID: cl.ID, clientHost: cl.Host, topics: old.topics}
	if req.RackID != nil {
		meta.rack = ptr.Clone(req.RackID)
	}
	if req.SubscribedTopicNames != nil {
		meta.topics = sortedTopics(req.SubscribedTopicNames)
	}
	bump := false
	if m == nil || !meta.equal(old) {
		g.emit(record{typ: typeMemberMetadata, member: req.MemberID, meta: meta})
		bump = m == nil || !slices.Equal(meta.topics, old.topics)
		m = g.members[req.MemberID]
	}
	// Kafka recomputes the hash when the subscription changed or its
	// metadata refresh deadline passed (at once after a metadata image
	// change touched a subscribed topic); recomputing it every time is the
	// same with the deadline always passed.
	if hash := img.MetadataHash(g.subscribedNames()); bump || hash != g.hash {
		bump = true
		g.emit(record{typ: typeGroupMetadata, epoch: g.epoch + 1, hash: hash})
	}

	// 2. A new target assignment if the group epoch moved past it.
	if g.epoch > g.targetEpoch {
		g.assign(img)
	}

	// 3. The member moves to the target at once.
	g.reconcile(img, m, bump)

	// Share-partition state for what the group now subscribes to.
	g.updateStatePartitions(img)

	m.deadline = now + int64(g.cfg.SessionTimeoutMs)
	id := m.id
	resp.MemberID = &id
	resp.MemberEpoch = m.epoch
	resp.HeartbeatIntervalMillis = g.cfg.HeartbeatIntervalMs
	if joining || req.SubscribedTopicNames != nil || !m.assigned.equal(oldAssigned) {
		a := kmsg.NewShareGroupHeartbeatResponseAssignment()
		a.TopicPartitions = []kmsg.ShareGroupHeartbeatResponseAssignmentTopicPartition{}
		for _, t := range m.assigned.topics() {
			tp := kmsg.NewShareGroupHeartbeatResponseAssignmentTopicPartition()
			tp.TopicID = t
			tp.Partitions = slices.Clone(m.assigned[t])
			a.TopicPartitions = append(a.TopicPartitions, tp)
		}
		resp.Assignment = &a
	}
	return nil
}

// assign computes the target assignment for the group epoch with the
// configured assignor, as Kafka's TargetAssignmentBuilder: a record for
// every member whose target changed (a new member's included, even if
// empty), then the target epoch.
func (g *Group) assign(img *Image) {
	topics := img.Resolve(g.subscribedNames())
	spec := assign.Spec{Topics: make([]assign.Topic, 0, len(topics))}
	for _, t := range topics {
		spec.Topics = append(spec.Topics, assign.Topic{ID: t.ID, Name: t.Name, Partitions: t.Partitions})
	}
	for _, id := range g.memberIDs() {
		m := g.members[id]
		sub := map[TopicID]bool{}
		am := assign.Member{ID: id, Rack: ptr.Clone(m.rack)}
		for _, t := range img.Resolve(m.topics) {
			am.Subscribed = append(am.Subscribed, t.ID)
			sub[t.ID] = true
		}
		am.Current = g.target[id].onlyTopics(sub).clone()
		spec.Members = append(spec.Members, am)
	}
	result := g.cfg.Assignor.Assign(spec)
	for _, id := range g.memberIDs() {
		next := normalize(result[id])
		if cur, ok := g.target[id]; !ok || !cur.equal(next) {
			g.emit(record{typ: typeTargetMember, member: id, a: next})
		}
	}
	g.emit(record{typ: typeTargetMetadata, epoch: g.epoch})
}

// reconcile is Kafka's ShareGroupAssignmentBuilder: a member behind the
// target epoch moves to it with its target, limited to the topics it
// subscribes to; one whose subscription changed (bump) gets its target
// limited again. A record if anything changed.
func (g *Group) reconcile(img *Image, m *member, bump bool) {
	if !bump && m.state == memberStateStable && m.epoch == g.targetEpoch {
		return
	}
	sub := map[TopicID]bool{}
	for _, t := range img.Resolve(m.topics) {
		sub[t.ID] = true
	}
	next := m.currentState
	switch {
	case m.epoch != g.targetEpoch:
		next = currentState{
			epoch:     g.targetEpoch,
			prevEpoch: m.epoch,
			state:     memberStateStable,
			assigned:  g.target[m.id].onlyTopics(sub),
		}
	case bump:
		next.assigned = g.target[m.id].onlyTopics(sub)
	}
	if !next.equal(m.currentState) {
		g.emit(record{typ: typeCurrentAssignment, member: m.id, cur: next})
	}
}
