package broker

import (
	"math"
	"testing"
	"time"
)

func TestParseThrottledList(t *testing.T) {
	for _, tc := range []struct {
		v      string
		ok     bool
		has    [][2]int32
		hasNot [][2]int32
	}{
		{"*", true, [][2]int32{{0, 1}, {7, 9}}, nil},
		{"", true, nil, [][2]int32{{0, 1}}},
		{"0:1, 0:2,3:4", true, [][2]int32{{0, 1}, {0, 2}, {3, 4}}, [][2]int32{{0, 3}, {1, 1}}},
		{"0", false, nil, nil},
		{"0:x", false, nil, nil},
		{"-1:2", false, nil, nil},
		{"*,0:1", false, nil, nil},
	} {
		l, ok := parseThrottledList(tc.v)
		if ok != tc.ok || (checkThrottledList(tc.v) == nil) != tc.ok {
			t.Errorf("%q: ok %t, want %t", tc.v, ok, tc.ok)
			continue
		}
		for _, pb := range tc.has {
			if !l.has(pb[0], pb[1]) {
				t.Errorf("%q lacks %d:%d", tc.v, pb[0], pb[1])
			}
		}
		for _, pb := range tc.hasNot {
			if l.has(pb[0], pb[1]) {
				t.Errorf("%q has %d:%d", tc.v, pb[0], pb[1])
			}
		}
	}
}

// TestReplQuota: a bucket of one second of bytes; what goes beyond the
// rate waits until time pays it back.
func TestReplQuota(t *testing.T) {
	var q replQuota
	t0 := time.Unix(1000, 0)
	const rate = 1000
	if q.exceeded(t0, rate) {
		t.Fatal("exceeded before anything was sent")
	}
	q.record(t0, rate, 1500) // one fetch may overshoot
	if !q.exceeded(t0, rate) {
		t.Fatal("not exceeded after 1.5 s worth of bytes")
	}
	if !q.exceeded(t0.Add(400*time.Millisecond), rate) {
		t.Fatal("debt of 500 bytes paid in 400 ms at 1000 bytes/s")
	}
	if q.exceeded(t0.Add(600*time.Millisecond), rate) {
		t.Fatal("still exceeded once the debt is paid")
	}
	// An idle bucket holds at most one second of bytes.
	t1 := t0.Add(time.Hour)
	q.record(t1, rate, 1000)
	if !q.exceeded(t1, rate) {
		t.Fatal("an idle hour allowed more than one second of bytes")
	}
	// No cap: never exceeded, nothing recorded.
	q.record(t1, math.MaxInt64, 1<<40)
	if q.exceeded(t1, math.MaxInt64) {
		t.Fatal("exceeded without a cap")
	}
}
