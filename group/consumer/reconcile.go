package consumer

// Reconciliation: one member's step towards its target assignment (Kafka's
// CurrentAssignmentBuilder). A member never gets a partition that another
// member still owns: partitions move in two steps, first revoked by their
// owner (which stays in its epoch, memberUnrevoked, until a heartbeat no
// longer reports them), then assigned to the new owner (which may already
// be at the new epoch, memberUnreleased, waiting for them).

// reconcile returns m's next state, starting from cur (m.cur, except for a
// static member rejoining whose epoch restarts at 0), towards target, the
// target assignment of epoch targetEpoch. owned is what the heartbeat
// reports the member owns; nil if it did not report it, which counts as
// still owning everything. subChanged forces the partitions of topics the
// member no longer subscribes to out of its assignment.
func (g *Group) reconcile(m *member, cur currentState, targetEpoch int32, target assignment, subChanged bool, owned assignment, img *Image) currentState {
	if !subChanged && cur.reconciledTo(targetEpoch) {
		return cur
	}
	subscribed := g.subscribedIDs(m, img)
	switch cur.state {
	case memberStable:
		switch {
		case cur.epoch != targetEpoch:
			return g.nextAssignment(m.id, cur, cur.epoch, targetEpoch, target, subscribed, owned)
		case subChanged:
			return dropUnsubscribed(cur, subscribed, owned)
		}
		return cur
	case memberUnrevoked:
		if ownsAny(owned, cur.revoking) {
			if subChanged {
				return dropUnsubscribed(cur, subscribed, owned)
			}
			return cur
		}
		return g.nextAssignment(m.id, cur, cur.epoch, targetEpoch, target, subscribed, owned)
	case memberUnreleased:
		return g.nextAssignment(m.id, cur, cur.epoch, targetEpoch, target, subscribed, owned)
	}
	// memberUnknown: the heartbeat reported no partitions (checked
	// before), so the member starts over at the target epoch.
	return g.nextAssignment(m.id, cur, targetEpoch, targetEpoch, target, subscribed, owned)
}

// ownsAny reports whether owned has a partition of a; an unreported owned
// set owns everything.
func ownsAny(owned, a assignment) bool {
	if owned == nil {
		return len(a) > 0
	}
	return owned.intersects(a)
}

// nextAssignment is Kafka's computeNextAssignment. Per topic:
//
//	keep   = assigned ∩ target
//	revoke = assigned − keep
//	add    = target − keep − (partitions another member owns)
//
// If something must be revoked and the member still owns it, it stays at
// epoch (memberUnrevoked). Otherwise it moves to targetEpoch, taking keep
// ∪ add, memberUnreleased if it still waits for partitions, else
// memberStable. Topics the member no longer subscribes to count as having
// no target. keep and revoke keep their assignment epochs; add is
// assigned at targetEpoch, even a partition the member was revoking.
func (g *Group) nextAssignment(id string, cur currentState, epoch, targetEpoch int32, target assignment, subscribed map[TopicID]bool, owned assignment) currentState {
	keep, revoke, add := assignment{}, assignment{}, assignment{}
	unreleased := false
	topics := map[TopicID]bool{}
	for t := range target {
		topics[t] = true
	}
	for t := range cur.assigned {
		topics[t] = true
	}
	for t := range topics {
		var tgt []int32
		if subscribed[t] {
			tgt = target[t]
		}
		for _, p := range cur.assigned[t] {
			if containsSorted(tgt, p) {
				keep[t] = append(keep[t], p)
			} else {
				revoke[t] = append(revoke[t], p)
			}
		}
		for _, p := range tgt {
			if cur.assigned.contains(t, p) {
				continue
			}
			// A partition this member is revoking is its own to keep.
			if o, ok := g.owners[t][p]; ok && o != id {
				unreleased = true
				continue
			}
			add[t] = append(add[t], p)
		}
	}
	if len(revoke) > 0 && ownsAny(owned, revoke) {
		return cur.withEpochs(currentState{epoch: epoch, prevEpoch: cur.epoch, state: memberUnrevoked, assigned: keep, revoking: revoke}, false)
	}
	next := currentState{epoch: targetEpoch, prevEpoch: cur.epoch, state: memberStable, assigned: keep.union(add), revoking: assignment{}}
	if unreleased {
		next.state = memberUnreleased
	}
	return cur.withEpochs(next, false)
}

// dropUnsubscribed is Kafka's updateCurrentAssignment: the member changed
// its subscription without a new target epoch; the partitions of topics
// it left go to revoking right away.
func dropUnsubscribed(cur currentState, subscribed map[TopicID]bool, owned assignment) currentState {
	assigned := assignment{}
	revoking := assignment{}
	for t, ps := range cur.revoking {
		revoking[t] = ps
	}
	removed := false
	for t, ps := range cur.assigned {
		if subscribed[t] {
			assigned[t] = ps
			continue
		}
		removed = true
		revoking = revoking.union(assignment{t: ps})
	}
	if !removed {
		return cur
	}
	if len(revoking) > 0 && ownsAny(owned, revoking) {
		return cur.withEpochs(currentState{epoch: cur.epoch, prevEpoch: cur.epoch, state: memberUnrevoked, assigned: assigned, revoking: revoking}, true)
	}
	// Already revoked: the member only shrinks, in its current state.
	next := cur
	next.prevEpoch = cur.epoch
	next.assigned = assigned
	return cur.withEpochs(next, true)
}

func containsSorted(ps []int32, p int32) bool {
	for _, q := range ps {
		if q == p {
			return true
		}
		if q > p {
			return false
		}
	}
	return false
}
