package share

import (
	"bytes"
	"maps"
	"slices"
)

// assignment maps topic id to partitions.
//
// Invariant (normalized): partitions sorted, distinct and >= 0; no topic
// with an empty list. Every assignment the package keeps is normalized.
type assignment map[TopicID][]int32

// normalize copies a into normal form. It never returns nil.
func normalize(a map[TopicID][]int32) assignment {
	out := make(assignment, len(a))
	for t, ps := range a {
		var keep []int32
		for _, p := range ps {
			if p >= 0 {
				keep = append(keep, p)
			}
		}
		slices.Sort(keep)
		keep = slices.Compact(keep)
		if len(keep) > 0 {
			out[t] = keep
		}
	}
	return out
}

func (a assignment) equal(b assignment) bool {
	return maps.EqualFunc(a, b, func(x, y []int32) bool { return slices.Equal(x, y) })
}

// topics returns a's topic ids sorted.
func (a assignment) topics() []TopicID {
	ts := slices.Collect(maps.Keys(a))
	slices.SortFunc(ts, compareIDs)
	return ts
}

func (a assignment) clone() map[TopicID][]int32 {
	out := make(map[TopicID][]int32, len(a))
	for t, ps := range a {
		out[t] = slices.Clone(ps)
	}
	return out
}

// onlyTopics keeps the topics in ids.
func (a assignment) onlyTopics(ids map[TopicID]bool) assignment {
	out := make(assignment, len(a))
	for t, ps := range a {
		if ids[t] {
			out[t] = ps
		}
	}
	return out
}

func (a assignment) normalized() bool {
	for _, ps := range a {
		if len(ps) == 0 || ps[0] < 0 {
			return false
		}
		for i := 1; i < len(ps); i++ {
			if ps[i] <= ps[i-1] {
				return false
			}
		}
	}
	return true
}

func compareIDs(x, y TopicID) int { return bytes.Compare(x[:], y[:]) }
