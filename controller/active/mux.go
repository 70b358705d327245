package active

import (
	"context"
	"crypto/tls"
	"io"
	"net"
	"slices"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/fjordlog/fjord/controller/node"
	"github.com/fjordlog/fjord/protocol"
	"github.com/fjordlog/fjord/protocol/lifecycle"
)

// connMux splits the CONTROLLER listener in two by each connection's first
// byte: raft connections open with node.Preamble, whose first byte no Kafka
// frame can start with; everything else is Kafka's protocol (broker
// registration, heartbeats, forwarded admin requests). On a TLS listener
// the handshake comes first and the byte read is the first one inside it,
// so both halves are TLS and both get the listener's ssl.client.auth.
//
// A raft connection reaches raft only once it was
//  1. admitted: fewer than maxRaft raft connections are open (the voters
//     need one each way per pair, so a stranger cannot hold thousands);
//  2. authenticated, on a SASL listener (raftauth.go);
//  3. authorized: authorize accepts its principal (the SASL one, else the
//     TLS client certificate's, else User:ANONYMOUS) and remote host.
//
// Raft itself then checks who the frames are from (controller/node).
type connMux struct {
	ln  net.Listener
	tls func() *tls.Config // nil: plaintext
	// tlsPrincipal maps a client certificate to a principal ("" or nil:
	// User:ANONYMOUS).
	tlsPrincipal func(*tls.ConnectionState) string
	// sasl, when set, authenticates raft's connections before they reach
	// raft (raftauth.go); the Kafka half's server authenticates its own.
	sasl            protocol.Authenticator
	failedAuthDelay time.Duration
	// authorize, when set, must accept a raft connection's principal and
	// host (Config.AuthorizeRaft).
	authorize func(principal, host string) bool
	// maxRaft bounds the open raft connections; 0: no bound.
	maxRaft     int
	raftConns   raftCount
	raft, kafka *chanListener
	log         zerolog.Logger
	// routes runs route, one per accepted connection; run stops it as it
	// returns, closing the connections still being routed.
	routes lifecycle.Group
}

// raftConnsPerVoter bounds the open raft connections per voter: a voter
// dials each other voter once and redials only after a failure, so a
// listener needs about one per voter; the rest is room for redials whose
// old connection is not closed yet.
const raftConnsPerVoter = 4

// raftCount counts the open raft connections, from the preamble to the
// close. Invariant: 0 <= open; open <= maxRaft when maxRaft > 0.
type raftCount struct {
	sync.Mutex
	open int
	full bool // a connection was refused since the last admission
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
	if node.IsPreamble(first[:]) {
		m.routeRaft(c, pc)
		return
	}
	_ = c.SetReadDeadline(time.Time{})
	var kc net.Conn = pc
	if tc, ok := c.(*tls.Conn); ok {
		kc = tlsPrefixConn{pc, tc} // the Kafka half takes its principal from the certificate
	}
	if !m.kafka.deliver(kc) {
		c.Close()
	}
}

// routeRaft admits, authenticates and authorizes a raft connection (see
// connMux), then hands it to raft, preamble replayed.
func (m *connMux) routeRaft(c net.Conn, pc *prefixConn) {
	remote := c.RemoteAddr().String()
	release, ok := m.admitRaft(remote)
	if !ok {
		c.Close()
		return
	}
	refuse := func() {
		c.Close()
		release()
	}
	principal := protocol.AnonymousPrincipal
	if m.sasl != nil {
		_ = c.SetDeadline(time.Now().Add(10 * time.Second))
		p, err := authenticateRaft(pc, m.sasl, m.failedAuthDelay)
		if err != nil {
			m.log.Info().Err(err).Str("remote", remote).Msg("controller listener: closing raft connection: SASL authentication failed")
			refuse()
			return
		}
		principal = p
		_ = c.SetDeadline(time.Time{})
		pc = &prefixConn{Conn: c, prefix: slices.Clone(node.Preamble[:])}
	} else if tc, ok := c.(*tls.Conn); ok && m.tlsPrincipal != nil {
		st := tc.ConnectionState()
		if p := m.tlsPrincipal(&st); p != "" {
			principal = p
		}
	}
	host := remote
	if h, _, err := net.SplitHostPort(remote); err == nil {
		host = h
	}
	if m.authorize != nil && !m.authorize(principal, host) {
		m.log.Info().Str("principal", principal).Str("remote", remote).
			Msg("controller listener: closing raft connection: the principal may not speak raft (it needs CLUSTER_ACTION on the cluster, or to be a super user)")
		refuse()
		return
	}
	m.log.Debug().Str("principal", principal).Str("remote", remote).Msg("controller listener: raft connection admitted")
	_ = c.SetReadDeadline(time.Time{})
	if !m.raft.deliver(&raftConn{Conn: pc, release: release}) {
		refuse()
	}
}

// admitRaft counts a new raft connection in, or refuses it when maxRaft
// are open; release counts it out. The refusals are logged when they start
// and when they end, not per connection.
func (m *connMux) admitRaft(remote string) (release func(), ok bool) {
	rc := &m.raftConns
	rc.Lock()
	open, wasFull := rc.open, rc.full
	ok = m.maxRaft == 0 || rc.open < m.maxRaft
	if ok {
		rc.open++
	}
	rc.full = !ok
	rc.Unlock()
	switch {
	case !ok && !wasFull:
		m.log.Warn().Int("open", open).Int("max", m.maxRaft).Str("remote", remote).
			Msg("controller listener: refusing raft connections: as many are open as the listener holds")
	case ok && wasFull:
		m.log.Info().Int("open", open+1).Msg("controller listener: accepting raft connections again")
	}
	if !ok {
		return nil, false
	}
	return func() {
		rc.Lock()
		rc.open--
		rc.Unlock()
	}, true
}

// raftConn is an admitted raft connection: closing it (raft does, once)
// counts it out of the mux's bound.
type raftConn struct {
	net.Conn
	once    sync.Once
	release func()
}

// NetConn is the connection under c (socket options: tcpopt).
func (c *raftConn) NetConn() net.Conn { return c.Conn }

func (c *raftConn) Close() error {
	c.once.Do(c.release)
	return c.Conn.Close()
}

// prefixConn replays bytes already read before the connection's own.
type prefixConn struct {
	net.Conn
	prefix []byte
}

// NetConn is the connection under c (socket options: tcpopt).
func (c *prefixConn) NetConn() net.Conn { return c.Conn }

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
