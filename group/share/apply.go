package share

import (
	"fmt"
	"slices"

	"github.com/fjordlog/fjord/group/internal/ptr"
)

// emit applies a record the live path decided on and queues it for the
// caller. The live path only builds records that apply cleanly; a failure
// is a bug.
func (g *Group) emit(r record) {
	if err := r.apply(g); err != nil {
		panic(fmt.Sprintf("share: group %q: applying its own %s record: %v", g.id, typeName(r.typ), err))
	}
	g.out = append(g.out, r.encode(g.id))
}

// flush returns and forgets the records of the current call.
func (g *Group) flush() []Record {
	out := g.out
	g.out = nil
	return out
}

// apply changes g as Kafka's GroupMetadataManager.replay does for the same
// record, refusing (before changing anything) what Kafka refuses with an
// IllegalStateException. Tombstones of things that are already gone are
// accepted: compaction may have removed what they delete.
func (r record) apply(g *Group) error {
	if g.dead && !r.tomb && r.typ != typePartitionMetadata {
		g.revive()
	}
	switch r.typ {
	case typePartitionMetadata:
		// Kafka 4.0 kept subscribed topics' metadata here; 4.1 replaced it
		// with the metadata hash and ignores it.
	case typeMemberMetadata:
		m := g.members[r.member]
		if r.tomb {
			if m == nil {
				return nil
			}
			if m.epoch != -1 {
				return fmt.Errorf("tombstone of member %s's metadata, but its current assignment (epoch %d) was not tombstoned first", r.member, m.epoch)
			}
			if _, ok := g.target[r.member]; ok {
				return fmt.Errorf("tombstone of member %s's metadata, but its target assignment was not tombstoned first", r.member)
			}
			delete(g.members, r.member)
			return nil
		}
		if m == nil {
			m = g.addMember(r.member)
		}
		m.memberMeta = memberMeta{
			rack:       ptr.Clone(r.meta.rack),
			clientID:   r.meta.clientID,
			clientHost: r.meta.clientHost,
			topics:     slices.Clone(r.meta.topics),
		}
	case typeGroupMetadata:
		if r.tomb {
			if len(g.members) > 0 {
				return fmt.Errorf("tombstone of the group with %d members", len(g.members))
			}
			g.kill()
			return nil
		}
		g.epoch, g.hash = r.epoch, r.hash
	case typeTargetMetadata:
		if r.tomb {
			if len(g.target) > 0 {
				return fmt.Errorf("tombstone of the target assignment epoch with %d member targets left", len(g.target))
			}
			g.targetEpoch = -1
			return nil
		}
		g.targetEpoch = r.epoch
	case typeTargetMember:
		if r.tomb {
			delete(g.target, r.member)
			return nil
		}
		g.target[r.member] = normalize(r.a)
	case typeCurrentAssignment:
		m := g.members[r.member]
		if r.tomb {
			if m != nil {
				m.currentState = currentState{epoch: -1, prevEpoch: -1, state: memberStateStable, assigned: assignment{}}
			}
			return nil
		}
		if m == nil {
			m = g.addMember(r.member)
		}
		m.currentState = r.cur
		m.assigned = normalize(r.cur.assigned)
	case typeStatePartitions:
		if r.tomb {
			g.sp = statePartitions{}
			return nil
		}
		g.sp = r.sp
	default:
		return fmt.Errorf("record type %d is not a share group record", r.typ)
	}
	return nil
}

// addMember adds a member as Kafka's replay creates one it has not seen:
// no metadata yet, epoch 0, previous epoch -1.
func (g *Group) addMember(id string) *member {
	m := &member{id: id, currentState: newCurrentState()}
	g.members[id] = m
	return m
}

// kill makes g Dead: the tombstone of its epoch record ends it, as Kafka
// removes the group.
func (g *Group) kill() {
	g.reset()
	g.dead = true
}

// revive turns a Dead group back into a new one when a record for its id
// arrives after its tombstone (the group was deleted and created again).
func (g *Group) revive() { g.reset() }

func (g *Group) reset() {
	g.dead = false
	g.epoch, g.hash, g.targetEpoch = 0, 0, 0
	g.members = map[string]*member{}
	g.target = map[string]assignment{}
	g.sp = statePartitions{}
}

// Replay applies one record of this group read back from the offsets topic
// (value nil: a tombstone), as Kafka replays its log when it loads a
// group. It returns an error, and leaves the group unchanged, for a record
// it cannot decode, one of another group, and one Kafka would refuse as
// inconsistent with what came before (such as a member's metadata
// tombstone before its assignment's). After the last record the caller
// calls Loaded.
func (g *Group) Replay(key, value []byte) error {
	r, group, err := decode(key, value)
	if err != nil {
		return err
	}
	if group != g.id {
		return fmt.Errorf("share: group %q: replaying a record of group %q", g.id, group)
	}
	if err := r.apply(g); err != nil {
		return fmt.Errorf("share: group %q: replaying %s: %w", g.id, typeName(r.typ), err)
	}
	return nil
}

// Loaded ends a replay: every member's session starts at now, as Kafka
// schedules every member's session timeout when it loads a group, and
// Left forgets whatever it held. The coordinator should then call
// MetadataChanged with its current image (topics may have changed while
// the group was not loaded). A group that ends Dead was deleted: drop it.
func (g *Group) Loaded(now int64) {
	for _, m := range g.members {
		m.deadline = now + int64(g.cfg.SessionTimeoutMs)
	}
	g.left = nil
}

func typeName(typ int16) string {
	switch typ {
	case typePartitionMetadata:
		return "ShareGroupPartitionMetadata"
	case typeMemberMetadata:
		return "ShareGroupMemberMetadata"
	case typeGroupMetadata:
		return "ShareGroupMetadata"
	case typeTargetMetadata:
		return "ShareGroupTargetAssignmentMetadata"
	case typeTargetMember:
		return "ShareGroupTargetAssignmentMember"
	case typeCurrentAssignment:
		return "ShareGroupCurrentMemberAssignment"
	case typeStatePartitions:
		return "ShareGroupStatePartitionMetadata"
	}
	return fmt.Sprintf("record type %d", typ)
}
