package broker

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/fjordlog/fjord/broker/replica"
	"github.com/fjordlog/fjord/broker/tier"
	"github.com/fjordlog/fjord/controller"
	"github.com/fjordlog/fjord/storage"
	"github.com/fjordlog/fjord/storage/remote"
	"github.com/prometheus/client_golang/prometheus"
)

// Tiered storage's wiring (broker/tier): the remote log manager reads the
// local replicas and the applied image, and proposes through the
// controller link.

func newTierManager(b *Broker, store remote.Store, interval time.Duration, reader *tier.Reader) *tier.Manager {
	m := tier.NewManager(tier.ManagerConfig{
		NodeID:   b.cfg.NodeID,
		Store:    store,
		Interval: interval,
		Replicas: func() []*replica.Partition {
			var out []*replica.Partition
			for _, t := range b.replicas.Topics() {
				out = append(out, t.Local()...)
			}
			return out
		},
		Image:       func() *controller.Image { return b.replicas.Image() },
		Proposer:    tierProposer{b},
		Logger:      b.log.With().Str("component", "tier").Logger(),
		NoChecksums: !b.cfg.Remote.ObjectChecksums,
	})
	registerTierMetrics(b.metrics.Registerer(), m.Copier)
	registerTierHealth(b.metrics.Registerer(), m, reader)
	return m
}

// registerTierHealth exports what an alert watches (docs/metrics.md): the
// uploads waiting and for how long, the partitions whose rounds fail and
// why, and reads refused for a damaged object.
func registerTierHealth(reg prometheus.Registerer, m *tier.Manager, r *tier.Reader) {
	gauge := func(name, help string, f func(h tier.Health) float64) prometheus.Collector {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, func() float64 { return f(m.Health(time.Now())) })
	}
	reg.MustRegister(
		gauge("fjord_remote_upload_waiting_partitions", "Partitions this node leads with a sealed segment below the high watermark not yet copied to the remote store.",
			func(h tier.Health) float64 { return float64(h.Waiting) }),
		gauge("fjord_remote_upload_lag_segments", "Sealed segments waiting to be copied to the remote store, over the partitions this node leads.",
			func(h tier.Health) float64 { return float64(h.PendingSegments) }),
		gauge("fjord_remote_upload_lag_bytes", "Bytes of the sealed segments waiting to be copied to the remote store.",
			func(h tier.Health) float64 { return float64(h.PendingBytes) }),
		gauge("fjord_remote_upload_oldest_pending_seconds", "How long the oldest segment waiting to be copied has waited (0: none waits). Rising for minutes: the store is down or refuses this node.",
			func(h tier.Health) float64 { return h.OldestPending.Seconds() }),
		gauge("fjord_remote_failing_partitions", "Partitions whose last upload round failed (backing off); 0 when uploads work.",
			func(h tier.Health) float64 { return float64(h.FailingPartitions) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "fjord_remote_read_damaged_total",
			Help: "Reads from the remote store refused because an object was damaged (a batch CRC, offsets or size not as its metadata says): the fetch got KAFKA_STORAGE_ERROR."},
			func() float64 { return float64(r.Damaged()) }),
	)
	for _, kind := range tier.ErrorKinds {
		if kind == "refused" {
			continue // the controller's fencing, not the store's: never an alert
		}
		reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "fjord_remote_store_failing",
			Help:        "1 for the kind of the latest failure while any partition's upload round fails (unavailable, access_denied, no_bucket, ...), else 0.",
			ConstLabels: prometheus.Labels{"kind": kind}},
			func() float64 {
				if m.Health(time.Now()).Failing == kind {
					return 1
				}
				return 0
			}))
	}
}

// registerTierMetrics exports the copier's counters (docs/metrics.md).
func registerTierMetrics(reg prometheus.Registerer, c *tier.Copier) {
	reg.MustRegister(
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "fjord_remote_upload_bytes_total",
			Help: "Bytes this broker put into the remote store for tiered segments (attempts that did not finish included)."},
			func() float64 { return float64(c.Metrics().BytesUploaded) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "fjord_remote_segments_copied_total",
			Help: "Segments this broker copied to the remote store (COPY_FINISHED)."},
			func() float64 { return float64(c.Metrics().SegmentsUploaded) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "fjord_remote_segments_deleted_total",
			Help: "Remote segment attempts this broker deleted (DELETE_FINISHED): expired, abandoned, or left by another leader."},
			func() float64 { return float64(c.Metrics().SegmentsDeleted) }),
	)
	for _, kind := range tier.ErrorKinds {
		reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "fjord_remote_errors_total",
			Help:        "Remote store failures by kind (remote.Kind), and proposals the controller refused (refused).",
			ConstLabels: prometheus.Labels{"kind": kind}},
			func() float64 { return float64(c.Metrics().Errors[kind]) }))
	}
}

// tierProposer proposes a remote segment record as this broker and waits
// until the applied image has it, so the next round's Plan sees it.
type tierProposer struct{ b *Broker }

func (p tierProposer) Propose(ctx context.Context, rec controller.Record) (int16, error) {
	code, offset, err := p.b.ctl.RemoteLogSegment(ctx, p.b.life.Epoch(), rec)
	if err != nil || code != 0 {
		return code, err
	}
	if !waitOffset(ctx, p.b.replicas, offset) {
		return 0, fmt.Errorf("tier: waiting for metadata offset %d: %w", offset, context.Cause(ctx))
	}
	return 0, nil
}

// tierRemote is partitions.RemoteLog over the node's store and image.
type tierRemote struct {
	b      *Broker
	reader *tier.Reader
	reads  *tier.ReadPool
	health *tier.ReadHealth // logs the store failing for reads once per change
	// restarts counts replicas restarted from the copy (fetchHost.RestartedFromCopy).
	restarts *atomic.Int64
}

// newTierRemote is the read side over store, with the read cache the
// rsm.config.fetch.chunk.cache.* keys ask for.
func newTierRemote(b *Broker, store remote.Store) tierRemote {
	r := &tier.Reader{Store: store, Current: func(tp controller.TopicPartition) ([]controller.RemoteSegmentMeta, bool) {
		img := b.replicas.Image()
		if img == nil {
			return nil, false
		}
		return img.RemoteSegments(tp), true
	}}
	if chunk, size, prefetch := b.cfg.Remote.S3.ReadCache(); size > 0 {
		r.Cache = tier.NewChunkCache(store, chunk, size, prefetch, b.ctx, b.goLoop)
		registerCacheMetrics(b.metrics.Registerer(), r.Cache)
	}
	rc := &b.cfg.Remote
	reads := tier.NewReadPool(int(rc.ReaderThreads), int(rc.ReaderMaxPending), remoteReadTimeout, b.ctx, b.goLoop)
	b.metrics.Registerer().MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "fjord_remote_reads_pending",
		Help: "Consumers' remote reads running or queued (bounded by remote.log.reader.threads + remote.log.reader.max.pending.tasks)."},
		func() float64 { return float64(reads.Pending()) }))
	b.metrics.Registerer().MustRegister(remoteSizeCollector{b})
	restarts := new(atomic.Int64)
	b.metrics.Registerer().MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "fjord_remote_follower_restarts_total",
		Help: "Replicas here restarted from the tiered copy (KIP-405's follower path: a new or wiped replica, or one left below its leader's local log start), "},
		func() float64 { return float64(restarts.Load()) }))
	return tierRemote{b: b, reader: r, reads: reads, health: &tier.ReadHealth{}, restarts: restarts}
}

// remoteReadTimeout bounds one consumer's read of the remote store,
// waiting for a reader thread included.
const remoteReadTimeout = 10 * time.Second

func (r tierRemote) Reads() *tier.ReadPool { return r.reads }

func (r tierRemote) FetchMaxWait() time.Duration {
	return time.Duration(r.b.cfg.Remote.FetchMaxWaitMs) * time.Millisecond
}

// registerCacheMetrics exports the read cache's counters (docs/metrics.md).
func registerCacheMetrics(reg prometheus.Registerer, c *tier.ChunkCache) {
	counter := func(name, help string, f func(tier.CacheMetrics) uint64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help}, func() float64 { return float64(f(c.Metrics())) })
	}
	reg.MustRegister(
		counter("fjord_remote_cache_hits_total", "Chunk reads of remote segments served by the read cache (or by a read of the same chunk under way).",
			func(m tier.CacheMetrics) uint64 { return m.Hits }),
		counter("fjord_remote_cache_misses_total", "Chunk reads of remote segments that had to Get from the store.",
			func(m tier.CacheMetrics) uint64 { return m.Misses }),
		counter("fjord_remote_cache_prefetches_total", "Chunks read ahead of a consumer (rsm.config.fetch.chunk.cache.prefetch.max.size).",
			func(m tier.CacheMetrics) uint64 { return m.Prefetches }),
		counter("fjord_remote_cache_evictions_total", "Chunks dropped from the read cache to stay within rsm.config.fetch.chunk.cache.size.",
			func(m tier.CacheMetrics) uint64 { return m.Evictions }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "fjord_remote_cache_bytes", Help: "Bytes held by the read cache of remote segments."},
			func() float64 { return float64(c.Metrics().Bytes) }),
	)
}

func (r tierRemote) Start(topicID [16]byte, partition int32) int64 {
	img := r.b.replicas.Image()
	if img == nil {
		return -1
	}
	for _, s := range img.RemoteSegments(controller.TopicPartition{TopicID: topicID, Partition: partition}) {
		if s.State == controller.RemoteCopyFinished {
			return s.BaseOffset
		}
	}
	return -1
}

func (r tierRemote) CopiedEnd(topicID [16]byte, partition int32) (int64, int32) {
	img := r.b.replicas.Image()
	if img == nil {
		return -1, -1
	}
	segs := img.RemoteSegments(controller.TopicPartition{TopicID: topicID, Partition: partition})
	end := tier.CopiedEnd(segs)
	if end < 0 {
		return -1, -1
	}
	for _, s := range segs {
		if s.State == controller.RemoteCopyFinished && s.BaseOffset <= end && end <= s.EndOffset {
			epoch := int32(-1)
			for _, e := range s.LeaderEpochs {
				if e.StartOffset <= end {
					epoch = e.Epoch
				}
			}
			return end, epoch
		}
	}
	return end, -1
}

// Read reads offset from the copied segment holding it. A segment that
// remote retention deleted while it was read (tier.ErrSegmentGone) is
// looked for again in the image now: another copy may hold offset (an
// older leader's, deleted as redundant); when none does, offset is below
// the remote log start now and the fetch answers OFFSET_OUT_OF_RANGE, as
// Kafka does for a log start that moved.
func (r tierRemote) Read(ctx context.Context, topic string, topicID [16]byte, partition int32, offset int64, maxBytes int) ([]byte, bool, error) {
	for range 3 { // each retry follows a deletion; a few bound it
		img := r.b.replicas.Image()
		if img == nil {
			return nil, false, nil
		}
		seg, ok := tier.SegmentFor(img.RemoteSegments(controller.TopicPartition{TopicID: topicID, Partition: partition}), offset)
		if !ok {
			return nil, false, nil
		}
		data, err := r.reader.Read(ctx, tier.Ref{Topic: topic, TopicID: topicID, Partition: partition}, seg, offset, maxBytes)
		r.noteRead(err)
		if !errors.Is(err, tier.ErrSegmentGone) {
			return data, true, err
		}
	}
	return nil, false, nil
}

// noteRead logs a read of the store once per change between working and
// failing (and between kinds of failure), rather than once per fetch
// that retries it: consumers retry a failed read every few hundred
// milliseconds for as long as the store is down.
func (r tierRemote) noteRead(err error) {
	changed, kind := r.health.Note(err)
	switch {
	case !changed:
	case kind == "":
		r.b.log.Info().Msg("remote store: reads work again")
	default:
		r.b.log.Error().Err(err).Str("kind", kind).Msg("remote store: reads failing; fetches below the local log start get KAFKA_STORAGE_ERROR until they work again")
	}
}

func (r tierRemote) Aborted(ctx context.Context, topic string, topicID [16]byte, partition int32, fetchOffset, upperBound int64) ([]storage.AbortedTxn, error) {
	tp := controller.TopicPartition{TopicID: topicID, Partition: partition}
	img := r.b.replicas.Image()
	if img == nil {
		return nil, fmt.Errorf("tier: no metadata image")
	}
	out, _, _, walked, err := r.reader.Aborted(ctx, tier.Ref{Topic: topic, TopicID: topicID, Partition: partition}, img.RemoteSegments(tp), fetchOffset, upperBound)
	r.noteRead(err)
	if err != nil {
		return nil, err
	}
	// Only segments still COPY_FINISHED after the walk vouch for its answer.
	if img = r.b.replicas.Image(); img == nil {
		return nil, fmt.Errorf("tier: no metadata image")
	}
	if err := tier.StillCopied(walked, img.RemoteSegments(tp)); err != nil {
		return nil, err
	}
	return out, nil
}

// TierRestart is KIP-405's follower path for the replica fetchers
// (replica.TierRestarter): where p's log restarts below a leader whose
// local log starts at leaderLocalStart, with the copy's epochs and
// producer snapshot (tier.Reader.Restart, over this broker's image).
func (h fetchHost) TierRestart(ctx context.Context, p *replica.Partition, leaderLocalStart int64) (int64, []storage.EpochStart, []byte, error) {
	r, ok := h.b.remote.(tierRemote)
	if !ok {
		return 0, nil, nil, errors.New("tier: this node has no remote store")
	}
	img := r.b.replicas.Image()
	if img == nil {
		return 0, nil, nil, errors.New("tier: no metadata image yet")
	}
	segs := img.RemoteSegments(controller.TopicPartition{TopicID: p.TopicID, Partition: p.Index})
	rs, err := r.reader.Restart(ctx, tier.Ref{Topic: p.Topic, TopicID: p.TopicID, Partition: p.Index}, segs, leaderLocalStart)
	if !errors.Is(err, tier.ErrNotCopied) {
		r.noteRead(err) // ErrNotCopied is this node's image lagging, not the store
	}
	if err != nil {
		return 0, nil, nil, err
	}
	if rs.Snapshot == nil {
		p.Logger.Warn().Int64("offset", rs.Offset).Int64("segment", rs.Segment.BaseOffset).
			Msg("tiered storage: the copy has no producer snapshot at the restart; producers' retries of batches below it will not be recognised")
	}
	return rs.Offset, rs.Epochs, rs.Snapshot, nil
}

func (h fetchHost) RestartedFromCopy(*replica.Partition) {
	if r, ok := h.b.remote.(tierRemote); ok {
		r.restarts.Add(1)
	}
}

func (r tierRemote) OffsetForTimestamp(ctx context.Context, topic string, topicID [16]byte, partition int32, ts int64) (int64, int64, bool, error) {
	img := r.b.replicas.Image()
	if img == nil {
		return 0, 0, false, nil
	}
	segs := img.RemoteSegments(controller.TopicPartition{TopicID: topicID, Partition: partition})
	off, ts2, ok, err := r.reader.OffsetForTimestamp(ctx, tier.Ref{Topic: topic, TopicID: topicID, Partition: partition}, segs, ts)
	r.noteRead(err)
	return off, ts2, ok, err
}

func (r tierRemote) Size(topicID [16]byte, partition int32) int64 {
	img := r.b.replicas.Image()
	if img == nil {
		return 0
	}
	return tier.CopiedBytes(img.RemoteSegments(controller.TopicPartition{TopicID: topicID, Partition: partition}))
}

// remoteSizeCollector exports fjord_remote_log_size_bytes (Kafka's
// RemoteLogSizeBytes) per partition this node leads, so a cluster-wide
// sum counts each partition once.
type remoteSizeCollector struct{ b *Broker }

var remoteSizeDesc = prometheus.NewDesc("fjord_remote_log_size_bytes",
	"Bytes of a tiered partition's copied segments in the remote store (Kafka's RemoteLogSizeBytes), on its leader.",
	[]string{"topic", "partition"}, nil)

func (c remoteSizeCollector) Describe(ch chan<- *prometheus.Desc) { ch <- remoteSizeDesc }

func (c remoteSizeCollector) Collect(ch chan<- prometheus.Metric) {
	img := c.b.replicas.Image()
	if img == nil {
		return
	}
	for _, t := range c.b.replicas.Topics() {
		for _, p := range t.Local() {
			if !p.Leads() {
				continue
			}
			segs := img.RemoteSegments(controller.TopicPartition{TopicID: t.ID, Partition: p.Index})
			if len(segs) == 0 {
				continue
			}
			ch <- prometheus.MustNewConstMetric(remoteSizeDesc, prometheus.GaugeValue, float64(tier.CopiedBytes(segs)), t.Name, strconv.Itoa(int(p.Index)))
		}
	}
}
