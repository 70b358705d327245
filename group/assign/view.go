package assign

import (
	"bytes"
	"cmp"
	"slices"
)

// view is the read-only index every assignor builds over a Spec before it
// decides anything: members and topics in id order, each member's
// subscriptions as topic indexes, each topic's subscribers as member
// indexes, and all partitions of all topics numbered into one flat range
// [0, total) so per-partition state is a slice, not a map.
//
// Building it is the only place the Spec is read. It sorts copies rather
// than trusting the Spec's order, drops subscriptions to topics the Spec
// does not describe (Kafka throws there; an assignor here has no error to
// return, and the group state machine only subscribes members to known
// topics), and ignores topics with no partitions. So the result does not
// depend on the order of Spec's slices or maps, even if their invariants
// are broken.
//
// Invariants: members sorted by ID; topics sorted by ID with distinct ids
// and Partitions > 0; base[t+1] = base[t] + topics[t].Partitions; subs[m]
// sorted and distinct; subscribers[t] sorted and distinct; m is in
// subscribers[t] iff t is in subs[m].
type view struct {
	members     []*Member // pointers into the Spec: read, never written
	topics      []Topic
	byID        map[TopicID]int // topic id -> index into topics
	base        []int           // len(topics)+1: flat index of each topic's partition 0
	subs        [][]int         // per member: indexes of subscribed topics
	subscribers [][]int         // per topic: indexes of subscribed members
}

func newView(s Spec) *view {
	v := &view{
		members: make([]*Member, len(s.Members)),
		byID:    make(map[TopicID]int, len(s.Topics)),
	}
	for i := range s.Members {
		v.members[i] = &s.Members[i]
	}
	slices.SortStableFunc(v.members, func(a, b *Member) int { return cmp.Compare(a.ID, b.ID) })

	topics := slices.Clone(s.Topics)
	slices.SortStableFunc(topics, func(a, b Topic) int { return bytes.Compare(a.ID[:], b.ID[:]) })
	for _, t := range topics {
		if _, dup := v.byID[t.ID]; dup || t.Partitions <= 0 {
			continue
		}
		v.byID[t.ID] = len(v.topics)
		v.topics = append(v.topics, t)
	}
	v.base = make([]int, len(v.topics)+1)
	for t, topic := range v.topics {
		v.base[t+1] = v.base[t] + int(topic.Partitions)
	}

	v.subs = make([][]int, len(v.members))
	v.subscribers = make([][]int, len(v.topics))
	for m, mem := range v.members {
		var subs []int
		for _, id := range mem.Subscribed {
			if t, ok := v.byID[id]; ok {
				subs = append(subs, t)
			}
		}
		slices.Sort(subs)
		subs = slices.Compact(subs)
		v.subs[m] = subs
		for _, t := range subs {
			v.subscribers[t] = append(v.subscribers[t], m)
		}
	}
	return v
}

// total is the number of partitions of all topics in the view.
func (v *view) total() int { return v.base[len(v.topics)] }

// topicOf returns the topic index of flat partition f.
func (v *view) topicOf(f int) int {
	// base is strictly increasing (every topic has partitions): the topic
	// is the last one starting at or before f.
	t, found := slices.BinarySearch(v.base, f)
	if !found {
		t--
	}
	return t
}

// homogeneous reports whether every member subscribes to the same topics
// (Kafka's SubscriptionType.HOMOGENEOUS), counting only topics the view
// knows. An empty group is homogeneous.
func (v *view) homogeneous() bool {
	for m := 1; m < len(v.members); m++ {
		if !slices.Equal(v.subs[m], v.subs[0]) {
			return false
		}
	}
	return true
}

// current returns member m's partitions of topic t in the Spec's current
// assignment: a fresh slice, sorted, without duplicates and without
// partitions the topic no longer has. It reads Current by key, never by
// ranging over it.
func (v *view) current(m, t int) []int32 {
	ps := v.members[m].Current[v.topics[t].ID]
	out := make([]int32, 0, len(ps))
	for _, p := range ps {
		if p >= 0 && p < v.topics[t].Partitions {
			out = append(out, p)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// output turns per-member flat partition lists into an Assignment: every
// member gets an entry (empty if it has nothing), partitions sorted. The
// slices are new; nothing aliases the Spec.
func (v *view) output(held [][]int) Assignment {
	a := make(Assignment, len(v.members))
	for m, mem := range v.members {
		fs := held[m]
		slices.Sort(fs)
		out := make(map[TopicID][]int32)
		for i := 0; i < len(fs); {
			t := v.topicOf(fs[i])
			j := i
			for j < len(fs) && fs[j] < v.base[t+1] {
				j++
			}
			ps := make([]int32, j-i)
			for k := range ps {
				ps[k] = int32(fs[i+k] - v.base[t])
			}
			out[v.topics[t].ID] = ps
			i = j
		}
		a[mem.ID] = out
	}
	return a
}

// ownersToHeld inverts an exclusive owner table (flat partition -> member
// index, -1 for none) into per-member flat lists in partition order.
func (v *view) ownersToHeld(owner []int) [][]int {
	held := make([][]int, len(v.members))
	for f, m := range owner {
		if m >= 0 {
			held[m] = append(held[m], f)
		}
	}
	return held
}
