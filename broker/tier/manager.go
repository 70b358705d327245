package tier

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/fjordlog/fjord/broker/replica"
	"github.com/fjordlog/fjord/controller"
	"github.com/fjordlog/fjord/storage/remote"
)

// ManagerConfig is what the remote log manager reads of the node.
type ManagerConfig struct {
	NodeID int32
	Store  remote.Store
	Prefix string // every object key's prefix
	// Interval is remote.log.manager.task.interval.ms: one round per
	// interval over every local replica of a tiered topic.
	Interval time.Duration
	// Concurrency bounds the partitions a round works on at once.
	Concurrency int
	// MaxBackoff bounds how long a partition whose round failed waits
	// before its next one (doubling from Interval).
	MaxBackoff time.Duration
	Replicas   func() []*replica.Partition // the node's local replicas
	Image      func() *controller.Image    // the applied image
	Proposer   Proposer
	Logger     zerolog.Logger
	// NoChecksums copies segments without their objects' sums
	// (fjord.remote.log.object.checksums.enable=false; Copier.NoChecksums).
	NoChecksums bool
}

// Manager runs the rounds: Plan and Copier for every partition this node
// leads of a topic with remote.storage.enable, Concurrency at a time. A
// round waits for all its partitions, so one partition is never worked on
// by two goroutines.
//
// Invariant: mu's fails, notBefore and kinds hold only partitions whose
// last round failed (fails > 0); pending holds the partitions the last round
// saw (led, tiered); all are touched only under mu.
type Manager struct {
	cfg    ManagerConfig
	Copier *Copier
	mu     struct {
		sync.Mutex
		// fails counts a partition's consecutive failed rounds; notBefore
		// is when it may run again.
		fails     map[controller.TopicPartition]int
		notBefore map[controller.TopicPartition]time.Time
		// kinds is the kind of each failing partition's last failure
		// (kindOf): a "refused" one (the controller fenced a proposal
		// after a leader change) backs off but is no store alert.
		kinds map[controller.TopicPartition]string
		// pending is each partition's segments waiting to be copied, as
		// the last round saw them (health.go).
		pending map[controller.TopicPartition]pending
		// lastKind and lastErr are the latest store failure's (not
		// "refused"); state is the
		// node's as last logged: "" working, else the failure kind.
		lastKind, lastErr, state string
	}
	// tiered are the topics seen with remote segments, by id: when one
	// leaves the image (deleted), its objects are deleted. Round's own
	// goroutine is the only one to touch it.
	tiered map[[16]byte]string
}

// NewManager returns a manager; Run starts it.
func NewManager(cfg ManagerConfig) *Manager {
	if cfg.Concurrency < 1 {
		cfg.Concurrency = 4
	}
	if cfg.Interval <= 0 {
		cfg.Interval = 30 * time.Second // Kafka's remote.log.manager.task.interval.ms
	}
	if cfg.MaxBackoff < cfg.Interval {
		cfg.MaxBackoff = 10 * cfg.Interval
	}
	m := &Manager{cfg: cfg, Copier: &Copier{Store: cfg.Store, Prefix: cfg.Prefix, Proposer: cfg.Proposer, Log: cfg.Logger, NoChecksums: cfg.NoChecksums}}
	m.mu.fails = map[controller.TopicPartition]int{}
	m.mu.kinds = map[controller.TopicPartition]string{}
	m.mu.notBefore = map[controller.TopicPartition]time.Time{}
	m.mu.pending = map[controller.TopicPartition]pending{}
	m.tiered = map[[16]byte]string{}
	return m
}

// Run runs a round every Interval until stop closes, and another at once
// after a round that copied a segment: a round copies at most one segment
// per partition (Plan), so waiting an interval between them would cap a
// partition's upload rate at segment.bytes per interval, below what
// producers can write, and local disk would grow past local.retention.*
// (Kafka's copy task likewise copies every eligible segment in one run).
func (m *Manager) Run(stop <-chan struct{}) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		<-stop
		cancel()
	}()
	t := time.NewTicker(m.cfg.Interval)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		for m.Round(ctx, time.Now()) > 0 && ctx.Err() == nil {
		}
	}
}

// Round runs one round at now and returns how many segments it copied.
func (m *Manager) Round(ctx context.Context, now time.Time) (copied int) {
	img := m.cfg.Image()
	if img == nil {
		return
	}
	m.deleteTopics(ctx, img)
	sem := make(chan struct{}, m.cfg.Concurrency)
	var wg sync.WaitGroup
	var uploads atomic.Int64
	seen := map[controller.TopicPartition]pending{}
	defer func() {
		wg.Wait()
		m.notePending(now, seen)
		m.noteState(m.cfg.Logger)
		copied = int(uploads.Load())
	}()
	for _, p := range m.cfg.Replicas() {
		s := p.Settings()
		lg := p.Log()
		if s == nil || !s.Storage.Tier.Enabled || lg == nil || !p.Leads() {
			continue
		}
		tp := controller.TopicPartition{TopicID: p.TopicID, Partition: p.Index}
		v := p.View()
		hw := p.HW()
		// The partition's entries must come from an image that shows the
		// leadership the view has: the previous leader's copies committed
		// before the change are in it (the controller fences them after).
		// From an older image (the round's first, or one the replica
		// manager has not stored yet while its roles already changed) a
		// new leader saw the old leader's finished attempt as
		// COPY_STARTED, abandoned it (the controller accepts
		// DELETE_STARTED after COPY_FINISHED, for expiry) and deleted a
		// copy whose local segments were gone: a hole in the log
		// (TestTieredFollowerRestart, once in CI). Such a partition waits
		// for the next round.
		pimg := m.cfg.Image()
		if pimg == nil {
			continue
		}
		if ip, ok := pimg.Partition(p.TopicID, p.Index); !ok || ip.Leader != m.cfg.NodeID || ip.LeaderEpoch != v.LeaderEpoch {
			continue
		}
		view := Partition{Broker: m.cfg.NodeID, Leader: v.Leader == m.cfg.NodeID, LeaderEpoch: v.LeaderEpoch, Enabled: true,
			HighWatermark: hw, LastStable: lg.LastStableOffset(hw), Remote: pimg.RemoteSegments(tp),
			RetentionMs: s.Storage.RetentionMs, RetentionBytes: s.Storage.RetentionBytes, Now: now.UnixMilli()}
		copied := CopiedEnd(view.Remote)
		view.LocalBytesAbove = lg.Size()
		for _, sg := range lg.SealedSegments() {
			view.Sealed = append(view.Sealed, LocalSegment{Base: sg.Base, Last: sg.Last, Size: sg.Size, MaxTimestamp: sg.MaxTimestamp})
			if sg.Last <= copied {
				view.LocalBytesAbove -= sg.Size
			}
		}
		seen[tp] = pendingOf(view)
		m.mu.Lock()
		wait := now.Before(m.mu.notBefore[tp])
		m.mu.Unlock()
		if wait {
			continue // backing off; still counted as waiting above
		}
		ref := Ref{Topic: p.Topic, TopicID: p.TopicID, Partition: p.Index}
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			done, err := m.Copier.Run(ctx, ref, view, lg)
			if err != nil && ctx.Err() != nil {
				return // stopping: not the store's failure
			}
			m.settle(tp, p.Logger, now, done, err)
			for _, a := range done {
				if a.Kind == Upload {
					uploads.Add(1)
				}
			}
		}()
	}
	return // copied is set once the uploads are waited for (deferred)
}

// settle records a partition's round: a failure backs it off (doubling,
// bounded by MaxBackoff). The partition's log says so at debug level
// once per change between failing and working; the node's (noteState)
// says it once for all partitions.
func (m *Manager) settle(tp controller.TopicPartition, log zerolog.Logger, now time.Time, done []Action, err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err == nil {
		if m.mu.fails[tp] > 0 {
			log.Debug().Int("failed_rounds", m.mu.fails[tp]).Msg("tiered storage: copying works again")
		}
		delete(m.mu.fails, tp)
		delete(m.mu.notBefore, tp)
		delete(m.mu.kinds, tp)
		for _, a := range done {
			if a.Kind == Upload {
				log.Debug().Int64("base", a.Local.Base).Int64("last", a.Local.Last).Msg("tiered storage: segment copied")
			}
		}
		return
	}
	n := m.mu.fails[tp] + 1
	m.mu.fails[tp] = n
	kind := kindOf(err)
	m.mu.kinds[tp] = kind
	if kind != "refused" {
		m.mu.lastKind, m.mu.lastErr = kind, err.Error()
	}
	if n == 1 {
		log.Debug().Err(err).Str("kind", remote.Kind(err)).Msg("tiered storage: round failed; retrying with backoff")
	}
	d := m.cfg.Interval << min(n-1, 16)
	m.mu.notBefore[tp] = now.Add(min(d, m.cfg.MaxBackoff))
}

// deleteTopics deletes the objects of tiered topics that left the image
// since the last round: the image drops a deleted topic's entries, the
// objects are the brokers'. Every broker does it (deleting is idempotent);
// a failure is retried next round. A broker that was down when the topic
// went does not know it was tiered, so its objects wait for another
// broker's round (or the operator, if all were down).
func (m *Manager) deleteTopics(ctx context.Context, img *controller.Image) {
	for _, tp := range img.RemotePartitions() {
		if t := img.TopicByID(tp.TopicID); t != nil {
			m.tiered[tp.TopicID] = t.Name
		}
	}
	for id, name := range m.tiered {
		if img.TopicByID(id) != nil {
			continue
		}
		prefix := m.cfg.Prefix + TopicDir(name, id) + "/"
		objs, err := m.cfg.Store.List(ctx, prefix)
		for _, o := range objs {
			if err == nil {
				err = m.cfg.Store.Delete(ctx, o.Key)
			}
		}
		if err != nil {
			m.Copier.countErr(remote.Kind(err))
			m.cfg.Logger.Warn().Err(err).Str("topic", name).Msg("tiered storage: deleting a deleted topic's objects failed; retrying next round")
			continue
		}
		m.cfg.Logger.Info().Str("topic", name).Int("objects", len(objs)).Msg("tiered storage: deleted a deleted topic's objects")
		delete(m.tiered, id)
	}
}
