package main

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The tier mode (-tier) measures tiered storage (issue 29) on one fjord
// node whose remote store is a weed mini (SeaweedFS) the bench starts on
// loopback:
//
//  1. produce with tiering on and off: the produce suite's records/s and
//     the latency suite's ack p99 (the same code, flags and settings as
//     those suites) on a topic with remote.storage.enable=true and small
//     segments, so that segments roll, upload and leave the local disk
//     during the measurement, and on the same topic config without
//     remote storage;
//  2. reading -tier-read-bytes from offset 0 of a tiered topic all of
//     whose measured records are only in the store (the node's earliest
//     local offset is past them), cold (a fresh broker process) and warm
//     (the same read again);
//  3. producing -tier-produce-bytes to a tiered topic with
//     local.retention.bytes set, sampling the partitions' directories on
//     disk every second: the largest each reaches against
//     local.retention.bytes plus one segment, and the bytes in the store
//     at the end.
//
// It is not a step of -all: at its default sizes it writes 6 GiB and
// reads 1 GiB, several minutes on a laptop-class machine.

// tierBucket is the bucket the node's segments go to.
const tierBucket = "fjord-bench"

// tierStepWait bounds each wait for the node to catch up (uploads to
// drain, local copies to go, partitions to serve after the restart).
const tierStepWait = 10 * time.Minute

// tierSampleEvery is the disk sampling period of step 3.
const tierSampleEvery = time.Second

// TierResult is the outcome of -tier: what -json prints and -json-out
// writes.
type TierResult struct {
	Command  string         `json:"command"`
	Settings map[string]any `json:"settings"`
	Started  time.Time      `json:"started"`
	Produce  *TierProduce   `json:"produce,omitempty"`
	Read     *TierRead      `json:"read,omitempty"`
	Bound    *TierBound     `json:"bound,omitempty"`
	Errors   []string       `json:"errors,omitempty"`
	Aborted  string         `json:"aborted,omitempty"`
}

// TierProduce is step 1. The ratios are on over off (nil: a side is
// missing): records/s below 1 and p99 above 1 are what tiering costs.
type TierProduce struct {
	Off              *TierProduceRun `json:"off"`
	On               *TierProduceRun `json:"on"`
	RecordsPerSecOn  *float64        `json:"records_per_sec_ratio,omitempty"`
	AckP99Ratio      *float64        `json:"ack_p99_ratio,omitempty"`
	SegmentBytes     int64           `json:"segment_bytes"`
	LocalRetentionOn int64           `json:"local_retention_bytes_on"`
}

// TierProduceRun is one side of step 1: the produce suite's figure and
// the broker's CPU over it, the latency suite's, and how many segments
// the node copied to the store during each (0 on the off side: the
// proof that uploads ran on the on side).
type TierProduceRun struct {
	Produce             *Throughput `json:"produce,omitempty"`
	BrokerCPUSeconds    float64     `json:"broker_cpu_s"`
	StoreCPUSeconds     float64     `json:"store_cpu_s"`
	CopiedDuringProduce float64     `json:"segments_copied_during_produce"`
	Latency             *Latency    `json:"latency,omitempty"`
	CopiedDuringLatency float64     `json:"segments_copied_during_latency"`
	UploadDrainSeconds  float64     `json:"upload_drain_s"` // after the produce: until nothing waits to be copied
	LatencyDrainSeconds float64     `json:"latency_upload_drain_s"`
}

// TierRead is step 2. Cold is the first read after a clean restart of
// the node (a fresh process: nothing of the topic in its memory); Warm
// is the same read again on that process. Both are from the store: the
// node's earliest local offset of every partition was past the measured
// records before the restart.
type TierRead struct {
	Bytes           int64       `json:"bytes"` // value bytes of the measured records
	Records         int64       `json:"records"`
	Produce         *Throughput `json:"produce,omitempty"`
	FillerRecords   int64       `json:"filler_records"` // written after them so their last segments roll
	EndOffsets      []int64     `json:"end_offsets"`    // per partition: the measured records are below
	LocalStart      []int64     `json:"local_start"`    // per partition: earliest local offset (-4) before the reads
	RemoteWaitSec   float64     `json:"remote_wait_s"`  // from the filler's last ack until every partition's local start passed its end
	RestartSec      float64     `json:"restart_s"`      // clean stop and start until the partitions serve
	CacheBytes      int64       `json:"cache_bytes"`    // rsm.config.fetch.chunk.cache.size (0: no read cache)
	Cold            *Throughput `json:"cold,omitempty"` // fresh broker process
	Warm            *Throughput `json:"warm,omitempty"` // second read
	ColdCPUSeconds  float64     `json:"cold_broker_cpu_s"`
	WarmCPUSeconds  float64     `json:"warm_broker_cpu_s"`
	ColdStoreCPUSec float64     `json:"cold_store_cpu_s"`
	WarmStoreCPUSec float64     `json:"warm_store_cpu_s"`
}

// TierBound is step 3: local disk against local.retention.bytes.
type TierBound struct {
	Bytes               int64       `json:"bytes"`
	Produce             *Throughput `json:"produce,omitempty"`
	Paced               *Latency    `json:"paced,omitempty"` // -tier-bound-rate: the paced producer's acks instead
	BrokerCPUSeconds    float64     `json:"broker_cpu_s"`
	StoreCPUSeconds     float64     `json:"store_cpu_s"`
	LocalRetentionBytes int64       `json:"local_retention_bytes"`
	SegmentBytes        int64       `json:"segment_bytes"`
	BoundBytes          int64       `json:"bound_bytes"`         // local.retention.bytes + one active segment
	MaxLocalBytes       []int64     `json:"max_local_bytes"`     // per partition, du of its directory, over every sample
	MaxLocal            int64       `json:"max_local_bytes_max"` // the largest of them
	Within              bool        `json:"within_bound"`
	Samples             int         `json:"samples"`
	LocalBytesEnd       []int64     `json:"local_bytes_end"`
	RemoteAtLastAck     float64     `json:"remote_bytes_at_last_ack"` // sum of fjord_remote_log_size_bytes
	RemoteBytesEnd      float64     `json:"remote_bytes_end"`         // the same once nothing waits to be copied
	DrainSec            float64     `json:"upload_drain_s"`
	DrainMBps           float64     `json:"upload_drain_mb_per_s"` // copied from the last ack until nothing waited: the store's copy rate here
	StoreDiskBytes      int64       `json:"store_disk_bytes"`      // du of weed's data dir at the end
}

// tierNode is the node under test and what the steps need of it.
type tierNode struct {
	cfg     *config
	bin     string
	dir     string // the node's temp dir (data/, fjord.log)
	addr    string
	metrics string // fjord.metrics.listener
	extra   []string
	proc    *fjordProc
	weed    *weedProc
}

func runTier(ctx context.Context, cfg *config, w io.Writer) int {
	res := &TierResult{
		Command: commandLine(os.Args[1:]),
		Settings: map[string]any{
			"partitions": cfg.partitions, "records": cfg.records, "size": cfg.size, "rate": cfg.rate,
			"duration": cfg.duration.String(), "linger": lingerString(cfg), "compression": cfg.compression,
			"timeout": cfg.timeout.String(), "latency_record_size": latencyRecordSize,
			"tier_read_bytes": cfg.tierReadBytes, "tier_produce_bytes": cfg.tierProduceBytes,
			"tier_segment_bytes": cfg.tierSegmentBytes, "tier_produce_segment_bytes": cfg.tierProduceSegmentBytes,
			"tier_local_retention_bytes": cfg.tierLocalRetention, "tier_interval": cfg.tierInterval.String(),
			"tier_cache_bytes": cfg.tierCacheBytes, "tier_steps": strings.Join(tierStepList(cfg), ","),
		},
		Started: time.Now().UTC().Truncate(time.Second),
	}
	fail := func(format string, args ...any) {
		msg := fmt.Sprintf(format, args...)
		res.Errors = append(res.Errors, msg)
		logf("[tier] %s", msg)
	}
	if err := tierRun(ctx, cfg, res, fail); err != nil {
		fail("%v", err)
	}
	if err := ctx.Err(); err != nil {
		res.Aborted = fmt.Sprintf("run stopped early: %v (timeout %s)", context.Cause(ctx), cfg.timeout)
	}
	if cfg.json {
		printJSONTo(w, res)
	} else {
		printTier(w, cfg, res)
	}
	code := 0
	if cfg.jsonOut != "" {
		if err := writeJSONFile(cfg.jsonOut, res); err != nil {
			fmt.Fprintln(os.Stderr, "fjord-bench:", err)
			code = 1
		}
	}
	if len(res.Errors) > 0 || res.Aborted != "" {
		code = 1
	}
	return code
}

// tierStepList is the steps this run takes, in order.
func tierStepList(cfg *config) []string {
	var out []string
	for _, s := range tierSteps {
		if !cfg.tierSkip[s] {
			out = append(out, s)
		}
	}
	return out
}

// tierSteps are the steps of -tier, each can be left out with -tier-skip.
var tierSteps = []string{"produce", "read", "bound"}

func tierRun(ctx context.Context, cfg *config, res *TierResult, fail func(string, ...any)) error {
	weed, err := startWeed(ctx, cfg.weedBin)
	if err != nil {
		return err
	}
	defer weed.stop()
	logf("[weed] pid %d serving S3 on %s", weed.pid(), weed.Endpoint)
	if err := weed.createBucket(ctx, tierBucket); err != nil {
		return err
	}
	n, err := startTierNode(ctx, cfg, weed)
	if err != nil {
		return err
	}
	defer n.stop()
	steps := map[string]func() error{
		"produce": func() (err error) { res.Produce, err = n.stepProduce(ctx); return err },
		"read":    func() (err error) { res.Read, err = n.stepRead(ctx); return err },
		"bound":   func() (err error) { res.Bound, err = n.stepBound(ctx); return err },
	}
	for _, s := range tierStepList(cfg) {
		if ctx.Err() != nil {
			break
		}
		logf("[tier] step %s (load %s)", s, loadAvg())
		if err := steps[s](); err != nil {
			fail("%s: %v", s, err)
		}
		if n.proc.exited() {
			return fmt.Errorf("fjord exited during the %s step; its log: %s", s, n.proc.logTail())
		}
	}
	return nil
}

// startTierNode starts one fjord node with tiered storage on weed: the
// keys a user sets (Aiven's plugin's names), the remote log manager and
// the retention check every -tier-interval, and /metrics on a port of
// its own.
func startTierNode(ctx context.Context, cfg *config, weed *weedProc) (*tierNode, error) {
	ports, err := freePorts(2)
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "fjord-bench-tier-")
	if err != nil {
		return nil, err
	}
	n := &tierNode{cfg: cfg, bin: cfg.fjordBin, dir: dir,
		addr:    net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[0])),
		metrics: net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[1])), weed: weed}
	ms := strconv.FormatInt(cfg.tierInterval.Milliseconds(), 10)
	for _, kv := range []string{
		"fjord.metrics.listener=" + n.metrics,
		"remote.log.storage.system.enable=true",
		"remote.log.storage.manager.class.name=io.aiven.kafka.tieredstorage.RemoteStorageManager",
		"rsm.config.storage.backend.class=io.aiven.kafka.tieredstorage.storage.s3.S3Storage",
		"rsm.config.storage.s3.endpoint.url=" + weed.Endpoint,
		"rsm.config.storage.s3.bucket.name=" + tierBucket,
		"rsm.config.storage.s3.region=" + weed.Region,
		"rsm.config.storage.s3.path.style.access.enabled=true",
		"rsm.config.storage.aws.access.key.id=" + weed.AccessKey,
		"rsm.config.storage.aws.secret.access.key=" + weed.SecretKey,
		"remote.log.manager.task.interval.ms=" + ms,
		"log.retention.check.interval.ms=" + ms,
	} {
		n.extra = append(n.extra, "--override", kv)
	}
	if cfg.tierCacheBytes > 0 {
		n.extra = append(n.extra,
			"--override", "rsm.config.fetch.chunk.cache.class=io.aiven.kafka.tieredstorage.fetch.cache.MemoryChunkCache",
			"--override", "rsm.config.fetch.chunk.cache.size="+strconv.FormatInt(cfg.tierCacheBytes, 10))
	}
	if n.proc, err = startFjordIn(ctx, n.bin, dir, n.addr, startupWait, n.extra...); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	logf("[fjord] pid %d serving on %s (data %s, metrics %s)", n.proc.cmd.Process.Pid, n.addr, dir, n.metrics)
	return n, nil
}

// restart stops the node cleanly and starts it again on its data.
func (n *tierNode) restart(ctx context.Context) error {
	n.proc.halt(syscall.SIGTERM, 30*time.Second)
	p, err := startFjordIn(ctx, n.bin, n.dir, n.addr, startupWait, n.extra...)
	if err != nil {
		return fmt.Errorf("restart: %w", err)
	}
	n.proc = p
	return nil
}

func (n *tierNode) stop() {
	if n.proc != nil && !n.proc.exited() {
		n.proc.halt(syscall.SIGTERM, 10*time.Second)
	}
	removeUnlessKept(n.dir)
}

// bench is the client suites' state on this node; cfg is the run's with
// changes (records).
func (n *tierNode) bench(cfg *config) (*bench, func(), error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(n.addr), kgo.ClientID("fjord-bench-admin"))
	if err != nil {
		return nil, nil, err
	}
	return &bench{cfg: cfg, target: "fjord tiered", brokers: []string{n.addr},
		runID: strconv.FormatInt(time.Now().UnixNano(), 36), adm: kadm.NewClient(cl)}, cl.Close, nil
}

// createTopic creates topic on the node with -partitions partitions,
// RF 1, and configs.
func (n *tierNode) createTopic(ctx context.Context, adm *kadm.Client, topic string, configs map[string]string) error {
	c := map[string]*string{}
	for k, v := range configs {
		c[k] = kadm.StringPtr(v)
	}
	r, err := adm.CreateTopic(ctx, int32(n.cfg.partitions), 1, c, topic)
	if err == nil {
		err = r.Err
	}
	if err != nil {
		return fmt.Errorf("create topic %s: %w", topic, err)
	}
	return nil
}

// tieredConfigs are a tiered topic's configs: segments of segBytes,
// localBytes kept locally once copied, no limit on the whole log.
func tieredConfigs(segBytes, localBytes int64) map[string]string {
	return map[string]string{
		"remote.storage.enable": "true",
		"segment.bytes":         strconv.FormatInt(segBytes, 10),
		"local.retention.bytes": strconv.FormatInt(localBytes, 10),
		"retention.bytes":       "-1",
	}
}

// cpu is the CPU seconds of the broker and of the store so far (0 for
// one that cannot be read, logged).
func (n *tierNode) cpu() (broker, store float64) {
	var err error
	if broker, err = cpuSeconds(n.proc.cmd.Process.Pid); err != nil {
		logf("[tier] broker CPU time: %v", err)
	}
	if store, err = cpuSeconds(n.weed.pid()); err != nil {
		logf("[tier] weed CPU time: %v", err)
	}
	return broker, store
}

// metric is the sum of the node's series name (those with the labels of
// match), from /metrics now.
func (n *tierNode) metric(ctx context.Context, name string, match map[string]string) (float64, error) {
	text, err := fetchMetrics(ctx, n.metrics)
	if err != nil {
		return 0, err
	}
	v, _ := promSum(text, name, match)
	return v, nil
}

// copied is fjord_remote_segments_copied_total (0, logged, if unreadable:
// the figure is informative, not a gate).
func (n *tierNode) copied(ctx context.Context) float64 {
	v, err := n.metric(ctx, "fjord_remote_segments_copied_total", nil)
	if err != nil {
		logf("[tier] %v", err)
	}
	return v
}

// partDir is partition p of topic's directory on the node.
func (n *tierNode) partDir(topic string, p int) string {
	return filepath.Join(n.proc.dataDir(), fmt.Sprintf("%s-%d", topic, p))
}

// waitCopied waits until the store holds every sealed segment of every
// partition of topic: the latest tiered offset (ListOffsets -5) reaches
// the offset before the active segment's base, read from the partition's
// directory (the newest .log file). The node's upload-lag gauges are no
// use here: they are noted at the end of a round, so right after the
// last ack they still say what the round before it saw. It returns how
// long the wait took, at most tierStepWait.
func (n *tierNode) waitCopied(ctx context.Context, topic string) (float64, error) {
	start := time.Now()
	ctx, cancel := context.WithTimeout(ctx, tierStepWait)
	defer cancel()
	parts := n.cfg.partitions
	for {
		tiered, err := listOffsets(ctx, n.addr, topic, parts, -5)
		last := ""
		if err != nil {
			last = err.Error()
		} else {
			for p := range parts {
				base, err := activeBase(n.partDir(topic, p))
				if err != nil {
					last = err.Error()
					break
				}
				if tiered[p] < base-1 {
					last = fmt.Sprintf("partition %d: copied up to offset %d, its active segment starts at %d", p, tiered[p], base)
					break
				}
			}
		}
		if last == "" {
			return time.Since(start).Seconds(), nil
		}
		select {
		case <-ctx.Done():
			return time.Since(start).Seconds(), fmt.Errorf("%s: sealed segments not all copied after %s: %s", topic, tierStepWait, last)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// activeBase is the base offset of the newest segment in a partition's
// directory: the active one, which the node never copies.
func activeBase(dir string) (int64, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return 0, err
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	base, ok := newestSegment(names)
	if !ok {
		return 0, fmt.Errorf("%s: no segment", dir)
	}
	return base, nil
}

// newestSegment is the largest base offset among segment file names
// (twenty digits, ".log"); other files are ignored.
func newestSegment(names []string) (int64, bool) {
	best, ok := int64(-1), false
	for _, name := range names {
		num, isLog := strings.CutSuffix(name, ".log")
		if !isLog || len(num) != 20 {
			continue
		}
		v, err := strconv.ParseInt(num, 10, 64)
		if err != nil || v < 0 {
			continue
		}
		if v > best {
			best, ok = v, true
		}
	}
	return best, ok
}

// stepProduce is step 1: the produce and latency suites on a topic
// without and with remote storage, same segment size. Off runs first in
// each pair, after an unmeasured warm-up; after each tiered measurement
// the bench waits until its sealed segments are all copied, so its
// uploads do not run in the next measurement's window.
func (n *tierNode) stepProduce(ctx context.Context) (*TierProduce, error) {
	cfg := *n.cfg
	cfg.txn = 0
	b, closeAdm, err := n.bench(&cfg)
	if err != nil {
		return nil, err
	}
	defer closeAdm()
	seg := cfg.tierProduceSegmentBytes
	res := &TierProduce{Off: &TierProduceRun{}, On: &TierProduceRun{}, SegmentBytes: seg, LocalRetentionOn: 2 * seg}
	configs := map[string]map[string]string{
		"off": {"segment.bytes": strconv.FormatInt(seg, 10)},
		"on":  tieredConfigs(seg, 2*seg),
	}
	runs := map[string]*TierProduceRun{"off": res.Off, "on": res.On}
	var firstErr error
	note := func(side, suite string, err error) {
		logf("[tier] produce %s, %s: %v", side, suite, err)
		if firstErr == nil {
			firstErr = fmt.Errorf("%s, tiering %s: %w", suite, side, err)
		}
	}
	// Whichever side went first would pay for the run's first topic,
	// connections and file creation: a tenth of the records go to a
	// throwaway topic first, unmeasured.
	warm := cfg
	warm.records = max(cfg.records/10, 1)
	wb := *b
	wb.cfg = &warm
	wtopic := "fjord-bench-tier-warmup-" + b.runID
	if err := n.createTopic(ctx, b.adm, wtopic, configs["off"]); err != nil {
		return res, err
	}
	if _, err := wb.produceThroughput(ctx, wtopic); err != nil {
		return res, fmt.Errorf("warm-up produce: %w", err)
	}
	for _, side := range []string{"off", "on"} {
		r := runs[side]
		topic := fmt.Sprintf("fjord-bench-tier-produce-%s-%s", side, b.runID)
		if err := n.createTopic(ctx, b.adm, topic, configs[side]); err != nil {
			return res, err
		}
		logf("[tier] produce, tiering %s: %d x %d B ...", side, cfg.records, cfg.size)
		c0 := n.copied(ctx)
		b0, s0 := n.cpu()
		t, err := b.produceThroughput(ctx, topic)
		if err != nil {
			note(side, "produce", err)
			continue
		}
		b1, s1 := n.cpu()
		r.Produce, r.BrokerCPUSeconds, r.StoreCPUSeconds = t, b1-b0, s1-s0
		r.CopiedDuringProduce = n.copied(ctx) - c0
		if side == "on" {
			if r.UploadDrainSeconds, err = n.waitCopied(ctx, topic); err != nil {
				note(side, "produce", err)
			}
		}
	}
	for _, side := range []string{"off", "on"} {
		r := runs[side]
		topic := fmt.Sprintf("fjord-bench-tier-latency-%s-%s", side, b.runID)
		if err := n.createTopic(ctx, b.adm, topic, configs[side]); err != nil {
			return res, err
		}
		logf("[tier] latency, tiering %s: %g/s for %s ...", side, cfg.rate, cfg.duration)
		c0 := n.copied(ctx)
		l, err := b.produceLatency(ctx, topic)
		if err != nil {
			note(side, "latency", err)
			continue
		}
		r.Latency = l
		r.CopiedDuringLatency = n.copied(ctx) - c0
		if side == "on" {
			if r.LatencyDrainSeconds, err = n.waitCopied(ctx, topic); err != nil {
				note(side, "latency", err)
			}
		}
	}
	if res.On.Produce != nil && res.Off.Produce != nil {
		res.RecordsPerSecOn = ratioOf(res.On.Produce.RecordsPerSec, res.Off.Produce.RecordsPerSec)
	}
	if res.On.Latency != nil && res.Off.Latency != nil {
		res.AckP99Ratio = ratioOf(res.On.Latency.P99Ms, res.Off.Latency.P99Ms)
	}
	return res, firstErr
}

// ratioOf is a/b, nil when b is 0.
func ratioOf(a, b float64) *float64 {
	if b == 0 {
		return nil
	}
	r := a / b
	return &r
}

// stepRead is step 2. It writes -tier-read-bytes of -size values to a
// tiered topic that keeps nothing local once copied
// (local.retention.bytes 0), then a segment's worth more to every
// partition so that the measured records' last segment rolls and is
// copied too, waits until every partition's earliest local offset is at
// or past the end of the measured records, restarts the node, and reads
// the measured records from offset 0 twice.
func (n *tierNode) stepRead(ctx context.Context) (*TierRead, error) {
	cfg := *n.cfg
	cfg.txn = 0
	records := max(n.cfg.tierReadBytes/int64(cfg.size), 1)
	cfg.records = int(records)
	b, closeAdm, err := n.bench(&cfg)
	if err != nil {
		return nil, err
	}
	defer closeAdm()
	res := &TierRead{Bytes: records * int64(cfg.size), Records: records, CacheBytes: n.cfg.tierCacheBytes}
	topic := "fjord-bench-tier-read-" + b.runID
	seg := n.cfg.tierSegmentBytes
	if err := n.createTopic(ctx, b.adm, topic, tieredConfigs(seg, 0)); err != nil {
		return res, err
	}
	logf("[tier] read: writing %d x %d B ...", records, cfg.size)
	if res.Produce, err = b.produceThroughput(ctx, topic); err != nil {
		return res, fmt.Errorf("writing the records to read: %w", err)
	}
	ends, err := listOffsets(ctx, n.addr, topic, cfg.partitions, -1)
	if err != nil {
		return res, err
	}
	res.EndOffsets = ends
	if res.FillerRecords, err = n.fill(ctx, topic, seg); err != nil {
		return res, err
	}
	start := time.Now()
	if res.LocalStart, err = n.waitLocalStart(ctx, topic, ends); err != nil {
		return res, err
	}
	res.RemoteWaitSec = time.Since(start).Seconds()
	logf("[tier] read: every measured record only in the store after %.1f s (earliest local %v, ends %v); restarting the node", res.RemoteWaitSec, res.LocalStart, ends)

	start = time.Now()
	if err := n.restart(ctx); err != nil {
		return res, err
	}
	if err := n.waitServing(ctx, topic, ends); err != nil {
		return res, err
	}
	res.RestartSec = time.Since(start).Seconds()

	for _, pass := range []string{"cold", "warm"} {
		logf("[tier] read %s: %d records from offset 0 ...", pass, records)
		b0, s0 := n.cpu()
		t, err := readRange(ctx, b, topic, ends)
		if err != nil {
			return res, fmt.Errorf("%s read: %w", pass, err)
		}
		b1, s1 := n.cpu()
		if pass == "cold" {
			res.Cold, res.ColdCPUSeconds, res.ColdStoreCPUSec = t, b1-b0, s1-s0
		} else {
			res.Warm, res.WarmCPUSeconds, res.WarmStoreCPUSec = t, b1-b0, s1-s0
		}
	}
	return res, nil
}

// fill writes one segment's worth of -size records (plus one) to every
// partition of topic: whatever the active segment held, it rolls, so
// every record before the filler is in a sealed segment the node copies.
// It returns how many records it wrote.
func (n *tierNode) fill(ctx context.Context, topic string, segBytes int64) (int64, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(n.addr), kgo.ClientID("fjord-bench-filler"), kgo.DefaultProduceTopic(topic),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.ProducerBatchCompression(kgo.NoCompression()))
	if err != nil {
		return 0, err
	}
	defer cl.Close()
	value := make([]byte, n.cfg.size)
	per := segBytes/int64(n.cfg.size) + 1
	var total, failed atomic.Int64
	var firstErr atomic.Value
	promise := func(_ *kgo.Record, err error) {
		if err != nil && failed.Add(1) == 1 {
			firstErr.Store(err)
		}
	}
	for p := range int32(n.cfg.partitions) {
		for range per {
			cl.Produce(ctx, &kgo.Record{Partition: p, Value: value}, promise)
			total.Add(1)
		}
	}
	if err := cl.Flush(ctx); err != nil {
		return total.Load(), fmt.Errorf("filler: %w", err)
	}
	// A partition short of its filler may never roll: the wait for the
	// local copies to go would then end only at its bound.
	if k := failed.Load(); k > 0 {
		return total.Load(), fmt.Errorf("filler: %d of %d records failed, first: %v", k, total.Load(), firstErr.Load())
	}
	return total.Load(), nil
}

// waitLocalStart polls ListOffsets EARLIEST_LOCAL (-4) until every
// partition's local log starts at or past its end in ends, at most
// tierStepWait; it returns the local starts it saw last.
func (n *tierNode) waitLocalStart(ctx context.Context, topic string, ends []int64) ([]int64, error) {
	ctx, cancel := context.WithTimeout(ctx, tierStepWait)
	defer cancel()
	for {
		local, err := listOffsets(ctx, n.addr, topic, len(ends), -4)
		if err == nil && localPast(local, ends) {
			return local, nil
		}
		select {
		case <-ctx.Done():
			return local, fmt.Errorf("local copies still there after %s: earliest local %v, ends %v (%v)", tierStepWait, local, ends, err)
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// localPast reports whether every local start is at or past its end.
func localPast(local, ends []int64) bool {
	if len(local) != len(ends) {
		return false
	}
	for p := range ends {
		if local[p] < ends[p] {
			return false
		}
	}
	return true
}

// waitServing waits after a restart until every partition of topic
// answers ListOffsets with at least its end in ends.
func (n *tierNode) waitServing(ctx context.Context, topic string, ends []int64) error {
	ctx, cancel := context.WithTimeout(ctx, tierStepWait)
	defer cancel()
	for {
		got, err := listOffsets(ctx, n.addr, topic, len(ends), -1)
		if err == nil && localPast(got, ends) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s not serving after the restart: end offsets %v, want %v (%v)", topic, got, ends, err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// listOffsets asks addr for the offset at ts (-1 latest, -2 earliest,
// -4 earliest local) of partitions 0..parts-1 of topic.
func listOffsets(ctx context.Context, addr, topic string, parts int, ts int64) ([]int64, error) {
	req := kmsg.NewPtrListOffsetsRequest()
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = topic
	for p := range int32(parts) {
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Partition, rp.Timestamp, rp.CurrentLeaderEpoch = p, ts, -1
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	resp, err := direct(ctx, addr, req)
	if err != nil {
		return nil, err
	}
	out := make([]int64, parts)
	seen := 0
	for _, t := range resp.(*kmsg.ListOffsetsResponse).Topics {
		for _, p := range t.Partitions {
			if p.ErrorCode != 0 {
				return nil, fmt.Errorf("ListOffsets(%d) %s[%d]: %w", ts, t.Topic, p.Partition, kerr.ErrorForCode(p.ErrorCode))
			}
			if p.Partition >= 0 && int(p.Partition) < parts {
				out[p.Partition] = p.Offset
				seen++
			}
		}
	}
	if seen != parts {
		return nil, fmt.Errorf("ListOffsets(%d) %s: %d of %d partitions answered", ts, topic, seen, parts)
	}
	return out, nil
}

// readRange reads every partition p of topic from offset 0 up to
// ends[p] with a fresh consumer (the suites' client options, no group)
// and counts the records below the ends: records past them (the filler)
// that come in the same fetches are not counted.
func readRange(ctx context.Context, b *bench, topic string, ends []int64) (*Throughput, error) {
	parts := make(map[int32]kgo.Offset, len(ends))
	left := 0
	for p, end := range ends {
		if end > 0 {
			parts[int32(p)] = kgo.NewOffset().At(0)
			left++
		}
	}
	cl, err := kgo.NewClient(b.clientOpts(kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: parts}))...)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	var n, bytes int64
	done := make([]bool, len(ends))
	start := time.Now()
	for left > 0 {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("after %d records: %w", n, err)
		}
		if errs := fs.Errors(); len(errs) > 0 {
			e := errs[0]
			return nil, fmt.Errorf("fetch %s[%d] after %d records: %w", e.Topic, e.Partition, n, e.Err)
		}
		fs.EachPartition(func(fp kgo.FetchTopicPartition) {
			p := fp.Partition
			if p < 0 || int(p) >= len(ends) || done[p] {
				return
			}
			for _, r := range fp.Records {
				if r.Offset >= ends[p] {
					break
				}
				n++
				bytes += int64(len(r.Value))
				if r.Offset == ends[p]-1 {
					done[p] = true
					left--
					break
				}
			}
		})
	}
	return newThroughput(n, bytes, time.Since(start)), nil
}

// stepBound is step 3: -tier-produce-bytes to a tiered topic with
// local.retention.bytes -tier-local-retention-bytes while a sampler
// reads the size on disk of each partition's directory every second; the
// sampling goes on after the last ack until nothing waits to be copied
// (and one more retention check has run), since that is when the node
// catches up.
func (n *tierNode) stepBound(ctx context.Context) (*TierBound, error) {
	cfg := *n.cfg
	cfg.txn = 0
	records := max(n.cfg.tierProduceBytes/int64(cfg.size), 1)
	cfg.records = int(records)
	b, closeAdm, err := n.bench(&cfg)
	if err != nil {
		return nil, err
	}
	defer closeAdm()
	seg, local := n.cfg.tierSegmentBytes, n.cfg.tierLocalRetention
	res := &TierBound{Bytes: records * int64(cfg.size), LocalRetentionBytes: local, SegmentBytes: seg, BoundBytes: local + seg}
	topic := "fjord-bench-tier-bound-" + b.runID
	if err := n.createTopic(ctx, b.adm, topic, tieredConfigs(seg, local)); err != nil {
		return res, err
	}
	var dirs []string
	for p := range cfg.partitions {
		dirs = append(dirs, n.partDir(topic, p))
	}
	s := startDiskSampler(dirs, tierSampleEvery)
	logf("[tier] bound: writing %d x %d B, local.retention.bytes %d, segment.bytes %d ...", records, cfg.size, local, seg)
	b0, s0 := n.cpu()
	if rate := n.cfg.tierBoundRate; rate > 0 {
		// Paced: the latency suite's producer, at rate for as long as the
		// bytes take (it sends 1 KiB values).
		cfg.rate = rate
		cfg.duration = time.Duration(float64(records) / rate * float64(time.Second))
		res.Bytes = int64(float64(latencyRecordSize) * rate * cfg.duration.Seconds())
		logf("[tier] bound: paced at %.0f records/s for %s", rate, cfg.duration.Round(time.Second))
		res.Paced, err = b.produceLatency(ctx, topic)
	} else {
		res.Produce, err = b.produceThroughput(ctx, topic)
	}
	b1, s1 := n.cpu()
	res.BrokerCPUSeconds, res.StoreCPUSeconds = b1-b0, s1-s0
	if err == nil {
		res.RemoteAtLastAck, err = n.metric(ctx, "fjord_remote_log_size_bytes", map[string]string{"topic": topic})
	}
	if err == nil {
		res.DrainSec, err = n.waitCopied(ctx, topic)
	}
	if err == nil {
		// The last copies' local segments go at the next retention check.
		select {
		case <-time.After(2*n.cfg.tierInterval + tierSampleEvery):
		case <-ctx.Done():
		}
		res.RemoteBytesEnd, err = n.metric(ctx, "fjord_remote_log_size_bytes", map[string]string{"topic": topic})
		if res.DrainSec > 0 {
			res.DrainMBps = (res.RemoteBytesEnd - res.RemoteAtLastAck) / 1e6 / res.DrainSec
		}
	}
	peaks, samples := s.stop()
	res.MaxLocalBytes, res.Samples = peaks, samples
	for _, d := range dirs {
		res.LocalBytesEnd = append(res.LocalBytesEnd, duBytes(d))
	}
	res.MaxLocal, res.Within = peakWithin(peaks, res.BoundBytes)
	res.StoreDiskBytes = n.weed.dataBytes()
	return res, err
}

// peakWithin returns the largest of peaks and whether it is at most
// bound.
func peakWithin(peaks []int64, bound int64) (int64, bool) {
	var m int64
	for _, v := range peaks {
		m = max(m, v)
	}
	return m, m <= bound
}

// diskSampler tracks the largest size on disk of each of a set of
// directories. Its goroutine owns peaks and n until stop returns them.
type diskSampler struct {
	dirs  []string
	peaks []int64
	n     int
	quit  chan struct{}
	done  chan struct{}
}

func startDiskSampler(dirs []string, every time.Duration) *diskSampler {
	s := &diskSampler{dirs: dirs, peaks: make([]int64, len(dirs)), quit: make(chan struct{}), done: make(chan struct{})}
	s.sample() // before returning: the first sample is the state at the start
	go func() {
		defer close(s.done)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-s.quit:
				s.sample()
				return
			case <-t.C:
			}
			s.sample()
		}
	}()
	return s
}

func (s *diskSampler) sample() {
	for i, d := range s.dirs {
		s.peaks[i] = max(s.peaks[i], duBytes(d))
	}
	s.n++
}

// stop takes a last sample and returns the peaks and the sample count.
func (s *diskSampler) stop() ([]int64, int) {
	close(s.quit)
	<-s.done
	return s.peaks, s.n
}

// duBytes is what du reports for dir: the blocks allocated to the files
// under it (a preallocated but unwritten index costs only what it holds),
// 0 for a directory that does not exist (yet).
func duBytes(dir string) int64 {
	var total int64
	filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil // a file deleted while walking: not there any more
		}
		if d.IsDir() {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return nil
		}
		total += allocated(info)
		return nil
	})
	return total
}

// allocated is a file's blocks on disk, or its size where the platform
// does not say.
func allocated(info fs.FileInfo) int64 {
	if st, ok := info.Sys().(*syscall.Stat_t); ok {
		return st.Blocks * 512
	}
	return info.Size()
}

// fetchMetrics returns the node's /metrics text.
func fetchMetrics(ctx context.Context, addr string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/metrics", nil)
	if err != nil {
		return "", err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", fmt.Errorf("metrics: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("metrics at %s: HTTP %d", addr, resp.StatusCode)
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return "", fmt.Errorf("metrics at %s: %w", addr, err)
	}
	return string(b), nil
}
