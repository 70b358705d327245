package main

import (
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
)

// The tier mode's pure parts: byte sizes on the command line, the
// node's Prometheus text, and the table.

// parseSize reads a byte count: a plain integer, or one with a binary
// (KiB, MiB, GiB, TiB) or decimal (KB, MB, GB, TB) suffix, any case, an
// optional space between; "1.5GiB" is allowed and rounds down.
func parseSize(s string) (int64, error) {
	t := strings.TrimSpace(s)
	units := []struct {
		suffix string
		mul    float64
	}{
		{"kib", 1 << 10}, {"mib", 1 << 20}, {"gib", 1 << 30}, {"tib", 1 << 40},
		{"kb", 1e3}, {"mb", 1e6}, {"gb", 1e9}, {"tb", 1e12},
		{"k", 1 << 10}, {"m", 1 << 20}, {"g", 1 << 30}, {"t", 1 << 40},
		{"b", 1},
	}
	mul := 1.0
	lower := strings.ToLower(t)
	for _, u := range units {
		if strings.HasSuffix(lower, u.suffix) {
			mul = u.mul
			t = strings.TrimSpace(t[:len(t)-len(u.suffix)])
			break
		}
	}
	if t == "" {
		return 0, fmt.Errorf("size %q: no number", s)
	}
	if mul == 1 {
		n, err := strconv.ParseInt(t, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("size %q: %w", s, err)
		}
		return n, nil
	}
	f, err := strconv.ParseFloat(t, 64)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
		return 0, fmt.Errorf("size %q: not a number", s)
	}
	v := f * mul
	if v >= math.MaxInt64 || v <= math.MinInt64 {
		return 0, fmt.Errorf("size %q: out of range", s)
	}
	return int64(v), nil
}

// fmtSize prints a byte count in the largest binary unit that keeps it
// at or above 1: "16 MiB", "1.5 GiB", "512 B".
func fmtSize(n int64) string {
	units := []string{"B", "KiB", "MiB", "GiB", "TiB"}
	v := float64(n)
	i := 0
	for math.Abs(v) >= 1024 && i < len(units)-1 {
		v /= 1024
		i++
	}
	return trimFloat(math.Round(v*100)/100) + " " + units[i]
}

// promSum sums the samples of metric name in Prometheus text exposition
// whose labels include every pair of match; ok is false when none did.
// Series of other names, such as name_bucket or a longer name that
// starts with name, do not count.
func promSum(text, name string, match map[string]string) (sum float64, ok bool) {
	for line := range strings.SplitSeq(text, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || line[0] == '#' || !strings.HasPrefix(line, name) {
			continue
		}
		rest := line[len(name):]
		var labels map[string]string
		switch {
		case strings.HasPrefix(rest, "{"):
			var err error
			if labels, rest, err = parseLabels(rest); err != nil {
				continue
			}
		case strings.HasPrefix(rest, " "), strings.HasPrefix(rest, "\t"):
		default:
			continue // another metric whose name starts with name
		}
		fields := strings.Fields(rest)
		if len(fields) == 0 {
			continue
		}
		v, err := strconv.ParseFloat(fields[0], 64)
		if err != nil {
			continue
		}
		matched := true
		for k, want := range match {
			if labels[k] != want {
				matched = false
				break
			}
		}
		if matched {
			sum += v
			ok = true
		}
	}
	return sum, ok
}

// parseLabels parses `{a="x",b="y\"z"}` at the start of s and returns
// the labels and what follows the closing brace.
func parseLabels(s string) (map[string]string, string, error) {
	labels := map[string]string{}
	i := 1 // past '{'
	for {
		for i < len(s) && (s[i] == ' ' || s[i] == ',') {
			i++
		}
		if i >= len(s) {
			return nil, "", errors.New("labels: no closing brace")
		}
		if s[i] == '}' {
			return labels, s[i+1:], nil
		}
		eq := strings.IndexByte(s[i:], '=')
		if eq < 0 || i+eq+1 >= len(s) || s[i+eq+1] != '"' {
			return nil, "", errors.New("labels: want name=\"value\"")
		}
		key := strings.TrimSpace(s[i : i+eq])
		i += eq + 2
		var val strings.Builder
		for {
			if i >= len(s) {
				return nil, "", errors.New("labels: unterminated value")
			}
			c := s[i]
			if c == '"' {
				i++
				break
			}
			if c == '\\' && i+1 < len(s) {
				i++
				switch s[i] {
				case 'n':
					val.WriteByte('\n')
				default:
					val.WriteByte(s[i])
				}
				i++
				continue
			}
			val.WriteByte(c)
			i++
		}
		labels[key] = val.String()
	}
}

// printTier prints the tier mode's result as tables.
func printTier(w io.Writer, cfg *config, r *TierResult) {
	fmt.Fprintf(w, "command:  %s\n", r.Command)
	fmt.Fprintf(w, "settings: partitions=%d size=%d records=%d rate=%g duration=%s linger=%s steps=%s interval=%s (remote.log.manager.task.interval.ms and log.retention.check.interval.ms)\n",
		cfg.partitions, cfg.size, cfg.records, cfg.rate, cfg.duration, lingerString(cfg), strings.Join(tierStepList(cfg), ","), cfg.tierInterval)
	fmt.Fprintf(w, "target:   one fjord node, its remote store a weed mini (SeaweedFS) on loopback, started %s\n\n", r.Started.Format("2006-01-02T15:04:05Z"))

	f0 := func(v float64) string { return fmt.Sprintf("%.0f", v) }
	f1 := func(v float64) string { return fmt.Sprintf("%.1f", v) }
	f2 := func(v float64) string { return fmt.Sprintf("%.2f", v) }
	f3 := func(v float64) string { return fmt.Sprintf("%.3f", v) }
	ratio := func(v *float64) string {
		if v == nil {
			return "-"
		}
		return fmt.Sprintf("%.2f", *v)
	}

	if p := r.Produce; p != nil {
		thr := func(run *TierProduceRun, f func(*TierProduceRun) string) string {
			if run == nil || run.Produce == nil {
				return "-"
			}
			return f(run)
		}
		lat := func(run *TierProduceRun, f func(*Latency) float64) string {
			if run == nil || run.Latency == nil {
				return "-"
			}
			return f3(f(run.Latency))
		}
		rows := [][]string{
			{fmt.Sprintf("1. produce, tiering off vs on (segment.bytes %s; on: remote.storage.enable=true, local.retention.bytes %s)", fmtSize(p.SegmentBytes), fmtSize(p.LocalRetentionOn))},
			{"", "off", "on", "on/off"},
			{fmt.Sprintf("  produce %d x %d B: records/s", cfg.records, cfg.size), thr(p.Off, func(x *TierProduceRun) string { return f0(x.Produce.RecordsPerSec) }), thr(p.On, func(x *TierProduceRun) string { return f0(x.Produce.RecordsPerSec) }), ratio(p.RecordsPerSecOn)},
			{"  MB/s", thr(p.Off, func(x *TierProduceRun) string { return f1(x.Produce.MBPerSec) }), thr(p.On, func(x *TierProduceRun) string { return f1(x.Produce.MBPerSec) }), "-"},
			{"  broker CPU (s)", thr(p.Off, func(x *TierProduceRun) string { return f2(x.BrokerCPUSeconds) }), thr(p.On, func(x *TierProduceRun) string { return f2(x.BrokerCPUSeconds) }), "-"},
			{"  store (weed) CPU (s)", thr(p.Off, func(x *TierProduceRun) string { return f2(x.StoreCPUSeconds) }), thr(p.On, func(x *TierProduceRun) string { return f2(x.StoreCPUSeconds) }), "-"},
			{"  segments copied during it", thr(p.Off, func(x *TierProduceRun) string { return f0(x.CopiedDuringProduce) }), thr(p.On, func(x *TierProduceRun) string { return f0(x.CopiedDuringProduce) }), "-"},
			{"  then until every sealed segment is copied (s)", thr(p.Off, func(x *TierProduceRun) string { return f1(x.UploadDrainSeconds) }), thr(p.On, func(x *TierProduceRun) string { return f1(x.UploadDrainSeconds) }), "-"},
			{fmt.Sprintf("  ack at %g/s for %s, 1 KiB: p50 (ms)", cfg.rate, cfg.duration), lat(p.Off, func(l *Latency) float64 { return l.P50Ms }), lat(p.On, func(l *Latency) float64 { return l.P50Ms }), "-"},
			{"  p99 (ms)", lat(p.Off, func(l *Latency) float64 { return l.P99Ms }), lat(p.On, func(l *Latency) float64 { return l.P99Ms }), ratio(p.AckP99Ratio)},
			{"  p99.9 (ms)", lat(p.Off, func(l *Latency) float64 { return l.P999Ms }), lat(p.On, func(l *Latency) float64 { return l.P999Ms }), "-"},
			{"  segments copied during it", latCopied(p.Off), latCopied(p.On), "-"},
		}
		renderTable(w, rows)
		fmt.Fprintln(w)
	}
	if rd := r.Read; rd != nil {
		cache := "no read cache (the node's default)"
		if rd.CacheBytes > 0 {
			cache = "read cache " + fmtSize(rd.CacheBytes)
		}
		t := func(x *Throughput, f func(*Throughput) string) string {
			if x == nil {
				return "-"
			}
			return f(x)
		}
		rows := [][]string{
			{fmt.Sprintf("2. read %s (%d records) from offset 0, all of it only in the store; cold = first read by a freshly restarted broker process; %s", fmtSize(rd.Bytes), rd.Records, cache)},
			{"", "cold", "warm"},
			{"  records/s", t(rd.Cold, func(x *Throughput) string { return f0(x.RecordsPerSec) }), t(rd.Warm, func(x *Throughput) string { return f0(x.RecordsPerSec) })},
			{"  MB/s", t(rd.Cold, func(x *Throughput) string { return f1(x.MBPerSec) }), t(rd.Warm, func(x *Throughput) string { return f1(x.MBPerSec) })},
			{"  broker CPU (s)", t(rd.Cold, func(*Throughput) string { return f2(rd.ColdCPUSeconds) }), t(rd.Warm, func(*Throughput) string { return f2(rd.WarmCPUSeconds) })},
			{"  store (weed) CPU (s)", t(rd.Cold, func(*Throughput) string { return f2(rd.ColdStoreCPUSec) }), t(rd.Warm, func(*Throughput) string { return f2(rd.WarmStoreCPUSec) })},
		}
		renderTable(w, rows)
		fmt.Fprintf(w, "  (writing it: %s; local copies gone %.1f s after the filler's last ack; restart to serving %.1f s)\n\n",
			t(rd.Produce, func(x *Throughput) string {
				return fmt.Sprintf("%.0f records/s, %.1f MB/s", x.RecordsPerSec, x.MBPerSec)
			}), rd.RemoteWaitSec, rd.RestartSec)
	}
	if bd := r.Bound; bd != nil {
		within := "yes"
		if !bd.Within {
			within = "NO"
		}
		var per []string
		for _, v := range bd.MaxLocalBytes {
			per = append(per, fmtSize(v))
		}
		prod := "-"
		if bd.Produce != nil {
			prod = fmt.Sprintf("%.0f records/s, %.1f MB/s", bd.Produce.RecordsPerSec, bd.Produce.MBPerSec)
		}
		if bd.Paced != nil {
			prod = fmt.Sprintf("paced at %.0f records/s (%.1f MB/s): ack p50 %.3f, p99 %.3f ms", bd.Paced.AchievedRate, bd.Paced.AchievedRate*latencyRecordSize/1e6, bd.Paced.P50Ms, bd.Paced.P99Ms)
		}
		rows := [][]string{
			{fmt.Sprintf("3. produce %s to a tiered topic, local.retention.bytes %s, segment.bytes %s; du of each partition's directory every %s", fmtSize(bd.Bytes), fmtSize(bd.LocalRetentionBytes), fmtSize(bd.SegmentBytes), tierSampleEvery)},
			{"  produce", prod},
			{"  broker / store (weed) CPU (s)", fmt.Sprintf("%.2f / %.2f", bd.BrokerCPUSeconds, bd.StoreCPUSeconds)},
			{"  max local per partition", fmtSize(bd.MaxLocal)},
			{"  bound: local.retention.bytes + one segment", fmtSize(bd.BoundBytes)},
			{"  within the bound", within},
			{"  max local, each partition", strings.Join(per, ", ")},
			{"  local at the end, largest partition", fmtSize(slices.Max(append([]int64{0}, bd.LocalBytesEnd...)))},
			{"  remote bytes at the last ack", fmtSize(int64(bd.RemoteAtLastAck))},
			{"  remote bytes once copied (fjord_remote_log_size_bytes)", fmtSize(int64(bd.RemoteBytesEnd))},
			{"  from the last ack until every sealed segment is copied (s)", f1(bd.DrainSec)},
			{"  copy rate meanwhile (MB/s)", f1(bd.DrainMBps)},
			{"  weed's data dir at the end (every step's objects)", fmtSize(bd.StoreDiskBytes)},
			{"  samples", strconv.Itoa(bd.Samples)},
		}
		renderTable(w, rows)
	}
	if len(r.Errors) > 0 {
		fmt.Fprintln(w, "\nerrors:")
		for _, e := range r.Errors {
			fmt.Fprintf(w, "  %s\n", e)
		}
	}
	if r.Aborted != "" {
		fmt.Fprintf(w, "\n%s\n", r.Aborted)
	}
}

func latCopied(run *TierProduceRun) string {
	if run == nil || run.Latency == nil {
		return "-"
	}
	return fmt.Sprintf("%.0f", run.CopiedDuringLatency)
}
