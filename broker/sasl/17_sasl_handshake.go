package sasl

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordlog/fjord/broker/api"
)

// SaslHandshake: v0-1
//
// Behaviour:
//   - On a SASL listener the front end answers every handshake before
//     authentication itself (protocol/auth.go): the mechanism is checked
//     against the listener's enabled ones (UNSUPPORTED_SASL_MECHANISM with
//     them, then the connection closes), and the exchange begins.
//   - A handshake that reaches the broker is one on a listener without
//     SASL, or one after authentication on a connection whose session has
//     no lifetime (no re-authentication, KIP-368): ILLEGAL_SASL_STATE, as
//     Kafka answers it. With connections.max.reauth.ms, the front end takes
//     a v1 handshake after authentication as a re-authentication.
//
// Version notes:
//   - v0: the SASL tokens that follow are bare size-prefixed frames
//     (kafka-python 2.0 authenticates so)
//   - v1: the tokens travel in SaslAuthenticate requests (KIP-152)
func handshakeEntry() api.Entry {
	return api.Entry{
		Key: 17, Client: api.Versions(0, 1), Handle: handleSASLHandshake,
		Controller: api.Versions(0, 1),
		CtlLocal:   true,
		Rule:       api.Needs("none (before authentication)", 0, api.NoACL),
	}
}

func handleSASLHandshake(_ *api.Conn, kreq kmsg.Request, respond func(kmsg.Response)) {
	resp := kreq.(*kmsg.SASLHandshakeRequest).ResponseKind().(*kmsg.SASLHandshakeResponse)
	resp.ErrorCode = kerr.IllegalSaslState.Code
	respond(resp)
}
