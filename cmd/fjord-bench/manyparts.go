package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// The many-partitions mode (-many-partitions N) measures what a node
// costs per partition and how fast it serves again after a restart: it
// starts a fjord binary, creates one topic of N partitions, writes one
// record to each, then stops the node cleanly and restarts it, then kills
// it (SIGKILL) and restarts it, each time timing from the start of the
// process until every partition answers ListOffsets with its end offset.
// Resident memory is read before the topic exists and with it.

// ManyPartitions is the mode's result.
type ManyPartitions struct {
	Partitions      int     `json:"partitions"`
	NoFile          string  `json:"rlimit_nofile"`
	CreateSec       float64 `json:"create_s"`
	ProduceSec      float64 `json:"produce_one_each_s"`
	RSSBaseMiB      float64 `json:"rss_base_mib"`
	RSSMiB          float64 `json:"rss_mib"`
	RSSPerPartKiB   float64 `json:"rss_per_partition_kib"`
	HeapMiB         float64 `json:"heap_inuse_mib"`
	HeapPerPartKiB  float64 `json:"heap_per_partition_kib"`
	CleanStopSec    float64 `json:"clean_stop_s"`
	CleanRestartSec float64 `json:"clean_restart_serving_s"`
	RSSAfterMiB     float64 `json:"rss_after_clean_restart_mib"`
	KillRestartSec  float64 `json:"kill9_restart_serving_s"`
	CPUs            int     `json:"cpus"`
	GoOS            string  `json:"goos"`
}

const manyTopic = "many-partitions"

func runManyPartitions(ctx context.Context, cfg *config, out io.Writer) int {
	res := &ManyPartitions{Partitions: cfg.manyPartitions, CPUs: runtime.NumCPU(), GoOS: runtime.GOOS}
	var rl syscall.Rlimit
	if syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl) == nil {
		res.NoFile = strconv.FormatUint(rl.Max, 10)
	}
	if err := manyPartitions(ctx, cfg, res); err != nil {
		fmt.Fprintln(os.Stderr, "fjord-bench:", err)
		return 1
	}
	if cfg.json {
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		enc.Encode(res)
		return 0
	}
	fmt.Fprintf(out, "many partitions: %d on one node (RLIMIT_NOFILE %s, %d CPUs)\n", res.Partitions, res.NoFile, res.CPUs)
	fmt.Fprintf(out, "  create topic                      %8.1f s\n", res.CreateSec)
	fmt.Fprintf(out, "  produce one record to each        %8.1f s\n", res.ProduceSec)
	fmt.Fprintf(out, "  RSS before / with the topic       %8.0f / %.0f MiB (%.1f KiB per partition)\n", res.RSSBaseMiB, res.RSSMiB, res.RSSPerPartKiB)
	fmt.Fprintf(out, "  Go heap in use with the topic      %8.0f MiB (%.1f KiB per partition)\n", res.HeapMiB, res.HeapPerPartKiB)
	fmt.Fprintf(out, "  clean stop (SIGTERM)              %8.1f s\n", res.CleanStopSec)
	fmt.Fprintf(out, "  restart after clean stop, serving %8.1f s (RSS %.0f MiB)\n", res.CleanRestartSec, res.RSSAfterMiB)
	fmt.Fprintf(out, "  restart after kill -9, serving    %8.1f s\n", res.KillRestartSec)
	return 0
}

func manyPartitions(ctx context.Context, cfg *config, res *ManyPartitions) error {
	n := cfg.manyPartitions
	// The node's /metrics (fjord.metrics.listener) gives its heap.
	ports, err := freePorts(2)
	if err != nil {
		return err
	}
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[0]))
	metrics := net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[1]))
	extra := []string{"--override", "fjord.metrics.listener=" + metrics}
	dir, err := os.MkdirTemp("", "fjord-bench-")
	if err != nil {
		return err
	}
	p, err := startFjordIn(ctx, cfg.fjordBin, dir, addr, startupWait, extra...)
	if err != nil {
		os.RemoveAll(dir)
		return err
	}
	defer func() {
		if p != nil && !p.exited() {
			p.halt(syscall.SIGKILL, time.Second)
		}
		if os.Getenv("FJORD_BENCH_KEEP") != "" {
			logf("[many] kept %s", dir)
			return
		}
		os.RemoveAll(dir)
	}()
	time.Sleep(time.Second) // let start-up garbage settle before the baseline
	if res.RSSBaseMiB, err = rssMiB(p.cmd.Process.Pid); err != nil {
		return err
	}
	heapBase, err := heapInUseMiB(ctx, metrics)
	if err != nil {
		return err
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ClientID("fjord-bench-many"),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(5*time.Millisecond),
		kgo.MaxBufferedRecords(n+1))
	if err != nil {
		return err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	adm.SetTimeoutMillis(int32((10 * time.Minute).Milliseconds()))
	start := time.Now()
	logf("[many] creating %d partitions", n)
	r, err := adm.CreateTopic(ctx, int32(n), 1, nil, manyTopic)
	if err == nil {
		err = r.Err
	}
	if errors.Is(err, kerr.RequestTimedOut) {
		// The creation goes on in the controller; the clock keeps running.
		logf("[many] CreateTopics timed out (%v); waiting for the partitions", err)
	} else if err != nil {
		return fmt.Errorf("create topic: %w", err)
	}
	if err := waitServing(ctx, adm, n, 0); err != nil {
		return err
	}
	res.CreateSec = time.Since(start).Seconds()

	start = time.Now()
	logf("[many] one record to each partition")
	recs := make([]*kgo.Record, n)
	for i := range recs {
		recs[i] = &kgo.Record{Topic: manyTopic, Partition: int32(i), Value: []byte("x")}
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		return fmt.Errorf("produce: %w", err)
	}
	res.ProduceSec = time.Since(start).Seconds()
	runtime.GC()
	if res.RSSMiB, err = rssMiB(p.cmd.Process.Pid); err != nil {
		return err
	}
	res.RSSPerPartKiB = (res.RSSMiB - res.RSSBaseMiB) * 1024 / float64(n)
	heap, err := heapInUseMiB(ctx, metrics)
	if err != nil {
		return err
	}
	res.HeapMiB = heap
	res.HeapPerPartKiB = (heap - heapBase) * 1024 / float64(n)
	cl.Close()

	restart := func(what string) (float64, error) {
		start := time.Now()
		var err error
		np, err := startFjordIn(ctx, cfg.fjordBin, dir, addr, 10*time.Minute, extra...)
		if err != nil {
			return 0, fmt.Errorf("restart after %s: %w", what, err)
		}
		p = np
		cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ClientID("fjord-bench-many"))
		if err != nil {
			return 0, err
		}
		defer cl.Close()
		if err := waitServing(ctx, kadm.NewClient(cl), n, 1); err != nil {
			return 0, fmt.Errorf("after %s: %w", what, err)
		}
		sec := time.Since(start).Seconds()
		logf("[many] serving %d partitions %.1f s after the restart that followed a %s", n, sec, what)
		return sec, nil
	}

	start = time.Now()
	p.halt(syscall.SIGTERM, 5*time.Minute)
	res.CleanStopSec = time.Since(start).Seconds()
	logf("[many] clean stop took %.1f s", res.CleanStopSec)
	if res.CleanRestartSec, err = restart("clean stop"); err != nil {
		return err
	}
	if res.RSSAfterMiB, err = rssMiB(p.cmd.Process.Pid); err != nil {
		return err
	}
	p.halt(syscall.SIGKILL, time.Minute)
	if res.KillRestartSec, err = restart("kill -9"); err != nil {
		return err
	}
	return nil
}

// heapInUseMiB reads go_memstats_heap_inuse_bytes from the node's
// Prometheus endpoint, after asking nothing else of it.
func heapInUseMiB(ctx context.Context, addr string) (float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/metrics", nil)
	if err != nil {
		return 0, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, fmt.Errorf("metrics: %w", err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "go_memstats_heap_inuse_bytes "); ok {
			b, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			return b / (1 << 20), err
		}
	}
	return 0, fmt.Errorf("metrics at %s: no go_memstats_heap_inuse_bytes", addr)
}

// waitServing polls ListOffsets until every one of the n partitions of
// the topic answers without error and with an end offset of at least
// want.
func waitServing(ctx context.Context, adm *kadm.Client, n int, want int64) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	last := ""
	for {
		ends, err := adm.ListEndOffsets(ctx, manyTopic)
		ok := 0
		if err == nil {
			ends.Each(func(o kadm.ListedOffset) {
				if o.Err == nil && o.Offset >= want {
					ok++
				}
			})
			last = fmt.Sprintf("%d of %d partitions serving", ok, n)
		} else {
			last = err.Error()
		}
		if ok == n {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("partitions not serving: %s", last)
		case <-time.After(100 * time.Millisecond):
		}
	}
}
