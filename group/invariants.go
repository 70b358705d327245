package group

import (
	"errors"
	"fmt"
)

// checkInvariants returns every broken invariant of the Group doc comment.
// Tests call it after each step; it is not on any request path.
func (g *Group) checkInvariants() error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }

	if len(g.order) != len(g.members) {
		bad("order has %d members, members %d", len(g.order), len(g.members))
	}
	statics := 0
	for _, m := range g.order {
		if g.members[m.id] != m {
			bad("member %s in order but not in members", m.id)
		}
		if m.instanceID != nil {
			statics++
			if g.static[*m.instanceID] != m {
				bad("static member %s not indexed by instance %s", m.id, *m.instanceID)
			}
		}
		if len(m.protocols) == 0 {
			bad("member %s has no protocols", m.id)
		}
		if m.join != nil && g.state != statePreparingRebalance {
			bad("member %s has a parked join in %s", m.id, g.state)
		}
		if m.sync != nil && g.state != stateCompletingRebalance {
			bad("member %s has a parked sync in %s", m.id, g.state)
		}
		if m.replaced != "" && g.fenced[m.replaced] != *m.instanceID {
			bad("member %s replaced %s but fenced says %q", m.id, m.replaced, g.fenced[m.replaced])
		}
	}
	if statics != len(g.static) {
		bad("static has %d entries, members %d static", len(g.static), statics)
	}
	if len(g.fenced) > statics {
		bad("fenced has %d entries for %d static members", len(g.fenced), statics)
	}

	switch {
	case len(g.members) == 0 && g.leader != "":
		bad("leader %s without members", g.leader)
	case len(g.members) > 0 && g.members[g.leader] == nil:
		bad("leader %q is not a member", g.leader)
	}
	switch g.state {
	case stateEmpty, stateDead:
		if len(g.members) > 0 {
			bad("%s with %d members", g.state, len(g.members))
		}
	case stateCompletingRebalance, stateStable:
		if len(g.members) == 0 {
			bad("%s without members", g.state)
		}
		if g.protocol == "" {
			bad("%s without protocol", g.state)
		}
		for _, m := range g.order {
			if !m.supports(g.protocol) {
				bad("member %s does not support protocol %s", m.id, g.protocol)
			}
		}
	}
	if len(g.order) > 0 && g.selectProtocol() == "" {
		bad("no protocol common to all members")
	}
	if len(g.pendingSync) > 0 && g.state != stateCompletingRebalance && g.state != stateStable {
		bad("pending syncs in %s", g.state)
	}
	for id := range g.pendingSync {
		if g.members[id] == nil {
			bad("pending sync for non-member %s", id)
		}
	}
	if (g.syncDeadline >= 0) != (len(g.pendingSync) > 0) {
		bad("sync deadline %d with %d pending syncs", g.syncDeadline, len(g.pendingSync))
	}
	if len(g.timeline) > TimelineLen {
		bad("timeline has %d entries, more than %d", len(g.timeline), TimelineLen)
	}
	for i, r := range g.timeline {
		if r.End < 0 && i != len(g.timeline)-1 {
			bad("timeline entry %d of %d is open", i, len(g.timeline))
		}
		// (Times are not compared: the caller's clock may step back.)
		if (r.End < 0) != (r.Outcome == "") || (r.End >= 0 && r.JoinEnd < 0) {
			bad("timeline entry %d inconsistent: %+v", i, r)
		}
	}
	if g.openRebalance() != nil && g.state != statePreparingRebalance && g.state != stateCompletingRebalance {
		bad("a rebalance is open in %s", g.state)
	}
	return errors.Join(errs...)
}
