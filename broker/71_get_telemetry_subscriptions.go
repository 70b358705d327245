package broker

import (
	"crypto/rand"
	"encoding/binary"
	"hash/crc32"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordlog/fjord/broker/api"
)

// GetTelemetrySubscriptions: v0
//
// Behaviour (KIP-714 client metrics, with no subscription configured):
//   - Fjord collects no client metrics, so every client is told there is
//     nothing to push: RequestedMetrics is empty, which KIP-714 defines as
//     "do not push", and clients (Java, librdkafka) then only ask again
//     after PushIntervalMs: 300,000 ms, Kafka's default interval, so an
//     idle subscription costs one small request per client every five
//     minutes.
//   - A client that sends the zero instance id gets a new random one (never
//     Kafka's reserved zero or one ids); any other id is echoed.
//   - SubscriptionID is a function of the instance id alone (CRC-32C of
//     it), so every broker answers the same client with the same id and a
//     PushTelemetry to any broker can be checked without shared state.
//   - Accepted compression types, max bytes and delta temporality are
//     Kafka's defaults (zstd, lz4, gzip, snappy; 1 MiB; delta).
//   - No throttling of early re-asks (Kafka answers those
//     THROTTLING_QUOTA_EXCEEDED): the answer is stateless and cheap.
//
// Kafka advertises this key only when a metrics receiver plugin is set;
// Fjord always does, so clients learn at once that nothing is wanted.
// PushTelemetry (72) is served too, so a client that pushes anyway (an
// older subscription, a terminating push) gets a KIP-714 answer rather
// than an unsupported-API error in its log.
//
// Version notes:
//   - v0: flexible, the only version (Kafka 3.7).
func init() {
	register(func(b *Broker) api.Entry {
		return api.Entry{
			Key: 71, Client: api.Versions(0, 0), Handle: bind(b, handleGetTelemetrySubscriptions),
			Rule: api.Needs("none (as in Kafka)", 0, api.NoACL),
		}
	})
}

// Telemetry answer constants: Kafka's defaults (ClientMetricsConfigs,
// telemetry.max.bytes).
const (
	telemetryPushIntervalMs = 300_000
	telemetryMaxBytes       = 1 << 20
)

// telemetryCompressions are the compression types accepted for pushed
// metrics, in Kafka's order of preference: zstd, lz4, gzip, snappy.
var telemetryCompressions = []int8{4, 3, 1, 2}

func handleGetTelemetrySubscriptions(b *Broker, cc *api.Conn, kreq kmsg.Request, respond func(kmsg.Response)) {
	req := kreq.(*kmsg.GetTelemetrySubscriptionsRequest)
	resp := req.ResponseKind().(*kmsg.GetTelemetrySubscriptionsResponse)
	id := req.ClientInstanceID
	if id == ([16]byte{}) {
		id = newClientInstanceID()
	}
	resp.ClientInstanceID = id
	resp.SubscriptionID = telemetrySubscriptionID(id)
	resp.AcceptedCompressionTypes = telemetryCompressions
	resp.PushIntervalMillis = telemetryPushIntervalMs
	resp.TelemetryMaxBytes = telemetryMaxBytes
	resp.DeltaTemporality = true
	resp.RequestedMetrics = []string{}
	respond(resp)
}

// newClientInstanceID is a random instance id other than Kafka's reserved
// ids (zero, and the metadata topic's 0…01).
func newClientInstanceID() [16]byte {
	for {
		var id [16]byte
		rand.Read(id[:])
		if hi, lo := binary.BigEndian.Uint64(id[:8]), binary.BigEndian.Uint64(id[8:]); hi != 0 || lo > 1 {
			return id
		}
	}
}

// telemetrySubscriptionID is the subscription id of the (empty)
// subscription every client instance gets.
func telemetrySubscriptionID(id [16]byte) int32 {
	return int32(crc32.Checksum(id[:], castagnoli))
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)
