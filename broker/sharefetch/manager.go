package sharefetch

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/fjordlog/fjord/broker/sharestate"
	"github.com/fjordlog/fjord/group"
	"github.com/fjordlog/fjord/group/sharepart"
)

// Manager is this node's share-partition leader side (Kafka's
// SharePartitionManager): the share-partitions of the data partitions it
// leads, loaded on first use, and the share sessions of the members
// fetching from it.
//
// Invariants:
//   - mu.parts holds exactly the share-partitions that are loading or
//     serving; a dropped one is removed at once (forget), and a key is
//     loaded by at most one sharePartition at a time.
//   - len(mu.parts) <= cfg.MaxPartitions and len(mu.sessions) <=
//     cfg.MaxSessions.
//   - mu.groupSessions[g] is the number of sessions of group g (absent
//     when 0).
type Manager struct {
	host Host
	cfg  Config
	// ctx ends with Close; every Persister call and wait is bounded by it.
	ctx    context.Context
	cancel context.CancelFunc
	// now is the clock, read only by the goroutines that drive the state
	// machines (Unix ms).
	now func() int64

	// wake is the expiry loop's alarm: wakeAt is when it will next tick
	// (-1: not before a kick); a step whose lock deadline comes earlier
	// lowers it and kicks the loop.
	wakeMu   sync.Mutex
	wakeAt   int64
	kick     chan struct{}
	loopDone chan struct{}

	mu struct {
		sync.Mutex
		closed        bool
		parts         map[sharepart.Key]*sharePartition
		sessions      map[sessionKey]*session
		groupSessions map[string]int
	}
}

// NewManager starts the Manager and its expiry loop (on a goroutine of
// the node's). Close stops it.
func NewManager(h Host, cfg Config) (*Manager, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	m := &Manager{
		host: h, cfg: cfg.withDefaults(), ctx: ctx, cancel: cancel,
		now:    func() int64 { return time.Now().UnixMilli() },
		wakeAt: -1, kick: make(chan struct{}, 1), loopDone: make(chan struct{}),
	}
	m.mu.parts = make(map[sharepart.Key]*sharePartition)
	m.mu.sessions = make(map[sessionKey]*session)
	m.mu.groupSessions = make(map[string]int)
	if !h.Go(m.expiryLoop) {
		cancel()
		return nil, errors.New("sharefetch: node is closing")
	}
	return m, nil
}

// Close stops the Manager: waiting fetches answer with what they have,
// Persister calls in flight are cancelled (which drops their
// share-partitions), and the expiry loop ends before Close returns. Locks
// are not released: their records' durable form already counts the
// delivery, and the next leader makes them available.
func (m *Manager) Close() {
	m.mu.Lock()
	m.mu.closed = true
	m.mu.Unlock()
	m.cancel()
	<-m.loopDone
}

// Stats are the Manager's counts, for metrics.
type Stats struct {
	Sessions          int
	SharePartitions   int // loading or serving
	Loading           int
	AcquiredRecords   int64
	InFlightRecords   int64 // between SPSO and SPEO, across share-partitions
	SessionPartitions int
}

// Stats counts what the Manager holds now.
func (m *Manager) Stats() Stats {
	m.mu.Lock()
	s := Stats{Sessions: len(m.mu.sessions), SharePartitions: len(m.mu.parts)}
	for _, ss := range m.mu.sessions {
		s.SessionPartitions += len(ss.parts)
	}
	parts := m.partsLocked(nil)
	m.mu.Unlock()
	for _, sp := range parts {
		sp.mu.Lock()
		switch sp.mu.state {
		case loading:
			s.Loading++
		case serving:
			c := sp.mu.part.Counts()
			s.AcquiredRecords += c.Acquired
			s.InFlightRecords += sp.mu.part.EndOffset() - sp.mu.part.StartOffset()
		}
		sp.mu.Unlock()
	}
	return s
}

// Unload drops the share-partitions of a data partition, of every group:
// the broker calls it when this node stops leading the partition or its
// leader epoch changes (requests notice on their own too; this releases
// the memory at once). Fetches holding one answer NOT_LEADER_OR_FOLLOWER.
func (m *Manager) Unload(topicID [16]byte, partition int32) {
	m.mu.Lock()
	var victims []*sharePartition
	for k, sp := range m.mu.parts {
		if k.TopicID == topicID && k.Partition == partition {
			victims = append(victims, sp)
		}
	}
	m.mu.Unlock()
	for _, sp := range victims {
		sp.drop(fmt.Errorf("sharefetch: %s: leadership changed: %w", sp.key, group.ErrNotLeaderOrFollower))
	}
}

// UnloadGroup drops every share-partition of group: the broker calls it
// when the group is deleted or its start offsets are altered or deleted
// (AlterShareGroupOffsets, DeleteShareGroupOffsets), so the next fetch
// reads the new state. Kafka refuses those while the group has members,
// so nothing is acquired.
func (m *Manager) UnloadGroup(groupID string) {
	for _, sp := range m.groupParts(groupID) {
		sp.drop(fmt.Errorf("%w: %s", errGroupReset, sp.key))
	}
}

// ReleaseMember ends member's share session here and releases the records
// it holds in group's share-partitions here, as when its connection
// closes: the broker may call it when the group coordinator fences the
// member or it leaves the group.
func (m *Manager) ReleaseMember(groupID, member string) {
	m.mu.Lock()
	ss := m.mu.sessions[sessionKey{groupID, member}]
	if ss != nil {
		m.removeSessionLocked(ss)
	}
	m.mu.Unlock()
	m.release(groupID, member, ss != nil)
}

// Why a share-partition went without anything going wrong: a fetch that
// watched it just loads it again.
var (
	// errUnloaded: unloaded while idle (its group left this node, or room
	// was needed).
	errUnloaded = fmt.Errorf("sharefetch: share-partition unloaded: %w", leaderNotAvailable)
	// errGroupReset: UnloadGroup.
	errGroupReset = fmt.Errorf("sharefetch: share group state changed: %w", leaderNotAvailable)
	// errBudget: Config.MaxPartitions share-partitions are loaded and
	// none is idle.
	errBudget          = fmt.Errorf("sharefetch: too many share-partitions loaded: %w", leaderNotAvailable)
	leaderNotAvailable = kerr.LeaderNotAvailable
)

// benign reports whether a drop's reason is one a fetch recovers from by
// loading the share-partition again at once; any other is answered, so
// that a failing share coordinator is not asked again in a loop.
func benign(reason error) bool {
	return errors.Is(reason, errUnloaded) || errors.Is(reason, errGroupReset)
}

// lost drops key's share-partition, if loaded: the node answered code for
// its partition (not the leader, or gone).
func (m *Manager) lost(key sharepart.Key, code int16) {
	m.mu.Lock()
	sp := m.mu.parts[key]
	m.mu.Unlock()
	if sp != nil {
		sp.drop(fmt.Errorf("sharefetch: %s: %w", key, codeError(code)))
	}
}

// partition returns the share-partition of key on rep, loading it if it
// is not loaded (it may still be loading), or why it cannot: rep no
// longer leads, or the cap is reached. A loaded share-partition whose
// leader epoch is not rep's is dropped and loaded again.
func (m *Manager) partition(key sharepart.Key, rep Replica, now int64) (*sharePartition, error) {
	epoch, leads := rep.LeaderEpoch()
	m.mu.Lock()
	sp := m.mu.parts[key]
	if sp != nil && leads && sp.leaderEpoch == epoch {
		m.mu.Unlock()
		sp.used.Store(now)
		sp.mu.Lock()
		sp.mu.retire = false
		sp.mu.Unlock()
		return sp, nil
	}
	m.mu.Unlock()
	if sp != nil {
		sp.drop(fmt.Errorf("sharefetch: %s: leader epoch %d is gone: %w", key, sp.leaderEpoch, group.ErrNotLeaderOrFollower))
	}
	if !leads {
		return nil, fmt.Errorf("sharefetch: %s: not the leader: %w", key, group.ErrNotLeaderOrFollower)
	}

	m.mu.Lock()
	if m.mu.closed {
		m.mu.Unlock()
		return nil, errClosed
	}
	if sp = m.mu.parts[key]; sp != nil { // loaded meanwhile by another request
		m.mu.Unlock()
		if sp.leaderEpoch != epoch {
			return nil, fmt.Errorf("sharefetch: %s: leadership changing: %w", key, leaderNotAvailable)
		}
		sp.used.Store(now)
		return sp, nil
	}
	var victim *sharePartition
	if len(m.mu.parts) >= m.cfg.MaxPartitions {
		if victim = m.idlestLocked(); victim == nil {
			m.mu.Unlock()
			return nil, fmt.Errorf("sharefetch: %s: %d share-partitions loaded, none idle: %w", key, len(m.mu.parts), errBudget)
		}
		delete(m.mu.parts, victim.key)
	}
	sp = newSharePartition(m, key, rep, epoch)
	sp.used.Store(now)
	m.mu.parts[key] = sp
	m.mu.Unlock()
	if victim != nil {
		victim.drop(errUnloaded)
	}
	if !m.host.Go(func() { m.load(sp) }) {
		sp.drop(errClosed)
		return nil, errClosed
	}
	return sp, nil
}

// loaded returns the share-partition of key if it is loaded (serving or
// loading) at rep's leader epoch, nil if it is not loaded, or why rep
// cannot serve it. Acknowledgements use it: as in Kafka, they never load
// a share-partition (its records were acquired from a previous one,
// whose locks are gone).
func (m *Manager) loaded(key sharepart.Key, rep Replica) (*sharePartition, error) {
	epoch, leads := rep.LeaderEpoch()
	m.mu.Lock()
	sp := m.mu.parts[key]
	m.mu.Unlock()
	if sp != nil && (!leads || sp.leaderEpoch != epoch) {
		sp.drop(fmt.Errorf("sharefetch: %s: leader epoch %d is gone: %w", key, sp.leaderEpoch, group.ErrNotLeaderOrFollower))
		sp = nil
	}
	if !leads {
		return nil, fmt.Errorf("sharefetch: %s: not the leader: %w", key, group.ErrNotLeaderOrFollower)
	}
	return sp, nil
}

// idlestLocked is the least recently used idle share-partition, nil when
// none is idle.
// REQUIRES: m.mu held.
func (m *Manager) idlestLocked() *sharePartition {
	var best *sharePartition
	for _, sp := range m.mu.parts {
		if best != nil && sp.used.Load() >= best.used.Load() {
			continue
		}
		sp.mu.Lock()
		idle := sp.idleLocked()
		sp.mu.Unlock()
		if idle {
			best = sp
		}
	}
	return best
}

// forget removes a dropped share-partition from the map, if it is still
// the one there.
func (m *Manager) forget(sp *sharePartition) {
	m.mu.Lock()
	if m.mu.parts[sp.key] == sp {
		delete(m.mu.parts, sp.key)
	}
	m.mu.Unlock()
}

// unload drops sp if it is still idle (its state is all durable).
func (m *Manager) unload(sp *sharePartition, reason error) {
	sp.mu.Lock()
	idle := sp.idleLocked()
	sp.mu.Unlock()
	if idle {
		sp.drop(reason)
	}
}

// partsLocked lists the loaded share-partitions (of one group, or all
// when groupID is nil).
// REQUIRES: m.mu held.
func (m *Manager) partsLocked(groupID *string) []*sharePartition {
	out := make([]*sharePartition, 0, len(m.mu.parts))
	for k, sp := range m.mu.parts {
		if groupID == nil || k.Group == *groupID {
			out = append(out, sp)
		}
	}
	return out
}

func (m *Manager) groupParts(groupID string) []*sharePartition {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.partsLocked(&groupID)
}

// write makes recs durable, bounded by the Persister timeout and Close.
func (m *Manager) write(key sharepart.Key, leaderEpoch, stateEpoch int32, recs []sharepart.Record) error {
	ctx, cancel := m.opContext()
	defer cancel()
	return m.host.Persister().Write(ctx, key, leaderEpoch, stateEpoch, recs)
}

func (m *Manager) opContext() (context.Context, context.CancelFunc) {
	return context.WithTimeout(m.ctx, m.cfg.PersisterTimeout)
}

// release releases member's records in group's share-partitions here;
// wait says whether to wait for the writes (the caller answers only
// after). When the group has no session here any more, its
// share-partitions are unloaded as soon as they are idle (Kafka's
// onGroupEmpty).
func (m *Manager) release(groupID, member string, wait bool) []error {
	now := m.now()
	parts := m.groupParts(groupID)
	var writes []*pendingWrite
	for _, sp := range parts {
		w, err := sp.step(true, func(p *sharepart.Partition) []sharepart.Record { return p.ReleaseMember(now, member) })
		if err == nil && w != nil {
			writes = append(writes, w)
		}
	}
	m.mu.Lock()
	empty := m.mu.groupSessions[groupID] == 0
	m.mu.Unlock()
	if empty {
		for _, sp := range parts {
			sp.mu.Lock()
			sp.mu.retire = true
			idle := sp.idleLocked()
			sp.mu.Unlock()
			if idle {
				sp.drop(errUnloaded)
			}
		}
	}
	if !wait {
		return nil
	}
	var errs []error
	for _, w := range writes {
		if err := w.wait(); err != nil {
			errs = append(errs, err)
		}
	}
	return errs
}

// code maps an error of this package's making to its Kafka code: Kafka
// errors decided here (sessions, loading) as they are, the
// share-partition state machine's through group.ErrorCode (the one
// mapping of group errors), a fenced write as NOT_LEADER_OR_FOLLOWER
// (a newer leader has the share-partition), the rest through the node's.
func (m *Manager) code(err error) int16 {
	if err == nil {
		return 0
	}
	var ce codeError
	if errors.As(err, &ce) {
		return int16(ce)
	}
	var ke *kerr.Error
	if errors.As(err, &ke) {
		return ke.Code
	}
	if errors.Is(err, sharestate.ErrFencedLeaderEpoch) {
		return kerr.NotLeaderForPartition.Code
	}
	if c := group.ErrorCode(err); c != kerr.UnknownServerError.Code {
		return c
	}
	return m.host.Code(err)
}

// codeError is a Kafka code the node decided (its answer for a
// partition), carried as an error.
type codeError int16

func (c codeError) Error() string {
	return fmt.Sprintf("sharefetch: %s", kerr.ErrorForCode(int16(c)))
}

func (m *Manager) log() *zerolog.Logger { return m.host.Log() }

// groupConfig is group's settings, with the share-partition settings
// checked (sharepart panics on settings it cannot work with; the broker
// validates them, so a bad one here is logged and replaced by Kafka's
// defaults rather than taking the node down).
func (m *Manager) groupConfig(groupID string) GroupConfig {
	gc := m.host.GroupConfig(groupID)
	if err := gc.Partition.Validate(); err != nil {
		m.log().Error().Err(err).Str("group", groupID).Msg("invalid share group settings; using the defaults")
		gc.Partition = sharepart.DefaultConfig()
	}
	if gc.Partition.RecordLockDurationMs == 0 {
		gc.Partition.RecordLockDurationMs = sharepart.DefaultConfig().RecordLockDurationMs
	}
	return gc
}
