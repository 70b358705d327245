package consumer

import (
	"errors"
	"fmt"
	"maps"
	"slices"
)

// checkInvariants returns every broken invariant of the Group doc comment,
// judged against img, the image the group was last told about; nil skips
// the checks that need it. Tests call it after each step; it is not on any
// request path.
func (g *Group) checkInvariants(img *Image) error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }

	if g.dead {
		if len(g.members)+len(g.target)+len(g.regexes) > 0 {
			bad("Dead with %d members, %d targets, %d regexes", len(g.members), len(g.target), len(g.regexes))
		}
		return errors.Join(errs...)
	}
	if g.assignmentEpoch > g.epoch {
		bad("assignment epoch %d > group epoch %d", g.assignmentEpoch, g.epoch)
	}

	owners := map[TopicID]map[int32]string{}
	statics := 0
	for _, m := range g.sortedMembers() {
		if m.cur.epoch > g.epoch {
			bad("member %s epoch %d > group epoch %d", m.id, m.cur.epoch, g.epoch)
		}
		if m.meta.classic == nil && (m.joinDeadline >= 0 || m.syncDeadline >= 0) {
			bad("member %s uses ConsumerGroupHeartbeat but has a classic join or sync deadline", m.id)
		}
		if c := m.meta.classic; c != nil && len(c.protocols) == 0 {
			bad("classic member %s without protocols", m.id)
		}
		if m.cur.epoch == epochLeave {
			bad("member %s at epoch -1 (a half-removed member)", m.id)
		}
		if inst := m.meta.instanceID; inst != nil {
			statics++
			if g.static[*inst] != m.id {
				bad("static member %s not indexed by instance %s (index: %q)", m.id, *inst, g.static[*inst])
			}
		}
		if m.cur.assigned.intersects(m.cur.revoking) {
			bad("member %s assigned and revoking share a partition", m.id)
		}
		if !epochsCover(m.cur) {
			bad("member %s assignment epochs %v do not match its partitions", m.id, m.cur.since)
		}
		for t, ps := range m.cur.since {
			for p, e := range ps {
				if e < 0 || e > max(m.cur.epoch, 0) {
					bad("member %s at epoch %d has %x/%d from epoch %d", m.id, m.cur.epoch, t, p, e)
				}
			}
		}
		if m.cur.epoch == epochStaticLeave {
			for t, ps := range m.cur.since {
				for p, e := range ps {
					if e != 0 {
						bad("static member %s left with %x/%d at epoch %d, not 0", m.id, t, p, e)
					}
				}
			}
		}
		if len(m.cur.revoking) > 0 {
			if m.cur.state != memberUnrevoked {
				bad("member %s revokes partitions in state %s", m.id, m.cur.state)
			}
			if m.meta.classic == nil && (m.rebalanceDeadline < 0 || m.rebalanceEpoch != m.cur.epoch) {
				bad("member %s revokes partitions without a rebalance deadline for its epoch", m.id)
			}
		}
		for _, a := range []assignment{m.cur.assigned, m.cur.revoking} {
			for t, ps := range a {
				if !slices.IsSorted(ps) || len(slices.Compact(slices.Clone(ps))) != len(ps) || len(ps) == 0 {
					bad("member %s partitions of %x not sorted, distinct, non-empty: %v", m.id, t, ps)
				}
				for _, p := range ps {
					if o, ok := owners[t][p]; ok {
						bad("partition %x/%d owned by %s and %s", t, p, o, m.id)
					}
					if owners[t] == nil {
						owners[t] = map[int32]string{}
					}
					owners[t][p] = m.id
				}
			}
		}
		if m.cur.epoch == g.assignmentEpoch && !m.cur.assigned.subsetOf(g.target[m.id]) {
			bad("member %s at the assignment epoch owns partitions outside its target", m.id)
		}
	}
	if !maps.EqualFunc(owners, g.owners, maps.Equal) {
		bad("owners index %v, members own %v", g.owners, owners)
	}
	if statics != len(g.static) {
		bad("static index has %d entries for %d static members", len(g.static), statics)
	}
	for id := range g.target {
		if g.members[id] == nil {
			bad("target assignment for non-member %s", id)
		}
	}
	subscribedRegexes := map[string]bool{}
	for _, m := range g.members {
		if re := m.meta.regexOrEmpty(); re != "" {
			subscribedRegexes[re] = true
		}
	}
	if !maps.Equal(subscribedRegexes, mapKeysTrue(g.regexes)) {
		bad("resolved regexes %v, subscribed %v", slices.Sorted(maps.Keys(g.regexes)), slices.Sorted(maps.Keys(subscribedRegexes)))
	}

	if img != nil && g.exists() && g.epoch == g.assignmentEpoch {
		if h := img.MetadataHash(g.groupTopics()); h != g.metadataHash {
			bad("metadata hash %d, image says %d", g.metadataHash, h)
		}
		// The target assignment covers the subscribed partitions exactly
		// once, each with a subscriber.
		seen := map[TopicID]map[int32]string{}
		all := map[TopicID]bool{}
		for _, m := range g.sortedMembers() {
			sub := g.subscribedIDs(m, img)
			maps.Copy(all, sub)
			for t, ps := range g.target[m.id] {
				if !sub[t] {
					bad("target gives member %s topic %x it does not subscribe to", m.id, t)
				}
				for _, p := range ps {
					if o, ok := seen[t][p]; ok {
						bad("target gives %x/%d to %s and %s", t, p, o, m.id)
					}
					if seen[t] == nil {
						seen[t] = map[int32]string{}
					}
					seen[t][p] = m.id
				}
			}
		}
		for t := range all {
			topic, _ := img.ByID(t)
			for p := range topic.Partitions {
				if _, ok := seen[t][p]; !ok {
					bad("target leaves %s/%d unassigned", topic.Name, p)
				}
			}
		}
	}
	return errors.Join(errs...)
}

func mapKeysTrue[V any](m map[string]V) map[string]bool {
	out := make(map[string]bool, len(m))
	for k := range m {
		out[k] = true
	}
	return out
}
