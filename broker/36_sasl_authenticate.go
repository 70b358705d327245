package broker

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
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
func init() {
	register(api{
		key: 36, client: versions(0, 2), handle: handleSASLAuthenticate,
		controller: versions(0, 2),
		ctlLocal:   true,
		rule:       authzRule{"none (before authentication)", 0, noACL},
	})
}

func handleSASLAuthenticate(b *Broker, cc *connCtx, kreq kmsg.Request, respond func(kmsg.Response)) {
	resp := kreq.(*kmsg.SASLAuthenticateRequest).ResponseKind().(*kmsg.SASLAuthenticateResponse)
	resp.ErrorCode = kerr.IllegalSaslState.Code
	msg := "SaslAuthenticate on a connection that is not in a SASL exchange"
	resp.ErrorMessage = &msg
	respond(resp)
}
