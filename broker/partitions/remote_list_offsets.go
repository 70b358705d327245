package partitions

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordlog/fjord/broker/replica"
	"github.com/fjordlog/fjord/broker/replicamgr"
	"github.com/fjordlog/fjord/broker/tier"
	"github.com/fjordlog/fjord/storage"
)

// A ListOffsets by timestamp of a tiered partition whose copy reaches
// below the local log searches the copied segments first. That search
// runs on the node's remote reader pool (tier.ReadPool.Do), sharing the
// consumers' remote reads' threads and pending budget, never on the
// handler's goroutine: the handler runs on the connection's reader, and a
// slow store would stall every request pipelined after it. The request
// is answered once, when its last lookup ends (each bounded by the
// pool's timeout, 10 s from when it was asked); its other partitions are
// answered in the same response.

// remoteLookup is one partition's pending search of the copy. The
// handler fills it before submitting it; the pool's goroutine then owns
// off, rts and err until it counts the lookup done.
type remoteLookup struct {
	topic, part   int // the partition's place in the response
	t             *replicamgr.Topic
	p             *replica.Partition
	partition     int32
	ts            int64
	maxNumOffsets int32 // v0's
	off, rts      int64 // the local answer, then the copy's when found
	err           error
}

// remoteLookups collects a request's lookups and answers it when the
// last ends. Invariant: left counts the lookups not yet ended plus one
// for the handler until it has submitted them all; whoever brings it to
// zero finishes the response, so it is finished exactly once and only
// after every lookup wrote its result.
type remoteLookups struct {
	list []*remoteLookup
	left atomic.Int32
}

// needsRemote reports whether a ListOffsets by timestamp ts of a tiered
// partition must search its copy: the copy reaches below the local log.
func needsRemote(h Host, t *replicamgr.Topic, partition int32, lg *storage.Log, ts int64) bool {
	r := h.Remote()
	if ts < 0 || r == nil {
		return false
	}
	rs := r.Start(t.ID, partition)
	return rs >= 0 && rs < lg.StartOffset()
}

// run submits the lookups and calls finish once all have ended (at once,
// on this goroutine, when there are none or none could be submitted).
func (ls *remoteLookups) run(h Host, finish func()) {
	ls.left.Store(int32(len(ls.list)) + 1)
	done := func() {
		if ls.left.Add(-1) == 0 {
			finish()
		}
	}
	var pool *tier.ReadPool
	if r := h.Remote(); r != nil {
		pool = r.Reads()
	}
	for _, l := range ls.list {
		if pool == nil {
			// No pool (only where a node is assembled without one): the
			// search runs here, bounded by remoteTimestampTimeout.
			ctx, cancel := context.WithTimeout(context.Background(), remoteTimestampTimeout)
			l.search(ctx, h)
			cancel()
			done()
			continue
		}
		err := pool.Do(func(ctx context.Context, err error) {
			if err != nil {
				l.off, l.rts, l.err = -1, -1, fmt.Errorf("%w: offset for timestamp %d of %s-%d: %w", ErrRemoteStorage, l.ts, l.t.Name, l.partition, err)
			} else {
				l.search(ctx, h)
			}
			done()
		})
		if err != nil {
			// A full pool is answered with Fetch's code for a refused
			// read (ErrRemoteReadsFull, UNKNOWN_SERVER_ERROR; errors.go).
			// Kafka's KIP-1075 lookups also run on its remote reader
			// pool, but its answer to a rejected lookup task was not
			// confirmed from its source: this keeps one code for one
			// condition, and consumers retry it.
			wrap := ErrRemoteStorage
			if errors.Is(err, tier.ErrReadPoolFull) {
				wrap = ErrRemoteReadsFull
			}
			l.off, l.rts, l.err = -1, -1, fmt.Errorf("%w: offset for timestamp %d of %s-%d: %w", wrap, l.ts, l.t.Name, l.partition, err)
			done()
		}
	}
	done() // the handler's own count
}

// search looks for the first copied record at or after l.ts; a record
// found there is the answer, otherwise the local answer stands.
func (l *remoteLookup) search(ctx context.Context, h Host) {
	r := h.Remote()
	roff, rrts, ok, err := r.OffsetForTimestamp(ctx, l.t.Name, l.t.ID, l.partition, l.ts)
	switch {
	case err != nil:
		l.off, l.rts, l.err = -1, -1, fmt.Errorf("%w: offset for timestamp %d of %s-%d: %w", ErrRemoteStorage, l.ts, l.t.Name, l.partition, err)
	case ok:
		l.off, l.rts, l.err = roff, rrts, nil
	}
}

// remoteTimestampTimeout bounds a ListOffsets search of the store where
// the node has no reader pool (the pool has its own, of the same length).
const remoteTimestampTimeout = 10 * time.Second

// answerOffset fills in sp with a partition's answer (off, ts) or err.
func answerOffset(h Host, p *replica.Partition, sp *kmsg.ListOffsetsResponseTopicPartition, version int16, maxNumOffsets int32, timestamp, off, ts int64, err error) {
	if err != nil {
		sp.ErrorCode = h.Code(err)
		p.Logger.Error().Err(err).Int64("timestamp", timestamp).Msg("list offsets")
		return
	}
	sp.Offset, sp.Timestamp = off, ts
	if version == 0 {
		sp.OldStyleOffsets = []int64{off}
		if maxNumOffsets == 0 || off < 0 {
			sp.OldStyleOffsets = nil
		}
	}
}
