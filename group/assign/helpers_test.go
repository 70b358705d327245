package assign

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand"
	"reflect"
	"slices"
	"strings"
)

// cloneSpec deep-copies s, keeping nil as nil so specEqual can compare.
func cloneSpec(s Spec) Spec {
	c := Spec{Topics: slices.Clone(s.Topics)}
	if s.Members != nil {
		c.Members = make([]Member, len(s.Members))
	}
	for i, m := range s.Members {
		cm := m
		cm.Subscribed = slices.Clone(m.Subscribed)
		if m.InstanceID != nil {
			v := *m.InstanceID
			cm.InstanceID = &v
		}
		if m.Rack != nil {
			v := *m.Rack
			cm.Rack = &v
		}
		cm.Current = cloneParts(m.Current)
		c.Members[i] = cm
	}
	return c
}

func cloneParts(p map[TopicID][]int32) map[TopicID][]int32 {
	if p == nil {
		return nil
	}
	c := make(map[TopicID][]int32, len(p))
	for id, ps := range p {
		c[id] = slices.Clone(ps)
	}
	return c
}

func specEqual(a, b Spec) bool { return reflect.DeepEqual(a, b) }

// checkShape checks what every assignor promises whatever its policy: an
// entry for every member and no one else; only topics the member
// subscribes to and the Spec describes; partitions sorted, distinct, in
// range, no empty lists; and every partition of every subscribed topic
// held by at least one subscriber.
func checkShape(s Spec, a Assignment) error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if len(a) != len(s.Members) {
		bad("assignment has %d members, spec %d", len(a), len(s.Members))
	}
	topics := make(map[TopicID]int32)
	for _, t := range s.Topics {
		topics[t.ID] = t.Partitions
	}
	held := make(map[TopicID][]int) // holders per partition
	for _, t := range s.Topics {
		held[t.ID] = make([]int, t.Partitions)
	}
	subscribed := make(map[TopicID]bool)
	for _, m := range s.Members {
		got, ok := a[m.ID]
		if !ok || got == nil {
			bad("member %s has no entry", m.ID)
			continue
		}
		for _, id := range m.Subscribed {
			if _, ok := topics[id]; ok {
				subscribed[id] = true
			}
		}
		for _, id := range sortedTopics(got) {
			ps := got[id]
			n, known := topics[id]
			switch {
			case !known:
				bad("member %s got unknown topic %s", m.ID, tname(id))
				continue
			case !slices.Contains(m.Subscribed, id):
				bad("member %s got topic %s it does not subscribe to", m.ID, tname(id))
			case len(ps) == 0:
				bad("member %s has an empty list for %s", m.ID, tname(id))
			}
			for i, p := range ps {
				if p < 0 || p >= n {
					bad("member %s got %s:%d out of range", m.ID, tname(id), p)
					continue
				}
				if i > 0 && ps[i-1] >= p {
					bad("member %s: %s partitions not sorted and distinct: %v", m.ID, tname(id), ps)
				}
				held[id][p]++
			}
		}
	}
	for _, t := range s.Topics {
		if !subscribed[t.ID] {
			continue
		}
		for p, n := range held[t.ID] {
			if n == 0 {
				bad("%s:%d not assigned", tname(t.ID), p)
			}
		}
	}
	return errors.Join(errs...)
}

// checkExclusive checks that no partition is held twice.
func checkExclusive(a Assignment) error {
	owner := make(map[string]string)
	for _, m := range sortedMembers(a) {
		for id, ps := range a[m] {
			for _, p := range ps {
				k := fmt.Sprintf("%s:%d", tname(id), p)
				if o, dup := owner[k]; dup {
					return fmt.Errorf("%s held by %s and %s", k, o, m)
				}
				owner[k] = m
			}
		}
	}
	return nil
}

func sortedMembers(a Assignment) []string {
	ids := make([]string, 0, len(a))
	for id := range a {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

func count(ps map[TopicID][]int32) int {
	n := 0
	for _, p := range ps {
		n += len(p)
	}
	return n
}

// withCurrent returns a copy of s whose members' Current is a's entry,
// restricted to the topics each member subscribes to (the Member
// invariant). Members a does not mention start empty.
func withCurrent(s Spec, a Assignment) Spec {
	c := cloneSpec(s)
	for i := range c.Members {
		m := &c.Members[i]
		m.Current = nil
		for id, ps := range a[m.ID] {
			if slices.Contains(m.Subscribed, id) {
				if m.Current == nil {
					m.Current = make(map[TopicID][]int32)
				}
				m.Current[id] = slices.Clone(ps)
			}
		}
	}
	return c
}

// moves counts the (member, partition) pairs in b that the same member did
// not have in a.
func moves(a, b Assignment) int {
	n := 0
	for m, tps := range b {
		for id, ps := range tps {
			for _, p := range ps {
				if !slices.Contains(a[m][id], p) {
					n++
				}
			}
		}
	}
	return n
}

// gen makes random Specs. Sizes are small so hundreds of cases run fast,
// and include more members than partitions.
type gen struct {
	rng *rand.Rand
}

type genOpts struct {
	homogeneous bool
	noCurrent   bool
}

func (g gen) topics() []Topic {
	n := 1 + g.rng.Intn(5)
	var ts []Topic
	seen := make(map[string]bool)
	for len(ts) < n {
		name := fmt.Sprintf("t%c%c", 'a'+g.rng.Intn(26), 'a'+g.rng.Intn(26))
		if seen[name] {
			continue
		}
		seen[name] = true
		ts = append(ts, Topic{ID: tid(name), Name: name, Partitions: int32(1 + g.rng.Intn(12))})
	}
	slices.SortFunc(ts, func(a, b Topic) int { return bytes.Compare(a.ID[:], b.ID[:]) })
	return ts
}

func (g gen) memberIDs(n int) []string {
	seen := make(map[string]bool)
	var ids []string
	for len(ids) < n {
		id := fmt.Sprintf("m%03d", g.rng.Intn(1000))
		if !seen[id] {
			seen[id] = true
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	return ids
}

// subscription picks a random subset of topics (possibly empty, rarely).
func (g gen) subscription(ts []Topic) []TopicID {
	var sub []TopicID
	for _, t := range ts {
		if g.rng.Intn(3) > 0 {
			sub = append(sub, t.ID)
		}
	}
	if len(sub) == 0 && g.rng.Intn(4) > 0 {
		sub = append(sub, ts[g.rng.Intn(len(ts))].ID)
	}
	return sub
}

// spec makes a random Spec. Current is either empty, or random claims over
// subscribed topics that may overlap between members and may name
// partitions the topic does not have.
func (g gen) spec(o genOpts) Spec {
	s := Spec{Topics: g.topics()}
	n := 1 + g.rng.Intn(14)
	common := g.subscription(s.Topics)
	for _, id := range g.memberIDs(n) {
		m := Member{ID: id, Subscribed: common}
		if !o.homogeneous {
			m.Subscribed = g.subscription(s.Topics)
		}
		m.Subscribed = slices.Clone(m.Subscribed)
		if g.rng.Intn(4) == 0 {
			inst := fmt.Sprintf("i%02d", g.rng.Intn(50))
			m.InstanceID = &inst
		}
		if !o.noCurrent && g.rng.Intn(3) > 0 {
			m.Current = make(map[TopicID][]int32)
			for _, tid := range m.Subscribed {
				var parts int32
				for _, t := range s.Topics {
					if t.ID == tid {
						parts = t.Partitions
					}
				}
				var ps []int32
				for p := range parts + 2 {
					if g.rng.Intn(int(n)+1) == 0 {
						ps = append(ps, p)
					}
				}
				if len(ps) > 0 {
					m.Current[tid] = ps
				}
			}
		}
		s.Members = append(s.Members, m)
	}
	// Static members need distinct instance ids.
	used := make(map[string]bool)
	for i := range s.Members {
		in := s.Members[i].InstanceID
		if in == nil {
			continue
		}
		if used[*in] {
			s.Members[i].InstanceID = nil
			continue
		}
		used[*in] = true
	}
	return s
}

// shuffled returns a copy of s with every slice and map rebuilt in random
// order: what the assignors must not depend on.
func (g gen) shuffled(s Spec) Spec {
	c := cloneSpec(s)
	g.rng.Shuffle(len(c.Topics), func(i, j int) { c.Topics[i], c.Topics[j] = c.Topics[j], c.Topics[i] })
	g.rng.Shuffle(len(c.Members), func(i, j int) { c.Members[i], c.Members[j] = c.Members[j], c.Members[i] })
	for i := range c.Members {
		m := &c.Members[i]
		g.rng.Shuffle(len(m.Subscribed), func(i, j int) { m.Subscribed[i], m.Subscribed[j] = m.Subscribed[j], m.Subscribed[i] })
		if m.Current != nil {
			keys := sortedTopics(m.Current)
			g.rng.Shuffle(len(keys), func(i, j int) { keys[i], keys[j] = keys[j], keys[i] })
			cur := make(map[TopicID][]int32, len(keys))
			for _, k := range keys {
				ps := slices.Clone(m.Current[k])
				g.rng.Shuffle(len(ps), func(i, j int) { ps[i], ps[j] = ps[j], ps[i] })
				cur[k] = ps
			}
			m.Current = cur
		}
	}
	return c
}

// scribble overwrites every partition list of a, to show the Spec does not
// share memory with the result.
func scribble(a Assignment) {
	for _, tps := range a {
		for _, ps := range tps {
			for i := range ps {
				ps[i] = -7
			}
		}
	}
}

func describe(s Spec) string {
	var b strings.Builder
	b.WriteString("topics")
	for _, t := range s.Topics {
		fmt.Fprintf(&b, " %s:%d", tname(t.ID), t.Partitions)
	}
	for _, m := range s.Members {
		fmt.Fprintf(&b, "\n%s sub=", m.ID)
		for i, id := range m.Subscribed {
			if i > 0 {
				b.WriteString(",")
			}
			b.WriteString(tname(id))
		}
		if m.InstanceID != nil {
			fmt.Fprintf(&b, " inst=%s", *m.InstanceID)
		}
		if len(m.Current) > 0 {
			fmt.Fprintf(&b, " cur=%v", m.Current)
		}
	}
	return b.String()
}
