package share

import (
	"fmt"
	"maps"
	"slices"

	"github.com/fjordlog/fjord/group"
)

// Share-group offsets administration: the group's side of
// AlterShareGroupOffsets, DeleteShareGroupOffsets and DeleteGroups, as
// Kafka 4.2's GroupMetadataManager runs them. The share-partitions' state
// itself (start offsets, delivery state) is the share coordinator's; the
// group only lists, in its ShareGroupStatePartitionMetadata, which
// share-partitions have state. Each operation is two steps around the
// caller's calls to the share coordinator:
//
//	AlterShareGroupOffsets   AlterOffsets: partitions initializing,
//	                         group epoch + 1 (the new state epoch)
//	                         -> InitializeShareGroupState of each ->
//	                         MarkInitialized: initializing -> initialized
//	DeleteShareGroupOffsets  DeleteOffsets: topics initialized -> deleting
//	                         -> DeleteShareGroupState ->
//	                         OffsetsDeleted: deleting cleared
//	DeleteGroups             BeginDelete: everything -> deleting
//	                         -> DeleteShareGroupState -> Delete (tombstones)
//
// The first step is durable before the share coordinator is asked, so a
// share-partition that may have state is always listed (initializing,
// initialized or deleting) until its state is known deleted: a failure
// between the steps leaves marks that the next delete takes up again, as
// in Kafka. All three need the group empty: the share-partition leaders
// serve members from the state in their memory, which an offsets change
// replaces (the caller also tells the leaders to drop it).
//
// Departure: AlterOffsets bumps the group epoch and initializes at the new
// epoch, as a later Kafka does (KAFKA-20910); Kafka 4.2 initializes at the
// current group epoch and leaves it. Each alter then fences (by state
// epoch) the writes of leaders that loaded the state before it, which two
// alters at one epoch would not; and a group that an alter creates has an
// epoch, which is what makes it exist here (see exists).

// AlterOffsets is AlterShareGroupOffsets' first step. It creates the
// group if the caller made it just now (as Kafka 4.2 does for an alter of
// a group that does not exist) and needs it empty. The partitions of
// parts (topic id to partitions, every topic in img) become initializing
// and their topics leave the deleting list; the group epoch goes up by
// one. It returns that new epoch, the state epoch at which the caller has
// the share coordinator initialize each partition, then reports success
// with MarkInitialized. With no partitions nothing changes.
//
// Errors: group.ErrNonEmptyGroup while the group has members,
// group.ErrGroupDead for a Dead group (the caller drops it and makes a new
// one).
func (g *Group) AlterOffsets(img *Image, parts map[TopicID][]int32) (stateEpoch int32, recs []Record, err error) {
	switch {
	case g.dead:
		return 0, nil, fmt.Errorf("share: altering the offsets of group %s: %w", g.id, group.ErrGroupDead)
	case len(g.members) > 0:
		return 0, nil, refuse(group.ErrNonEmptyGroup, "The group is not empty.")
	}
	parts = normalize(parts)
	if len(parts) == 0 {
		return g.epoch, nil, nil
	}
	g.emit(record{typ: typeGroupMetadata, epoch: g.epoch + 1, hash: g.hash})

	initializing := spMapOf(g.sp.initializing)
	deleting := spMapOf(g.sp.deleting)
	for t, ps := range parts {
		initializing.add(img, t, ps)
		delete(deleting, t)
	}
	g.emitStatePartitions(statePartitions{
		initializing: initializing.list(true),
		initialized:  g.sp.initialized,
		deleting:     deleting.list(false),
	})
	return g.epoch, g.flush(), nil
}

// MarkInitialized is AlterShareGroupOffsets' second step (Kafka's
// initializeShareGroupState): the share coordinator has initialized the
// partitions of parts, which move from initializing to initialized. A
// Dead group changes nothing.
func (g *Group) MarkInitialized(img *Image, parts map[TopicID][]int32) []Record {
	if g.dead {
		return nil
	}
	initializing := spMapOf(g.sp.initializing)
	initialized := spMapOf(g.sp.initialized)
	for t, ps := range normalize(parts) {
		initialized.add(img, t, ps)
		initializing.remove(t, ps)
	}
	g.emitStatePartitions(statePartitions{
		initializing: initializing.list(true),
		initialized:  initialized.list(true),
		deleting:     g.sp.deleting,
	})
	return g.flush()
}

// DeleteOffsets is DeleteShareGroupOffsets' first step (Kafka's
// sharePartitionsEligibleForOffsetDeletion), on an existing empty group.
// Of topics (ids, each in img), those with initialized partitions move to
// deleting; the result holds the partitions whose state the caller
// deletes: those initialized partitions or, for a topic already deleting
// (an earlier delete did not finish), every partition img gives it. A
// topic with neither is not in the result: the group has no offsets there
// (Kafka answers UNKNOWN_TOPIC_OR_PARTITION). The caller then reports
// the topics whose state is gone with OffsetsDeleted.
//
// Errors: group.ErrGroupNotFound when the group does not exist,
// group.ErrNonEmptyGroup while it has members.
func (g *Group) DeleteOffsets(img *Image, topics []TopicID) (map[TopicID][]int32, []Record, error) {
	if err := g.checkEmpty(); err != nil {
		return nil, nil, err
	}
	initialized := spMapOf(g.sp.initialized)
	deleting := spMapOf(g.sp.deleting)
	out := map[TopicID][]int32{}
	for _, t := range topics {
		if e, ok := initialized[t]; ok {
			out[t] = slices.Clone(e.parts)
			delete(initialized, t)
			deleting[t] = spTopic{id: t, name: e.name}
		} else if _, ok := deleting[t]; ok {
			if topic, ok := img.ByID(t); ok {
				out[t] = allPartitions(topic.Partitions)
			}
		}
	}
	g.emitStatePartitions(statePartitions{
		initializing: g.sp.initializing,
		initialized:  initialized.list(true),
		deleting:     deleting.list(false),
	})
	return out, g.flush(), nil
}

// OffsetsDeleted is DeleteShareGroupOffsets' second step (Kafka's
// completeDeleteShareGroupOffsets): the share coordinator deleted the
// state of topics, which leave the deleting list. A Dead group changes
// nothing.
func (g *Group) OffsetsDeleted(topics []TopicID) []Record {
	if g.dead {
		return nil
	}
	deleting := spMapOf(g.sp.deleting)
	for _, t := range topics {
		delete(deleting, t)
	}
	g.emitStatePartitions(statePartitions{
		initializing: g.sp.initializing,
		initialized:  g.sp.initialized,
		deleting:     deleting.list(false),
	})
	return g.flush()
}

// BeginDelete is DeleteGroups' first step for a share group (Kafka's
// shareGroupBuildPartitionDeleteRequest), on an existing empty group:
// every topic initialized or initializing moves to deleting, and the
// result holds the partitions whose state the caller deletes before it
// calls Delete: those initialized or initializing, and every partition
// img gives a topic left deleting by an earlier delete that did not
// finish (one img no longer has is dropped: its state went with it).
//
// Errors: group.ErrGroupNotFound when the group does not exist,
// group.ErrNonEmptyGroup while it has members.
func (g *Group) BeginDelete(img *Image) (map[TopicID][]int32, []Record, error) {
	if err := g.checkEmpty(); err != nil {
		return nil, nil, err
	}
	all := spMapOf(g.sp.initialized)
	for _, t := range g.sp.initializing {
		all.merge(t)
	}
	for _, t := range g.sp.deleting {
		if topic, ok := img.ByID(t.id); ok {
			all.merge(spTopic{id: t.id, name: t.name, parts: allPartitions(topic.Partitions)})
		}
	}
	deleting := spMap{}
	out := map[TopicID][]int32{}
	for t, e := range all {
		deleting[t] = spTopic{id: t, name: e.name}
		out[t] = slices.Clone(e.parts)
	}
	g.emitStatePartitions(statePartitions{deleting: deleting.list(false)})
	return out, g.flush(), nil
}

// checkEmpty is what the deletes need: a group that exists, without
// members (Kafka's ShareGroup.validateDeleteGroup after the lookup).
func (g *Group) checkEmpty() error {
	switch {
	case !g.exists():
		return refuse(group.ErrGroupNotFound, "Group %s not found.", g.id)
	case len(g.members) > 0:
		return refuse(group.ErrNonEmptyGroup, "The group is not empty.")
	}
	return nil
}

// emitStatePartitions writes the group's ShareGroupStatePartitionMetadata
// if next differs from it.
func (g *Group) emitStatePartitions(next statePartitions) {
	if !next.equal(g.sp) {
		g.emit(record{typ: typeStatePartitions, sp: next})
	}
}

// spMap is a list of statePartitions by topic id, to edit.
type spMap map[TopicID]spTopic

func spMapOf(ts []spTopic) spMap {
	m := make(spMap, len(ts))
	for _, t := range ts {
		m[t.id] = spTopic{id: t.id, name: t.name, parts: slices.Clone(t.parts)}
	}
	return m
}

// add merges ps into topic t's partitions; a topic new to m takes its
// name from img.
func (m spMap) add(img *Image, t TopicID, ps []int32) {
	topic, _ := img.ByID(t)
	m.merge(spTopic{id: t, name: topic.Name, parts: ps})
}

// merge merges e's partitions into those of its topic; a topic new to m
// takes e's name.
func (m spMap) merge(e spTopic) {
	if cur, ok := m[e.id]; ok {
		e.name = cur.name
		e.parts = append(slices.Clone(cur.parts), e.parts...)
	}
	e.parts = normalize(map[TopicID][]int32{e.id: e.parts})[e.id]
	m[e.id] = e
}

// remove takes ps out of topic t's partitions.
func (m spMap) remove(t TopicID, ps []int32) {
	e, ok := m[t]
	if !ok {
		return
	}
	e.parts = slices.DeleteFunc(e.parts, func(p int32) bool { return slices.Contains(ps, p) })
	m[t] = e
}

// list is m sorted by topic id: with partitions (those without dropped),
// or without (the deleting list's shape).
func (m spMap) list(withParts bool) []spTopic {
	var out []spTopic
	for _, t := range slices.SortedFunc(maps.Keys(m), compareIDs) {
		e := m[t]
		if !withParts {
			e.parts = nil
		} else if len(e.parts) == 0 {
			continue
		}
		out = append(out, e)
	}
	return out
}

// allPartitions is [0, n).
func allPartitions(n int32) []int32 {
	ps := make([]int32, n)
	for i := range ps {
		ps[i] = int32(i)
	}
	return ps
}
