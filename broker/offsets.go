package broker

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fjordlog/fjord/broker/replica"

	"github.com/fjordlog/fjord/storage"
	"github.com/twmb/franz-go/pkg/kerr"
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

// offsetStore keeps the committed offsets of the groups this node
// coordinates, in memory, backed by the offsets topic: a commit is appended
// to the group's partition (hash(group) % partitions), made durable, and
// only then acknowledged. This node coordinates the groups of the offsets
// partitions it leads; it reads a partition's log when it gains the
// leadership and forgets its groups when it loses it.
//
// Invariant: for a loaded partition, mu.offsets restricted to its groups
// equals the result of applying that partition's log in order; the map is
// updated in log order, under mu.
type offsetStore struct {
	b     *Broker
	count atomic.Int32 // partitions of the offsets topic; 0 until it exists
	mu    struct {
		sync.Mutex
		// parts[i] is offsets partition i where this node leads it, else
		// nil; loaded[i] says its log has been read since.
		parts   []*replica.Partition
		loaded  []bool
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

var (
	errLoading        = errors.New("broker: coordinator is loading")
	errNotCoordinator = errors.New("broker: not the coordinator of this group")
)

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
	n := o.count.Load()
	if n == 0 {
		return 0
	}
	h := javaStringHash(group)
	if h == -1<<31 {
		h = 0
	} else if h < 0 {
		h = -h
	}
	return h % n
}

// ensureOffsetsTopic asks the controller for the offsets topic if the image
// lacks it. Failure (e.g. fewer live brokers than
// offsets.topic.replication.factor) is retried by the next FindCoordinator.
func (b *Broker) ensureOffsetsTopic() {
	if b.image().Topic(offsetsTopic) != nil {
		return
	}
	req := kmsg.NewPtrCreateTopicsRequest()
	rt := kmsg.NewCreateTopicsRequestTopic()
	// Kafka's default of 3 replicas, capped at the number of voters so that
	// a single node (a quorum of one) works unconfigured.
	rf := b.cfg.OffsetsTopicReplication
	if vs, _ := ParseVoters(b.cfg.ControllerQuorumVoters); int(rf) > max(len(vs), 1) {
		rf = int16(max(len(vs), 1))
	}
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = offsetsTopic, b.cfg.OffsetsTopicPartitions, rf
	// Committed offsets must never age out by time; compaction keeps the
	// topic small.
	for k, v := range map[string]string{"cleanup.policy": "compact", "retention.ms": "-1", "segment.bytes": "104857600"} {
		c := kmsg.NewCreateTopicsRequestTopicConfig()
		c.Name, c.Value = k, &v
		rt.Configs = append(rt.Configs, c)
	}
	req.Topics = append(req.Topics, rt)
	ctx, cancel := adminCtx(b.ctx, 10000)
	defer cancel()
	resp := b.createTopics(ctx, req)
	if code := resp.Topics[0].ErrorCode; code != 0 && code != kerr.TopicAlreadyExists.Code {
		b.log.Warn().Int16("code", code).Msg("cannot create the offsets topic yet; FindCoordinator will retry")
	}
}

func newOffsetStore(b *Broker) *offsetStore {
	o := &offsetStore{b: b}
	o.mu.offsets = map[string]map[topicPartition]committedOffset{}
	o.mu.groupMeta = map[string][]byte{}
	o.mu.pending = map[int32][]pendingCommit{}
	o.mu.inFlight = map[string]int{}
	return o
}

// follow matches the store to the offsets topic in a new image: it loads
// the partitions this node has begun to lead and forgets those it no longer
// leads. Called by publishLoop only.
func (o *offsetStore) follow(t *topic) {
	if t == nil {
		return
	}
	o.mu.Lock()
	if len(o.mu.parts) < len(t.parts) {
		o.mu.parts = append(o.mu.parts, make([]*replica.Partition, len(t.parts)-len(o.mu.parts))...)
		o.mu.loaded = append(o.mu.loaded, make([]bool, len(t.parts)-len(o.mu.loaded))...)
		o.count.Store(int32(len(t.parts)))
	}
	var gained []int32
	var lost []int32
	for i, p := range t.parts {
		cur := o.mu.parts[i]
		switch {
		case p.Leads() && cur != p:
			o.mu.parts[i], o.mu.loaded[i] = p, false
			gained = append(gained, int32(i))
		case !p.Leads() && cur != nil:
			o.mu.parts[i], o.mu.loaded[i] = nil, false
			lost = append(lost, int32(i))
		}
	}
	for _, pi := range lost {
		o.forgetLocked(pi)
	}
	o.mu.Unlock()
	for _, pi := range lost {
		o.b.groups.unload(func(id string) bool { return o.partitionFor(id) == pi })
		o.b.log.Info().Int32("partition", pi).Msg("no longer coordinator for this offsets partition")
	}
	for _, pi := range gained {
		o.b.goLoop(func() { o.load(pi, t.parts[pi]) })
	}
}

// forgetLocked drops what the store holds for offsets partition pi.
// REQUIRES: o.mu held.
func (o *offsetStore) forgetLocked(pi int32) {
	for g := range o.mu.offsets {
		if o.partitionFor(g) == pi {
			delete(o.mu.offsets, g)
		}
	}
	for g := range o.mu.groupMeta {
		if o.partitionFor(g) == pi {
			delete(o.mu.groupMeta, g)
		}
	}
	for _, pc := range o.mu.pending[pi] {
		delete(o.mu.inFlight, pc.group)
	}
	delete(o.mu.pending, pi)
}

// leader returns offsets partition pi if this node leads it and has loaded
// it, or the error to answer with.
func (o *offsetStore) leader(pi int32) (*replica.Partition, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if int(pi) >= len(o.mu.parts) || o.mu.parts[pi] == nil {
		return nil, errNotCoordinator
	}
	if !o.mu.loaded[pi] {
		return nil, errLoading
	}
	return o.mu.parts[pi], nil
}

// allLoaded reports whether the offsets topic exists and every partition of
// it is led and loaded here (a single node's steady state).
func (o *offsetStore) allLoaded() bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	if len(o.mu.loaded) == 0 {
		return false
	}
	for _, l := range o.mu.loaded {
		if !l {
			return false
		}
	}
	return true
}

// load reads offsets partition pi's log, which this node has begun to lead;
// until it is loaded its groups answer COORDINATOR_LOAD_IN_PROGRESS.
func (o *offsetStore) load(pi int32, p *replica.Partition) {
	start := time.Now()
	n := 0
	lg, _, code := p.Serve(replica.ConsumerRead)
	if code != 0 {
		return // no longer leading here, or deleted: the next leader loads it
	}
	off := lg.StartOffset()
	for {
		data, err := lg.Read(off, 1<<20, lg.EndOffset(), nil)
		if err != nil {
			o.b.log.Error().Err(err).Int32("partition", pi).Msg("loading committed offsets; partition stays unavailable")
			o.b.readFailed(p, err) // a damaged log: hand the partition to a sound replica
			return
		}
		if len(data) == 0 {
			break
		}
		for len(data) > 0 {
			info, err := storage.ParseHeader(data)
			if err != nil || info.Bytes > len(data) {
				o.b.log.Error().Err(err).Int32("partition", pi).Msg("bad batch in offsets topic")
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
	// Groups come back before the partition is served, so no new member
	// can race a restored generation.
	o.restoreGroups(pi)
	o.mu.Lock()
	ok := int(pi) < len(o.mu.parts) && o.mu.parts[pi] == p
	if ok {
		o.mu.loaded[pi] = true
	}
	o.mu.Unlock()
	if n > 0 || time.Since(start) > 100*time.Millisecond {
		o.b.log.Info().Int32("partition", pi).Int("records", n).Dur("took", time.Since(start)).Msg("loaded committed offsets")
	}
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
	p, err := o.leader(pi)
	if err != nil {
		done(0, err)
		return
	}
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
	var res storage.AppendResult
	var v *replica.View
	if err == nil {
		res, v, err = p.AppendAsLeader(batch, info, now)
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
	o.b.goLoop(func() {
		// Committed like an acks=all produce: durable here and on every
		// in-sync replica of the offsets partition.
		err := p.Flush()
		if err == nil {
			expire := time.NewTimer(commitTimeout)
			err = p.WaitCommitted(context.Background(), res.LastOffset+1, v.LeaderEpoch, expire.C)
			expire.Stop()
		}
		o.applyDurable(pi, p)
		done(len(recs), err)
	})
}

// commitTimeout bounds how long a commit waits for the offsets partition's
// replicas.
const commitTimeout = 15 * time.Second

// applyDurable applies, in log order, the pending commits of partition pi
// that are now committed (below the high watermark).
func (o *offsetStore) applyDurable(pi int32, p *replica.Partition) {
	durable := p.HW()
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
	p, err := o.leader(pi)
	if err != nil {
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
	o.mu.Lock()
	_, _, err = p.AppendAsLeader(batch, info, now)
	o.mu.Unlock()
	if err != nil {
		o.b.log.Warn().Err(err).Str("group", id).Msg("storing group metadata")
		return
	}
	o.b.goLoop(func() { p.Flush() })
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

// status is nil when this node coordinates group and has loaded its
// offsets, else errNotCoordinator or errLoading.
func (o *offsetStore) status(group string) error {
	if o.count.Load() == 0 {
		return errNotCoordinator
	}
	_, err := o.leader(o.partitionFor(group))
	return err
}

func (o *offsetStore) isLoaded(group string) bool { return o.status(group) == nil }
