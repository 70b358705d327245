package replicamgr

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/fjordlog/fjord/broker/replica"
	"github.com/fjordlog/fjord/controller"
	"github.com/fjordlog/fjord/protocol/lifecycle"
	"github.com/fjordlog/fjord/storage"
)

// replicaRegistry tracks every partition driver not yet Deleted (the
// published topic maps drop a replica the moment it is unassigned; its
// log may still be opening or being deleted), and which driver owns each
// partition directory.
type replicaRegistry struct {
	mu sync.Mutex
	// live maps every driver not yet Deleted to its directory claim.
	live map[*replica.Partition]*dirClaim
	dirs map[string]*dirClaim // the newest claim of each directory
	// fds counts the descriptors the open logs hold permanently: one
	// each, its active segment's (fdbudget.go).
	fds int
}

// dirClaim is one driver's hold on a partition directory, from its
// creation until its log is deleted. A replica of a topic re-created under
// the same name claims the same directory; it opens only once prev (the
// deleted topic's replica) has released it, so a deletion never renames
// or removes the new replica's files.
type dirClaim struct {
	dir      string
	prev     *dirClaim
	released chan struct{}
	fds      int // descriptors its open log holds permanently (0 or 1)
}

// newReplica makes the driver of this broker's replica of partition index
// of a topic, claiming its directory.
func (m *Manager) newReplica(topic string, index int32, id [16]byte, s replica.Settings) *replica.Partition {
	p := replica.NewPartition(replica.PartitionConfig{Topic: topic, Index: index, TopicID: id,
		Logger:   m.log.With().Str("topic", topic).Int32("partition", index).Logger(),
		Settings: s, Core: m.replicaConfig(s), FlushTime: m.cfg.Metrics.FlushTime}, replicaHost{m})
	dir := filepath.Join(m.cfg.LogDir, fmt.Sprintf("%s-%d", topic, index))
	r := &m.replicas
	r.mu.Lock()
	c := &dirClaim{dir: dir, prev: r.dirs[dir], released: make(chan struct{})}
	r.dirs[dir] = c
	r.live[p] = c
	r.mu.Unlock()
	return p
}

// claimOf returns p's directory claim (nil once it ended).
func (m *Manager) claimOf(p *replica.Partition) *dirClaim {
	m.replicas.mu.Lock()
	defer m.replicas.mu.Unlock()
	return m.replicas.live[p]
}

// liveReplicas returns every driver not yet Deleted.
func (m *Manager) liveReplicas() []*replica.Partition {
	r := &m.replicas
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]*replica.Partition, 0, len(r.live))
	for p := range r.live {
		out = append(out, p)
	}
	return out
}

// replicaConfig is the core's configuration for a topic's replicas.
func (m *Manager) replicaConfig(s replica.Settings) replica.Config {
	return replica.Config{
		ID:             m.cfg.NodeID,
		SyncOnAck:      s.FlushMessages <= 1,
		LagMs:          m.cfg.ReplicaLagTimeMaxMs,
		OpenTimeoutMs:  m.cfg.PartitionOpenTimeoutMs,
		FlushStallMs:   m.cfg.LogFlushStallMaxMs,
		AlterTimeoutMs: 10_000,
		// A failed open is retried at 1, 2, 4 … 60 s, 8 times (about 4
		// minutes in all), then the replica stays offline until restart:
		// long enough to outlast a burst of descriptor exhaustion.
		Open: lifecycle.Backoff{Initial: time.Second, Max: 60 * time.Second}, OpenAttempts: 8,
		// Refused ISR changes and resignations: 100 ms doubling to 5 s.
		Alter: lifecycle.Backoff{Initial: 100 * time.Millisecond, Max: 5 * time.Second}, AlterAttempts: 10,
	}
}

// replicaHost does the replicas' I/O for them (replica.Host).
type replicaHost struct{ m *Manager }

// Ended releases p's directory and forgets p.
func (h replicaHost) Ended(p *replica.Partition) {
	r := &h.m.replicas
	r.mu.Lock()
	c := r.live[p]
	delete(r.live, p)
	if c != nil {
		if r.dirs[c.dir] == c {
			delete(r.dirs, c.dir)
		}
		r.fds -= c.fds
		c.fds = 0
	}
	r.mu.Unlock()
	if c != nil {
		close(c.released)
	}
}

// Changed: coordinators follow their topics' leaderships, which may
// change after an image (a slow open finishing); a new leadership's epoch
// checkpoint is written in the background (epochsave.go).
func (h replicaHost) Changed(p *replica.Partition) {
	h.m.epochSaves.add(p.Log())
	if slices.Contains(h.m.cfg.CoordinatorTopics, p.Topic) {
		h.m.coordinate(h.m.Topic(p.Topic))
	}
}

// openSlots bounds the logs opened at once (creating 1,000 partitions is
// 1,000 directory creations and log opens).
const openSlots = 16

// DeleteSlots bounds the replicas' files removed at once (DeleteTopics of
// a wide topic, or a node dropping many replicas in one image).
const DeleteSlots = 16

// errFDBudget refuses an open that would exhaust the descriptor limit.
var errFDBudget = errors.New("broker: file descriptor budget exhausted")

// Open opens p's log in the background: after the directory's previous
// owner released it, one of openSlots at a time, within the descriptor
// budget. The answer is p.Opened.
func (h replicaHost) Open(p *replica.Partition) {
	m := h.m
	c := m.claimOf(p)
	if c == nil {
		return
	}
	m.cfg.Go(func() {
		if c.prev != nil {
			select {
			case <-c.prev.released:
			case <-m.ctx.Done():
				return
			}
		}
		m.openWithinBudget(p, c)
	})
}

// openWithinBudget opens p's log once one of the openSem slots is free
// (opens run recovery: a node taking many partitions at once must not
// recover them all together) and hands the result to p.
func (m *Manager) openWithinBudget(p *replica.Partition, c *dirClaim) {
	select {
	case m.openSem <- struct{}{}:
	case <-m.ctx.Done():
		return
	}
	lg, err := m.openLog(p, c)
	<-m.openSem
	p.Opened(lg, err)
}

// openLog opens (creating if needed) p's log. A directory whose
// partition.metadata names another topic id belongs to an earlier topic
// of the same name whose deletion a crash interrupted: it is removed
// first. An unreadable partition.metadata (damaged: it is replaced
// atomically) is rewritten, never taken as a reason to delete.
func (m *Manager) openLog(p *replica.Partition, c *dirClaim) (*storage.Log, error) {
	if h := m.openHook.Load(); h != nil {
		(*h)(p.Topic, p.Index)
	}
	// The safety net behind the check at creation (fdbudget.go): a
	// replica it did not foresee stays offline rather than exhaust the
	// descriptors. The slot is taken before the open, so concurrent opens
	// cannot overshoot together.
	m.replicas.mu.Lock()
	inUse := m.replicas.fds
	if inUse+1 > m.budget.partLimit {
		m.replicas.mu.Unlock()
		return nil, fmt.Errorf("%w: %d replicas open, the limit is %s", errFDBudget, inUse, m.budget)
	}
	m.replicas.fds++
	c.fds = 1
	m.replicas.mu.Unlock()
	lg, err := m.openLogFiles(p, c)
	if err != nil {
		m.replicas.mu.Lock()
		m.replicas.fds -= c.fds
		c.fds = 0
		m.replicas.mu.Unlock()
	}
	return lg, err
}

// openLogFiles is openLog past the budget.
func (m *Manager) openLogFiles(p *replica.Partition, c *dirClaim) (*storage.Log, error) {
	dir := c.dir
	scfg := p.Settings().Storage
	scfg.Files, scfg.Indexes = m.files, m.indexes
	scfg.FS = m.cfg.FS
	// The topic id as Kafka prints it: unpadded URL-safe base64.
	want := base64.RawURLEncoding.EncodeToString(p.TopicID[:])
	id, err := storage.ReadPartitionMetadata(scfg.FS, dir)
	if err == nil && id != want {
		m.log.Warn().Str("dir", dir).Str("found_topic_id", id).Str("topic_id", want).
			Msg("replica directory belongs to a deleted topic of the same name; removing it")
		if err := storage.DeletePartitionDir(scfg.FS, dir); err != nil {
			return nil, err
		}
	}
	if err != nil || id != want {
		// Durable before the log is, so the log's directory never lacks
		// it after a crash (stray removal passes over such a directory).
		if err := storage.WritePartitionMetadata(scfg.FS, dir, want); err != nil {
			return nil, fmt.Errorf("%s-%d: %w", p.Topic, p.Index, err)
		}
	}
	lg, err := storage.Open(dir, scfg, p.Logger)
	if err != nil {
		return nil, fmt.Errorf("%s-%d: %w", p.Topic, p.Index, err)
	}
	if !m.cfg.Tiering {
		return lg, nil
	}
	// A tiered log deletes a local segment only once the remote store
	// holds it: what the image's COPY_FINISHED entries say (broker/tier).
	tp := controller.TopicPartition{TopicID: p.TopicID, Partition: p.Index}
	lg.SetRemoteCopiedEnd(func() int64 {
		if m.cfg.Metadata == nil {
			return -1
		}
		if img := m.cfg.Metadata.Image(); img != nil {
			return img.RemoteCopiedEnd(tp)
		}
		return -1
	})
	return lg, nil
}

// Repair brings p's failed log back in the background: it closes it,
// sets its directory aside when r.SetAside (renamed to
// <dir>.<unix ms>.failed, which stray removal passes over: the operator
// inspects or removes it), and opens the log again as Open does (empty
// once set aside, to be fetched from the leader). The answer is
// p.Opened; a failed open is retried by the core with backoff.
func (h replicaHost) Repair(p *replica.Partition, r replica.Repair) {
	m := h.m
	c := m.claimOf(p)
	if c == nil {
		return
	}
	m.cfg.Go(func() {
		if lg := p.Log(); lg != nil {
			if err := lg.Close(); err != nil {
				// Expected: a failed log cannot write its clean-shutdown
				// state. Recovery at the reopen does not need it.
				p.Logger.Info().Err(err).Msg("closing the failed log")
			}
		}
		m.replicas.mu.Lock()
		m.replicas.fds -= c.fds
		c.fds = 0
		m.replicas.mu.Unlock()
		if r.SetAside {
			aside := fmt.Sprintf("%s.%d.failed", c.dir, time.Now().UnixMilli())
			if err := storage.SetAsideDir(storage.OrOS(m.cfg.FS), c.dir, aside); err != nil {
				p.Opened(nil, fmt.Errorf("setting the failed replica aside: %w", err))
				return
			}
			p.Logger.Warn().Str("set_aside", aside).Msg("failed replica's files set aside for the operator; fetching the partition again")
		}
		m.openWithinBudget(p, c)
	})
}

// Delete closes and removes p's log in the background; the answer is
// p's LogDeleted step, which ends it (Ended releases the directory).
func (h replicaHost) Delete(p *replica.Partition) {
	m := h.m
	m.cfg.Go(func() {
		// One of DeleteSlots at a time: removing files blocks in the
		// kernel, and each blocked goroutine holds an OS thread, so a
		// DeleteTopics of 10,000 partitions removed all at once would
		// have the process start thousands of threads (Go's limit,
		// 10,000, ends the process). Waiting here holds none.
		select {
		case m.deleteSem <- struct{}{}:
		case <-m.ctx.Done():
			return // the next start removes what is left (a deleted topic's directory)
		}
		defer func() { <-m.deleteSem }()
		if h := m.deleteHook.Load(); h != nil {
			(*h)(p.Topic, p.Index)
		}
		if lg := p.Log(); lg != nil {
			if err := lg.Delete(); err != nil && !os.IsNotExist(err) {
				p.Logger.Warn().Err(err).Msg("removing a dropped replica's files")
			}
		}
		p.Step(replica.LogDeleted{})
	})
}

// Propose sends the core's AlterPartition in the background; the answer
// is p's AlterAnswered step.
func (h replicaHost) Propose(p *replica.Partition, prop replica.Proposal) {
	m := h.m
	if !prop.Resign {
		if v := p.View(); len(prop.ISR) < len(v.ISR) {
			if m.cfg.Metrics.ISRShrinks != nil {
				m.cfg.Metrics.ISRShrinks.Inc()
			}
		} else if m.cfg.Metrics.ISRExpands != nil {
			m.cfg.Metrics.ISRExpands.Inc()
		}
	}
	m.alterPartition(m.cfg.Metadata.Image(), p.TopicID, p.Index, prop.LeaderEpoch, prop.PartitionEpoch, prop.ISR,
		10*time.Second, func(code int16, err error) {
			if err != nil && !errors.Is(err, context.Canceled) {
				p.Logger.Debug().Err(err).Msg("AlterPartition got no answer")
			}
			p.Step(replica.AlterAnswered{Proposal: prop, Code: code})
		})
}

// TickLoop lets time pass for every local replica until the manager's
// context ends: ISR checks, retried opens, resignations and proposals,
// and timeouts. Run it once, on a goroutine of its own.
func (m *Manager) TickLoop() {
	every := time.Duration(min(max(m.cfg.ReplicaLagTimeMaxMs/4, 50), 250)) * time.Millisecond
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-m.ctx.Done():
			return
		case <-t.C:
		}
		now := time.Now().UnixMilli()
		under := 0
		for _, p := range m.liveReplicas() {
			p.Tick(now)
			// Against the replication factor, not the replicas: a move
			// grows the replicas for a while (as Kafka counts).
			if v := p.View(); v.Leads() && len(v.ISR) < len(v.Replicas)-len(v.Removing) {
				under++
			}
		}
		m.underReplicated.Store(int64(under))
	}
}
