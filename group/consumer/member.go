package consumer

import (
	"bytes"
	"slices"
	"strings"

	"github.com/fjordlog/fjord/group/internal/ptr"
)

// memberState is Kafka's MemberState, stored as an int8 in
// ConsumerGroupCurrentMemberAssignmentValue.
type memberState int8

const (
	// memberStable: the member owns exactly its share of the target
	// assignment of its epoch (or is converging towards a newer one that
	// it has not been told about yet).
	memberStable memberState = 0
	// memberUnrevoked: the member must stop consuming the partitions in
	// revoking before it moves to the next epoch. Its rebalance timeout
	// runs.
	memberUnrevoked memberState = 1
	// memberUnreleased: the member is at the target epoch but waits for
	// partitions that other members still own.
	memberUnreleased memberState = 2
	// memberUnknown: a state value this version does not know (written by
	// a newer coordinator). Such a member is reconciled from scratch when
	// it rejoins; a heartbeat that still owns partitions is fenced.
	memberUnknown memberState = 127
)

func (s memberState) String() string {
	switch s {
	case memberStable:
		return "stable"
	case memberUnrevoked:
		return "unrevoked"
	case memberUnreleased:
		return "unreleased"
	}
	return "unknown"
}

func memberStateOf(v int8) memberState {
	switch s := memberState(v); s {
	case memberStable, memberUnrevoked, memberUnreleased:
		return s
	}
	return memberUnknown
}

// Member epochs with a meaning of their own (ConsumerGroupHeartbeat's
// MemberEpoch).
const (
	epochJoin        int32 = 0
	epochLeave       int32 = -1 // also the epoch of a member whose assignment was tombstoned
	epochStaticLeave int32 = -2
)

// memberMeta is what ConsumerGroupMemberMetadataValue stores: the member's
// identity and subscription, as of its latest heartbeat.
//
// Invariant: topics sorted and distinct, non-nil.
type memberMeta struct {
	instanceID *string
	rackID     *string
	clientID   string
	clientHost string
	topics     []string
	// regex is SubscribedTopicRegex; nil and "" both mean none, but the
	// record keeps the difference.
	regex              *string
	rebalanceTimeoutMs int32
	assignor           *string // ServerAssignor; nil: none named
	// classic is ClassicMemberMetadata (tag 0): set for a member that uses
	// the classic protocol (JoinGroup, SyncGroup, Heartbeat, LeaveGroup),
	// nil for one that uses ConsumerGroupHeartbeat.
	classic *classicMeta
}

// classicMeta is what a classic-protocol member told its latest JoinGroup
// beyond its subscription: its session timeout and every protocol it
// supports, in its order of preference, with their metadata (each an
// encoded ConsumerProtocolSubscription).
//
// Invariant: protocols non-empty; never modified once stored.
type classicMeta struct {
	sessionTimeoutMs int32
	protocols        []classicProtocol
}

type classicProtocol struct {
	name     string
	metadata []byte
}

func (c *classicMeta) equal(o *classicMeta) bool {
	if c == nil || o == nil {
		return c == o
	}
	return c.sessionTimeoutMs == o.sessionTimeoutMs && slices.EqualFunc(c.protocols, o.protocols, func(a, b classicProtocol) bool {
		return a.name == b.name && bytes.Equal(a.metadata, b.metadata)
	})
}

// supports reports whether the classic member lists protocol name.
func (c *classicMeta) supports(name string) bool {
	return slices.ContainsFunc(c.protocols, func(p classicProtocol) bool { return p.name == name })
}

func (m memberMeta) equal(o memberMeta) bool {
	return ptr.Equal(m.instanceID, o.instanceID) && ptr.Equal(m.rackID, o.rackID) &&
		m.clientID == o.clientID && m.clientHost == o.clientHost &&
		slices.Equal(m.topics, o.topics) && ptr.Equal(m.regex, o.regex) &&
		m.rebalanceTimeoutMs == o.rebalanceTimeoutMs && ptr.Equal(m.assignor, o.assignor) &&
		m.classic.equal(o.classic)
}

// regexOrEmpty is the member's regular expression, "" for none.
func (m memberMeta) regexOrEmpty() string {
	if m.regex == nil {
		return ""
	}
	return *m.regex
}

// currentState is what ConsumerGroupCurrentMemberAssignmentValue stores:
// where the member is in its reconciliation.
//
// Invariants (after every step): assigned and revoking are disjoint;
// revoking is empty unless state is memberUnrevoked; since has exactly
// the partitions of assigned and revoking (see partitionEpochs).
type currentState struct {
	epoch     int32
	prevEpoch int32 // the epoch before the last bump: a heartbeat at it is accepted if it lost the response
	state     memberState
	assigned  assignment // partitions the member may consume
	revoking  assignment // partitions it must stop consuming first
	// since: the assignment epoch of every partition of assigned and
	// revoking (KIP-1251), stored in the record as tag 0 of each
	// TopicPartitions entry.
	since partitionEpochs
}

func (c currentState) equal(o currentState) bool {
	return c.epoch == o.epoch && c.prevEpoch == o.prevEpoch && c.state == o.state &&
		c.assigned.equal(o.assigned) && c.revoking.equal(o.revoking) && c.since.equal(o.since)
}

// reconciledTo reports whether the member has fully reached the target
// assignment of epoch e (Kafka's isReconciledTo).
func (c currentState) reconciledTo(e int32) bool {
	return c.epoch == e && c.state == memberStable
}

// newMemberState is a member that the records have not assigned yet
// (Kafka's ConsumerGroupMember.Builder defaults).
func newMemberState() currentState {
	return currentState{epoch: 0, prevEpoch: -1, state: memberStable, assigned: assignment{}, revoking: assignment{}, since: partitionEpochs{}}
}

// member is one member of a consumer group.
//
// meta and cur are the member's durable state, changed only by applying a
// record (apply.go). The deadlines are soft state, rebuilt by Loaded.
type member struct {
	id   string
	meta memberMeta
	cur  currentState

	// sessionDeadline: Tick at now >= sessionDeadline removes the member.
	// Set to now + the session timeout by every successful heartbeat and by
	// Loaded; as in Kafka, a leave with epoch -2 does not set it, so a
	// static member that left is removed a session after its last
	// heartbeat.
	sessionDeadline int64
	// rebalanceDeadline (-1: none) is armed when the member enters
	// memberUnrevoked at epoch rebalanceEpoch; Tick at now >=
	// rebalanceDeadline removes the member if it is still at that epoch.
	// Invariant: >= 0 whenever revoking is non-empty (except on a
	// group being loaded, before Loaded).
	rebalanceDeadline int64
	rebalanceEpoch    int32

	// joinDeadline and syncDeadline (-1: none) bound a classic member's
	// rebalance instead (Kafka's join and sync timers): joinDeadline is
	// armed when a heartbeat or SyncGroup tells it to rejoin, and cleared
	// by its JoinGroup; syncDeadline is armed by its JoinGroup and
	// cleared by its SyncGroup. Tick at either removes the member.
	joinDeadline int64
	syncDeadline int64
}

// sessionTimeout is the member's session timeout: its JoinGroup's for a
// classic member, else the group's.
func (g *Group) sessionTimeout(m *member) int64 {
	if m.meta.classic != nil {
		return int64(m.meta.classic.sessionTimeoutMs)
	}
	return int64(g.cfg.SessionTimeoutMs)
}

// cloneString copies a request's string, which may alias the request's
// buffer (kmsg's UnsafeReadFrom).
func cloneString(p *string) *string {
	if p == nil {
		return nil
	}
	v := strings.Clone(*p)
	return &v
}
