package share

import (
	"cmp"
	"slices"
)

// Tick removes the members whose session expired by now (deadline <= now),
// earliest first, each as a leave does (Kafka's session timeout fences the
// member), and returns the records. Their ids go to Left.
func (g *Group) Tick(now int64, img *Image) []Record {
	if g.dead {
		return nil
	}
	var expired []*member
	for _, m := range g.members {
		if m.deadline > 0 && m.deadline <= now {
			expired = append(expired, m)
		}
	}
	slices.SortFunc(expired, func(a, b *member) int {
		return cmp.Or(cmp.Compare(a.deadline, b.deadline), cmp.Compare(a.id, b.id))
	})
	for _, m := range expired {
		g.remove(img, m)
	}
	return g.flush()
}

// MetadataChanged brings the group up to a new image: if the subscribed
// topics changed (created, deleted, more partitions), the group epoch goes
// up and the next heartbeat computes a new target assignment; the
// share-partition state list drops deleted topics and adds new partitions.
// Kafka does the same lazily, at the next heartbeat after the image
// change; the outcome is the same.
func (g *Group) MetadataChanged(now int64, img *Image) []Record {
	if g.dead {
		return nil
	}
	if hash := img.MetadataHash(g.subscribedNames()); hash != g.hash {
		g.emit(record{typ: typeGroupMetadata, epoch: g.epoch + 1, hash: hash})
	}
	g.updateStatePartitions(img)
	return g.flush()
}

// updateStatePartitions writes the group's ShareGroupStatePartitionMetadata
// if it changes: every partition subscribed now joins the initialized
// ones, and topics img no longer has leave every list. Partitions of
// topics no longer subscribed stay initialized, as in Kafka: their state
// (the share-partition start offset) is kept for a later subscription.
// Entries Kafka left initializing or deleting are kept until their topic
// is deleted, less what is now initialized.
func (g *Group) updateStatePartitions(img *Image) {
	sub := g.SubscribedPartitions(img)
	live := func(ts []spTopic) map[TopicID][]int32 {
		out := map[TopicID][]int32{}
		for _, t := range ts {
			if _, ok := img.ByID(t.id); ok {
				out[t.id] = t.parts
			}
		}
		return out
	}
	initialized := live(g.sp.initialized)
	for t, ps := range sub {
		initialized[t] = append(slices.Clone(initialized[t]), ps...)
	}
	initialized = normalize(initialized)
	initializing := live(g.sp.initializing)
	for t, ps := range initializing {
		initializing[t] = slices.DeleteFunc(slices.Clone(ps), func(p int32) bool {
			_, found := slices.BinarySearch(initialized[t], p)
			return found
		})
	}
	deleting := live(g.sp.deleting)
	for t := range deleting {
		if len(initialized[t]) > 0 {
			delete(deleting, t)
		}
	}

	next := statePartitions{
		initializing: spList(img, normalize(initializing), true),
		initialized:  spList(img, assignment(initialized), true),
		deleting:     spList(img, deleting, false),
	}
	if !next.equal(g.sp) {
		g.emit(record{typ: typeStatePartitions, sp: next})
	}
}

// spList turns a map into a list sorted by topic id, with names from img.
// withParts false keeps every topic of a; true drops those without
// partitions.
func spList(img *Image, a map[TopicID][]int32, withParts bool) []spTopic {
	var out []spTopic
	for t, ps := range a {
		if withParts && len(ps) == 0 {
			continue
		}
		topic, _ := img.ByID(t)
		e := spTopic{id: t, name: topic.Name}
		if withParts {
			e.parts = slices.Clone(ps)
		}
		out = append(out, e)
	}
	slices.SortFunc(out, func(a, b spTopic) int { return compareIDs(a.id, b.id) })
	return out
}
