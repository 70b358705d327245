package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"
	"time"
)

// report is the whole run: how it was invoked and each target's results.
type report struct {
	Command  string          `json:"command"`  // reproducible command line
	Settings map[string]any  `json:"settings"` // effective values, defaults included
	Started  time.Time       `json:"started"`
	Go       string          `json:"go"`
	Platform string          `json:"platform"`
	CPUs     int             `json:"cpus"`
	Targets  []*TargetResult `json:"targets"`
	Aborted  string          `json:"aborted,omitempty"`

	cfg *config
}

func newReport(cfg *config) *report {
	var suites []string
	for _, s := range allSuites {
		if cfg.suites[s] {
			suites = append(suites, s)
		}
	}
	return &report{
		Command: commandLine(os.Args[1:]),
		Settings: map[string]any{
			"suites": strings.Join(suites, ","), "partitions": cfg.partitions, "rf": cfg.rf,
			"records": cfg.records, "size": cfg.size, "rate": cfg.rate,
			"duration": cfg.duration.String(), "compression": cfg.compression,
			"timeout": cfg.timeout.String(), "latency_record_size": latencyRecordSize,
			"linger": lingerString(cfg),
		},
		Started:  time.Now().UTC().Truncate(time.Second),
		Go:       runtime.Version(),
		Platform: runtime.GOOS + "/" + runtime.GOARCH,
		CPUs:     runtime.NumCPU(),
		cfg:      cfg,
	}
}

// lingerString is -linger as the run used it.
func lingerString(c *config) string {
	if c.lingerDefault {
		return "default"
	}
	return c.linger.String()
}

func (r *report) add(t *TargetResult) { r.Targets = append(r.Targets, t) }

// failed reports whether anything went wrong, for the exit status.
func (r *report) failed() bool {
	for _, t := range r.Targets {
		if t.Error != "" || len(t.SuiteErrors) > 0 {
			return true
		}
	}
	return r.Aborted != ""
}

// commandLine renders the invocation so it can be pasted back into a shell.
func commandLine(args []string) string {
	parts := []string{"fjord-bench"}
	for _, a := range args {
		if a == "" || strings.ContainsFunc(a, func(c rune) bool {
			return !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.ContainsRune("-_./:=,@%+", c))
		}) {
			a = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
		}
		parts = append(parts, a)
	}
	return strings.Join(parts, " ")
}

func (r *report) printHeader(w io.Writer) {
	fmt.Fprintf(w, "command:  %s\n", r.Command)
	fmt.Fprintf(w, "          (from cmd/fjord-bench, `go run .` takes the same flags)\n")
	c := r.cfg
	fmt.Fprintf(w, "settings: suites=%s partitions=%d rf=%d records=%d size=%d rate=%g duration=%s linger=%s compression=%s timeout=%s\n",
		r.Settings["suites"], c.partitions, c.rf, c.records, c.size, c.rate, c.duration, lingerString(c), c.compression, c.timeout)
	fmt.Fprintf(w, "host:     %s %s, %d CPUs, started %s\n\n", r.Go, r.Platform, r.CPUs, r.Started.Format(time.RFC3339))
}

func (r *report) printJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// printTable prints one column per target, so targets read side by side.
func (r *report) printTable(w io.Writer) {
	var rows [][]string // label, then one cell per target; nil cells: section title
	row := func(label string, cell func(t *TargetResult) string) {
		cells := []string{label}
		for _, t := range r.Targets {
			cells = append(cells, cell(t))
		}
		rows = append(rows, cells)
	}
	section := func(title string) { rows = append(rows, []string{title}) }
	row("target", func(t *TargetResult) string { return t.Target })
	c := r.cfg
	if c.suites[suiteProduce] {
		section(fmt.Sprintf("produce: %d x %d B, acks=all", c.records, c.size))
		thrRows(row, suiteProduce, func(t *TargetResult) *Throughput { return t.Produce })
		row("  broker CPU (s/GB)", func(t *TargetResult) string {
			if t.ProduceCPU == nil {
				return "-"
			}
			return fmt.Sprintf("%.2f", t.ProduceCPU.SecPerGB)
		})
		if anyTarget(r.Targets, func(t *TargetResult) bool { return t.ProduceFlush != nil }) {
			section("fjord's own flush wait during the produce suite (fjord_log_flush_seconds, all nodes)")
			flushRows(row, func(t *TargetResult) *FlushWait { return t.ProduceFlush })
		}
	}
	if c.suites[suiteLatency] {
		section(fmt.Sprintf("latency: produce->ack, %g rec/s for %s, 1 KiB", c.rate, c.duration))
		latRows(row, suiteLatency, func(t *TargetResult) *Latency { return t.Latency })
		if c.fjordBin != "" {
			for _, fl := range []struct {
				how string
				get func(t *TargetResult) *FsyncFloor
			}{
				{"fallocated, as fjord's segments", func(t *TargetResult) *FsyncFloor { return t.FsyncFloor }},
				{"written with zeros beforehand", func(t *TargetResult) *FsyncFloor { return t.FsyncFloorWritten }},
			} {
				section(fmt.Sprintf("disk floor: %d B append + fdatasync, a file in the data dir %s, %g/s, before the latency suite", floorWriteSize, fl.how, c.rate))
				row("  fdatasync p50 (ms)", floorCell(fl.get, func(f *FsyncFloor) string { return fmt.Sprintf("%.3f", f.P50Ms) }))
				row("  fdatasync p99 (ms)", floorCell(fl.get, func(f *FsyncFloor) string { return fmt.Sprintf("%.3f", f.P99Ms) }))
				row("  achieved rate (/s)", floorCell(fl.get, func(f *FsyncFloor) string { return fmt.Sprintf("%.0f", f.AchievedRate) }))
			}
			group := func(t *TargetResult) *FsyncFloor { return t.FsyncFloorGroup }
			section(fmt.Sprintf("disk under a broker's pattern: %d B appends at %g/s over %d fallocated files, each group-committed, append -> covering fdatasync", groupFloorWriteSize, c.rate, c.partitions))
			row("  p50 (ms)", floorCell(group, func(f *FsyncFloor) string { return fmt.Sprintf("%.3f", f.P50Ms) }))
			row("  p99 (ms)", floorCell(group, func(f *FsyncFloor) string { return fmt.Sprintf("%.3f", f.P99Ms) }))
			row("  max (ms)", floorCell(group, func(f *FsyncFloor) string { return fmt.Sprintf("%.3f", f.MaxMs) }))
		}
		if anyTarget(r.Targets, func(t *TargetResult) bool { return t.LatencyFlush != nil }) {
			section("fjord's own flush wait during the latency suite (fjord_log_flush_seconds, all nodes)")
			flushRows(row, func(t *TargetResult) *FlushWait { return t.LatencyFlush })
		}
	}
	if c.suites[suiteE2E] {
		section(fmt.Sprintf("e2e: produce->consume, %g rec/s for %s, 1 KiB", c.rate, c.duration))
		latRows(row, suiteE2E, func(t *TargetResult) *Latency { return t.E2E })
	}
	if c.suites[suiteConsume] {
		section(fmt.Sprintf("consume: read back %d records", c.records))
		thrRows(row, suiteConsume, func(t *TargetResult) *Throughput { return t.Consume })
	}
	if c.fjordBin != "" || c.kfake {
		section("memory: broker process the tool started, VmRSS")
		mem := func(f func(m *Memory) float64) func(t *TargetResult) string {
			return func(t *TargetResult) string {
				if t.Memory == nil {
					return "-"
				}
				return fmt.Sprintf("%.1f", f(t.Memory))
			}
		}
		row("  idle after start-up (MiB)", mem(func(m *Memory) float64 { return m.IdleMiB }))
		row("  peak while serving (MiB)", mem(func(m *Memory) float64 { return m.PeakMiB }))
	}
	renderTable(w, rows)

	// Errors after the table, where they can be read whole.
	first := true
	for _, t := range r.Targets {
		msgs := []string{}
		if t.Error != "" {
			msgs = append(msgs, t.Error)
		}
		for _, s := range allSuites {
			if e, ok := t.SuiteErrors[s]; ok {
				msgs = append(msgs, s+": "+e)
			}
		}
		for _, m := range msgs {
			if first {
				fmt.Fprintln(w, "\nerrors:")
				first = false
			}
			fmt.Fprintf(w, "  [%s] %s\n", t.Target, m)
		}
	}
	if r.Aborted != "" {
		fmt.Fprintf(w, "\n%s\n", r.Aborted)
	}
}

// renderTable prints rows with labels left-aligned and cells right-aligned;
// a row with a label only is a section title spanning the table.
func renderTable(w io.Writer, rows [][]string) {
	var widths []int
	for _, cells := range rows {
		if len(cells) == 1 {
			continue
		}
		for i, c := range cells {
			if i == len(widths) {
				widths = append(widths, 0)
			}
			widths[i] = max(widths[i], len(c))
		}
	}
	for _, cells := range rows {
		if len(cells) == 1 {
			fmt.Fprintln(w, cells[0])
			continue
		}
		line := fmt.Sprintf("%-*s", widths[0], cells[0])
		for i, c := range cells[1:] {
			line += fmt.Sprintf("  %*s", widths[i+1], c)
		}
		fmt.Fprintln(w, line)
	}
}

type rowFunc func(label string, cell func(t *TargetResult) string)

// cellOr formats a suite's figure, or says why there is none.
func cellOr(t *TargetResult, suite string, have bool, format func() string) string {
	switch {
	case have:
		return format()
	case t.Error != "" || t.SuiteErrors[suite] != "":
		return "error"
	}
	return "-"
}

func thrRows(row rowFunc, suite string, get func(*TargetResult) *Throughput) {
	f := func(label string, v func(*Throughput) string) {
		row(label, func(t *TargetResult) string {
			x := get(t)
			return cellOr(t, suite, x != nil, func() string { return v(x) })
		})
	}
	f("  records/s", func(x *Throughput) string { return fmt.Sprintf("%.0f", x.RecordsPerSec) })
	f("  MB/s", func(x *Throughput) string { return fmt.Sprintf("%.1f", x.MBPerSec) })
}

func latRows(row rowFunc, suite string, get func(*TargetResult) *Latency) {
	f := func(label string, v func(*Latency) string) {
		row(label, func(t *TargetResult) string {
			x := get(t)
			return cellOr(t, suite, x != nil, func() string { return v(x) })
		})
	}
	msv := func(g func(*Latency) float64) func(*Latency) string {
		return func(x *Latency) string { return fmt.Sprintf("%.3f", g(x)) }
	}
	f("  achieved rate (rec/s)", func(x *Latency) string { return fmt.Sprintf("%.0f", x.AchievedRate) })
	f("  p50 (ms)", msv(func(x *Latency) float64 { return x.P50Ms }))
	f("  p99 (ms)", msv(func(x *Latency) float64 { return x.P99Ms }))
	f("  p99.9 (ms)", msv(func(x *Latency) float64 { return x.P999Ms }))
	f("  max (ms)", msv(func(x *Latency) float64 { return x.MaxMs }))
	f("  samples / errors", func(x *Latency) string { return fmt.Sprintf("%d / %d", x.Measured, x.Errors) })
}

func anyTarget(ts []*TargetResult, pred func(t *TargetResult) bool) bool {
	for _, t := range ts {
		if pred(t) {
			return true
		}
	}
	return false
}

// flushRows prints a FlushWait: the histogram's quantiles, and the mean
// produce request next to the mean flush, so the share of a request spent
// on the disk reads off directly.
func flushRows(row func(string, func(t *TargetResult) string), get func(t *TargetResult) *FlushWait) {
	cell := func(f func(fw *FlushWait) string) func(t *TargetResult) string {
		return func(t *TargetResult) string {
			if fw := get(t); fw != nil {
				return f(fw)
			}
			return "-"
		}
	}
	ms := func(v float64) string { return fmt.Sprintf("%.3f", v) }
	row("  flushes", cell(func(fw *FlushWait) string { return fmt.Sprintf("%d", fw.Count) }))
	row("  mean (ms)", cell(func(fw *FlushWait) string { return ms(fw.MeanMs) }))
	row("  p50 (ms)", cell(func(fw *FlushWait) string { return ms(fw.P50Ms) }))
	row("  p99 (ms)", cell(func(fw *FlushWait) string { return ms(fw.P99Ms) }))
	row("  p99.9 (ms)", cell(func(fw *FlushWait) string { return ms(fw.P999Ms) }))
	row("  max, bucket bound (ms)", cell(func(fw *FlushWait) string {
		if fw.MaxOverflow {
			return "> " + ms(fw.MaxMs)
		}
		return ms(fw.MaxMs)
	}))
	row("  produce requests", cell(func(fw *FlushWait) string { return fmt.Sprintf("%d", fw.ProduceRequests) }))
	row("  produce request mean (ms)", cell(func(fw *FlushWait) string { return ms(fw.ProduceRequestMeanMs) }))
}

// floorCell prints v of the floor get finds in a target, "-" for none.
func floorCell(get func(t *TargetResult) *FsyncFloor, v func(f *FsyncFloor) string) func(t *TargetResult) string {
	return func(t *TargetResult) string {
		if f := get(t); f != nil {
			return v(f)
		}
		return "-"
	}
}
