// Package assign holds the server-side partition assignors of the
// next-generation group protocols: KIP-848's "uniform" and "range" for
// consumer groups (group.consumer.assignors) and KIP-932's "simple" for
// share groups. An assignor is a pure function of the group's members,
// their subscriptions and the topics' partition counts; the group state
// machines (group/consumer, group/share) call it when the group epoch
// moves and own everything else (epochs, reconciliation, revocation).
//
// Determinism: given the same Spec, an assignor returns the same
// Assignment, whatever the order of maps it was built from; members and
// topics are handed over sorted (members by id, topics by id), and the
// assignors never range over a Go map without sorting first. They do not
// rely on the sorting either: each indexes its own sorted copy (view.go),
// so a Spec built in any order gives the same Assignment.
//
// The assignors: Uniform (uniform.go, uniform_heterogeneous.go) and Range
// (range.go) for consumer groups, Simple (simple.go) for share groups;
// ByName finds one by name. They hold no state, so one value may serve any
// number of groups at once. None uses racks: the Spec carries the members'
// racks but not the partitions' replica racks.
package assign

// TopicID is a topic's KIP-516 id.
type TopicID = [16]byte

// Topic is what an assignor knows of a subscribed topic.
type Topic struct {
	ID         TopicID
	Name       string
	Partitions int32 // > 0
}

// Member is one member as an assignor sees it.
//
// Invariants: Subscribed is sorted and names only topics in Spec.Topics;
// Current holds only subscribed topics, with sorted partitions.
type Member struct {
	ID         string
	InstanceID *string // static membership (group.instance.id); nil if dynamic
	Rack       *string
	Subscribed []TopicID
	// Current is the member's assignment in the group's current target
	// assignment (not what it owns now), so a sticky assignor can keep
	// partitions where they are.
	Current map[TopicID][]int32
}

// Spec is an assignor's input.
//
// Invariants: Members sorted by ID with distinct ids; Topics sorted by
// ID, holding every topic some member subscribes to.
type Spec struct {
	Members []Member
	Topics  []Topic
}

// Assignment maps member id to topic id to sorted partitions. Every member
// of the Spec has an entry (possibly empty). For consumer groups a
// partition appears under at most one member; share groups' simple
// assignor may place it under several.
type Assignment map[string]map[TopicID][]int32

// Assignor is a named server-side assignor.
type Assignor interface {
	// Name is the name clients ask for (ServerAssignor) and
	// group.consumer.assignors lists.
	Name() string
	// Assign computes the target assignment. It must not keep or modify
	// the Spec.
	Assign(s Spec) Assignment
}
