package sharecoord

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordlog/fjord/broker/replica"
	"github.com/fjordlog/fjord/broker/sharestate"
	"github.com/fjordlog/fjord/group/sharepart"
	"github.com/fjordlog/fjord/storage/recordbatch"
)

// Host is what the share coordinator and its Persister need of the broker.
type Host interface {
	// Go runs fn on a goroutine the broker tracks, so its Close waits for
	// it; false once Close has begun (fn does not run).
	Go(fn func()) bool
	// ReadFailed reports that reading state partition p's log failed
	// with err; a damaged log is handed to a sound replica
	// (replica.Partition.ReadFailed).
	ReadFailed(p *replica.Partition, err error)
	// NodeID is this node's id.
	NodeID() int32
	// TopicPartitions is the partition count of the topic with this id in
	// the node's metadata image, 0 when the image has no such topic.
	TopicPartitions(id [16]byte) int32
	// StateLeaders is the leader of each partition of the state topic in
	// the node's metadata image, -1 where there is none, nil when the
	// image has no state topic. The caller does not modify it.
	StateLeaders() []int32
	// EnsureStateTopic asks the controller for the state topic, with
	// TopicConfigs, if the image lacks it; it may block for the round
	// trip, and failure is left to the next call.
	EnsureStateTopic()
	// Ask sends req to node's inter-broker listener and returns its
	// response, waiting at most until ctx ends.
	Ask(ctx context.Context, node int32, req kmsg.Request) (kmsg.Response, error)
}

// Coordinator is a node's share coordinator: the state of the
// share-partitions whose state partitions this node leads. Safe for use
// from any goroutine. See the package documentation.
type Coordinator struct {
	ctx   context.Context // ends the loops Start began and every wait
	cfg   Config
	host  Host
	log   zerolog.Logger
	count atomic.Int32 // partitions of the state topic; 0 until Follow sees it
	mu    struct {
		sync.Mutex
		// parts[i] is state partition i while this node leads it, else nil.
		parts []*part
	}
	persister *Persister
}

// part is one led state partition and its table.
//
// Invariant: while loaded and not gone, mu.tbl is the replay of p's log
// from its start to its end, in order: every record is appended under mu
// and replayed before mu is released.
type part struct {
	idx int32
	p   *replica.Partition
	mu  struct {
		sync.Mutex
		tbl    *table // nil until loaded
		loaded bool
		gone   bool // no longer led here: every call is NOT_COORDINATOR
		// pruned is the log start offset the last prune asked for.
		pruned int64
	}
}

// New returns a coordinator that coordinates nothing until Follow reports
// led state partitions. Its loops run from Start until ctx ends.
func New(ctx context.Context, cfg Config, host Host) (*Coordinator, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	c := &Coordinator{ctx: ctx, cfg: cfg, host: host, log: cfg.Logger}
	c.persister = newPersister(c)
	return c, nil
}

// Start runs the prune and the cold snapshots on the host's goroutines,
// until the context given to New ends.
func (c *Coordinator) Start() {
	c.host.Go(func() { c.every(c.cfg.PruneIntervalMs, c.prune) })
	c.host.Go(func() { c.every(c.cfg.ColdPartitionSnapshotIntervalMs, c.snapshotCold) })
}

func (c *Coordinator) every(ms int64, fn func()) {
	t := time.NewTicker(time.Duration(ms) * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-c.ctx.Done():
			return
		case <-t.C:
			fn()
		}
	}
}

// Persister is the node's sharestate.Persister: local calls when this
// node coordinates a key, Kafka's RPCs to its coordinator otherwise.
func (c *Coordinator) Persister() *Persister { return c.persister }

// Follow matches the coordinator to the state topic's local replicas:
// parts[i] is this node's replica of state partition i, nil where it holds
// none (a nil parts changes nothing). Partitions this node has begun to
// lead are loaded in the background; those it no longer leads are
// forgotten, and calls waiting on them fail NOT_COORDINATOR. The broker
// calls it after every metadata image and whenever a local replica of the
// state topic changes role; parts is not kept.
func (c *Coordinator) Follow(parts []*replica.Partition) {
	if parts == nil {
		return
	}
	var gained, lost []*part
	c.mu.Lock()
	if len(c.mu.parts) < len(parts) {
		c.mu.parts = append(c.mu.parts, make([]*part, len(parts)-len(c.mu.parts))...)
		c.count.Store(int32(len(parts)))
	}
	for i, p := range parts {
		cur := c.mu.parts[i]
		switch {
		case p.Leads() && (cur == nil || cur.p != p):
			if cur != nil {
				lost = append(lost, cur)
			}
			pt := &part{idx: int32(i), p: p}
			c.mu.parts[i] = pt
			gained = append(gained, pt)
		case !p.Leads() && cur != nil:
			c.mu.parts[i] = nil
			lost = append(lost, cur)
		}
	}
	c.mu.Unlock()
	for _, pt := range lost {
		pt.mu.Lock()
		pt.mu.gone, pt.mu.tbl = true, nil
		pt.mu.Unlock()
		c.log.Info().Int32("partition", pt.idx).Msg("no longer share coordinator for this share-group state partition")
	}
	for _, pt := range gained {
		if !c.host.Go(func() { c.load(pt) }) {
			return
		}
	}
}

// PartitionFor is the state partition of a coordinator key (as
// FindCoordinator carries it, see CoordinatorKey), 0 until Follow has seen
// the state topic.
func (c *Coordinator) PartitionFor(coordKey string) int32 {
	return partitionOfString(coordKey, c.count.Load())
}

// Status is nil when this node coordinates the coordinator key's
// share-partition and has loaded its state partition, else
// ErrNotCoordinator or ErrLoading.
func (c *Coordinator) Status(coordKey string) error {
	pt := c.partAt(c.PartitionFor(coordKey))
	if pt == nil {
		return ErrNotCoordinator
	}
	pt.mu.Lock()
	defer pt.mu.Unlock()
	return pt.statusLocked()
}

func (c *Coordinator) partAt(pi int32) *part {
	if c.count.Load() == 0 {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if int(pi) >= len(c.mu.parts) {
		return nil
	}
	return c.mu.parts[pi]
}

func (c *Coordinator) partOf(k sharepart.Key) (*part, error) {
	n := c.count.Load()
	if n == 0 {
		return nil, fmt.Errorf("%w: %s: no share-group state topic yet", ErrNotCoordinator, k)
	}
	pi := PartitionOf(k, n)
	if pt := c.partAt(pi); pt != nil {
		return pt, nil
	}
	return nil, fmt.Errorf("%w: %s is on state partition %d, which this node does not lead", ErrNotCoordinator, k, pi)
}

// REQUIRES: pt.mu held.
func (pt *part) statusLocked() error {
	switch {
	case pt.mu.gone:
		return fmt.Errorf("%w: state partition %d has moved", ErrNotCoordinator, pt.idx)
	case !pt.mu.loaded:
		return fmt.Errorf("%w: state partition %d", ErrLoading, pt.idx)
	}
	return nil
}

// op is one operation on a table: the records that carry it out, or why
// it cannot be done. It runs under the part's lock and changes nothing
// itself.
type op func(t *table, now int64) ([]sharepart.Record, error)

// do runs f on key's state partition (see run).
func (c *Coordinator) do(ctx context.Context, k sharepart.Key, f op) error {
	pt, err := c.partOf(k)
	if err != nil {
		return err
	}
	return c.run(ctx, pt, f)
}

// run runs f on pt: under pt's lock it decides, appends the records (one
// batch, so all or none of them), and replays them into the table; then,
// outside the lock, it waits until everything in the log up to that point
// is committed (on every in-sync replica, fsynced where acks need it),
// and only then returns f's outcome. So no answer, not even a refusal,
// rests on a record a failover could still take back, and one whose
// write failed says so (as Kafka's coordinator runtime defers every
// answer to the high watermark).
func (c *Coordinator) run(ctx context.Context, pt *part, f op) error {
	pt.mu.Lock()
	if err := pt.statusLocked(); err != nil {
		pt.mu.Unlock()
		return err
	}
	now := time.Now().UnixMilli()
	recs, opErr := f(pt.mu.tbl, now)
	target, epoch, err := pt.appendLocked(recs, now, c.log)
	pt.mu.Unlock()
	if err != nil {
		return err
	}
	if err := c.settle(ctx, pt, target, epoch, len(recs) > 0); err != nil {
		return err
	}
	return opErr
}

// appendLocked appends recs to pt's log as one batch and replays them,
// returning the log's end after them and the leader epoch it was
// written at. With no records it returns the log's end as it is: what
// the answer must wait for.
// REQUIRES: pt.mu held.
func (pt *part) appendLocked(recs []sharepart.Record, now int64, log zerolog.Logger) (int64, int32, error) {
	if len(recs) == 0 {
		lg, v, code := pt.p.Serve(replica.Produce)
		if code != 0 {
			return 0, 0, fmt.Errorf("%w: state partition %d: %v", ErrNotCoordinator, pt.idx, replica.CodeError(code))
		}
		return lg.EndOffset(), v.LeaderEpoch, nil
	}
	kvs := make([]recordbatch.KV, len(recs))
	for i, r := range recs {
		kvs[i] = recordbatch.KV{Key: r.Key, Value: r.Value}
	}
	batch := recordbatch.Build(kvs, now)
	info, err := recordbatch.Validate(batch, 0)
	if err != nil {
		return 0, 0, fmt.Errorf("sharecoord: building a batch for state partition %d: %w", pt.idx, err)
	}
	res, v, err := pt.p.AppendAsLeader(batch, info, now)
	if err != nil {
		return 0, 0, writeFailed(pt.idx, err)
	}
	for i, r := range recs {
		if err := pt.mu.tbl.replay(res.BaseOffset+int64(i), r); err != nil {
			// Every op emits only records replay takes; one it refuses
			// leaves the table behind the log until the next load.
			log.Error().Err(err).Int32("partition", pt.idx).Msg("BUG: share coordinator wrote a record it cannot replay")
		}
	}
	return res.LastOffset + 1, v.LeaderEpoch, nil
}

// settle waits, at most Config.WriteTimeoutMs, until pt's records below
// target are committed at leader epoch epoch (appended: durable on every
// in-sync replica, min.insync.replicas of them; else committed as far as
// the high watermark says), then tells the table what is committed.
func (c *Coordinator) settle(ctx context.Context, pt *part, target int64, epoch int32, appended bool) error {
	wctx, cancel := context.WithTimeout(ctx, time.Duration(c.cfg.WriteTimeoutMs)*time.Millisecond)
	defer cancel()
	stop := context.AfterFunc(c.ctx, cancel)
	defer stop()
	var err error
	if appended {
		if err = pt.p.Flush(); err == nil {
			err = pt.p.WaitCommitted(wctx, target, epoch, nil)
		}
	} else {
		err = pt.p.WaitHW(wctx, target, epoch)
	}
	pt.mu.Lock()
	if !pt.mu.gone && pt.mu.tbl != nil {
		pt.mu.tbl.commit(pt.p.HW())
	}
	pt.mu.Unlock()
	switch {
	case err == nil:
		return nil
	case ctx.Err() != nil:
		return ctx.Err()
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled),
		errors.Is(err, replica.ErrTimedOut), errors.Is(err, replica.ErrNotEnoughReplicasAfterAppend):
		// Kafka's coordinators answer these COORDINATOR_NOT_AVAILABLE: the
		// caller retries, and the record, if it commits, is replayed once
		// more to no effect (every write merges).
		return fmt.Errorf("%w: state partition %d: the write was not committed in time: %v", sharestate.ErrNotAvailable, pt.idx, err)
	}
	return writeFailed(pt.idx, err)
}

// writeFailed is a failed append or flush: the leadership has moved, or
// the log cannot take writes (Kafka answers both NOT_COORDINATOR).
func writeFailed(pi int32, err error) error {
	return fmt.Errorf("%w: state partition %d: %v", ErrNotCoordinator, pi, err)
}

// load reads pt's log, which this node has begun to lead, into a fresh
// table and then serves pt; until then its keys answer ErrLoading.
func (c *Coordinator) load(pt *part) {
	start := time.Now()
	lg, v, code := pt.p.Serve(replica.ConsumerRead)
	if code != 0 {
		return // no longer led here, or deleted: Follow forgets it
	}
	// Only a committed log is loaded (replica.Partition.WaitHW says why):
	// a leader epoch or a reset taken from a tail that a failover cuts
	// would be answered to a leader and then lost.
	end := lg.EndOffset()
	if err := pt.p.WaitHW(c.ctx, end, v.LeaderEpoch); err != nil {
		return
	}
	tbl := newTable(c.cfg.SnapshotUpdateRecordsPerSnapshot)
	n, skipped, err := readLog(lg.StartOffset(), end, lg.Read, func(off int64, r sharepart.Record) error {
		return tbl.replay(off, r)
	})
	if err != nil {
		c.log.Error().Err(err).Int32("partition", pt.idx).Msg("loading share-group state; partition stays unavailable")
		c.host.ReadFailed(pt.p, err)
		return
	}
	if skipped > 0 {
		c.log.Warn().Int32("partition", pt.idx).Int("records", skipped).Msg("skipped unreadable share-group state records")
	}
	tbl.commit(end)
	pt.mu.Lock()
	if pt.mu.gone {
		pt.mu.Unlock()
		return // lost meanwhile: the next leader loads it
	}
	keys := len(tbl.keys)
	pt.mu.tbl, pt.mu.loaded, pt.mu.pruned = tbl, true, lg.StartOffset()
	pt.mu.Unlock()
	c.log.Info().Int32("partition", pt.idx).Int("records", n).Int("keys", keys).
		Dur("took", time.Since(start)).Msg("share coordinator loaded a share-group state partition")
}

// readLog reads the log's records in [from, end) through read (a
// storage.Log's Read) and hands each data record, in order, with its
// offset, to apply; control batches are passed over. A record apply
// refuses is counted in skipped; an unreadable log is an error.
func readLog(from, end int64, read func(int64, int, int64, []byte) ([]byte, error),
	apply func(int64, sharepart.Record) error) (n, skipped int, err error) {
	off := from
	for off < end {
		data, err := read(off, 1<<20, end, nil)
		if err != nil {
			return n, skipped, err
		}
		if len(data) == 0 {
			return n, skipped, nil
		}
		n1, s1, next, err := applyBatches(data, apply)
		n, skipped = n+n1, skipped+s1
		if err != nil {
			return n, skipped, err
		}
		off = next
	}
	return n, skipped, nil
}

// applyBatches applies the records of whole batches in data, returning
// the offset after the last one.
func applyBatches(data []byte, apply func(int64, sharepart.Record) error) (n, skipped int, next int64, err error) {
	for len(data) > 0 {
		info, err := recordbatch.ParseHeader(data)
		if err != nil || info.Bytes > len(data) || info.Bytes <= 0 {
			return n, skipped, next, fmt.Errorf("sharecoord: bad batch in the state topic: %w", cmpErr(err, recordbatch.ErrCorrupt))
		}
		base := recordbatch.BaseOffset(data)
		if !info.Control {
			werr := recordbatch.EachRecord(data[:info.Bytes], info, func(r recordbatch.Record) bool {
				rec := sharepart.Record{Key: slices.Clone(r.Key)}
				if r.Value != nil {
					rec.Value = slices.Clone(r.Value)
				}
				if apply(base+int64(r.OffsetDelta), rec) != nil {
					skipped++
				}
				n++
				return true
			})
			if werr != nil {
				return n, skipped, next, fmt.Errorf("sharecoord: bad batch in the state topic: %w", werr)
			}
		}
		next = base + int64(info.LastDelta) + 1
		data = data[info.Bytes:]
	}
	return n, skipped, next, nil
}

func cmpErr(err, def error) error {
	if err != nil {
		return err
	}
	return def
}

// loadedParts are the parts this node leads and has loaded.
func (c *Coordinator) loadedParts() []*part {
	c.mu.Lock()
	parts := slices.Clone(c.mu.parts)
	c.mu.Unlock()
	out := parts[:0]
	for _, pt := range parts {
		if pt == nil {
			continue
		}
		pt.mu.Lock()
		ok := pt.statusLocked() == nil
		pt.mu.Unlock()
		if ok {
			out = append(out, pt)
		}
	}
	return out
}
