package protocol

import (
	"crypto/tls"
	"errors"
	"io"
	"net"
	"time"
)

// handshakeTimeout bounds a TLS handshake: a peer that connects and sends
// nothing must not hold a connection's goroutines for long.
const handshakeTimeout = 10 * time.Second

// wrapTLS makes c a TLS server connection when the listener is TLS. It does
// no I/O: the handshake runs on the reader goroutine (handshake), never on
// the accept loop.
func (c *conn) wrapTLS() {
	if c.s.cfg.TLS == nil {
		return
	}
	if cfg := c.s.cfg.TLS(); cfg != nil {
		c.nc = tls.Server(&countingConn{Conn: c.nc}, cfg)
	}
}

// countingConn counts the bytes read from a connection, so that a failed
// handshake can tell a peer that never sent a byte from one that tried.
type countingConn struct {
	net.Conn
	n int64 // read by one goroutine at a time: tls.Conn serializes reads
}

func (c *countingConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.n += int64(n)
	return n, err
}

// quietHandshakeFailure reports a failed handshake that is no news: the
// peer connected and closed (or idled) without a byte (a port probe, the
// active controller's listener watch), or hung up in the middle (a client
// closed while dialling). A refused certificate or protocol ends with an
// alert instead, which is worth an info line.
func quietHandshakeFailure(cc *countingConn, err error) bool {
	return cc.n == 0 || errors.Is(err, io.EOF)
}

// ServerHandshake makes nc a TLS server connection and completes its
// handshake within handshakeTimeout, for a listener that needs TLS before
// anything else (the CONTROLLER listener, before it tells raft from Kafka).
// silent reports a failure that is no news worth an info line
// (quietHandshakeFailure).
func ServerHandshake(nc net.Conn, cfg *tls.Config) (tc *tls.Conn, silent bool, err error) {
	cc := &countingConn{Conn: nc}
	tc = tls.Server(cc, cfg)
	tc.SetDeadline(time.Now().Add(handshakeTimeout))
	if err := tc.Handshake(); err != nil {
		return nil, quietHandshakeFailure(cc, err), err
	}
	tc.SetDeadline(time.Time{})
	return tc, false, nil
}

// tlsHandshake completes a TLS handshake within handshakeTimeout and takes
// the principal from the client certificate; false closes the connection
// (nothing was read, so nothing is owed).
func (c *conn) tlsHandshake() bool {
	tc, ok := c.nc.(*tls.Conn)
	if !ok {
		// A connection whose handshake was done before it reached the
		// server (the CONTROLLER listener's mux reads its first byte
		// inside TLS) still has a certificate to take the principal from.
		if hs, ok := c.nc.(interface{ ConnectionState() tls.ConnectionState }); ok && c.s.cfg.TLSPrincipal != nil {
			st := hs.ConnectionState()
			c.tlsPrincipal = c.s.cfg.TLSPrincipal(&st)
		}
		return true
	}
	tc.SetDeadline(time.Now().Add(handshakeTimeout))
	if err := tc.Handshake(); err != nil {
		ev := c.log.Info()
		if cc, ok := tc.NetConn().(*countingConn); ok && quietHandshakeFailure(cc, err) {
			ev = c.log.Debug()
		}
		ev.Err(err).Msg("closing connection: TLS handshake failed")
		c.cancel()
		return false
	}
	tc.SetDeadline(time.Time{})
	if c.s.cfg.TLSPrincipal != nil {
		st := tc.ConnectionState()
		if p := c.s.cfg.TLSPrincipal(&st); p != "" {
			c.tlsPrincipal = p
		}
	}
	c.log.Debug().Str("principal", c.principal()).Str("tls", tls.VersionName(tc.ConnectionState().Version)).Msg("TLS connection")
	return true
}
