package share

import (
	"fmt"
	"maps"
	"slices"

	"github.com/fjordlog/fjord/group"
	"github.com/fjordlog/fjord/group/internal/ptr"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Group is one share group's membership state machine. See the package
// documentation for its states, records and departures from Kafka.
//
// Steps: every mutating call (Heartbeat, MetadataChanged, Tick, Delete)
// decides on records, applies each to the group through the same code
// Replay uses (apply.go), and returns them; the caller appends them to the
// offsets topic. What a group is, is therefore exactly what its records
// say, plus two soft fields: the members' session deadlines and Left's
// list.
//
// Invariants (checked by checkInvariants in tests after every step):
//   - Dead: no members, no targets, no share-partition state.
//   - Otherwise Empty iff no members; Stable iff some.
//   - The target assignment has an entry for every member and none other.
//   - Every member has epoch >= 0 and <= targetEpoch <= epoch, state
//     Stable, subscribed topics sorted and distinct; a member at
//     targetEpoch holds a subset of its target.
//   - Every assignment is normalized (assignment.go); sp's lists are
//     sorted by topic id.
//   - A member's session deadline is 0 only between Replay and Loaded.
//
// Alternatives rejected: Kafka's timeline data structures (snapshots that
// a failed write rolls back) are not needed, because the caller appends
// the records before it answers and drops the whole Group if the append
// fails, reloading it from the log. Session timers are deadlines compared
// in Tick, as in the classic group package.
type Group struct {
	id   string
	cfg  Config
	dead bool

	// epoch is the group epoch, bumped when a member joins, leaves or
	// changes its subscription, or the subscribed topics change.
	epoch int32
	// hash is the metadata hash (topics.Image.MetadataHash) of the
	// subscribed topics when epoch was last bumped.
	hash int64
	// targetEpoch is the group epoch the target assignment was computed
	// for; the next heartbeat computes a new one when epoch > targetEpoch.
	targetEpoch int32
	// target is the target assignment: member id to the partitions the
	// assignor gave it at targetEpoch.
	target map[string]assignment

	members map[string]*member

	// sp is the group's ShareGroupStatePartitionMetadata: the
	// share-partitions whose state this group has.
	sp statePartitions

	left []string // members removed since the last Left call, in order
	out  []Record // records of the current call
}

// New returns an Empty share group with epoch 0. It panics if cfg fails
// Validate.
func New(id string, cfg Config) *Group {
	if err := cfg.Validate(); err != nil {
		panic(fmt.Sprintf("share: New(%q): %v", id, err))
	}
	g := &Group{id: id, cfg: cfg}
	g.reset()
	return g
}

// ID is the group id.
func (g *Group) ID() string { return g.id }

// State is Kafka's share group state: "Empty" (no members), "Stable"
// (members) or "Dead" (deleted: the caller drops the Group).
func (g *Group) State() string {
	switch {
	case g.dead:
		return "Dead"
	case len(g.members) == 0:
		return "Empty"
	}
	return "Stable"
}

// Epoch is the group epoch.
func (g *Group) Epoch() int32 { return g.epoch }

// AssignmentEpoch is the epoch of the target assignment: behind Epoch
// until a heartbeat computes the target for it.
func (g *Group) AssignmentEpoch() int32 { return g.targetEpoch }

// exists reports whether the group exists in Kafka's sense: some record
// created it and it was not deleted.
func (g *Group) exists() bool { return !g.dead && (g.epoch > 0 || len(g.members) > 0) }

// NumMembers is the number of members.
func (g *Group) NumMembers() int { return len(g.members) }

// NextDeadline is the earliest session expiry (unix ms), when Tick next has
// something to do; -1 if none.
func (g *Group) NextDeadline() int64 {
	next := int64(-1)
	for _, m := range g.members {
		if m.deadline > 0 && (next < 0 || m.deadline < next) {
			next = m.deadline
		}
	}
	return next
}

// Left returns the members removed since the last call (left with epoch
// -1 or their session expired), in removal order, and forgets them. The
// coordinator releases the records they hold acquired. A member that left
// and joined again since the last call is listed although it is a member.
func (g *Group) Left() []string {
	l := g.left
	g.left = nil
	return l
}

// IsMember reports whether memberID is a member and, for epoch >= 0,
// whether epoch is one its heartbeats may send (its current or previous
// epoch): nil, ErrGroupDead, ErrUnknownMember or ErrFencedMemberEpoch.
// epoch < 0 skips the epoch check.
//
// Kafka's ShareFetch and ShareAcknowledge do not ask the group coordinator
// anything: the share-partition leader may be another broker, the requests
// carry the member id but no member epoch, and any member id of the right
// form may fetch (the records it acquires are locked to its id). This is
// here for a coordinator that wants to be stricter, for instance to refuse
// fetches from members it has removed; doing so departs from Kafka.
func (g *Group) IsMember(memberID string, epoch int32) error {
	if g.dead {
		return group.ErrGroupDead
	}
	m := g.members[memberID]
	if m == nil {
		return fmt.Errorf("%w: member %s is not a member of share group %s", group.ErrUnknownMember, memberID, g.id)
	}
	if epoch >= 0 && epoch != m.epoch && epoch != m.prevEpoch {
		return fmt.Errorf("%w: member %s of share group %s is at epoch %d (previously %d), not %d",
			group.ErrFencedMemberEpoch, memberID, g.id, m.epoch, m.prevEpoch, epoch)
	}
	return nil
}

// Assigned returns a copy of the partitions memberID was last given (nil
// if it is not a member).
//
// Kafka does not restrict ShareFetch to assigned partitions: a member may
// fetch from any partition of the group, and one whose partition was
// reassigned keeps acknowledging (and renewing) the records it acquired
// there. The assignment only says where the member should fetch.
func (g *Group) Assigned(memberID string) map[TopicID][]int32 {
	m := g.members[memberID]
	if m == nil {
		return nil
	}
	return m.assigned.clone()
}

// SubscribedPartitions returns every partition of every topic in img that
// some member subscribes to, partitions sorted: the share-partitions whose
// state must exist (Kafka initializes exactly these through its share
// coordinator, see doc.go). Once the target assignment is current it is
// also the set of partitions some member is assigned, because the simple
// assignor gives every subscribed partition at least one member. The
// caller owns the map.
func (g *Group) SubscribedPartitions(img *Image) map[TopicID][]int32 {
	out := map[TopicID][]int32{}
	for _, t := range img.Resolve(g.subscribedNames()) {
		ps := make([]int32, t.Partitions)
		for i := range ps {
			ps[i] = int32(i)
		}
		out[t.ID] = ps
	}
	return out
}

// Initialized returns the share-partitions the group's
// ShareGroupStatePartitionMetadata lists as initialized: every partition
// some member subscribed to since the group was created, less those of
// deleted topics. DeleteGroups must delete their state. The caller owns the
// map.
func (g *Group) Initialized() map[TopicID][]int32 {
	out := map[TopicID][]int32{}
	for _, t := range g.sp.initialized {
		out[t.id] = slices.Clone(t.parts)
	}
	return out
}

// Describe returns the group as ShareGroupDescribe reports it: members
// sorted by id, their assignments' topics sorted by id with names from img
// (topics img does not have are left out, as in Kafka). A group that does
// not exist (Dead, or never created) is GROUP_ID_NOT_FOUND.
// AuthorizedOperations is left at kmsg's default for the caller.
func (g *Group) Describe(img *Image) kmsg.ShareGroupDescribeResponseGroup {
	d := kmsg.NewShareGroupDescribeResponseGroup()
	d.GroupID = g.id
	if !g.exists() {
		d.ErrorCode = kerr.GroupIDNotFound.Code
		msg := fmt.Sprintf("Group %s not found.", g.id)
		d.ErrorMessage = &msg
		return d
	}
	d.GroupState = g.State()
	d.GroupEpoch = g.epoch
	d.AssignmentEpoch = g.targetEpoch
	d.Assignor = g.cfg.Assignor.Name()
	for _, id := range g.memberIDs() {
		m := g.members[id]
		dm := kmsg.NewShareGroupDescribeResponseGroupMember()
		dm.MemberID = m.id
		dm.RackID = ptr.Clone(m.rack)
		dm.MemberEpoch = m.epoch
		dm.ClientID = m.clientID
		dm.ClientHost = m.clientHost
		dm.SubscribedTopicNames = slices.Clone(m.topics)
		for _, t := range m.assigned.topics() {
			topic, ok := img.ByID(t)
			if !ok {
				continue
			}
			tp := kmsg.NewShareGroupDescribeResponseGroupMemberAssignmentTopicPartition()
			tp.TopicID = t
			tp.Topic = topic.Name
			tp.Partitions = slices.Clone(m.assigned[t])
			dm.Assignment.TopicPartitions = append(dm.Assignment.TopicPartitions, tp)
		}
		d.Members = append(d.Members, dm)
	}
	return d
}

// Delete ends an Empty group (DeleteGroups): it returns the tombstones the
// caller appends, and the group is Dead (the caller drops it). Before, the
// caller deletes the state of the Initialized share-partitions, as Kafka
// does through its share coordinator. ErrNonEmptyGroup if the group has
// members; ErrGroupNotFound if it does not exist (Dead, or never created).
func (g *Group) Delete() ([]Record, error) {
	switch {
	case !g.exists():
		return nil, refuse(group.ErrGroupNotFound, "Group %s not found.", g.id)
	case len(g.members) > 0:
		return nil, refuse(group.ErrNonEmptyGroup, "The group is not empty.")
	}
	// Kafka's ShareGroup.createGroupTombstoneRecords, in its order; an
	// Empty group has no member records left to tombstone.
	g.emit(record{typ: typeTargetMetadata, tomb: true})
	g.emit(record{typ: typeStatePartitions, tomb: true})
	g.emit(record{typ: typeGroupMetadata, tomb: true})
	return g.flush(), nil
}

// memberIDs returns the member ids sorted: every iteration over members
// that produces output goes through it, for determinism.
func (g *Group) memberIDs() []string {
	return slices.Sorted(maps.Keys(g.members))
}

// subscribedNames is the union of the members' subscriptions, sorted.
func (g *Group) subscribedNames() []string {
	var names []string
	for _, m := range g.members {
		names = append(names, m.topics...)
	}
	return sortedTopics(names)
}
