package main

import (
	"math"
	"slices"
	"time"
)

// TargetResult is everything measured on one target (one column of the
// table, one element of the JSON "targets" array).
type TargetResult struct {
	Target  string   `json:"target"`
	Brokers []string `json:"brokers"`
	// Error is set when the target could not be benched at all (e.g. the
	// fjord binary did not start).
	Error string `json:"error,omitempty"`
	// SuiteErrors maps a suite name to why it failed.
	SuiteErrors map[string]string `json:"suite_errors,omitempty"`

	Produce *Throughput `json:"produce,omitempty"`
	Latency *Latency    `json:"latency,omitempty"`
	E2E     *Latency    `json:"e2e,omitempty"`
	Consume *Throughput `json:"consume,omitempty"`
	Memory  *Memory     `json:"memory,omitempty"`
	// ProduceCPU is the broker process's CPU time during the produce
	// suite, for a broker the tool started (fjord, kfake as a child).
	ProduceCPU *CPU `json:"produce_cpu,omitempty"`
	// FsyncFloor is the disk's own fdatasync latency in the broker's data
	// directory at the latency suite's rate, taken just before it.
	FsyncFloor *FsyncFloor `json:"fsync_floor,omitempty"`
	// FsyncFloorWritten is the same on a file whose blocks were written
	// beforehand: data and a device flush, no journal commit.
	FsyncFloorWritten *FsyncFloor `json:"fsync_floor_written,omitempty"`
	// FsyncFloorGroup is the disk under a broker's pattern at that rate
	// (fsyncFloorGroup): appends to one file per partition, each file
	// group-committed, append → covering fdatasync.
	FsyncFloorGroup *FsyncFloor `json:"fsync_floor_group,omitempty"`
	// ProduceFlush and LatencyFlush are the fjord nodes' own flush waits
	// during the produce and latency suites (brokerflush.go), for nodes
	// the tool started.
	ProduceFlush *FlushWait `json:"produce_flush,omitempty"`
	LatencyFlush *FlushWait `json:"latency_flush,omitempty"`
}

// CPU is a broker process's user+system CPU time (from /proc/PID/stat)
// over a suite, per 10^9 value bytes the suite produced.
type CPU struct {
	Seconds  float64 `json:"seconds"`
	Bytes    int64   `json:"bytes"`
	SecPerGB float64 `json:"seconds_per_gb"`
}

func newCPU(sec float64, bytes int64) *CPU {
	c := &CPU{Seconds: sec, Bytes: bytes}
	if bytes > 0 {
		c.SecPerGB = sec / (float64(bytes) / 1e9)
	}
	return c
}

// Throughput is the outcome of the produce and consume suites. Bytes count
// record values only; 1 MB is 10^6 bytes.
type Throughput struct {
	Records       int64   `json:"records"`
	Bytes         int64   `json:"bytes"`
	Seconds       float64 `json:"seconds"`
	RecordsPerSec float64 `json:"records_per_sec"`
	MBPerSec      float64 `json:"mb_per_sec"`
}

func newThroughput(records, bytes int64, d time.Duration) *Throughput {
	s := d.Seconds()
	return &Throughput{
		Records:       records,
		Bytes:         bytes,
		Seconds:       s,
		RecordsPerSec: float64(records) / s,
		MBPerSec:      float64(bytes) / 1e6 / s,
	}
}

// Latency is the outcome of the latency and e2e suites, in milliseconds.
type Latency struct {
	TargetRate   float64 `json:"target_rate"`   // records/s asked for (-rate)
	AchievedRate float64 `json:"achieved_rate"` // records/s actually sent
	Sent         int64   `json:"sent"`
	Measured     int64   `json:"measured"` // samples behind the percentiles
	Errors       int64   `json:"errors"`   // records whose produce failed
	P50Ms        float64 `json:"p50_ms"`
	P99Ms        float64 `json:"p99_ms"`
	P999Ms       float64 `json:"p999_ms"`
	MaxMs        float64 `json:"max_ms"`
}

func newLatency(rate float64, sent int64, window time.Duration, lats []time.Duration, errs int64) *Latency {
	slices.Sort(lats)
	return &Latency{
		TargetRate:   rate,
		AchievedRate: float64(sent) / window.Seconds(),
		Sent:         sent,
		Measured:     int64(len(lats)),
		Errors:       errs,
		P50Ms:        ms(percentile(lats, 0.50)),
		P99Ms:        ms(percentile(lats, 0.99)),
		P999Ms:       ms(percentile(lats, 0.999)),
		MaxMs:        ms(percentile(lats, 1)),
	}
}

// percentile returns the nearest-rank q-quantile of sorted (0 if empty):
// the smallest sample with at least q of all samples at or below it.
func percentile(sorted []time.Duration, q float64) time.Duration {
	n := len(sorted)
	if n == 0 {
		return 0
	}
	// ceil(q*n) - 1; the epsilon keeps 0.99*100 = 99.00000000000001 at 99.
	i := int(math.Ceil(q*float64(n)-1e-9)) - 1
	return sorted[max(0, min(i, n-1))]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// Memory is the resident memory of a fjord process the tool started, read
// from VmRSS in /proc/PID/status.
type Memory struct {
	IdleMiB float64 `json:"idle_mib"` // once started and idle, before any suite
	PeakMiB float64 `json:"peak_mib"` // highest sample while the suites ran
	Samples int     `json:"samples"`  // samples behind PeakMiB
}
