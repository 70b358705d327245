package metrics

import (
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fjordlog/fjord/protocol/fjordmsg"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// This file holds the event-driven half of the Kafka-named series (see
// docs/metrics.md): the counters and timers that the JMX exporter's
// kafka-kraft-3_0_0.yml rules produce from a Kafka broker's MBeans, counted
// where the events happen. The state-read half is stateCollector
// (state.go).

// jmxQuantiles are the percentiles Kafka's Yammer histograms expose as
// <N>thPercentile attributes, with the label value the rule's
// quantile: "0.$N" makes of them (hence "0.50", not "0.5").
var jmxQuantiles = []struct {
	q     float64
	label string
}{{0.50, "0.50"}, {0.75, "0.75"}, {0.95, "0.95"}, {0.98, "0.98"}, {0.99, "0.99"}, {0.999, "0.999"}}

// newJMXTimer is a timer like a Yammer one: percentiles over a recent
// window (Kafka's reservoir favours the last five minutes) and a count.
func newJMXTimer() prometheus.Summary {
	obj := make(map[float64]float64, len(jmxQuantiles))
	for _, q := range jmxQuantiles {
		obj[q.q] = (1 - q.q) / 10
	}
	return prometheus.NewSummary(prometheus.SummaryOpts{Name: "unregistered", Help: "read by stateCollector",
		Objectives: obj, MaxAge: 5 * time.Minute, AgeBuckets: 5})
}

// topicCounters are one topic's BrokerTopicMetrics. Kept in
// jmxMetrics.topics until a scrape finds the topic gone from the image.
type topicCounters struct {
	bytesIn, messagesIn, bytesOut atomic.Uint64
}

// jmxMetrics are the counted Kafka-named series. The maps only grow with
// request types (a bounded set) and topics of the image (pruned at scrape).
type jmxMetrics struct {
	topics   sync.Map // topic name → *topicCounters
	requests *prometheus.CounterVec
	times    sync.Map // request name → prometheus.Summary (ms)
	flush    prometheus.Summary
	queued   atomic.Int64 // requests dispatched whose handler has not returned
}

func newJMXMetrics() *jmxMetrics {
	return &jmxMetrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kafka_network_requestmetrics_requests_total",
			Help: "Requests received, by request name and version (Kafka's RequestMetrics RequestsPerSec)."}, []string{"request", "version"}),
		flush: newJMXTimer(),
	}
}

func (j *jmxMetrics) topic(name string) *topicCounters {
	if c, ok := j.topics.Load(name); ok {
		return c.(*topicCounters)
	}
	c, _ := j.topics.LoadOrStore(name, new(topicCounters))
	return c.(*topicCounters)
}

// Produced counts one appended batch of topic (BytesInPerSec,
// MessagesInPerSec).
func (m *Metrics) Produced(topic string, bytes int, records int32) {
	c := m.jmx.topic(topic)
	c.bytesIn.Add(uint64(bytes))
	c.messagesIn.Add(uint64(max(records, 0)))
}

// Fetched counts record bytes returned to a consumer (BytesOutPerSec);
// from Fetch v13 the response names topics by id only, and the topic is
// then looked up by id (a topic gone from the image is not counted).
func (m *Metrics) Fetched(topic string, id [16]byte, bytes int) {
	if topic == "" {
		var ok bool
		if topic, ok = m.src.TopicName(id); !ok {
			return
		}
	}
	m.jmx.topic(topic).bytesOut.Add(uint64(bytes))
}

// requestName is Kafka's RequestMetrics name of a request: its API name,
// with fetches split into FetchConsumer and FetchFollower as Kafka does
// (a follower's fetch names its replica id, in ReplicaState from v15,
// KIP-903; a consumer's is negative).
func requestName(key int16, body kmsg.Request) string {
	if f, ok := body.(*kmsg.FetchRequest); ok {
		id := f.ReplicaID
		if f.Version >= 15 {
			id = f.ReplicaState.ID
		}
		if id >= 0 {
			return "FetchFollower"
		}
		return "FetchConsumer"
	}
	return fjordmsg.AnyNameForKey(key)
}

// requestStarted counts a dispatched request and returns its name's
// TotalTimeMs timer; RequestQueueSize counts it until Request.Handled.
func (j *jmxMetrics) requestStarted(key, version int16, body kmsg.Request) prometheus.Summary {
	name := requestName(key, body)
	j.requests.WithLabelValues(name, strconv.Itoa(int(version))).Inc()
	t, ok := j.times.Load(name)
	if !ok {
		t, _ = j.times.LoadOrStore(name, newJMXTimer())
	}
	j.queued.Add(1)
	return t.(prometheus.Summary)
}

// emitTimer writes a JMX-rule timer: name{labels…,quantile} gauges and
// name_count.
func emitTimer(ch chan<- prometheus.Metric, q, count *prometheus.Desc, s prometheus.Summary, labels ...string) {
	var d dto.Metric
	if s.Write(&d) != nil || d.Summary == nil {
		return
	}
	for _, qv := range d.Summary.Quantile {
		for _, jq := range jmxQuantiles {
			if qv.GetQuantile() == jq.q {
				v := qv.GetValue()
				if v != v { // NaN: no observation in the window; Yammer reports 0
					v = 0
				}
				ch <- prometheus.MustNewConstMetric(q, prometheus.GaugeValue, v, append(labels, jq.label)...)
			}
		}
	}
	ch <- prometheus.MustNewConstMetric(count, prometheus.CounterValue, float64(d.Summary.GetSampleCount()), labels...)
}

// counterValue reads a counter's current value.
func counterValue(c prometheus.Counter) float64 {
	var d dto.Metric
	if c.Write(&d) != nil || d.Counter == nil {
		return 0
	}
	return d.Counter.GetValue()
}
