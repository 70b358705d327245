// Command fjord-bench measures a Kafka-compatible broker with one fixed,
// reproducible suite: produce throughput, produce-ack latency at a fixed
// rate, end-to-end latency, and consume throughput.
//
// It can bench any bootstrap address (-brokers), franz-go's in-memory fake
// broker kfake started as a child process (-kfake) or in-process
// (-kfake-inproc), and a fjord binary it starts itself on a loopback port
// (-fjord-bin), all in one run, and prints the figures side by side (or as
// JSON with -json). A broker process it starts is also sampled for
// resident memory and CPU time. -all runs every figure of the performance
// issue in one run and prints them as ratios against kfake with their
// targets; -compare prints the change between two such results. Every
// run is bounded by -timeout.
//
// It is a module of its own so that client libraries stay out of the broker
// module. See docs/benchmarks.md.
package main

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"
)

// Suite names, in the order they run.
const (
	suiteProduce = "produce"
	suiteLatency = "latency"
	suiteE2E     = "e2e"
	suiteConsume = "consume"
)

var allSuites = []string{suiteProduce, suiteLatency, suiteE2E, suiteConsume}

// config holds the parsed flags.
type config struct {
	brokers  []string
	kfake    bool
	fjordBin string
	// floorDir, when set, is the data directory of the broker under
	// test: the latency suite then measures the disk's fsync floor there
	// first (fsyncfloor.go). Set by the tool for the fjord it starts.
	floorDir string
	// metrics are the metrics listeners (host:port) of the fjord nodes
	// under test, set by the tool for the nodes it starts: the produce
	// and latency suites then read the nodes' own flush histograms
	// (brokerflush.go).
	metrics []string
	// ackBeforeFsync creates the bench topics with flush.messages set
	// high, so a record is acknowledged once the in-sync replicas have it
	// in memory, Kafka's default, not once they fsynced it, fjord's: the
	// control run that shows what the figure is without the disk wait.
	// Set by -all for its control rows only.
	ackBeforeFsync bool
	// warmPartitions has every partition of the produce suite's fresh
	// topic take one record before the clock starts, so the figure is the
	// steady produce without the topic's creation (a broker opening its
	// partitions as the first batches arrive) inside it. Set by -all for
	// its 1,000-partition rows that say so.
	warmPartitions bool
	suites         map[string]bool
	partitions     int
	rf             int
	records        int
	size           int
	rate           float64
	duration       time.Duration
	compression    string
	cluster        bool
	fjordRF3       bool
	timeout        time.Duration
	json           bool
	// txn > 0 runs the produce and e2e suites with a transactional
	// producer committing every txn records (e2e then reads
	// read_committed, so its latency is produce to visible-when-committed).
	txn int
	// tls, from -tls-ca, dials -brokers with TLS (nil: plaintext).
	tls *tls.Config
	// manyPartitions > 0 runs the many-partitions mode (manyparts.go)
	// instead of the suites; under -all it is the N of that step.
	manyPartitions int
	// linger is the producers' linger; lingerDefault leaves franz-go's
	// default (10 ms in v1.21.7) instead.
	linger        time.Duration
	lingerDefault bool
	// kfakeInProc runs kfake inside this process (-kfake-inproc) rather
	// than as a child process (-kfake).
	kfakeInProc bool
	// all runs every figure of the performance issue (all.go); allSkip
	// names steps it leaves out, repeat how many rounds it runs.
	all     bool
	allSkip map[string]bool
	repeat  int
	// quietWait bounds -all's wait for a quiet machine (machine.go:
	// quietLoad) before it starts.
	quietWait time.Duration
	// jsonOut is a file the full result is written to as JSON, besides
	// the table.
	jsonOut string
	// compare holds two -all JSON result files to print deltas between.
	compare []string
	// label names the run in the machine record (default: git commit).
	label string
	// tier runs the tiered-storage mode (tier.go) with weedBin as its
	// store; the tier* fields are its sizes and settings, tierSkip the
	// steps it leaves out.
	tier                    bool
	weedBin                 string
	tierReadBytes           int64
	tierProduceBytes        int64
	tierSegmentBytes        int64
	tierProduceSegmentBytes int64
	tierLocalRetention      int64
	tierCacheBytes          int64
	tierInterval            time.Duration
	tierBoundRate           float64 // records/s of the bound step's producer; 0: as fast as it goes
	tierSkip                map[string]bool
}

func main() {
	os.Exit(run())
}

func run() int {
	if len(os.Args) == 2 && os.Args[1] == serveKfakeArg {
		return serveKfake()
	}
	cfg, err := parseFlags(os.Args[1:])
	if err != nil {
		fmt.Fprintln(os.Stderr, "fjord-bench:", err)
		return 2
	}
	if len(cfg.compare) == 2 {
		return runCompare(cfg.compare[0], cfg.compare[1], os.Stdout)
	}

	// The whole run, start-up and tear-down included, lives in this context.
	ctx, cancel := context.WithTimeout(context.Background(), cfg.timeout)
	defer cancel()
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()

	// Last resort: if something ignores the context, still stop by ourselves
	// (and take a fjord child with us) shortly after the deadline.
	watchdog := time.AfterFunc(cfg.timeout+30*time.Second, func() {
		killChildren()
		fmt.Fprintln(os.Stderr, "fjord-bench: hard timeout, exiting")
		os.Exit(3)
	})
	defer watchdog.Stop()

	if cfg.all {
		return runAll(ctx, cfg, os.Stdout)
	}
	if cfg.cluster {
		if cfg.fjordBin == "" {
			fmt.Fprintln(os.Stderr, "fjord-bench: -cluster needs -fjord-bin")
			return 2
		}
		return runCluster(ctx, cfg, os.Stdout)
	}
	if cfg.manyPartitions > 0 {
		if cfg.fjordBin == "" {
			fmt.Fprintln(os.Stderr, "fjord-bench: -many-partitions needs -fjord-bin")
			return 2
		}
		return runManyPartitions(ctx, cfg, os.Stdout)
	}
	if cfg.tier {
		return runTier(ctx, cfg, os.Stdout)
	}

	rep := newReport(cfg)
	if !cfg.json {
		rep.printHeader(os.Stdout)
	}

	// Targets run one after another so they never compete for the CPU.
	if len(cfg.brokers) > 0 {
		rep.add(benchBrokers(ctx, cfg, "brokers", cfg.brokers, true))
	}
	if cfg.fjordBin != "" && ctx.Err() == nil {
		rep.add(benchFjord(ctx, cfg))
	}
	if cfg.fjordRF3 && cfg.fjordBin != "" && ctx.Err() == nil {
		rep.add(benchFjordCluster(ctx, cfg))
	}
	if cfg.kfake && ctx.Err() == nil {
		rep.add(benchKfake(ctx, cfg))
	}
	if cfg.kfakeInProc && ctx.Err() == nil {
		rep.add(benchKfakeInProcess(ctx, cfg))
	}
	if err := ctx.Err(); err != nil {
		rep.Aborted = fmt.Sprintf("run stopped early: %v (timeout %s)", context.Cause(ctx), cfg.timeout)
	}

	if cfg.json {
		if err := rep.printJSON(os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, "fjord-bench:", err)
			return 1
		}
	} else {
		rep.printTable(os.Stdout)
	}
	if cfg.jsonOut != "" {
		if err := writeJSONFile(cfg.jsonOut, rep); err != nil {
			fmt.Fprintln(os.Stderr, "fjord-bench:", err)
			return 1
		}
	}
	if rep.failed() {
		return 1
	}
	return 0
}

// parseTierFlags fills and checks -tier's settings.
func parseTierFlags(cfg *config, set map[string]bool, read, produce, seg, prodSeg, local, cache, skip string) error {
	if cfg.fjordBin == "" || cfg.weedBin == "" {
		return errors.New("-tier needs -fjord-bin and -weed-bin")
	}
	if !set["timeout"] {
		cfg.timeout = 30 * time.Minute
	}
	for _, f := range []struct {
		name, v string
		dst     *int64
		min     int64
	}{
		{"tier-read-bytes", read, &cfg.tierReadBytes, 1},
		{"tier-produce-bytes", produce, &cfg.tierProduceBytes, 1},
		{"tier-segment-bytes", seg, &cfg.tierSegmentBytes, 1024},
		{"tier-produce-segment-bytes", prodSeg, &cfg.tierProduceSegmentBytes, 1024},
		{"tier-local-retention-bytes", local, &cfg.tierLocalRetention, 0},
		{"tier-cache-bytes", cache, &cfg.tierCacheBytes, 0},
	} {
		n, err := parseSize(f.v)
		if err != nil {
			return fmt.Errorf("-%s: %w", f.name, err)
		}
		if n < f.min {
			return fmt.Errorf("-%s: %s is below %d", f.name, f.v, f.min)
		}
		*f.dst = n
	}
	if cfg.tierBoundRate < 0 {
		return errors.New("-tier-bound-rate must be 0 (full speed) or positive")
	}
	if cfg.tierInterval < time.Millisecond {
		return errors.New("-tier-interval must be at least 1ms")
	}
	for _, st := range strings.Split(skip, ",") {
		if st = strings.TrimSpace(st); st == "" {
			continue
		}
		if !slices.Contains(tierSteps, st) {
			return fmt.Errorf("-tier-skip: unknown step %q (have %s)", st, strings.Join(tierSteps, ","))
		}
		cfg.tierSkip[st] = true
	}
	return nil
}

// parseFlags parses and checks the command line.
func parseFlags(args []string) (*config, error) {
	fs := flag.NewFlagSet("fjord-bench", flag.ContinueOnError)
	brokers := fs.String("brokers", "", "bootstrap `host:port[,host:port...]` of a Kafka-compatible cluster to bench")
	kfake := fs.Bool("kfake", false, "also start franz-go's in-memory fake broker (kfake) in a child process of its own and bench it")
	kfakeInProc := fs.Bool("kfake-inproc", false, "also start kfake inside this process (sharing the clients' Go runtime) and bench it")
	fjordBin := fs.String("fjord-bin", "", "`path` of a fjord binary to start on a free loopback port (temp data dir) and bench")
	suites := fs.String("suites", strings.Join(allSuites, ","), "comma-separated suites to run: "+strings.Join(allSuites, ","))
	partitions := fs.Int("partitions", 6, "partitions of each fresh bench topic")
	warm := fs.Bool("warm", false, "write one record to every partition of the produce suite's fresh topic before its clock starts (the steady produce, without the broker opening the partitions)")
	rf := fs.Int("rf", 1, "replication factor of each bench topic")
	records := fs.Int("records", 200000, "records written by the produce suite (and read back by consume)")
	size := fs.Int("size", 1024, "value size in bytes for the produce and consume suites")
	rate := fs.Float64("rate", 3500, "offered rate in records/s for the latency and e2e suites")
	duration := fs.Duration("duration", 10*time.Second, "how long the latency and e2e suites send")
	compression := fs.String("compression", "none", "producer compression: none, snappy, lz4, zstd, gzip")
	timeout := fs.Duration("timeout", 5*time.Minute, "bound on the whole run; it stops by itself after this")
	jsonOut := fs.Bool("json", false, "print machine-readable JSON results instead of tables")
	fjordRF3 := fs.Bool("fjord-rf3", false, "also start a 3-node fjord cluster from -fjord-bin and bench it with replication factor 3 (min.insync.replicas=2)")
	txn := fs.Int("txn", 0, "with N > 0: the produce and e2e suites use a transactional producer committing every N records, and e2e consumes read_committed")
	tlsCA := fs.String("tls-ca", "", "`path` of a PEM CA file: dial -brokers with TLS trusting it (an SSL listener)")
	tlsCert := fs.String("tls-cert", "", "`path` of a PEM client certificate chain for -tls-ca (with -tls-key), for ssl.client.auth=required")
	tlsKey := fs.String("tls-key", "", "`path` of the PEM private key of -tls-cert")
	cluster := fs.Bool("cluster", false, "instead of the client suites, bench the metadata quorum of a 3-node cluster of -fjord-bin processes")
	linger := fs.String("linger", "0", "producer linger: a duration, or \"default\" for the client's own (franz-go: 10ms)")
	all := fs.Bool("all", false, "run every figure of the performance issue against -fjord-bin and a kfake child, and print one table of ratios and targets (bounded by -timeout, 20m by default here)")
	allSkip := fs.String("all-skip", "", "with -all: comma-separated steps to leave out: "+strings.Join(allSteps, ","))
	repeat := fs.Int("repeat", 1, "with -all: rounds to run; figures are medians, fjord and kfake alternate which goes first")
	quietWait := fs.Duration("quiet-wait", 3*time.Minute, "with -all: how long to wait for the 1-minute load average to fall to 1.0 before starting; a run that starts above it is marked busy")
	jsonFile := fs.String("json-out", "", "also write the full result as JSON to `path` (the table still prints)")
	compare := fs.String("compare", "", "`a.json,b.json`: print the figure-by-figure change between two -all -json-out results, then exit")
	label := fs.String("label", "", "name of this run in the machine record (default: git rev-parse --short HEAD)")
	manyParts := fs.Int("many-partitions", 0, "with N > 0: instead of the suites, create N partitions on one -fjord-bin node and time its restarts (clean stop, kill -9) until every partition serves ListOffsets; report resident memory per partition (with -all: the N of that step, default 10000)")
	tier := fs.Bool("tier", false, "instead of the client suites, bench tiered storage: one -fjord-bin node with a weed mini (-weed-bin) as its store; produce with tiering on vs off, reads from the store, local disk under local.retention.bytes (docs/benchmarks.md; timeout 30m by default here)")
	weedBin := fs.String("weed-bin", "", "with -tier: `path` of SeaweedFS's weed binary (make weed builds bin/weed)")
	tierRead := fs.String("tier-read-bytes", "1GiB", "with -tier: value bytes written, then read from the store cold and warm (step read)")
	tierProduce := fs.String("tier-produce-bytes", "5GiB", "with -tier: value bytes produced while the local disk is sampled (step bound)")
	tierSeg := fs.String("tier-segment-bytes", "16MiB", "with -tier: segment.bytes of the read and bound steps' topics (the bound is local.retention.bytes plus one)")
	tierProdSeg := fs.String("tier-produce-segment-bytes", "1MiB", "with -tier: segment.bytes of the produce step's topics, tiered and not (small, so segments roll and upload within the latency suite's -duration); the tiered one keeps 2 segments locally")
	tierLocal := fs.String("tier-local-retention-bytes", "256MiB", "with -tier: local.retention.bytes of the bound step's topic")
	tierCache := fs.String("tier-cache-bytes", "0", "with -tier: rsm.config.fetch.chunk.cache.size of the node (a memory chunk cache); 0 = none, the node's default")
	tierInterval := fs.Duration("tier-interval", 500*time.Millisecond, "with -tier: the node's remote.log.manager.task.interval.ms and log.retention.check.interval.ms")
	tierSkip := fs.String("tier-skip", "", "with -tier: comma-separated steps to leave out: produce,read,bound")
	tierBoundRate := fs.Float64("tier-bound-rate", 0, "with -tier: records/s of the bound step's producer (paced, as the latency suite); 0 = as fast as it goes. Below the store's copy rate the bound can hold; above it the local log keeps what waits to be copied")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments: %q", fs.Args())
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if *compare != "" {
		files := strings.Split(*compare, ",")
		if len(files) != 2 || files[0] == "" || files[1] == "" {
			return nil, errors.New("-compare takes two files: a.json,b.json")
		}
		return &config{compare: files}, nil
	}

	cfg := &config{
		kfake:          *kfake,
		fjordBin:       *fjordBin,
		suites:         map[string]bool{},
		partitions:     *partitions,
		rf:             *rf,
		records:        *records,
		size:           *size,
		rate:           *rate,
		duration:       *duration,
		compression:    *compression,
		timeout:        *timeout,
		json:           *jsonOut,
		cluster:        *cluster,
		fjordRF3:       *fjordRF3,
		txn:            *txn,
		manyPartitions: *manyParts,
		kfakeInProc:    *kfakeInProc,
		all:            *all,
		allSkip:        map[string]bool{},
		repeat:         *repeat,
		quietWait:      *quietWait,
		jsonOut:        *jsonFile,
		label:          *label,
		tier:           *tier,
		weedBin:        *weedBin,
		tierInterval:   *tierInterval,
		tierBoundRate:  *tierBoundRate,
		tierSkip:       map[string]bool{},
		warmPartitions: *warm,
	}
	if cfg.tier {
		if err := parseTierFlags(cfg, set, *tierRead, *tierProduce, *tierSeg, *tierProdSeg, *tierLocal, *tierCache, *tierSkip); err != nil {
			return nil, err
		}
	} else if set["weed-bin"] || set["tier-read-bytes"] || set["tier-produce-bytes"] || set["tier-segment-bytes"] || set["tier-produce-segment-bytes"] ||
		set["tier-local-retention-bytes"] || set["tier-cache-bytes"] || set["tier-interval"] || set["tier-skip"] || set["tier-bound-rate"] {
		return nil, errors.New("-weed-bin and -tier-* apply to -tier only")
	}
	if *linger == "default" {
		cfg.lingerDefault = true
	} else if d, err := time.ParseDuration(*linger); err != nil || d < 0 {
		return nil, fmt.Errorf("-linger %q: want a duration >= 0 or \"default\"", *linger)
	} else {
		cfg.linger = d
	}
	if cfg.all {
		if !set["timeout"] {
			cfg.timeout = 20 * time.Minute
		}
		if !set["many-partitions"] {
			cfg.manyPartitions = 10000
		}
		for _, st := range strings.Split(*allSkip, ",") {
			if st = strings.TrimSpace(st); st == "" {
				continue
			}
			if !slices.Contains(allSteps, st) {
				return nil, fmt.Errorf("-all-skip: unknown step %q (have %s)", st, strings.Join(allSteps, ","))
			}
			cfg.allSkip[st] = true
		}
		switch {
		case cfg.fjordBin == "":
			return nil, errors.New("-all needs -fjord-bin")
		case len(cfg.brokers) > 0 || cfg.kfake || cfg.kfakeInProc || cfg.cluster || cfg.fjordRF3 || cfg.tls != nil || cfg.txn > 0:
			return nil, errors.New("-all runs its own targets: leave out -brokers, -kfake, -kfake-inproc, -cluster, -fjord-rf3, -tls-*, -txn")
		case cfg.repeat < 1:
			return nil, errors.New("-repeat must be >= 1")
		case cfg.manyPartitions < 1:
			return nil, errors.New("-many-partitions must be >= 1 (leave the step out with -all-skip manyparts)")
		}
		if cfg.quietWait < 0 {
			return nil, errors.New("-quiet-wait must be >= 0")
		}
	} else if set["repeat"] || set["all-skip"] || set["quiet-wait"] {
		return nil, errors.New("-repeat, -all-skip and -quiet-wait apply to -all only")
	}
	if cfg.tier && (cfg.all || cfg.cluster || cfg.manyPartitions > 0 || len(cfg.brokers) > 0 || cfg.kfake || cfg.kfakeInProc || cfg.fjordRF3 || cfg.txn > 0) {
		return nil, errors.New("-tier runs its own node: leave out -all, -cluster, -many-partitions, -brokers, -kfake, -kfake-inproc, -fjord-rf3, -txn")
	}
	if cfg.jsonOut != "" && (cfg.cluster || (cfg.manyPartitions > 0 && !cfg.all)) {
		return nil, errors.New("-json-out applies to -all and the client suites; -cluster and -many-partitions print JSON with -json")
	}
	if *tlsCA != "" {
		tc, err := loadTLS(*tlsCA, *tlsCert, *tlsKey)
		if err != nil {
			return nil, err
		}
		cfg.tls = tc
	} else if *tlsCert != "" || *tlsKey != "" {
		return nil, errors.New("-tls-cert and -tls-key need -tls-ca")
	}
	for _, b := range strings.Split(*brokers, ",") {
		if b = strings.TrimSpace(b); b != "" {
			cfg.brokers = append(cfg.brokers, b)
		}
	}
	for _, s := range strings.Split(*suites, ",") {
		s = strings.TrimSpace(s)
		if !slices.Contains(allSuites, s) {
			return nil, fmt.Errorf("unknown suite %q (have %s)", s, strings.Join(allSuites, ","))
		}
		cfg.suites[s] = true
	}
	switch {
	case len(cfg.brokers) == 0 && !cfg.kfake && !cfg.kfakeInProc && cfg.fjordBin == "":
		return nil, errors.New("nothing to bench: give -brokers, -kfake, -kfake-inproc and/or -fjord-bin")
	case cfg.tls != nil && (cfg.kfake || cfg.kfakeInProc || cfg.fjordBin != ""):
		return nil, errors.New("-tls-ca applies to -brokers only: bench -kfake and -fjord-bin in another run")
	case cfg.txn < 0:
		return nil, errors.New("-txn must be >= 0")
	case cfg.partitions < 1 || cfg.rf < 1 || cfg.rf > 32767:
		return nil, errors.New("-partitions and -rf must be positive")
	case cfg.records < 1 || cfg.size < 1:
		return nil, errors.New("-records and -size must be positive")
	case cfg.rate <= 0 || cfg.duration <= 0 || cfg.timeout <= 0:
		return nil, errors.New("-rate, -duration and -timeout must be positive")
	}
	if _, err := compressionCodec(cfg.compression); err != nil {
		return nil, err
	}
	return cfg, nil
}
