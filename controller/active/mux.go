package active

import (
	"context"
	"crypto/tls"
	"io"
	"net"
	"slices"
	"sync"
	"time"

	"github.com/fjordlog/fjord/controller/node"
	"github.com/fjordlog/fjord/protocol"
	"github.com/fjordlog/fjord/protocol/lifecycle"
	"github.com/rs/zerolog"
)

// connMux splits the CONTROLLER listener in two by each connection's first
// byte: raft connections open with node.Preamble, whose first byte no Kafka
// frame can start with; everything else is Kafka's protocol (broker
// registration, heartbeats, forwarded admin requests). On a TLS listener
// the handshake comes first and the byte read is the first one inside it,
// so both halves are TLS and both get the listener's ssl.client.auth.
type connMux struct {
	ln  net.Listener
	tls func() *tls.Config // nil: plaintext
	// sasl, when set, authenticates raft's connections before they reach
	// raft (raftauth.go); the Kafka half's server authenticates its own.
	sasl            protocol.Authenticator
	failedAuthDelay time.Duration
	raft, kafka     *chanListener
	log             zerolog.Logger
	// routes runs route, one per accepted connection; run stops it as it
	// returns, closing the connections still being routed.
	routes lifecycle.Group
}

func newConnMux(ln net.Listener, tlsCfg func() *tls.Config, log zerolog.Logger) *connMux {
	return &connMux{ln: ln, tls: tlsCfg, raft: newChanListener(ln.Addr()), kafka: newChanListener(ln.Addr()), log: log}
}

// run accepts until the listener closes, then closes both halves and
// waits for the routes in progress (after the halves: a route may wait to
// deliver).
func (m *connMux) run() {
	defer m.routes.Stop()
	defer m.raft.Close()
	defer m.kafka.Close()
	for {
		c, err := m.ln.Accept()
		if err != nil {
			return
		}
		if !m.routes.Go(func() {
			defer context.AfterFunc(m.routes.Context(), func() { c.Close() })()
			m.route(c)
		}) {
			c.Close()
		}
	}
}

// route reads the first byte (a silent connection gets 10 s) and hands the
// connection, first byte replayed, to the matching half.
func (m *connMux) route(c net.Conn) {
	var first [1]byte
	if m.tls != nil {
		tc, silent, err := protocol.ServerHandshake(c, m.tls())
		if err != nil {
			// A peer that connects and closes without a byte (a port
			// probe, a start-up readiness check) is not news.
			ev := m.log.Info()
			if silent {
				ev = m.log.Debug()
			}
			ev.Err(err).Str("remote", c.RemoteAddr().String()).Msg("controller listener: closing connection: TLS handshake failed")
			c.Close()
			return
		}
		c = tc
	}
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.ReadFull(c, first[:]); err != nil {
		m.log.Debug().Err(err).Str("remote", c.RemoteAddr().String()).Msg("controller listener: connection closed before its first byte")
		c.Close()
		return
	}
	pc := &prefixConn{Conn: c, prefix: first[:]}
	var kc net.Conn = pc
	if tc, ok := c.(*tls.Conn); ok {
		kc = tlsPrefixConn{pc, tc}
	}
	dst := m.kafka
	if node.IsPreamble(first[:]) {
		dst = m.raft
		if m.sasl != nil {
			_ = c.SetDeadline(time.Now().Add(10 * time.Second))
			principal, err := authenticateRaft(pc, m.sasl, m.failedAuthDelay)
			if err != nil {
				m.log.Info().Err(err).Str("remote", c.RemoteAddr().String()).Msg("controller listener: closing raft connection: SASL authentication failed")
				c.Close()
				return
			}
			m.log.Debug().Str("principal", principal).Str("remote", c.RemoteAddr().String()).Msg("controller listener: raft connection authenticated")
			_ = c.SetDeadline(time.Time{})
			pc = &prefixConn{Conn: c, prefix: slices.Clone(node.Preamble[:])}
		}
	}
	_ = c.SetReadDeadline(time.Time{})
	if dst == m.raft {
		kc = pc
	}
	if !dst.deliver(kc) {
		c.Close()
	}
}

// prefixConn replays bytes already read before the connection's own.
type prefixConn struct {
	net.Conn
	prefix []byte
}

func (c *prefixConn) Read(p []byte) (int, error) {
	if len(c.prefix) > 0 {
		n := copy(p, c.prefix)
		c.prefix = c.prefix[n:]
		return n, nil
	}
	return c.Conn.Read(p)
}

// tlsPrefixConn is a prefixConn over TLS: it keeps the handshake's state
// visible, so the Kafka half takes its principal from the client
// certificate (protocol's tlsHandshake).
type tlsPrefixConn struct {
	*prefixConn
	tc *tls.Conn
}

func (c tlsPrefixConn) ConnectionState() tls.ConnectionState { return c.tc.ConnectionState() }

// chanListener is a net.Listener fed connections by a connMux.
type chanListener struct {
	addr net.Addr
	c    chan net.Conn
	done chan struct{}
	once sync.Once
}

func newChanListener(addr net.Addr) *chanListener {
	return &chanListener{addr: addr, c: make(chan net.Conn), done: make(chan struct{})}
}

func (l *chanListener) deliver(c net.Conn) bool {
	select {
	case l.c <- c:
		return true
	case <-l.done:
		return false
	}
}

func (l *chanListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.c:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *chanListener) Close() error {
	l.once.Do(func() { close(l.done) })
	return nil
}

func (l *chanListener) Addr() net.Addr { return l.addr }
