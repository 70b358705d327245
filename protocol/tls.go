package protocol

import (
	"crypto/tls"
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
		c.nc = tls.Server(c.nc, cfg)
	}
}

// tlsHandshake completes a TLS handshake within handshakeTimeout and takes
// the principal from the client certificate; false closes the connection
// (nothing was read, so nothing is owed).
func (c *conn) tlsHandshake() bool {
	tc, ok := c.nc.(*tls.Conn)
	if !ok {
		return true
	}
	tc.SetDeadline(time.Now().Add(handshakeTimeout))
	if err := tc.Handshake(); err != nil {
		c.log.Info().Err(err).Msg("closing connection: TLS handshake failed")
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
