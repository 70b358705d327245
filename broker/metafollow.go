package broker

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordlog/fjord/broker/config"
	"github.com/fjordlog/fjord/controller"
	"github.com/fjordlog/fjord/controller/active"
	"github.com/fjordlog/fjord/controller/quorum"
	"github.com/fjordlog/fjord/protocol/lifecycle"
	"github.com/fjordlog/fjord/storage/recordbatch"
)

// metadataLog is the broker's view of the metadata log: the controller role
// (active.Controller, whose quorum member applies the log) on a node with
// the controller role, a metaFollower on a broker-only node.
type metadataLog interface {
	// Image is the latest applied image.
	Image() *controller.Image
	// WaitFor blocks until pred holds for the latest image or ctx ends.
	WaitFor(ctx context.Context, pred func(*controller.Image) bool) error
	// Leader is the node id of the active controller, -1 if unknown.
	Leader() int32
	Close() error
}

// metaFollower follows the metadata log from the voters, as served by
// controller/active (see its metalog.go):
// one goroutine fetches, applies with quorum.ApplyEntry (exactly as the
// members apply) and publishes each new image. It keeps nothing on disk: it
// starts from a snapshot of a voter's image, then follows entries, and
// falls back to a snapshot whenever the voter no longer keeps the entries
// it needs.
type metaFollower struct {
	b      *Broker
	pub    atomic.Pointer[followed]
	leader atomic.Int32 // node id; -1 if unknown
	cancel context.CancelFunc
	done   chan struct{}
}

// followed is one publication; next closes when a newer one replaces it.
type followed struct {
	img  *controller.Image
	next chan struct{}
}

func startFollower(b *Broker) *metaFollower {
	ctx, cancel := context.WithCancel(b.ctx)
	f := &metaFollower{b: b, cancel: cancel, done: make(chan struct{})}
	f.pub.Store(&followed{img: new(controller.Image), next: make(chan struct{})})
	f.leader.Store(-1)
	if !b.goLoop(func() { f.run(ctx) }) {
		close(f.done)
	}
	return f
}

func (f *metaFollower) Image() *controller.Image { return f.pub.Load().img }
func (f *metaFollower) Leader() int32            { return f.leader.Load() }

func (f *metaFollower) WaitFor(ctx context.Context, pred func(*controller.Image) bool) error {
	for {
		p := f.pub.Load()
		if pred(p.img) {
			return nil
		}
		select {
		case <-p.next:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func (f *metaFollower) Close() error {
	f.cancel()
	<-f.done
	return nil
}

func (f *metaFollower) publish(img *controller.Image) {
	old := f.pub.Swap(&followed{img: img, next: make(chan struct{})})
	close(old.next)
}

// run fetches until ctx ends, moving to the next voter after any failure.
func (f *metaFollower) run(ctx context.Context) {
	defer close(f.done)
	voters, _ := config.ParseVoters(f.b.cfg.ControllerQuorumVoters)
	vi := 0
	// Start from a snapshot: a fresh broker need not replay the history.
	needSnapshot := true
	for ctx.Err() == nil {
		v := voters[vi%len(voters)]
		var err error
		if needSnapshot {
			err = f.snapshot(ctx, v.ID)
			needSnapshot = err != nil
		} else {
			needSnapshot, err = f.fetch(ctx, v.ID)
		}
		if err != nil && ctx.Err() == nil {
			f.b.log.Debug().Err(err).Int32("voter", v.ID).Msg("following the metadata log; trying the next voter")
			vi++
			lifecycle.Sleep(ctx, 100*time.Millisecond)
		}
	}
}

// fetch applies the entries a voter has after the current image. It
// reports whether a snapshot is needed first.
func (f *metaFollower) fetch(ctx context.Context, voter int32) (bool, error) {
	img := f.Image()
	req := kmsg.NewPtrFetchRequest()
	req.ReplicaID = f.b.cfg.NodeID
	req.MaxWaitMillis, req.MaxBytes = 500, 64<<20
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = active.MetadataTopic
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.FetchOffset, rp.PartitionMaxBytes = int64(img.Version())+1, 64<<20
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	kresp, _, err := f.b.ctl.request(ctx, voter, req)
	if err != nil {
		return false, err
	}
	resp := kresp.(*kmsg.FetchResponse)
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		return false, errMalformedShip
	}
	sp := resp.Topics[0].Partitions[0]
	f.leader.Store(max(sp.CurrentLeader.LeaderID, -1))
	switch {
	case sp.ErrorCode == kerr.OffsetOutOfRange.Code:
		return true, nil
	case sp.ErrorCode != 0:
		return false, kerr.ErrorForCode(sp.ErrorCode)
	}
	data := sp.RecordBatches
	next := img
	for len(data) > 0 {
		info, err := recordbatch.ParseHeader(data)
		if err != nil || info.Bytes > len(data) {
			return false, errMalformedShip
		}
		base := uint64(recordbatch.BaseOffset(data))
		var applyErr error
		recordbatch.EachRecord(data[:info.Bytes], info, func(r recordbatch.Record) bool {
			idx := base + uint64(r.OffsetDelta)
			if idx <= next.Version() {
				return true // already applied
			}
			next, applyErr = quorum.ApplyEntry(next, idx, r.Value)
			return applyErr == nil
		})
		if applyErr != nil {
			f.b.log.Error().Err(applyErr).Msg("shipped metadata entry does not apply; starting again from a snapshot")
			return true, nil
		}
		data = data[info.Bytes:]
	}
	if next != img {
		f.publish(next)
	}
	return false, nil
}

// snapshot replaces the image with a voter's, unless it is older.
func (f *metaFollower) snapshot(ctx context.Context, voter int32) error {
	req := kmsg.NewPtrFetchSnapshotRequest()
	req.ReplicaID, req.MaxBytes = f.b.cfg.NodeID, 1<<30
	rt := kmsg.NewFetchSnapshotRequestTopic()
	rt.Topic = active.MetadataTopic
	rt.Partitions = append(rt.Partitions, kmsg.NewFetchSnapshotRequestTopicPartition())
	req.Topics = append(req.Topics, rt)
	kresp, _, err := f.b.ctl.request(ctx, voter, req)
	if err != nil {
		return err
	}
	resp := kresp.(*kmsg.FetchSnapshotResponse)
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		return errMalformedShip
	}
	sp := resp.Topics[0].Partitions[0]
	if sp.ErrorCode != 0 {
		return kerr.ErrorForCode(sp.ErrorCode)
	}
	if sp.SnapshotID.EndOffset < 0 {
		return errMalformedShip
	}
	idx := uint64(sp.SnapshotID.EndOffset)
	if idx < f.Image().Version() {
		return errStaleShip // this voter is behind us: ask another
	}
	img, err := quorum.DecodeImage(sp.Bytes, idx)
	if err != nil {
		return err
	}
	f.b.log.Info().Uint64("version", idx).Int32("voter", voter).Msg("metadata image from a snapshot")
	f.publish(img)
	return nil
}
