package broker

import (
	"fmt"
	"maps"
	"os"
)

// createSpec is a request to create one topic.
type createSpec struct {
	name        string
	partitions  int32 // -1: num.partitions
	replication int16 // -1: default.replication.factor
	assignment  map[int32][]int32
	configs     map[string]string
	internal    bool
}

// validTopicName applies Kafka's rules: 1-249 characters of [a-zA-Z0-9._-],
// not "." or "..".
func validTopicName(name string) error {
	if name == "" || name == "." || name == ".." || len(name) > 249 {
		return fmt.Errorf("%w: %q", errInvalidTopic, name)
	}
	for _, c := range name {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return fmt.Errorf("%w: %q contains %q (allowed: a-z A-Z 0-9 . _ -)", errInvalidTopic, name, c)
		}
	}
	return nil
}

// checkCreate validates a creation and fills defaults; it changes nothing.
func (b *Broker) checkCreate(sp *createSpec) error {
	if err := validTopicName(sp.name); err != nil {
		return err
	}
	if b.lookup(sp.name) != nil {
		return fmt.Errorf("%w: %q", errTopicExists, sp.name)
	}
	if len(sp.assignment) > 0 {
		if sp.partitions != -1 || sp.replication != -1 {
			return fmt.Errorf("%w: give either a replica assignment or partitions and replication factor", errInvalidRequest)
		}
		sp.partitions = int32(len(sp.assignment))
		for p := range sp.partitions {
			rs, ok := sp.assignment[p]
			if !ok || len(rs) != 1 || rs[0] != b.cfg.NodeID {
				return fmt.Errorf("%w: partition %d: replicas %v (this cluster has the single node %d)", errInvalidAssign, p, rs, b.cfg.NodeID)
			}
		}
		sp.replication = 1
	}
	if sp.partitions == -1 {
		sp.partitions = b.cfg.NumPartitions
	}
	if sp.replication == -1 {
		sp.replication = b.cfg.DefaultReplication
	}
	if sp.partitions < 1 || sp.partitions > 100000 {
		return fmt.Errorf("%w: %d", errInvalidParts, sp.partitions)
	}
	if sp.replication < 1 || sp.replication > 1 {
		return fmt.Errorf("%w: %d (1 live broker)", errInvalidRF, sp.replication)
	}
	return validateTopicConfigs(sp.configs)
}

// createTopic creates a topic durably: metadata first, then the logs, so a
// crash in between leaves a topic whose missing logs are created empty on
// start-up, never a log no metadata knows.
func (b *Broker) createTopic(sp createSpec) (*topic, error) {
	b.adminMu.Lock()
	defer b.adminMu.Unlock()
	if b.closing.Load() {
		return nil, errShuttingDown
	}
	if err := b.checkCreate(&sp); err != nil {
		return nil, err
	}
	tm := &topicMeta{ID: newTopicID(), Partitions: sp.partitions, Configs: sp.configs, Internal: sp.internal}
	next := b.nextState(func(st *metaState) { st.Topics[sp.name] = tm })
	if err := b.ms.save(next); err != nil {
		return nil, err
	}
	t, err := b.openTopic(sp.name, tm, true)
	if err != nil {
		// Undo, or the node could not start again: a topic in the
		// metadata whose logs cannot be opened stops start-up.
		b.mu.RLock()
		prev := b.mu.state
		b.mu.RUnlock()
		if rerr := b.ms.save(prev); rerr != nil {
			b.log.Error().Err(rerr).Str("topic", sp.name).Msg("could not roll back a failed topic creation")
		}
		for i := range sp.partitions {
			os.RemoveAll(b.partitionDir(sp.name, i))
		}
		return nil, fmt.Errorf("create %q: %w", sp.name, err)
	}
	b.mu.Lock()
	b.mu.state = next
	topics := maps.Clone(b.mu.topics)
	topics[sp.name] = t
	b.mu.topics = topics
	b.mu.byID[tm.ID] = t
	b.mu.Unlock()
	b.log.Info().Str("topic", sp.name).Str("topic_id", encodeUUID(tm.ID)).Int32("partitions", sp.partitions).Msg("created topic")
	return t, nil
}

// nextState copies the persisted state and applies fn to the copy.
// REQUIRES: b.adminMu held.
func (b *Broker) nextState(fn func(*metaState)) *metaState {
	b.mu.RLock()
	cur := b.mu.state
	b.mu.RUnlock()
	next := *cur
	next.Topics = maps.Clone(cur.Topics)
	fn(&next)
	return &next
}

// deleteTopic removes a topic: metadata first, then its logs.
func (b *Broker) deleteTopic(name string) error {
	b.adminMu.Lock()
	defer b.adminMu.Unlock()
	if !b.cfg.DeleteTopicEnable {
		return errDeleteDisabled
	}
	t := b.lookup(name)
	if t == nil {
		return fmt.Errorf("%w: %q", errUnknownTopic, name)
	}
	next := b.nextState(func(st *metaState) { delete(st.Topics, name) })
	if err := b.ms.save(next); err != nil {
		return err
	}
	b.mu.Lock()
	b.mu.state = next
	topics := maps.Clone(b.mu.topics)
	delete(topics, name)
	b.mu.topics = topics
	delete(b.mu.byID, t.meta.ID)
	b.mu.Unlock()
	for _, p := range t.parts {
		p.wakeAll() // waiting fetches look again and find the topic gone
		if err := p.log.Delete(); err != nil && !os.IsNotExist(err) {
			b.log.Warn().Err(err).Str("topic", name).Int32("partition", p.index).Msg("removing deleted partition's files")
		}
	}
	b.log.Info().Str("topic", name).Msg("deleted topic")
	return nil
}

// allocProducerID hands out a producer id. Blocks of ids are reserved
// durably before use, so ids are never reused after a crash.
func (b *Broker) allocProducerID() (int64, error) {
	b.pidMu.Lock()
	defer b.pidMu.Unlock()
	if b.pidMu.next < b.pidMu.limit {
		id := b.pidMu.next
		b.pidMu.next++
		return id, nil
	}
	b.adminMu.Lock()
	defer b.adminMu.Unlock()
	const block = 1000
	var start int64
	next := b.nextState(func(st *metaState) {
		start = st.NextProducerID
		st.NextProducerID += block
	})
	if err := b.ms.save(next); err != nil {
		return 0, err
	}
	b.mu.Lock()
	b.mu.state = next
	b.mu.Unlock()
	b.pidMu.next, b.pidMu.limit = start+1, start+block
	return start, nil
}
