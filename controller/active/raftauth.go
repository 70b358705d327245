package active

import (
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"time"

	"github.com/fjordlog/fjord/protocol"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl"
)

// On a SASL CONTROLLER listener raft's connections authenticate too, as
// Kafka's voters do with sasl.mechanism.controller.protocol: after the
// preamble the dialer sends Kafka's own SaslHandshake v1 and
// SaslAuthenticate v2 requests, framed as Kafka frames them, and the
// listener answers them with the listener's authenticator before the
// connection reaches raft. Nothing of raft's is read from a connection
// that did not authenticate.

const (
	// raftSASLMaxFrame bounds a frame before authentication, as Kafka's
	// sasl.server.max.receive.size does on a client listener.
	raftSASLMaxFrame = 524288
	// raftSASLMaxSteps bounds an exchange: PLAIN takes one step, SCRAM two.
	raftSASLMaxSteps = 8
)

// saslVersions are the only requests a raft connection may send before it
// authenticated.
type saslVersions struct{}

func (saslVersions) Supported(key int16) (int16, int16, bool) {
	switch key {
	case 17:
		return 1, 1, true
	case 36:
		return 2, 2, true
	}
	return 0, 0, false
}

func (saslVersions) All() []kmsg.ApiVersionsResponseApiKey {
	return []kmsg.ApiVersionsResponseApiKey{{ApiKey: 17, MinVersion: 1, MaxVersion: 1}, {ApiKey: 36, MinVersion: 2, MaxVersion: 2}}
}

// raftAuthenticator is the dialer's side of the exchange with mechanism
// m (node.Config.Authenticate), nil without SASL.
func raftAuthenticator(m sasl.Mechanism) func(context.Context, net.Conn) error {
	if m == nil {
		return nil
	}
	return func(ctx context.Context, c net.Conn) error {
		hs := kmsg.NewPtrSASLHandshakeRequest()
		hs.Version, hs.Mechanism = 1, m.Name()
		hresp := hs.ResponseKind().(*kmsg.SASLHandshakeResponse)
		if err := raftRoundTrip(c, 1, hs, hresp); err != nil {
			return fmt.Errorf("raft SASL handshake: %w", err)
		}
		if err := kerr.ErrorForCode(hresp.ErrorCode); err != nil {
			return fmt.Errorf("raft SASL handshake (%s; the listener serves %v): %w", m.Name(), hresp.SupportedMechanisms, err)
		}
		host, _, _ := net.SplitHostPort(c.RemoteAddr().String())
		sess, out, err := m.Authenticate(ctx, host)
		if err != nil {
			return fmt.Errorf("raft SASL %s: %w", m.Name(), err)
		}
		for step := int32(2); step < 2+raftSASLMaxSteps; step++ {
			req := kmsg.NewPtrSASLAuthenticateRequest()
			req.Version, req.SASLAuthBytes = 2, out
			resp := req.ResponseKind().(*kmsg.SASLAuthenticateResponse)
			if err := raftRoundTrip(c, step, req, resp); err != nil {
				return fmt.Errorf("raft SASL %s: %w", m.Name(), err)
			}
			if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
				msg := ""
				if resp.ErrorMessage != nil {
					msg = *resp.ErrorMessage
				}
				return fmt.Errorf("raft SASL %s: %w: %s", m.Name(), err, msg)
			}
			done, next, err := sess.Challenge(resp.SASLAuthBytes)
			if err != nil {
				return fmt.Errorf("raft SASL %s: %w", m.Name(), err)
			}
			if done {
				return nil
			}
			out = next
		}
		return fmt.Errorf("raft SASL %s: no end after %d steps", m.Name(), raftSASLMaxSteps)
	}
}

// raftRoundTrip writes req as a Kafka request frame and reads its answer
// into resp (whose version is req's).
func raftRoundTrip(c net.Conn, corr int32, req kmsg.Request, resp kmsg.Response) error {
	f := kmsg.NewRequestFormatter(kmsg.FormatterClientID("fjord-raft"))
	if _, err := c.Write(f.AppendRequest(nil, req, corr)); err != nil {
		return err
	}
	frame, err := protocol.ReadFrame(c, raftSASLMaxFrame)
	if err != nil {
		return err
	}
	if len(frame) < 4 || int32(binary.BigEndian.Uint32(frame)) != corr {
		return errors.New("answer with another correlation id")
	}
	body := frame[4:]
	if resp.IsFlexible() {
		if len(body) < 1 || body[0] != 0 {
			return errors.New("answer with header tags")
		}
		body = body[1:]
	}
	return resp.ReadFrom(body)
}

// authenticateRaft is the listener's side: it reads the preamble (already
// checked by its first byte) and one SASL exchange from c, and answers
// it. Any error means c must be closed; a refused exchange is answered,
// after delay, with SASL_AUTHENTICATION_FAILED first.
func authenticateRaft(c net.Conn, auth protocol.Authenticator, delay time.Duration) (principal string, err error) {
	var preamble [8]byte
	if _, err := io.ReadFull(c, preamble[:]); err != nil {
		return "", fmt.Errorf("preamble: %w", err)
	}
	var tlsState *tls.ConnectionState
	if tc, ok := underlyingTLS(c); ok {
		st := tc.ConnectionState()
		tlsState = &st
	}
	read := func() (*protocol.Request, error) {
		frame, err := protocol.ReadFrame(c, raftSASLMaxFrame)
		if err != nil {
			return nil, err
		}
		return protocol.ParseRequest(frame, saslVersions{})
	}
	answer := func(req *protocol.Request, resp kmsg.Response) error {
		_, err := c.Write(protocol.AppendResponse(nil, req.Key, req.CorrelationID, resp))
		return err
	}
	req, err := read()
	if err != nil {
		return "", err
	}
	hs, ok := req.Body.(*kmsg.SASLHandshakeRequest)
	if !ok {
		return "", fmt.Errorf("api key %d before SaslHandshake", req.Key)
	}
	hresp := hs.ResponseKind().(*kmsg.SASLHandshakeResponse)
	hresp.SupportedMechanisms = auth.Mechanisms()
	if !slices.Contains(hresp.SupportedMechanisms, hs.Mechanism) {
		hresp.ErrorCode = kerr.UnsupportedSaslMechanism.Code
		_ = answer(req, hresp)
		return "", fmt.Errorf("mechanism %q is not enabled", hs.Mechanism)
	}
	exch, err := auth.Start(hs.Mechanism, c.RemoteAddr(), tlsState)
	if err != nil {
		return "", fmt.Errorf("mechanism %s: %w", hs.Mechanism, err)
	}
	if err := answer(req, hresp); err != nil {
		return "", err
	}
	for range raftSASLMaxSteps {
		req, err := read()
		if err != nil {
			return "", err
		}
		ar, ok := req.Body.(*kmsg.SASLAuthenticateRequest)
		if !ok {
			return "", fmt.Errorf("api key %d during the SASL exchange", req.Key)
		}
		aresp := ar.ResponseKind().(*kmsg.SASLAuthenticateResponse)
		reply, done, principal, _, err := exch.Step(ar.SASLAuthBytes)
		if err != nil {
			time.Sleep(delay)
			aresp.ErrorCode = kerr.SaslAuthenticationFailed.Code
			aresp.ErrorMessage = kmsg.StringPtr("Authentication failed")
			_ = answer(req, aresp)
			return "", fmt.Errorf("%s: %w", hs.Mechanism, err)
		}
		aresp.SASLAuthBytes = reply
		if err := answer(req, aresp); err != nil {
			return "", err
		}
		if done {
			return principal, nil
		}
	}
	return "", fmt.Errorf("%s: no end after %d steps", hs.Mechanism, raftSASLMaxSteps)
}

// underlyingTLS finds the TLS connection under the mux's wrappers.
func underlyingTLS(c net.Conn) (*tls.Conn, bool) {
	for {
		switch x := c.(type) {
		case *tls.Conn:
			return x, true
		case *prefixConn:
			c = x.Conn
		case *raftConn:
			c = x.Conn
		default:
			return nil, false
		}
	}
}
