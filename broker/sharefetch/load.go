package sharefetch

import (
	"errors"
	"fmt"

	"github.com/fjordlog/fjord/broker/sharestate"
	"github.com/fjordlog/fjord/group/sharepart"
)

// load brings sp from loading to serving: it reads the durable state with
// sp's leader epoch (which fences older leaders' writes), restores it or,
// when there is none or none with a start offset, starts at the offset
// share.auto.offset.reset gives (at the state epoch read, if any), and
// writes the first snapshot before anything is served. Any failure
// drops sp; the next fetch tries again.
func (m *Manager) load(sp *sharePartition) {
	key := sp.key
	ctx, cancel := m.opContext()
	defer cancel()
	gc := m.groupConfig(key.Group)

	recs, err := m.host.Persister().Read(ctx, key, sp.leaderEpoch)
	now := m.now()
	var (
		p   *sharepart.Partition
		out []sharepart.Record
	)
	if err == nil {
		p, out, err = sharepart.Restore(key, gc.Partition, sp.leaderEpoch, now, recs)
	}
	if errors.Is(err, sharestate.ErrNoState) || errors.Is(err, sharepart.ErrNoState) {
		var start int64
		start, err = initialOffset(sp.rep, gc.AutoOffsetReset, now)
		if err == nil {
			// State without a start offset (AlterShareGroupOffsets gave
			// none) keeps its state epoch; none at all starts at 0.
			init := sharepart.Init{StartOffset: start, StateEpoch: stateEpochOf(recs), LeaderEpoch: sp.leaderEpoch}
			p, out = sharepart.New(key, gc.Partition, init, now)
		}
	}
	if err == nil {
		err = m.host.Persister().Write(ctx, key, sp.leaderEpoch, p.StateEpoch(), out)
	}
	if err != nil {
		err = fmt.Errorf("sharefetch: loading %s at leader epoch %d: %w", key, sp.leaderEpoch, err)
		m.log().Warn().Err(err).Str("group", key.Group).Int32("partition", key.Partition).Msg("share-partition load failed")
		sp.drop(err)
		return
	}
	start := p.StartOffset() // p is shared once it serves
	if sp.serve(p) {
		m.log().Debug().Str("group", key.Group).Int32("partition", key.Partition).Int32("leader_epoch", sp.leaderEpoch).
			Int64("start_offset", start).Msg("share-partition loaded")
	}
}

// stateEpochOf is the state epoch of the latest snapshot in recs (what
// Read returned), 0 when there is none. Restore found no start offset in
// them; the leader starts one at this epoch, the only one the share
// coordinator accepts.
func stateEpochOf(recs []sharepart.Record) int32 {
	var epoch int32
	for _, r := range recs {
		if d, err := sharepart.DecodeRecord(r); err == nil && d.Snapshot != nil {
			epoch = d.Snapshot.StateEpoch
		}
	}
	return epoch
}

// initialOffset resolves share.auto.offset.reset against the log: latest
// is the high watermark, earliest the log start, by_duration the first
// record no older than the duration (the high watermark if none is).
func initialOffset(rep Replica, r sharepart.AutoOffsetReset, now int64) (int64, error) {
	logStart, hw := rep.Offsets()
	switch r.Kind {
	case sharepart.ResetEarliest:
		return logStart, nil
	case sharepart.ResetByDuration:
		off, found, err := rep.ListOffset(r.Timestamp(now))
		if err != nil {
			return 0, fmt.Errorf("share.auto.offset.reset %s: %w", r, err)
		}
		if found {
			return max(off, logStart), nil
		}
	}
	return hw, nil
}
