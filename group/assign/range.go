package assign

import (
	"cmp"
	"slices"
)

// Range returns KIP-848's "range" assignor.
//
// Each topic is split on its own: its P partitions go, in contiguous
// ranges, to the n members that subscribe to it, in member order; each
// gets floor(P/n) and the first P mod n one more. With more subscribers
// than partitions the last members of a topic get none of it. Topics with
// the same partition count and the same subscribers therefore line up
// (member k gets the same partition numbers of each: co-partitioning, what
// stream joins need), whether or not the group's subscriptions are
// homogeneous.
//
// Member order is Kafka's: static members (with an instance id) first, by
// instance id, then dynamic members by member id. That order is the only
// stickiness Kafka's range assignor has had since KAFKA-16944 ("Rewrite
// Range Assignor", July 2024, before 4.0): it ignores the current
// assignment and recomputes the ranges every time, because keeping current
// partitions and keeping co-partitioning conflict. A static member that
// restarts comes back with a new member id but its old instance id, so it
// gets its old ranges back as long as membership, subscriptions and
// partition counts are unchanged. We follow that, and ignore Current too.
// (The first server-side range assignor, in Kafka 3.7, kept current
// partitions within quota, which could break co-partitioning; we do not
// follow that one.)
//
// The newest Kafka sources we read also match member racks to replica
// racks, best effort, when both are known; the Spec carries no replica
// racks, so this one ignores racks.
func Range() Assignor { return rangeAssignor{} }

type rangeAssignor struct{}

func (rangeAssignor) Name() string { return "range" }

func (rangeAssignor) Assign(s Spec) Assignment {
	v := newView(s)
	rank := rangeOrder(v)
	owner := make([]int, v.total())
	for t := range v.topics {
		subs := slices.Clone(v.subscribers[t])
		slices.SortFunc(subs, func(a, b int) int { return cmp.Compare(rank[a], rank[b]) })
		n := len(subs)
		if n == 0 {
			for f := v.base[t]; f < v.base[t+1]; f++ {
				owner[f] = -1
			}
			continue
		}
		P := int(v.topics[t].Partitions)
		q, extra := P/n, P%n
		f := v.base[t]
		for j, m := range subs {
			k := q
			if j < extra {
				k++
			}
			for range k {
				owner[f] = m
				f++
			}
		}
	}
	return v.output(v.ownersToHeld(owner))
}

// rangeOrder returns each member's position in Kafka's range order: static
// members by instance id, then dynamic members by member id (ties, which
// distinct instance ids rule out, by member id).
func rangeOrder(v *view) []int {
	order := make([]int, len(v.members))
	for m := range order {
		order[m] = m
	}
	slices.SortStableFunc(order, func(a, b int) int {
		ia, ib := v.members[a].InstanceID, v.members[b].InstanceID
		switch {
		case ia != nil && ib != nil:
			if c := cmp.Compare(*ia, *ib); c != 0 {
				return c
			}
		case ia != nil:
			return -1
		case ib != nil:
			return 1
		}
		return cmp.Compare(a, b) // view members are in id order
	})
	rank := make([]int, len(order))
	for i, m := range order {
		rank[m] = i
	}
	return rank
}
