package assign

import (
	"bytes"
	"math/rand"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// rangeWant computes the range assignment of one topic the slow, obvious
// way: the subscribers in Kafka's order, then contiguous ranges.
func rangeWant(s Spec, topic Topic) map[string][]int32 {
	var subs []Member
	for _, m := range s.Members {
		if slices.Contains(m.Subscribed, topic.ID) {
			subs = append(subs, m)
		}
	}
	slices.SortStableFunc(subs, func(a, b Member) int {
		switch {
		case a.InstanceID != nil && b.InstanceID != nil:
			return strings.Compare(*a.InstanceID, *b.InstanceID)
		case a.InstanceID != nil:
			return -1
		case b.InstanceID != nil:
			return 1
		}
		return strings.Compare(a.ID, b.ID)
	})
	want := make(map[string][]int32)
	next := int32(0)
	for i, m := range subs {
		n := topic.Partitions / int32(len(subs))
		if int32(i) < topic.Partitions%int32(len(subs)) {
			n++
		}
		for range n {
			want[m.ID] = append(want[m.ID], next)
			next++
		}
	}
	return want
}

func TestRangeProperties(t *testing.T) {
	g := gen{rand.New(rand.NewSource(14514))}
	for i := range 500 {
		s := g.spec(genOpts{homogeneous: i%2 == 0})
		got := checkContract(t, Range(), s, g)
		if err := checkExclusive(got); err != nil {
			t.Fatalf("%v\n%s", err, describe(s))
		}
		for _, tp := range s.Topics {
			want := rangeWant(s, tp)
			for _, m := range s.Members {
				if !slices.Equal(got[m.ID][tp.ID], want[m.ID]) {
					t.Fatalf("%s on %s: got %v, want %v\n%s", m.ID, tname(tp.ID), got[m.ID][tp.ID], want[m.ID], describe(s))
				}
			}
		}
		// Co-partitioning: topics with the same partition count and the
		// same subscribers give every member the same partition numbers.
		for _, a := range s.Topics {
			for _, b := range s.Topics {
				if bytes.Compare(a.ID[:], b.ID[:]) >= 0 || a.Partitions != b.Partitions {
					continue
				}
				same := true
				for _, m := range s.Members {
					if slices.Contains(m.Subscribed, a.ID) != slices.Contains(m.Subscribed, b.ID) {
						same = false
					}
				}
				if !same {
					continue
				}
				for _, m := range s.Members {
					if !slices.Equal(got[m.ID][a.ID], got[m.ID][b.ID]) {
						t.Fatalf("%s: %s and %s not co-partitioned\n%s", m.ID, tname(a.ID), tname(b.ID), describe(s))
					}
				}
			}
		}
		// Current plays no part.
		if fresh := Range().Assign(withCurrent(s, nil)); !reflect.DeepEqual(got, fresh) {
			t.Fatalf("result depends on Current\n%s", describe(s))
		}
	}
}
