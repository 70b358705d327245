package replica

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

	"github.com/fjordlog/fjord/storage"
	"github.com/fjordlog/fjord/storage/recordbatch"
)

// Partition is this broker's replica of one topic partition: the driver
// of its Core. The core decides (role, ISR, high watermark, the replica's
// phase); the driver feeds it events, publishes what it decides for
// lock-free readers, and has its Host do the I/O it asks for.
//
// Ownership: the core is written only by Step and Tick, under mu, one
// event at a time. A goroutine per partition was the alternative; it was
// rejected because every produce, flush and follower fetch is an event,
// and a hop to another goroutine on each would cost the hot path a
// wake-up, while mu is held only for the pure Step and the in-memory
// publications (no I/O). The published values are:
//
//   - view: the phase, leadership, epochs and ISR (View), which every
//     request checks first (View.Check) — a replica that is not open yet,
//     being deleted or damaged answers with a Kafka error code;
//   - hw: the high watermark, what consumers may read and acks=all waits
//     for; written under mu only, so it moves exactly as the core's does,
//     and after the view it was reached under (viewAndHW pairs the two);
//   - lg: the log, set once by Opened before the step that makes the view
//     serve it; never cleared (a deleted log's operations fail with
//     storage.ErrClosed).
//
// roleMu fences the log against a stale role: leader appends, a
// follower's appends and truncations hold it for reading and check the
// view under it; steps that may change the role (Assign, Unassign,
// OpenDone) hold it for writing, and a new leader records its epoch's
// start in the log before releasing it. So no append of an old role or
// epoch lands after a change (a follower's truncation must not race a
// stale leader append). Lock order: roleMu, then mu.
type Partition struct {
	Topic   string
	Index   int32
	TopicID [16]byte
	Logger  zerolog.Logger
	host    Host

	settings  atomic.Pointer[Settings]
	lg        atomic.Pointer[storage.Log]
	view      atomic.Pointer[View]
	hw        atomic.Int64
	unflushed atomic.Int64 // appended records since the last flush (relaxed topics)
	// full: the last write failed for lack of space (storagestate.go).
	full atomic.Bool
	// stallMs is the core's FlushStallMs, for StorageState.
	stallMs int64
	// repairTo is the offset a damaged follower's fetcher must truncate
	// to (the core's TruncateTo), -1 when none: the fetcher is the one
	// writer of a follower's log.
	repairTo atomic.Int64
	// leaderHW is the high watermark in the last fetch response a follower
	// applied, -1 before any: its offset lag (DescribeLogDirs). Written by
	// the fetcher.
	leaderHW atomic.Int64
	// pausedUntil (unix ms) holds this follower's fetches back after its
	// leader reported its own copy damaged.
	pausedUntil atomic.Int64
	// opened closes once the first open attempt has answered.
	opened     chan struct{}
	openedOnce sync.Once
	flushTime  prometheus.Observer

	roleMu sync.RWMutex
	mu     struct {
		sync.Mutex
		core *Core
		// waiters are fetches and acks waiting for hw or the view to move;
		// appendWaiters are replica fetches waiting for the log end.
		waiters       map[chan struct{}]struct{}
		appendWaiters map[chan struct{}]struct{}
		ended         bool // Host.Ended was called (the replica reached Deleted)
	}
}

// Settings are a topic's settings its replicas use.
type Settings struct {
	Storage       storage.Config
	FlushMessages int64 // 1: fsync before every ack; more: fsync in the background
	FlushMs       int64
	MaxBatchBytes int
	MinISR        int32
	// DeleteRetentionMs is how long a tombstone outlives its segment's
	// last write before compaction removes it.
	DeleteRetentionMs int64
	// TxnRequired (fjord.transactional.writes.required) refuses produced
	// batches that are not transactional.
	TxnRequired bool
	// AcksAllRequired (fjord.produce.acks.all.required) refuses produce
	// requests with acks=0 or acks=1: INVALID_REQUIRED_ACKS.
	AcksAllRequired bool
}

// Host does a replica's I/O. Each call starts the work and returns; the
// work answers the partition with the matching method or Step.
type Host interface {
	// Open opens p's log in the background and answers p.Opened.
	Open(p *Partition)
	// Delete closes and removes p's log in the background and answers
	// p.Step(LogDeleted{}).
	Delete(p *Partition)
	// Repair closes p's failed log, sets its directory aside when
	// r.SetAside (renamed, never removed: the operator's to inspect),
	// and opens the log again in the background, answering p.Opened.
	Repair(p *Partition, r Repair)
	// Propose sends prop as an AlterPartition and answers
	// p.Step(AlterAnswered{...}).
	Propose(p *Partition, prop Proposal)
	// Ended: p reached Deleted; its directory and resources are free.
	Ended(p *Partition)
	// Changed: p's view changed (its role, epoch, ISR or phase).
	Changed(p *Partition)
}

// PartitionConfig makes a Partition.
type PartitionConfig struct {
	Topic     string
	Index     int32
	TopicID   [16]byte
	Logger    zerolog.Logger
	Settings  Settings
	Core      Config
	FlushTime prometheus.Observer // fsync durations; may be nil
}

// NewPartition returns the driver of a replica in its Opening phase; the
// caller assigns it (Step(Assign{...})) and then starts it (Start).
func NewPartition(cfg PartitionConfig, host Host) *Partition {
	p := &Partition{Topic: cfg.Topic, Index: cfg.Index, TopicID: cfg.TopicID, Logger: cfg.Logger, host: host,
		opened: make(chan struct{}), flushTime: cfg.FlushTime, stallMs: cfg.Core.FlushStallMs}
	s := cfg.Settings
	p.settings.Store(&s)
	p.repairTo.Store(-1)
	p.leaderHW.Store(-1)
	p.mu.waiters = make(map[chan struct{}]struct{})
	p.mu.appendWaiters = make(map[chan struct{}]struct{})
	p.mu.core = New(cfg.Core)
	p.view.Store(p.mu.core.View())
	return p
}

// Log returns the replica's log: non-nil whenever the view serves
// (View.Check returned 0).
func (p *Partition) Log() *storage.Log { return p.lg.Load() }

// View is the replica's state as requests see it.
func (p *Partition) View() *View { return p.view.Load() }

// HW is the high watermark.
func (p *Partition) HW() int64 { return p.hw.Load() }

// viewAndHW reads the view and the high watermark as one snapshot: the
// high watermark read was reached under the view returned with it.
// publishLocked stores a new view before the high watermark it allows,
// so reading the view again after the high watermark, until it did not
// change, pairs them.
func (p *Partition) viewAndHW() (*View, int64) {
	v := p.view.Load()
	hw := p.hw.Load()
	for again := p.view.Load(); again != v; again = p.view.Load() {
		v, hw = again, p.hw.Load()
	}
	return v, hw
}

// Settings are the topic's settings.
func (p *Partition) Settings() *Settings { return p.settings.Load() }

// SetSettings applies changed topic settings (a topic config, or a broker
// default it follows, altered at run time) to the replica and its open
// log. The settings' one writer is the metadata pipeline; equal settings
// change nothing.
func (p *Partition) SetSettings(s Settings) {
	old := p.settings.Load()
	if *old == s {
		return
	}
	p.settings.Store(&s)
	if lg := p.Log(); lg != nil {
		lg.SetConfig(s.Storage)
	}
	if (old.FlushMessages <= 1) != (s.FlushMessages <= 1) {
		p.Step(Reconfigured{SyncOnAck: s.FlushMessages <= 1})
	}
	p.Logger.Info().Msg("topic settings changed")
}

// OpenAnswered closes once the first open has answered, either way.
func (p *Partition) OpenAnswered() <-chan struct{} { return p.opened }

func nowMs() int64 { return time.Now().UnixMilli() }

// Start begins the replica's life: its log opens in the background.
func (p *Partition) Start() {
	p.mu.Lock()
	rd := p.mu.core.Start(nowMs())
	p.mu.Unlock()
	p.act(rd)
}

// Opened answers Host.Open: the log, or why it could not be opened.
func (p *Partition) Opened(lg *storage.Log, err error) {
	ev := OpenDone{Err: err}
	if err == nil {
		// The settings may have changed while the log opened. Store the
		// log, then read the settings (SetSettings stores the settings,
		// then reads the log), so one of the two applies the newest.
		p.lg.Store(lg)
		lg.SetConfig(p.Settings().Storage)
		ev.Start, ev.End, ev.Durable = lg.StartOffset(), lg.EndOffset(), lg.DurableOffset()
	}
	p.Step(ev)
	p.openedOnce.Do(func() { close(p.opened) })
}

// Step feeds the core one event and carries out what it decides.
func (p *Partition) Step(ev any) {
	role := false
	switch ev.(type) {
	case Assign, Unassign, OpenDone:
		role = true
		p.roleMu.Lock()
	}
	p.mu.Lock()
	if f, ok := ev.(Flushed); ok {
		// A flush reads its durable end before it steps, outside p.mu; a
		// truncation (Truncated) and appends at the same offsets may be
		// stepped in between (a pipelining follower's flush round runs
		// beside its fetcher, a produce's flush beside a leader change).
		// The log's durable end now is true now, and Truncate sets it to
		// the cut, so the smaller of the two never counts unfsynced
		// records.
		if lg := p.Log(); lg != nil {
			f.Durable = min(f.Durable, lg.DurableOffset())
			ev = f
		}
	}
	rd := p.mu.core.Step(nowMs(), ev)
	p.publishLocked(rd)
	p.mu.Unlock()
	if lg := p.Log(); rd.StartEpoch >= 0 && lg != nil {
		// Under roleMu's write lock: no append of the old epoch can land
		// between the view saying "leading" and the epoch's start.
		if err := lg.AssignEpoch(rd.StartEpoch, rd.StartOffset); err != nil {
			p.Logger.Error().Err(err).Msg("recording the leader epoch")
		}
	}
	if role {
		p.roleMu.Unlock()
	}
	p.act(rd)
}

// Tick lets time pass for the core: retries and timeouts fire, and a
// leader's fsync that has run long is reported (FlushStalled).
func (p *Partition) Tick(now int64) {
	if lg := p.Log(); lg != nil && p.view.Load().Phase == Leading {
		if d := lg.SyncStalledFor(now); d >= stallReportMin {
			p.Step(FlushStalled{ForMs: d.Milliseconds()})
		}
	}
	p.mu.Lock()
	rd := p.mu.core.Tick(now)
	p.publishLocked(rd)
	p.mu.Unlock()
	p.act(rd)
}

// publishLocked makes rd's new state visible and wakes waiters.
// REQUIRES: p.mu held.
func (p *Partition) publishLocked(rd Ready) {
	if rd.ViewChanged {
		p.view.Store(p.mu.core.View())
	}
	if rd.HWMoved {
		p.hw.Store(rd.HW)
		if lg := p.Log(); lg != nil {
			// Transactions whose markers are now replicated stop holding
			// back the last stable offset.
			lg.UpdateHighWatermark(rd.HW)
		}
	}
	if rd.TruncateTo >= 0 {
		p.repairTo.Store(rd.TruncateTo)
	}
	p.pausedUntil.Store(p.mu.core.PausedUntil())
	if rd.WakeHW || rd.WakeLow || rd.ViewChanged {
		wakeLocked(p.mu.waiters)
	}
	if rd.WakeAppend || rd.ViewChanged {
		wakeLocked(p.mu.appendWaiters)
	}
}

// act logs rd's state changes and starts the I/O it asks for; each I/O
// answers with its own step.
func (p *Partition) act(rd Ready) {
	for _, n := range rd.Notes {
		p.Logger.Info().Msg(n)
	}
	if rd.ViewChanged {
		p.host.Changed(p)
	}
	if rd.Open {
		p.host.Open(p)
	}
	if rd.Repair != nil {
		p.host.Repair(p, *rd.Repair)
	}
	if rd.Propose != nil {
		p.host.Propose(p, *rd.Propose)
	}
	if rd.Delete {
		p.host.Delete(p)
	}
	if p.view.Load().Phase == Deleted {
		p.mu.Lock()
		ended := p.mu.ended
		p.mu.ended = true
		p.mu.Unlock()
		if !ended {
			p.host.Ended(p)
		}
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

// Serve returns the replica's log and view if it serves op now, else the
// Kafka error code for the client (never a nil log with a 0 code).
func (p *Partition) Serve(op Op) (*storage.Log, *View, int16) {
	v := p.view.Load()
	if code := v.Check(op); code != 0 {
		return nil, v, code
	}
	lg := p.Log()
	if lg == nil {
		return nil, v, kerr.NotLeaderForPartition.Code
	}
	return lg, v, 0
}

// AppendAsLeader appends a validated batch if, and while, this broker
// leads, stamping the leader epoch, and tells the core the log end moved.
func (p *Partition) AppendAsLeader(batch []byte, info recordbatch.Info, now int64) (storage.AppendResult, *View, error) {
	p.roleMu.RLock()
	lg, v, code := p.Serve(Produce)
	if code != 0 {
		p.roleMu.RUnlock()
		return storage.AppendResult{}, v, CodeError(code)
	}
	res, err := lg.Append(batch, info, v.LeaderEpoch, now)
	p.roleMu.RUnlock()
	p.wrote(lg, err)
	if err == nil && !res.Duplicate {
		p.unflushed.Add(int64(info.Records))
		p.Step(Appended{End: lg.EndOffset()})
	}
	return res, v, err
}

// AppendCoordinatorAsLeader appends a batch a coordinator of this broker
// wrote for a producer's transaction (storage.AppendCoordinator), as
// AppendAsLeader does a produced batch.
func (p *Partition) AppendCoordinatorAsLeader(batch []byte, info recordbatch.Info, now int64) (storage.AppendResult, *View, error) {
	p.roleMu.RLock()
	lg, v, code := p.Serve(Produce)
	if code != 0 {
		p.roleMu.RUnlock()
		return storage.AppendResult{}, v, CodeError(code)
	}
	res, err := lg.AppendCoordinator(batch, info, v.LeaderEpoch, now)
	p.roleMu.RUnlock()
	p.wrote(lg, err)
	if err == nil {
		p.unflushed.Add(int64(info.Records))
		p.Step(Appended{End: lg.EndOffset()})
	}
	return res, v, err
}

// AppendMarkerAsLeader appends a transaction marker (a control batch that
// ends producer m.ProducerID's transaction here), as AppendAsLeader does a
// produced batch; it returns the marker's offset.
func (p *Partition) AppendMarkerAsLeader(m storage.TxnMarker, now int64) (int64, *View, error) {
	p.roleMu.RLock()
	lg, v, code := p.Serve(Produce)
	if code != 0 {
		p.roleMu.RUnlock()
		return 0, v, CodeError(code)
	}
	off, err := lg.AppendMarker(m, v.LeaderEpoch, now)
	p.roleMu.RUnlock()
	p.wrote(lg, err)
	if err == nil {
		p.unflushed.Add(1)
		p.Step(Appended{End: lg.EndOffset()})
	}
	return off, v, err
}

// appendAsFollower appends batches fetched from leader at epoch, if the
// replica still follows it there.
func (p *Partition) appendAsFollower(leader, epoch int32, batches []byte) (bool, error) {
	p.roleMu.RLock()
	v, lg := p.view.Load(), p.Log()
	if !v.Fetches(leader) || v.LeaderEpoch != epoch || lg == nil {
		p.roleMu.RUnlock()
		return false, nil // the partition moved while the fetch was in flight
	}
	_, err := lg.AppendReplica(batches)
	p.roleMu.RUnlock()
	p.wrote(lg, err)
	if err != nil {
		return false, err
	}
	p.Step(Appended{End: lg.EndOffset()})
	return true, nil
}

// OffsetLag is how far this replica's log end is behind its leader's high
// watermark, as the last fetch response told it (DescribeLogDirs): 0 on
// the leader, or before a follower's first response.
func (p *Partition) OffsetLag() int64 {
	lg := p.Log()
	if p.Leads() || lg == nil {
		return 0
	}
	return max(p.leaderHW.Load()-lg.EndOffset(), 0)
}

// Leads reports whether this broker leads the partition now.
func (p *Partition) Leads() bool { return p != nil && p.view.Load().Leads() }

// SyncOnAck reports whether acknowledgements wait for fsync.
func (p *Partition) SyncOnAck() bool { return p.settings.Load().FlushMessages <= 1 }

// Unflushed is the count of records appended since the last flush.
func (p *Partition) Unflushed() int64 { return p.unflushed.Load() }

// FollowerFetched records a follower's fetch at offset (its log end),
// checked against this replica's view at leaderEpoch, reporting durable
// as its durable end (FollowerDurableEnd) and its log start offset
// logStart (-1: unknown); the core moves the high watermark and the low
// watermark, unless the leader epoch has changed since the check.
func (p *Partition) FollowerFetched(id, leaderEpoch int32, offset, durable, logStart int64) {
	p.Step(FollowerFetched{ID: id, LeaderEpoch: leaderEpoch, Offset: offset, Durable: durable, LogStart: logStart})
}

// DeleteRecords moves the log start offset of the partition this broker
// leads to offset (-1: the high watermark), Kafka's deleteRecordsOnLeader:
// an offset above the high watermark, or negative, is
// storage.ErrOffsetOutOfRange; one at or below the start changes nothing.
// It returns the offset asked for, which the low watermark must reach
// before DeleteRecords answers (WaitLowWatermark), and the view it was
// served at. Under roleMu's read lock, like an append, so it never lands
// after this broker stops leading.
func (p *Partition) DeleteRecords(offset int64) (int64, *View, error) {
	p.roleMu.RLock()
	defer p.roleMu.RUnlock()
	lg, v, code := p.Serve(Produce)
	if code != 0 {
		return -1, v, CodeError(code)
	}
	hw := p.hw.Load()
	if offset == -1 {
		offset = hw
	}
	if offset < 0 || offset > hw {
		return -1, v, fmt.Errorf("%w: delete records below %d: the high watermark is %d", storage.ErrOffsetOutOfRange, offset, hw)
	}
	if _, err := lg.AdvanceStartOffset(offset); err != nil {
		return -1, v, err
	}
	// Even when nothing moved: retention may have moved the start without
	// telling the core, whose low watermark counts it.
	p.Step(StartMoved{Start: lg.StartOffset()})
	return offset, v, nil
}

// LowWatermark is the leader's low watermark (Core.LowWatermark): the
// smallest log start offset among the live replicas; ok is false when this
// broker does not lead.
func (p *Partition) LowWatermark() (int64, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.mu.core.LowWatermark()
}

// WaitLowWatermark waits until the low watermark reaches target (every
// live replica has moved its log start there) and returns it, for
// DeleteRecords. It fails with ErrNotLeader when this broker stops leading
// at epoch first, and with ErrTimedOut when ctx's deadline passes (the
// records are deleted on the leader either way; the followers follow).
func (p *Partition) WaitLowWatermark(ctx context.Context, target int64, epoch int32) (int64, error) {
	ch := make(chan struct{}, 1)
	defer p.Unwatch(ch)
	for {
		p.Watch(ch)
		v := p.view.Load()
		lw, ok := p.LowWatermark()
		if !ok || v.LeaderEpoch != epoch {
			return -1, fmt.Errorf("%w: leadership moved while waiting for the replicas' log start offsets", ErrNotLeader)
		}
		if lw >= target {
			return lw, nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				return lw, fmt.Errorf("%w: the replicas' log start offsets reached %d, not %d, in time", ErrTimedOut, lw, target)
			}
			return lw, ctx.Err()
		}
	}
}

// followLeaderStart moves a follower's log start offset to its leader's,
// as Kafka's follower does with every fetch response (the leader's
// LogStartOffset), bounded by what this replica knows is committed (its
// high watermark), as Kafka's follower refuses a start past its own high
// watermark. Only while it still follows leader at epoch, under roleMu
// like its appends.
func (p *Partition) followLeaderStart(lg *storage.Log, leader, epoch int32, leaderStart int64) {
	target := min(leaderStart, p.hw.Load())
	if target <= lg.StartOffset() {
		return
	}
	p.roleMu.RLock()
	v := p.view.Load()
	if !v.Fetches(leader) || v.LeaderEpoch != epoch || p.Log() != lg {
		p.roleMu.RUnlock()
		return
	}
	moved, err := lg.AdvanceStartOffset(target)
	p.roleMu.RUnlock()
	if err != nil {
		if !errors.Is(err, storage.ErrClosed) {
			p.Logger.Warn().Err(err).Int64("leader_log_start", leaderStart).Msg("following the leader's log start offset")
		}
		return
	}
	if moved {
		p.Step(StartMoved{Start: lg.StartOffset()})
	}
}

// Errors of WaitCommitted and AppendAsLeader.
var (
	ErrNotLeader                    = errors.New("replica: not the leader of this partition")
	ErrNotEnoughReplicasAfterAppend = errors.New("replica: not enough in-sync replicas after append")
	ErrTimedOut                     = errors.New("replica: request timed out")
	// errMoved: the replica's role changed under a fetcher's feet.
	errMoved = errors.New("replica: the replica moved while the fetcher worked on it")
)

// CodeError carries a Kafka error code a replica's phase decided
// (View.Check) through paths that return errors.
type CodeError int16

func (c CodeError) Error() string { return kerr.ErrorForCode(int16(c)).Error() }

// WaitCommitted waits until the high watermark reaches target (the batch
// is on every in-sync replica) for acks=all. It fails with
// ErrNotEnoughReplicasAfterAppend when the ISR is below
// min.insync.replicas at that point, ErrNotLeader when this broker stops
// leading at epoch first (the batch may be truncated away), and
// ErrTimedOut when expire fires: the last two leave the outcome unknown to
// the client, which is why they are retriable.
func (p *Partition) WaitCommitted(ctx context.Context, target int64, epoch int32, expire <-chan time.Time) error {
	// Already decided (every acks=all write at replication factor 1, once
	// flushed): no channel, no watch.
	if done, err := p.committed(target, epoch); done {
		return err
	}
	ch := make(chan struct{}, 1)
	defer p.Unwatch(ch)
	for {
		p.Watch(ch)
		// Registered before looking again, so no move is missed.
		if done, err := p.committed(target, epoch); done {
			return err
		}
		select {
		case <-ch:
		case <-expire:
			return fmt.Errorf("%w: in-sync replicas %v did not all confirm offset %d in time", ErrTimedOut, p.view.Load().ISR, target-1)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// WaitHW waits until the high watermark reaches target while this replica
// leads at epoch, or ctx ends; ErrNotLeader once it no longer does. A
// coordinator loading its partition waits so, for the log end it is about
// to read: it then acts only on records no failover can take back. (A
// leader may hold records past its high watermark that no other replica
// has: one restarted within its session leads again at the same epoch with
// its old tail, and a later leader without that tail cuts it. A
// transaction decision or an offset read from it and acted on would be
// undone in the log but not in the world.) Unlike WaitCommitted it does not
// ask for min.insync.replicas: what is below the high watermark is
// committed whatever the ISR's size now.
func (p *Partition) WaitHW(ctx context.Context, target int64, epoch int32) error {
	reached := func() (bool, error) {
		v, hw := p.viewAndHW()
		if !v.Leads() || v.LeaderEpoch != epoch {
			return true, fmt.Errorf("%w: leadership moved while waiting for the high watermark", ErrNotLeader)
		}
		return hw >= target, nil
	}
	if done, err := reached(); done {
		return err
	}
	ch := make(chan struct{}, 1)
	defer p.Unwatch(ch)
	for {
		p.Watch(ch)
		if done, err := reached(); done {
			return err
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// WaitCommittedUntil is WaitCommitted with a deadline, whose timer it
// makes only if it has to wait.
func (p *Partition) WaitCommittedUntil(ctx context.Context, target int64, epoch int32, deadline time.Time) error {
	if done, err := p.committed(target, epoch); done {
		return err
	}
	timer := time.NewTimer(max(time.Until(deadline), 0))
	defer timer.Stop()
	return p.WaitCommitted(ctx, target, epoch, timer.C)
}

// committed reports whether WaitCommitted's outcome for target at epoch is
// decided now, and that outcome.
// It judges the view and high watermark as one snapshot (viewAndHW):
// an ISR shrinking below min.insync.replicas moves the high watermark to
// the leader's own durable end, and judged with the ISR from before the
// shrink, a record only the leader holds would be acknowledged as
// replicated.
func (p *Partition) committed(target int64, epoch int32) (bool, error) {
	v, hw := p.viewAndHW()
	if !v.Leads() || v.LeaderEpoch != epoch {
		return true, fmt.Errorf("%w: leadership moved while waiting for the replicas", ErrNotLeader)
	}
	if hw < target {
		return false, nil
	}
	if minISR := p.settings.Load().MinISR; int32(len(v.ISR)) < minISR {
		return true, fmt.Errorf("%w: in-sync replicas %v < min.insync.replicas %d", ErrNotEnoughReplicasAfterAppend, v.ISR, minISR)
	}
	return true, nil
}

// truncateTo cuts a follower's log back to offset (no-op at or past its
// end) and tells the core. Called by the fetcher of leader, the follower
// log's one writer, for a divergence found at epoch or (repaired) a
// damage repair; it does nothing once the replica no longer follows that
// leader at that epoch (a newer role's log is not the old fetcher's to
// cut). Under roleMu's read lock, like appends, so no role change lands
// in the middle.
func (p *Partition) truncateTo(lg *storage.Log, leader, epoch int32, offset int64, repaired bool) error {
	p.roleMu.RLock()
	v := p.view.Load()
	if v.Leader != leader || v.LeaderEpoch != epoch || !(v.Fetches(leader) || (repaired && v.Phase == Damaged)) {
		p.roleMu.RUnlock()
		return errMoved
	}
	end := lg.EndOffset()
	if offset < end {
		if err := lg.Truncate(offset); err != nil {
			p.roleMu.RUnlock()
			return fmt.Errorf("truncate to %d: %w", offset, err)
		}
		p.Logger.Warn().Int64("from", end).Int64("to", lg.EndOffset()).Msg("follower truncated its log")
	}
	p.roleMu.RUnlock()
	p.Step(Truncated{Start: lg.StartOffset(), End: lg.EndOffset(), Repaired: repaired})
	return nil
}

// WatchAppend registers ch to be signalled once when the log end moves.
func (p *Partition) WatchAppend(ch chan struct{}) {
	p.mu.Lock()
	p.mu.appendWaiters[ch] = struct{}{}
	p.mu.Unlock()
}

// UnwatchAppend removes ch.
func (p *Partition) UnwatchAppend(ch chan struct{}) {
	p.mu.Lock()
	delete(p.mu.appendWaiters, ch)
	p.mu.Unlock()
}

// Watch registers ch to be signalled once when hw or the view moves.
func (p *Partition) Watch(ch chan struct{}) {
	p.mu.Lock()
	p.mu.waiters[ch] = struct{}{}
	p.mu.Unlock()
}

// Waiting counts the requests parked on the replica: on its HW or view
// (consumer fetches, acks=all) and on its log end (replica fetches).
func (p *Partition) Waiting() (hw, appends int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.mu.waiters), len(p.mu.appendWaiters)
}

// Unwatch removes ch.
func (p *Partition) Unwatch(ch chan struct{}) {
	p.mu.Lock()
	delete(p.mu.waiters, ch)
	p.mu.Unlock()
}

// Flush fsyncs the log and tells the core what is durable.
func (p *Partition) Flush() error {
	lg := p.Log()
	if lg == nil {
		return nil
	}
	start := time.Now()
	err := lg.Flush()
	p.observeFlush(start)
	return p.flushed(lg, err)
}

// observeFlush times one flush begun at start: one observation per
// fsync or group commit, however many logs it made durable. (Observing a
// group commit of 1,000 logs 1,000 times cost 5 % of a node's CPU under
// a produce to 1,000 partitions, in the JMX timer's quantile stream.)
func (p *Partition) observeFlush(start time.Time) {
	if p.flushTime != nil {
		p.flushTime.Observe(time.Since(start).Seconds())
	}
}

// flushed tells the core what a flush of lg made durable, or logs why it
// failed, and returns err.
func (p *Partition) flushed(lg *storage.Log, err error) error {
	if err != nil && (errors.Is(err, storage.ErrClosed) || p.view.Load().Phase >= Deleting) {
		return err // deleted or shut down meanwhile: nothing to report
	}
	if err != nil {
		p.wrote(lg, err)
		return err
	}
	p.unflushed.Store(0)
	p.Step(Flushed{Durable: lg.DurableOffset()})
	return nil
}

// parallelism bounds the partitions FlushAll and StepAll work on at once.
const parallelism = 16

// FlushAll flushes ps concurrently and returns each one's error: a
// request's or a fetch's wait is its slowest partition's fsync, not the
// sum, and concurrent fsyncs share the filesystem's journal commits.
//
// From GroupFlushMin partitions on, the logs are flushed as one group
// (storage.FlushGroup: one syncfs for all where the file system offers it,
// rather than a journal commit and a device flush per log).
func FlushAll(ps []*Partition) []error {
	errs := make([]error, len(ps))
	if len(ps) >= GroupFlushMin {
		start := time.Now()
		logs := make([]*storage.Log, 0, len(ps))
		at := make([]int, 0, len(ps))
		for i, p := range ps {
			if lg := p.Log(); lg != nil {
				logs, at = append(logs, lg), append(at, i)
			}
		}
		res := storage.FlushGroup(logs)
		if len(at) > 0 {
			ps[at[0]].observeFlush(start)
		}
		for j, err := range res {
			errs[at[j]] = ps[at[j]].flushed(logs[j], err)
		}
		return errs
	}
	forEachBounded(len(ps), func(i int) { errs[i] = ps[i].Flush() })
	return errs
}

// GroupFlushMin is the number of partitions from which FlushAll flushes
// them as one group.
const GroupFlushMin = 8

// PendingStep is one event for one partition.
type PendingStep struct {
	P  *Partition
	Ev any
}

// StepAll steps each partition its event, several at a time; each
// partition at most once, so its own events stay in order. A leadership
// starting here fsyncs the leader-epoch checkpoint before it takes a
// write: a failover that moved 535 leaderships to one node waited for
// those fsyncs one after another (4 s on a busy two-core machine) before
// the image, and the new followers' fetchers, took effect.
func StepAll(steps []PendingStep) {
	forEachBounded(len(steps), func(i int) { steps[i].P.Step(steps[i].Ev) })
}

// forEachBounded runs fn(0..n-1), parallelism at a time, and returns when
// all have.
func forEachBounded(n int, fn func(i int)) { ForEachBounded(n, parallelism, fn) }

// ForEachBounded runs fn(0..n-1) on at most workers goroutines, the
// caller among them, and returns when all have. For work on many
// partitions at once: their flushes, steps, or a produce request's appends.
func ForEachBounded(n, workers int, fn func(i int)) {
	if n <= 1 || workers <= 1 {
		for i := range n {
			fn(i)
		}
		return
	}
	var next atomic.Int64
	work := func() {
		for i := next.Add(1) - 1; i < int64(n); i = next.Add(1) - 1 {
			fn(int(i))
		}
	}
	// The caller is one of the workers: a request's flush of two
	// partitions hands one of them to another goroutine, not both.
	var wg sync.WaitGroup
	for range min(n, workers) - 1 {
		wg.Go(work) // joined below: scoped to this call
	}
	work()
	wg.Wait()
}
