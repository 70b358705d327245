package brokertest

import (
	"encoding/binary"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordlog/fjord/broker/config"
)

// T4 (c), the case startup recovery cannot see: a byte flipped in a
// middle batch of a sealed segment of the preferred leader's replica while
// it was down (startup re-checks only the active segment). Once it leads
// again, the damaged batch must never be served: the first read that meets
// it marks the replica damaged, the replica hands the leadership to another
// ISR member, truncates its log at the damage as a follower outside the
// ISR, and copies the rest again. Consumers read every record once, in
// order; every replica ends identical.
func TestScenarioDamagedSealedSegment(t *testing.T) {
	const topic = "damaged"
	step := stepper(t)
	var metricsMu sync.Mutex
	metricsAddr := map[int32]string{} // each node's metrics listener, as of its last start
	c := scenarioCluster(t, topic, 10000, 2, func(cfg *config.Config) {
		cfg.SegmentBytes = 1024
		cfg.AutoLeaderRebalance = true
		cfg.LeaderImbalanceCheckSecs = 1
		port, err := freePort()
		if err != nil {
			t.Error(err)
			return
		}
		cfg.MetricsAddr = fmt.Sprintf("127.0.0.1:%d", port)
		metricsMu.Lock()
		metricsAddr[cfg.NodeID] = cfg.MetricsAddr
		metricsMu.Unlock()
	})
	p := partitionVia(t, c, 1, topic)
	victim := p.Replicas[0] // the preferred leader: rebalancing gives it the partition back
	waitPartition(t, c, 1, topic, 10*time.Second, "the preferred replica leads", func(p kmsg.MetadataResponseTopicPartition) bool {
		return p.Leader == victim
	})
	waitLeads(t, c, victim, topic, partitionVia(t, c, 1, topic).LeaderEpoch)

	var want []string
	for i := range 30 {
		vs := make([]string, 3)
		for j := range vs {
			vs[j] = fmt.Sprintf("value-%03d-%d-%s", i, j, strings.Repeat("x", 24))
		}
		mustSend(t, c, victim, topic, -1, vs...)
		want = append(want, vs...)
	}
	waitLogs(t, c, topic, want, 10*time.Second)
	step("%d records on every replica; node %d leads", len(want), victim)

	stopNode(t, c, victim)
	dir := filepath.Join(c.opts.Dir, fmt.Sprintf("node-%d", victim), topic+"-0")
	damaged := damageSealedSegment(t, dir)
	step("node %d stopped; flipped a byte in the batch at offset %d, in a sealed segment", victim, damaged)

	restartNode(t, c, victim)
	// Asked of the victim itself, which answers once it applied the change
	// (Broker.Replica would read the damaged log).
	np := waitPartition(t, c, victim, topic, 20*time.Second, "the restarted node rejoins the ISR and leads again",
		func(p kmsg.MetadataResponseTopicPartition) bool { return p.Leader == victim && len(p.ISR) == 3 })
	step("node %d leads again at epoch %d (its damage unseen so far)", victim, np.LeaderEpoch)

	got := consumeValues(t, c, topic, len(want))
	if !slices.Equal(got, want) {
		t.Fatalf("consumed %d records, want %d in order:\n got %v\nwant %v", len(got), len(want), got, want)
	}
	step("a consumer read all %d records in order", len(got))
	// The consumer may have read the rest from the new leader before node 1
	// published the image it learned that from (a node steps its replicas
	// first): wait, bounded, for node 1 to show the resignation. Without
	// one the epoch stays where it was and this fails.
	waitPartition(t, c, 1, topic, 10*time.Second,
		fmt.Sprintf("node %d resigns the leadership it held at epoch %d: reading past the damage should make it", victim, np.LeaderEpoch),
		func(p kmsg.MetadataResponseTopicPartition) bool { return p.LeaderEpoch != np.LeaderEpoch })
	waitLogs(t, c, topic, want, 30*time.Second)
	step("every replica holds all %d records again, committed; ISR of 3", len(want))
	metricsMu.Lock()
	addr := metricsAddr[victim]
	metricsMu.Unlock()
	for _, m := range []string{"fjord_log_damage_total 1", "fjord_log_repairs_total 1"} {
		if got := scrape(t, addr); !strings.Contains(got, "\n"+m+"\n") {
			t.Errorf("node %d metrics lack %q", victim, m)
		}
	}
}

// scrape returns the Prometheus text served at addr.
func scrape(t *testing.T, addr string) string {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(body)
}

// damageSealedSegment flips one byte inside the records of the second batch
// of the second segment in dir and returns that batch's base offset.
func damageSealedSegment(t *testing.T, dir string) int64 {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var logs []string
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), ".log") {
			logs = append(logs, e.Name())
		}
	}
	sort.Strings(logs)
	if len(logs) < 3 {
		t.Fatalf("%s: want at least 3 segments, have %v", dir, logs)
	}
	path := filepath.Join(dir, logs[1])
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	first := 12 + int(binary.BigEndian.Uint32(data[8:12]))
	if len(data) < first+12 {
		t.Fatalf("%s holds one batch only", path)
	}
	second := 12 + int(binary.BigEndian.Uint32(data[first+8:first+12]))
	if len(data) < first+second || second < 80 {
		t.Fatalf("%s: second batch of %d bytes", path, second)
	}
	data[first+70] ^= 0x01
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return int64(binary.BigEndian.Uint64(data[first:]))
}
