package main

import (
	"bufio"
	"context"
	"fmt"
	"math"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"
)

// The broker's own flush wait: what fjord's nodes spent making appends
// durable while a suite ran, read from their fjord_log_flush_seconds
// histograms (scraped from each node's metrics listener before and after
// the suite). This is the disk's fdatasync distribution under the suite's
// own load, which the fsync floor (fsyncfloor.go, the disk alone, just
// before) is not: the floor shows what the disk can do, this what it did
// while the broker served. A produce→ack p99 far above this flush p99 is
// time spent outside the disk; one near it is the disk's.
//
// Each observation is one flush call: an fdatasync of one log (or the
// wait for the one in progress that covers it), or a group commit of many
// logs observed once. The histogram's buckets double (50 µs to 1.6 s), so
// quantiles are interpolated within a bucket, as Prometheus's
// histogram_quantile does, and the max is the upper bound of the highest
// bucket that filled.

// FlushWait is the flush histogram and the produce request time of one
// suite, summed over the nodes scraped.
type FlushWait struct {
	Nodes  int     `json:"nodes"`
	Count  int64   `json:"count"`
	MeanMs float64 `json:"mean_ms"`
	P50Ms  float64 `json:"p50_ms"`
	P99Ms  float64 `json:"p99_ms"`
	P999Ms float64 `json:"p999_ms"`
	// MaxMs is the upper bound of the highest bucket any flush fell in;
	// with MaxOverflow, a flush took longer than MaxMs, the histogram's
	// last finite bound.
	MaxMs       float64 `json:"max_ms"`
	MaxOverflow bool    `json:"max_overflow,omitempty"`
	// Produce requests the nodes answered during the suite and their mean
	// time from decoding to response (fjord_request_seconds{api="0"}).
	ProduceRequests      int64   `json:"produce_requests"`
	ProduceRequestMeanMs float64 `json:"produce_request_mean_ms"`
}

// brokerHist is one scrape of one node.
type brokerHist struct {
	bounds     []float64 // bucket upper bounds, seconds, ascending; the last is +Inf
	cumulative []int64   // cumulative counts by bound
	sum        float64
	produceN   int64
	produceSum float64
}

// scrapeFlush reads the histograms of every node in addrs.
func scrapeFlush(ctx context.Context, addrs []string) ([]brokerHist, error) {
	out := make([]brokerHist, 0, len(addrs))
	for _, a := range addrs {
		h, err := scrapeOne(ctx, a)
		if err != nil {
			return nil, fmt.Errorf("metrics of %s: %w", a, err)
		}
		out = append(out, h)
	}
	return out, nil
}

func scrapeOne(ctx context.Context, addr string) (brokerHist, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/metrics", nil)
	if err != nil {
		return brokerHist{}, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return brokerHist{}, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return brokerHist{}, fmt.Errorf("GET /metrics: %s", resp.Status)
	}
	return parseFlushMetrics(bufio.NewScanner(resp.Body))
}

// parseFlushMetrics picks the flush histogram and the produce request
// time out of a Prometheus text exposition.
func parseFlushMetrics(sc *bufio.Scanner) (brokerHist, error) {
	var h brokerHist
	type bucket struct {
		le float64
		n  int64
	}
	var buckets []bucket
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		line := sc.Text()
		name, rest, ok := strings.Cut(line, " ")
		if !ok || strings.HasPrefix(line, "#") {
			continue
		}
		val, err := strconv.ParseFloat(strings.TrimSpace(rest), 64)
		if err != nil {
			continue
		}
		switch {
		case strings.HasPrefix(name, `fjord_log_flush_seconds_bucket{le="`):
			le := strings.TrimSuffix(strings.TrimPrefix(name, `fjord_log_flush_seconds_bucket{le="`), `"}`)
			b, err := strconv.ParseFloat(le, 64) // "+Inf" parses as +Inf
			if err != nil {
				return h, fmt.Errorf("flush bucket %q: %w", le, err)
			}
			buckets = append(buckets, bucket{b, int64(val)})
		case name == "fjord_log_flush_seconds_sum":
			h.sum = val
		case name == `fjord_request_seconds_count{api="0"}`:
			h.produceN = int64(val)
		case name == `fjord_request_seconds_sum{api="0"}`:
			h.produceSum = val
		}
	}
	if err := sc.Err(); err != nil {
		return h, err
	}
	if len(buckets) == 0 {
		return h, fmt.Errorf("no fjord_log_flush_seconds histogram")
	}
	sort.Slice(buckets, func(i, j int) bool { return buckets[i].le < buckets[j].le })
	for _, b := range buckets {
		h.bounds = append(h.bounds, b.le)
		h.cumulative = append(h.cumulative, b.n)
	}
	return h, nil
}

// flushDelta is what happened between two scrapes of the same nodes.
func flushDelta(before, after []brokerHist) (*FlushWait, error) {
	if len(before) != len(after) || len(after) == 0 {
		return nil, fmt.Errorf("scrapes of %d and %d nodes", len(before), len(after))
	}
	bounds := after[0].bounds
	counts := make([]int64, len(bounds)) // per bucket, not cumulative
	fw := &FlushWait{Nodes: len(after)}
	var sum, prodSum float64
	for i := range after {
		a, b := after[i], before[i]
		if len(a.bounds) != len(bounds) || len(b.bounds) != len(bounds) {
			return nil, fmt.Errorf("node %d: the flush histogram's buckets changed between scrapes", i)
		}
		var prevA, prevB int64
		for j := range bounds {
			counts[j] += (a.cumulative[j] - prevA) - (b.cumulative[j] - prevB)
			prevA, prevB = a.cumulative[j], b.cumulative[j]
		}
		sum += a.sum - b.sum
		fw.ProduceRequests += a.produceN - b.produceN
		prodSum += a.produceSum - b.produceSum
	}
	for _, c := range counts {
		fw.Count += c
	}
	if fw.Count > 0 {
		fw.MeanMs = sum / float64(fw.Count) * 1000
		fw.P50Ms = histQuantile(bounds, counts, fw.Count, 0.50) * 1000
		fw.P99Ms = histQuantile(bounds, counts, fw.Count, 0.99) * 1000
		fw.P999Ms = histQuantile(bounds, counts, fw.Count, 0.999) * 1000
		for j := len(counts) - 1; j >= 0; j-- {
			if counts[j] > 0 {
				fw.MaxMs = bounds[j] * 1000
				if math.IsInf(bounds[j], 1) {
					// Over the last finite bound: JSON has no +Inf, and
					// the bound is all the histogram knows.
					fw.MaxMs, fw.MaxOverflow = 0, true
					if j > 0 {
						fw.MaxMs = bounds[j-1] * 1000
					}
				}
				break
			}
		}
	}
	if fw.ProduceRequests > 0 {
		fw.ProduceRequestMeanMs = prodSum / float64(fw.ProduceRequests) * 1000
	}
	return fw, nil
}

// histQuantile interpolates the q quantile linearly within the bucket it
// falls in (the first bucket's lower bound is 0; one in +Inf answers the
// highest finite bound).
func histQuantile(bounds []float64, counts []int64, total int64, q float64) float64 {
	rank := q * float64(total)
	var seen float64
	lower := 0.0
	for j, c := range counts {
		if c > 0 && seen+float64(c) >= rank {
			if math.IsInf(bounds[j], 1) {
				return lower
			}
			return lower + (bounds[j]-lower)*(rank-seen)/float64(c)
		}
		seen += float64(c)
		if !math.IsInf(bounds[j], 1) {
			lower = bounds[j]
		}
	}
	return lower
}

// measureFlush runs fn between two scrapes of addrs; a scrape that fails
// is logged and leaves the figure out, never the suite.
func measureFlush(ctx context.Context, name string, addrs []string, fn func() error) (*FlushWait, error) {
	if len(addrs) == 0 {
		return nil, fn()
	}
	before, serr := scrapeFlush(ctx, addrs)
	err := fn()
	if serr != nil {
		logf("[%s] broker flush histogram: %v", name, serr)
		return nil, err
	}
	after, serr := scrapeFlush(ctx, addrs)
	if serr != nil {
		logf("[%s] broker flush histogram: %v", name, serr)
		return nil, err
	}
	fw, serr := flushDelta(before, after)
	if serr != nil {
		logf("[%s] broker flush histogram: %v", name, serr)
	}
	return fw, err
}
