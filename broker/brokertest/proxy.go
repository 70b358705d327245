package brokertest

import (
	"net"
	"sync"

	"github.com/fjordlog/fjord/protocol/lifecycle"
)

// linkState is what a proxy does with traffic.
type linkState int

const (
	linkUp     linkState = iota // forward
	linkCut                     // reset every connection, refuse new ones
	linkPaused                  // keep connections, forward nothing
)

// proxy forwards TCP connections from its own loopback port to target.
//
// Invariant: while state is linkCut, conns is empty (set closes them and
// accept refuses new ones).
type proxy struct {
	ln net.Listener
	// tasks runs accept, each connection's dial and its two pumps; close
	// stops it once every connection is closed.
	tasks lifecycle.Group

	mu     sync.Mutex
	target string     // where connections go; changes if the node re-binds
	moved  *sync.Cond // broadcast on every state change
	state  linkState
	closed bool
	conns  map[net.Conn]struct{}
}

func newProxy(target string) (*proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &proxy{ln: ln, target: target, conns: map[net.Conn]struct{}{}}
	p.moved = sync.NewCond(&p.mu)
	p.tasks.Go(p.accept)
	return p, nil
}

func (p *proxy) addr() string { return p.ln.Addr().String() }

func (p *proxy) retarget(addr string) {
	p.mu.Lock()
	p.target = addr
	p.mu.Unlock()
}

func (p *proxy) set(s linkState) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.state = s
	if s == linkCut {
		p.closeConnsLocked()
	}
	p.moved.Broadcast()
}

func (p *proxy) close() {
	p.ln.Close()
	p.mu.Lock()
	p.closed = true
	p.closeConnsLocked()
	p.moved.Broadcast()
	p.mu.Unlock()
	p.tasks.Stop()
}

func (p *proxy) closeConnsLocked() {
	for c := range p.conns {
		reset(c)
	}
	clear(p.conns)
}

// reset closes c abortively: the peer gets a TCP RST (ECONNRESET), as from
// a host whose network went, rather than the FIN of a clean close. It
// matters to clients: franz-go takes a FIN before the first response for a
// TLS or SASL misconfiguration and fails the records it holds, where a
// reset is retried.
func reset(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		tc.SetLinger(0)
	}
	c.Close()
}

// track registers both ends of a forwarded connection, unless the link is
// cut or closed.
func (p *proxy) track(cs ...net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed || p.state == linkCut {
		for _, c := range cs {
			reset(c)
		}
		return false
	}
	for _, c := range cs {
		p.conns[c] = struct{}{}
	}
	return true
}

func (p *proxy) untrack(cs ...net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range cs {
		c.Close()
		delete(p.conns, c)
	}
}

func (p *proxy) accept() {
	for {
		in, err := p.ln.Accept()
		if err != nil {
			return
		}
		dial := func() {
			p.mu.Lock()
			target := p.target
			p.mu.Unlock()
			out, err := net.Dial("tcp", target)
			if err != nil {
				reset(in) // as the target's refusal would
				return
			}
			if !p.track(in, out) {
				return
			}
			// Refused only once close began, which closes both (tracked).
			p.tasks.Go(func() { p.pump(in, out) })
			p.tasks.Go(func() { p.pump(out, in) })
		}
		if !p.tasks.Go(dial) {
			in.Close()
		}
	}
}

// pump copies src to dst, holding each chunk while the link is paused.
func (p *proxy) pump(src, dst net.Conn) {
	defer p.untrack(src, dst)
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			p.mu.Lock()
			for p.state == linkPaused && !p.closed {
				p.moved.Wait()
			}
			ok := p.state == linkUp && !p.closed
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
