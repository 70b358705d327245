package consumer

import "maps"

// partitionEpochs maps every partition a member owns, assigned or pending
// revocation, to the epoch at which it was assigned to the member: its
// assignment epoch (KIP-1251). An OffsetCommit quoting an epoch older than
// the member's may commit a partition the member has held since that
// epoch or earlier: the response that moved the member on was lost, and
// nobody else can have owned the partition in between (CheckOffsetCommit).
//
// The rule for a member's next state (withEpochs): a partition it keeps
// keeps its epoch; a partition new to it was assigned at the epoch it
// moves to. Kafka's CurrentAssignmentBuilder inherits epochs only from the
// assigned partitions when a member moves to a new epoch, so a partition
// it had to revoke and gets back there counts as new (the client stopped
// consuming it in between). A static member leaving with epoch -2 has all
// its epochs reset to 0 (Kafka's resetAssignedPartitionsEpochsToZero): the
// member that takes over its instance id, at epoch 0, holds them from its
// start.
//
// Invariants: the keys are exactly the member's assigned and revoking
// partitions; every epoch is in [0, max(member epoch, 0)]. As with
// assignment, the maps are never modified once stored in a member, so
// CommitCheck may keep them after the member changes.
//
// Alternatives rejected: epoch slices aligned with assignment's partition
// lists, as the record stores them, would need one per list and a merge
// on every union; a nested map is looked up directly and covers both.
type partitionEpochs map[TopicID]map[int32]int32

// of is the assignment epoch of t/p; false if the member does not own it.
func (e partitionEpochs) of(t TopicID, p int32) (int32, bool) {
	v, ok := e[t][p]
	return v, ok
}

func (e partitionEpochs) equal(o partitionEpochs) bool {
	return maps.EqualFunc(e, o, maps.Equal)
}

func (e partitionEpochs) set(t TopicID, p, epoch int32) {
	if e[t] == nil {
		e[t] = map[int32]int32{}
	}
	e[t][p] = epoch
}

// epochsOf gives every partition of a the assignment epoch epoch.
func epochsOf(a assignment, epoch int32) partitionEpochs {
	e := partitionEpochs{}
	for t, ps := range a {
		for _, p := range ps {
			e.set(t, p, epoch)
		}
	}
	return e
}

// withEpochs returns next with its assignment epochs: a partition of next
// that c owned, assigned or (with fromRevoking) pending revocation, keeps
// its epoch; any other was assigned at next's epoch.
func (c currentState) withEpochs(next currentState, fromRevoking bool) currentState {
	since := partitionEpochs{}
	for _, a := range []assignment{next.assigned, next.revoking} {
		for t, ps := range a {
			for _, p := range ps {
				e, ok := c.since.of(t, p)
				if !ok || (!fromRevoking && !c.assigned.contains(t, p)) {
					e = next.epoch
				}
				since.set(t, p, e)
			}
		}
	}
	next.since = since
	return next
}

// epochsCover reports whether c.since has exactly the partitions of
// c.assigned and c.revoking.
func epochsCover(c currentState) bool {
	n := 0
	for _, a := range []assignment{c.assigned, c.revoking} {
		for t, ps := range a {
			for _, p := range ps {
				if _, ok := c.since.of(t, p); !ok {
					return false
				}
			}
			n += len(ps)
		}
	}
	for _, ps := range c.since {
		n -= len(ps)
	}
	return n == 0
}
