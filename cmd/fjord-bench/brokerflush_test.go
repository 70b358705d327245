package main

import (
	"bufio"
	"encoding/json"
	"math"
	"strings"
	"testing"
)

func scrape(t *testing.T, text string) brokerHist {
	t.Helper()
	h, err := parseFlushMetrics(bufio.NewScanner(strings.NewReader(text)))
	if err != nil {
		t.Fatal(err)
	}
	return h
}

const flushBefore = `# HELP fjord_log_flush_seconds Time of one flush.
# TYPE fjord_log_flush_seconds histogram
fjord_log_flush_seconds_bucket{le="0.0002"} 10
fjord_log_flush_seconds_bucket{le="0.0004"} 10
fjord_log_flush_seconds_bucket{le="0.0008"} 10
fjord_log_flush_seconds_bucket{le="+Inf"} 10
fjord_log_flush_seconds_sum 0.001
fjord_log_flush_seconds_count 10
fjord_request_seconds_count{api="0"} 5
fjord_request_seconds_sum{api="0"} 0.01
fjord_request_seconds_count{api="1"} 7
`

// After: 100 more flushes, 50 in (0, 0.2 ms], 49 in (0.2, 0.4], one in
// (0.4, 0.8]; 20 more produce requests taking 0.1 s in all.
const flushAfter = `fjord_log_flush_seconds_bucket{le="0.0002"} 60
fjord_log_flush_seconds_bucket{le="0.0004"} 109
fjord_log_flush_seconds_bucket{le="0.0008"} 110
fjord_log_flush_seconds_bucket{le="+Inf"} 110
fjord_log_flush_seconds_sum 0.031
fjord_log_flush_seconds_count 110
fjord_request_seconds_count{api="0"} 25
fjord_request_seconds_sum{api="0"} 0.11
`

func TestFlushDelta(t *testing.T) {
	before, after := scrape(t, flushBefore), scrape(t, flushAfter)
	fw, err := flushDelta([]brokerHist{before, before}, []brokerHist{after, after})
	if err != nil {
		t.Fatal(err)
	}
	near := func(name string, got, want float64) {
		t.Helper()
		if math.Abs(got-want) > 1e-9 {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}
	if fw.Count != 200 || fw.Nodes != 2 || fw.ProduceRequests != 40 {
		t.Fatalf("count %d nodes %d requests %d, want 200, 2, 40", fw.Count, fw.Nodes, fw.ProduceRequests)
	}
	near("mean", fw.MeanMs, 0.3)                  // 0.06 s over 200 flushes
	near("p50", fw.P50Ms, 0.2)                    // rank 100 ends the first bucket
	near("p99", fw.P99Ms, 0.2+0.2*(198-100)/98.0) // within (0.2, 0.4]
	near("max", fw.MaxMs, 0.8)
	near("request mean", fw.ProduceRequestMeanMs, 5)
}

func TestFlushDeltaRefusesChangedBuckets(t *testing.T) {
	before := scrape(t, flushBefore)
	after := scrape(t, `fjord_log_flush_seconds_bucket{le="0.0002"} 60
fjord_log_flush_seconds_bucket{le="+Inf"} 110
`)
	if _, err := flushDelta([]brokerHist{before}, []brokerHist{after}); err == nil {
		t.Fatal("a delta across different buckets was accepted")
	}
	if _, err := parseFlushMetrics(bufio.NewScanner(strings.NewReader("go_goroutines 5\n"))); err == nil {
		t.Fatal("a scrape without the flush histogram was accepted")
	}
}

// A flush past the last finite bound must still encode as JSON (which
// has no +Inf): the max is that bound, marked as exceeded.
func TestFlushDeltaOverflow(t *testing.T) {
	before := scrape(t, flushBefore)
	after := scrape(t, `fjord_log_flush_seconds_bucket{le="0.0002"} 10
fjord_log_flush_seconds_bucket{le="0.0004"} 10
fjord_log_flush_seconds_bucket{le="0.0008"} 10
fjord_log_flush_seconds_bucket{le="+Inf"} 11
fjord_log_flush_seconds_sum 3.001
`)
	fw, err := flushDelta([]brokerHist{before}, []brokerHist{after})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := json.Marshal(fw); err != nil {
		t.Fatalf("encoding: %v", err)
	}
	if fw.MaxMs != 0.8 || !fw.MaxOverflow {
		t.Fatalf("max %v overflow %v, want 0.8 and true", fw.MaxMs, fw.MaxOverflow)
	}
}
