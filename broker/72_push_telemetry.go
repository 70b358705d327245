package broker

import (
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordlog/fjord/broker/api"
)

// PushTelemetry: v0
//
// Behaviour (KIP-714; the subscription every client gets asks for no
// metrics, see 71_get_telemetry_subscriptions.go):
//   - The zero (or reserved) instance id is INVALID_REQUEST.
//   - A subscription id other than the one this instance was given is
//     UNKNOWN_SUBSCRIPTION_ID, on which a client asks for its subscription
//     again at once (and then learns it should not push).
//   - An unknown compression type is UNSUPPORTED_COMPRESSION_TYPE; metrics
//     over 1 MiB are TELEMETRY_TOO_LARGE.
//   - Otherwise NONE: the metrics are dropped unread (Fjord has no metrics
//     receiver). A terminating push is answered the same way.
//   - Kafka also refuses pushes before the interval and after a
//     terminating push; Fjord keeps no per-client state, so it does not.
//
// Version notes:
//   - v0: flexible, the only version (Kafka 3.7).
func init() {
	register(func(b *Broker) api.Entry {
		return api.Entry{
			Key: 72, Client: api.Versions(0, 0), Handle: bind(b, handlePushTelemetry),
			Rule: api.Needs("none (as in Kafka)", 0, api.NoACL),
		}
	})
}

func handlePushTelemetry(b *Broker, cc *api.Conn, kreq kmsg.Request, respond func(kmsg.Response)) {
	req := kreq.(*kmsg.PushTelemetryRequest)
	resp := req.ResponseKind().(*kmsg.PushTelemetryResponse)
	switch id := req.ClientInstanceID; {
	case id == [16]byte{} || id == [16]byte{15: 1}:
		resp.ErrorCode = kerr.InvalidRequest.Code
	case req.SubscriptionID != telemetrySubscriptionID(id):
		resp.ErrorCode = kerr.UnknownSubscriptionID.Code
	case req.CompressionType != 0 && !slices.Contains(telemetryCompressions, req.CompressionType):
		resp.ErrorCode = kerr.UnsupportedCompressionType.Code
	case len(req.Metrics) > telemetryMaxBytes:
		resp.ErrorCode = kerr.TelemetryTooLarge.Code
	}
	respond(resp)
}
