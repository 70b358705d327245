package broker

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/fjordlog/fjord/broker/replica"
	"github.com/fjordlog/fjord/storage"
)

// partition is this node's replica of one topic partition: the driver of
// its replica.Core. The core decides (role, ISR, high watermark, the
// replica's phase); the driver feeds it events, publishes what it decides
// for lock-free readers, and does the I/O it asks for.
//
// Ownership: the core is written only by step, under mu, one event at a
// time. A goroutine per partition was the alternative; it was rejected
// because every produce, flush and follower fetch is an event, and a hop
// to another goroutine on each would cost the hot path a wake-up, while
// mu is held only for the pure Step and the in-memory publications (no
// I/O). The published values are:
//
//   - view: the phase, leadership, epochs and ISR (replica.View), which
//     every request checks first (View.Check) — a replica that is not
//     open yet, being deleted or damaged answers with a Kafka error code;
//   - hw: the high watermark, what consumers may read and acks=all waits
//     for; written under mu only, so it moves exactly as the core's does;
//   - lg: the log, set once by the opener before the OpenDone step that
//     makes the view serve it; never cleared (a deleted log's operations
//     fail with storage.ErrClosed).
//
// roleMu fences the log against a stale role: leader appends and a
// follower's replica appends hold it for reading and check the view under
// it; steps that may change the role (Assign, Unassign, OpenDone) hold it
// for writing, and a new leader records its epoch's start in the log
// before releasing it. So no append of an old role or epoch lands after a
// change (a follower's truncation must not race a stale leader append).
// Lock order: roleMu, then mu.
type partition struct {
	topic   string
	index   int32
	topicID [16]byte
	me      int32 // this broker's id
	dir     string
	logger  zerolog.Logger
	host    *Broker // does the I/O the core asks for (open, AlterPartition, delete)

	settings  atomic.Pointer[topicSettings]
	lg        atomic.Pointer[storage.Log]
	view      atomic.Pointer[replica.View]
	hw        atomic.Int64
	unflushed atomic.Int64 // appended records since the last flush (relaxed topics)
	// repairTo is the offset a damaged follower's fetcher must truncate
	// to (the core's TruncateTo), -1 when none: the fetcher is the one
	// writer of a follower's log.
	repairTo atomic.Int64
	// pausedUntil (unix ms) holds this follower's fetches back after its
	// leader reported its own copy damaged.
	pausedUntil atomic.Int64
	// dir is claimed from creation until the log is deleted, so a replica
	// of a re-created topic of the same name opens only after the old one
	// is gone (claim.prev).
	claim *dirClaim
	// firstOpen closes once the first open attempt has answered.
	firstOpen     chan struct{}
	firstOpenOnce sync.Once

	roleMu sync.RWMutex
	mu     struct {
		sync.Mutex
		core *replica.Core
		// waiters are fetches and acks waiting for hw or the view to move;
		// appendWaiters are replica fetches waiting for the log end.
		waiters       map[chan struct{}]struct{}
		appendWaiters map[chan struct{}]struct{}
		released      bool // claim released (the replica reached Deleted)
	}
	flushTime prometheus.Observer
}

// newPartition returns the driver of a replica in its Opening phase; the
// caller assigns it (Assign) and then starts it (start).
func newPartition(b *Broker, topic string, index int32, id [16]byte, s topicSettings) *partition {
	p := &partition{me: b.cfg.NodeID, topic: topic, index: index, topicID: id, host: b,
		dir:    b.partitionDir(topic, index),
		logger: b.log.With().Str("topic", topic).Int32("partition", index).Logger()}
	p.settings.Store(&s)
	p.repairTo.Store(-1)
	p.firstOpen = make(chan struct{})
	p.mu.waiters = make(map[chan struct{}]struct{})
	p.mu.appendWaiters = make(map[chan struct{}]struct{})
	p.mu.core = replica.New(b.replicaConfig(s))
	p.view.Store(p.mu.core.View())
	p.flushTime = b.metrics.flushTime
	p.claim = b.claimDir(p.dir)
	return p
}

// log returns the replica's log: non-nil whenever the view serves
// (View.Check returned 0).
func (p *partition) log() *storage.Log { return p.lg.Load() }

func nowMs() int64 { return time.Now().UnixMilli() }

// start begins the replica's life: its log opens in the background.
func (p *partition) start() {
	p.mu.Lock()
	rd := p.mu.core.Start(nowMs())
	p.mu.Unlock()
	p.act(rd)
}

// step feeds the core one event and carries out what it decides.
func (p *partition) step(ev any) {
	switch ev.(type) {
	case replica.Assign, replica.Unassign, replica.OpenDone:
		p.roleMu.Lock()
		defer p.roleMu.Unlock()
	}
	p.mu.Lock()
	rd := p.mu.core.Step(nowMs(), ev)
	p.publishLocked(rd)
	p.mu.Unlock()
	if rd.StartEpoch >= 0 {
		// Under roleMu's write lock: no append of the old epoch can land
		// between the view saying "leading" and the epoch's start.
		if err := p.log().AssignEpoch(rd.StartEpoch, rd.StartOffset); err != nil {
			p.logger.Error().Err(err).Msg("recording the leader epoch")
		}
	}
	p.act(rd)
}

// tick lets time pass for the core: retries and timeouts fire.
func (p *partition) tick(now int64) {
	p.mu.Lock()
	rd := p.mu.core.Tick(now)
	p.publishLocked(rd)
	p.mu.Unlock()
	p.act(rd)
}

// publishLocked makes rd's new state visible and wakes waiters.
// REQUIRES: p.mu held.
func (p *partition) publishLocked(rd replica.Ready) {
	if rd.ViewChanged {
		p.view.Store(p.mu.core.View())
	}
	if rd.HWMoved {
		p.hw.Store(rd.HW)
	}
	if rd.TruncateTo >= 0 {
		p.repairTo.Store(rd.TruncateTo)
	}
	p.pausedUntil.Store(p.mu.core.PausedUntil())
	if rd.WakeHW || rd.ViewChanged {
		wakeLocked(p.mu.waiters)
	}
	if rd.WakeAppend || rd.ViewChanged {
		wakeLocked(p.mu.appendWaiters)
	}
	if p.view.Load().Phase == replica.Deleted && !p.mu.released {
		p.mu.released = true
		p.host.releaseDir(p.dir, p.claim)
	}
}

// act logs rd's state changes and starts the I/O it asks for; each I/O
// answers with its own step.
func (p *partition) act(rd replica.Ready) {
	for _, n := range rd.Notes {
		p.logger.Info().Msg(n)
	}
	if rd.ViewChanged && p.topic == offsetsTopic {
		// Coordinators follow the offsets partitions' leaderships, which
		// may change after an image (a slow open finishing).
		p.host.offsets.follow(p.host.lookup(offsetsTopic))
	}
	if rd.Open {
		p.host.openReplica(p)
	}
	if rd.Propose != nil {
		p.host.proposeAlter(p, *rd.Propose)
	}
	if rd.Delete {
		p.host.deleteReplica(p)
	}
}

func wakeLocked(ws map[chan struct{}]struct{}) {
	for ch := range ws {
		select {
		case ch <- struct{}{}:
		default:
		}
		delete(ws, ch)
	}
}

// serve returns the replica's log and view if it serves op now, else the
// Kafka error code for the client (never a nil log with a 0 code).
func (p *partition) serve(op replica.Op) (*storage.Log, *replica.View, int16) {
	v := p.view.Load()
	if code := v.Check(op); code != 0 {
		return nil, v, code
	}
	lg := p.log()
	if lg == nil {
		return nil, v, kerr.NotLeaderForPartition.Code
	}
	return lg, v, 0
}

// appendAsLeader appends a validated batch if, and while, this broker
// leads, stamping the leader epoch, and tells the core the log end moved.
func (p *partition) appendAsLeader(batch []byte, info storage.BatchInfo, now int64) (storage.AppendResult, *replica.View, error) {
	p.roleMu.RLock()
	lg, v, code := p.serve(replica.Produce)
	if code != 0 {
		p.roleMu.RUnlock()
		return storage.AppendResult{}, v, codeError(code)
	}
	res, err := lg.Append(batch, info, v.LeaderEpoch, now)
	p.roleMu.RUnlock()
	if err == nil && !res.Duplicate {
		p.step(replica.Appended{End: lg.EndOffset()})
	}
	return res, v, err
}

// appendAsFollower appends batches fetched from leader at epoch, if the
// replica still follows it there.
func (p *partition) appendAsFollower(leader, epoch int32, batches []byte) (bool, error) {
	p.roleMu.RLock()
	v, lg := p.view.Load(), p.log()
	if !v.Fetches(leader) || v.LeaderEpoch != epoch || lg == nil {
		p.roleMu.RUnlock()
		return false, nil // the partition moved while the fetch was in flight
	}
	_, err := lg.AppendReplica(batches)
	p.roleMu.RUnlock()
	if err != nil {
		return false, err
	}
	p.step(replica.Appended{End: lg.EndOffset()})
	return true, nil
}

// leads reports whether this broker leads the partition now.
func (p *partition) leads() bool { return p != nil && p.view.Load().Leads() }

// syncOnAck reports whether acknowledgements wait for fsync.
func (p *partition) syncOnAck() bool { return p.settings.Load().flushMessages <= 1 }

// followerFetched records a follower's fetch at offset (its durable log
// end); the core moves the high watermark.
func (p *partition) followerFetched(id int32, offset int64) {
	p.step(replica.FollowerFetched{ID: id, Offset: offset})
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
		v := p.view.Load()
		if !v.Leads() || v.LeaderEpoch != epoch {
			return fmt.Errorf("%w: leadership moved while waiting for the replicas", errNotLeader)
		}
		if p.hw.Load() >= target {
			if minISR := p.settings.Load().minISR; int32(len(v.ISR)) < minISR {
				return fmt.Errorf("%w: in-sync replicas %v < min.insync.replicas %d", errNotEnoughAfterAppend, v.ISR, minISR)
			}
			return nil
		}
		select {
		case <-ch:
		case <-expire:
			return fmt.Errorf("%w: in-sync replicas %v did not all confirm offset %d in time", errTimedOut, v.ISR, target-1)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// truncateTo cuts a follower's log back to offset (no-op at or past its
// end) and tells the core. Called by the fetcher of leader, the follower
// log's one writer, for a divergence found at epoch or (repaired) a
// damage repair; it does nothing once the replica no longer follows that
// leader at that epoch (a newer role's log is not the old fetcher's to
// cut). Under roleMu's read lock, like appends, so no role change lands
// in the middle.
func (p *partition) truncateTo(lg *storage.Log, leader, epoch int32, offset int64, repaired bool) error {
	p.roleMu.RLock()
	v := p.view.Load()
	if v.Leader != leader || v.LeaderEpoch != epoch || !(v.Fetches(leader) || (repaired && v.Phase == replica.Damaged)) {
		p.roleMu.RUnlock()
		return errMoved
	}
	end := lg.EndOffset()
	if offset < end {
		if err := lg.Truncate(offset); err != nil {
			p.roleMu.RUnlock()
			return fmt.Errorf("truncate to %d: %w", offset, err)
		}
		p.logger.Warn().Int64("from", end).Int64("to", lg.EndOffset()).Msg("follower truncated its log")
	}
	p.roleMu.RUnlock()
	p.step(replica.Truncated{Start: lg.StartOffset(), End: lg.EndOffset(), Repaired: repaired})
	return nil
}

// errMoved: the replica's role changed under a fetcher's feet.
var errMoved = errors.New("broker: the replica moved while the fetcher worked on it")

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

// watch registers ch to be signalled once when hw or the view moves;
// unwatch removes it.
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

// flush fsyncs the log and tells the core what is durable.
func (p *partition) flush() error {
	lg := p.log()
	if lg == nil {
		return nil
	}
	start := time.Now()
	err := lg.Flush()
	if p.flushTime != nil {
		p.flushTime.Observe(time.Since(start).Seconds())
	}
	if err != nil && (errors.Is(err, storage.ErrClosed) || p.view.Load().Phase >= replica.Deleting) {
		return err // deleted or shut down meanwhile: nothing to report
	}
	if err != nil {
		p.logger.Error().Err(err).Msg("flush failed; partition takes no more writes")
		return err
	}
	p.unflushed.Store(0)
	p.step(replica.Flushed{Durable: lg.DurableOffset()})
	return nil
}
