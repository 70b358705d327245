package compattests

// A TCP proxy the fault tests put on every inter-node link of a cluster
// (quorum and replication), so a test can cut or freeze the links of one
// node while clients still reach it directly. It mirrors
// broker/brokertest/proxy.go, for separate fjord processes.

import (
	"net"
	"sync"
)

// faultLinkState is what a faultProxy does with traffic.
type faultLinkState int

const (
	faultLinkUp     faultLinkState = iota // forward
	faultLinkCut                          // reset every connection, refuse new ones
	faultLinkPaused                       // keep connections open, hold every byte
)

func (s faultLinkState) String() string {
	switch s {
	case faultLinkUp:
		return "up"
	case faultLinkCut:
		return "cut"
	case faultLinkPaused:
		return "paused"
	}
	return "?"
}

// faultProxy forwards TCP connections from its own loopback port (fixed for
// its life, so across restarts of the node behind it) to target.
//
// Invariant: while the state is cut, conns is empty (set closes them and
// new ones are closed as soon as they are accepted).
type faultProxy struct {
	ln     net.Listener
	target string

	mu     sync.Mutex
	moved  *sync.Cond // broadcast on every state change
	state  faultLinkState
	closed bool
	conns  map[net.Conn]struct{}
}

func newFaultProxy(target string) (*faultProxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &faultProxy{ln: ln, target: target, conns: map[net.Conn]struct{}{}}
	p.moved = sync.NewCond(&p.mu)
	go p.accept()
	return p, nil
}

// Addr is the proxy's own address: what the nodes are told to dial.
func (p *faultProxy) Addr() string { return p.ln.Addr().String() }

// State returns the current state.
func (p *faultProxy) State() faultLinkState {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.state
}

// Set switches the state: cut resets every open connection (and later ones
// until the state changes), paused holds bytes in both directions, up
// forwards again (held bytes go through).
func (p *faultProxy) Set(s faultLinkState) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.state = s
	if s == faultLinkCut {
		p.closeConnsLocked()
	}
	p.moved.Broadcast()
}

// Close stops accepting and closes every connection.
func (p *faultProxy) Close() {
	p.ln.Close()
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed = true
	p.closeConnsLocked()
	p.moved.Broadcast()
}

func (p *faultProxy) closeConnsLocked() {
	for c := range p.conns {
		if tc, ok := c.(*net.TCPConn); ok {
			_ = tc.SetLinger(0) // a reset, not an orderly close
		}
		c.Close()
	}
	clear(p.conns)
}

// track registers both ends of a forwarded connection, unless the link is
// cut or the proxy closed (then it closes them).
func (p *faultProxy) track(cs ...net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed || p.state == faultLinkCut {
		for _, c := range cs {
			if tc, ok := c.(*net.TCPConn); ok {
				_ = tc.SetLinger(0)
			}
			c.Close()
		}
		return false
	}
	for _, c := range cs {
		p.conns[c] = struct{}{}
	}
	return true
}

func (p *faultProxy) untrack(cs ...net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range cs {
		c.Close()
		delete(p.conns, c)
	}
}

func (p *faultProxy) accept() {
	for {
		in, err := p.ln.Accept()
		if err != nil {
			return
		}
		go func() {
			// Refuse at once while cut, without dialing the target.
			if !p.track(in) {
				return
			}
			out, err := net.Dial("tcp", p.target)
			if err != nil {
				p.untrack(in)
				return
			}
			if !p.track(out) {
				p.untrack(in)
				return
			}
			go p.pump(in, out)
			go p.pump(out, in)
		}()
	}
}

// pump copies src to dst, holding each chunk while the link is paused.
func (p *faultProxy) pump(src, dst net.Conn) {
	defer p.untrack(src, dst)
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			p.mu.Lock()
			for p.state == faultLinkPaused && !p.closed {
				p.moved.Wait()
			}
			ok := p.state == faultLinkUp && !p.closed
			p.mu.Unlock()
			if !ok {
				return
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}
