package sharecoord

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/fjordlog/fjord/broker/sharestate"
	"github.com/fjordlog/fjord/group/sharepart"
)

// Persister is the node's sharestate.Persister. For each call it finds
// the key's coordinator, the leader of the key's state partition in the
// node's metadata image, and calls this node's Coordinator when that is
// this node, or sends it Kafka's RPCs (ReadShareGroupState,
// WriteShareGroupState, DeleteShareGroupState, and for a leader's first
// snapshot InitializeShareGroupState and ReadShareGroupStateSummary)
// through Host.Ask otherwise. Beyond sharestate.Persister, the group
// coordinator's share-group offsets administration
// (DescribeShareGroupOffsets, AlterShareGroupOffsets) calls Summary and
// Initialize: the RPCs of those names.
//
// Records to operations. A leader's records (sharepart's) are not
// appended as they are: the coordinator writes its own, Kafka's way, from
// what they say.
//   - A ShareUpdate is a write of its batches and start offset at the
//     caller's leader and state epochs (the record carries neither state
//     epoch nor, reliably, the caller's leader epoch): fenced unless the
//     stored state epoch is the caller's, so that a leader that loaded
//     the state before an AlterShareGroupOffsets cannot merge into what
//     the alter set.
//   - A ShareSnapshot that starts the state afresh (sharepart.New's first,
//     snapshot epoch 0, for a key with no state; or one at the state
//     epoch of a state initialized without a start offset) is an
//     initialization, followed by a write that records the caller's
//     leader epoch and the snapshot's batches: on this node both in one
//     batch; remotely Initialize, then Read at the leader epoch (which
//     records it), then Write. Any other snapshot is a write at its own
//     state epoch (merged into the stored state it yields the snapshot
//     itself, since a leader's durable state only grows), and for a key
//     without state ErrUninitialized: only the first snapshot of a leader
//     that found no state may create one, so that a leader that loaded
//     state since deleted cannot bring it back. A leader's snapshot never
//     changes the state epoch (sharepart's ResetStartOffset is fenced):
//     only Initialize does, as only Kafka's group coordinator does.
//   - A tombstone is a delete.
//
// And Read hands back the coordinator's state as one ShareSnapshot at the
// caller's leader epoch, which Restore accepts.
//
// Retries. A coordinator that is moving, loading, unreachable or whose
// replicas are slow (ErrNotCoordinator, ErrLoading,
// sharestate.ErrNotAvailable, a failed RPC) is tried again, the
// coordinator found afresh each time, up to persisterAttempts times with
// exponential backoff and jitter, and within ctx; then the call fails with
// sharestate.ErrNotAvailable. Every other error is final. A coordinator
// that stops answering, and one that answers again, is logged once per
// change, not once per call.
type Persister struct {
	c    *Coordinator
	host Host
	log  zerolog.Logger
	// Bounds of a call; tests shorten them.
	attempts            int
	backoff, maxBackoff time.Duration
	askTimeout          time.Duration
	ensuring            atomic.Bool // an EnsureStateTopic is under way
	mu                  struct {
		sync.Mutex
		// down[node] is set while calls to that coordinator fail (node
		// -1: none could be found); for logging state changes only.
		down map[int32]bool
	}
}

var _ sharestate.Persister = (*Persister)(nil)

// The default bounds of a Persister call: 40 attempts, between them
// about 10 to 19 s of backoff in all, each RPC at most a write timeout plus
// a second; and the caller's ctx. The backoff outlasts a share
// coordinator's failover (broker.session.timeout.ms, 9 s by default, then
// an election): giving up sooner drops the share-partition and its
// members' locks, and so redelivers records a member still processes.
// The ceiling is short so that a call finds the new coordinator within
// half a second of its election: an acknowledgement waits on the call,
// and the member's heartbeat response waits behind the acknowledgement's
// on their shared connection (responses go in request order), so every
// second spent backing off is a second of the member's session.
const (
	persisterAttempts   = 40
	persisterBackoff    = 50 * time.Millisecond
	persisterMaxBackoff = 500 * time.Millisecond
)

func newPersister(c *Coordinator) *Persister {
	p := &Persister{c: c, host: c.host, log: c.log, attempts: persisterAttempts, backoff: persisterBackoff,
		maxBackoff: persisterMaxBackoff, askTimeout: time.Duration(c.cfg.WriteTimeoutMs)*time.Millisecond + time.Second}
	p.mu.down = map[int32]bool{}
	return p
}

// backend is one coordinator, local or remote, as the Persister calls it.
type backend interface {
	read(ctx context.Context, k sharepart.Key, leaderEpoch int32) (State, error)
	write(ctx context.Context, k sharepart.Key, w WriteState) error
	writeSnapshot(ctx context.Context, k sharepart.Key, leaderEpoch int32, v *sharepart.SnapshotValue) error
	remove(ctx context.Context, k sharepart.Key) error
	// summary is ReadShareGroupStateSummary: ok false when k has no state
	// with a start offset.
	summary(ctx context.Context, k sharepart.Key) (State, bool, error)
	initialize(ctx context.Context, k sharepart.Key, stateEpoch int32, startOffset int64) error
}

// Read implements sharestate.Persister.
func (p *Persister) Read(ctx context.Context, key sharepart.Key, leaderEpoch int32) ([]sharepart.Record, error) {
	var st State
	err := p.call(ctx, key, "read", func(b backend) (err error) {
		st, err = b.read(ctx, key, leaderEpoch)
		return err
	})
	if err != nil {
		return nil, err
	}
	return []sharepart.Record{stateSnapshot(key, leaderEpoch, st)}, nil
}

// stateSnapshot is st as one ShareSnapshot at leaderEpoch, for Restore.
func stateSnapshot(k sharepart.Key, leaderEpoch int32, st State) sharepart.Record {
	return sharepart.EncodeSnapshot(k, &sharepart.SnapshotValue{
		SnapshotEpoch: st.SnapshotEpoch, StateEpoch: st.StateEpoch, LeaderEpoch: leaderEpoch,
		StartOffset: st.StartOffset, DeliveryCompleteCount: st.DeliveryCompleteCount, StateBatches: st.Batches,
	})
}

// Write implements sharestate.Persister: each record, in order, as the
// type comment says.
func (p *Persister) Write(ctx context.Context, key sharepart.Key, leaderEpoch, stateEpoch int32, recs []sharepart.Record) error {
	for i, r := range recs {
		d, err := sharepart.DecodeRecord(r)
		if err != nil {
			return fmt.Errorf("sharecoord: write of %s, record %d: %w", key, i, err)
		}
		if d.Key != key {
			return fmt.Errorf("sharecoord: write of %s, record %d: %w", key, i, fmt.Errorf("%w: record for %s", sharepart.ErrCorrupt, d.Key))
		}
		switch {
		case d.Snapshot != nil:
			err = p.call(ctx, key, "write", func(b backend) error { return b.writeSnapshot(ctx, key, leaderEpoch, d.Snapshot) })
		case d.Update != nil:
			v := d.Update
			w := WriteState{LeaderEpoch: leaderEpoch, StateEpoch: stateEpoch, StartOffset: v.StartOffset,
				DeliveryCompleteCount: v.DeliveryCompleteCount, Batches: v.StateBatches}
			err = p.call(ctx, key, "write", func(b backend) error { return b.write(ctx, key, w) })
		default:
			err = p.call(ctx, key, "delete", func(b backend) error { return b.remove(ctx, key) })
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// Delete implements sharestate.Persister. A share-partition whose topic is
// gone is done: its state goes with the topic (Coordinator.TopicsDeleted).
func (p *Persister) Delete(ctx context.Context, key sharepart.Key) error {
	err := p.call(ctx, key, "delete", func(b backend) error { return b.remove(ctx, key) })
	if errors.Is(err, ErrUnknownTopicOrPartition) {
		return nil
	}
	return err
}

// Summary is key's state without its batches (ReadShareGroupStateSummary),
// for DescribeShareGroupOffsets: its start offset, state epoch, the leader
// epoch of the leader that last read it, and its delivery-complete count
// (KIP-1226). ok is false when key has no state with a start offset; the
// State is then what the RPC answers for none (start offset, leader epoch
// and delivery-complete count -1) or the state initialized without one.
// Retried as the type comment says.
func (p *Persister) Summary(ctx context.Context, key sharepart.Key) (State, bool, error) {
	var st State
	var ok bool
	err := p.call(ctx, key, "summary", func(b backend) (err error) {
		st, ok, err = b.summary(ctx, key)
		return err
	})
	if err != nil {
		return State{}, false, err
	}
	return st, ok, nil
}

// Initialize starts key's state afresh at stateEpoch and startOffset (-1:
// none, the leader resolves share.auto.offset.reset), nothing in flight
// (InitializeShareGroupState), for AlterShareGroupOffsets. A state epoch
// older than the stored one is ErrFencedStateEpoch; from then on, a
// leader's writes at any other state epoch are fenced so.
// Retried as the type comment says.
func (p *Persister) Initialize(ctx context.Context, key sharepart.Key, stateEpoch int32, startOffset int64) error {
	return p.call(ctx, key, "initialize", func(b backend) error { return b.initialize(ctx, key, stateEpoch, startOffset) })
}

// call runs f on key's coordinator, retrying as the type comment says.
func (p *Persister) call(ctx context.Context, key sharepart.Key, what string, f func(backend) error) error {
	backoff := p.backoff
	var err error
	failed := int32(-2) // the node this call last failed on; -2: none
	for attempt := 1; ; attempt++ {
		var b backend
		var node int32
		if b, node, err = p.route(key); err == nil {
			err = f(b)
		}
		p.note(node, failed, err)
		if err != nil {
			failed = node
		}
		if err == nil || !retriable(err) {
			return err
		}
		if attempt >= p.attempts {
			break
		}
		wait := backoff/2 + rand.N(backoff/2+1)
		backoff = min(2*backoff, p.maxBackoff)
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("%w: %s of %s: %v (last: %v)", sharestate.ErrNotAvailable, what, key, ctx.Err(), err)
		}
	}
	return fmt.Errorf("%w: %s of %s: gave up after %d attempts: %v", sharestate.ErrNotAvailable, what, key, p.attempts, err)
}

func retriable(err error) bool {
	return errors.Is(err, ErrNotCoordinator) || errors.Is(err, ErrLoading) || errors.Is(err, sharestate.ErrNotAvailable)
}

// route is key's coordinator in the node's image, and its node id (-1
// when there is none).
func (p *Persister) route(key sharepart.Key) (backend, int32, error) {
	leaders := p.host.StateLeaders()
	if len(leaders) == 0 {
		if p.ensuring.CompareAndSwap(false, true) {
			if !p.host.Go(func() { defer p.ensuring.Store(false); p.host.EnsureStateTopic() }) {
				p.ensuring.Store(false)
			}
		}
		return nil, -1, fmt.Errorf("%w: the share-group state topic %s does not exist yet", sharestate.ErrNotAvailable, Topic)
	}
	pi := PartitionOf(key, int32(len(leaders)))
	switch node := leaders[pi]; {
	case node < 0:
		return nil, -1, fmt.Errorf("%w: %s partition %d has no leader", sharestate.ErrNotAvailable, Topic, pi)
	case node == p.host.NodeID():
		return localBackend{p.c}, node, nil
	default:
		return remoteBackend{p, node}, node, nil
	}
}

// note logs a change in whether calls to node succeed. failed is the
// node the same call failed on before (-2: none): a success elsewhere
// means that coordinator moved to node, which ends its outage too (its
// partitions are served again), logged once, by the first call to see it.
func (p *Persister) note(node, failed int32, err error) {
	down := err != nil && retriable(err)
	p.mu.Lock()
	was := p.mu.down[node]
	moved := false
	if down {
		p.mu.down[node] = true
	} else {
		delete(p.mu.down, node)
		if failed != -2 && failed != node && p.mu.down[failed] {
			delete(p.mu.down, failed)
			moved = true
		}
	}
	p.mu.Unlock()
	switch {
	case down && !was && node < 0:
		p.log.Warn().Err(err).Msg("no share coordinator to persist share-group state to; retrying")
	case down && !was:
		p.log.Warn().Err(err).Int32("coordinator", node).Msg("share coordinator not available; retrying")
	case moved:
		p.log.Info().Int32("coordinator", node).Int32("was", failed).Msg("share coordinator available again")
	case !down && was:
		p.log.Info().Int32("coordinator", node).Msg("share coordinator available again")
	}
}

// localBackend is this node's Coordinator.
type localBackend struct{ c *Coordinator }

func (l localBackend) read(ctx context.Context, k sharepart.Key, leaderEpoch int32) (State, error) {
	return l.c.Read(ctx, k, leaderEpoch)
}
func (l localBackend) write(ctx context.Context, k sharepart.Key, w WriteState) error {
	return l.c.Write(ctx, k, w)
}
func (l localBackend) writeSnapshot(ctx context.Context, k sharepart.Key, leaderEpoch int32, v *sharepart.SnapshotValue) error {
	return l.c.writeSnapshot(ctx, k, leaderEpoch, v)
}
func (l localBackend) remove(ctx context.Context, k sharepart.Key) error { return l.c.Delete(ctx, k) }

// summary answers as the RPC does (87_read_share_group_state_summary.go),
// so that a summary reads the same locally and remotely.
func (l localBackend) summary(ctx context.Context, k sharepart.Key) (State, bool, error) {
	st, ok, err := l.c.Summary(ctx, k)
	if err != nil {
		return State{}, false, err
	}
	if !ok {
		return State{StartOffset: -1, LeaderEpoch: -1, DeliveryCompleteCount: -1}, false, nil
	}
	return st, st.StartOffset != -1, nil
}
func (l localBackend) initialize(ctx context.Context, k sharepart.Key, stateEpoch int32, start int64) error {
	return l.c.Initialize(ctx, k, stateEpoch, start)
}
