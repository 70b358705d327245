package assign

import (
	"fmt"
	"math/rand"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// checkContract runs a on s and checks what every assignor owes its
// caller: the shape (checkShape), that s is not modified, that the result
// shares no memory with s, and that shuffling every slice and map of s does
// not change the result. It returns the result.
func checkContract(t *testing.T, a Assignor, s Spec, g gen) Assignment {
	t.Helper()
	before := cloneSpec(s)
	got := a.Assign(s)
	if !specEqual(before, s) {
		t.Fatalf("%s modified its Spec\n%s", a.Name(), describe(before))
	}
	if err := checkShape(s, got); err != nil {
		t.Fatalf("%s: %v\n%s\ngot %v", a.Name(), err, describe(s), got)
	}
	again := a.Assign(g.shuffled(s))
	if !reflect.DeepEqual(got, again) {
		t.Fatalf("%s depends on input order\n%s\ngot %v\nshuffled %v", a.Name(), describe(s), got, again)
	}
	keep := a.Assign(s)
	scribble(keep)
	if !specEqual(before, s) {
		t.Fatalf("%s returned memory shared with its Spec", a.Name())
	}
	return got
}

// loads returns each member's partition count.
func loads(a Assignment) map[string]int {
	l := make(map[string]int, len(a))
	for m, tps := range a {
		l[m] = count(tps)
	}
	return l
}

// checkNoMovingPath checks that no member can pass a partition, directly or
// through other members, to a member with at least two fewer: the
// optimality condition of balanceLoads, checked by a plain fixed point.
func checkNoMovingPath(s Spec, a Assignment) error {
	l := loads(a)
	subscribers := make(map[TopicID][]string)
	for _, m := range s.Members {
		for _, id := range m.Subscribed {
			subscribers[id] = append(subscribers[id], m.ID)
		}
	}
	for _, src := range s.Members {
		reach := map[string]bool{src.ID: true}
		for grew := true; grew; {
			grew = false
			for _, u := range sortedMembers(a) {
				if !reach[u] {
					continue
				}
				for id := range a[u] {
					for _, w := range subscribers[id] {
						if !reach[w] {
							reach[w], grew = true, true
						}
					}
				}
			}
		}
		for w := range reach {
			if l[w] <= l[src.ID]-2 {
				return fmt.Errorf("%s (%d partitions) can pass one to %s (%d)", src.ID, l[src.ID], w, l[w])
			}
		}
	}
	return nil
}

func TestUniformProperties(t *testing.T) {
	g := gen{rand.New(rand.NewSource(848))}
	for i := range 500 {
		s := g.spec(genOpts{homogeneous: i%2 == 0})
		got := checkContract(t, Uniform(), s, g)
		if err := checkExclusive(got); err != nil {
			t.Fatalf("%v\n%s", err, describe(s))
		}
		if newView(s).homogeneous() {
			l := loads(got)
			lo, hi := len(s.Topics)*100, 0
			for _, n := range l {
				lo, hi = min(lo, n), max(hi, n)
			}
			if hi-lo > 1 {
				t.Fatalf("homogeneous counts %v differ by more than one\n%s", l, describe(s))
			}
		}
		if err := checkNoMovingPath(s, got); err != nil {
			t.Fatalf("%v\n%s\ngot %v", err, describe(s), got)
		}
		// A result fed back as Current is kept as it is.
		if again := Uniform().Assign(withCurrent(s, got)); !reflect.DeepEqual(got, again) {
			t.Fatalf("not a fixed point\n%s\nfirst %v\nagain %v", describe(s), got, again)
		}
	}
}

// TestUniformJoinLeave checks the stickiness bounds of homogeneous
// subscriptions. Start from any balanced, complete assignment of P
// partitions over N members (counts floor(P/N) or one more).
//
// Join: with N+1 members the quota is q = floor(P/(N+1)) <= floor(P/N), so
// every old member holds at least q and keeps q; members holding more than
// q number at least r = P mod (N+1) (if floor(P/N) > q all N do and r <=
// N; if floor(P/N) = q then P = qN + a with a members at q+1, and r = a -
// q <= a), so r of them keep q+1. Kept: Nq + r = P - q. So exactly q
// partitions move, all to the newcomer, and no old member gains any.
//
// Leave: with N-1 members q' = floor(P/(N-1)) >= floor(P/N), so every
// remaining member is at or below q'+1 and keeps everything it has (the
// ones at q'+1 number at most P mod (N-1)); only the leaver's partitions
// move.
func TestUniformJoinLeave(t *testing.T) {
	g := gen{rand.New(rand.NewSource(4848))}
	for range 300 {
		s := g.spec(genOpts{homogeneous: true})
		if len(s.Members[0].Subscribed) == 0 {
			continue
		}
		base := Uniform().Assign(s) // balanced: checked by TestUniformProperties
		s = withCurrent(s, base)
		P := 0
		for _, tp := range s.Topics {
			if slices.Contains(s.Members[0].Subscribed, tp.ID) {
				P += int(tp.Partitions)
			}
		}
		N := len(s.Members)

		// Join.
		joined := cloneSpec(s)
		var id string
		for id = "new"; base[id] != nil; id += "+" {
		}
		joined.Members = append(joined.Members, Member{ID: id, Subscribed: slices.Clone(s.Members[0].Subscribed)})
		slices.SortFunc(joined.Members, func(a, b Member) int { return strings.Compare(a.ID, b.ID) })
		after := checkContract(t, Uniform(), joined, g)
		if got, want := moves(base, after), P/(N+1); got != want {
			t.Fatalf("join moved %d partitions, want %d\n%s\nbefore %v\nafter %v", got, want, describe(joined), base, after)
		}
		if got := count(after[id]); got != P/(N+1) {
			t.Fatalf("newcomer got %d, want %d", got, P/(N+1))
		}

		// Leave.
		if N < 2 {
			continue
		}
		left := cloneSpec(s)
		gone := g.rng.Intn(N)
		goneID := left.Members[gone].ID
		left.Members = slices.Delete(left.Members, gone, gone+1)
		after = checkContract(t, Uniform(), left, g)
		for m, tps := range base {
			if m == goneID {
				continue
			}
			for id, ps := range tps {
				for _, p := range ps {
					if !slices.Contains(after[m][id], p) {
						t.Fatalf("leave: %s lost %s:%d\n%s", m, tname(id), p, describe(left))
					}
				}
			}
		}
		if got, want := moves(base, after), count(base[goneID]); got != want {
			t.Fatalf("leave moved %d, want %d (the leaver's)", got, want)
		}
	}
}

// TestUniformLarge checks the properties at the benchmark's size, where
// balanceLoads has real work to do.
func TestUniformLarge(t *testing.T) {
	g := gen{rand.New(rand.NewSource(100))}
	for _, homogeneous := range []bool{true, false} {
		s := largeSpec(g, homogeneous)
		got := checkContract(t, Uniform(), s, g)
		if err := checkExclusive(got); err != nil {
			t.Fatal(err)
		}
		if err := checkNoMovingPath(s, got); err != nil {
			t.Fatal(err)
		}
		// One more member: few partitions move.
		s = withCurrent(s, got)
		s.Members = append(s.Members, Member{ID: "zzz", Subscribed: slices.Clone(s.Members[0].Subscribed)})
		after := checkContract(t, Uniform(), s, g)
		if err := checkNoMovingPath(s, after); err != nil {
			t.Fatal(err)
		}
		t.Logf("homogeneous=%v: one join moved %d of 1000 partitions, newcomer has %d",
			homogeneous, moves(got, after), count(after["zzz"]))
	}
}

// largeSpec: 1000 partitions over 10 topics, 100 members. Heterogeneous
// members subscribe to a random half of the topics.
func largeSpec(g gen, homogeneous bool) Spec {
	var s Spec
	for i := range 10 {
		name := fmt.Sprintf("t%02d", i)
		s.Topics = append(s.Topics, Topic{ID: tid(name), Name: name, Partitions: 100})
	}
	for i := range 100 {
		m := Member{ID: fmt.Sprintf("m%03d", i)}
		for _, tp := range s.Topics {
			if homogeneous || g.rng.Intn(2) == 0 {
				m.Subscribed = append(m.Subscribed, tp.ID)
			}
		}
		s.Members = append(s.Members, m)
	}
	return s
}

func BenchmarkUniform(b *testing.B) {
	for _, c := range []struct {
		name        string
		homogeneous bool
		current     bool
	}{
		{"homogeneous/fresh", true, false},
		{"homogeneous/join", true, true},
		{"heterogeneous/fresh", false, false},
		{"heterogeneous/join", false, true},
	} {
		b.Run(c.name, func(b *testing.B) {
			g := gen{rand.New(rand.NewSource(1))}
			s := largeSpec(g, c.homogeneous)
			if c.current {
				// The group as it was before one more member joined.
				prev := s
				prev.Members = prev.Members[:len(prev.Members)-1]
				s = withCurrent(s, Uniform().Assign(prev))
			}
			b.ReportAllocs()
			for b.Loop() {
				Uniform().Assign(s)
			}
		})
	}
}
