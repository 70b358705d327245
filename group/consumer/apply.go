package consumer

import (
	"fmt"
)

// Applying records. A group's durable state changes only here: the
// request handlers decide, emit records (emit), and emit applies each
// record as it goes, through the same functions Replay uses. What a
// handler reads after emitting a record is therefore what a group loaded
// from the log would hold, so live and replayed groups cannot drift apart.
// As in Kafka's replay, a record of a deleted (Dead) group recreates it,
// and a tombstone of something absent is ignored.

// emit encodes rec into the current call's output and applies it. A record
// the group itself produced must apply: failure is a bug.
func (g *Group) emit(rec record) {
	g.out = append(g.out, rec.encode(g.id))
	if err := rec.apply(g); err != nil {
		panic(fmt.Sprintf("consumer: group %q: applying own record %T: %v", g.id, rec, err))
	}
}

// revive makes a Dead group empty and alive again, for a record that
// recreates it.
func (g *Group) revive() {
	if g.dead {
		g.reset()
	}
}

func (r groupRec) apply(g *Group) error {
	if !r.tomb {
		g.revive()
		g.epoch, g.metadataHash = r.epoch, r.hash
		return nil
	}
	if g.dead {
		return nil
	}
	switch {
	case len(g.members) > 0:
		return fmt.Errorf("group tombstone but the group still has %d members", len(g.members))
	case len(g.target) > 0:
		return fmt.Errorf("group tombstone but the target assignment still has %d members", len(g.target))
	case g.assignmentEpoch != -1:
		return fmt.Errorf("group tombstone before the target assignment epoch tombstone")
	}
	g.reset()
	g.dead = true
	return nil
}

func (r partitionMetaRec) apply(g *Group) error {
	if !r.tomb {
		g.revive()
	}
	if !g.dead {
		g.partitionMeta = !r.tomb
	}
	return nil
}

func (r memberRec) apply(g *Group) error {
	m := g.members[r.id]
	if r.tomb {
		if g.dead || m == nil {
			return nil
		}
		if m.cur.epoch != epochLeave {
			return fmt.Errorf("member %s tombstone before its current assignment tombstone", r.id)
		}
		if _, ok := g.target[r.id]; ok {
			return fmt.Errorf("member %s tombstone before its target assignment tombstone", r.id)
		}
		g.setOwners(m, currentState{})
		g.unindexStatic(m)
		delete(g.members, r.id)
		return nil
	}
	g.revive()
	if m = g.members[r.id]; m == nil {
		m = &member{id: r.id, cur: newMemberState(), rebalanceDeadline: -1, joinDeadline: -1, syncDeadline: -1}
		g.members[r.id] = m
	}
	g.unindexStatic(m)
	m.meta = r.meta
	if m.meta.topics == nil {
		m.meta.topics = []string{}
	}
	if inst := m.meta.instanceID; inst != nil {
		// As in Kafka, the instance id now points here, whatever held it.
		g.static[*inst] = m.id
	}
	return nil
}

func (g *Group) unindexStatic(m *member) {
	if inst := m.meta.instanceID; inst != nil && g.static[*inst] == m.id {
		delete(g.static, *inst)
	}
}

func (r targetEpochRec) apply(g *Group) error {
	if !r.tomb {
		g.revive()
		g.assignmentEpoch = r.epoch
		return nil
	}
	if g.dead {
		return nil
	}
	if len(g.target) > 0 {
		return fmt.Errorf("target assignment epoch tombstone but the assignment still has %d members", len(g.target))
	}
	g.assignmentEpoch = -1
	return nil
}

func (r targetMemberRec) apply(g *Group) error {
	if r.tomb {
		if !g.dead {
			delete(g.target, r.id)
		}
		return nil
	}
	g.revive()
	g.target[r.id] = r.a
	return nil
}

func (r currentRec) apply(g *Group) error {
	if r.tomb {
		m := g.members[r.id]
		if g.dead || m == nil {
			return nil
		}
		cur := currentState{epoch: epochLeave, prevEpoch: epochLeave, state: m.cur.state, assigned: assignment{}, revoking: assignment{}, since: partitionEpochs{}}
		if err := g.setOwners(m, cur); err != nil {
			return err
		}
		m.cur = cur
		return nil
	}
	g.revive()
	m := g.members[r.id]
	if m == nil {
		m = &member{id: r.id, cur: newMemberState(), meta: memberMeta{topics: []string{}}, rebalanceDeadline: -1, joinDeadline: -1, syncDeadline: -1}
		g.members[r.id] = m
	}
	if r.cur.assigned.intersects(r.cur.revoking) {
		return fmt.Errorf("member %s both owns and revokes a partition", r.id)
	}
	if !epochsCover(r.cur) {
		return fmt.Errorf("member %s: assignment epochs %v do not match its partitions %v and %v", r.id, r.cur.since, r.cur.assigned, r.cur.revoking)
	}
	if err := g.setOwners(m, r.cur); err != nil {
		return err
	}
	m.cur = r.cur
	return nil
}

// setOwners moves m's entries in the owners index from m.cur to cur. A
// partition that another member owns is an error, and nothing changes.
func (g *Group) setOwners(m *member, cur currentState) error {
	for _, a := range []assignment{cur.assigned, cur.revoking} {
		for t, ps := range a {
			for _, p := range ps {
				if o, ok := g.owners[t][p]; ok && o != m.id {
					return fmt.Errorf("member %s gets partition %x/%d, which member %s owns", m.id, t, p, o)
				}
			}
		}
	}
	for _, a := range []assignment{m.cur.assigned, m.cur.revoking} {
		for t, ps := range a {
			for _, p := range ps {
				delete(g.owners[t], p)
			}
			if len(g.owners[t]) == 0 {
				delete(g.owners, t)
			}
		}
	}
	for _, a := range []assignment{cur.assigned, cur.revoking} {
		for t, ps := range a {
			if g.owners[t] == nil {
				g.owners[t] = map[int32]string{}
			}
			for _, p := range ps {
				g.owners[t][p] = m.id
			}
		}
	}
	return nil
}

func (r regexRec) apply(g *Group) error {
	if r.tomb {
		if !g.dead {
			delete(g.regexes, r.regex)
		}
		return nil
	}
	g.revive()
	g.regexes[r.regex] = r.r
	return nil
}
