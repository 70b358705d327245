package coordinator

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordlog/fjord/broker/replica"
	"github.com/fjordlog/fjord/storage"
	"github.com/fjordlog/fjord/storage/recordbatch"
)

// offsetStore keeps the committed offsets of the groups this node
// coordinates, in memory, backed by the offsets topic: a commit is appended
// to the group's partition (hash(group) % partitions), made durable, and
// only then acknowledged. This node coordinates the groups of the offsets
// partitions it leads; it reads a partition's log when it gains the
// leadership and forgets its groups when it loses it (load.go).
//
// Invariant: for a loaded partition, mu.offsets restricted to its groups
// equals the result of applying that partition's log in order; the map is
// updated in log order, under mu.
type offsetStore struct {
	host  Host
	log   zerolog.Logger
	count atomic.Int32 // partitions of the offsets topic; 0 until it exists
	mu    struct {
		sync.Mutex
		// parts[i] is offsets partition i where this node leads it, else
		// nil; loaded[i] says its log has been read since.
		parts   []*replica.Partition
		loaded  []bool
		offsets map[string]map[TopicPartition]Committed
		// groupMeta is each group's latest stored GroupMetadataValue, kept
		// only while loading (restored into the groups, then cleared).
		groupMeta map[string][]byte
		// nextGenRecs are the KIP-848 and KIP-932 groups' records per
		// group, in log order, kept only while loading (replayed into
		// the groups, then cleared).
		nextGenRecs map[nextGenKey][]recordbatch.KV
		// pending holds, per offsets partition, appended commits in log
		// order until they are durable; inFlight counts them per group.
		pending  map[int32][]pendingCommit
		inFlight map[string]int
		// txnPending holds, per offsets partition and producer id, the
		// transactional commits awaiting their marker (txnoffsets.go).
		txnPending map[int32]map[int64][]txnCommit
	}
}

func newOffsetStore(host Host, log zerolog.Logger) *offsetStore {
	o := &offsetStore{host: host, log: log}
	o.mu.offsets = map[string]map[TopicPartition]Committed{}
	o.mu.groupMeta = map[string][]byte{}
	o.mu.nextGenRecs = map[nextGenKey][]recordbatch.KV{}
	o.mu.pending = map[int32][]pendingCommit{}
	o.mu.inFlight = map[string]int{}
	o.mu.txnPending = map[int32]map[int64][]txnCommit{}
	return o
}

// JavaStringHash is Java's String.hashCode over UTF-16 code units, which
// Kafka uses to map a group (and a transactional id) to its partition;
// using the same function keeps placement identical to Kafka's.
func JavaStringHash(s string) int32 {
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

// PartitionOf is key's partition of an internal topic of n partitions (0
// if n is 0): abs(JavaStringHash(key)) % n, Integer.MIN_VALUE taken as 0,
// as Kafka computes it for groups and transactional ids.
func PartitionOf(key string, n int32) int32 {
	if n <= 0 {
		return 0
	}
	h := JavaStringHash(key)
	if h == -1<<31 {
		h = 0
	} else if h < 0 {
		h = -h
	}
	return h % n
}

func (o *offsetStore) partitionFor(group string) int32 { return PartitionOf(group, o.count.Load()) }

// leader returns offsets partition pi if this node leads it and has loaded
// it, or the error to answer with.
func (o *offsetStore) leader(pi int32) (*replica.Partition, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if int(pi) >= len(o.mu.parts) || o.mu.parts[pi] == nil {
		return nil, ErrNotCoordinator
	}
	if !o.mu.loaded[pi] {
		return nil, ErrLoading
	}
	return o.mu.parts[pi], nil
}

// status is nil when this node coordinates group and has loaded its
// offsets, else ErrNotCoordinator or ErrLoading.
func (o *offsetStore) status(group string) error {
	if o.count.Load() == 0 {
		return ErrNotCoordinator
	}
	_, err := o.leader(o.partitionFor(group))
	return err
}

func (o *offsetStore) isLoaded(group string) bool { return o.status(group) == nil }

// pendingCommit is an appended offsets batch not yet known durable. It is
// applied to the table once the log's durable offset passes end.
type pendingCommit struct {
	end   int64 // log offset after the batch
	group string
	recs  []recordbatch.KV
}

// commitIf appends the offsets (nil value: delete) for group and calls
// done once they are durable, or with the error that stopped them. keep,
// if given, is asked under mu for each partition whether to write it,
// given the committed offset the table holds now. A partition with a
// commit in flight for the group is never passed to keep. done learns how
// many partitions were written.
//
// The table changes only once a batch is durable, and in log order: an
// OffsetFetch never sees a commit that a crash could take back, and one
// whose fsync failed is never seen at all.
func (o *offsetStore) commitIf(group string, offs map[TopicPartition]*Committed,
	keep func(tp TopicPartition, cur Committed, ok bool) bool, done func(int, error)) {
	pi := o.partitionFor(group)
	p, err := o.leader(pi)
	if err != nil {
		done(0, err)
		return
	}
	o.mu.Lock()
	recs := make([]recordbatch.KV, 0, len(offs))
	for tp, c := range offs {
		if keep != nil {
			cur, ok := o.mu.offsets[group][tp]
			if o.mu.inFlight[group] > 0 || !keep(tp, cur, ok) {
				continue
			}
		}
		kv := recordbatch.KV{Key: offsetKey(group, tp)}
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
	batch := recordbatch.Build(recs, now)
	info, err := recordbatch.Validate(batch, 0)
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
	o.host.Go(func() {
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
	kv := recordbatch.KV{Key: k.AppendTo(nil)}
	if v != nil {
		kv.Value = v.AppendTo(nil)
	}
	now := time.Now().UnixMilli()
	batch := recordbatch.Build([]recordbatch.KV{kv}, now)
	info, err := recordbatch.Validate(batch, 0)
	if err != nil {
		return
	}
	o.mu.Lock()
	_, _, err = p.AppendAsLeader(batch, info, now)
	o.mu.Unlock()
	if err != nil {
		o.log.Warn().Err(err).Str("group", id).Msg("storing group metadata")
		return
	}
	o.host.Go(func() { p.Flush() })
}

// fetch returns a group's committed offset for tp.
func (o *offsetStore) fetch(group string, tp TopicPartition) (Committed, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	c, ok := o.mu.offsets[group][tp]
	return c, ok
}

// groupOffsets returns a copy of all of a group's committed offsets.
func (o *offsetStore) groupOffsets(group string) map[TopicPartition]Committed {
	o.mu.Lock()
	defer o.mu.Unlock()
	out := make(map[TopicPartition]Committed, len(o.mu.offsets[group]))
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
