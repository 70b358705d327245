package group

import (
	"fmt"
	"math"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Reply is a response that is ready to be sent. Token is whatever the
// caller passed with the request (the broker maps it to a connection's
// responder). Resp is the kmsg response with its version already set to the
// request's version. Resp may share byte slices (metadata, assignments) with
// the group; the group never modifies them in place, and the caller must not
// either.
type Reply struct {
	Token any
	Resp  kmsg.Response
}

type state int8

const (
	stateEmpty state = iota
	statePreparingRebalance
	stateCompletingRebalance
	stateStable
	stateDead
)

// String is the name DescribeGroups and ListGroups report.
func (s state) String() string {
	switch s {
	case stateEmpty:
		return "Empty"
	case statePreparingRebalance:
		return "PreparingRebalance"
	case stateCompletingRebalance:
		return "CompletingRebalance"
	case stateStable:
		return "Stable"
	case stateDead:
		return "Dead"
	}
	return "Unknown"
}

// Group is one consumer group's membership state machine. See the package
// documentation for the states and their forced exits.
//
// Steps: a request handler validates (in Kafka's order), updates members,
// and moves the state along; every parked request it answers, and its own
// reply if ready, are collected in out and returned. Tick does the same for
// deadlines that have passed.
//
// Invariants (checked by checkInvariants in tests after every step):
//   - members, order and static describe the same set of members; order
//     is join order (a replaced static member keeps its place).
//   - Empty and Dead have no members; leader == "" iff there are no members,
//     else leader is a member. PreparingRebalance may have none while
//     pending member ids are outstanding.
//   - In CompletingRebalance and Stable, protocol != "" and every member
//     supports it; some protocol is supported by every member at all times.
//   - Only PreparingRebalance parks JoinGroups; only CompletingRebalance
//     parks SyncGroups.
//   - pendingSync is empty outside CompletingRebalance and Stable, and
//     syncDeadline >= 0 iff pendingSync is non-empty.
//   - fenced holds at most one member id per current static member.
//
// Alternatives rejected: timers per member (as Kafka's purgatory has) would
// need callbacks and cancellation; instead each deadline is a field, Tick
// compares them with now, and NextDeadline takes their minimum. Members are
// few, so scans are fine and keep iteration order (and thus replies)
// deterministic, which Go maps would not.
type Group struct {
	id  string
	cfg Config

	state      state
	generation int32 // incremented at the end of each join phase; 0 before the first

	// protocolType is the type of the members' protocols ("consumer"); set
	// by the first member of an empty group and kept when it empties.
	protocolType string
	// protocol is the protocol chosen at the end of the last join phase;
	// "" in Empty and before the first generation.
	protocol string
	// leader is the member id of the leader, which receives every member's
	// metadata and sends the assignment. The first member to join; kept
	// across rebalances while it is a member and rejoins.
	leader string

	members map[string]*member
	order   []*member          // members in join order
	static  map[string]*member // group.instance.id -> its current member
	// fenced maps member ids that static members replaced to their instance
	// id, so the replaced client gets FENCED_INSTANCE_ID.
	fenced map[string]string
	// pending maps member ids handed out with MEMBER_ID_REQUIRED (KIP-394)
	// to when they expire (now >= expiry). They are not members yet.
	pending map[string]int64
	nextID  uint64 // counter for generated member ids

	// joinDeadline ends the join phase. Meaningful in PreparingRebalance.
	joinDeadline int64
	// initialDelay: the join phase started from Empty and is in its initial
	// delay: it ends only at joinDeadline, which new members extend, by the
	// delay each time, up to initialCap.
	initialDelay   bool
	initialCap     int64
	newMemberAdded bool // a member joined since joinDeadline was last set

	// pendingSync holds the members that have not sent SyncGroup since the
	// join phase ended; at syncDeadline (-1: none) they are removed.
	pendingSync  map[string]bool
	syncDeadline int64

	// timeline is the group's recent rebalances, oldest first, at most
	// TimelineLen (timeline.go); only its last entry may be in progress.
	timeline []Rebalance

	out []Reply // replies of the current call
}

// NewGroup returns an Empty group with generation 0. It panics if cfg (after
// defaults) fails Validate.
func NewGroup(id string, cfg Config) *Group {
	cfg = cfg.withDefaults()
	if err := cfg.Validate(); err != nil {
		panic(fmt.Sprintf("group: NewGroup(%q): %v", id, err))
	}
	return &Group{
		id:           id,
		cfg:          cfg,
		members:      map[string]*member{},
		static:       map[string]*member{},
		fenced:       map[string]string{},
		pending:      map[string]int64{},
		pendingSync:  map[string]bool{},
		joinDeadline: -1,
		syncDeadline: -1,
	}
}

// ID is the group id.
func (g *Group) ID() string { return g.id }

// State is "Empty", "PreparingRebalance", "CompletingRebalance", "Stable"
// or "Dead".
func (g *Group) State() string { return g.state.String() }

// Generation is the current generation id.
func (g *Group) Generation() int32 { return g.generation }

// ProtocolType is the members' protocol type ("consumer"), "" before the
// first member.
func (g *Group) ProtocolType() string { return g.protocolType }

// Protocol is the protocol chosen for the current generation; "" when Empty
// or before the first generation.
func (g *Group) Protocol() string { return g.protocol }

// Leader is the leader's member id, "" without members.
func (g *Group) Leader() string { return g.leader }

// NumMembers is the number of members (pending member ids not counted).
func (g *Group) NumMembers() int { return len(g.members) }

// Describe returns the group as DescribeGroups reports it. As in Kafka, the
// protocol and the members' metadata and assignments are only reported when
// the group is Stable. Members are in join order. The byte slices are shared
// with the group: read only.
func (g *Group) Describe() kmsg.DescribeGroupsResponseGroup {
	d := kmsg.NewDescribeGroupsResponseGroup()
	d.Group = g.id
	d.State = g.State()
	if g.state == stateDead {
		return d
	}
	d.ProtocolType = g.protocolType
	stable := g.state == stateStable
	if stable {
		d.Protocol = g.protocol
	}
	for _, m := range g.order {
		dm := kmsg.NewDescribeGroupsResponseGroupMember()
		dm.MemberID = m.id
		dm.InstanceID = m.instanceID
		dm.ClientID = m.clientID
		dm.ClientHost = m.clientHost
		if stable {
			dm.ProtocolMetadata = m.metadata(g.protocol)
			dm.MemberAssignment = m.assignment
		}
		d.Members = append(d.Members, dm)
	}
	return d
}

// IsMember validates an OffsetCommit's member id and generation; it is
// ValidateOffsetCommit without an instance id.
func (g *Group) IsMember(memberID string, generation int32) error {
	return g.ValidateOffsetCommit(memberID, nil, generation)
}

// ValidateOffsetCommit reports whether an OffsetCommit (not transactional)
// from memberID/instanceID at generation may commit, as Kafka's classic
// group decides: nil, or ErrGroupDead, ErrUnknownMember, ErrFencedInstance,
// ErrIllegalGeneration, ErrRebalanceInProgress (during CompletingRebalance:
// the member knows the new generation but not yet its assignment).
// A commit with generation < 0 is accepted while the group is Empty (admin
// clients and consumers that assign partitions themselves); without a
// member id or generation it is refused unless the group is Empty.
func (g *Group) ValidateOffsetCommit(memberID string, instanceID *string, generation int32) error {
	if g.state == stateDead {
		return ErrGroupDead
	}
	if generation < 0 && g.state == stateEmpty {
		return nil
	}
	if generation >= 0 || memberID != "" || instanceID != nil {
		if _, err := g.validateMember(memberID, instanceID); err != nil {
			return err
		}
		if generation != g.generation {
			return ErrIllegalGeneration
		}
	} else if g.state != stateEmpty {
		return ErrUnknownMember
	}
	if g.state == stateCompletingRebalance {
		return ErrRebalanceInProgress
	}
	return nil
}

// Delete moves an Empty group to Dead. Afterwards every request gets
// COORDINATOR_NOT_AVAILABLE, Tick does nothing, and the caller should drop
// the Group (a later JoinGroup creates a new one). It returns
// ErrNonEmptyGroup if the group has members or is rebalancing, and
// ErrGroupNotFound if it is already Dead.
func (g *Group) Delete() error {
	switch g.state {
	case stateDead:
		return ErrGroupNotFound
	case stateEmpty:
		g.state = stateDead
		clear(g.pending)
		return nil
	}
	return ErrNonEmptyGroup
}

// validateMember finds the member a request speaks for. With an instance
// id, it must be the instance's current member id (ErrFencedInstance for an
// older one); without, the member id must be a member, or one a static
// member replaced (ErrFencedInstance).
func (g *Group) validateMember(memberID string, instanceID *string) (*member, error) {
	if instanceID != nil {
		m := g.static[*instanceID]
		switch {
		case m == nil:
			return nil, ErrUnknownMember
		case m.id != memberID:
			return nil, ErrFencedInstance
		}
		return m, nil
	}
	if m := g.members[memberID]; m != nil {
		return m, nil
	}
	if _, ok := g.fenced[memberID]; ok {
		return nil, ErrFencedInstance
	}
	return nil, ErrUnknownMember
}

// full reports whether a new member would exceed Config.MaxSize.
func (g *Group) full() bool {
	if g.cfg.MaxSize == 0 {
		return false
	}
	return int64(len(g.members))+int64(len(g.pending)) >= int64(g.cfg.MaxSize)
}

// rebalanceTimeout is the largest rebalance timeout among the members, in
// ms; Kafka's group rebalance timeout.
func (g *Group) rebalanceTimeout() int64 {
	var t int32
	for _, m := range g.order {
		t = max(t, m.rebalanceTimeoutMs)
	}
	return int64(t)
}

func (g *Group) reply(token any, resp kmsg.Response) {
	g.out = append(g.out, Reply{Token: token, Resp: resp})
}

// flush returns and forgets the replies collected by the current call.
func (g *Group) flush() []Reply {
	out := g.out
	g.out = nil
	return out
}

// nextGeneration increments the generation, wrapping to 1 rather than
// going negative.
func (g *Group) nextGeneration() {
	if g.generation == math.MaxInt32 {
		g.generation = 1
		return
	}
	g.generation++
}
