package partitions

import (
	"testing"

	"github.com/fjordlog/fjord/broker/replica"
)

// TestAppendUnique checks both look-ups of appendUnique, the scan and the
// set it switches to, keep each partition once and in first-seen order.
func TestAppendUnique(t *testing.T) {
	for _, n := range []int{3, 16, 17, 40} {
		parts := make([]*replica.Partition, n)
		for i := range parts {
			parts[i] = &replica.Partition{}
		}
		var got []*replica.Partition
		var set map[*replica.Partition]bool
		for round := range 3 { // every partition named three times
			for i := range parts {
				if (i+round)%2 == 0 {
					got, set = appendUnique(got, set, parts[i])
				}
			}
			for i := range parts {
				got, set = appendUnique(got, set, parts[i])
			}
		}
		if len(got) != n {
			t.Fatalf("n=%d: %d partitions kept, want %d", n, len(got), n)
		}
		seen := map[*replica.Partition]bool{}
		for _, p := range got {
			if seen[p] {
				t.Fatalf("n=%d: a partition kept twice", n)
			}
			seen[p] = true
		}
	}
}
