package broker

import (
	"cmp"
	"math"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordlog/fjord/controller"
)

// Client quota enforcement (KIP-13, KIP-219, KIP-612's per-ip connection
// rate), per broker, from the quotas of the current metadata image: a
// change applies to the next request, with no restart.
//
// Each request is charged to the quota entity Kafka's precedence picks for
// its (user, client-id), per key (resolveQuota). The rate is measured over
// Kafka's windows (quota_rate.go); a request that takes it over the bound
// gets throttle_time_ms = the delay that brings it back, is answered at
// once, and its connection is muted for that delay: the reader takes no
// further request from it (protocol.Request.Mute). Clients that honour
// throttle_time_ms (KIP-219, produce v6+ and fetch v8+) wait too; older
// ones simply are not read.
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
//     Requests between brokers are exempt (quotaRequestTime).
//   - connection_creation_rate (ip entities): an accepted connection over
//     its ip's rate is not served and is closed after the throttle delay (at
//     most one window); the refused connection is not counted.
//   - controller_mutation_rate is stored and described but not enforced.
//
// The user is the principal: "ANONYMOUS" until Fjord authenticates
// clients (principalOf is where it will come from).
//
// Sensors are kept per (key, entity tags) and bounded: client ids are the
// client's to choose, so at most maxQuotaSensors are tracked. An idle
// sensor (every sample expired, so dropping it loses nothing) is evicted
// first; if none is idle, the least recently used eighth go, and those
// clients' history with them.

// anonymousPrincipal is Kafka's principal name of an unauthenticated client.
const anonymousPrincipal = "ANONYMOUS"

// principalOf is the user whose quotas apply to cc's requests.
func principalOf(cc *connCtx) string {
	if name, ok := strings.CutPrefix(cc.principal, "User:"); ok && name != "" {
		return name
	}
	return anonymousPrincipal
}

// maxQuotaSensors bounds the tracked sensors.
const maxQuotaSensors = 10000

type quotaKind uint8

const (
	quotaProduce quotaKind = iota
	quotaFetch
	quotaRequest
	quotaConnection
)

var quotaKeys = [...]string{
	quotaProduce:    controller.QuotaProducerByteRate,
	quotaFetch:      controller.QuotaConsumerByteRate,
	quotaRequest:    controller.QuotaRequestPercentage,
	quotaConnection: controller.QuotaConnectionCreationRate,
}

var quotaLabels = [...]string{quotaProduce: "produce", quotaFetch: "fetch", quotaRequest: "request", quotaConnection: "connection"}

// sensorKey names a sensor: the key and the entity tags Kafka's metric
// uses. A quota on a user is shared by its client ids; a quota on a
// default is had by each user or client id on its own.
type sensorKey struct {
	kind         quotaKind
	user, client string // "" where the matched entity has no such type
	hasUser      bool
	hasClient    bool // for connections: client is the ip
}

type sensor struct {
	r    rate
	last int64 // ms of the last record
}

// quotas is a broker's quota manager. The sensors are its one piece of
// mutable state, under mu, held only for map and arithmetic work.
type quotas struct {
	image     func() *controller.Image
	now       func() time.Time
	max       int
	throttled *prometheus.CounterVec // nil in tests
	mu        struct {
		sync.Mutex
		sensors map[sensorKey]*sensor
	}
}

func newQuotas(image func() *controller.Image, now func() time.Time) *quotas {
	q := &quotas{image: image, now: now, max: maxQuotaSensors}
	q.mu.sensors = map[sensorKey]*sensor{}
	return q
}

// quotaLevels is Kafka's precedence for a (user, client-id), most specific
// first: /config/users/<user>/clients/<client-id>, .../clients/<default>,
// /config/users/<user>, then the same with <default> for the user, then
// /config/clients/<client-id> and /config/clients/<default>.
func quotaLevels(user, client string) [8]controller.QuotaEntity {
	u, c, du, dc, none := controller.Named(user), controller.Named(client), controller.DefaultName(), controller.DefaultName(), controller.QuotaName{}
	return [8]controller.QuotaEntity{
		{User: u, ClientID: c}, {User: u, ClientID: dc}, {User: u, ClientID: none},
		{User: du, ClientID: c}, {User: du, ClientID: dc}, {User: du, ClientID: none},
		{User: none, ClientID: c}, {User: none, ClientID: dc},
	}
}

// resolveQuota finds the bound for kind of a (user, client-id), or of an ip
// for connections (client is then the ip), and the sensor it charges.
func resolveQuota(img *controller.Image, kind quotaKind, user, client string) (float64, sensorKey, bool) {
	key := quotaKeys[kind]
	if kind == quotaConnection {
		for _, e := range []controller.QuotaEntity{{IP: controller.Named(client)}, {IP: controller.DefaultName()}} {
			if v, ok := img.ClientQuotas(e)[key]; ok {
				return v, sensorKey{kind: kind, client: client, hasClient: true}, true
			}
		}
		return 0, sensorKey{}, false
	}
	for _, e := range quotaLevels(user, client) {
		v, ok := img.ClientQuotas(e)[key]
		if !ok {
			continue
		}
		sk := sensorKey{kind: kind, hasUser: e.User.Set, hasClient: e.ClientID.Set}
		if sk.hasUser {
			sk.user = user
		}
		if sk.hasClient {
			sk.client = client
		}
		return v, sk, true
	}
	return 0, sensorKey{}, false
}

// active reports whether any quota exists, so the data path can skip all
// of this on a cluster without quotas.
func (q *quotas) active() bool {
	img := q.image()
	return img != nil && img.HasClientQuotas()
}

// bound returns the bound for kind of (user, client), if one applies.
func (q *quotas) bound(kind quotaKind, user, client string) (float64, bool) {
	img := q.image()
	if img == nil || !img.HasClientQuotas() {
		return 0, false
	}
	v, _, ok := resolveQuota(img, kind, user, client)
	return v, ok
}

// record charges v to the sensor of (user, client) for kind and returns the
// throttle time in ms, 0 when within the bound or no quota applies. With
// undo, a charge that breaks the bound is taken back: the caller refuses
// what it was for.
func (q *quotas) record(kind quotaKind, user, client string, v float64, undo bool) int64 {
	img := q.image()
	if img == nil || !img.HasClientQuotas() {
		return 0
	}
	bound, sk, ok := resolveQuota(img, kind, user, client)
	if !ok {
		return 0
	}
	now := q.now().UnixMilli()
	q.mu.Lock()
	s := q.sensor(sk, now)
	s.r.record(v, now)
	s.last = now
	observed, window := s.r.measure(now)
	t := throttleMs(observed, bound, window)
	if t > 0 && undo {
		s.r.record(-v, now)
	}
	q.mu.Unlock()
	if kind == quotaRequest || kind == quotaConnection {
		t = min(t, quotaWindowMs)
	}
	if t > 0 && q.throttled != nil {
		q.throttled.WithLabelValues(quotaLabels[kind]).Add(float64(t) / 1000)
	}
	return t
}

// sensor returns sk's sensor, making room for a new one if need be: the
// idle sensors go, and if that frees nothing, the least recently used
// eighth, so a flood of new client ids pays for one scan per many inserts.
// REQUIRES: q.mu held.
func (q *quotas) sensor(sk sensorKey, now int64) *sensor {
	if s := q.mu.sensors[sk]; s != nil {
		return s
	}
	if len(q.mu.sensors) >= q.max {
		for k, s := range q.mu.sensors {
			if s.r.idle(now) {
				delete(q.mu.sensors, k)
			}
		}
	}
	if len(q.mu.sensors) >= q.max {
		type used struct {
			k    sensorKey
			last int64
		}
		all := make([]used, 0, len(q.mu.sensors))
		for k, s := range q.mu.sensors {
			all = append(all, used{k, s.last})
		}
		slices.SortFunc(all, func(a, b used) int { return cmp.Compare(a.last, b.last) })
		for _, u := range all[:max(1, len(all)/8)] {
			delete(q.mu.sensors, u.k)
		}
	}
	s := &sensor{}
	q.mu.sensors[sk] = s
	return s
}

// throttle mutes cc's connection for ms.
func (cc *connCtx) throttle(ms int64) {
	if ms > 0 && cc.mute != nil {
		cc.mute(time.Duration(ms) * time.Millisecond)
	}
}

// quotaProduce charges a produce's bytes as it is read and mutes the
// connection at once if that breaks the bound, so the requests the reader
// would read ahead wait too; the wrapped respond carries the throttle time.
func (b *Broker) quotaProduce(cc *connCtx, req *kmsg.ProduceRequest, respond func(kmsg.Response)) func(kmsg.Response) {
	if b.quotas == nil || !b.quotas.active() {
		return respond
	}
	n := 0
	for _, rt := range req.Topics {
		for _, rp := range rt.Partitions {
			n += len(rp.Records)
		}
	}
	t := b.quotas.record(quotaProduce, principalOf(cc), cc.clientID, float64(n), false)
	if t <= 0 {
		return respond
	}
	cc.throttle(t)
	return func(r kmsg.Response) {
		if pr, ok := r.(*kmsg.ProduceResponse); ok {
			pr.ThrottleMillis = int32(t)
		}
		respond(r)
	}
}

// quotaFetch caps a consumer fetch's max bytes to its quota window and
// wraps its respond to charge the record bytes, or, over the bound, to
// answer without records, throttled.
func (b *Broker) quotaFetch(cc *connCtx, req *kmsg.FetchRequest, respond func(kmsg.Response)) func(kmsg.Response) {
	if b.quotas == nil || replicaOf(req) >= 0 {
		return respond
	}
	user := principalOf(cc)
	bound, ok := b.quotas.bound(quotaFetch, user, cc.clientID)
	if !ok {
		return respond
	}
	limit := int32(min(maxInWindow(bound), math.MaxInt32))
	if limit < 1 {
		limit = 1
	}
	if req.MaxBytes <= 0 || req.MaxBytes > limit {
		req.MaxBytes = limit
	}
	req.MinBytes = min(req.MinBytes, req.MaxBytes)
	return func(r kmsg.Response) {
		if fr, ok := r.(*pooledFetch); ok {
			n := 0
			for _, t := range fr.Topics {
				for _, p := range t.Partitions {
					n += len(p.RecordBatches)
				}
			}
			if t := b.quotas.record(quotaFetch, user, cc.clientID, float64(n), true); t > 0 {
				for i := range fr.Topics {
					for j := range fr.Topics[i].Partitions {
						p := &fr.Topics[i].Partitions[j]
						p.RecordBatches, p.AbortedTransactions = nil, nil // the buffers stay for Release
					}
				}
				fr.ThrottleMillis = int32(t)
				cc.throttle(t)
			}
		}
		respond(r)
	}
}

// quotaRequestTime charges d of handler time to cc's request_percentage.
// Requests brokers send each other (replica fetches, transaction markers,
// batched AddPartitionsToTxn v4+) are exempt, as Kafka exempts
// cluster actions: a client-id default must not slow replication or
// transactions.
func (b *Broker) quotaRequestTime(cc *connCtx, req kmsg.Request, d time.Duration) {
	if b.quotas == nil || !b.quotas.active() {
		return
	}
	switch r := req.(type) {
	case *kmsg.FetchRequest:
		if replicaOf(r) >= 0 {
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
	cc.throttle(b.quotas.record(quotaRequest, principalOf(cc), cc.clientID, pct, false))
}

// connectionRateDelay is the per-ip connection_creation_rate part of the
// accept-time check (admitConnection): the delay before refusing a
// connection over its ip's rate, 0 to serve it.
func (b *Broker) connectionRateDelay(host string) time.Duration {
	if b.quotas == nil || !b.quotas.active() {
		return 0
	}
	t := b.quotas.record(quotaConnection, "", host, 1, true)
	if t > 0 {
		b.log.Debug().Str("ip", host).Int64("throttle_ms", t).Msg("connection refused: over its connection_creation_rate")
	}
	return time.Duration(t) * time.Millisecond
}

// startQuotas makes the broker's quota manager and its metric.
func (b *Broker) startQuotas() {
	b.quotas = newQuotas(func() *controller.Image {
		if b.meta == nil {
			return nil
		}
		return b.meta.Image()
	}, time.Now)
	if b.metrics != nil {
		b.quotas.throttled = prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fjord_quota_throttle_seconds_total",
			Help: "Throttle time given to clients over a client quota, by quota type (produce, fetch, request, connection).",
		}, []string{"type"})
		b.metrics.reg.MustRegister(b.quotas.throttled)
	}
}
