package sharefetch

import (
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/fjordlog/fjord/group/sharepart"
)

// state is where a share-partition is in its life here.
type state uint8

const (
	// loading: its durable state is being read (or initialized) and its
	// first snapshot written; nothing can step it yet. Fetches wait for
	// it within their MaxWaitMs; acknowledgements are answered
	// LEADER_NOT_AVAILABLE, as Kafka answers for a share-partition that
	// is initializing.
	loading state = iota
	// serving: steps run on it.
	serving
	// dropped: it is gone from the Manager (leadership moved, a write
	// failed or was fenced, it was unloaded); requests still holding it
	// are answered with the reason, and the next use loads it afresh
	// from what was written.
	dropped
)

func (s state) String() string {
	switch s {
	case loading:
		return "loading"
	case serving:
		return "serving"
	}
	return "dropped"
}

// sharePartition is one share-partition loaded here: its delivery state
// machine and the queue of its records on their way to the Persister.
//
// Why a mutex and an ordered write queue, not a goroutine per
// share-partition: a step (Acquire, Acknowledge, Tick, ReleaseMember) is
// pure and takes microseconds, but its records take a Persister round
// trip, usually to another node. Under mu a step runs and its records join
// the queue in step order; mu is released before any I/O. One writer at a
// time (started when the queue turns non-empty, gone when it empties)
// hands the queue to Persister.Write, all the steps queued meanwhile in
// one call (group commit). So steps never wait for each other's writes,
// writes reach the Persister in step order, and a request answers once
// its own step's write is done, which implies every earlier step's. A
// goroutine per share-partition would serialize the same way but either
// wait a round trip per step or rebuild this queue inside itself, and it
// would idle on every loaded share-partition.
//
// A failed write leaves memory ahead of what is durable, so it drops the
// share-partition: the steps queued after it fail with the same reason,
// and the next use restores it from what was written (sharepart's rule).
//
// Invariants:
//   - state only moves forward: loading -> serving -> dropped, or
//     loading -> dropped; part != nil iff state == serving.
//   - queue holds the records of serving steps in step order, none of
//     them handed to the Persister yet; writing is true iff a writer
//     goroutine runs, and every queued write is completed (done closed)
//     exactly once: by the writer, or by drop.
//   - deadline is part.NextDeadline() as of the last step (-1 when not
//     serving or nothing is acquired).
//
// Lock order: Manager.mu before sharePartition.mu, never the reverse.
type sharePartition struct {
	m   *Manager
	key sharepart.Key
	// rep is the replica this share-partition was loaded on, leading at
	// leaderEpoch; every use checks the replica still leads at that
	// epoch, else drops the share-partition.
	rep         Replica
	leaderEpoch int32

	// used is the Unix ms of the last request that looked it up (for
	// unloading the least recently used); deadline mirrors
	// mu.part.NextDeadline() for the expiry loop. Both written under mu
	// or by the lookup, read without it.
	used     atomic.Int64
	deadline atomic.Int64

	mu struct {
		sync.Mutex
		state  state
		reason error // why dropped
		part   *sharepart.Partition
		// queue and writing: the writes not yet handed to the Persister,
		// and whether a writer runs.
		queue   []*pendingWrite
		writing bool
		// retire: unload once idle (its group has no session here any
		// more); cleared by the next lookup.
		retire bool
		// waiters are signalled (without blocking) after every step that
		// may make records acquirable, and when the state changes.
		waiters map[chan struct{}]struct{}
	}
}

// pendingWrite is one step's records on their way to the Persister. err
// is set before done is closed.
type pendingWrite struct {
	recs []sharepart.Record
	done chan struct{}
	err  error
}

// wait blocks until w is durable or failed; nil w is durable.
func (w *pendingWrite) wait() error {
	if w == nil {
		return nil
	}
	<-w.done
	return w.err
}

func newSharePartition(m *Manager, key sharepart.Key, rep Replica, leaderEpoch int32) *sharePartition {
	sp := &sharePartition{m: m, key: key, rep: rep, leaderEpoch: leaderEpoch}
	sp.deadline.Store(-1)
	sp.mu.waiters = make(map[chan struct{}]struct{})
	return sp
}

// Errors the states answer with.
var (
	errLoading = fmt.Errorf("sharefetch: share-partition is loading: %w", leaderNotAvailable)
	errClosed  = fmt.Errorf("sharefetch: node is closing: %w", leaderNotAvailable)
)

// usableLocked is nil when the share-partition serves, else why not.
// REQUIRES: sp.mu held.
func (sp *sharePartition) usableLocked() error {
	switch sp.mu.state {
	case loading:
		return errLoading
	case dropped:
		return sp.mu.reason
	}
	return nil
}

// step runs fn on the share-partition while it serves and queues the
// records fn returns behind those of every earlier step. It returns the
// write to wait for before answering (nil when fn returned none), or why
// the share-partition cannot step. notify wakes the fetches waiting on
// it, for steps that may make records acquirable.
func (sp *sharePartition) step(notify bool, fn func(p *sharepart.Partition) []sharepart.Record) (*pendingWrite, error) {
	sp.mu.Lock()
	if err := sp.usableLocked(); err != nil {
		sp.mu.Unlock()
		return nil, err
	}
	recs := fn(sp.mu.part)
	dl := sp.mu.part.NextDeadline()
	sp.deadline.Store(dl)
	var w *pendingWrite
	start := false
	if len(recs) > 0 {
		w = &pendingWrite{recs: recs, done: make(chan struct{})}
		sp.mu.queue = append(sp.mu.queue, w)
		start = !sp.mu.writing
		sp.mu.writing = true
	}
	var waiters []chan struct{}
	if notify {
		waiters = sp.waitersLocked()
	}
	sp.mu.Unlock()
	signal(waiters)
	sp.m.noteDeadline(dl)
	if start && !sp.m.host.Go(sp.writer) {
		sp.drop(errClosed)
	}
	return w, nil
}

// peek is what a fetch needs to know before it reads the log: where to
// read from, the start offset, and whether anything could be acquired.
type peek struct {
	next, start int64
	canAcquire  bool
}

// look returns a peek while the share-partition serves.
func (sp *sharePartition) look() (peek, error) {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	if err := sp.usableLocked(); err != nil {
		return peek{}, err
	}
	p := sp.mu.part
	return peek{next: p.NextFetchOffset(), start: p.StartOffset(), canAcquire: p.CanAcquire()}, nil
}

// writer hands the queue to the Persister, in order, until it is empty.
func (sp *sharePartition) writer() {
	for {
		sp.mu.Lock()
		batch := sp.mu.queue
		sp.mu.queue = nil
		// The state epoch the records are written at: the one the
		// Partition loaded, which no step here changes (only the group
		// coordinator's Initialize does, and that fences this leader).
		var stateEpoch int32
		if sp.mu.part != nil {
			stateEpoch = sp.mu.part.StateEpoch()
		}
		if len(batch) == 0 {
			sp.mu.writing = false
			retire := sp.mu.retire && sp.idleLocked()
			sp.mu.Unlock()
			if retire {
				sp.m.unload(sp, errUnloaded)
			}
			return
		}
		sp.mu.Unlock()
		var recs []sharepart.Record
		for _, w := range batch {
			recs = append(recs, w.recs...)
		}
		err := sp.m.write(sp.key, sp.leaderEpoch, stateEpoch, recs)
		if err != nil {
			err = fmt.Errorf("sharefetch: %s: writing %d records: %w", sp.key, len(recs), err)
			sp.m.log().Warn().Err(err).Str("group", sp.key.Group).Int32("partition", sp.key.Partition).
				Msg("share-partition state write failed; unloading it")
			sp.drop(err)
		}
		for _, w := range batch {
			w.err = err
			close(w.done)
		}
	}
}

// idleLocked: serving, no record acquired, no write owed.
// REQUIRES: sp.mu held.
func (sp *sharePartition) idleLocked() bool {
	return sp.mu.state == serving && !sp.mu.writing && len(sp.mu.queue) == 0 && sp.mu.part.Counts().Acquired == 0
}

// drop ends the share-partition for reason: it leaves the Manager, its
// unwritten steps fail, its waiters wake. Dropping twice keeps the first
// reason.
func (sp *sharePartition) drop(reason error) {
	sp.mu.Lock()
	if sp.mu.state == dropped {
		sp.mu.Unlock()
		return
	}
	sp.mu.state, sp.mu.reason, sp.mu.part = dropped, reason, nil
	sp.deadline.Store(-1)
	queue := sp.mu.queue
	sp.mu.queue = nil
	waiters := sp.waitersLocked()
	sp.mu.Unlock()
	for _, w := range queue {
		w.err = reason
		close(w.done)
	}
	sp.m.forget(sp)
	signal(waiters)
}

// serve ends loading with p; false when the share-partition was dropped
// meanwhile.
func (sp *sharePartition) serve(p *sharepart.Partition) bool {
	sp.mu.Lock()
	if sp.mu.state != loading {
		sp.mu.Unlock()
		return false
	}
	sp.mu.state, sp.mu.part = serving, p
	sp.deadline.Store(p.NextDeadline())
	waiters := sp.waitersLocked()
	sp.mu.Unlock()
	signal(waiters)
	return true
}

// watch and unwatch register a fetch's wake-up channel.
func (sp *sharePartition) watch(ch chan struct{}) {
	sp.mu.Lock()
	sp.mu.waiters[ch] = struct{}{}
	sp.mu.Unlock()
}

func (sp *sharePartition) unwatch(ch chan struct{}) {
	sp.mu.Lock()
	delete(sp.mu.waiters, ch)
	sp.mu.Unlock()
}

// waitersLocked lists the waiters to signal once mu is released.
// REQUIRES: sp.mu held.
func (sp *sharePartition) waitersLocked() []chan struct{} {
	out := make([]chan struct{}, 0, len(sp.mu.waiters))
	for ch := range sp.mu.waiters {
		out = append(out, ch)
	}
	return out
}

// signal wakes each channel without blocking (each has room for one).
func signal(chs []chan struct{}) {
	for _, ch := range chs {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

// dropReason is why the share-partition was dropped, nil if it was not.
func (sp *sharePartition) dropReason() error {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	if sp.mu.state != dropped {
		return nil
	}
	return sp.mu.reason
}

// stateOf reports the state, for tests and Stats.
func (sp *sharePartition) stateOf() state {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	return sp.mu.state
}
