package brokertest

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordlog/fjord/broker/config"
)

// sample is one line of a /metrics page.
type sample struct {
	name, labels string // labels as written, {…} included, "" when none
	value        float64
}

// scrapeAll reads every sample of addr's /metrics page.
func scrapeAll(t *testing.T, addr string) []sample {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatalf("scraping %s: %v", addr, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("scraping %s: %s: %s", addr, resp.Status, b)
	}
	var out []sample
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		sp := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[sp+1:], 64)
		if err != nil {
			t.Fatalf("scraping %s: line %q: %v", addr, line, err)
		}
		name, labels := line[:sp], ""
		if i := strings.IndexByte(name, '{'); i >= 0 {
			name, labels = name[:i], name[i:]
		}
		out = append(out, sample{name, labels, v})
	}
	return out
}

// The Kafka-named series of a three-node cluster: each partition's from
// its leader, each group's from its coordinator, the cluster's from the
// active controller, so that every series is exported once and sums over
// the nodes are the cluster's figures.
func TestKafkaMetricsExportedOnce(t *testing.T) {
	addrs := map[int32]string{}
	for id := int32(1); id <= 3; id++ {
		addr, err := freeAddr()
		if err != nil {
			t.Fatal(err)
		}
		addrs[id] = addr
	}
	c, err := Start(Options{Nodes: 3, Dir: t.TempDir(), Configure: func(id int32, cfg *config.Config) {
		cfg.MetricsAddr = addrs[id]
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if code := createTopic(t, c.Addr(1), "m", 3, 3); code != 0 {
		t.Fatalf("create: %v", kerr.ErrorForCode(code))
	}
	waitTopic(t, c, "m", 3)
	const n = 90
	if got, err := produce(t, producer(t, c, "m"), 0, n); err != nil || got != n {
		t.Fatalf("produced %d of %d: %v", got, n, err)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.Addrs()...), kgo.ConsumerGroup("mg"))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	// Commit 10 on every partition: the lag of each is its end offset - 10.
	var commitErr error
	for {
		commitErr = nil
		cl.CommitOffsetsSync(ctx, map[string]map[int32]kgo.EpochOffset{"m": {0: {Epoch: -1, Offset: 10}, 1: {Epoch: -1, Offset: 10}, 2: {Epoch: -1, Offset: 10}}},
			func(_ *kgo.Client, _ *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
				if err != nil {
					commitErr = err
					return
				}
				for _, tp := range resp.Topics {
					for _, p := range tp.Partitions {
						if p.ErrorCode != 0 {
							commitErr = kerr.ErrorForCode(p.ErrorCode)
						}
					}
				}
			})
		if commitErr == nil || ctx.Err() != nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if commitErr != nil {
		t.Fatalf("commit: %v", commitErr)
	}

	// count and sum of every name{labels} over the nodes.
	var counts map[string]int
	var sums map[string]float64
	collect := func() {
		counts, sums = map[string]int{}, map[string]float64{}
		for _, addr := range addrs {
			for _, s := range scrapeAll(t, addr) {
				counts[s.name+s.labels]++
				sums[s.name+s.labels] += s.value
				if s.labels != "" {
					counts[s.name]++
					sums[s.name] += s.value
				}
			}
		}
	}
	lag := func(p int) string {
		return fmt.Sprintf(`kafka_consumergroup_lag{consumergroup="mg",partition="%d",topic="m"}`, p)
	}
	eventually(t, 10*time.Second, "a lag series for each partition", func() bool {
		collect()
		return counts[lag(0)] == 1 && counts[lag(1)] == 1 && counts[lag(2)] == 1
	})
	var endSum float64
	for p := 0; p < 3; p++ {
		off := fmt.Sprintf(`kafka_topic_partition_current_offset{partition="%d",topic="m"}`, p)
		if counts[off] != 1 {
			t.Errorf("%s exported by %d nodes, want 1", off, counts[off])
		}
		if got, want := sums[lag(p)], sums[off]-10; got != want {
			t.Errorf("%s = %v, want end offset - 10 = %v", lag(p), got, want)
		}
		endSum += sums[off]
	}
	if endSum != n {
		t.Errorf("sum of end offsets %v, want %d", endSum, n)
	}
	for key, want := range map[string]float64{
		`kafka_consumergroup_lag_sum{consumergroup="mg",topic="m"}`:            n - 30,
		`kafka_consumergroup_current_offset_sum{consumergroup="mg",topic="m"}`: 30,
		`kafka_consumergroup_members{consumergroup="mg"}`:                      0,
		`kafka_brokers`:                                               3,
		`kafka_topic_partitions{topic="m"}`:                           3,
		`kafka_controller_kafkacontroller_activecontrollercount`:      1,
		`kafka_controller_kafkacontroller_offlinepartitionscount`:     0,
		`kafka_server_brokertopicmetrics_messagesin_total{topic="m"}`: n,
		`kafka_server_replicamanager_underreplicatedpartitions`:       0,
		`kafka_topic_partition_under_replicated_partition`:            0,
	} {
		if sums[key] != want || counts[key] == 0 {
			t.Errorf("%s: sum %v over %d series, want %v", key, sums[key], counts[key], want)
		}
	}
	for _, key := range []string{`kafka_brokers`, `kafka_topic_partitions{topic="m"}`, `kafka_consumergroup_members{consumergroup="mg"}`} {
		if counts[key] != 1 {
			t.Errorf("%s exported by %d nodes, want 1", key, counts[key])
		}
	}
	if sums[`kafka_server_brokertopicmetrics_bytesin_total{topic="m"}`] <= 0 {
		t.Error("no bytes in counted for topic m")
	}
	if counts[`kafka_network_requestmetrics_totaltimems{quantile="0.99",request="Produce"}`] == 0 ||
		sums[`kafka_network_requestmetrics_totaltimems_count{request="Produce"}`] <= 0 {
		t.Error("no Produce request times")
	}
	if counts[`kafka_server_replicamanager_leadercount`] != 3 || sums[`kafka_server_replicamanager_partitioncount`] < 9 {
		t.Errorf("leadercount on %d nodes, partitions %v", counts[`kafka_server_replicamanager_leadercount`], sums[`kafka_server_replicamanager_partitioncount`])
	}
	// A partition whose one replica is down: offline, reported by the
	// active controller with leader -1.
	if code := createTopic(t, c.Addr(1), "off", 1, 1); code != 0 {
		t.Fatalf("create: %v", kerr.ErrorForCode(code))
	}
	waitTopic(t, c, "off", 1)
	const offLeader = `kafka_topic_partition_leader{partition="0",topic="off"}`
	eventually(t, 10*time.Second, "a leader for off-0", func() bool {
		collect()
		return counts[offLeader] == 1
	})
	host := int32(sums[offLeader])
	if err := c.Stop(host); err != nil {
		t.Fatal(err)
	}
	delete(addrs, host)
	eventually(t, 20*time.Second, "off-0 offline, leader -1 from one node", func() bool {
		collect()
		return sums[`kafka_controller_kafkacontroller_offlinepartitionscount`] == 1 &&
			counts[offLeader] == 1 && sums[offLeader] == -1
	})
	if counts[`kafka_topic_partition_current_offset{partition="0",topic="off"}`] != 0 {
		t.Error("an offline partition has an offset series")
	}
}
