package sharecoord

import (
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/fjordlog/fjord/broker/sharestate"
	"github.com/fjordlog/fjord/group/sharepart"
)

// table is the share coordinator's state of one __share_group_state
// partition: Kafka's ShareCoordinatorShard with its
// ShareCoordinatorOffsetsManager, as a plain struct. Operations
// (initialize, write, read, remove, coldSnapshots) look at the state and
// return the records that carry out their decision, changing nothing;
// replay applies a record, whether the coordinator has just appended it or
// a load reads it back, so the table is always the replay of its
// partition's log and two replicas that replay the same log agree.
//
// Time comes in as now (Unix ms). No goroutines, locks, clocks or I/O:
// the caller (part, in coordinator.go) holds the lock, appends the records
// and replays them in log order.
//
// Invariants (checkInvariants, run by the tests after every step):
//   - every entry keeps its own (see entry);
//   - marks are in strictly increasing offset order, all at or above
//     committed;
//   - needs holds only offsets below committed.
type table struct {
	// updatesPerSnapshot is Config.SnapshotUpdateRecordsPerSnapshot.
	updatesPerSnapshot int32
	keys               map[sharepart.Key]*entry

	// What pruning needs, over committed records only: a record above the
	// high watermark may yet be cut by a failover, and must not let older
	// records go. needs[k] is the offset of k's latest committed snapshot
	// (or of its first record, for a key that began with an update), the
	// oldest record k still needs; marks are the replayed records not yet
	// known committed, and committed the offset below which all are.
	needs     map[sharepart.Key]int64
	marks     []mark
	committed int64
}

// mark is a replayed record that matters to pruning.
type mark struct {
	offset int64
	key    sharepart.Key
	kind   markKind
}

type markKind int8

const (
	markSnapshot markKind = iota
	markUpdate
	markTombstone
)

// State is one share-partition's durable state as the coordinator holds it
// (Kafka's ShareGroupOffset): the merged result of its latest snapshot and
// the updates after it.
type State struct {
	// SnapshotEpoch counts the key's ShareSnapshot records (0 for the
	// first); updates carry the epoch of the snapshot they follow.
	SnapshotEpoch int32
	// StateEpoch is raised by each InitializeShareGroupState that resets
	// the share-partition (AlterShareGroupOffsets); a write with an older
	// one is fenced.
	StateEpoch int32
	// LeaderEpoch is the leader epoch of the topic-partition's leader that
	// last read the state (0 after an initialize, as Kafka's).
	LeaderEpoch int32
	// StartOffset is the share-partition start offset; -1 when it was
	// initialized without one (the leader resolves share.auto.offset.reset).
	StartOffset int64
	// DeliveryCompleteCount (KIP-1226) is the last one written; -1 unknown.
	DeliveryCompleteCount int32
	// Batches are the offsets at or above StartOffset whose durable form is
	// not "available, never delivered": sorted, disjoint, neighbours that
	// agree joined (sharepart.Merge). Shared with the table: read only.
	Batches []sharepart.StateBatch
}

// entry is one key's state.
//
// Invariants:
//   - state.Batches is sorted, disjoint, normalized as sharepart.Merge
//     leaves it, and at or above state.StartOffset when that is >= 0;
//   - fenceLeader >= state.LeaderEpoch and fenceState >= state.StateEpoch;
//   - 0 <= updates.
type entry struct {
	state State
	// createTs and writeTs are the Unix ms of the latest snapshot's
	// creation and of its latest write (Kafka's ShareSnapshotValue
	// timestamps; a cold snapshot rewrites only writeTs).
	createTs, writeTs int64
	// fenceLeader and fenceState are the highest leader and state epochs
	// any record of the key carried since its last tombstone (Kafka's
	// leaderEpochMap and stateEpochMap): what fences older callers.
	fenceLeader, fenceState int32
	// updates counts the ShareUpdate records since the latest snapshot.
	updates int32
}

// Errors of the operations, each with the Kafka code the broker answers
// (broker/errors.go maps them; the Persister classifies by them).
var (
	// ErrNotCoordinator: this node does not lead the key's state
	// partition, or no longer does (NOT_COORDINATOR).
	ErrNotCoordinator = errors.New("sharecoord: not the share coordinator of this share-partition")
	// ErrLoading: this node leads the key's state partition but has not
	// read its log back yet (COORDINATOR_LOAD_IN_PROGRESS).
	ErrLoading = errors.New("sharecoord: share-group state partition is loading")
	// ErrUninitialized: a read or write of a share-partition that has no
	// state (INVALID_REQUEST, as Kafka 4.2's coordinator answers it). It
	// is a sharestate.ErrNoState, which is what a Persister reports.
	ErrUninitialized = fmt.Errorf("sharecoord: share-partition state is not initialized: %w", sharestate.ErrNoState)
	// ErrFencedStateEpoch: the caller's state epoch is older than the
	// stored one: the share-partition was reset since (FENCED_STATE_EPOCH).
	ErrFencedStateEpoch = errors.New("sharecoord: fenced state epoch")
	// ErrInvalidRequest: a negative partition, or state batches no
	// share-partition can have (INVALID_REQUEST).
	ErrInvalidRequest = errors.New("sharecoord: invalid share-group state request")
	// ErrUnknownTopicOrPartition: the share-partition's topic or partition
	// is not in this node's metadata image (UNKNOWN_TOPIC_OR_PARTITION).
	ErrUnknownTopicOrPartition = errors.New("sharecoord: unknown topic or partition")
)

func newTable(updatesPerSnapshot int32) *table {
	return &table{updatesPerSnapshot: updatesPerSnapshot, keys: map[sharepart.Key]*entry{}, needs: map[sharepart.Key]int64{}}
}

// WriteState is what a share-partition leader writes (Kafka's
// WriteShareGroupState partition data). -1 in LeaderEpoch, StartOffset
// or DeliveryCompleteCount means "not given"; StateEpoch is always
// checked against the stored one (see write).
type WriteState struct {
	LeaderEpoch, StateEpoch int32
	StartOffset             int64
	DeliveryCompleteCount   int32
	Batches                 []sharepart.StateBatch
}

// initialize returns the ShareSnapshot that starts k afresh (Kafka's
// initializeState): state epoch stateEpoch, start offset start (-1: none
// yet), nothing in flight, leader epoch 0. A state epoch older than one
// stored is fenced; an existing state is replaced, its snapshot epoch
// continued, and (unlike Kafka, which writes 0 and keeps the fence in
// memory only) the highest leader epoch seen carried over: once the
// prune lets the records before this snapshot go, it is all a load has.
func (t *table) initialize(k sharepart.Key, stateEpoch int32, start int64, now int64) (sharepart.Record, error) {
	if k.Partition < 0 {
		return sharepart.Record{}, fmt.Errorf("%w: %s: negative partition", ErrInvalidRequest, k)
	}
	if start < -1 {
		return sharepart.Record{}, fmt.Errorf("%w: %s: start offset %d", ErrInvalidRequest, k, start)
	}
	snapEpoch, leader := int32(0), int32(0)
	if e := t.keys[k]; e != nil {
		if stateEpoch != -1 && e.fenceState > stateEpoch {
			return sharepart.Record{}, fmt.Errorf("%w: %s: initialize at state epoch %d, stored %d", ErrFencedStateEpoch, k, stateEpoch, e.fenceState)
		}
		snapEpoch, leader = e.state.SnapshotEpoch+1, max(0, e.fenceLeader)
	}
	// Kafka: no start offset, no lag to count yet; a given one counts
	// from 0.
	dcc := int32(0)
	if start == -1 {
		dcc = -1
	}
	return sharepart.EncodeSnapshot(k, &sharepart.SnapshotValue{
		SnapshotEpoch: snapEpoch, StateEpoch: stateEpoch, LeaderEpoch: leader, StartOffset: start,
		CreateTimestamp: now, WriteTimestamp: now, DeliveryCompleteCount: dcc,
	}), nil
}

// write returns the record that merges w into k's state (Kafka's
// writeState): fenced when w's leader epoch is older than one stored or
// its state epoch is not the stored one, refused for a k without state,
// and for batches no share-partition can have. As in Kafka a write does
// not record its leader epoch (a leader's read does), unless newLeader.
//
// Unlike Kafka, which fences only an older state epoch (-1 included: it
// is older than any), a newer one is fenced too: a leader only ever
// writes at the state epoch it loaded, and a stored epoch below it means
// the state was deleted and initialized again (a recreated group's
// epochs start again), which that leader's writes must not merge into.
func (t *table) write(k sharepart.Key, w WriteState, newLeader bool, now int64) (sharepart.Record, error) {
	if k.Partition < 0 {
		return sharepart.Record{}, fmt.Errorf("%w: %s: negative partition", ErrInvalidRequest, k)
	}
	e := t.keys[k]
	switch {
	case e == nil:
		return sharepart.Record{}, fmt.Errorf("%w: write to %s", ErrUninitialized, k)
	case w.LeaderEpoch != -1 && e.fenceLeader > w.LeaderEpoch:
		return sharepart.Record{}, fmt.Errorf("%s: write at leader epoch %d, stored %d: %w", k, w.LeaderEpoch, e.fenceLeader, sharestate.ErrFencedLeaderEpoch)
	case w.StateEpoch != e.state.StateEpoch:
		return sharepart.Record{}, fmt.Errorf("%w: %s: write at state epoch %d, stored %d", ErrFencedStateEpoch, k, w.StateEpoch, e.state.StateEpoch)
	}
	if err := sharepart.CheckBatches(w.StartOffset, w.Batches); err != nil {
		return sharepart.Record{}, fmt.Errorf("%w: %s: %v", ErrInvalidRequest, k, err)
	}
	return t.next(k, e, w, newLeader, now), nil
}

// read returns k's state for a leader of epoch leaderEpoch (Kafka's
// readStateAndMaybeUpdateLeaderEpoch): fenced when an older leader asks,
// refused for a k without state. A leader newer than the stored one is
// recorded: the returned record (nil when none is needed) must be durable
// before the state is handed over, and from then on the older leader's
// writes are fenced. The state returned shares the table's batches.
func (t *table) read(k sharepart.Key, leaderEpoch int32, now int64) (State, *sharepart.Record, error) {
	if k.Partition < 0 {
		return State{}, nil, fmt.Errorf("%w: %s: negative partition", ErrInvalidRequest, k)
	}
	e := t.keys[k]
	switch {
	case e == nil:
		return State{}, nil, fmt.Errorf("%w: read of %s", ErrUninitialized, k)
	case e.fenceLeader > leaderEpoch:
		return State{}, nil, fmt.Errorf("%s: read at leader epoch %d, stored %d: %w", k, leaderEpoch, e.fenceLeader, sharestate.ErrFencedLeaderEpoch)
	}
	st := e.state
	if leaderEpoch == -1 || e.fenceLeader == leaderEpoch {
		return st, nil, nil
	}
	st.LeaderEpoch = leaderEpoch
	r := t.next(k, e, WriteState{LeaderEpoch: leaderEpoch, StateEpoch: e.state.StateEpoch, StartOffset: e.state.StartOffset,
		DeliveryCompleteCount: e.state.DeliveryCompleteCount}, true, now)
	return st, &r, nil
}

// summary is k's state without its batches (Kafka's readStateSummary);
// false when k has none.
func (t *table) summary(k sharepart.Key) (State, bool) {
	e := t.keys[k]
	if e == nil {
		return State{}, false
	}
	st := e.state
	st.Batches = nil
	return st, true
}

// remove returns k's tombstone (Kafka's deleteState), or nil when k has
// no state: deleting nothing succeeds and writes nothing.
func (t *table) remove(k sharepart.Key) *sharepart.Record {
	if t.keys[k] == nil {
		return nil
	}
	r := sharepart.Tombstone(k)
	return &r
}

// next is the record that writes w over e (Kafka's
// generateShareStateRecord): a ShareSnapshot of the merged state once e
// has had updatesPerSnapshot updates, else a ShareUpdate of w's batches.
// The leader epoch is e's unless newLeader (a read by a newer leader); a
// snapshot carries the highest one seen, which the records it lets the
// prune remove may have held. The state epoch never changes here: only
// initialize sets it.
func (t *table) next(k sharepart.Key, e *entry, w WriteState, newLeader bool, now int64) sharepart.Record {
	leader := e.state.LeaderEpoch
	if newLeader && w.LeaderEpoch != -1 {
		leader = w.LeaderEpoch
	}
	if e.updates >= t.updatesPerSnapshot {
		start := w.StartOffset
		if start == -1 {
			start = e.state.StartOffset
		}
		return sharepart.EncodeSnapshot(k, &sharepart.SnapshotValue{
			SnapshotEpoch: e.state.SnapshotEpoch + 1, StateEpoch: e.state.StateEpoch, LeaderEpoch: max(leader, e.fenceLeader),
			StartOffset: start, CreateTimestamp: now, WriteTimestamp: now,
			DeliveryCompleteCount: w.DeliveryCompleteCount,
			StateBatches:          sharepart.Merge(start, e.state.Batches, w.Batches),
		})
	}
	return sharepart.EncodeUpdate(k, &sharepart.UpdateValue{
		SnapshotEpoch: e.state.SnapshotEpoch, LeaderEpoch: leader, StartOffset: w.StartOffset,
		DeliveryCompleteCount: w.DeliveryCompleteCount,
		StateBatches:          sharepart.Merge(w.StartOffset, nil, w.Batches),
	})
}

// coldSnapshots returns a fresh snapshot of every key whose latest
// snapshot was written intervalMs or more before now (Kafka's
// snapshotColdPartitions), in key order; none when every key's latest
// snapshot is already such a copy (create and write times differ): the
// partition is quiet, and copying would only churn. A copy moves what the
// key needs up to the log's end, so a quiet key does not hold the prune
// back.
func (t *table) coldSnapshots(now, intervalMs int64) []sharepart.Record {
	quiet := true
	for _, e := range t.keys {
		if e.createTs == e.writeTs {
			quiet = false
			break
		}
	}
	if quiet {
		return nil
	}
	var out []sharepart.Record
	for _, k := range t.sortedKeys() {
		e := t.keys[k]
		if now-e.writeTs < intervalMs {
			continue
		}
		st := e.state
		out = append(out, sharepart.EncodeSnapshot(k, &sharepart.SnapshotValue{
			SnapshotEpoch: st.SnapshotEpoch + 1, StateEpoch: st.StateEpoch, LeaderEpoch: max(st.LeaderEpoch, e.fenceLeader),
			StartOffset: st.StartOffset, CreateTimestamp: e.createTs, WriteTimestamp: now,
			DeliveryCompleteCount: st.DeliveryCompleteCount, StateBatches: st.Batches,
		}))
	}
	return out
}

// topicsDeleted returns the tombstones of every key of a topic in ids, in
// key order (Kafka's maybeCleanupShareState).
func (t *table) topicsDeleted(ids map[[16]byte]bool) []sharepart.Record {
	var out []sharepart.Record
	for _, k := range t.sortedKeys() {
		if ids[k.TopicID] {
			out = append(out, sharepart.Tombstone(k))
		}
	}
	return out
}

func (t *table) sortedKeys() []sharepart.Key {
	return slices.SortedFunc(maps.Keys(t.keys), func(a, b sharepart.Key) int {
		if a.Group != b.Group {
			if a.Group < b.Group {
				return -1
			}
			return 1
		}
		if c := slices.Compare(a.TopicID[:], b.TopicID[:]); c != 0 {
			return c
		}
		return int(a.Partition) - int(b.Partition)
	})
}

// replay applies the record at offset of the partition's log (Kafka's
// replay): a snapshot replaces its key's state, an update merges into it
// (or, for a key without state, becomes it, as Kafka takes it), a
// tombstone deletes it. A record that does not decode, or describes state
// no share-partition can have, changes nothing and is reported (ErrCorrupt
// wrapped): the load skips it.
func (t *table) replay(offset int64, r sharepart.Record) error {
	d, err := sharepart.DecodeRecord(r)
	if err != nil {
		return err
	}
	k := d.Key
	e := t.keys[k]
	switch {
	case d.Snapshot != nil:
		v := d.Snapshot
		if err := sharepart.CheckBatches(v.StartOffset, v.StateBatches); err != nil {
			return fmt.Errorf("%w (snapshot of %s at offset %d)", err, k, offset)
		}
		ne := &entry{
			state: State{SnapshotEpoch: v.SnapshotEpoch, StateEpoch: v.StateEpoch, LeaderEpoch: v.LeaderEpoch,
				StartOffset: v.StartOffset, DeliveryCompleteCount: v.DeliveryCompleteCount,
				Batches: sharepart.Merge(v.StartOffset, nil, v.StateBatches)},
			createTs: v.CreateTimestamp, writeTs: v.WriteTimestamp,
			fenceLeader: v.LeaderEpoch, fenceState: v.StateEpoch,
		}
		if e != nil {
			ne.fenceLeader, ne.fenceState = max(ne.fenceLeader, e.fenceLeader), max(ne.fenceState, e.fenceState)
		}
		t.keys[k] = ne
		t.mark(offset, k, markSnapshot)
	case d.Update != nil:
		v := d.Update
		if err := sharepart.CheckBatches(v.StartOffset, v.StateBatches); err != nil {
			return fmt.Errorf("%w (update of %s at offset %d)", err, k, offset)
		}
		if e == nil {
			// An update with no snapshot before it: Kafka takes it as the
			// state (state epoch 0); no coordinator writes one.
			t.keys[k] = &entry{
				state: State{SnapshotEpoch: v.SnapshotEpoch, LeaderEpoch: v.LeaderEpoch, StartOffset: v.StartOffset,
					DeliveryCompleteCount: v.DeliveryCompleteCount, Batches: sharepart.Merge(v.StartOffset, nil, v.StateBatches)},
				fenceLeader: v.LeaderEpoch, updates: 1,
			}
			t.mark(offset, k, markUpdate)
			return nil
		}
		st := &e.state
		if v.StartOffset != -1 {
			st.StartOffset = v.StartOffset
		}
		if v.LeaderEpoch != -1 {
			st.LeaderEpoch = v.LeaderEpoch
		}
		st.DeliveryCompleteCount = v.DeliveryCompleteCount
		st.Batches = sharepart.Merge(st.StartOffset, st.Batches, v.StateBatches)
		e.fenceLeader = max(e.fenceLeader, v.LeaderEpoch, st.LeaderEpoch)
		e.updates++
		t.mark(offset, k, markUpdate)
	default:
		delete(t.keys, k)
		t.mark(offset, k, markTombstone)
	}
	return nil
}

func (t *table) mark(offset int64, k sharepart.Key, kind markKind) {
	t.marks = append(t.marks, mark{offset, k, kind})
}

// commit takes note that every record below hw is committed (hw is the
// partition's high watermark; it never goes back while this node leads).
func (t *table) commit(hw int64) {
	i := 0
	for ; i < len(t.marks) && t.marks[i].offset < hw; i++ {
		m := t.marks[i]
		switch m.kind {
		case markSnapshot:
			t.needs[m.key] = m.offset
		case markUpdate:
			if _, ok := t.needs[m.key]; !ok {
				t.needs[m.key] = m.offset
			}
		case markTombstone:
			// Nothing after a deletion needs what came before it.
			delete(t.needs, m.key)
		}
	}
	t.marks = slices.Delete(t.marks, 0, i)
	t.committed = max(t.committed, hw)
}

// pruneBound is the offset below which no record is needed any more, given
// the high watermark hw (Kafka's lastRedundantOffset): the oldest record a
// live key still needs, or hw itself when none does. Never above hw.
func (t *table) pruneBound(hw int64) int64 {
	t.commit(hw)
	bound := hw
	for _, off := range t.needs {
		bound = min(bound, off)
	}
	return bound
}
