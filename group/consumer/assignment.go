package consumer

import (
	"bytes"
	"maps"
	"slices"
)

// assignment maps topic ids to partitions.
//
// Invariants: partitions sorted and distinct; no empty slices (a topic
// without partitions has no entry). Values are never modified in place
// once stored in a member or the target assignment: every change builds a
// new assignment, so they may be shared.
type assignment map[TopicID][]int32

// normalize returns a with sorted, distinct partitions and no empty
// entries; it may reuse a's slices.
func normalize(a map[TopicID][]int32) assignment {
	out := make(assignment, len(a))
	for t, ps := range a {
		if len(ps) == 0 {
			continue
		}
		ps = slices.Clone(ps)
		slices.Sort(ps)
		out[t] = slices.Compact(ps)
	}
	return out
}

func (a assignment) contains(t TopicID, p int32) bool {
	_, ok := slices.BinarySearch(a[t], p)
	return ok
}

func (a assignment) equal(b assignment) bool {
	return maps.EqualFunc(a, b, slices.Equal[[]int32])
}

func (a assignment) size() int {
	n := 0
	for _, ps := range a {
		n += len(ps)
	}
	return n
}

// topics returns a's topic ids sorted by id, for deterministic iteration.
func (a assignment) topics() []TopicID {
	ts := slices.Collect(maps.Keys(a))
	slices.SortFunc(ts, func(x, y TopicID) int { return bytes.Compare(x[:], y[:]) })
	return ts
}

// union returns a ∪ b.
func (a assignment) union(b assignment) assignment {
	out := make(assignment, len(a)+len(b))
	for t, ps := range a {
		out[t] = ps
	}
	for t, ps := range b {
		if cur, ok := out[t]; ok {
			merged := append(slices.Clone(cur), ps...)
			slices.Sort(merged)
			out[t] = slices.Compact(merged)
		} else {
			out[t] = ps
		}
	}
	return out
}

// intersects reports whether a and b share a partition.
func (a assignment) intersects(b assignment) bool {
	for t, ps := range a {
		for _, p := range ps {
			if b.contains(t, p) {
				return true
			}
		}
	}
	return false
}

// subsetOf reports whether every partition of a is in b.
func (a assignment) subsetOf(b assignment) bool {
	for t, ps := range a {
		for _, p := range ps {
			if !b.contains(t, p) {
				return false
			}
		}
	}
	return true
}

func compareTopicIDs(x, y TopicID) int { return bytes.Compare(x[:], y[:]) }
