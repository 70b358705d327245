package broker

import (
	"errors"
	"net"
	"net/http"
	"net/http/pprof"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// metrics are the node's Prometheus series. Only broker and cmd import
// Prometheus; storage exposes plain numbers that the collectors read.
type metrics struct {
	reg          *prometheus.Registry
	requests     *prometheus.CounterVec   // by api key
	errors       *prometheus.CounterVec   // partition-level error codes, by api key and code
	flushTime    prometheus.Histogram     // fdatasync latency of one partition flush
	auditDropped prometheus.Counter       // audit lines dropped (audit.go)
	bytesIn      prometheus.Counter       // produced record-batch bytes appended
	bytesOut     prometheus.Counter       // record-batch bytes returned by fetches
	latency      *prometheus.HistogramVec // handler completion time by api key
	isrShrinks   prometheus.Counter       // ISR shrinks proposed by this leader
	isrExpands   prometheus.Counter       // ISR expansions proposed by this leader
	logDamage    prometheus.Counter       // reads that found a partition's log newly damaged
	logRepairs   prometheus.Counter       // damaged follower logs truncated for re-fetching
	jmx          *jmxMetrics              // the Kafka-named counters (metrics_jmx.go)
}

func newMetrics(b *Broker) *metrics {
	m := &metrics{reg: prometheus.NewRegistry(), jmx: newJMXMetrics()}
	m.requests = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "fjord_requests_total", Help: "Requests served, by Kafka API key."}, []string{"api"})
	m.errors = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "fjord_partition_errors_total", Help: "Partition-level error codes returned, by API key and Kafka error code."}, []string{"api", "code"})
	m.flushTime = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "fjord_log_flush_seconds", Help: "Time to make one partition's appended data durable (fdatasync, shared by group commit).",
		Buckets: prometheus.ExponentialBuckets(0.00005, 2, 16)})
	m.auditDropped = prometheus.NewCounter(prometheus.CounterOpts{Name: "fjord_audit_dropped_total", Help: "Audit log lines dropped because the audit writer fell behind."})
	m.bytesIn = prometheus.NewCounter(prometheus.CounterOpts{Name: "fjord_produce_bytes_total", Help: "Record-batch bytes appended by producers."})
	m.bytesOut = prometheus.NewCounter(prometheus.CounterOpts{Name: "fjord_fetch_bytes_total", Help: "Record-batch bytes returned to fetchers."})
	m.latency = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "fjord_request_seconds", Help: "Time from decoding a request to its response being ready, by API key.",
		Buckets: prometheus.ExponentialBuckets(0.0001, 2, 18)}, []string{"api"})
	m.isrShrinks = prometheus.NewCounter(prometheus.CounterOpts{Name: "fjord_isr_shrinks_total", Help: "ISR shrinks this broker proposed as a leader."})
	m.isrExpands = prometheus.NewCounter(prometheus.CounterOpts{Name: "fjord_isr_expands_total", Help: "ISR expansions this broker proposed as a leader."})
	m.logDamage = prometheus.NewCounter(prometheus.CounterOpts{Name: "fjord_log_damage_total", Help: "Times a read found stored log bytes damaged (failing their CRC) in a partition; they are never served."})
	m.logRepairs = prometheus.NewCounter(prometheus.CounterOpts{Name: "fjord_log_repairs_total", Help: "Damaged replica logs truncated at the damage to be fetched again from the leader."})
	m.reg.MustRegister(m.auditDropped, m.requests, m.errors, m.flushTime, m.bytesIn, m.bytesOut, m.latency, m.isrShrinks, m.isrExpands, m.logDamage, m.logRepairs,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "fjord_under_replicated_partitions", Help: "Partitions this broker leads whose ISR is smaller than their replica set."}, func() float64 {
			return float64(b.replicas.UnderReplicated())
		}),
		m.jmx.requests, kafkaCollector{b},
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "fjord_partitions", Help: "Partitions hosted on this node."}, func() float64 {
			n := 0
			for _, t := range b.replicas.Topics() {
				n += len(t.Local())
			}
			return float64(n)
		}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "fjord_log_bytes", Help: "Bytes in all partition logs on this node."}, func() float64 {
			var n int64
			for _, t := range b.replicas.Topics() {
				for _, p := range t.Local() {
					if lg := p.Log(); lg != nil {
						n += lg.Size()
					}
				}
			}
			return float64(n)
		}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "fjord_log_open_files", Help: "Log segment files held open by the node's file cache (at most fjord.log.open.files.max while no read pins more)."}, func() float64 {
			return float64(b.replicas.Files().Stats().Open)
		}),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "fjord_log_file_opens_total", Help: "Log segment files the file cache opened, first opens and reopens after an eviction."}, func() float64 {
			return float64(b.replicas.Files().Stats().Opens)
		}),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "fjord_log_file_evictions_total", Help: "Idle log segment files the file cache closed to stay within fjord.log.open.files.max."}, func() float64 {
			return float64(b.replicas.Files().Stats().Evictions)
		}),
	)
	return m
}

// apiLabel is the label value for an API key.
func apiLabel(key int16) string { return strconv.Itoa(int(key)) }

// serveMetrics serves /metrics on addr until the broker stops, and Go's
// /debug/pprof when fjord.metrics.pprof.enable asks for it: profiles show
// code paths and a CPU or trace profile costs the node while it runs, so
// they are opt-in; unasked, /debug/pprof answers 404.
func (b *Broker) serveMetrics(addr string) error {
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(b.metrics.reg, promhttp.HandlerOpts{}))
	what := "/metrics"
	if b.cfg.MetricsPprof {
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
		what = "/metrics and /debug/pprof"
	}
	return b.serveHTTP(addr, mux, what)
}

// serveHTTP serves h on addr until the broker stops; what names it in
// logs.
func (b *Broker) serveHTTP(addr string, h http.Handler, what string) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	b.serveHTTPOn(ln, h, what)
	return nil
}

// serveHTTPOn serves h on ln until the broker stops, and closes ln.
func (b *Broker) serveHTTPOn(ln net.Listener, h http.Handler, what string) {
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, MaxHeaderBytes: 64 << 10}
	b.goLoop(func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			b.log.Warn().Err(err).Str("serving", what).Msg("HTTP listener")
		}
	})
	b.goLoop(func() {
		<-b.stop
		srv.Close()
	})
	b.log.Info().Str("addr", ln.Addr().String()).Msg("serving " + what)
}
