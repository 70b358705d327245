package broker

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/fjordlog/fjord/broker/replica"
	"github.com/fjordlog/fjord/controller"
	"github.com/fjordlog/fjord/protocol/lifecycle"
	"github.com/fjordlog/fjord/storage"
)

// The local replicas follow the metadata image: publishLoop applies each
// new image (applyImage), creating a partition driver for every replica
// the image places here, assigning every driver its partition's state, and
// unassigning the ones it no longer places here. Everything that can take
// time — opening a log, deleting one, asking the controller to change an
// ISR — runs in the background and answers the driver with a step, so the
// metadata pipeline never blocks on a disk or a peer.

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
func (b *Broker) newReplica(topic string, index int32, id [16]byte, s replica.Settings) *replica.Partition {
	p := replica.NewPartition(replica.PartitionConfig{Topic: topic, Index: index, TopicID: id,
		Logger:   b.log.With().Str("topic", topic).Int32("partition", index).Logger(),
		Settings: s, Core: b.replicaConfig(s), FlushTime: b.metrics.FlushObserver()}, replicaHost{b})
	dir := b.partitionDir(topic, index)
	r := &b.replicas
	r.mu.Lock()
	c := &dirClaim{dir: dir, prev: r.dirs[dir], released: make(chan struct{})}
	r.dirs[dir] = c
	r.live[p] = c
	r.mu.Unlock()
	return p
}

// claimOf returns p's directory claim (nil once it ended).
func (b *Broker) claimOf(p *replica.Partition) *dirClaim {
	b.replicas.mu.Lock()
	defer b.replicas.mu.Unlock()
	return b.replicas.live[p]
}

// liveReplicas returns every driver not yet Deleted.
func (b *Broker) liveReplicas() []*replica.Partition {
	r := &b.replicas
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]*replica.Partition, 0, len(r.live))
	for p := range r.live {
		out = append(out, p)
	}
	return out
}

// replicaHost does the replicas' I/O for them (replica.Host).
type replicaHost struct{ b *Broker }

// Ended releases p's directory and forgets p.
func (h replicaHost) Ended(p *replica.Partition) {
	r := &h.b.replicas
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

// Changed: coordinators follow the offsets partitions' leaderships, which
// may change after an image (a slow open finishing).
func (h replicaHost) Changed(p *replica.Partition) {
	switch p.Topic {
	case offsetsTopic:
		h.b.followOffsets(h.b.lookup(offsetsTopic))
	case txnTopic:
		h.b.followTxns(h.b.lookup(txnTopic))
	}
}

// replicaConfig is the core's configuration for a topic's replicas.
func (b *Broker) replicaConfig(s replica.Settings) replica.Config {
	return replica.Config{
		ID:             b.cfg.NodeID,
		SyncOnAck:      s.FlushMessages <= 1,
		LagMs:          b.cfg.ReplicaLagTimeMaxMs,
		OpenTimeoutMs:  b.cfg.PartitionOpenTimeoutMs,
		AlterTimeoutMs: 10_000,
		// A failed open is retried at 1, 2, 4 … 60 s, 8 times (about 4
		// minutes in all), then the replica stays offline until restart:
		// long enough to outlast a burst of descriptor exhaustion.
		Open: lifecycle.Backoff{Initial: time.Second, Max: 60 * time.Second}, OpenAttempts: 8,
		// Refused ISR changes and resignations: 100 ms doubling to 5 s.
		Alter: lifecycle.Backoff{Initial: 100 * time.Millisecond, Max: 5 * time.Second}, AlterAttempts: 10,
	}
}

// publishLoop applies each new image to the local replicas until stop.
func (b *Broker) publishLoop() {
	var last uint64
	straysChecked := false
	for {
		if b.meta.WaitFor(b.ctx, func(img *controller.Image) bool { return img.Version() > last }) != nil {
			return
		}
		img := b.meta.Image()
		b.applyImage(img)
		last = img.Version()
		b.appliedVersion.Store(last)
		if epoch := b.brokerEpoch.Load(); !straysChecked && epoch > 0 && last >= uint64(epoch) {
			straysChecked = true // once per process: later removals come as Unassigns
			b.removeStrays(img)
		}
	}
}

// applyImage makes the local replicas match img. REQUIRES: called only
// from publishLoop (or before Start): it is the one writer of b.mu.topics.
func (b *Broker) applyImage(img *controller.Image) {
	b.mu.RLock()
	cur, prev := b.mu.topics, b.mu.image
	b.mu.RUnlock()
	me := b.cfg.NodeID
	if prev == nil || !maps.EqualFunc(prev.BrokerConfigs(), img.BrokerConfigs(), maps.Equal) {
		live := b.liveConfig(img)
		if old := b.liveCfg.Swap(&live); old != nil {
			b.log.Info().Msg("dynamic broker configs changed: the running configuration follows")
		}
		b.reconfigureTLS(img)
	}
	live := b.live()
	next := make(map[string]*topic, len(cur))
	var gone []*topic
	var created []*replica.Partition
	follow := map[int32][]*replica.Partition{}
	var assigns []replica.PendingStep // stepped together: replica.StepAll
	for _, it := range img.Topics() {
		old := cur[it.Name]
		if old != nil && old.meta.ID != it.ID {
			gone = append(gone, old) // deleted and re-created under its name
			old = nil
		}
		parts := make([]*replica.Partition, len(it.Partitions))
		for i, ip := range it.Partitions {
			var p *replica.Partition
			if old != nil && i < len(old.parts) {
				p = old.parts[i]
			}
			placed := slices.Contains(ip.Replicas, me)
			switch {
			case placed && p == nil:
				p = b.newReplica(it.Name, int32(i), it.ID, settingsFor(live, it.Configs))
				created = append(created, p)
			case !placed && p != nil:
				p.Step(replica.Unassign{})
				p = nil
			case p != nil:
				// A topic config or a broker default may have changed.
				p.SetSettings(settingsFor(live, it.Configs))
			}
			if p != nil {
				assigns = append(assigns, replica.PendingStep{P: p, Ev: replica.Assign{Assignment: assignment(img, ip)}})
				if ip.Leader >= 0 && ip.Leader != me {
					follow[ip.Leader] = append(follow[ip.Leader], p)
				}
			}
			parts[i] = p
		}
		if old != nil {
			for _, p := range old.parts[min(len(old.parts), len(it.Partitions)):] {
				if p != nil {
					p.Step(replica.Unassign{})
				}
			}
		}
		next[it.Name] = &topic{name: it.Name, meta: &topicMeta{ID: it.ID, Configs: it.Configs, Internal: it.Name == offsetsTopic}, parts: parts}
	}
	for name, t := range cur {
		if _, ok := next[name]; !ok {
			gone = append(gone, t)
		}
	}
	for _, t := range gone {
		n := 0
		for _, p := range t.parts {
			if p != nil {
				p.Step(replica.Unassign{TopicDeleted: true})
				n++
			}
		}
		if n > 0 {
			b.log.Info().Str("topic", t.name).Int("replicas", n).Msg("deleting a deleted topic's local replicas")
		}
	}
	replica.StepAll(assigns)
	for _, p := range created {
		p.Start()
	}
	b.waitOpened(created)
	byID := make(map[[16]byte]*topic, len(next))
	for _, t := range next {
		byID[t.meta.ID] = t
	}
	b.mu.Lock()
	b.mu.topics, b.mu.byID, b.mu.image = next, byID, img
	close(b.mu.changed)
	b.mu.changed = make(chan struct{})
	b.mu.Unlock()
	b.fetch.Update(follow)
	b.followOffsets(next[offsetsTopic])
	b.followTxns(next[txnTopic])
}

// assignment is what img says of a partition, for its core.
func assignment(img *controller.Image, ip controller.Partition) replica.Assignment {
	a := replica.Assignment{Leader: ip.Leader, LeaderEpoch: ip.LeaderEpoch, PartitionEpoch: ip.PartitionEpoch,
		Replicas: ip.Replicas, ISR: ip.ISR, Removing: ip.Removing}
	for _, id := range ip.Replicas {
		if bs, ok := img.Broker(id); ok && !bs.Fenced {
			a.Live = append(a.Live, id)
		}
	}
	return a
}

// waitOpened waits, at most fjord.partition.open.timeout.ms, for the new
// replicas' first open to finish, so a client that created a topic finds
// it serving as soon as it shows in this broker's metadata. One that
// takes longer stays Opening (its core resigns a leadership placed here)
// and is adopted when it opens; the pipeline moves on.
func (b *Broker) waitOpened(ps []*replica.Partition) {
	if len(ps) == 0 {
		return
	}
	deadline := time.NewTimer(time.Duration(b.cfg.PartitionOpenTimeoutMs) * time.Millisecond)
	defer deadline.Stop()
	for _, p := range ps {
		select {
		case <-p.OpenAnswered():
		case <-deadline.C:
			return
		case <-b.ctx.Done():
			return
		}
	}
}

// openSlots bounds the logs opened at once (creating 1,000 partitions is
// 1,000 directory creations and log opens).
const openSlots = 16

// errFDBudget refuses an open that would exhaust the descriptor limit.
var errFDBudget = errors.New("broker: file descriptor budget exhausted")

// Open opens p's log in the background: after the directory's previous
// owner released it, one of openSlots at a time, within the descriptor
// budget. The answer is p.Opened.
func (h replicaHost) Open(p *replica.Partition) {
	b := h.b
	c := b.claimOf(p)
	if c == nil {
		return
	}
	b.goLoop(func() {
		if c.prev != nil {
			select {
			case <-c.prev.released:
			case <-b.ctx.Done():
				return
			}
		}
		select {
		case b.openSem <- struct{}{}:
		case <-b.ctx.Done():
			return
		}
		lg, err := b.openLog(p, c)
		<-b.openSem
		p.Opened(lg, err)
	})
}

// openLog opens (creating if needed) p's log. A directory whose
// partition.metadata names another topic id belongs to an earlier topic
// of the same name whose deletion a crash interrupted: it is removed
// first. An unreadable partition.metadata (damaged: it is replaced
// atomically) is rewritten, never taken as a reason to delete.
func (b *Broker) openLog(p *replica.Partition, c *dirClaim) (*storage.Log, error) {
	if h := b.openHook.Load(); h != nil {
		(*h)(p.Topic, p.Index)
	}
	// The safety net behind the check at creation (fdbudget.go): a
	// replica it did not foresee stays offline rather than exhaust the
	// descriptors. The slot is taken before the open, so concurrent opens
	// cannot overshoot together.
	b.replicas.mu.Lock()
	inUse := b.replicas.fds
	if inUse+1 > b.fdBudget.partLimit {
		b.replicas.mu.Unlock()
		return nil, fmt.Errorf("%w: %d replicas open, the limit is %s", errFDBudget, inUse, b.fdBudget)
	}
	b.replicas.fds++
	c.fds = 1
	b.replicas.mu.Unlock()
	lg, err := b.openLogFiles(p, c)
	if err != nil {
		b.replicas.mu.Lock()
		b.replicas.fds -= c.fds
		c.fds = 0
		b.replicas.mu.Unlock()
	}
	return lg, err
}

// openLogFiles is openLog past the budget.
func (b *Broker) openLogFiles(p *replica.Partition, c *dirClaim) (*storage.Log, error) {
	dir := c.dir
	scfg := p.Settings().Storage
	scfg.Files = b.files
	want := encodeUUID(p.TopicID)
	id, err := storage.ReadPartitionMetadata(scfg.FS, dir)
	if err == nil && id != want {
		b.log.Warn().Str("dir", dir).Str("found_topic_id", id).Str("topic_id", want).
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
	return lg, nil
}

// Delete closes and removes p's log in the background; the answer is
// p's LogDeleted step, which ends it (Ended releases the directory).
func (h replicaHost) Delete(p *replica.Partition) {
	h.b.goLoop(func() {
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
	b := h.b
	if !prop.Resign {
		if v := p.View(); len(prop.ISR) < len(v.ISR) {
			b.metrics.ISRShrinks.Inc()
		} else {
			b.metrics.ISRExpands.Inc()
		}
	}
	b.alterPartition(b.meta.Image(), p.TopicID, p.Index, prop.LeaderEpoch, prop.PartitionEpoch, prop.ISR,
		10*time.Second, func(code int16, err error) {
			if err != nil && !errors.Is(err, context.Canceled) {
				p.Logger.Debug().Err(err).Msg("AlterPartition got no answer")
			}
			p.Step(replica.AlterAnswered{Proposal: prop, Code: code})
		})
}

// tickLoop lets time pass for every local replica: ISR checks, retried
// opens, resignations and proposals, and timeouts.
func (b *Broker) tickLoop() {
	every := time.Duration(min(max(b.cfg.ReplicaLagTimeMaxMs/4, 50), 250)) * time.Millisecond
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-b.ctx.Done():
			return
		case <-t.C:
		}
		now := time.Now().UnixMilli()
		under := 0
		for _, p := range b.liveReplicas() {
			p.Tick(now)
			// Against the replication factor, not the replicas: a move
			// grows the replicas for a while (as Kafka counts).
			if v := p.View(); v.Leads() && len(v.ISR) < len(v.Replicas)-len(v.Removing) {
				under++
			}
		}
		b.underReplicated.Store(int64(under))
	}
}
