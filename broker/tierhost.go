package broker

import (
	"context"
	"errors"
	"fmt"
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

func newTierManager(b *Broker, store remote.Store, interval time.Duration) *tier.Manager {
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
		Image:    func() *controller.Image { return b.replicas.Image() },
		Proposer: tierProposer{b},
		Logger:   b.log.With().Str("component", "tier").Logger(),
	})
	registerTierMetrics(b.metrics.Registerer(), m.Copier)
	return m
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

func (r tierRemote) Read(ctx context.Context, topic string, topicID [16]byte, partition int32, offset int64, maxBytes int) ([]byte, bool, error) {
	img := r.b.replicas.Image()
	if img == nil {
		return nil, false, nil
	}
	seg, ok := tier.SegmentFor(img.RemoteSegments(controller.TopicPartition{TopicID: topicID, Partition: partition}), offset)
	if !ok {
		return nil, false, nil
	}
	data, err := r.reader.Read(ctx, tier.Ref{Topic: topic, TopicID: topicID, Partition: partition}, seg, offset, maxBytes)
	return data, true, err
}

func (r tierRemote) Aborted(ctx context.Context, topic string, topicID [16]byte, partition int32, fetchOffset, upperBound int64) ([]storage.AbortedTxn, error) {
	tp := controller.TopicPartition{TopicID: topicID, Partition: partition}
	img := r.b.replicas.Image()
	if img == nil {
		return nil, fmt.Errorf("tier: no metadata image")
	}
	out, _, _, walked, err := r.reader.Aborted(ctx, tier.Ref{Topic: topic, TopicID: topicID, Partition: partition}, img.RemoteSegments(tp), fetchOffset, upperBound)
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
	if err != nil {
		return 0, nil, nil, err
	}
	if rs.Snapshot == nil {
		p.Logger.Warn().Int64("offset", rs.Offset).Int64("segment", rs.Segment.BaseOffset).
			Msg("tiered storage: the copy has no producer snapshot at the restart; producers' retries of batches below it will not be recognised")
	}
	return rs.Offset, rs.Epochs, rs.Snapshot, nil
}
