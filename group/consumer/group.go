package consumer

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"
	"maps"
	"regexp"
	"slices"
)

// Group is one consumer group under KIP-848's protocol: its members, their
// subscriptions, the group epoch, the target assignment and every member's
// progress towards it. See the package documentation for the states, the
// steps and the records.
//
// Durable state (everything but the deadlines, nextID and compiled) is
// changed only by applying records (apply.go), whether the group emitted
// them or Replay read them.
//
// Invariants (checkInvariants, run by the tests after every step):
//   - No partition is owned (assigned or pending revocation) by two
//     members, nor twice by one; owners indexes exactly the members'
//     assigned and revoking partitions.
//   - Every member's epoch is <= the group epoch; assignmentEpoch <= epoch.
//   - static indexes exactly the members with an instance id, one member
//     per instance id.
//   - target holds entries only for members.
//   - regexes holds exactly the regular expressions some member subscribes
//     to.
//   - Outside Assigning (epoch == assignmentEpoch), against the image the
//     group last saw: the target assignment gives every partition of every
//     topic some member subscribes to to exactly one member subscribed to
//     it, and nothing else; a member at the assignment epoch owns only
//     partitions of its target; metadataHash fingerprints the subscribed
//     topics.
//   - A member with partitions pending revocation is in memberUnrevoked and,
//     unless it is a classic member (whose rejoin and session bound it),
//     its rebalance deadline is armed.
//   - Only classic members (ClassicMemberMetadata, with at least one
//     protocol) have join or sync deadlines.
//   - Every partition a member owns has an assignment epoch (KIP-1251) in
//     [0, max(member epoch, 0)]; 0 for a static member that left with -2.
//   - Dead groups have no members, target or regexes.
//
// Alternatives rejected: Kafka keeps timers per member and resolves
// regular expressions asynchronously; here deadlines are fields that Tick
// compares with now, and regular expressions are resolved synchronously
// against the Image passed in, so the group is a deterministic function of
// its calls. Members are iterated in sorted order wherever the order shows
// (records, responses), never in map order.
type Group struct {
	id  string
	cfg Config

	dead bool

	// epoch is the group epoch: bumped when the members or what they
	// subscribe to change. 0 before the first member joined.
	epoch int32
	// metadataHash fingerprints the subscribed topics
	// (topics.Image.MetadataHash) as of the last epoch bump.
	metadataHash int64
	// assignmentEpoch is the epoch of the target assignment; -1 after its
	// tombstone. Invariant: <= epoch.
	assignmentEpoch int32

	members map[string]*member
	static  map[string]string     // instance id -> member id
	target  map[string]assignment // member id -> target assignment
	regexes map[string]resolvedRegex
	// partitionMeta: a pre-4.1 ConsumerGroupPartitionMetadata record was
	// replayed; it is tombstoned with the next epoch bump.
	partitionMeta bool
	// owners indexes the members' assigned and revoking partitions: topic
	// -> partition -> member id. Derived from members (see apply.go).
	owners map[TopicID]map[int32]string

	// Soft state, not in records.
	nextID   uint64                    // counter for generated member ids
	compiled map[string]*regexp.Regexp // regular expressions, compiled full-match
	// downgraded is the classic group this group became (convert.go);
	// the group is Dead then.
	downgraded         *kmsg.GroupMetadataValue
	downgradeRebalance bool

	out []Record // records of the current call
}

// New returns a group that does not exist yet in Kafka's sense: epoch 0,
// no members, nothing written. Its first successful join (epoch 0) creates
// it; any other heartbeat gets GROUP_ID_NOT_FOUND. It panics if cfg fails
// Validate.
func New(id string, cfg Config) *Group {
	if err := cfg.Validate(); err != nil {
		panic(fmt.Sprintf("consumer: New(%q): %v", id, err))
	}
	cfg.Assignors = slices.Clone(cfg.Assignors)
	return newGroup(id, cfg)
}

func newGroup(id string, cfg Config) *Group {
	g := &Group{id: id, cfg: cfg, compiled: map[string]*regexp.Regexp{}}
	g.reset()
	return g
}

// reset empties the durable state, keeping the soft state and the records
// of the current call.
func (g *Group) reset() {
	g.dead = false
	g.epoch, g.metadataHash, g.assignmentEpoch = 0, 0, 0
	g.members = map[string]*member{}
	g.static = map[string]string{}
	g.target = map[string]assignment{}
	g.regexes = map[string]resolvedRegex{}
	g.partitionMeta = false
	g.owners = map[TopicID]map[int32]string{}
}

// ID is the group id.
func (g *Group) ID() string { return g.id }

// State is Kafka's name for the group's state: Empty (no members),
// Assigning (the group epoch moved past the target assignment's),
// Reconciling (some member has not reached the target assignment),
// Stable, or Dead (deleted).
func (g *Group) State() string {
	switch {
	case g.dead:
		return "Dead"
	case len(g.members) == 0:
		return "Empty"
	case g.epoch > g.assignmentEpoch:
		return "Assigning"
	}
	for _, m := range g.members {
		if !m.cur.reconciledTo(g.assignmentEpoch) {
			return "Reconciling"
		}
	}
	return "Stable"
}

// Epoch is the group epoch.
func (g *Group) Epoch() int32 { return g.epoch }

// AssignmentEpoch is the epoch of the target assignment.
func (g *Group) AssignmentEpoch() int32 { return g.assignmentEpoch }

// NumMembers counts the members, static members that left with epoch -2
// included (they keep their partitions until their session expires).
func (g *Group) NumMembers() int { return len(g.members) }

// exists reports whether the group exists in Kafka's sense: some record
// created it and it was not deleted.
func (g *Group) exists() bool { return !g.dead && (g.epoch > 0 || len(g.members) > 0) }

// flush returns and forgets the records of the current call.
func (g *Group) flush() []Record {
	out := g.out
	g.out = nil
	return out
}

// sortedMembers returns the members sorted by id.
func (g *Group) sortedMembers() []*member {
	ms := slices.Collect(maps.Values(g.members))
	slices.SortFunc(ms, func(a, b *member) int {
		switch {
		case a.id < b.id:
			return -1
		case a.id > b.id:
			return 1
		}
		return 0
	})
	return ms
}

// NextDeadline is the earliest session or rebalance deadline; -1 if none.
// Tick before it does nothing.
func (g *Group) NextDeadline() int64 {
	next := int64(-1)
	for _, m := range g.members {
		for _, d := range []int64{m.sessionDeadline, m.rebalanceDeadline, m.joinDeadline, m.syncDeadline} {
			if d >= 0 && (next < 0 || d < next) {
				next = d
			}
		}
	}
	return next
}

// countRegex counts the members subscribed to regex re (non-empty).
func (g *Group) countRegex(re string) int {
	n := 0
	for _, m := range g.members {
		if m.meta.regexOrEmpty() == re {
			n++
		}
	}
	return n
}

// subscribedTopics returns the names m subscribes to.
func (g *Group) subscribedTopics(m *member) []string { return g.topicsOf(m.meta) }

// topicsOf returns the names a member with meta subscribes to: its topic
// names and the topics its regular expression resolved to, sorted and
// distinct.
func (g *Group) topicsOf(meta memberMeta) []string {
	re := meta.regexOrEmpty()
	if re == "" {
		return meta.topics
	}
	r, ok := g.regexes[re]
	if !ok || len(r.topics) == 0 {
		return meta.topics
	}
	if len(meta.topics) == 0 {
		return r.topics
	}
	return sortedNames(append(slices.Clone(meta.topics), r.topics...))
}

// groupTopics returns every name some member subscribes to, sorted.
func (g *Group) groupTopics() []string {
	set := map[string]bool{}
	for _, m := range g.members {
		for _, t := range g.subscribedTopics(m) {
			set[t] = true
		}
	}
	return slices.Sorted(maps.Keys(set))
}

// subscribedIDs resolves m's subscription to the ids of existing topics.
func (g *Group) subscribedIDs(m *member, img *Image) map[TopicID]bool {
	ids := map[TopicID]bool{}
	for _, name := range g.subscribedTopics(m) {
		if t, ok := img.ByName(name); ok {
			ids[t.ID] = true
		}
	}
	return ids
}

// preferredAssignor is the assignor most members name; ties go to the one
// listed first in Config.Assignors (Kafka: whichever its hash map yields).
// The default (first) when no member names one.
func (g *Group) preferredAssignor() string {
	counts := map[string]int{}
	for _, m := range g.members {
		if m.meta.assignor != nil {
			counts[*m.meta.assignor]++
		}
	}
	best, bestN := g.cfg.Assignors[0].Name(), 0
	for _, a := range g.cfg.Assignors {
		if n := counts[a.Name()]; n > bestN {
			best, bestN = a.Name(), n
		}
	}
	return best
}
