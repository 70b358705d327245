package tier

import (
	"context"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/fjordlog/fjord/broker/replica"
	"github.com/fjordlog/fjord/controller"
	"github.com/fjordlog/fjord/storage"
	"github.com/fjordlog/fjord/storage/remote"
)

// TestRoundReadsAnImageShowingItsLeadership: broker 1 copied segment 0
// (COPY_FINISHED) and then lost the leadership to broker 2, whose replica
// already leads at the new epoch. Broker 2's round must not read the
// partition's entries from an image older than that leadership, where
// the copy still looks COPY_STARTED: abandoning it there is accepted by
// the controller (DELETE_STARTED follows COPY_FINISHED, for expiry) and
// deletes a finished copy, whose local segments may be gone (commit
// 9471e1f; TestTieredFollowerRestart caught it once). The stale image is
// the round's first one, or every one the replica manager has stored so
// far; either way the finished copy must survive, and once the image
// shows the leadership the next segment is copied.
func TestRoundReadsAnImageShowingItsLeadership(t *testing.T) {
	for _, tc := range []struct {
		name string
		// stale is how many Image calls return the stale image before
		// the fresh one.
		stale int
	}{
		{"round's first image stale", 1},
		{"replica manager's image behind its roles", 1 << 30},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, l, ref, _ := setUp(t)
			m.apply(controller.RegisterBroker{ID: 2})
			b2, _ := m.img.Broker(2)
			m.apply(controller.UnfenceBroker{ID: 2, Epoch: b2.Epoch})
			tp := controller.TopicPartition{TopicID: ref.TopicID, Partition: ref.Partition}

			// Broker 1 copies segment 0; the image between its two
			// proposals shows the attempt COPY_STARTED.
			store := remote.NewMemStore()
			rec := &recordingProposer{m: m}
			if done, err := (&Copier{Store: store, Proposer: rec}).Run(t.Context(), ref, view(m, l, ref, 1), l); err != nil || len(done) != 1 || done[0].Kind != Upload {
				t.Fatalf("broker 1's round: %v, %v", done, err)
			}
			stale := rec.images[0]
			if segs := stale.RemoteSegments(tp); len(segs) != 1 || segs[0].State != controller.RemoteCopyStarted {
				t.Fatalf("stale image: %+v", segs)
			}
			finished := m.img.RemoteSegments(tp)[0]
			if finished.State != controller.RemoteCopyFinished {
				t.Fatalf("broker 1's copy: %+v", finished)
			}

			// Broker 2 takes over; its replica leads at the new epoch.
			m.apply(controller.ChangeReplicas{TopicID: ref.TopicID, Replicas: []int32{1, 2}, ISR: []int32{1, 2}, Leader: 2})
			pt, _ := m.img.Partition(ref.TopicID, ref.Partition)
			p := leadingReplica(t, l, ref, replica.Assignment{Leader: 2, LeaderEpoch: pt.LeaderEpoch, PartitionEpoch: pt.PartitionEpoch,
				Replicas: []int32{1, 2}, ISR: []int32{2}, Live: []int32{1, 2}})

			calls := 0
			mgr := NewManager(ManagerConfig{NodeID: 2, Store: store, Interval: time.Second, Logger: zerolog.Nop(),
				Proposer: &epochProposer{m, b2.Epoch},
				Replicas: func() []*replica.Partition { return []*replica.Partition{p} },
				Image: func() *controller.Image {
					calls++
					if calls <= tc.stale {
						return stale
					}
					return m.img
				}})
			mgr.Round(t.Context(), time.Unix(5, 0))

			if segs := m.img.RemoteSegments(tp); len(segs) == 0 || segs[0].SegmentID != finished.SegmentID || segs[0].State != controller.RemoteCopyFinished {
				t.Fatalf("broker 1's finished copy after broker 2's round: %+v", segs)
			}
			for _, suffix := range []string{"log", "index", "timeindex"} {
				r, err := store.Get(t.Context(), ObjectKey("", ref.Topic, ref.TopicID, ref.Partition, finished.BaseOffset, finished.SegmentID, suffix), 0, -1)
				if err != nil {
					t.Fatalf("broker 1's finished copy lost its %s: %v", suffix, err)
				}
				r.Close()
			}

			// Once the image shows the leadership, broker 2 copies the
			// segment after broker 1's (the first case's round already
			// did: its own image was fresh).
			tc.stale = 0
			mgr.Round(t.Context(), time.Unix(10, 0))
			segs := m.img.RemoteSegments(tp)
			if len(segs) < 2 || segs[1].State != controller.RemoteCopyFinished || segs[1].Broker != 2 || segs[1].BaseOffset != finished.EndOffset+1 {
				t.Fatalf("after the image caught up: %+v", segs)
			}
		})
	}
}

// recordingProposer is m's Proposer that keeps the image after each
// proposal it applied.
type recordingProposer struct {
	m      *metadata
	images []*controller.Image
}

func (r *recordingProposer) Propose(ctx context.Context, rec controller.Record) (int16, error) {
	code, err := r.m.Propose(ctx, rec)
	if code == 0 && err == nil {
		r.images = append(r.images, r.m.img)
	}
	return code, err
}

// leadingReplica is a replica of ref on broker 2 over l, assigned a,
// open and leading, its high watermark at l's end.
func leadingReplica(t *testing.T, l *storage.Log, ref Ref, a replica.Assignment) *replica.Partition {
	t.Helper()
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	cfg := storage.DefaultConfig()
	cfg.SegmentBytes, cfg.RetentionMs = 400, -1
	cfg.Tier = storage.TierRetention{Enabled: true, LocalRetentionMs: -2, LocalRetentionBytes: -2}
	p := replica.NewPartition(replica.PartitionConfig{Topic: ref.Topic, Index: ref.Partition, TopicID: ref.TopicID, Logger: zerolog.Nop(),
		Settings: replica.Settings{Storage: cfg, FlushMessages: 1, MinISR: 1},
		Core:     replica.Config{ID: 2, SyncOnAck: true, LagMs: 10_000, OpenTimeoutMs: 10_000, AlterTimeoutMs: 10_000, OpenAttempts: 1}},
		openedHost{l})
	p.Step(replica.Assign{Assignment: a})
	p.Start()
	<-p.OpenAnswered()
	if !p.Leads() || p.HW() != l.EndOffset() {
		t.Fatalf("replica: leads %v, hw %d, log end %d", p.Leads(), p.HW(), l.EndOffset())
	}
	return p
}

// openedHost opens a replica over an already open log and does nothing
// else.
type openedHost struct{ l *storage.Log }

func (h openedHost) Open(p *replica.Partition)                  { go p.Opened(h.l, nil) }
func (openedHost) Delete(*replica.Partition)                    {}
func (openedHost) Repair(*replica.Partition, replica.Repair)    {}
func (openedHost) Propose(*replica.Partition, replica.Proposal) {}
func (openedHost) Ended(*replica.Partition)                     {}
func (openedHost) Changed(*replica.Partition)                   {}
