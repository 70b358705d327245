package metrics

import (
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordlog/fjord/controller"
	"github.com/fjordlog/fjord/storage"
)

// fakeSource is a node's state as a test sets it.
type fakeSource struct {
	topics    map[string][]Partition
	under     int64
	files     storage.FileCacheStats
	groups    []Group
	img       *controller.Image
	active    bool
	topicByID map[[16]byte]string
}

func (f *fakeSource) Topics() map[string][]Partition {
	out := make(map[string][]Partition, len(f.topics))
	for name, ps := range f.topics {
		out[name] = slices.Clone(ps)
	}
	return out
}
func (f *fakeSource) UnderReplicated() int64            { return f.under }
func (f *fakeSource) FileCache() storage.FileCacheStats { return f.files }
func (f *fakeSource) IndexCache() storage.IndexCacheStats {
	return storage.IndexCacheStats{Bytes: 4096, Misses: 2, Unreadable: 1}
}
func (f *fakeSource) Groups() []Group                       { return f.groups }
func (f *fakeSource) Controller() (*controller.Image, bool) { return f.img, f.active }
func (f *fakeSource) TopicName(id [16]byte) (string, bool)  { n, ok := f.topicByID[id]; return n, ok }
func (f *fakeSource) BrokerAddress(_ *controller.Image, bs controller.BrokerState) string {
	e := bs.Endpoints[0]
	return net.JoinHostPort(e.Host, strconv.Itoa(int(e.Port)))
}

// scrape gathers m's series as name{label="value",…} (labels sorted by
// name, as Prometheus writes them) → value; a summary or histogram
// gives its _count.
func scrape(t *testing.T, m *Metrics) map[string]float64 {
	t.Helper()
	fams, err := m.reg.Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	out := map[string]float64{}
	for _, f := range fams {
		for _, s := range f.GetMetric() {
			var labels []string
			for _, l := range s.GetLabel() {
				labels = append(labels, fmt.Sprintf("%s=%q", l.GetName(), l.GetValue()))
			}
			key := f.GetName()
			if len(labels) > 0 {
				key += "{" + strings.Join(labels, ",") + "}"
			}
			switch f.GetType() {
			case dto.MetricType_COUNTER:
				out[key] = s.GetCounter().GetValue()
			case dto.MetricType_GAUGE:
				out[key] = s.GetGauge().GetValue()
			case dto.MetricType_HISTOGRAM:
				out[key+"_count"] = float64(s.GetHistogram().GetSampleCount())
			case dto.MetricType_SUMMARY:
				out[key+"_count"] = float64(s.GetSummary().GetSampleCount())
			case dto.MetricType_UNTYPED:
				out[key] = s.GetUntyped().GetValue()
			}
		}
	}
	return out
}

// expect checks each series' value; a NaN want means the series must be
// absent.
func expect(t *testing.T, got map[string]float64, want map[string]float64) {
	t.Helper()
	for k, w := range want {
		g, ok := got[k]
		switch {
		case w != w && ok:
			t.Errorf("%s = %v, want no such series", k, g)
		case w != w:
		case !ok:
			t.Errorf("%s missing", k)
		case g != w:
			t.Errorf("%s = %v, want %v", k, g, w)
		}
	}
}

var absent = func() float64 { z := 0.0; return z / z }()

// A leader's and a follower's replica of topic a, nothing of topic b,
// and a group committed on a's two partitions and on a topic with no
// replica here.
func TestMetricsStateSeries(t *testing.T) {
	src := &fakeSource{
		topics: map[string][]Partition{
			"a": {
				{Index: 0, Leads: true, Leader: 1, Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2}, HasLog: true, HW: 40, LogStart: 5, LogEnd: 42, LogBytes: 1000},
				{Index: 1, Leader: 2, Replicas: []int32{2, 1}, ISR: []int32{2, 1}, HasLog: true, HW: 30, LogStart: 0, LogEnd: 35, LogBytes: 500},
			},
			"b": nil,
		},
		under: 1,
		files: storage.FileCacheStats{Open: 3, Opens: 9, Evictions: 6},
		groups: []Group{{ID: "g", Members: 2, Offsets: []GroupOffset{
			{TopicPartition{"a", 0}, 10}, {TopicPartition{"a", 1}, 20}, {TopicPartition{"c", 0}, 7}, {TopicPartition{"a", 2}, -1}}}},
	}
	got := scrape(t, New(src))
	expect(t, got, map[string]float64{
		"fjord_partitions":                  2,
		"fjord_log_bytes":                   1500,
		"fjord_under_replicated_partitions": 1,
		"fjord_log_open_files":              3,
		"fjord_log_index_cache_bytes":       4096,
		"fjord_log_index_loads_total":       2,
		"fjord_log_index_unreadable_total":  1,
		"fjord_log_file_opens_total":        9,
		"fjord_log_file_evictions_total":    6,

		// The leader exports partition 0; the follower's partition 1 is
		// its leader's to export.
		`kafka_topic_partition_current_offset{partition="0",topic="a"}`:             40,
		`kafka_topic_partition_oldest_offset{partition="0",topic="a"}`:              5,
		`kafka_topic_partition_leader{partition="0",topic="a"}`:                     1,
		`kafka_topic_partition_replicas{partition="0",topic="a"}`:                   3,
		`kafka_topic_partition_in_sync_replica{partition="0",topic="a"}`:            2,
		`kafka_topic_partition_leader_is_preferred{partition="0",topic="a"}`:        1,
		`kafka_topic_partition_under_replicated_partition{partition="0",topic="a"}`: 1,
		`kafka_topic_partition_current_offset{partition="1",topic="a"}`:             absent,
		`kafka_topic_partition_leader{partition="1",topic="a"}`:                     absent,

		// Lag against the leader's high watermark on 0, and against what
		// the follower replicated (past its stale high watermark) on 1;
		// none for c, which has no replica here; nothing for a/2, with no
		// offset committed.
		`kafka_consumergroup_members{consumergroup="g"}`:                                2,
		`kafka_consumergroup_current_offset{consumergroup="g",partition="0",topic="a"}`: 10,
		`kafka_consumergroup_lag{consumergroup="g",partition="0",topic="a"}`:            30,
		`kafka_consumergroup_lag{consumergroup="g",partition="1",topic="a"}`:            15,
		`kafka_consumergroup_lag_sum{consumergroup="g",topic="a"}`:                      45,
		`kafka_consumergroup_current_offset_sum{consumergroup="g",topic="a"}`:           30,
		`kafka_consumergroup_current_offset{consumergroup="g",partition="0",topic="c"}`: 7,
		`kafka_consumergroup_current_offset_sum{consumergroup="g",topic="c"}`:           7,
		`kafka_consumergroup_lag{consumergroup="g",partition="0",topic="c"}`:            absent,
		`kafka_consumergroup_lag_sum{consumergroup="g",topic="c"}`:                      absent,
		`kafka_consumergroup_current_offset{consumergroup="g",partition="2",topic="a"}`: absent,

		"kafka_server_replicamanager_underreplicatedpartitions": 1,
		"kafka_server_replicamanager_partitioncount":            2,
		"kafka_server_replicamanager_leadercount":               1,

		// Not the active controller: the two counts as 0, no cluster series.
		"kafka_controller_kafkacontroller_activecontrollercount":  0,
		"kafka_controller_kafkacontroller_offlinepartitionscount": 0,
		"kafka_controller_kafkacontroller_globaltopiccount":       0,
		"kafka_controller_kafkacontroller_globalpartitioncount":   0,
		"kafka_brokers":                     absent,
		`kafka_topic_partitions{topic="a"}`: absent,
	})
}

// The active controller exports the cluster's series from its image,
// with a leaderless partition's from the image too.
func TestMetricsControllerSeries(t *testing.T) {
	img := &controller.Image{}
	idx := uint64(0)
	apply := func(b controller.Body) {
		idx++
		next, err := img.Apply(idx, controller.NewRecord(b))
		if err != nil {
			t.Fatalf("apply %T: %v", b, err)
		}
		img = next
	}
	for _, id := range []int32{1, 2, 3} {
		apply(controller.RegisterBroker{ID: id, Endpoints: []controller.Endpoint{{Name: "PLAINTEXT", Host: "10.0.0." + strconv.Itoa(int(id)), Port: 9092}}})
	}
	for _, id := range []int32{1, 2} { // 3 stays fenced: not live
		bs, _ := img.Broker(id)
		apply(controller.UnfenceBroker{ID: id, Epoch: bs.Epoch})
	}
	id := [16]byte{1}
	apply(controller.CreateTopic{Name: "a", ID: id})
	apply(controller.CreatePartition{TopicID: id, Partition: 0, Replicas: []int32{1, 2}, ISR: []int32{1, 2}, Leader: 1})
	apply(controller.CreatePartition{TopicID: id, Partition: 1, Replicas: []int32{2, 3}, ISR: []int32{3}, Leader: -1})

	got := scrape(t, New(&fakeSource{img: img, active: true}))
	expect(t, got, map[string]float64{
		"kafka_controller_kafkacontroller_activecontrollercount":  1,
		"kafka_controller_kafkacontroller_offlinepartitionscount": 1,
		"kafka_controller_kafkacontroller_globaltopiccount":       1,
		"kafka_controller_kafkacontroller_globalpartitioncount":   2,
		"kafka_brokers": 2,
		`kafka_broker_info{address="10.0.0.1:9092",id="1"}`:                         1,
		`kafka_broker_info{address="10.0.0.2:9092",id="2"}`:                         1,
		`kafka_broker_info{address="10.0.0.3:9092",id="3"}`:                         absent,
		`kafka_topic_partitions{topic="a"}`:                                         2,
		`kafka_topic_partition_leader{partition="1",topic="a"}`:                     -1,
		`kafka_topic_partition_replicas{partition="1",topic="a"}`:                   2,
		`kafka_topic_partition_in_sync_replica{partition="1",topic="a"}`:            1,
		`kafka_topic_partition_leader_is_preferred{partition="1",topic="a"}`:        0,
		`kafka_topic_partition_under_replicated_partition{partition="1",topic="a"}`: 1,
		// Partition 0 has a leader: its series are the leader's.
		`kafka_topic_partition_leader{partition="0",topic="a"}`: absent,
	})

	// Active before its first image: only the count.
	got = scrape(t, New(&fakeSource{active: true}))
	expect(t, got, map[string]float64{
		"kafka_controller_kafkacontroller_activecontrollercount":  1,
		"kafka_controller_kafkacontroller_offlinepartitionscount": absent,
	})
}

// The counters the broker's code increments, and the per-topic ones
// dropped once the topic is gone.
func TestMetricsCounted(t *testing.T) {
	src := &fakeSource{topics: map[string][]Partition{"a": nil, "gone": nil}, topicByID: map[[16]byte]string{{1}: "a"}}
	m := New(src)
	m.Produced("a", 100, 3)
	m.Produced("gone", 7, 1)
	m.Fetched("", [16]byte{1}, 50) // Fetch v13+: by id
	m.Fetched("a", [16]byte{}, 5)
	m.Fetched("", [16]byte{9}, 11) // an id the image lacks: not counted
	m.BytesIn.Add(100)
	m.ISRShrinks.Inc()
	m.PartitionError(1, 6)
	m.FlushObserver().Observe(0.002)

	start := time.Now()
	produce := m.RequestStarted(0, 9, kmsg.NewPtrProduceRequest(), start)
	consumer := kmsg.NewPtrFetchRequest()
	consumer.Version, consumer.ReplicaID = 12, -1
	m.RequestStarted(1, 12, consumer, start).Handled()
	follower := kmsg.NewPtrFetchRequest()
	follower.Version, follower.ReplicaID, follower.ReplicaState.ID = 15, -1, 2
	m.RequestStarted(1, 15, follower, start).Handled()
	expect(t, scrape(t, m), map[string]float64{"kafka_network_requestchannel_requestqueuesize": 1})
	produce.Done()
	produce.Handled()

	delete(src.topics, "gone")
	expect(t, scrape(t, m), map[string]float64{
		`kafka_server_brokertopicmetrics_bytesin_total{topic="a"}`:                          100,
		`kafka_server_brokertopicmetrics_messagesin_total{topic="a"}`:                       3,
		`kafka_server_brokertopicmetrics_bytesout_total{topic="a"}`:                         55,
		`kafka_server_brokertopicmetrics_bytesin_total{topic="gone"}`:                       absent,
		"fjord_produce_bytes_total":                                                         100,
		"kafka_server_replicamanager_isrshrinks_total":                                      1,
		"fjord_isr_shrinks_total":                                                           1,
		"kafka_server_replicamanager_isrexpands_total":                                      0,
		`fjord_partition_errors_total{api="1",code="6"}`:                                    1,
		"fjord_log_flush_seconds_count":                                                     1,
		"kafka_log_logflushstats_logflushrateandtimems_count":                               1,
		`kafka_log_logflushstats_logflushrateandtimems{quantile="0.50"}`:                    2,
		`fjord_requests_total{api="0"}`:                                                     1,
		`fjord_requests_total{api="1"}`:                                                     2,
		`kafka_network_requestmetrics_requests_total{request="Produce",version="9"}`:        1,
		`kafka_network_requestmetrics_requests_total{request="FetchConsumer",version="12"}`: 1,
		`kafka_network_requestmetrics_requests_total{request="FetchFollower",version="15"}`: 1,
		`fjord_request_seconds{api="0"}_count`:                                              1,
		`kafka_network_requestmetrics_totaltimems_count{request="Produce"}`:                 1,
		"kafka_network_requestchannel_requestqueuesize":                                     0,
	})
}

// /metrics is served; /debug/pprof only when asked for.
func TestMetricsHandler(t *testing.T) {
	m := New(&fakeSource{})
	for _, on := range []bool{false, true} {
		h := m.Handler(on)
		for path, want := range map[string]int{"/metrics": http.StatusOK, "/debug/pprof/": map[bool]int{false: http.StatusNotFound, true: http.StatusOK}[on]} {
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
			if rec.Code != want {
				t.Errorf("pprof %v: %s status %d, want %d", on, path, rec.Code, want)
			}
			if path == "/metrics" && !strings.Contains(rec.Body.String(), "# HELP fjord_partitions Partitions hosted on this node.") {
				t.Errorf("pprof %v: /metrics lacks fjord_partitions' help", on)
			}
		}
	}
}
