package sharepart

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/fjordlog/fjord/group"
)

// ErrNoState is Restore's answer when the records hold no state for the
// share-partition: none were given, the last word was a tombstone, or the
// start offset was never initialized (-1). The caller starts it with New.
var ErrNoState = errors.New("sharepart: no share-partition state")

// stored is the share coordinator's view of a share-partition while the
// records are replayed (Kafka's ShareGroupOffset).
type stored struct {
	snapshotEpoch, stateEpoch, leaderEpoch int32
	start                                  int64
	updates                                int32
	batches                                []StateBatch
}

// Restore rebuilds a share-partition from its __share_group_state records,
// given in log order from (at least) its latest ShareSnapshot on, for a new
// leader with epoch leaderEpoch. It replays them as Kafka's share
// coordinator does: a snapshot replaces the state, an update moves the
// start offset and merges its batches, a tombstone deletes the state; where
// batches overlap, the higher delivery count wins, then the later state
// (Kafka's PersisterStateBatchCombiner), so the order of updates does not
// matter.
//
// The result is safe to serve: records that were acquired are available
// (their locks went with the old leader) with the delivery counts their
// acquisition wrote, acknowledged and archived records stay so, offsets
// between batches are available and never delivered, and SPSO moves past
// any done records at the head. The returned ShareSnapshot, carrying the
// new leader epoch, must be written before the Partition serves; it also
// lets the caller prune the older records.
//
// Errors: ErrCorrupt (wrapped) for records that do not decode, belong to
// another key or describe impossible state; ErrNoState; and
// group.ErrNotLeaderOrFollower (wrapped) when a record was written under a
// leader epoch newer than leaderEpoch, meaning this broker is stale. It
// never panics on bad input (see FuzzRestore).
func Restore(key Key, cfg Config, leaderEpoch int32, now int64, recs []Record) (*Partition, []Record, error) {
	if err := cfg.Validate(); err != nil {
		panic(err)
	}
	var st *stored
	maxLeader := int32(math.MinInt32)
	for i, r := range recs {
		d, err := DecodeRecord(r)
		if err != nil {
			return nil, nil, fmt.Errorf("%w (restoring %s, record %d)", err, key, i)
		}
		if d.Key != key {
			return nil, nil, fmt.Errorf("%w (restoring %s, record %d)", corruptf("record for %s", d.Key), key, i)
		}
		switch {
		case d.Snapshot != nil:
			v := d.Snapshot
			if err := checkBatches(v.StartOffset, v.StateBatches); err != nil {
				return nil, nil, fmt.Errorf("%w (restoring %s, record %d)", err, key, i)
			}
			st = &stored{
				snapshotEpoch: v.SnapshotEpoch,
				stateEpoch:    v.StateEpoch,
				leaderEpoch:   v.LeaderEpoch,
				start:         v.StartOffset,
				batches:       prune(slices.Clone(v.StateBatches), v.StartOffset),
			}
			maxLeader = max(maxLeader, v.LeaderEpoch)
		case d.Update != nil:
			v := d.Update
			if err := checkBatches(v.StartOffset, v.StateBatches); err != nil {
				return nil, nil, fmt.Errorf("%w (restoring %s, record %d)", err, key, i)
			}
			if st == nil {
				// Kafka takes an update without a snapshot as the state.
				st = &stored{snapshotEpoch: v.SnapshotEpoch, leaderEpoch: v.LeaderEpoch, start: -1}
			} else {
				st.updates++
			}
			if v.StartOffset != -1 {
				st.start = v.StartOffset
			}
			if v.LeaderEpoch != -1 {
				st.leaderEpoch = v.LeaderEpoch
			}
			st.batches = prune(append(st.batches, v.StateBatches...), st.start)
			maxLeader = max(maxLeader, v.LeaderEpoch)
		default:
			st = nil
		}
	}
	if st == nil || st.start == -1 {
		return nil, nil, fmt.Errorf("%w: %s", ErrNoState, key)
	}
	if maxLeader > leaderEpoch {
		return nil, nil, fmt.Errorf("sharepart: %s: state written under leader epoch %d, newer than %d: %w",
			key, maxLeader, leaderEpoch, group.ErrNotLeaderOrFollower)
	}

	p := &Partition{
		key:           key,
		cfg:           cfg.withDefaults(),
		spso:          st.start,
		speo:          st.start,
		stateEpoch:    st.stateEpoch,
		leaderEpoch:   leaderEpoch,
		snapshotEpoch: st.snapshotEpoch,
		updates:       st.updates,
	}
	for _, b := range combine(st.batches) {
		if b.FirstOffset > p.speo {
			p.runs = append(p.runs, run{first: p.speo, last: b.FirstOffset - 1, state: Available, deadline: noDeadline})
		}
		r := run{first: b.FirstOffset, last: b.LastOffset, state: b.DeliveryState, count: b.DeliveryCount, deadline: noDeadline}
		p.runs = append(p.runs, r)
		p.account(r, +1)
		p.speo = b.LastOffset + 1
	}
	p.normalize()
	p.advanceStart()
	p.startMoved = false
	return p, []Record{p.snapshot(now)}, nil
}

// checkBatches rejects what no share coordinator writes.
func checkBatches(start int64, bs []StateBatch) error {
	if start < -1 {
		return corruptf("start offset %d", start)
	}
	for _, b := range bs {
		switch {
		case b.FirstOffset < 0 || b.FirstOffset > b.LastOffset || b.LastOffset == math.MaxInt64:
			return corruptf("state batch [%d, %d]", b.FirstOffset, b.LastOffset)
		case b.DeliveryState != Available && b.DeliveryState != Acquired &&
			b.DeliveryState != Acknowledged && b.DeliveryState != Archived:
			return corruptf("state batch [%d, %d]: delivery state %d", b.FirstOffset, b.LastOffset, b.DeliveryState)
		case b.DeliveryCount < 0:
			return corruptf("state batch [%d, %d]: delivery count %d", b.FirstOffset, b.LastOffset, b.DeliveryCount)
		}
	}
	return nil
}

// prune drops the parts of bs below start, in place.
func prune(bs []StateBatch, start int64) []StateBatch {
	if start < 0 {
		return bs
	}
	out := bs[:0]
	for _, b := range bs {
		if b.LastOffset < start {
			continue
		}
		b.FirstOffset = max(b.FirstOffset, start)
		out = append(out, b)
	}
	return out
}

// combine merges possibly overlapping batches into sorted, disjoint ones:
// each offset takes the greatest (delivery count, then state) any batch
// gives it. Acquired, which no Kafka writes but which Kafka reads, counts
// as available. Offsets left available with count 0 are left out.
func combine(bs []StateBatch) []StateBatch {
	if len(bs) == 0 {
		return nil
	}
	// Cut the offsets into elementary intervals at every batch boundary.
	points := make([]int64, 0, 2*len(bs))
	for _, b := range bs {
		points = append(points, b.FirstOffset, b.LastOffset+1)
	}
	slices.Sort(points)
	points = slices.Compact(points)
	type value struct {
		count int16
		state State
	}
	vals := make([]value, len(points)-1)
	for _, b := range bs {
		v := value{b.DeliveryCount, b.DeliveryState}
		if v.state == Acquired {
			v.state = Available
		}
		i, _ := slices.BinarySearch(points, b.FirstOffset)
		for ; points[i] <= b.LastOffset; i++ {
			if c := cmp.Or(cmp.Compare(v.count, vals[i].count), cmp.Compare(v.state, vals[i].state)); c > 0 {
				vals[i] = v
			}
		}
	}
	var out []StateBatch
	for i, v := range vals {
		if v.state == Available && v.count == 0 {
			continue
		}
		first, last := points[i], points[i+1]-1
		if k := len(out); k > 0 && out[k-1].LastOffset+1 == first &&
			out[k-1].DeliveryState == v.state && out[k-1].DeliveryCount == v.count {
			out[k-1].LastOffset = last
			continue
		}
		out = append(out, StateBatch{first, last, v.state, v.count})
	}
	return out
}
