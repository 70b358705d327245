package assign

import (
	"fmt"
	"math/rand"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// pool is one unit the simple assignor balances: with homogeneous
// subscriptions all subscribed topics over all members, otherwise one topic
// over its subscribers.
type pool struct {
	topics  []Topic
	members []string
}

func simplePools(s Spec) []pool {
	known := make(map[TopicID]Topic)
	for _, t := range s.Topics {
		known[t.ID] = t
	}
	if newView(s).homogeneous() {
		if len(s.Members) == 0 {
			return nil
		}
		var p pool
		for _, m := range s.Members {
			p.members = append(p.members, m.ID)
		}
		for _, t := range s.Topics {
			if slices.Contains(s.Members[0].Subscribed, t.ID) {
				p.topics = append(p.topics, t)
			}
		}
		if len(p.topics) == 0 {
			return nil
		}
		return []pool{p}
	}
	var ps []pool
	for _, t := range s.Topics {
		p := pool{topics: []Topic{t}}
		for _, m := range s.Members {
			if slices.Contains(m.Subscribed, t.ID) {
				p.members = append(p.members, m.ID)
			}
		}
		if len(p.members) > 0 {
			ps = append(ps, p)
		}
	}
	return ps
}

// checkSimplePool checks a pool's sharing and quotas and reports whether
// it is full: every partition shared by exactly s members.
func checkSimplePool(p pool, a Assignment) (full bool, err error) {
	P := 0
	for _, t := range p.topics {
		P += int(t.Partitions)
	}
	n := len(p.members)
	s := (n + P - 1) / P
	lo, hi := s*P/n, (s*P+n-1)/n
	total := 0
	for _, m := range p.members {
		c := 0
		for _, t := range p.topics {
			c += len(a[m][t.ID])
		}
		total += c
		if c > hi {
			return false, fmt.Errorf("%s has %d of the pool, quota at most %d", m, c, hi)
		}
		if n <= P && c < lo {
			return false, fmt.Errorf("%s has %d of the pool, quota %d or %d", m, c, lo, hi)
		}
	}
	for _, t := range p.topics {
		for part := range t.Partitions {
			h := 0
			for _, m := range p.members {
				if slices.Contains(a[m][t.ID], part) {
					h++
				}
			}
			if h < 1 || h > s || n <= P && h != 1 {
				return false, fmt.Errorf("%s:%d shared by %d, want 1 to %d", tname(t.ID), part, h, s)
			}
		}
	}
	return total == s*P, nil
}

func TestSimpleProperties(t *testing.T) {
	g := gen{rand.New(rand.NewSource(932))}
	notFull := 0
	for i := range 500 {
		s := g.spec(genOpts{homogeneous: i%2 == 0})
		got := checkContract(t, Simple(), s, g)
		full := true
		for _, p := range simplePools(s) {
			f, err := checkSimplePool(p, got)
			if err != nil {
				t.Fatalf("%v\n%s\ngot %v", err, describe(s), got)
			}
			full = full && f
		}
		if !full {
			notFull++
			continue
		}
		// A full result fed back as Current is kept as it is.
		if again := Simple().Assign(withCurrent(s, got)); !reflect.DeepEqual(got, again) {
			t.Fatalf("not a fixed point\n%s\nfirst %v\nagain %v", describe(s), got, again)
		}
	}
	t.Logf("%d of 500 results left some partition under-shared", notFull)
}

// TestSimpleJoinLeave: with no more members than partitions (s = 1) a
// share group behaves like a consumer group under uniform, and the same
// bounds hold (see TestUniformJoinLeave for the proof): a join moves
// exactly floor(P/(N+1)) partitions, all to the newcomer; a leave moves
// only the leaver's.
func TestSimpleJoinLeave(t *testing.T) {
	g := gen{rand.New(rand.NewSource(19362))}
	for range 300 {
		s := g.spec(genOpts{homogeneous: true})
		if len(s.Members[0].Subscribed) == 0 {
			continue
		}
		P := 0
		for _, tp := range s.Topics {
			if slices.Contains(s.Members[0].Subscribed, tp.ID) {
				P += int(tp.Partitions)
			}
		}
		N := len(s.Members)
		if N+1 > P {
			continue
		}
		base := Simple().Assign(s)
		s = withCurrent(s, base)

		joined := cloneSpec(s)
		joined.Members = append(joined.Members, Member{ID: "new", Subscribed: slices.Clone(s.Members[0].Subscribed)})
		slices.SortFunc(joined.Members, func(a, b Member) int { return strings.Compare(a.ID, b.ID) })
		after := checkContract(t, Simple(), joined, g)
		if got, want := moves(base, after), P/(N+1); got != want || count(after["new"]) != want {
			t.Fatalf("join moved %d, newcomer got %d, want %d\n%s\nbefore %v\nafter %v",
				got, count(after["new"]), want, describe(joined), base, after)
		}

		if N < 2 {
			continue
		}
		left := cloneSpec(s)
		gone := g.rng.Intn(N)
		goneID := left.Members[gone].ID
		left.Members = slices.Delete(left.Members, gone, gone+1)
		after = checkContract(t, Simple(), left, g)
		if got, want := moves(base, after), count(base[goneID]); got != want {
			t.Fatalf("leave moved %d, want %d (the leaver's)\n%s", got, want, describe(left))
		}
	}
}
