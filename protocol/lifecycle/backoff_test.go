package lifecycle

import (
	"math"
	"testing"
	"time"
)

func TestBackoffSequence(t *testing.T) {
	ms := time.Millisecond
	for _, tc := range []struct {
		b    Backoff
		want []time.Duration // Delay(1), Delay(2), ...
	}{
		{Backoff{20 * ms, 500 * ms}, []time.Duration{20 * ms, 40 * ms, 80 * ms, 160 * ms, 320 * ms, 500 * ms, 500 * ms}},
		{Backoff{ms, 16 * ms}, []time.Duration{ms, 2 * ms, 4 * ms, 8 * ms, 16 * ms, 16 * ms}},
		{Backoff{100 * ms, 100 * ms}, []time.Duration{100 * ms, 100 * ms}},
		{Backoff{time.Second, 100 * ms}, []time.Duration{time.Second, time.Second}}, // Max below Initial
		{Backoff{}, []time.Duration{0, 0}},
		{Backoff{0, time.Second}, []time.Duration{0, 0, 0}},
	} {
		for i, want := range tc.want {
			if got := tc.b.Delay(i + 1); got != want {
				t.Errorf("%+v.Delay(%d) = %v, want %v", tc.b, i+1, got, want)
			}
		}
		if got := tc.b.Delay(0); got != tc.b.Delay(1) {
			t.Errorf("%+v.Delay(0) = %v, want Delay(1) = %v", tc.b, got, tc.b.Delay(1))
		}
	}
}

// The bound holds for any count, without overflow, and a huge count costs
// no more than the doublings up to Max.
func TestBackoffBound(t *testing.T) {
	b := Backoff{time.Nanosecond, math.MaxInt64}
	for _, n := range []int{62, 63, 64, 100, math.MaxInt} {
		if got := b.Delay(n); got <= 0 || got > b.Max {
			t.Errorf("Delay(%d) = %v, want within (0, %v]", n, got, b.Max)
		}
	}
	if got := b.Delay(math.MaxInt); got != b.Max {
		t.Errorf("Delay(MaxInt) = %v, want Max", got)
	}
	c := Backoff{3 * time.Millisecond, 10 * time.Millisecond}
	for n := 1; n < 200; n++ {
		if d := c.Delay(n); d < c.Initial || d > c.Max || (n > 1 && d < c.Delay(n-1)) {
			t.Fatalf("Delay(%d) = %v: outside [Initial, Max] or shrinking", n, d)
		}
	}
}

// The schedules Backoff replaced, as they were written, give the same waits
// for every setting their callers could have: the delay(n) of
// replica.Backoff and txn.Backoff (milliseconds), and the loops that kept
// a wait and doubled it (from Initial, or from 0 with a floor).
func TestBackoffMatchesReplaced(t *testing.T) {
	replicaDelay := func(initial, maxMs int64, n int) int64 {
		d := max(initial, 1)
		for i := 1; i < n && d < maxMs; i++ {
			d *= 2
		}
		return min(d, max(maxMs, initial))
	}
	txnDelay := func(initial, maxMs int64, n int) int64 {
		d := initial
		for i := 1; i < n && d < maxMs; i++ {
			d *= 2
		}
		return min(d, maxMs)
	}
	for initial := int64(1); initial <= 70; initial++ {
		for maxMs := initial; maxMs <= 300; maxMs += 7 {
			b := Backoff{time.Duration(initial) * time.Millisecond, time.Duration(maxMs) * time.Millisecond}
			loop := time.Duration(0) // the redial loops: from 0, floored at Initial
			from := b.Initial        // the sleep loops: from Initial
			for n := 1; n <= 12; n++ {
				got := b.Delay(n)
				if want := replicaDelay(initial, maxMs, n); got.Milliseconds() != want {
					t.Fatalf("%+v.Delay(%d) = %v, replica's delay %d ms", b, n, got, want)
				}
				if want := txnDelay(initial, maxMs, n); got.Milliseconds() != want {
					t.Fatalf("%+v.Delay(%d) = %v, txn's delay %d ms", b, n, got, want)
				}
				loop = min(max(2*loop, b.Initial), b.Max)
				if got != loop {
					t.Fatalf("%+v.Delay(%d) = %v, the redial loop's %v", b, n, got, loop)
				}
				if got != from {
					t.Fatalf("%+v.Delay(%d) = %v, the sleep loop's %v", b, n, got, from)
				}
				from = min(2*from, b.Max)
			}
		}
	}
}
