package broker

import (
	"context"
	"fmt"
	"slices"

	"github.com/prometheus/client_golang/prometheus"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fjordlog/fjord/controller"
	"github.com/fjordlog/fjord/storage"
	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kerr"
)

// partition is this node's replica of one topic partition. The metadata
// image says whether it leads (publishLoop calls setState on every image);
// only a leader takes produce requests and serves consumers; a follower's
// log is written by its replica fetcher only.
//
// The high watermark is what consumers may see and what acks=all waits for.
// On the leader it is the minimum, over the in-sync replicas, of each one's
// log end: its own durable end on a topic that fsyncs before acknowledging
// (flush.messages=1), else its log end; a follower's fetch offset, which it
// sends only once what it fetched before is durable. Followers learn the
// high watermark from the leader's fetch responses.
//
// Invariant: hw <= log end; hw only grows while this broker leads at one
// leader epoch (a follower's may drop with a truncation, never below what
// the leader had committed).
type partition struct {
	topic   string
	index   int32
	topicID [16]byte
	me      int32 // this broker's id
	log     *storage.Log
	logger  zerolog.Logger

	settings atomic.Pointer[topicSettings]
	hw       atomic.Int64 // written by advanceHW only
	// state is the partition's replication state in the image this broker
	// last applied; nil once the replica is dropped. It changes under
	// roleMu's write lock, and leader appends hold its read lock, so once a
	// broker stops leading no append of its own lands after (a follower's
	// truncation must not race a stale leader append).
	state  atomic.Pointer[replicaState]
	roleMu sync.RWMutex

	mu struct {
		sync.Mutex
		waiters map[chan struct{}]struct{} // fetches and acks waiting for hw or state to move
		// appendWaiters are replica fetches waiting for the log end to move.
		appendWaiters map[chan struct{}]struct{}
		// followers tracks each other replica's fetches while this broker
		// leads (reset when the leader epoch changes).
		followers map[int32]*followerState
		// pendingISR is an ISR change proposed to the controller and not
		// yet seen in the image; nil when none is in flight.
		pendingISR []int32
		// leaderSince and epochStart are when and at which log end this
		// broker began leading at the current epoch.
		leaderSince time.Time
		epochStart  int64
	}
	unflushed atomic.Int64 // appended records since the last flush (relaxed topics)
	// needTruncate is set when this broker becomes a follower at a new
	// leader epoch: its fetcher must find the divergence point first.
	needTruncate atomic.Bool
	// damagedFrom is the first offset a read found damaged (corrupt.go);
	// noCorruption while none is known. Only lowered, except by the
	// fetcher's repair, which truncates the damage away.
	damagedFrom atomic.Int64
	// fetchPausedUntil (unix ns) holds this follower's fetches of the
	// partition back after its leader reported its own copy damaged.
	fetchPausedUntil atomic.Int64
	// lastResign (unix ns) is when this leader last asked to resign a
	// damaged replica's leadership.
	lastResign atomic.Int64
	flushTime  prometheus.Observer
}

func newPartition(me int32, topic string, index int32, id [16]byte, lg *storage.Log, s topicSettings, logger zerolog.Logger) *partition {
	p := &partition{me: me, topic: topic, index: index, topicID: id, log: lg, logger: logger}
	p.settings.Store(&s)
	p.mu.waiters = make(map[chan struct{}]struct{})
	p.mu.appendWaiters = make(map[chan struct{}]struct{})
	p.mu.followers = map[int32]*followerState{}
	p.damagedFrom.Store(noCorruption)
	// The high watermark is not on disk: start from the log start and let
	// the leader (this broker, once its ISR allows) move it. Starting at the
	// log end could show consumers records a failover is about to drop.
	p.hw.Store(lg.StartOffset())
	return p
}

// followerState is the leader's view of one follower.
type followerState struct {
	leo           int64     // the follower's fetch offset: its durable log end
	lastFetch     time.Time // last fetch request
	lastCaughtUp  time.Time // last time its fetch offset reached the leader's log end
	lastLeaderEnd int64     // the leader's log end at lastFetch
}

// replicaState is what the image says about this replica's partition.
type replicaState struct {
	leader         bool // this broker leads
	leaderID       int32
	leaderEpoch    int32
	partitionEpoch int32
	replicas, isr  []int32 // read-only
}

// setState records the image's view of the partition. It reports whether
// this broker just became the leader or a follower at a new leader epoch
// (the caller then starts leading, or truncates and fetches).
func (p *partition) setState(ip controller.Partition) (changed bool) {
	prev := p.state.Load()
	st := &replicaState{leader: ip.Leader == p.me, leaderID: ip.Leader, leaderEpoch: ip.LeaderEpoch,
		partitionEpoch: ip.PartitionEpoch, replicas: ip.Replicas, isr: ip.ISR}
	changed = prev == nil || prev.leader != st.leader || prev.leaderEpoch != st.leaderEpoch
	p.mu.Lock()
	if changed {
		clear(p.mu.followers)
		p.mu.pendingISR = nil
		p.mu.leaderSince, p.mu.epochStart = time.Now(), p.log.EndOffset()
	}
	if p.mu.pendingISR != nil && (prev == nil || prev.partitionEpoch != st.partitionEpoch) {
		p.mu.pendingISR = nil // the proposal was decided, one way or the other
	}
	p.mu.Unlock()
	p.roleMu.Lock()
	if changed && st.leader {
		// A new leader records where its epoch starts before it takes
		// writes, so followers can find their divergence point. Under the
		// write lock: no append of the old epoch can land in between.
		if err := p.log.AssignEpoch(st.leaderEpoch, p.log.EndOffset()); err != nil {
			p.logger.Error().Err(err).Msg("recording the leader epoch")
		}
	}
	p.state.Store(st)
	p.roleMu.Unlock()
	if changed || prev == nil || !slices.Equal(prev.isr, st.isr) {
		p.logger.Info().Bool("leader", st.leader).Int32("leader_id", st.leaderID).Int32("leader_epoch", st.leaderEpoch).
			Ints32("isr", st.isr).Int64("log_end", p.log.EndOffset()).Int64("hw", p.hw.Load()).Msg("replica state")
	}
	if st.leader {
		p.advanceHW()
	}
	p.wakeAll()
	p.wakeAppend()
	return changed
}

// setOffline marks a replica this broker no longer holds.
func (p *partition) setOffline() {
	p.roleMu.Lock()
	p.state.Store(nil)
	p.roleMu.Unlock()
}

// appendAsLeader appends a validated batch if, and while, this broker
// leads, stamping the leader epoch; it wakes replica fetches.
func (p *partition) appendAsLeader(batch []byte, info storage.BatchInfo, now int64) (storage.AppendResult, *replicaState, error) {
	p.roleMu.RLock()
	st := p.state.Load()
	if st == nil || !st.leader {
		p.roleMu.RUnlock()
		return storage.AppendResult{}, st, errNotLeader
	}
	res, err := p.log.Append(batch, info, st.leaderEpoch, now)
	p.roleMu.RUnlock()
	if err == nil && !res.Duplicate {
		p.wakeAppend()
	}
	return res, st, err
}

// leads reports whether this broker leads the partition now.
func (p *partition) leads() bool {
	if p == nil {
		return false
	}
	st := p.state.Load()
	return st != nil && st.leader
}

// checkEpoch compares a client's current leader epoch (-1: unchecked)
// with this leader's, as Kafka does (KIP-320): older is
// FENCED_LEADER_EPOCH, newer (this broker is behind) UNKNOWN_LEADER_EPOCH.
func (p *partition) checkEpoch(clientEpoch int32) int16 {
	st := p.state.Load()
	switch {
	case clientEpoch < 0 || st == nil:
		return 0
	case clientEpoch < st.leaderEpoch:
		return kerr.FencedLeaderEpoch.Code
	case clientEpoch > st.leaderEpoch:
		return kerr.UnknownLeaderEpoch.Code
	}
	return 0
}

// leaderEpoch is the current leader epoch (0 before any state).
func (p *partition) leaderEpoch() int32 {
	if st := p.state.Load(); st != nil {
		return st.leaderEpoch
	}
	return 0
}

// syncOnAck reports whether acknowledgements wait for fsync.
func (p *partition) syncOnAck() bool { return p.settings.Load().flushMessages <= 1 }

// localEnd is this replica's log end as the high watermark counts it: the
// durable end when acknowledgements wait for fsync.
func (p *partition) localEnd() int64 {
	if p.syncOnAck() {
		return p.log.DurableOffset()
	}
	return p.log.EndOffset()
}

// advanceHW recomputes a leader's high watermark (the minimum log end over
// the ISR, counting a member whose expansion is in flight, as KIP-497's
// maximal ISR does) and wakes waiters when it grows. A member that has not
// fetched since this broker became leader holds it where it is.
func (p *partition) advanceHW() {
	st := p.state.Load()
	if st == nil || !st.leader {
		return
	}
	next := p.localEnd()
	p.mu.Lock()
	count := func(id int32) {
		if id == p.me {
			return
		}
		if f := p.mu.followers[id]; f != nil {
			next = min(next, f.leo)
		} else {
			next = min(next, p.hw.Load())
		}
	}
	for _, id := range st.isr {
		count(id)
	}
	for _, id := range p.mu.pendingISR {
		if !slices.Contains(st.isr, id) {
			count(id)
		}
	}
	p.mu.Unlock()
	if !p.raiseHW(next) {
		return
	}
	p.wakeAll()
}

// raiseHW moves hw up to next; it reports whether it moved.
func (p *partition) raiseHW(next int64) bool {
	for {
		cur := p.hw.Load()
		if next <= cur {
			return false
		}
		if p.hw.CompareAndSwap(cur, next) {
			return true
		}
	}
}

// followerHW takes the leader's high watermark from a fetch response,
// bounded by this follower's own log end.
func (p *partition) followerHW(leaderHW int64) {
	next := min(leaderHW, p.log.EndOffset())
	p.hw.Store(max(next, 0))
}

// followerFetched records a follower's fetch at offset (its durable log
// end) and advances the high watermark. A follower is caught up when it
// asks for the leader's log end, or for at least what the leader's end was
// at its previous fetch (Kafka's rule, so a steady stream of appends does
// not make a keeping-up follower look behind).
func (p *partition) followerFetched(id int32, offset int64, now time.Time) {
	leaderEnd := p.log.EndOffset()
	p.mu.Lock()
	f := p.mu.followers[id]
	if f == nil {
		f = &followerState{lastCaughtUp: now}
		p.mu.followers[id] = f
	}
	if offset >= leaderEnd {
		f.lastCaughtUp = now
	} else if offset >= f.lastLeaderEnd && !f.lastFetch.IsZero() {
		f.lastCaughtUp = f.lastFetch
	}
	f.leo, f.lastFetch, f.lastLeaderEnd = offset, now, leaderEnd
	p.mu.Unlock()
	p.advanceHW()
}

// waitCommitted waits until the high watermark reaches target (the batch
// is on every in-sync replica) for acks=all. It fails with
// NOT_ENOUGH_REPLICAS_AFTER_APPEND when the ISR is below
// min.insync.replicas at that point, NOT_LEADER_OR_FOLLOWER when this
// broker stops leading at epoch first (the batch may be truncated away),
// and REQUEST_TIMED_OUT when expire fires: the last two leave the outcome
// unknown to the client, which is why they are retriable.
func (p *partition) waitCommitted(ctx context.Context, target int64, epoch int32, expire <-chan time.Time) error {
	ch := make(chan struct{}, 1)
	defer p.unwatch(ch)
	for {
		p.watch(ch)
		st := p.state.Load()
		if st == nil || !st.leader || st.leaderEpoch != epoch {
			return fmt.Errorf("%w: leadership moved while waiting for the replicas", errNotLeader)
		}
		if p.hw.Load() >= target {
			if minISR := p.settings.Load().minISR; int32(len(st.isr)) < minISR {
				return fmt.Errorf("%w: in-sync replicas %v < min.insync.replicas %d", errNotEnoughAfterAppend, st.isr, minISR)
			}
			return nil
		}
		select {
		case <-ch:
		case <-expire:
			return fmt.Errorf("%w: in-sync replicas %v did not all confirm offset %d in time", errTimedOut, st.isr, target-1)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// truncateTo cuts a follower's log back to offset (no-op at or past its
// end) and keeps the high watermark within it.
func (p *partition) truncateTo(offset int64) error {
	end := p.log.EndOffset()
	if offset >= end {
		return nil
	}
	if err := p.log.Truncate(offset); err != nil {
		return fmt.Errorf("truncate to %d: %w", offset, err)
	}
	p.logger.Warn().Int64("from", end).Int64("to", p.log.EndOffset()).Msg("follower truncated its log to the leader's")
	if hw := p.hw.Load(); hw > p.log.EndOffset() {
		p.hw.Store(p.log.EndOffset())
	}
	return nil
}

// watchAppend registers ch to be signalled once when the log end moves.
func (p *partition) watchAppend(ch chan struct{}) {
	p.mu.Lock()
	p.mu.appendWaiters[ch] = struct{}{}
	p.mu.Unlock()
}

func (p *partition) unwatchAppend(ch chan struct{}) {
	p.mu.Lock()
	delete(p.mu.appendWaiters, ch)
	p.mu.Unlock()
}

// wakeAppend signals every replica fetch waiting for new records.
func (p *partition) wakeAppend() {
	p.mu.Lock()
	for ch := range p.mu.appendWaiters {
		select {
		case ch <- struct{}{}:
		default:
		}
		delete(p.mu.appendWaiters, ch)
	}
	p.mu.Unlock()
}

// wakeAll signals every waiting fetch once.
func (p *partition) wakeAll() {
	p.mu.Lock()
	for ch := range p.mu.waiters {
		select {
		case ch <- struct{}{}:
		default:
		}
		delete(p.mu.waiters, ch)
	}
	p.mu.Unlock()
}

// watch registers ch to be signalled once when hw moves; unwatch removes it.
func (p *partition) watch(ch chan struct{}) {
	p.mu.Lock()
	p.mu.waiters[ch] = struct{}{}
	p.mu.Unlock()
}

func (p *partition) unwatch(ch chan struct{}) {
	p.mu.Lock()
	delete(p.mu.waiters, ch)
	p.mu.Unlock()
}

// flush fsyncs the log and publishes the new high watermark.
func (p *partition) flush() error {
	start := time.Now()
	err := p.log.Flush()
	if p.flushTime != nil {
		p.flushTime.Observe(time.Since(start).Seconds())
	}
	if err != nil {
		p.logger.Error().Err(err).Msg("flush failed; partition takes no more writes")
		return err
	}
	p.unflushed.Store(0)
	p.advanceHW()
	return nil
}
