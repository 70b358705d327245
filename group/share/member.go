package share

import (
	"slices"

	"github.com/fjordlog/fjord/group/internal/ptr"
)

// memberMeta is what ShareGroupMemberMetadataValue stores of a member.
//
// Invariant: topics sorted and distinct, no empty names.
type memberMeta struct {
	rack       *string // the client's rack (client.rack); nil if never sent
	clientID   string
	clientHost string
	topics     []string // subscribed topic names
}

func (m memberMeta) equal(o memberMeta) bool {
	return ptr.Equal(m.rack, o.rack) && m.clientID == o.clientID && m.clientHost == o.clientHost &&
		slices.Equal(m.topics, o.topics)
}

// currentState is what ShareGroupCurrentMemberAssignmentValue stores: the
// member's epoch and the partitions it was last given.
type currentState struct {
	epoch     int32 // the epoch the member must send; -1 only between a leave's tombstones
	prevEpoch int32 // the epoch before the last bump, also accepted (its response may be lost)
	state     int8  // Kafka's MemberState; memberStateStable for every live member
	assigned  assignment
}

func (c currentState) equal(o currentState) bool {
	return c.epoch == o.epoch && c.prevEpoch == o.prevEpoch && c.state == o.state && c.assigned.equal(o.assigned)
}

// newCurrentState is a member before its first assignment, as Kafka's
// ShareGroupMember.Builder makes it: epoch 0, previous epoch -1.
func newCurrentState() currentState {
	return currentState{epoch: 0, prevEpoch: -1, state: memberStateStable, assigned: assignment{}}
}

// member is one member of the group.
//
// Invariants (after every complete step): epoch >= 0; state is
// memberStateStable; assigned normalized and only names topics the member
// subscribed to when it was last reconciled.
type member struct {
	id string
	memberMeta
	currentState

	// deadline is when the member's session expires (unix ms), pushed back
	// by every successful heartbeat. 0: not scheduled, which is the case
	// only after Replay and before Loaded. Not persisted: Loaded starts
	// every session afresh, as Kafka does when it loads a group.
	deadline int64
}
