package consumer

import (
	"maps"
	"slices"

	"github.com/fjordlog/fjord/group/assign"
	"github.com/fjordlog/fjord/group/internal/ptr"
)

// updateTarget computes the target assignment of the current group epoch
// with the group's preferred assignor and writes the members whose target
// changed, then the new assignment epoch (Kafka's TargetAssignmentBuilder).
// The assignor sees every member, static members that left with epoch -2
// included, and each member's previous target, so that a sticky assignor
// moves as little as it can.
func (g *Group) updateTarget(img *Image) {
	a, ok := g.cfg.assignor(g.preferredAssignor())
	if !ok {
		a = g.cfg.Assignors[0]
	}
	members := g.sortedMembers()
	spec := assign.Spec{Members: make([]assign.Member, 0, len(members))}
	topics := map[TopicID]assign.Topic{}
	for _, m := range members {
		subscribed := g.subscribedIDs(m, img)
		ids := slices.SortedFunc(maps.Keys(subscribed), compareTopicIDs)
		current := map[TopicID][]int32{}
		for _, id := range ids {
			t, _ := img.ByID(id)
			topics[id] = assign.Topic{ID: id, Name: t.Name, Partitions: t.Partitions}
			for _, p := range g.target[m.id][id] {
				if p < t.Partitions {
					current[id] = append(current[id], p)
				}
			}
		}
		spec.Members = append(spec.Members, assign.Member{
			ID:         m.id,
			InstanceID: ptr.Clone(m.meta.instanceID),
			Rack:       ptr.Clone(m.meta.rackID),
			Subscribed: ids,
			Current:    current,
		})
	}
	spec.Topics = slices.SortedFunc(maps.Values(topics), func(x, y assign.Topic) int { return compareTopicIDs(x.ID, y.ID) })
	result := a.Assign(spec)

	for i, m := range members {
		// Keep only what the member may have: a subscribed topic's
		// existing partitions.
		raw := map[TopicID][]int32{}
		for _, id := range spec.Members[i].Subscribed {
			n := topics[id].Partitions
			for _, p := range result[m.id][id] {
				if p >= 0 && p < n {
					raw[id] = append(raw[id], p)
				}
			}
		}
		next := normalize(raw)
		if old, ok := g.target[m.id]; !ok || !old.equal(next) {
			g.emit(targetMemberRec{id: m.id, a: next})
		}
	}
	g.emit(targetEpochRec{epoch: g.epoch})
}
