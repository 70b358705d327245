package compattests

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// prometheusPath finds Debian's prometheus server: skip when absent,
// unless FJORD_REQUIRE_PROMETHEUS is set.
func prometheusPath(t *testing.T) string {
	t.Helper()
	return toolPath(t, "prometheus", "FJORD_REQUIRE_PROMETHEUS")
}

// metricsLine is the node's log line naming its bound /metrics address.
var metricsLine = regexp.MustCompile(`"addr":"([^"]+)"[^\n]*serving /metrics`)

// metricsAddr waits for node id's /metrics address in its log (the
// listener is bound to port 0, so the node picks it and says which).
func (c *Cluster) metricsAddr(t *testing.T, id int) string {
	t.Helper()
	var addr string
	c.Await(t, 10*time.Second, fmt.Sprintf("node %d serving /metrics", id), func() (bool, string) {
		if m := metricsLine.FindStringSubmatch(c.logSinceStart(id)); m != nil {
			addr = m[1]
			return true, ""
		}
		return false, "no log line yet"
	})
	return addr
}

// promServer is a running Prometheus server and its HTTP API.
type promServer struct {
	base string
}

// startPrometheus runs prometheus scraping targets every second, with its
// config and data in temporary directories, until the test ends.
func startPrometheus(t *testing.T, bin string, targets []string) *promServer {
	t.Helper()
	dir := t.TempDir()
	quoted := make([]string, len(targets))
	for i, tg := range targets {
		quoted[i] = strconv.Quote(tg)
	}
	cfg := fmt.Sprintf("global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n  evaluation_interval: 1s\n"+
		"scrape_configs:\n  - job_name: fjord\n    static_configs:\n      - targets: [%s]\n", strings.Join(quoted, ", "))
	cfgPath := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	addr := net.JoinHostPort("127.0.0.1", freePort(t))
	logf, err := os.Create(filepath.Join(dir, "prometheus.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "--config.file="+cfgPath, "--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+addr, "--storage.tsdb.retention.time=1h")
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting prometheus: %v", err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
		if t.Failed() {
			if b, err := os.ReadFile(logf.Name()); err == nil {
				t.Logf("prometheus log:\n%s", b)
			}
		}
		logf.Close()
	})
	p := &promServer{base: "http://" + addr}
	deadline := time.Now().Add(20 * time.Second)
	for {
		resp, err := http.Get(p.base + "/-/ready")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return p
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("prometheus at %s not ready after 20s (last: %v)", addr, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// promSample is one element of an instant vector.
type promSample struct {
	Metric map[string]string
	Value  float64
}

// query evaluates an instant PromQL query through /api/v1/query.
func (p *promServer) query(q string) ([]promSample, error) {
	resp, err := http.Get(p.base + "/api/v1/query?query=" + url.QueryEscape(q))
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var body struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Data   struct {
			ResultType string `json:"resultType"`
			Result     []struct {
				Metric map[string]string `json:"metric"`
				Value  [2]any            `json:"value"`
			} `json:"result"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		return nil, fmt.Errorf("query %q: decoding: %w", q, err)
	}
	if body.Status != "success" {
		return nil, fmt.Errorf("query %q: %s", q, body.Error)
	}
	if body.Data.ResultType != "vector" {
		return nil, fmt.Errorf("query %q: result type %q, want vector", q, body.Data.ResultType)
	}
	out := make([]promSample, 0, len(body.Data.Result))
	for _, r := range body.Data.Result {
		s, _ := r.Value[1].(string)
		v, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return nil, fmt.Errorf("query %q: value %v: %w", q, r.Value[1], err)
		}
		out = append(out, promSample{r.Metric, v})
	}
	return out, nil
}

// scalar is a query's one value; ok is false for an empty result.
func (p *promServer) scalar(q string) (v float64, ok bool, err error) {
	r, err := p.query(q)
	if err != nil || len(r) == 0 {
		return 0, false, err
	}
	if len(r) > 1 {
		return 0, false, fmt.Errorf("query %q: %d samples, want 1", q, len(r))
	}
	return r[0].Value, true, nil
}

// await polls q until cond holds for its value.
func (p *promServer) await(t *testing.T, c *Cluster, timeout time.Duration, q, what string, cond func(float64) bool) float64 {
	t.Helper()
	var got float64
	c.Await(t, timeout, what, func() (bool, string) {
		v, ok, err := p.scalar(q)
		switch {
		case err != nil:
			return false, err.Error()
		case !ok:
			return false, q + ": no samples"
		}
		got = v
		return cond(v), fmt.Sprintf("%s = %v", q, v)
	})
	return got
}

// TestPrometheusScrapesCluster runs Debian's Prometheus server against a
// three-node cluster under a produce and consume load, and reads through
// its HTTP API what a kafka_exporter or JMX-exporter dashboard would:
// consumer lag rising once the consumer stops while the producer goes on,
// and under-replicated partitions above 0 once a node is killed. The
// counts of series check that each figure comes from one node only, so
// sum() over the scraped nodes is the cluster's figure.
func TestPrometheusScrapesCluster(t *testing.T) {
	bin := prometheusPath(t)
	c := startCluster(t, 3, "fjord.metrics.listener=127.0.0.1:0")
	var targets []string
	for _, id := range c.IDs() {
		targets = append(targets, c.metricsAddr(t, id))
	}
	const topic, group = "prom-load", "prom-group"
	c.createOn(t, 1, topic, 3, 3)
	prom := startPrometheus(t, bin, targets)

	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer func() { cancel(); wg.Wait() }()
	prod := newClient(t, c.Addrs()[0], kgo.SeedBrokers(c.Addrs()...), kgo.DefaultProduceTopic(topic), kgo.ProducerLinger(5*time.Millisecond))
	wg.Add(1)
	go func() { // the producer: acks=all, on until the test ends
		defer wg.Done()
		for i := 0; ctx.Err() == nil; i++ {
			r := &kgo.Record{Key: []byte(strconv.Itoa(i % 64)), Value: []byte(fmt.Sprintf("record %d", i))}
			prod.Produce(ctx, r, func(*kgo.Record, error) {})
			if i%50 == 49 {
				time.Sleep(20 * time.Millisecond)
			}
		}
	}()

	cons, err := kgo.NewClient(kgo.SeedBrokers(c.Addrs()...), kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
		kgo.AutoCommitInterval(300*time.Millisecond), kgo.FetchMaxWait(200*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	consCtx, stopConsuming := context.WithCancel(ctx)
	consumed := make(chan int, 1)
	go func() {
		n := 0
		for consCtx.Err() == nil {
			n += cons.PollFetches(consCtx).NumRecords()
		}
		consumed <- n
	}()

	prom.await(t, c, 10*time.Second, `count(up == 1)`, "every node scraped", func(v float64) bool { return v == 3 })
	// While the consumer keeps up: one lag series per partition (from the
	// group's coordinator only), and the cluster-wide series once each.
	prom.await(t, c, 20*time.Second, `count(kafka_consumergroup_lag{consumergroup="`+group+`",topic="`+topic+`"})`,
		"one lag series per partition", func(v float64) bool { return v == 3 })
	prom.await(t, c, 10*time.Second, `count(kafka_topic_partition_current_offset{topic="`+topic+`"})`,
		"one offset series per partition", func(v float64) bool { return v == 3 })
	prom.await(t, c, 10*time.Second, `sum(kafka_controller_kafkacontroller_activecontrollercount)`,
		"one active controller", func(v float64) bool { return v == 1 })
	prom.await(t, c, 10*time.Second, `sum(kafka_brokers)`, "three brokers", func(v float64) bool { return v == 3 })
	prom.await(t, c, 10*time.Second, `count(kafka_broker_info == 1)`, "one info series per broker", func(v float64) bool { return v == 3 })
	brokerInfo := func() map[string]string { // id -> address
		rs, err := prom.query(`kafka_broker_info`)
		if err != nil {
			t.Fatal(err)
		}
		m := map[string]string{}
		for _, r := range rs {
			m[r.Metric["id"]] = r.Metric["address"]
		}
		return m
	}
	for _, id := range c.IDs() {
		if got := brokerInfo()[strconv.Itoa(id)]; got != c.Addr(id) {
			t.Fatalf("kafka_broker_info{id=%q}: address %q, want %q (all: %v)", strconv.Itoa(id), got, c.Addr(id), brokerInfo())
		}
	}
	prom.await(t, c, 10*time.Second, `sum(rate(kafka_server_brokertopicmetrics_messagesin_total{topic="`+topic+`"}[5s]))`,
		"records flowing in", func(v float64) bool { return v > 0 })
	prom.await(t, c, 10*time.Second, `sum(rate(kafka_server_brokertopicmetrics_bytesout_total{topic="`+topic+`"}[5s]))`,
		"bytes flowing out to the consumer", func(v float64) bool { return v > 0 })
	prom.await(t, c, 10*time.Second, `max(kafka_network_requestmetrics_totaltimems{request="Produce",quantile="0.99"})`,
		"a Produce p99", func(v float64) bool { return v > 0 })
	prom.await(t, c, 10*time.Second, `sum(kafka_server_replicamanager_underreplicatedpartitions)`,
		"nothing under-replicated before the kill", func(v float64) bool { return v == 0 })

	// Every query of the Grafana dashboard is valid and has data.
	for _, q := range dashboardQueries(t) {
		q = strings.ReplaceAll(q, "$__rate_interval", "5s")
		prom.await(t, c, 10*time.Second, "count("+q+")", "dashboard query "+q, func(v float64) bool { return v > 0 })
	}

	// Stop the consumer (Close commits what it polled); the producer goes on.
	stopConsuming()
	n := <-consumed
	cons.Close()
	if n == 0 {
		t.Fatal("the consumer read nothing before it stopped")
	}
	lagQ := `sum(kafka_consumergroup_lag_sum{consumergroup="` + group + `",topic="` + topic + `"})`
	time.Sleep(1500 * time.Millisecond) // a scrape after the last commit
	atStop, _, err := prom.scalar(lagQ)
	if err != nil {
		t.Fatal(err)
	}
	rose := prom.await(t, c, 15*time.Second, lagQ, "lag rising after the consumer stopped",
		func(v float64) bool { return v > atStop+100 })
	t.Logf("consumed %d records; lag %v just after the consumer stopped, then %v", n, atStop, rose)

	// Kill a node that is not the controller: its partitions' ISRs shrink
	// once it is fenced, and their leaders report them.
	victim := 1
	for _, id := range c.IDs() {
		if id != c.Controller() {
			victim = id
			break
		}
	}
	c.Kill(victim)
	killed := time.Now()
	urp := prom.await(t, c, 20*time.Second, `sum(kafka_server_replicamanager_underreplicatedpartitions)`,
		"under-replicated partitions after the kill", func(v float64) bool { return v > 0 })
	per := prom.await(t, c, 10*time.Second, `sum(kafka_topic_partition_under_replicated_partition{topic="`+topic+`"})`,
		"kafka_exporter's under-replicated flag after the kill", func(v float64) bool { return v > 0 })
	prom.await(t, c, 10*time.Second, `count(kafka_broker_info)`, "the killed node's info series gone", func(v float64) bool { return v == 2 })
	if addr, ok := brokerInfo()[strconv.Itoa(victim)]; ok {
		t.Fatalf("kafka_broker_info still lists the killed node %d at %s", victim, addr)
	}
	t.Logf("node %d killed: %v under-replicated partitions (%v of %s) seen after %v", victim, urp, per, topic, time.Since(killed).Round(100*time.Millisecond))
}

// dashboardQueries are the PromQL expressions of docs/grafana-fjord.json;
// it fails the test if one reads a series that is not Kafka-named.
func dashboardQueries(t *testing.T) []string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "docs", "grafana-fjord.json"))
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(data, &d); err != nil {
		t.Fatalf("docs/grafana-fjord.json: %v", err)
	}
	series := regexp.MustCompile(`\b[a-z_]+_[a-z_]+\b`)
	var out []string
	for _, p := range d.Panels {
		for _, tg := range p.Targets {
			for _, name := range series.FindAllString(tg.Expr, -1) {
				if strings.HasPrefix(name, "fjord_") {
					t.Errorf("dashboard panel %q reads Fjord's own %s", p.Title, name)
				}
			}
			out = append(out, tg.Expr)
		}
	}
	if len(out) == 0 {
		t.Fatal("docs/grafana-fjord.json has no queries")
	}
	return out
}
