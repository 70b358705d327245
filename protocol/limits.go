package protocol

import (
	"container/list"
	"context"
	"errors"
	"net"
	"sync"
	"time"
)

// Bounds on what hostile or careless connections can make the broker hold.
//
// Memory: a frame's buffer grows as its bytes arrive (readFrame), and every
// byte it grows past startBuf is taken from a Budget shared by all the
// connections of the server (queued.max.request.bytes); when the budget is
// spent, the reader stops reading until bytes are given back (backpressure:
// the client's writes stall in TCP). Bytes are given back once the handler
// has taken the request (Handle returned): what a handler keeps after that
// is bounded per connection by MaxInFlight.
//
// Connection counts and rates are one accept-time check: ServerConfig.Admit.

// errBudgetWait ends a frame read that was waiting for budget when its
// connection closed or the server stopped reading.
var errBudgetWait = errors.New("protocol: connection closed while waiting for request memory")

// Budget is the request memory shared by the connections of one or more
// servers (queued.max.request.bytes).
//
// Invariants: used is the sum of held over the grants in order; order holds
// the grants that hold bytes or wait for them, oldest first. A grant that is
// not the oldest gets bytes only while used stays within max and its own
// held within share, so one connection cannot take the whole budget from
// the others. The oldest grant always gets what it asks for, past max if
// need be: a request larger than the budget is still served (up to
// socket.request.max.bytes), and partly read requests can never wait on each
// other for ever, since the oldest always progresses and, once handled,
// hands the privilege to the next. used therefore stays within max plus the
// oldest request's size.
type Budget struct {
	max   int64
	share int64

	mu    sync.Mutex
	used  int64
	order list.List     // of *grant
	wake  chan struct{} // closed and replaced when bytes are given back or the oldest changes
}

// NewBudget returns a budget of max bytes, nil (unbounded) when max <= 0.
// One connection may hold a quarter of it, unless it holds the oldest
// request being read.
func NewBudget(limit int64) *Budget {
	if limit <= 0 {
		return nil
	}
	return &Budget{max: limit, share: max(limit/4, startBuf), wake: make(chan struct{})}
}

// Used reports the bytes held now.
func (b *Budget) Used() int64 {
	if b == nil {
		return 0
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used
}

// grant is one frame's hold on a budget. It is used by one reader
// goroutine; a nil grant (no budget) grows freely.
type grant struct {
	b    *Budget
	ctx  context.Context
	stop <-chan struct{}
	held int64
	el   *list.Element // nil until the first grow
}

// frameGrant starts a grant for the next frame read on c, nil when the
// server has no budget.
func (c *conn) frameGrant() *grant {
	if c.s.cfg.Budget == nil {
		return nil
	}
	return &grant{b: c.s.cfg.Budget, ctx: c.ctx, stop: c.stopCh}
}

// grow takes n more bytes, waiting while the budget says no.
func (g *grant) grow(n int64) error {
	if g == nil {
		return nil
	}
	b := g.b
	for {
		b.mu.Lock()
		if g.el == nil {
			g.el = b.order.PushBack(g)
		}
		if b.order.Front() == g.el || (b.used+n <= b.max && g.held+n <= b.share) {
			b.used += n
			g.held += n
			b.mu.Unlock()
			return nil
		}
		w := b.wake
		b.mu.Unlock()
		select {
		case <-w:
		case <-g.ctx.Done():
			g.release()
			return errBudgetWait
		case <-g.stop:
			g.release()
			return errBudgetWait
		}
	}
}

// release gives the grant's bytes back; it may be called more than once.
func (g *grant) release() {
	if g == nil || g.el == nil {
		return
	}
	b := g.b
	b.mu.Lock()
	b.order.Remove(g.el)
	g.el = nil
	b.used -= g.held
	g.held = 0
	close(b.wake)
	b.wake = make(chan struct{})
	b.mu.Unlock()
}

// ConnCounter counts the open connections of a broker, in total and per
// peer IP, for max.connections and max.connections.per.ip. It is shared by
// the servers of all the listeners it limits.
//
// Invariants: total is the sum of perIP; an IP is in perIP only while it
// has a connection; refused[ip] is set from the first refusal of ip until
// one of its connections closes, so a refusal is logged once per episode.
type ConnCounter struct {
	mu      sync.Mutex
	total   int64
	perIP   map[string]int64
	refused map[string]bool
}

// NewConnCounter returns an empty counter.
func NewConnCounter() *ConnCounter {
	return &ConnCounter{perIP: map[string]int64{}, refused: map[string]bool{}}
}

// Acquire counts a new connection from ip if the total stays within
// maxTotal and ip's count within maxIP (a negative bound is no bound).
// Refused, it reports why and whether this is the first refusal of ip since
// its count last fell; admitted, release must be called once when the
// connection ends.
func (cc *ConnCounter) Acquire(ip string, maxTotal, maxIP int64) (release func(), why string, first bool) {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	switch {
	case maxTotal >= 0 && cc.total >= maxTotal:
		why = "max.connections"
	case maxIP >= 0 && cc.perIP[ip] >= maxIP:
		why = "max.connections.per.ip"
	}
	if why != "" {
		first = !cc.refused[ip]
		cc.refused[ip] = true
		return nil, why, first
	}
	cc.total++
	cc.perIP[ip]++
	var once sync.Once
	return func() { once.Do(func() { cc.done(ip) }) }, "", false
}

func (cc *ConnCounter) done(ip string) {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	cc.total--
	if cc.perIP[ip]--; cc.perIP[ip] <= 0 {
		delete(cc.perIP, ip)
	}
	delete(cc.refused, ip)
}

// Open reports the connections counted now, in total and from ip.
func (cc *ConnCounter) Open(ip string) (total, fromIP int64) {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	return cc.total, cc.perIP[ip]
}

// admit runs the accept-time check (ServerConfig.Admit). Refused, the
// connection is closed after the delay asked for, unread; admitted, the
// returned release is to be called when it ends (nil: nothing to release).
func (s *Server) admit(nc net.Conn) (release func(), ok bool) {
	if s.cfg.Admit == nil {
		return nil, true
	}
	ok, delay, release := s.cfg.Admit(nc.RemoteAddr())
	if ok {
		return release, true
	}
	if delay > 0 {
		time.AfterFunc(delay, func() { nc.Close() })
	} else {
		nc.Close()
	}
	return nil, false
}
