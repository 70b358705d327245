package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"
)

// The -all mode measures, in one run, every figure the performance issue
// sets a target for, fjord next to kfake where kfake has the figure, and
// prints them as one table of ratios and targets. kfake always runs as a
// child process (-serve-kfake), so both brokers are measured the same way:
// own process, own Go runtime, its CPU time read from /proc.

// allSteps are the steps of a round, in the order they run.
var allSteps = []string{"startup", "single", "rf3", "partitions1000", "failover", "manyparts"}

// lingers are the two producer settings the single-node figures are taken
// at: linger 0 (this tool's default, every record sent at once) and the
// client's default linger (10 ms in franz-go v1.21.7), the method.
var lingers = []struct {
	id, label string
	dflt      bool
}{{"l0", "linger 0", false}, {"ld", "linger default", true}}

// figureSet holds the figures of a run in table order, by ID.
type figureSet struct {
	list    []*Figure
	byID    map[string]*Figure
	section string // the group the next figure defined belongs to
	round   int    // the 1-based round the samples now being put are taken in; 0: none
}

func (s *figureSet) def(section, id, name, unit, versus string, t *Target, note string) {
	if section != "" {
		s.section = section
	}
	f := &Figure{ID: id, Section: s.section, Name: name, Unit: unit, Versus: versus, Target: t, Note: note}
	s.list = append(s.list, f)
	s.byID[id] = f
}

func (s *figureSet) fjord(id string, v float64) {
	f := s.byID[id]
	f.FjordSamples = append(f.FjordSamples, v)
	if s.round > 0 {
		f.FjordRounds = append(f.FjordRounds, s.round)
	}
}

func (s *figureSet) kfake(id string, v float64) {
	f := s.byID[id]
	f.KfakeSamples = append(f.KfakeSamples, v)
	if s.round > 0 {
		f.KfakeRounds = append(f.KfakeRounds, s.round)
	}
}

// put records v for the target ("fjord" or "kfake") of one figure.
func (s *figureSet) put(target, id string, v float64) {
	if target == "kfake" {
		s.kfake(id, v)
	} else {
		s.fjord(id, v)
	}
}

func newFigureSet(cfg *config) *figureSet {
	s := &figureSet{byID: map[string]*Figure{}}
	p := cfg.partitions
	rate := trimFloat(cfg.rate)
	s.def(fmt.Sprintf("start-up: exec of the broker → first acks=all produce acked (franz-go defaults; CreateTopics of %d partitions first on a fresh dir)", p),
		"startup_listen_ms", "fresh data dir: exec → port accepts", "ms", "", nil, "")
	s.def("", "startup_fresh_ms", "fresh data dir: exec → CreateTopics → first ack", "ms", "", atMost(100), "")
	s.def("", "startup_1000_ms", fmt.Sprintf("restart after a clean stop, %d partitions of %d KiB each: exec → first ack", startupPartitions, startupRecords*latencyRecordSize/1024), "ms", "", nil,
		"kfake keeps no data, so it has no restart figure")
	sec := fmt.Sprintf("one node, %d partitions, %d B values, acks=all, idempotent; paced suites %s rec/s of 1 KiB for %s", p, cfg.size, rate, cfg.duration)
	first := true
	for _, l := range lingers {
		t := sec
		if !first {
			t = ""
		}
		first = false
		s.def(t, "produce_rps_"+l.id, "produce "+l.label, "records/s", "", ratioAtLeast(1), "")
		s.def("", "consume_rps_"+l.id, "consume of the "+l.label+" records", "records/s", "", ratioAtLeast(1), "")
	}
	s.def("", "disk_seq_mb_s", "disk alone: sequential 1 MiB writes, each fdatasynced (fjord's data dir)", "MB/s", "", nil,
		fmt.Sprintf("dd bs=1M oflag=dsync, in Go: %d MiB appended to a new file in fjord's data dir, each MiB fdatasynced before the next, once a round before fjord's suites", diskSeqTotal>>20))
	s.def("", "produce_mb_s_l0", "produce linger 0, MB/s of values; ratio: share of the disk's", "MB/s", "disk_seq_mb_s", nil,
		"the issue's produce target is 1× kfake or 0.9 of the disk's sequential bandwidth with a sync per write, whichever is lower: when kfake's MB/s is below 0.9 of the disk's, the kfake ratio is the target that binds; values only (records/s × value size), without keys, headers and batch framing")
	for _, l := range lingers {
		note := ""
		if l.dflt {
			note = "the client holds each batch up to its linger before sending, so with the default linger this absolute target is out of reach for any broker (compare kfake's figure)"
		}
		s.def("", "ack_p50_"+l.id, "produce→ack p50 at "+rate+"/s "+l.label, "ms", "", nil, "")
		s.def("", "ack_p99_"+l.id, "produce→ack p99 at "+rate+"/s "+l.label, "ms", "", atMost(1.5), note)
	}
	s.def("", "ack_p99_nosync_l0", "control: acked before fsync, produce→ack p99 at "+rate+"/s linger 0", "ms", "", nil,
		"the same suite on the same node, on a topic with flush.messages=10^8: acknowledged once appended, fsynced in the background; what the node, the client and this machine's cores take without the disk (compare kfake's ack p99, which holds everything in memory)")
	floorNote := fmt.Sprintf("the floor of fjord's layout: %d B append + fdatasync to a file in fjord's data dir preallocated with fallocate, as fjord's segments are, %s/s for %s, just before each of fjord's latency suites", floorWriteSize, rate, min(cfg.duration, floorMaxDuration))
	s.def("", "fsync_floor_p50", "disk fdatasync p50 at "+rate+"/s (fjord's data dir)", "ms", "", nil, "")
	s.def("", "fsync_floor_p99", "disk fdatasync p99 at "+rate+"/s (fjord's data dir)", "ms", "", nil, floorNote)
	s.def("", "fsync_floor_written_p50", "disk fdatasync p50 at "+rate+"/s, a file written beforehand", "ms", "", nil, "")
	s.def("", "fsync_floor_written_p99", "disk fdatasync p99 at "+rate+"/s, a file written beforehand", "ms", "", nil,
		"the same appends to a file whose blocks were written with zeros first: each fdatasync is the data and a device cache flush, the device's own floor, below which no ack p99 of a broker that fdatasyncs before acking one record at a time can go; in fallocated space the first write-back into each block converts its extent, metadata the fdatasync writes too (through the journal, where the file system has one)")
	s.def("", "fsync_floor_group_p50", fmt.Sprintf("disk under a broker's pattern p50: %s/s appends to %d fallocated files, each group-committed", rate, p), "ms", "", nil, "")
	s.def("", "fsync_floor_group_p99", fmt.Sprintf("disk under a broker's pattern p99: %s/s appends to %d fallocated files, each group-committed", rate, p), "ms", "", nil,
		fmt.Sprintf("no broker, the disk only: %d B appends (one 1 KiB record in its batch) paced at %s/s round robin over %d files fallocated in fjord's data dir, written while earlier appends are being synced; each file's flusher fdatasyncs whatever is waiting, as fjord's per-log group commit does; from just before the append's write to the end of the fdatasync that covered it. The floor of an ack p99 for a broker that fdatasyncs before it acks, at this rate on this disk", groupFloorWriteSize, rate, p))
	flushNote := "fjord_log_flush_seconds of the node over the latency suite: each fdatasync (or wait for the one in progress) the broker made while serving it, the disk's fdatasync under the suite's own load; interpolated in doubling buckets, max is a bucket's upper bound"
	s.def("", "flush_p50_l0", "fjord's own flush wait p50 during the latency suite, linger 0", "ms", "", nil, "")
	s.def("", "flush_p99_l0", "fjord's own flush wait p99 during the latency suite, linger 0", "ms", "", nil, "")
	s.def("", "flush_max_l0", "fjord's own flush wait max during the latency suite, linger 0", "ms", "", nil, flushNote)
	for _, l := range lingers {
		note := ""
		if l.dflt {
			note = "the client holds each batch up to its linger before sending, so with the default linger this absolute target is out of reach for any broker (compare kfake's figure)"
		}
		s.def("", "e2e_p99_"+l.id, "end-to-end p99 at "+rate+"/s "+l.label, "ms", "", below(2), note)
	}
	for i, l := range lingers {
		t := ""
		if i == 0 {
			t = "broker CPU: utime+stime of the broker process over the produce suite"
		}
		s.def(t, "cpu_s_per_gb_"+l.id, "broker CPU per GB produced, "+l.label, "s/GB", "", nil, "")
	}
	s.def("three fjord processes, RF 3, min.insync.replicas 2, acks=all", "rf3_produce_rps", "produce linger 0, kfake column one node", "records/s", "", ratioAtLeast(0.5), "")
	s.def("", "rf3_ack_p99_l0", "produce→ack p99 at "+rate+"/s linger 0", "ms", "", below(5), "")
	s.def("", "rf3_ack_p99_ld", "produce→ack p99 at "+rate+"/s linger default", "ms", "", below(5), "")
	s.def("", "rf3_ack_p99_nosync_l0", "control: acked before fsync, produce→ack p99 at "+rate+"/s linger 0", "ms", "", nil,
		"a topic with flush.messages=10^8 on the same three nodes: acknowledged once every in-sync replica holds the record in memory (Kafka's default), no disk wait; what three processes and the client take on this machine's cores")
	s.def("", "rf3_floor_group_p50", fmt.Sprintf("disk under RF 3's pattern p50: %s/s records, each appended to 3 copies of %d fallocated files", rate, p), "ms", "", nil, "")
	s.def("", "rf3_floor_group_p99", fmt.Sprintf("disk under RF 3's pattern p99: %s/s records, each appended to 3 copies of %d fallocated files", rate, p), "ms", "", nil,
		"no broker, the disk only: the one-node group floor with every record appended to three files (its leader's and two followers' logs, on the disk the three nodes share), each file group-committed; a record's time ends at the last of its three covering fdatasyncs, as an acks=all record waits for every in-sync replica's. Measured once a round in the first node's data dir, before the suites")
	s.def("", "rf3_flush_p50_l0", "the three nodes' own flush wait p50 during the latency suite, linger 0", "ms", "", nil, "")
	s.def("", "rf3_flush_p99_l0", "the three nodes' own flush wait p99 during the latency suite, linger 0", "ms", "", nil, "")
	s.def("", "rf3_flush_max_l0", "the three nodes' own flush wait max during the latency suite, linger 0", "ms", "", nil,
		"leaders' and followers' flushes together: an acks=all record waits for the fsyncs of its leader and of every follower in the ISR, on the one disk the three nodes share")
	s.def("one node, 1,000 partitions", "p1000_produce_rps", fmt.Sprintf("produce linger 0, ratio to %d partitions", p), "records/s", "produce_rps_l0", ratioAtLeast(0.5), "")
	s.def("", "p1000_produce_rps_ld", fmt.Sprintf("produce linger default, ratio to %d partitions", p), "records/s", "produce_rps_ld", ratioAtLeast(0.5), "")
	s.def("", "p1000_warm_rps", fmt.Sprintf("produce linger 0, each partition written once first, ratio to %d partitions", p), "records/s", "produce_rps_l0", ratioAtLeast(0.5),
		"the same suite on a topic whose 1,000 partitions each took one acknowledged record before the clock started: the steady produce, without the broker opening the topic's partitions (directories, checkpoints and their fsyncs) as the first batches arrive, which the row above includes")
	s.def("", "p1000_nosync_rps", fmt.Sprintf("control: acked before fsync, produce linger 0, ratio to %d partitions", p), "records/s", "produce_rps_l0", nil,
		"a topic with flush.messages=10^8: no group flush before the ack; the ratio fjord reaches at 1,000 partitions without the disk's part")
	s.def("", "p1000_request_ms", "produce request, decoded → answered, mean, linger 0", "ms", "", nil, "fjord_request_seconds{api=\"0\"} over the produce suite")
	s.def("", "p1000_flush_ms", "group flush (one syncfs) of a produce request, mean, linger 0", "ms", "", nil,
		"fjord_log_flush_seconds over the produce suite: the disk's time to make one request's appends to 1,000 files durable")
	s.def("", "p1000_warm_request_ms", "produce request, decoded → answered, mean, linger 0, partitions written first", "ms", "", nil, "")
	s.def("", "p1000_warm_flush_ms", "group flush of a produce request, mean, linger 0, partitions written first", "ms", "", nil, "")
	s.def("", "p1000_floor_syncfs_ms", fmt.Sprintf("disk alone: one syncfs after %d one-record batches appended to each of 1,000 fallocated files, p50", syncfsFloorBatches), "ms", "", nil, "")
	s.def("", "p1000_floor_rps", fmt.Sprintf("what that disk time allows: %d records a syncfs, ratio to %d partitions", syncfsFloorBatches*1000, p), "records/s", "produce_rps_l0", nil,
		fmt.Sprintf("the records one request carries at 1,000 partitions (about %d a partition in fjord's runs) over the disk's time to make them durable with one syncfs, in fjord's data dir before its produce runs (%d rounds): what a broker that makes each request durable before acking it, one request at a time, gets at that request shape with nothing else taking time; compare p1000_flush_ms, fjord's own syncfs", syncfsFloorBatches, syncfsFloorRounds))
	s.def("", "p1000_floor_window_rps", fmt.Sprintf("disk alone, closed loop of %d records over 1,000 files, ratio to %d partitions", windowFloorRecords, p), "records/s", "produce_rps_l0", nil,
		fmt.Sprintf("a writer keeps franz-go's default %d buffered records outstanding (MaxBufferedRecords: its Produce blocks past that), appending each free slot's record round robin over 1,000 fallocated files in fjord's data dir, one write a file a round; a syncer calls syncfs whenever something was written since its last one began, and each return acknowledges every record written before it began (%v measured after %v): no broker, no network, no client CPU; what any broker that fsyncs before it acks can reach at 1,000 partitions with that client on this disk", windowFloorRecords, windowFloorDur, windowFloorWarmup))
	s.def("", "p1000_floor_window_sync_ms", "disk alone, closed loop: one syncfs, mean", "ms", "", nil, "")
	s.def("", "p1000_floor_window_per_sync", "disk alone, closed loop: records one syncfs acknowledges, mean", "records", "", nil, "")
	s.def("", "p1000_vs_kfake", "produce linger 0, against kfake at 1,000 partitions", "records/s", "", nil,
		"kfake's column is kfake at 1,000 partitions: how much of the drop from 6 partitions is the client's")
	s.def("failover: three fjord processes, default broker settings", "leader_failover_s", "partition leader, SIGKILL → acks=all write acked, median", "s", "", atMost(2), "")
	s.def("", "controller_failover_s", "controller, SIGKILL → CreateTopics ok, median", "s", "", nil, "")
	n := cfg.manyPartitions
	s.def(fmt.Sprintf("one node, %d partitions (one record each)", n), "many_rss_mib", "resident memory with the topic", "MiB", "", below(1024), "")
	s.def("", "many_rss_restart_mib", "resident memory after the clean restart", "MiB", "", below(1024), "")
	s.def("", "many_mib_per_partition", "resident memory per partition, (with − before) / N", "MiB", "", nil, "")
	s.def("", "many_clean_restart_s", "start-up after a clean stop, to all serving", "s", "", below(10), "")
	s.def("", "many_kill_restart_s", "start-up after kill -9, to all serving", "s", "", below(30), "")
	s.def("", "many_create_s", "CreateTopics, to all serving", "s", "", nil, "")
	return s
}

func runAll(ctx context.Context, cfg *config, w io.Writer) int {
	// A quiet machine first: the figures of a busy one are the other
	// work's as much as the brokers'.
	quiet := true
	var waited time.Duration
	if l, ok := load1(); ok && l > quietLoad {
		if cfg.quietWait > 0 {
			logf("[all] load %s: waiting up to %s for the 1-minute load to fall to %.1f", loadAvg(), cfg.quietWait, quietLoad)
		}
		waited, quiet = waitQuiet(ctx, cfg.quietWait, 5*time.Second, load1)
		if !quiet {
			logf("[all] load %s after %.0f s: starting anyway; the run is marked busy", loadAvg(), waited.Seconds())
		}
	}
	start := time.Now()
	m := collectMachine(ctx, cfg.label, cfg.fjordBin)
	m.Busy, m.Waited = !quiet, waited.Seconds()
	var skipped []string
	for _, st := range allSteps {
		if cfg.allSkip[st] {
			skipped = append(skipped, st)
		}
	}
	res := &AllResult{
		Command: commandLine(os.Args[1:]),
		Settings: map[string]any{
			"partitions": cfg.partitions, "records": cfg.records, "size": cfg.size,
			"rate": cfg.rate, "duration": cfg.duration.String(), "compression": cfg.compression,
			"timeout": cfg.timeout.String(), "repeat": cfg.repeat, "skip": strings.Join(skipped, ","),
			"many_partitions": cfg.manyPartitions, "latency_record_size": latencyRecordSize,
			"lingers": "0 and the client default (franz-go v1.21.7: 10ms)",
		},
		Machine: m,
		Started: start.UTC().Truncate(time.Second),
	}
	// With -json, stdout carries the JSON only.
	out := w
	if cfg.json {
		w = io.Discard
	}
	fmt.Fprintf(w, "command:  %s\n", res.Command)
	fmt.Fprintf(w, "settings: partitions=%d records=%d size=%d rate=%g duration=%s repeat=%d many-partitions=%d skip=%s timeout=%s\n",
		cfg.partitions, cfg.records, cfg.size, cfg.rate, cfg.duration, cfg.repeat, cfg.manyPartitions, orDash(strings.Join(skipped, ",")), cfg.timeout)
	printMachine(w, m)
	fmt.Fprintln(w)

	figs := newFigureSet(cfg)
	fail := func(format string, args ...any) {
		msg := fmt.Sprintf(format, args...)
		res.Errors = append(res.Errors, msg)
		logf("%s", msg)
	}
	steps := map[string]func(round int){
		"startup":        func(round int) { allStartup(ctx, cfg, round, figs, fail) },
		"single":         func(round int) { allSingle(ctx, cfg, round, figs, fail) },
		"rf3":            func(int) { allRF3(ctx, cfg, figs, fail) },
		"partitions1000": func(int) { allPartitions1000(ctx, cfg, figs, fail) },
		"failover":       func(int) { allFailover(ctx, cfg, figs, fail) },
		"manyparts":      func(int) { allManyParts(ctx, cfg, figs, fail) },
	}
	for round := range cfg.repeat {
		for _, st := range allSteps {
			if cfg.allSkip[st] || ctx.Err() != nil {
				continue
			}
			sl := StepLoad{Round: round + 1, Step: st, Seconds: time.Since(start).Seconds(), Load: loadAvg()}
			m.Loads = append(m.Loads, sl)
			logf("[all] round %d of %d: %s (%.0f s into the run, load %s)", round+1, cfg.repeat, st, sl.Seconds, sl.Load)
			figs.round = round + 1
			steps[st](round)
		}
	}
	if err := ctx.Err(); err != nil {
		res.Aborted = fmt.Sprintf("run stopped early: %v (timeout %s)", context.Cause(ctx), cfg.timeout)
	}
	m.LoadEnd = loadAvg()
	res.Seconds = time.Since(start).Seconds()
	evaluateAll(figs.list)
	// Steps left out leave no rows.
	for _, f := range figs.list {
		if len(f.FjordSamples) > 0 || len(f.KfakeSamples) > 0 {
			res.Figures = append(res.Figures, f)
		}
	}

	printFigures(w, res.Figures)
	fmt.Fprintf(w, "\nload at end: %s; the run took %.0f s", m.LoadEnd, res.Seconds)
	if cfg.repeat > 1 {
		fmt.Fprintf(w, "; figures are medians of %d rounds", cfg.repeat)
	}
	fmt.Fprintln(w)
	if m.Busy {
		fmt.Fprintf(w, "BUSY: %s\n", busyNote(m))
	}
	if len(res.Errors) > 0 {
		fmt.Fprintln(w, "\nerrors:")
		for _, e := range res.Errors {
			fmt.Fprintf(w, "  %s\n", e)
		}
	}
	if res.Aborted != "" {
		fmt.Fprintf(w, "\n%s\n", res.Aborted)
	}
	code := 0
	if cfg.jsonOut != "" {
		if err := writeJSONFile(cfg.jsonOut, res); err != nil {
			fmt.Fprintln(os.Stderr, "fjord-bench:", err)
			code = 1
		} else {
			logf("[all] result written to %s", cfg.jsonOut)
		}
	}
	if cfg.json {
		printJSONTo(out, res)
	}
	if len(res.Errors) > 0 || res.Aborted != "" {
		code = 1
	}
	return code
}

func printJSONTo(w io.Writer, v any) {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.Encode(v)
}

// suiteErrors reports a target's errors through fail.
func suiteErrors(tag string, r *TargetResult, fail func(string, ...any)) {
	if r.Error != "" {
		fail("[%s] %s", tag, r.Error)
	}
	for _, s := range allSuites {
		if e, ok := r.SuiteErrors[s]; ok {
			fail("[%s] %s: %s", tag, s, e)
		}
	}
}

// runningBroker is a one-node broker withBroker started: its dataDir and
// metrics listener are fjord's ("" and nil for kfake).
type runningBroker struct {
	addr    string
	pid     int
	dataDir string
	metrics []string
}

// withBroker starts a one-node broker (fjord from -fjord-bin, or a kfake
// child), lets its start-up settle for a second, runs fn on it, and stops
// it. dataDir is fjord's data directory ("" for kfake).
func withBroker(ctx context.Context, cfg *config, which string, fn func(b runningBroker)) error {
	settled := fn
	fn = func(b runningBroker) {
		select {
		case <-time.After(time.Second):
		case <-ctx.Done():
			return
		}
		settled(b)
	}
	if which == "kfake" {
		p, err := startKfake(ctx)
		if err != nil {
			return err
		}
		defer p.stop()
		logf("[kfake] pid %d serving on %s", p.pid(), p.addr)
		fn(runningBroker{addr: p.addr, pid: p.pid()})
		return nil
	}
	p, err := startFjord(ctx, cfg.fjordBin)
	if err != nil {
		return err
	}
	defer p.stop()
	logf("[fjord] pid %d serving on %s (data %s)", p.cmd.Process.Pid, p.addr, p.dir)
	fn(runningBroker{addr: p.addr, pid: p.cmd.Process.Pid, dataDir: p.dataDir(), metrics: []string{p.metrics}})
	if p.exited() {
		return fmt.Errorf("fjord exited during the run; its log: %s", p.logTail())
	}
	return nil
}

// allSingle runs the four client suites on one fjord node and one kfake
// child, at each linger; which goes first alternates by round, so drift
// in the machine's load hits both.
func allSingle(ctx context.Context, cfg *config, round int, figs *figureSet, fail func(string, ...any)) {
	order := []string{"fjord", "kfake"}
	if round%2 == 1 {
		slices.Reverse(order)
	}
	for _, target := range order {
		err := withBroker(ctx, cfg, target, func(br runningBroker) {
			if br.dataDir != "" {
				if d, err := diskSeqWrite(ctx, br.dataDir, diskSeqTotal, diskSeqChunk); err != nil {
					fail("[%s] %v", target, err)
				} else {
					figs.fjord("disk_seq_mb_s", d.MBps)
				}
			}
			for _, l := range lingers {
				c := *cfg
				c.suites = map[string]bool{suiteProduce: true, suiteLatency: true, suiteE2E: true, suiteConsume: true}
				c.floorDir, c.metrics = br.dataDir, br.metrics
				c.linger, c.lingerDefault = 0, l.dflt
				tag := target + ", " + l.label
				r := benchBrokersProc(ctx, &c, tag, []string{br.addr}, false, br.pid)
				suiteErrors(tag, r, fail)
				if r.Produce != nil {
					figs.put(target, "produce_rps_"+l.id, r.Produce.RecordsPerSec)
					if !l.dflt {
						figs.put(target, "produce_mb_s_l0", r.Produce.RecordsPerSec*float64(cfg.size)/1e6)
					}
					if target == "kfake" && !l.dflt {
						figs.kfake("rf3_produce_rps", r.Produce.RecordsPerSec)
					}
				}
				if r.Consume != nil {
					figs.put(target, "consume_rps_"+l.id, r.Consume.RecordsPerSec)
				}
				if r.Latency != nil {
					figs.put(target, "ack_p50_"+l.id, r.Latency.P50Ms)
					figs.put(target, "ack_p99_"+l.id, r.Latency.P99Ms)
				}
				if r.FsyncFloor != nil {
					figs.fjord("fsync_floor_p50", r.FsyncFloor.P50Ms)
					figs.fjord("fsync_floor_p99", r.FsyncFloor.P99Ms)
				}
				if r.FsyncFloorWritten != nil {
					figs.fjord("fsync_floor_written_p50", r.FsyncFloorWritten.P50Ms)
					figs.fjord("fsync_floor_written_p99", r.FsyncFloorWritten.P99Ms)
				}
				if r.FsyncFloorGroup != nil {
					figs.fjord("fsync_floor_group_p50", r.FsyncFloorGroup.P50Ms)
					figs.fjord("fsync_floor_group_p99", r.FsyncFloorGroup.P99Ms)
				}
				if f := r.LatencyFlush; f != nil && !l.dflt {
					figs.fjord("flush_p50_l0", f.P50Ms)
					figs.fjord("flush_p99_l0", f.P99Ms)
					figs.fjord("flush_max_l0", f.MaxMs)
				}
				if r.E2E != nil {
					figs.put(target, "e2e_p99_"+l.id, r.E2E.P99Ms)
				}
				if r.ProduceCPU != nil {
					figs.put(target, "cpu_s_per_gb_"+l.id, r.ProduceCPU.SecPerGB)
				}
				if ctx.Err() != nil {
					return
				}
			}
			if target != "fjord" {
				return
			}
			// The control: the latency suite again, on a topic
			// acknowledged before its fsync.
			c := *cfg
			c.suites = map[string]bool{suiteLatency: true}
			c.linger, c.lingerDefault, c.ackBeforeFsync = 0, false, true
			tag := "fjord, acked before fsync, linger 0"
			r := benchBrokersProc(ctx, &c, tag, []string{br.addr}, false, br.pid)
			suiteErrors(tag, r, fail)
			if r.Latency != nil {
				figs.fjord("ack_p99_nosync_l0", r.Latency.P99Ms)
			}
		})
		if err != nil {
			fail("[%s] %v", target, err)
		}
	}
}

// allRF3 runs produce and produce→ack latency on three fjord processes at
// RF 3 (min.insync.replicas 2, set by newTopic for rf >= 3), then the
// latency again on a topic acknowledged before its fsync, as a control.
func allRF3(ctx context.Context, cfg *config, figs *figureSet, fail func(string, ...any)) {
	nodes, stop, err := startBenchCluster(ctx, cfg.fjordBin)
	if err != nil {
		fail("[fjord x3 rf3] %v", err)
		return
	}
	defer stop()
	var addrs []string
	for _, n := range nodes {
		addrs = append(addrs, n.addr)
	}
	if n := nodes[0]; n.proc != nil {
		f, err := fsyncFloorGroup(ctx, n.proc.dataDir(), cfg.partitions, 3, cfg.rate, min(cfg.duration, floorMaxDuration))
		if err != nil {
			fail("[fjord x3 rf3] %v", err)
		} else {
			figs.fjord("rf3_floor_group_p50", f.P50Ms)
			figs.fjord("rf3_floor_group_p99", f.P99Ms)
		}
	}
	for _, l := range lingers {
		c := *cfg
		c.rf = 3
		c.metrics = clusterMetrics(nodes)
		c.linger, c.lingerDefault = 0, l.dflt
		c.suites = map[string]bool{suiteLatency: true}
		if !l.dflt {
			c.suites[suiteProduce] = true
		}
		tag := "fjord x3 rf3, " + l.label
		r := benchBrokers(ctx, &c, tag, addrs, false)
		suiteErrors(tag, r, fail)
		if r.Produce != nil {
			figs.fjord("rf3_produce_rps", r.Produce.RecordsPerSec)
		}
		if r.Latency != nil {
			figs.fjord("rf3_ack_p99_"+l.id, r.Latency.P99Ms)
		}
		if f := r.LatencyFlush; f != nil && !l.dflt {
			figs.fjord("rf3_flush_p50_l0", f.P50Ms)
			figs.fjord("rf3_flush_p99_l0", f.P99Ms)
			figs.fjord("rf3_flush_max_l0", f.MaxMs)
		}
		if ctx.Err() != nil {
			return
		}
	}
	// The control: the same nodes and suite, a topic acknowledged before
	// its fsync.
	c := *cfg
	c.rf, c.ackBeforeFsync = 3, true
	c.linger, c.lingerDefault = 0, false
	c.suites = map[string]bool{suiteLatency: true}
	tag := "fjord x3 rf3, acked before fsync, linger 0"
	r := benchBrokers(ctx, &c, tag, addrs, false)
	suiteErrors(tag, r, fail)
	if r.Latency != nil {
		figs.fjord("rf3_ack_p99_nosync_l0", r.Latency.P99Ms)
	}
}

// allPartitions1000 runs the produce suite on a fresh fjord node with
// 1,000 partitions at both lingers and, as a control, at linger 0 on a
// topic acknowledged before its fsync; and on kfake at linger 0 for
// reference.
func allPartitions1000(ctx context.Context, cfg *config, figs *figureSet, fail func(string, ...any)) {
	for _, target := range []string{"fjord", "kfake"} {
		tag := target + ", 1000 partitions"
		err := withBroker(ctx, cfg, target, func(br runningBroker) {
			if br.dataDir != "" {
				f, err := syncfsFloor(ctx, br.dataDir, 1000, syncfsFloorBatches*groupFloorWriteSize, syncfsFloorRounds)
				if err != nil {
					fail("[%s] %v", tag, err)
				} else if f.P50Ms > 0 {
					figs.fjord("p1000_floor_syncfs_ms", f.P50Ms)
					records := float64(syncfsFloorBatches * 1000) // a request's, over 1,000 partitions
					figs.fjord("p1000_floor_rps", records/(f.P50Ms/1e3))
				}
			}
			if br.dataDir != "" {
				f, err := windowFloor(ctx, br.dataDir, 1000, windowFloorRecords, groupFloorWriteSize, windowFloorCapacity, windowFloorDur)
				if err != nil {
					fail("[%s] %v", tag, err)
				} else {
					figs.fjord("p1000_floor_window_rps", f.RecordsPerSec)
					figs.fjord("p1000_floor_window_sync_ms", f.SyncMeanMs)
					figs.fjord("p1000_floor_window_per_sync", f.RecordsPerSync)
				}
			}
			runs := []struct {
				label     string
				dflt      bool
				noSync    bool // the control: acked before fsync
				fjordOnly bool
				warm      bool // every partition written before the clock
			}{
				{"linger 0", false, false, false, false},
				{"linger default", true, false, true, false},
				{"linger 0, acked before fsync", false, true, true, false},
				{"linger 0, partitions written first", false, false, true, true},
			}
			for _, l := range runs {
				if target == "kfake" && l.fjordOnly {
					continue
				}
				c := *cfg
				c.partitions = 1000
				c.metrics = br.metrics
				c.linger, c.lingerDefault = 0, l.dflt
				c.ackBeforeFsync = l.noSync
				c.warmPartitions = l.warm
				c.suites = map[string]bool{suiteProduce: true}
				r := benchBrokersProc(ctx, &c, tag+", "+l.label, []string{br.addr}, false, br.pid)
				suiteErrors(tag+", "+l.label, r, fail)
				if r.Produce == nil {
					continue
				}
				switch {
				case l.warm:
					figs.fjord("p1000_warm_rps", r.Produce.RecordsPerSec)
					if f := r.ProduceFlush; f != nil {
						figs.fjord("p1000_warm_request_ms", f.ProduceRequestMeanMs)
						figs.fjord("p1000_warm_flush_ms", f.MeanMs)
					}
				case l.noSync:
					figs.fjord("p1000_nosync_rps", r.Produce.RecordsPerSec)
				case target == "kfake":
					figs.kfake("p1000_vs_kfake", r.Produce.RecordsPerSec)
				case l.dflt:
					figs.fjord("p1000_produce_rps_ld", r.Produce.RecordsPerSec)
				default:
					figs.fjord("p1000_produce_rps", r.Produce.RecordsPerSec)
					figs.fjord("p1000_vs_kfake", r.Produce.RecordsPerSec)
					if f := r.ProduceFlush; f != nil {
						figs.fjord("p1000_request_ms", f.ProduceRequestMeanMs)
						figs.fjord("p1000_flush_ms", f.MeanMs)
					}
				}
				if ctx.Err() != nil {
					return
				}
			}
		})
		if err != nil {
			fail("[%s] %v", tag, err)
		}
	}
}

// allFailover kills the controller three times, then a partition leader
// three times, on a fresh three-node cluster with the brokers' default
// settings (the client side is tuned as in -cluster: see leaderFailover).
func allFailover(ctx context.Context, cfg *config, figs *figureSet, fail func(string, ...any)) {
	nodes, stop, err := startBenchCluster(ctx, cfg.fjordBin)
	if err != nil {
		fail("[failover] %v", err)
		return
	}
	defer stop()
	cr := &ClusterResult{Nodes: 3}
	if err := controllerFailover(ctx, nodes, 3, cr); err != nil {
		fail("[failover] controller: %v", err)
	}
	if ctx.Err() == nil {
		if err := leaderFailover(ctx, nodes, cr); err != nil {
			fail("[failover] partition leader: %v", err)
		}
	}
	for _, v := range cr.FailoverMs {
		figs.fjord("controller_failover_s", v/1000)
	}
	for _, v := range cr.LeaderFailoverMs {
		figs.fjord("leader_failover_s", v/1000)
	}
}

// allManyParts is -many-partitions N on a fresh node.
func allManyParts(ctx context.Context, cfg *config, figs *figureSet, fail func(string, ...any)) {
	mp := &ManyPartitions{Partitions: cfg.manyPartitions}
	if err := manyPartitions(ctx, cfg, mp); err != nil {
		fail("[many partitions] %v", err)
		return
	}
	figs.fjord("many_rss_mib", mp.RSSMiB)
	figs.fjord("many_rss_restart_mib", mp.RSSAfterMiB)
	figs.fjord("many_mib_per_partition", mp.RSSPerPartKiB/1024)
	figs.fjord("many_clean_restart_s", mp.CleanRestartSec)
	figs.fjord("many_kill_restart_s", mp.KillRestartSec)
	figs.fjord("many_create_s", mp.CreateSec)
}
