package metrics

import (
	"net/http"
	"net/http/pprof"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Metrics are a node's Prometheus series: the counters its code
// increments where events happen (the exported fields and the methods
// below) and the collectors that read its Source at scrape time.
//
// The exported counters are set by New and never replaced; the broker
// increments them from any goroutine (Prometheus counters are atomic).
type Metrics struct {
	reg      *prometheus.Registry
	src      Source
	requests *prometheus.CounterVec   // by api key
	errors   *prometheus.CounterVec   // partition-level error codes, by api key and code
	latency  *prometheus.HistogramVec // handler completion time by api key
	flush    prometheus.Histogram     // fdatasync latency of one partition flush
	jmx      *jmxMetrics              // the Kafka-named counters (jmx.go)

	AuditDropped prometheus.Counter // audit lines dropped (the broker's audit.go)
	BytesIn      prometheus.Counter // produced record-batch bytes appended
	BytesOut     prometheus.Counter // record-batch bytes returned by fetches
	ISRShrinks   prometheus.Counter // ISR shrinks proposed by this leader
	ISRExpands   prometheus.Counter // ISR expansions proposed by this leader
	LogDamage    prometheus.Counter // reads that found a partition's log newly damaged
	LogRepairs   prometheus.Counter // damaged follower logs truncated for re-fetching
}

// New makes a node's series, reading src when scraped. It reads nothing
// of src before the first scrape (or Fetched), so the broker can make its
// metrics before the parts src reads exist.
func New(src Source) *Metrics {
	m := &Metrics{reg: prometheus.NewRegistry(), src: src, jmx: newJMXMetrics()}
	m.requests = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "fjord_requests_total", Help: "Requests served, by Kafka API key."}, []string{"api"})
	m.errors = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "fjord_partition_errors_total", Help: "Partition-level error codes returned, by API key and Kafka error code."}, []string{"api", "code"})
	m.flush = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "fjord_log_flush_seconds", Help: "Time of one flush: an fdatasync of one partition, or a group commit making many durable at once (observed once).",
		Buckets: prometheus.ExponentialBuckets(0.00005, 2, 16)})
	m.AuditDropped = prometheus.NewCounter(prometheus.CounterOpts{Name: "fjord_audit_dropped_total", Help: "Audit log lines dropped because the audit writer fell behind."})
	m.BytesIn = prometheus.NewCounter(prometheus.CounterOpts{Name: "fjord_produce_bytes_total", Help: "Record-batch bytes appended by producers."})
	m.BytesOut = prometheus.NewCounter(prometheus.CounterOpts{Name: "fjord_fetch_bytes_total", Help: "Record-batch bytes returned to fetchers."})
	m.latency = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "fjord_request_seconds", Help: "Time from decoding a request to its response being ready, by API key.",
		Buckets: prometheus.ExponentialBuckets(0.0001, 2, 18)}, []string{"api"})
	m.ISRShrinks = prometheus.NewCounter(prometheus.CounterOpts{Name: "fjord_isr_shrinks_total", Help: "ISR shrinks this broker proposed as a leader."})
	m.ISRExpands = prometheus.NewCounter(prometheus.CounterOpts{Name: "fjord_isr_expands_total", Help: "ISR expansions this broker proposed as a leader."})
	m.LogDamage = prometheus.NewCounter(prometheus.CounterOpts{Name: "fjord_log_damage_total", Help: "Times a read found stored log bytes damaged (failing their CRC) in a partition; they are never served."})
	m.LogRepairs = prometheus.NewCounter(prometheus.CounterOpts{Name: "fjord_log_repairs_total", Help: "Damaged replica logs truncated at the damage to be fetched again from the leader."})
	m.reg.MustRegister(m.AuditDropped, m.requests, m.errors, m.flush, m.BytesIn, m.BytesOut, m.latency, m.ISRShrinks, m.ISRExpands, m.LogDamage, m.LogRepairs,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "fjord_under_replicated_partitions", Help: "Partitions this broker leads whose ISR is smaller than their replica set."}, func() float64 {
			return float64(src.UnderReplicated())
		}),
		m.jmx.requests, stateCollector{m},
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "fjord_log_open_files", Help: "Log segment files held open by the node's file cache (at most fjord.log.open.files.max while no read pins more)."}, func() float64 {
			return float64(src.FileCache().Open)
		}),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "fjord_log_file_opens_total", Help: "Log segment files the file cache opened, first opens and reopens after an eviction."}, func() float64 {
			return float64(src.FileCache().Opens)
		}),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "fjord_log_file_evictions_total", Help: "Idle log segment files the file cache closed to stay within fjord.log.open.files.max."}, func() float64 {
			return float64(src.FileCache().Evictions)
		}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "fjord_log_index_cache_bytes", Help: "Memory held of sealed segments' offset and time indexes (at most fjord.log.index.cache.bytes, or one index larger than it)."}, func() float64 {
			return float64(src.IndexCache().Bytes)
		}),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "fjord_log_index_loads_total", Help: "Sealed segments' indexes read from their files because the index cache did not hold them."}, func() float64 {
			return float64(src.IndexCache().Misses)
		}),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "fjord_log_index_unreadable_total", Help: "Index file loads that found them missing or not matching their segment; that segment's lookups scan from its start until a restart rebuilds them."}, func() float64 {
			return float64(src.IndexCache().Unreadable)
		}),
	)
	return m
}

// FetchSessions registers the KIP-227 fetch session cache's series (Kafka's
// NumIncrementalFetchSessions, NumIncrementalFetchPartitionsCached and
// IncrementalFetchSessionEvictionsPerSec), read from stats when scraped.
func (m *Metrics) FetchSessions(stats func() (sessions, partitions int, evictions uint64)) {
	m.reg.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "fjord_fetch_sessions", Help: "Incremental fetch sessions (KIP-227) cached, at most max.incremental.fetch.session.cache.slots."}, func() float64 {
			n, _, _ := stats()
			return float64(n)
		}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "fjord_fetch_session_partitions", Help: "Partitions cached over all incremental fetch sessions."}, func() float64 {
			_, n, _ := stats()
			return float64(n)
		}),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "fjord_fetch_session_evictions_total", Help: "Incremental fetch sessions evicted to make room for another."}, func() float64 {
			_, _, n := stats()
			return float64(n)
		}),
	)
}

// Registerer is where other parts of the node register their own series
// (the client quotas' throttle counters), served with these.
func (m *Metrics) Registerer() prometheus.Registerer { return m.reg }

// Handler serves the series at /metrics and, when pprof is set, Go's
// profiles at /debug/pprof (opt-in: profiles show code paths, and a CPU
// or trace profile costs the node while it runs; unasked, /debug/pprof
// answers 404). Listening is the caller's.
func (m *Metrics) Handler(pprofOn bool) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{}))
	if pprofOn {
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	}
	return mux
}

// apiLabel is the label value for an API key.
func apiLabel(key int16) string { return strconv.Itoa(int(key)) }

// PartitionError counts a partition-level error code a response of API
// key carries.
func (m *Metrics) PartitionError(key, code int16) {
	m.errors.WithLabelValues(apiLabel(key), strconv.Itoa(int(code))).Inc()
}

// FlushObserver observes a flush duration (seconds) into both the
// fjord_log_flush_seconds histogram and the LogFlushRateAndTimeMs timer.
func (m *Metrics) FlushObserver() prometheus.Observer {
	return prometheus.ObserverFunc(func(s float64) {
		m.flush.Observe(s)
		m.jmx.flush.Observe(s * 1000)
	})
}

// Request is one dispatched request being timed: RequestStarted makes
// it, Done is called once its response is ready and Handled once its
// handler returns (in either order).
type Request struct {
	m     *Metrics
	label string
	start time.Time
	timer prometheus.Summary // the request name's TotalTimeMs
}

// RequestStarted counts a request dispatched at start (by API key, and
// by Kafka's request name and version) and times it from then;
// RequestQueueSize counts it until Handled.
func (m *Metrics) RequestStarted(key, version int16, body kmsg.Request, start time.Time) Request {
	label := apiLabel(key)
	m.requests.WithLabelValues(label).Inc()
	return Request{m: m, label: label, start: start, timer: m.jmx.requestStarted(key, version, body)}
}

// Done observes the time since the request was dispatched
// (fjord_request_seconds and TotalTimeMs).
func (r Request) Done() {
	d := time.Since(r.start)
	r.m.latency.WithLabelValues(r.label).Observe(d.Seconds())
	r.timer.Observe(float64(d) / float64(time.Millisecond))
}

// Handled ends the request's count in RequestQueueSize.
func (r Request) Handled() { r.m.jmx.queued.Add(-1) }
