package lifecycle

import (
	"context"
	"sync"
)

// Group starts goroutines that stop together: a node role, a connection
// multiplexer, a server, a broker start them with Go, and their Close
// stops the group.
//
// Stopping happens in two steps because some owners must unblock their
// goroutines in between: Cancel refuses new goroutines and cancels the
// context, the owner then closes what its goroutines block on that the
// context cannot reach (listeners, connections), and Stop waits (or the
// owner selects on Stopped, to bound the wait). Stop alone does both
// steps.
//
// Invariant: once stopping is set (by Cancel, under mu), Go starts nothing
// and returns false; running counts the functions Go started that have not
// returned, and stopped is closed exactly when stopping is set and running
// is 0. So when Stopped's channel closes every function Go started has
// returned and none will start.
//
// A function Go started may call Go itself: before Cancel it is tracked
// like any other, after it is refused. A caller whose f must run (to
// answer a waiter, to close a connection it handed over) checks Go's
// result and does that itself when it is false.
//
// The zero Group is ready to use; it must not be copied after first use.
//
// This merges four trackers that did the same job: the broker's goLoop (a
// flag set after cancelling, so a goroutine could still start with the
// context already cancelled), the quorum node's spawn (no refusal at all:
// correct only because its starters were themselves tracked), the
// controller's spawn (refused from the cancel on, the strictest, kept
// here) and protocol.Server's WaitGroup (waited on from an extra goroutine
// to bound the drain). A counter and a channel replace sync.WaitGroup so
// that a wait can be bounded without that goroutine. errgroup was
// rejected: its Go never refuses, so an Add can race Wait during a
// shutdown, and it carries an error none of these callers has.
type Group struct {
	mu struct {
		sync.Mutex
		stopping bool
		running  int
		// stopped is made on first use and closed once stopping is set
		// and running is 0.
		stopped chan struct{}
		// ctx is made on the first Context call (parent
		// context.Background) and cancelled once stopping is set.
		ctx    context.Context
		cancel context.CancelFunc
	}
}

// Context is cancelled when the group begins to stop. The functions Go
// runs watch it; it is the same context on every call.
func (g *Group) Context() context.Context {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.mu.ctx == nil {
		g.mu.ctx, g.mu.cancel = context.WithCancel(context.Background())
		if g.mu.stopping {
			g.mu.cancel()
		}
	}
	return g.mu.ctx
}

// Go runs f on a new goroutine that Stop waits for, and reports true; once
// the group began to stop it runs nothing and reports false.
func (g *Group) Go(f func()) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.mu.stopping {
		return false
	}
	g.mu.running++
	go func() {
		defer g.done()
		f()
	}()
	return true
}

func (g *Group) done() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.mu.running--
	if g.mu.running == 0 && g.mu.stopping {
		close(g.stoppedLocked())
	}
}

// Cancel begins to stop: Go refuses from now on and the context is
// cancelled. It does not wait; it is idempotent.
func (g *Group) Cancel() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.mu.stopping {
		return
	}
	g.mu.stopping = true
	if g.mu.cancel != nil {
		g.mu.cancel()
	}
	if g.mu.running == 0 {
		close(g.stoppedLocked())
	}
}

// Stopped is closed once the group began to stop and every function Go
// started has returned. It does not begin the stop itself.
func (g *Group) Stopped() <-chan struct{} {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.stoppedLocked()
}

// REQUIRES: g.mu held.
func (g *Group) stoppedLocked() chan struct{} {
	if g.mu.stopped == nil {
		g.mu.stopped = make(chan struct{})
	}
	return g.mu.stopped
}

// Stop cancels (if Cancel has not) and waits until every function Go
// started has returned. It is idempotent, and safe to call from several
// goroutines at once (each waits), but not from a function the group runs.
func (g *Group) Stop() {
	g.Cancel()
	<-g.Stopped()
}
