package sasl

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordlog/fjord/broker/api"
)

// SaslAuthenticate: v0-2
//
// Behaviour:
//   - On a SASL listener the front end steps the exchange a SaslHandshake
//     v1 began (protocol/auth.go). A failure answers
//     SASL_AUTHENTICATION_FAILED after connection.failed.authentication.delay.ms
//     (Kafka's 100 ms) and closes the connection.
//   - One that reaches the broker (a listener without SASL, or after
//     authentication) is answered ILLEGAL_SASL_STATE, as Kafka does.
//
// Version notes:
//   - v1: session_lifetime_ms (KIP-368): connections.max.reauth.ms (0:
//     sessions do not expire); the front end takes a re-authentication
//     and closes a connection whose session ended without one
//   - v2: flexible
func authenticateEntry() api.Entry {
	return api.Entry{
		Key: 36, Client: api.Versions(0, 2), Handle: handleSASLAuthenticate,
		Controller: api.Versions(0, 2),
		CtlLocal:   true,
		Rule:       api.Needs("none (before authentication)", 0, api.NoACL),
	}
}

func handleSASLAuthenticate(_ *api.Conn, kreq kmsg.Request, respond func(kmsg.Response)) {
	resp := kreq.(*kmsg.SASLAuthenticateRequest).ResponseKind().(*kmsg.SASLAuthenticateResponse)
	resp.ErrorCode = kerr.IllegalSaslState.Code
	msg := "SaslAuthenticate on a connection that is not in a SASL exchange"
	resp.ErrorMessage = &msg
	respond(resp)
}
