package compattests

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// TestGroupKafkaPython: kafka-python 2.0's KafkaConsumer in a group with
// manual commits, then KafkaAdminClient's list/describe/offsets calls (see
// testdata/kafka_python_group.py).
func TestGroupKafkaPython(t *testing.T) {
	py := "/usr/bin/python3"
	if err := exec.Command(py, "-c", "import kafka").Run(); err != nil {
		if os.Getenv("FJORD_REQUIRE_KAFKA_PYTHON") != "" {
			t.Fatalf("python3-kafka missing and FJORD_REQUIRE_KAFKA_PYTHON is set: %v", err)
		}
		t.Skipf("python3-kafka not installed (%v)", err)
	}
	const topic, group = "kpy-group", "kpy-grp"
	b := startBroker(t, t.TempDir(), groupBrokerOverrides...)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	script, _ := filepath.Abs("testdata/kafka_python_group.py")
	out, err := exec.CommandContext(ctx, py, script, b.Addr, topic, group).Output()
	if err != nil {
		if ee, ok := err.(*exec.ExitError); ok {
			t.Fatalf("kafka-python: %v\n%s", err, tail(string(ee.Stderr)))
		}
		t.Fatal(err)
	}
	var got struct {
		Errors      []string          `json:"errors"`
		Acked       int               `json:"acked"`
		Values      []string          `json:"values"`
		Assignment  []int32           `json:"assignment"`
		APIVersion  []int             `json:"api_version"`
		EndOffsets  map[string]int64  `json:"end_offsets"`
		CommittedBy map[string]*int64 `json:"committed_by_consumer"`
		Listed      [][]string        `json:"listed"`
		Described   []struct {
			Group        string `json:"group"`
			State        string `json:"state"`
			ProtocolType string `json:"protocol_type"`
			Protocol     string `json:"protocol"`
			Members      int    `json:"members"`
		} `json:"described"`
		GroupOffsets map[string]int64 `json:"group_offsets"`
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	t.Logf("kafka-python api_version %v, assignment %v, listed %v, described %+v, group offsets %v, consumer.committed %v",
		got.APIVersion, got.Assignment, got.Listed, got.Described, got.GroupOffsets, fmtPtrMap(got.CommittedBy))
	for _, e := range got.Errors {
		t.Errorf("kafka-python admin call failed:\n%s", e)
	}

	if got.Acked != 300 {
		t.Errorf("acked %d, want 300", got.Acked)
	}
	want := map[string]bool{}
	for i := range 300 {
		want["v"+strconv.Itoa(i)] = true
	}
	dups := 0
	for _, v := range got.Values {
		if !want[v] {
			dups++
			continue
		}
		delete(want, v)
	}
	if len(want) != 0 || dups != 0 {
		t.Errorf("group consumer read %d values: %d never read, %d unexpected or repeated", len(got.Values), len(want), dups)
	}
	if len(got.Assignment) != 3 {
		t.Errorf("sole member's assignment %v, want all 3 partitions", got.Assignment)
	}

	// The group is listed, described, and its offsets equal the end offsets.
	listed := false
	for _, g := range got.Listed {
		if len(g) > 0 && g[0] == group {
			listed = true
			if len(g) > 1 && g[1] != "consumer" {
				t.Errorf("list_consumer_groups: %s has protocol type %q, want consumer", group, g[1])
			}
		}
	}
	if !listed {
		t.Errorf("list_consumer_groups() = %v, missing %s", got.Listed, group)
	}
	if len(got.Described) != 1 || got.Described[0].Group != group {
		t.Errorf("describe_consumer_groups([%s]) = %+v", group, got.Described)
	} else if d := got.Described[0]; d.State != "Empty" || d.Members != 0 {
		t.Errorf("describe_consumer_groups after the consumer closed: state %q with %d members, want Empty with 0", d.State, d.Members)
	}
	if len(got.EndOffsets) != 3 {
		t.Fatalf("end offsets %v", got.EndOffsets)
	}
	var sum int64
	for p, end := range got.EndOffsets {
		sum += end
		key := topic + "/" + p
		if off, ok := got.GroupOffsets[key]; !ok || off != end {
			t.Errorf("list_consumer_group_offsets: %s = %v (present %v), want the end offset %d", key, off, ok, end)
		}
		if c := got.CommittedBy[p]; c == nil || *c != end {
			t.Errorf("consumer.committed(%s) = %s, want %d", key, fmtPtr(c), end)
		}
	}
	if sum != 300 {
		t.Errorf("end offsets %v sum to %d, want 300", got.EndOffsets, sum)
	}
	if len(got.GroupOffsets) != 3 {
		t.Errorf("list_consumer_group_offsets returned %d partitions, want 3: %v", len(got.GroupOffsets), got.GroupOffsets)
	}
}

func fmtPtr(p *int64) string {
	if p == nil {
		return "None"
	}
	return strconv.FormatInt(*p, 10)
}

func fmtPtrMap(m map[string]*int64) string {
	s := "{"
	for k, v := range m {
		s += fmt.Sprintf(" %s:%s", k, fmtPtr(v))
	}
	return s + " }"
}
