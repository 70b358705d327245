// Command fjord-bench measures a Kafka-compatible broker with one fixed,
// reproducible suite: produce throughput, produce-ack latency at a fixed
// rate, end-to-end latency, and consume throughput.
//
// It can bench any bootstrap address (-brokers), franz-go's in-memory fake
// broker kfake started in-process (-kfake), and a fjord binary it starts
// itself on a loopback port (-fjord-bin), all in one run, and prints the
// figures side by side (or as JSON with -json). A fjord process it starts is
// also sampled for resident memory. Every run is bounded by -timeout.
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
	brokers     []string
	kfake       bool
	fjordBin    string
	suites      map[string]bool
	partitions  int
	rf          int
	records     int
	size        int
	rate        float64
	duration    time.Duration
	compression string
	cluster     bool
	fjordRF3    bool
	timeout     time.Duration
	json        bool
	// txn > 0 runs the produce and e2e suites with a transactional
	// producer committing every txn records (e2e then reads
	// read_committed, so its latency is produce to visible-when-committed).
	txn int
	// tls, from -tls-ca, dials -brokers with TLS (nil: plaintext).
	tls *tls.Config
	// manyPartitions > 0 runs the many-partitions mode (manyparts.go)
	// instead of the suites.
	manyPartitions int
}

func main() {
	os.Exit(run())
}

func run() int {
	cfg, err := parseFlags(os.Args[1:])
	if err != nil {
		fmt.Fprintln(os.Stderr, "fjord-bench:", err)
		return 2
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
	if rep.failed() {
		return 1
	}
	return 0
}

// parseFlags parses and checks the command line.
func parseFlags(args []string) (*config, error) {
	fs := flag.NewFlagSet("fjord-bench", flag.ContinueOnError)
	brokers := fs.String("brokers", "", "bootstrap `host:port[,host:port...]` of a Kafka-compatible cluster to bench")
	kfake := fs.Bool("kfake", false, "also start franz-go's in-memory fake broker (kfake) in-process and bench it")
	fjordBin := fs.String("fjord-bin", "", "`path` of a fjord binary to start on a free loopback port (temp data dir) and bench")
	suites := fs.String("suites", strings.Join(allSuites, ","), "comma-separated suites to run: "+strings.Join(allSuites, ","))
	partitions := fs.Int("partitions", 6, "partitions of each fresh bench topic")
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
	manyParts := fs.Int("many-partitions", 0, "with N > 0: instead of the suites, create N partitions on one -fjord-bin node and time its restarts (clean stop, kill -9) until every partition serves ListOffsets; report resident memory per partition")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments: %q", fs.Args())
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
	case len(cfg.brokers) == 0 && !cfg.kfake && cfg.fjordBin == "":
		return nil, errors.New("nothing to bench: give -brokers, -kfake and/or -fjord-bin")
	case cfg.tls != nil && (cfg.kfake || cfg.fjordBin != ""):
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
