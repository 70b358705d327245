package replicamgr

import (
	"strings"
	"testing"

	"github.com/rs/zerolog"
)

func TestFDBudgetDivision(t *testing.T) {
	for _, tc := range []struct {
		limit          int
		filesMax       int64
		capacity, part int
	}{
		{20000, 0, 18976, 18976 - 18976/16}, // derived: the limit less the reserve
		{20000, 4000, 4000, 4000 - 250},     // configured below it
		{20000, 50000, 18976, 18976 - 1186}, // never past the limit less the reserve
		{1100, 0, 76, 60},                   // a sixteenth, but at least 16, for sealed segments
		{1000, 0, 0, 0},                     // nothing left: every creation is refused
	} {
		f := newFDBudget(tc.limit, tc.filesMax)
		if f.capacity != tc.capacity || f.partLimit != tc.part {
			t.Errorf("newFDBudget(%d, %d) = capacity %d, partitions %d; want %d, %d", tc.limit, tc.filesMax, f.capacity, f.partLimit, tc.capacity, tc.part)
		}
		if !strings.Contains(f.String(), "fjord.log.open.files.max") {
			t.Errorf("%v does not name the key", f)
		}
	}
}

func TestBudgetCheckAdd(t *testing.T) {
	c := &budgetCheck{log: zerolog.Nop(), me: 2, have: 90, live: 3, limit: fdBudget{partLimit: 100}}
	// 12 partitions at RF 2 over 3 brokers: 8 here.
	if msg := c.add("CreateTopics", "a", 12, 2, nil); msg != "" || c.have != 98 {
		t.Fatalf("spread: %q, have %d; want accepted, 98", msg, c.have)
	}
	// An assignment counts exactly: broker 2 holds 2 of these replicas.
	if msg := c.add("CreateTopics", "b", 0, 0, [][]int32{{1, 2}, {3, 1}, {2, 3}}); msg != "" || c.have != 100 {
		t.Fatalf("assigned: %q, have %d; want accepted, 100", msg, c.have)
	}
	// Full: one more is refused, with the limit named, and not counted.
	msg := c.add("CreatePartitions", "c", 3, 1, nil)
	if !strings.Contains(msg, "past its limit of 100") || c.have != 100 {
		t.Fatalf("past the limit: %q, have %d", msg, c.have)
	}
	// An assignment placing nothing here always fits.
	if msg := c.add("CreateTopics", "d", 0, 0, [][]int32{{1}, {3}}); msg != "" {
		t.Fatalf("assigned elsewhere: %q", msg)
	}
}
