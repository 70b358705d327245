package broker

import (
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fjordlog/fjord/storage"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// offsetsTopic is Kafka's internal topic of committed offsets. Each commit is
// a record keyed by (group, topic, partition) in Kafka's own key and value
// formats (kmsg.OffsetCommitKey v1, OffsetCommitValue v3), so the topic is
// readable by Kafka's tools; a null value deletes the key.
const offsetsTopic = "__consumer_offsets"

type topicPartition struct {
	topic     string
	partition int32
}

type committedOffset struct {
	offset      int64
	leaderEpoch int32
	metadata    string
	commitTime  int64 // ms
}

// offsetStore keeps every group's committed offsets in memory, backed by
// the offsets topic: a commit is appended to the group's partition
// (hash(group) % partitions), made durable, and only then acknowledged.
//
// Invariant: for a loaded partition, mu.offsets equals the result of
// applying that partition's log in order; the map is updated at append, in
// log order, under mu.
type offsetStore struct {
	b      *Broker
	t      *topic
	loaded []atomic.Bool // per offsets-topic partition: its log has been read
	mu     struct {
		sync.Mutex
		offsets map[string]map[topicPartition]committedOffset
		// groupMeta is each group's latest stored GroupMetadataValue, kept
		// only while loading (restored into the coordinator, then cleared).
		groupMeta map[string][]byte
		// pending holds, per offsets partition, appended commits in log
		// order until they are durable; inFlight counts them per group.
		pending  map[int32][]pendingCommit
		inFlight map[string]int
	}
}

var errLoading = errors.New("broker: coordinator is loading")

// javaStringHash is Java's String.hashCode over UTF-16 code units, which
// Kafka uses to map a group to its offsets partition; using the same
// function keeps group placement identical to Kafka's.
func javaStringHash(s string) int32 {
	var h int32
	for _, r := range s {
		if r >= 0x10000 {
			r -= 0x10000
			h = 31*h + int32(0xD800+(r>>10))
			h = 31*h + int32(0xDC00+(r&0x3FF))
			continue
		}
		h = 31*h + int32(r)
	}
	return h
}

func (o *offsetStore) partitionFor(group string) int32 {
	h := javaStringHash(group)
	if h == -1<<31 {
		h = 0
	} else if h < 0 {
		h = -h
	}
	return h % int32(len(o.t.parts))
}

// ensureOffsetsTopic creates the offsets topic on first start.
func (b *Broker) ensureOffsetsTopic() (*topic, error) {
	if t := b.lookup(offsetsTopic); t != nil {
		return t, nil
	}
	return b.createTopic(createSpec{
		name: offsetsTopic, partitions: b.cfg.OffsetsTopicPartitions, replication: -1, internal: true,
		// Committed offsets must never age out by time. Compaction is what
		// keeps this topic small; until it exists the topic only grows.
		configs: map[string]string{"cleanup.policy": "compact", "retention.ms": "-1", "segment.bytes": "104857600"},
	})
}

func newOffsetStore(b *Broker, t *topic) *offsetStore {
	o := &offsetStore{b: b, t: t, loaded: make([]atomic.Bool, len(t.parts))}
	o.mu.offsets = map[string]map[topicPartition]committedOffset{}
	o.mu.groupMeta = map[string][]byte{}
	o.mu.pending = map[int32][]pendingCommit{}
	o.mu.inFlight = map[string]int{}
	return o
}

// load reads every offsets partition's log; until a partition is loaded its
// groups answer COORDINATOR_LOAD_IN_PROGRESS.
func (o *offsetStore) load() {
	start := time.Now()
	n := 0
	for i, p := range o.t.parts {
		off := p.log.StartOffset()
		for {
			data, err := p.log.Read(off, 1<<20, p.log.EndOffset(), nil)
			if err != nil {
				o.b.log.Error().Err(err).Int("partition", i).Msg("loading committed offsets; partition stays unavailable")
				break
			}
			if len(data) == 0 {
				// Groups come back before the partition is served, so no
				// new member can race a restored generation.
				o.restoreGroups(int32(i))
				o.loaded[i].Store(true)
				break
			}
			for len(data) > 0 {
				info, err := storage.ParseHeader(data)
				if err != nil || info.Bytes > len(data) {
					o.b.log.Error().Err(err).Int("partition", i).Msg("bad batch in offsets topic")
					return
				}
				base := storage.BaseOffset(data)
				storage.EachRecord(data[:info.Bytes], info, func(r storage.Record) bool {
					o.apply(r.Key, r.Value)
					n++
					return true
				})
				off = base + int64(info.LastDelta) + 1
				data = data[info.Bytes:]
			}
		}
	}
	o.b.log.Info().Int("records", n).Dur("took", time.Since(start)).Msg("loaded committed offsets")
}

// apply folds one offsets-topic record into the map.
func (o *offsetStore) apply(key, value []byte) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.applyLocked(key, value)
}

// REQUIRES: o.mu held.
func (o *offsetStore) applyLocked(key, value []byte) {
	if len(key) >= 2 && int16(key[0])<<8|int16(key[1]) == 2 {
		var gk kmsg.GroupMetadataKey
		if gk.ReadFrom(key) != nil {
			return
		}
		if value == nil {
			delete(o.mu.groupMeta, gk.Group)
		} else {
			o.mu.groupMeta[gk.Group] = value
		}
		return
	}
	var k kmsg.OffsetCommitKey
	if len(key) < 2 || k.ReadFrom(key) != nil || k.Version > 1 {
		return
	}
	tp := topicPartition{k.Topic, k.Partition}
	if value == nil {
		if g := o.mu.offsets[k.Group]; g != nil {
			delete(g, tp)
			if len(g) == 0 {
				delete(o.mu.offsets, k.Group)
			}
		}
		return
	}
	var v kmsg.OffsetCommitValue
	if v.ReadFrom(value) != nil {
		return
	}
	g := o.mu.offsets[k.Group]
	if g == nil {
		g = map[topicPartition]committedOffset{}
		o.mu.offsets[k.Group] = g
	}
	g[tp] = committedOffset{v.Offset, v.LeaderEpoch, v.Metadata, v.CommitTimestamp}
}

func offsetKey(group string, tp topicPartition) []byte {
	k := kmsg.NewOffsetCommitKey()
	k.Version, k.Group, k.Topic, k.Partition = 1, group, tp.topic, tp.partition
	return k.AppendTo(nil)
}

func offsetValue(c committedOffset) []byte {
	v := kmsg.NewOffsetCommitValue()
	v.Version, v.Offset, v.LeaderEpoch, v.Metadata, v.CommitTimestamp = 3, c.offset, c.leaderEpoch, c.metadata, c.commitTime
	return v.AppendTo(nil)
}

// commit appends the offsets (nil value: delete) for group and calls done
// once they are durable, or with the error that stopped them.
func (o *offsetStore) commit(group string, offs map[topicPartition]*committedOffset, done func(error)) {
	o.commitIf(group, offs, nil, func(_ int, err error) { done(err) })
}

// pendingCommit is an appended offsets batch not yet known durable. It is
// applied to the table once the log's durable offset passes end.
type pendingCommit struct {
	end   int64 // log offset after the batch
	group string
	recs  []storage.KV
}

// commitIf is commit with a precondition: keep, if given, is asked under mu
// for each partition whether to write it, given the committed offset the
// table holds now. A partition with a commit in flight for the group is
// never passed to keep. done learns how many partitions were written.
//
// The table changes only once a batch is durable, and in log order: an
// OffsetFetch never sees a commit that a crash could take back, and one
// whose fsync failed is never seen at all.
func (o *offsetStore) commitIf(group string, offs map[topicPartition]*committedOffset,
	keep func(tp topicPartition, cur committedOffset, ok bool) bool, done func(int, error)) {
	pi := o.partitionFor(group)
	if !o.loaded[pi].Load() {
		done(0, errLoading)
		return
	}
	p := o.t.parts[pi]
	o.mu.Lock()
	recs := make([]storage.KV, 0, len(offs))
	for tp, c := range offs {
		if keep != nil {
			cur, ok := o.mu.offsets[group][tp]
			if o.mu.inFlight[group] > 0 || !keep(tp, cur, ok) {
				continue
			}
		}
		kv := storage.KV{Key: offsetKey(group, tp)}
		if c != nil {
			kv.Value = offsetValue(*c)
		}
		recs = append(recs, kv)
	}
	if len(recs) == 0 {
		o.mu.Unlock()
		done(0, nil)
		return
	}
	now := time.Now().UnixMilli()
	batch := storage.BuildBatch(recs, now)
	info, err := storage.ValidateBatch(batch, 0)
	if err == nil {
		var res storage.AppendResult
		res, err = p.log.Append(batch, info, 0, now)
		if err == nil {
			o.mu.pending[pi] = append(o.mu.pending[pi], pendingCommit{res.LastOffset + 1, group, recs})
			o.mu.inFlight[group]++
		}
	}
	o.mu.Unlock()
	if err != nil {
		done(0, err)
		return
	}
	go func() {
		err := p.flush()
		o.applyDurable(pi)
		done(len(recs), err)
	}()
}

// applyDurable applies, in log order, the pending commits of partition pi
// that are now durable.
func (o *offsetStore) applyDurable(pi int32) {
	durable := o.t.parts[pi].log.DurableOffset()
	o.mu.Lock()
	defer o.mu.Unlock()
	q := o.mu.pending[pi]
	for len(q) > 0 && q[0].end <= durable {
		for _, r := range q[0].recs {
			o.applyLocked(r.Key, r.Value)
		}
		if o.mu.inFlight[q[0].group]--; o.mu.inFlight[q[0].group] == 0 {
			delete(o.mu.inFlight, q[0].group)
		}
		q = q[1:]
	}
	o.mu.pending[pi] = q
}

// restoreGroups hands the stored groups of offsets partition pi to the
// coordinator.
func (o *offsetStore) restoreGroups(pi int32) {
	o.mu.Lock()
	var ids []string
	vals := map[string][]byte{}
	for id, v := range o.mu.groupMeta {
		if o.partitionFor(id) == pi {
			ids = append(ids, id)
			vals[id] = v
			delete(o.mu.groupMeta, id)
		}
	}
	o.mu.Unlock()
	for _, id := range ids {
		var v kmsg.GroupMetadataValue
		if err := v.ReadFrom(vals[id]); err != nil {
			o.b.log.Warn().Err(err).Str("group", id).Msg("unreadable stored group; members will rejoin")
			continue
		}
		o.b.groups.restore(id, &v)
	}
}

// storeGroup appends a group's metadata (nil: a tombstone) to its offsets
// partition, durably in the background.
func (o *offsetStore) storeGroup(id string, v *kmsg.GroupMetadataValue) {
	pi := o.partitionFor(id)
	if !o.loaded[pi].Load() {
		return
	}
	k := kmsg.NewGroupMetadataKey()
	k.Version, k.Group = 2, id
	kv := storage.KV{Key: k.AppendTo(nil)}
	if v != nil {
		kv.Value = v.AppendTo(nil)
	}
	now := time.Now().UnixMilli()
	batch := storage.BuildBatch([]storage.KV{kv}, now)
	info, err := storage.ValidateBatch(batch, 0)
	if err != nil {
		return
	}
	p := o.t.parts[pi]
	o.mu.Lock()
	_, err = p.log.Append(batch, info, 0, now)
	o.mu.Unlock()
	if err != nil {
		o.b.log.Warn().Err(err).Str("group", id).Msg("storing group metadata")
		return
	}
	go p.flush()
}

// fetch returns a group's committed offset for tp.
func (o *offsetStore) fetch(group string, tp topicPartition) (committedOffset, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	c, ok := o.mu.offsets[group][tp]
	return c, ok
}

// groupOffsets returns a copy of all of a group's committed offsets.
func (o *offsetStore) groupOffsets(group string) map[topicPartition]committedOffset {
	o.mu.Lock()
	defer o.mu.Unlock()
	out := make(map[topicPartition]committedOffset, len(o.mu.offsets[group]))
	for tp, c := range o.mu.offsets[group] {
		out[tp] = c
	}
	return out
}

// groupsWithOffsets lists groups that have committed offsets.
func (o *offsetStore) groupsWithOffsets() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	out := make([]string, 0, len(o.mu.offsets))
	for g := range o.mu.offsets {
		out = append(out, g)
	}
	return out
}

func (o *offsetStore) isLoaded(group string) bool { return o.loaded[o.partitionFor(group)].Load() }
