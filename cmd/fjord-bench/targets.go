package main

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// logf prints progress to stderr, so stdout carries only the results.
func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "fjord-bench: "+format+"\n", args...)
}

// benchBrokers runs the selected suites, each on a fresh topic, against one
// bootstrap address. With cleanup it deletes its topics afterwards (for
// clusters that outlive the run).
func benchBrokers(ctx context.Context, cfg *config, name string, brokers []string, cleanup bool) *TargetResult {
	return benchBrokersProc(ctx, cfg, name, brokers, cleanup, 0)
}

// benchBrokersProc is benchBrokers on a broker that is the local process
// pid (0: unknown): its CPU time is read before and after the produce
// suite.
func benchBrokersProc(ctx context.Context, cfg *config, name string, brokers []string, cleanup bool, pid int) *TargetResult {
	res := &TargetResult{Target: name, Brokers: brokers, SuiteErrors: map[string]string{}}
	admOpts := []kgo.Opt{kgo.SeedBrokers(brokers...), kgo.ClientID("fjord-bench-admin")}
	if cfg.tls != nil {
		admOpts = append(admOpts, kgo.DialTLSConfig(cfg.tls))
	}
	admCl, err := kgo.NewClient(admOpts...)
	if err != nil {
		res.Error = err.Error()
		return res
	}
	defer admCl.Close()
	b := &bench{
		cfg:     cfg,
		target:  name,
		brokers: brokers,
		runID:   strconv.FormatInt(time.Now().UnixNano(), 36),
		adm:     kadm.NewClient(admCl),
	}
	// One reachability check, so a dead address gives one error, not four.
	if err := ping(ctx, admCl); err != nil {
		res.Error = fmt.Sprintf("no answer from %v: %v", brokers, err)
		logf("[%s] %s", name, res.Error)
		return res
	}
	if cleanup {
		defer b.deleteTopics()
	}

	// fail records a suite's error; it reports whether to go on.
	fail := func(suite string, err error) bool {
		res.SuiteErrors[suite] = err.Error()
		logf("[%s] %s: %v", name, suite, err)
		return ctx.Err() == nil
	}
	// Each suite gets a fresh topic; run returns false if the run must stop.
	run := func(suite string, fn func(topic string) error) bool {
		if !cfg.suites[suite] {
			return true
		}
		logf("[%s] %s ...", name, suite)
		topic, err := b.newTopic(ctx, suite)
		if err == nil {
			err = fn(topic)
		}
		if err != nil {
			return fail(suite, err)
		}
		return true
	}

	// The consume suite reads back what the produce step wrote. If the
	// produce suite is not selected the step still runs, unreported, and a
	// failure of it is charged to consume.
	var produced string
	ok := true
	if cfg.suites[suiteProduce] || cfg.suites[suiteConsume] {
		suite := suiteProduce
		if !cfg.suites[suiteProduce] {
			suite = suiteConsume
		}
		ok = run(suite, func(topic string) error {
			if cfg.warmPartitions {
				if err := b.warmPartitions(ctx, topic); err != nil {
					return err
				}
			}
			var cpu0 float64
			var cpuErr error
			if pid > 0 {
				cpu0, cpuErr = cpuSeconds(pid)
			}
			var t *Throughput
			flush, err := measureFlush(ctx, name, cfg.metrics, func() (err error) {
				t, err = b.produceThroughput(ctx, topic)
				return err
			})
			if err != nil {
				return err
			}
			if cfg.suites[suiteProduce] {
				res.ProduceFlush = flush
			}
			produced = topic
			if cfg.suites[suiteProduce] {
				res.Produce = t
				if pid > 0 {
					cpu1, err := cpuSeconds(pid)
					if err = cmp.Or(cpuErr, err); err != nil {
						logf("[%s] reading CPU time: %v", name, err)
					} else {
						res.ProduceCPU = newCPU(cpu1-cpu0, t.Bytes)
					}
				}
			}
			return nil
		})
	}
	ok = ok && run(suiteLatency, func(topic string) (err error) {
		if cfg.floorDir != "" {
			logf("[%s] fsync floor in %s ...", name, cfg.floorDir)
			floorDur := min(cfg.duration, floorMaxDuration)
			if res.FsyncFloor, err = fsyncFloor(ctx, cfg.floorDir, cfg.rate, floorDur, false); err != nil {
				return err
			}
			if res.FsyncFloorWritten, err = fsyncFloor(ctx, cfg.floorDir, cfg.rate, floorDur, true); err != nil {
				return err
			}
			if res.FsyncFloorGroup, err = fsyncFloorGroup(ctx, cfg.floorDir, cfg.partitions, 1, cfg.rate, floorDur); err != nil {
				return err
			}
		}
		res.LatencyFlush, err = measureFlush(ctx, name, cfg.metrics, func() (err error) {
			res.Latency, err = b.produceLatency(ctx, topic)
			return err
		})
		return err
	})
	ok = ok && run(suiteE2E, func(topic string) (err error) {
		res.E2E, err = b.endToEnd(ctx, topic)
		return err
	})
	if ok && cfg.suites[suiteConsume] {
		if produced == "" {
			if _, failed := res.SuiteErrors[suiteConsume]; !failed {
				res.SuiteErrors[suiteConsume] = "skipped: the produce step failed"
			}
		} else {
			logf("[%s] %s ...", name, suiteConsume)
			if res.Consume, err = b.consumeThroughput(ctx, produced, int64(cfg.records)); err != nil {
				fail(suiteConsume, err)
			}
		}
	}
	if len(res.SuiteErrors) == 0 {
		res.SuiteErrors = nil
	}
	return res
}

// ping checks that the cluster answers. kgo does not abandon a connection
// attempt when the context ends, so we stop waiting for it ourselves.
func ping(ctx context.Context, cl *kgo.Client) error {
	errc := make(chan error, 1)
	go func() { errc <- cl.Ping(ctx) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// deleteTopics removes the bench topics, best effort, within a short bound
// of its own (the run's context may be spent).
func (b *bench) deleteTopics() {
	if len(b.topics) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := b.adm.DeleteTopics(ctx, b.topics...); err != nil {
		logf("[%s] deleting bench topics: %v", b.target, err)
	}
}

// benchKfakeInProcess starts franz-go's in-memory fake broker in this
// process, on a random loopback port, and benches it (-kfake-inproc: the
// clients and the broker then share one Go runtime).
func benchKfakeInProcess(ctx context.Context, cfg *config) *TargetResult {
	c, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		return &TargetResult{Target: "kfake in-process", Error: err.Error()}
	}
	defer c.Close()
	addrs := c.ListenAddrs()
	logf("[kfake in-process] started on %v", addrs)
	return benchBrokers(ctx, cfg, "kfake in-process", addrs, false)
}

// benchKfake starts kfake in a child process of its own (this binary, run
// with -serve-kfake) and benches it like a fjord child: resident memory and
// the CPU time of the produce suite.
func benchKfake(ctx context.Context, cfg *config) *TargetResult {
	p, err := startKfake(ctx)
	if err != nil {
		return &TargetResult{Target: "kfake", Error: err.Error()}
	}
	defer p.stop()
	logf("[kfake] pid %d serving on %s", p.pid(), p.addr)
	return benchChild(ctx, cfg, "kfake", p.addr, p.pid())
}

// benchChild benches the broker process pid serving on addr, and reports
// its resident memory: once idle after start-up, and the peak while the
// suites ran.
func benchChild(ctx context.Context, cfg *config, name, addr string, pid int) *TargetResult {
	// Let start-up work settle, then take the idle figure.
	select {
	case <-time.After(time.Second):
	case <-ctx.Done():
	}
	idle, err := rssMiB(pid)
	if err != nil {
		logf("[%s] reading memory: %v", name, err)
	}
	sampler := startRSSSampler(pid, 50*time.Millisecond)
	res := benchBrokersProc(ctx, cfg, name, []string{addr}, false, pid)
	peak, n := sampler.stop()
	if err == nil {
		res.Memory = &Memory{IdleMiB: idle, PeakMiB: max(peak, idle), Samples: n}
	}
	return res
}

// benchFjord starts the fjord binary and benches it as benchChild does.
func benchFjord(ctx context.Context, cfg *config) *TargetResult {
	p, err := startFjord(ctx, cfg.fjordBin)
	if err != nil {
		return &TargetResult{Target: "fjord", Error: err.Error()}
	}
	defer p.stop()
	logf("[fjord] pid %d serving on %s (data %s)", p.cmd.Process.Pid, p.addr, p.dir)
	c := *cfg
	c.floorDir = p.dataDir()
	c.metrics = []string{p.metrics}
	res := benchChild(ctx, &c, "fjord", p.addr, p.cmd.Process.Pid)
	if p.exited() {
		res.Error = "fjord exited during the run; its log: " + p.logTail()
	}
	return res
}
