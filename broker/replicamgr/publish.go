package replicamgr

import (
	"maps"
	"slices"
	"time"

	"github.com/fjordlog/fjord/broker/replica"
	"github.com/fjordlog/fjord/controller"
)

// The local replicas follow the metadata image: the publish loop applies
// each new image (Apply), creating a partition driver for every replica
// the image places here, assigning every driver its partition's state, and
// unassigning the ones it no longer places here. Everything that can take
// time — opening a log, deleting one, asking the controller to change an
// ISR — runs in the background and answers the driver with a step, so the
// metadata pipeline never blocks on a disk or a peer.

// PublishLoop applies each new image of the metadata log to the local
// replicas until the manager's context ends. It is the one writer of the
// topic map: run it once, on a goroutine of its own.
func (m *Manager) PublishLoop() {
	var last uint64
	straysChecked := false
	for {
		if m.cfg.Metadata.WaitFor(m.ctx, func(img *controller.Image) bool { return img.Version() > last }) != nil {
			return
		}
		img := m.cfg.Metadata.Image()
		m.Apply(img)
		last = img.Version()
		if epoch := m.brokerEpoch(); !straysChecked && epoch > 0 && last >= uint64(epoch) {
			straysChecked = true // once per process: later removals come as Unassigns
			m.removeStrays(img)
		}
	}
}

func (m *Manager) brokerEpoch() int64 {
	if m.cfg.BrokerEpoch == nil {
		return 0
	}
	return m.cfg.BrokerEpoch()
}

// Apply makes the local replicas match img and publishes it. REQUIRES:
// called only from PublishLoop, or before it starts: it is the one writer
// of m.mu.
func (m *Manager) Apply(img *controller.Image) {
	m.mu.RLock()
	cur, prev := m.mu.topics, m.mu.image
	m.mu.RUnlock()
	me := m.cfg.NodeID
	if m.cfg.Reconfigure != nil && (prev == nil || !maps.EqualFunc(prev.BrokerConfigs(), img.BrokerConfigs(), maps.Equal)) {
		m.cfg.Reconfigure(img)
	}
	next := make(map[string]*Topic, len(cur))
	var gone []*Topic
	var created []*replica.Partition
	follow := map[int32][]*replica.Partition{}
	var assigns []replica.PendingStep // stepped together: replica.StepAll
	for _, it := range img.Topics() {
		old := cur[it.Name]
		if old != nil && old.ID != it.ID {
			gone = append(gone, old) // deleted and re-created under its name
			old = nil
		}
		parts := make([]*replica.Partition, len(it.Partitions))
		for i, ip := range it.Partitions {
			var p *replica.Partition
			if old != nil && i < len(old.Parts) {
				p = old.Parts[i]
			}
			placed := slices.Contains(ip.Replicas, me)
			switch {
			case placed && p == nil:
				p = m.newReplica(it.Name, int32(i), it.ID, m.cfg.Settings(it.Configs))
				created = append(created, p)
			case !placed && p != nil:
				p.Step(replica.Unassign{})
				p = nil
			case p != nil:
				// A topic config or a broker default may have changed.
				p.SetSettings(m.cfg.Settings(it.Configs))
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
			for _, p := range old.Parts[min(len(old.Parts), len(it.Partitions)):] {
				if p != nil {
					p.Step(replica.Unassign{})
				}
			}
		}
		next[it.Name] = &Topic{Name: it.Name, ID: it.ID, Configs: it.Configs, Parts: parts}
	}
	for name, t := range cur {
		if _, ok := next[name]; !ok {
			gone = append(gone, t)
		}
	}
	for _, t := range gone {
		n := 0
		for _, p := range t.Parts {
			if p != nil {
				p.Step(replica.Unassign{TopicDeleted: true})
				n++
			}
		}
		if n > 0 {
			m.log.Info().Str("topic", t.Name).Int("replicas", n).Msg("deleting a deleted topic's local replicas")
		}
	}
	if len(gone) > 0 && m.cfg.TopicsGone != nil {
		m.cfg.TopicsGone(gone)
	}
	replica.StepAll(assigns)
	for _, p := range created {
		p.Start()
	}
	m.waitOpened(created)
	byID := make(map[[16]byte]*Topic, len(next))
	for _, t := range next {
		byID[t.ID] = t
	}
	m.mu.Lock()
	m.mu.topics, m.mu.byID, m.mu.image = next, byID, img
	close(m.mu.changed)
	m.mu.changed = make(chan struct{})
	m.mu.Unlock()
	if m.cfg.Fetchers != nil {
		m.cfg.Fetchers.Update(follow)
	}
	for _, name := range m.cfg.CoordinatorTopics {
		m.coordinate(next[name])
	}
	m.appliedVersion.Store(img.Version())
}

// coordinate tells the coordinators t's local replicas (nil: no topic).
func (m *Manager) coordinate(t *Topic) {
	if t != nil && m.cfg.Coordinate != nil {
		m.cfg.Coordinate(t)
	}
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
func (m *Manager) waitOpened(ps []*replica.Partition) {
	if len(ps) == 0 {
		return
	}
	deadline := time.NewTimer(time.Duration(m.cfg.PartitionOpenTimeoutMs) * time.Millisecond)
	defer deadline.Stop()
	for _, p := range ps {
		select {
		case <-p.OpenAnswered():
		case <-deadline.C:
			return
		case <-m.ctx.Done():
			return
		}
	}
}
