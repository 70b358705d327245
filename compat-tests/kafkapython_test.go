package compattests

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"testing"
	"time"
)

// kafka-python 2.0 (Debian's python3-kafka) probes the broker's version and
// then speaks old API versions (ListOffsets v0/v1, Produce v3-v7), which
// Kafka 4 dropped.
func TestKafkaPython(t *testing.T) {
	py := "/usr/bin/python3"
	if err := exec.Command(py, "-c", "import kafka").Run(); err != nil {
		if os.Getenv("FJORD_REQUIRE_KAFKA_PYTHON") != "" {
			t.Fatalf("python3-kafka missing and FJORD_REQUIRE_KAFKA_PYTHON is set: %v", err)
		}
		t.Skipf("python3-kafka not installed (%v)", err)
	}
	b := startBroker(t, t.TempDir())
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	script, _ := filepath.Abs("testdata/kafka_python_roundtrip.py")
	out, err := exec.CommandContext(ctx, py, script, b.Addr, "kpy").Output()
	if err != nil {
		if ee, ok := err.(*exec.ExitError); ok {
			t.Fatalf("kafka-python: %v\n%s", err, ee.Stderr)
		}
		t.Fatal(err)
	}
	var got struct {
		Acked      int      `json:"acked"`
		Values     []string `json:"values"`
		End        int64    `json:"end"`
		Begin      int64    `json:"begin"`
		ByTimeTS   []int64  `json:"by_time_ts"`
		APIVersion []int    `json:"api_version"`
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	t.Logf("kafka-python negotiated api_version %v", got.APIVersion)
	if got.Acked != 200 || got.End != 200 || got.Begin != 0 {
		t.Fatalf("acked %d, end offsets sum %d, beginning %d", got.Acked, got.End, got.Begin)
	}
	want := map[string]bool{}
	for i := range 200 {
		want["v"+strconv.Itoa(i)] = true
	}
	sort.Strings(got.Values)
	for _, v := range got.Values {
		if !want[v] {
			t.Fatalf("unexpected or duplicate value %q", v)
		}
		delete(want, v)
	}
	if len(want) != 0 {
		t.Fatalf("%d values never read", len(want))
	}
	for _, ts := range got.ByTimeTS {
		if ts < 1100 {
			t.Fatalf("offsets_for_times(1100) found a record at %d", ts)
		}
	}
	if len(got.ByTimeTS) != 2 {
		t.Fatalf("offsets_for_times found %d partitions, want 2", len(got.ByTimeTS))
	}
}
