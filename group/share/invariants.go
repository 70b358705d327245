package share

import (
	"errors"
	"fmt"
	"slices"
)

// checkInvariants returns every broken invariant of the Group doc comment.
// Tests call it after each step; it is not on any request path. loaded
// false skips the session deadlines (a group replayed but not Loaded).
func (g *Group) checkInvariants(loaded bool) error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }

	if g.dead {
		if len(g.members) > 0 || len(g.target) > 0 || !g.sp.empty() {
			bad("Dead with %d members, %d targets, state partitions %v", len(g.members), len(g.target), !g.sp.empty())
		}
		return errors.Join(errs...)
	}
	if g.targetEpoch > g.epoch {
		bad("target epoch %d > group epoch %d", g.targetEpoch, g.epoch)
	}
	for id := range g.target {
		if g.members[id] == nil {
			bad("target for non-member %s", id)
		}
	}
	for id, a := range g.target {
		if !a.normalized() {
			bad("target of %s not normalized: %v", id, a)
		}
	}
	for id, m := range g.members {
		if m.id != id || id == "" {
			bad("member %q indexed as %q", m.id, id)
		}
		t, ok := g.target[id]
		if !ok {
			bad("member %s has no target", id)
		}
		if m.epoch < 0 || m.epoch > g.targetEpoch {
			bad("member %s epoch %d outside [0, target epoch %d]", id, m.epoch, g.targetEpoch)
		}
		if m.state != memberStateStable {
			bad("member %s in state %d", id, m.state)
		}
		if !slices.IsSorted(m.topics) || len(slices.Compact(slices.Clone(m.topics))) != len(m.topics) || slices.Contains(m.topics, "") {
			bad("member %s topics not sorted and distinct: %q", id, m.topics)
		}
		if !m.assigned.normalized() {
			bad("member %s assignment not normalized: %v", id, m.assigned)
		}
		if m.epoch == g.targetEpoch {
			for tp, ps := range m.assigned {
				for _, p := range ps {
					if _, found := slices.BinarySearch(t[tp], p); !found {
						bad("member %s at the target epoch holds %x/%d outside its target", id, tp[:2], p)
					}
				}
			}
		}
		if loaded && m.deadline <= 0 {
			bad("member %s has no session deadline", id)
		}
	}
	for _, l := range [][]spTopic{g.sp.initializing, g.sp.initialized, g.sp.deleting} {
		if !slices.IsSortedFunc(l, func(a, b spTopic) int { return compareIDs(a.id, b.id) }) {
			bad("state partition list not sorted by topic id")
		}
		for _, t := range l {
			if len(t.parts) > 0 && !(assignment{t.id: t.parts}).normalized() {
				bad("state partitions of %x not normalized: %v", t.id[:2], t.parts)
			}
		}
	}
	return errors.Join(errs...)
}
