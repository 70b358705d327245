package lifecycle

import (
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// Stop waits for a running function, even one that ignores the context,
// and returns once it has.
func TestStopWaits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var g Group
		release := make(chan struct{})
		var finished atomic.Bool
		if !g.Go(func() { <-release; finished.Store(true) }) {
			t.Fatal("Go refused before any Stop")
		}
		stopped := make(chan struct{})
		go func() { g.Stop(); close(stopped) }()
		synctest.Wait()
		select {
		case <-stopped:
			t.Fatal("Stop returned while a function was still running")
		default:
		}
		if g.Context().Err() == nil {
			t.Error("Stop did not cancel the context before waiting")
		}
		close(release)
		<-stopped
		if !finished.Load() {
			t.Error("Stop returned before the function did")
		}
	})
}

// After Cancel, Go runs nothing and says so, from outside the group and
// from a function the group runs; Stop after Cancel still waits.
func TestGoRefusesAfterCancel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var g Group
		ctx := g.Context()
		inner := make(chan bool, 1)
		if !g.Go(func() {
			<-ctx.Done()
			inner <- g.Go(func() { t.Error("started by a group function after Cancel") })
		}) {
			t.Fatal("Go refused before any Stop")
		}
		g.Cancel()
		if g.Go(func() { t.Error("started after Cancel") }) {
			t.Error("Go reported true after Cancel")
		}
		g.Stop()
		if <-inner {
			t.Error("Go from inside the group reported true after Cancel")
		}
		if g.Go(func() { t.Error("started after Stop") }) {
			t.Error("Go reported true after Stop")
		}
	})
}

// A context asked for after Cancel is born cancelled; Cancel and Stop are
// idempotent; the zero Group stops at once.
func TestContextAndIdempotence(t *testing.T) {
	var g Group
	g.Stop()
	g.Stop()
	g.Cancel()
	if g.Context().Err() == nil {
		t.Error("a context made after Stop is live")
	}
	var h Group
	if h.Context() != h.Context() {
		t.Error("Context changed between calls")
	}
	if h.Context().Err() != nil {
		t.Error("context cancelled before Cancel")
	}
	h.Cancel()
	if h.Context().Err() == nil {
		t.Error("Cancel did not cancel the context")
	}
}

// Go racing Stop: every function Go reported started has run by the time
// Stop returns, and none runs after (the race detector checks the
// WaitGroup's rule).
func TestGoRacingStop(t *testing.T) {
	for range 50 {
		var g Group
		var started, ran atomic.Int64
		var wg sync.WaitGroup
		for range 8 {
			wg.Go(func() {
				for range 20 {
					if g.Go(func() { ran.Add(1) }) {
						started.Add(1)
					}
				}
			})
		}
		g.Stop()
		after := ran.Load()
		wg.Wait()
		if after != started.Load() || ran.Load() != after {
			t.Fatalf("Stop returned with %d of %d started functions run (%d in the end)", after, started.Load(), ran.Load())
		}
	}
}

// Stopped lets an owner bound the wait: it stays open until Cancel, even
// with nothing running, and then until the last function returns.
func TestStoppedBoundsTheWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var idle Group
		select {
		case <-idle.Stopped():
			t.Fatal("Stopped closed before Cancel")
		default:
		}
		idle.Cancel()
		<-idle.Stopped()

		var g Group
		release := make(chan struct{})
		g.Go(func() { <-release })
		g.Cancel()
		select {
		case <-g.Stopped():
			t.Fatal("Stopped closed while a function was still running")
		case <-time.After(time.Second):
		}
		close(release)
		<-g.Stopped()
		g.Stop() // stopped already: returns at once
	})
}
