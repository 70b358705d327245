package broker

import (
	"math"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordlog/fjord/broker/api"
	"github.com/fjordlog/fjord/broker/partitions"
	"github.com/fjordlog/fjord/broker/quota"
	"github.com/fjordlog/fjord/controller"
)

// Client quota enforcement (KIP-13, KIP-219, KIP-612's per-ip connection
// rate), per broker, from the quotas of the current metadata image: a
// change applies to the next request, with no restart. broker/quota
// decides (which quota, the rate over Kafka's windows, the throttle time,
// the sensor bound); this file reads the image and the clock, mutes
// connections and counts the metric.
//
// A request that takes its sensor over the bound gets throttle_time_ms =
// the delay that brings it back, is answered at once, and its connection
// is muted for that delay: the reader takes no further request from it
// (protocol.Request.Mute). Clients that honour throttle_time_ms (KIP-219,
// produce v6+ and fetch v8+) wait too; older ones simply are not read.
//
//   - producer_byte_rate: a produce's record-batch bytes, charged as the
//     request is read, so the mute also holds back what the reader would
//     read ahead (acks=0 included, which has no response to carry the
//     throttle time).
//   - consumer_byte_rate: a consumer fetch's record-batch bytes. As Kafka,
//     the fetch's max bytes are first capped to what the bound allows over
//     the window, and a fetch that would break the bound is answered
//     without its records (and not charged for them), with the throttle.
//     Follower fetches are never throttled.
//   - request_percentage: Fjord has no request-handler thread pool to
//     account. Charged instead is the wall time a request spends in its
//     handler on the connection's reader goroutine, the part that holds the
//     connection as a handler thread would; work a handler hands to another
//     goroutine (acks=all waits, fsyncs, long polls, forwarded admin
//     requests) is not counted. Over the bound, the connection is muted
//     (at most one window, as Kafka bounds request throttles) but the
//     response's throttle_time_ms is not set, as it has already been sent.
//     Requests between brokers are exempt (requestTime).
//   - connection_creation_rate (ip entities): an accepted connection over
//     its ip's rate is not served and is closed after the throttle delay (at
//     most one window); the refused connection is not counted.
//   - controller_mutation_rate is stored and described but not enforced.
//
// The user is the principal: "ANONYMOUS" for an unauthenticated client.

// anonymousPrincipal is Kafka's principal name of an unauthenticated client.
const anonymousPrincipal = "ANONYMOUS"

// principalOf is the user whose quotas apply to cc's requests.
func principalOf(cc *api.Conn) string {
	if name, ok := strings.CutPrefix(cc.Principal, "User:"); ok && name != "" {
		return name
	}
	return anonymousPrincipal
}

// clientQuotas is the broker's side of client quotas. A nil one enforces
// nothing.
type clientQuotas struct {
	sensors   *quota.Quotas
	image     func() *controller.Image // the current image; nil before the first
	throttled *prometheus.CounterVec   // nil without a registry
	log       zerolog.Logger
}

func newClientQuotas(image func() *controller.Image, reg prometheus.Registerer, log zerolog.Logger) *clientQuotas {
	q := &clientQuotas{sensors: quota.New(quota.MaxSensors), image: image, log: log}
	if reg != nil {
		q.throttled = prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fjord_quota_throttle_seconds_total",
			Help: "Throttle time given to clients over a client quota, by quota type (produce, fetch, request, connection).",
		}, []string{"type"})
		reg.MustRegister(q.throttled)
	}
	return q
}

// active reports whether any quota exists, so the data path can skip all
// of this on a cluster without quotas.
func (q *clientQuotas) active() bool { return q != nil && quota.Active(q.image()) }

// record charges v now to (user, client)'s sensor for kind and returns the
// throttle time in ms (quota.Quotas.Record), counting it in the metric.
func (q *clientQuotas) record(kind quota.Kind, user, client string, v float64, undo bool) int64 {
	t := q.sensors.Record(time.Now(), q.image(), kind, user, client, v, undo)
	if t > 0 && q.throttled != nil {
		q.throttled.WithLabelValues(kind.String()).Add(float64(t) / 1000)
	}
	return t
}

// produce charges a produce's bytes as it is read and mutes the
// connection at once if that breaks the bound, so the requests the reader
// would read ahead wait too; the wrapped respond carries the throttle time.
func (q *clientQuotas) produce(cc *api.Conn, req *kmsg.ProduceRequest, respond func(kmsg.Response)) func(kmsg.Response) {
	if !q.active() {
		return respond
	}
	n := 0
	for _, rt := range req.Topics {
		for _, rp := range rt.Partitions {
			n += len(rp.Records)
		}
	}
	t := q.record(quota.Produce, principalOf(cc), cc.ClientID, float64(n), false)
	if t <= 0 {
		return respond
	}
	cc.Throttle(t)
	return func(r kmsg.Response) {
		if pr, ok := r.(*kmsg.ProduceResponse); ok {
			pr.ThrottleMillis = int32(t)
		}
		respond(r)
	}
}

// fetch caps a consumer fetch's max bytes to its quota window and wraps
// its respond to charge the record bytes, or, over the bound, to answer
// without records, throttled.
func (q *clientQuotas) fetch(cc *api.Conn, req *kmsg.FetchRequest, respond func(kmsg.Response)) func(kmsg.Response) {
	if q == nil || partitions.ReplicaOf(req) >= 0 {
		return respond
	}
	user := principalOf(cc)
	bound, _, ok := q.sensors.Resolve(q.image(), quota.Fetch, user, cc.ClientID)
	if !ok {
		return respond
	}
	limit := max(int32(min(quota.MaxInWindow(bound), math.MaxInt32)), 1)
	if req.MaxBytes <= 0 || req.MaxBytes > limit {
		req.MaxBytes = limit
	}
	req.MinBytes = min(req.MinBytes, req.MaxBytes)
	return func(r kmsg.Response) {
		if fr, ok := r.(*partitions.PooledFetch); ok {
			n := 0
			for _, t := range fr.Topics {
				for _, p := range t.Partitions {
					n += len(p.RecordBatches)
				}
			}
			if t := q.record(quota.Fetch, user, cc.ClientID, float64(n), true); t > 0 {
				for i := range fr.Topics {
					for j := range fr.Topics[i].Partitions {
						p := &fr.Topics[i].Partitions[j]
						p.RecordBatches, p.AbortedTransactions = nil, nil // the buffers stay for Release
					}
				}
				fr.ThrottleMillis = int32(t)
				cc.Throttle(t)
			}
		}
		respond(r)
	}
}

// requestTime charges d of handler time to cc's request_percentage.
// Requests brokers send each other (replica fetches, transaction markers,
// batched AddPartitionsToTxn v4+) are exempt, as Kafka exempts cluster
// actions: a client-id default must not slow replication or transactions.
func (q *clientQuotas) requestTime(cc *api.Conn, req kmsg.Request, d time.Duration) {
	if !q.active() {
		return
	}
	switch r := req.(type) {
	case *kmsg.FetchRequest:
		if partitions.ReplicaOf(r) >= 0 {
			return
		}
	case *kmsg.WriteTxnMarkersRequest:
		return
	case *kmsg.AddPartitionsToTxnRequest:
		if r.Version >= 4 {
			return
		}
	}
	pct := d.Seconds() * 100 // percent of one thread for one second
	cc.Throttle(q.record(quota.Request, principalOf(cc), cc.ClientID, pct, false))
}

// connectionDelay is the per-ip connection_creation_rate part of the
// accept-time check (admitConnection): the delay before refusing a
// connection over its ip's rate, 0 to serve it.
func (q *clientQuotas) connectionDelay(host string) time.Duration {
	if !q.active() {
		return 0
	}
	t := q.record(quota.Connection, "", host, 1, true)
	if t > 0 {
		q.log.Debug().Str("ip", host).Int64("throttle_ms", t).Msg("connection refused: over its connection_creation_rate")
	}
	return time.Duration(t) * time.Millisecond
}
