package sharecoord

import (
	"context"
	"fmt"
	"slices"

	"github.com/fjordlog/fjord/broker/sharestate"
	"github.com/fjordlog/fjord/group/sharepart"
)

// The operations on one share-partition's state, as this node's
// coordinator serves them (the five RPCs' handlers and the local
// Persister call them). Each blocks until its outcome is committed, at
// most Config.WriteTimeoutMs, and fails with ErrNotCoordinator or
// ErrLoading when this node cannot serve the key now; the other errors are
// the table's (see table.go), and sharestate.ErrNotAvailable when the
// state partition's replicas did not commit in time.

// known reports whether k's topic and partition are in the node's
// metadata image; Kafka refuses state for a partition it does not know.
func (c *Coordinator) known(k sharepart.Key) error {
	if k.Partition < c.host.TopicPartitions(k.TopicID) {
		return nil
	}
	return fmt.Errorf("%w: %s", ErrUnknownTopicOrPartition, k)
}

// Initialize starts k's state afresh at stateEpoch and startOffset (-1:
// none yet, the leader resolves share.auto.offset.reset), replacing any
// (Kafka's InitializeShareGroupState, which its group coordinator sends
// for a newly assigned share-partition and for AlterShareGroupOffsets).
func (c *Coordinator) Initialize(ctx context.Context, k sharepart.Key, stateEpoch int32, startOffset int64) error {
	known := c.known(k)
	return c.do(ctx, k, func(t *table, now int64) ([]sharepart.Record, error) {
		r, err := t.initialize(k, stateEpoch, startOffset, now)
		if err == nil {
			err = known
		}
		if err != nil {
			return nil, err
		}
		return []sharepart.Record{r}, nil
	})
}

// Write merges w into k's state (Kafka's WriteShareGroupState).
func (c *Coordinator) Write(ctx context.Context, k sharepart.Key, w WriteState) error {
	known := c.known(k)
	return c.do(ctx, k, func(t *table, now int64) ([]sharepart.Record, error) {
		r, err := t.write(k, w, false, now)
		if err == nil {
			err = known
		}
		if err != nil {
			return nil, err
		}
		return []sharepart.Record{r}, nil
	})
}

// Read returns k's state to the leader of epoch leaderEpoch, recording
// that leader first when it is newer than the stored one (Kafka's
// ReadShareGroupState). The caller owns the returned batches.
func (c *Coordinator) Read(ctx context.Context, k sharepart.Key, leaderEpoch int32) (State, error) {
	known := c.known(k)
	var out State
	err := c.do(ctx, k, func(t *table, now int64) ([]sharepart.Record, error) {
		st, r, err := t.read(k, leaderEpoch, now)
		if err == nil {
			err = known
		}
		if err != nil {
			return nil, err
		}
		out = st
		out.Batches = slices.Clone(st.Batches)
		if r == nil {
			return nil, nil
		}
		return []sharepart.Record{*r}, nil
	})
	return out, err
}

// Summary returns k's state without its batches (Kafka's
// ReadShareGroupStateSummary); false when k has none.
func (c *Coordinator) Summary(ctx context.Context, k sharepart.Key) (State, bool, error) {
	if k.Partition < 0 {
		return State{}, false, fmt.Errorf("%w: %s: negative partition", ErrInvalidRequest, k)
	}
	if err := c.known(k); err != nil {
		return State{}, false, err
	}
	var out State
	var ok bool
	err := c.do(ctx, k, func(t *table, _ int64) ([]sharepart.Record, error) {
		out, ok = t.summary(k)
		return nil, nil
	})
	return out, ok, err
}

// Delete removes k's state (Kafka's DeleteShareGroupState); deleting none
// succeeds.
func (c *Coordinator) Delete(ctx context.Context, k sharepart.Key) error {
	if k.Partition < 0 {
		return fmt.Errorf("%w: %s: negative partition", ErrInvalidRequest, k)
	}
	if err := c.known(k); err != nil {
		return err
	}
	return c.do(ctx, k, func(t *table, _ int64) ([]sharepart.Record, error) {
		if r := t.remove(k); r != nil {
			return []sharepart.Record{*r}, nil
		}
		return nil, nil
	})
}

// writeSnapshot writes a leader's ShareSnapshot v of k, at leader epoch
// leaderEpoch, in one step. It starts the state afresh in two cases
// only: k has no state and v is a sharepart.New's first snapshot
// (snapshot epoch 0: the leader's Read found none), or k was initialized
// without a start offset and v is at its state epoch (the leader
// resolved share.auto.offset.reset); Kafka's group coordinator sends
// InitializeShareGroupState for both. Both records of a start, the
// initialization and the write that records the leader epoch and
// batches, go into one batch: the log never holds one without the other.
// Any other snapshot merges into the state like any write (a leader's
// snapshot holds at least what it wrote before), fenced unless at the
// stored state epoch; and for a k without state it is ErrUninitialized:
// a leader that loaded state since deleted must not bring it back.
func (c *Coordinator) writeSnapshot(ctx context.Context, k sharepart.Key, leaderEpoch int32, v *sharepart.SnapshotValue) error {
	known := c.known(k)
	w := WriteState{LeaderEpoch: leaderEpoch, StateEpoch: v.StateEpoch, StartOffset: v.StartOffset,
		DeliveryCompleteCount: v.DeliveryCompleteCount, Batches: v.StateBatches}
	return c.do(ctx, k, func(t *table, now int64) ([]sharepart.Record, error) {
		if err := known; err != nil {
			return nil, err
		}
		e := t.keys[k]
		switch {
		case e == nil && v.SnapshotEpoch != 0:
			return nil, fmt.Errorf("%w: snapshot %d of %s (deleted since its leader loaded it?)", ErrUninitialized, v.SnapshotEpoch, k)
		case e != nil && e.state.StartOffset != -1:
			r, err := t.write(k, w, false, now)
			if err != nil {
				return nil, err
			}
			return []sharepart.Record{r}, nil
		case e != nil && v.StateEpoch != e.state.StateEpoch:
			return nil, fmt.Errorf("%w: %s: snapshot at state epoch %d, stored %d", ErrFencedStateEpoch, k, v.StateEpoch, e.state.StateEpoch)
		case e != nil && leaderEpoch != -1 && e.fenceLeader > leaderEpoch:
			return nil, fmt.Errorf("%s: snapshot at leader epoch %d, stored %d: %w", k, leaderEpoch, e.fenceLeader, sharestate.ErrFencedLeaderEpoch)
		}
		init, err := t.initialize(k, v.StateEpoch, v.StartOffset, now)
		if err != nil {
			return nil, err
		}
		// The write is decided on the state the initialization leaves, and
		// records the leader epoch as a read would: the leader that starts
		// a share-partition fences older ones from then on.
		s := t.scratch(k)
		if err := s.replay(0, init); err != nil {
			return nil, err
		}
		r, err := s.write(k, w, true, now)
		if err != nil {
			return nil, err
		}
		return []sharepart.Record{init, r}, nil
	})
}

// scratch is a table holding a copy of k's entry only, to decide a second
// record on what the first leaves.
func (t *table) scratch(k sharepart.Key) *table {
	s := newTable(t.updatesPerSnapshot)
	if e := t.keys[k]; e != nil {
		ce := *e
		s.keys[k] = &ce
	}
	return s
}
