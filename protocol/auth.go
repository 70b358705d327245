package protocol

import (
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Authenticator is a listener's SASL server side (ServerConfig.SASL).
type Authenticator interface {
	Mechanisms() []string // enabled on this listener, in preference order
	// Start begins one exchange; tls is nil on a plaintext connection.
	Start(mechanism string, remote net.Addr, tls *tls.ConnectionState) (SASLExchange, error)
}

// SASLExchange is one authentication in progress.
type SASLExchange interface {
	// Step consumes one client message and returns the reply; when done, principal is set
	// ("User:<name>") and lifetime is how long the session may last before
	// re-authentication (0 = unbounded; KIP-368).
	Step(msg []byte) (reply []byte, done bool, principal string, lifetime time.Duration, err error)
}

// AnonymousPrincipal is the principal of a connection nobody authenticated.
const AnonymousPrincipal = "User:ANONYMOUS"

// Kafka's bounds before authentication.
const (
	// saslMaxReceive is sasl.server.max.receive.size's default: no frame
	// an unauthenticated peer sends may be larger, so a stranger cannot
	// make the broker hold socket.request.max.bytes for it.
	saslMaxReceive = 524288
)

// Kafka error codes the gate answers with.
const (
	errUnsupportedSASLMechanism = 33
	errIllegalSASLState         = 34
	errSASLAuthenticationFailed = 58
)

const (
	saslHandshakeKey    = 17
	saslAuthenticateKey = 36
)

// authState is a connection's SASL progress. Owned by the connection's
// reader goroutine: nothing else reads or writes it.
//
// Invariants: exch != nil once a handshake named a mechanism; raw only
// with exch (a v0 handshake: the client's next frames are bare SASL
// tokens, not Kafka requests); principal is "" until an exchange finished
// (or when the listener needs no SASL, AnonymousPrincipal from the start).
//
// Re-authentication (KIP-368): once authenticated with a lifetime, expiry
// is set; a SaslHandshake v1+ then starts a new exchange (exch set again,
// principal kept until it finishes, and it must finish as the same
// principal with the same mechanism), and any other request after expiry
// closes the connection.
type authState struct {
	exch      SASLExchange
	raw       bool
	principal string
	mechanism string
	expiry    time.Time // zero: the session does not expire
}

// principal is what every request of the connection carries.
func (c *conn) principal() string {
	switch {
	case c.auth.principal != "":
		return c.auth.principal
	case c.tlsPrincipal != "":
		return c.tlsPrincipal
	}
	return AnonymousPrincipal
}

// authenticated reports whether requests other than the SASL ones may be
// served (during a re-authentication too: the frames are still bounded
// by socket.request.max.bytes only).
func (c *conn) authenticated() bool {
	return c.s.cfg.SASL == nil || c.auth.principal != ""
}

var errSessionExpired = errors.New("SASL session expired without re-authentication (connections.max.reauth.ms)")

// nextFrame reads the next frame: before authentication bounded by
// sasl.server.max.receive.size, and after a v0 handshake a bare token.
func (c *conn) nextFrame(br io.Reader, g *grant) ([]byte, error) {
	if c.authenticated() {
		return readFrame(br, c.s.cfg.MaxFrameBytes, true, g)
	}
	if c.auth.raw {
		return readToken(br)
	}
	return readFrame(br, min(c.s.cfg.MaxFrameBytes, saslMaxReceive), false, g)
}

// readToken reads one size-prefixed SASL token of a v0 exchange. Unlike a
// request it may be empty.
func readToken(r io.Reader) ([]byte, error) {
	var sz [4]byte
	if _, err := io.ReadFull(r, sz[:]); err != nil {
		return nil, err
	}
	n := int32(binary.BigEndian.Uint32(sz[:]))
	if n < 0 {
		return nil, fmt.Errorf("%w: %d bytes", ErrFrameSize, n)
	}
	if n > saslMaxReceive {
		return nil, fmt.Errorf("%w: a %d byte SASL token before authentication (sasl.server.max.receive.size %d)", ErrFrameTooLarge, n, saslMaxReceive)
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(r, b); err != nil {
		return nil, truncated(err)
	}
	return b, nil
}

// rawToken is a v0 exchange's reply: written as a size prefix and the
// token, no response header. The embedded response is never encoded
// (AppendResponse checks for rawToken first); it is there so the type
// satisfies kmsg.Response.
type rawToken struct {
	*kmsg.SASLAuthenticateResponse
	b []byte
}

// rawTokenFrame is AppendResponse's hook for rawToken.
func rawTokenFrame(dst []byte, resp kmsg.Response) ([]byte, bool) {
	t, ok := resp.(rawToken)
	if !ok {
		return dst, false
	}
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(t.b)))
	return append(dst, t.b...), true
}

// rawStep feeds a v0 token to the exchange. A failure closes the
// connection without a reply (a v0 client has no way to read an error),
// after the failed-authentication delay. false = stop reading.
func (c *conn) rawStep(tok []byte) bool {
	reply, done, principal, lifetime, err := c.auth.exch.Step(tok)
	if err != nil {
		c.log.Info().Err(err).Msg("closing connection: SASL authentication failed")
		time.Sleep(c.s.cfg.FailedAuthDelay) // this connection's own reader: nobody else waits
		c.cancel()
		return false
	}
	sl := &slot{key: saslAuthenticateKey, done: make(chan struct{})}
	select {
	case c.slots <- sl:
	case <-c.ctx.Done():
		return false
	}
	sl.respond(rawToken{kmsg.NewPtrSASLAuthenticateResponse(), reply}, nil)
	if done {
		c.authDone(principal, lifetime)
	}
	return true
}

func (c *conn) authDone(principal string, lifetime time.Duration) {
	c.auth.exch, c.auth.raw = nil, false
	c.auth.principal = principal
	c.auth.expiry = time.Time{}
	if lifetime > 0 {
		c.auth.expiry = time.Now().Add(lifetime)
	}
	c.log.Debug().Str("principal", principal).Dur("lifetime", lifetime).Msg("authenticated")
}

// gate answers what an unauthenticated connection may ask: SaslHandshake
// and SaslAuthenticate here, ApiVersions (before a handshake) through the
// handler. Anything else closes the connection, as Kafka does. handled
// says the request was answered here; stop that the reader must stop.
func (c *conn) gate(req *Request, sl *slot) (handled, stop bool) {
	if c.s.cfg.SASL == nil {
		return false, false
	}
	if c.auth.principal != "" && c.auth.exch == nil {
		switch {
		case c.auth.expiry.IsZero():
		case req.Key == saslHandshakeKey && req.Version >= 1:
			return true, c.handshake(req, sl) // re-authentication
		case time.Now().After(c.auth.expiry):
			sl.respond(nil, errSessionExpired)
			return true, true
		}
		return false, false
	}
	switch {
	case req.Key == apiVersionsKey && c.auth.exch == nil && c.auth.principal == "":
		return false, false
	case req.Key == saslHandshakeKey:
		return true, c.handshake(req, sl)
	case req.Key == saslAuthenticateKey:
		return true, c.authenticate(req, sl)
	}
	sl.respond(nil, fmt.Errorf("api key %d v%d before SASL authentication (client %q)", req.Key, req.Version, req.ClientID))
	return true, true
}

func (c *conn) handshake(req *Request, sl *slot) (stop bool) {
	kreq := req.Body.(*kmsg.SASLHandshakeRequest)
	resp := kreq.ResponseKind().(*kmsg.SASLHandshakeResponse)
	mechs := c.s.cfg.SASL.Mechanisms()
	resp.SupportedMechanisms = mechs
	switch {
	case c.auth.exch != nil:
		resp.ErrorCode = errIllegalSASLState
	case !slices.Contains(mechs, kreq.Mechanism):
		resp.ErrorCode = errUnsupportedSASLMechanism
	case c.auth.principal != "" && kreq.Mechanism != c.auth.mechanism:
		resp.ErrorCode = errIllegalSASLState // KIP-368: no mechanism change on re-authentication
	default:
		var cs *tls.ConnectionState
		if tc, ok := c.nc.(*tls.Conn); ok {
			st := tc.ConnectionState()
			cs = &st
		}
		exch, err := c.s.cfg.SASL.Start(kreq.Mechanism, c.nc.RemoteAddr(), cs)
		if err != nil {
			c.log.Warn().Err(err).Str("mechanism", kreq.Mechanism).Msg("SASL exchange could not start")
			resp.ErrorCode = errUnsupportedSASLMechanism
			break
		}
		c.auth.exch, c.auth.raw, c.auth.mechanism = exch, req.Version == 0, kreq.Mechanism
		sl.respond(resp, nil)
		return false
	}
	// Kafka sends the error and closes: the client cannot go on.
	c.log.Info().Str("mechanism", kreq.Mechanism).Int16("error_code", resp.ErrorCode).Msg("closing connection: SASL handshake refused")
	sl.respond(resp, nil)
	return true
}

func (c *conn) authenticate(req *Request, sl *slot) (stop bool) {
	kreq := req.Body.(*kmsg.SASLAuthenticateRequest)
	resp := kreq.ResponseKind().(*kmsg.SASLAuthenticateResponse)
	if c.auth.exch == nil || c.auth.raw {
		resp.ErrorCode = errIllegalSASLState
		msg := "SaslAuthenticate before a SaslHandshake v1"
		resp.ErrorMessage = &msg
		sl.respond(resp, nil)
		return true
	}
	reply, done, principal, lifetime, err := c.auth.exch.Step(kreq.SASLAuthBytes)
	if err != nil {
		resp.ErrorCode = errSASLAuthenticationFailed
		msg := "Authentication failed: " + err.Error()
		var cm interface{ ClientMessage() string } // a mechanism's own wording (OAUTHBEARER's JSON)
		if errors.As(err, &cm) {
			msg = cm.ClientMessage()
		}
		resp.ErrorMessage = &msg
		c.log.Info().Err(err).Msg("closing connection: SASL authentication failed")
		time.AfterFunc(c.s.cfg.FailedAuthDelay, func() { sl.respond(resp, nil) })
		return true
	}
	if done && c.auth.principal != "" && principal != c.auth.principal {
		resp.ErrorCode = errSASLAuthenticationFailed
		msg := "Authentication failed: cannot change principals during re-authentication"
		resp.ErrorMessage = &msg
		c.log.Info().Str("principal", c.auth.principal).Str("new_principal", principal).Msg("closing connection: re-authentication changed the principal")
		time.AfterFunc(c.s.cfg.FailedAuthDelay, func() { sl.respond(resp, nil) })
		return true
	}
	resp.SASLAuthBytes = reply
	if done {
		c.authDone(principal, lifetime)
		resp.SessionLifetimeMillis = lifetime.Milliseconds()
	}
	sl.respond(resp, nil)
	return false
}
