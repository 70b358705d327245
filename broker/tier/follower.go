package tier

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/fjordlog/fjord/controller"
	"github.com/fjordlog/fjord/storage"
	"github.com/fjordlog/fjord/storage/remote"
)

// KIP-405's follower path. A replica whose log ends below its leader's
// local log start (a new replica added by reassignment, a disk replaced,
// a follower left far behind) cannot fetch what the leader deleted
// locally, and must not: the copy in the store holds it. The leader
// answers its fetch OFFSET_MOVED_TO_TIERED_STORAGE; the follower asks the
// leader for its earliest local offset (ListOffsets -4), then restarts
// its log at the end of the copied segment holding the offset before it,
// with the state of everything below taken from the copy instead of the
// records: the leader epochs (from the segment metadata in the image) and
// the producer snapshot (the segment's .snapshot object, taken at its
// end). It then fetches on from there, all of it local to the leader.
// Nothing below the restart is ever read back into the follower's log,
// so it never holds the whole history; consumers of it see the remote log
// start as they do on the leader.
//
// Why the segment's end and not the leader's local start itself: the
// snapshot object is taken at the segment's end, so the restart offset
// is exactly where the producer state is known (Kafka's
// buildRemoteLogAuxState restarts at the same place). The segment holds
// the offset before the leader's local start, so its end is at or above
// that start, and it was copied below the leader's high watermark: the
// leader has the records from there locally.

// ErrNotCopied is a restart the image cannot serve yet: no COPY_FINISHED
// segment holds the offset before the leader's local log start (this
// broker's image lags the leader's, or the leader's start is not where a
// copy ends). The follower tries again later.
var ErrNotCopied = errors.New("tier: the leader's local log start is not at a copied segment")

// Restart is where and with what a follower's log restarts
// (storage.Log.RestartFromCopy).
type Restart struct {
	Offset   int64                        // the copied segment's end plus one
	Epochs   []storage.EpochStart         // leader epochs of the copied offsets below Offset
	Snapshot []byte                       // the producer snapshot at Offset; nil: the copy has none
	Segment  controller.RemoteSegmentMeta // the copied segment ending at Offset-1
}

// PlanRestart picks, from a partition's image entries, the copied segment
// a follower restarts after for a leader whose local log starts at
// leaderLocalStart, and the leader epochs of the copied offsets up to its
// end: for each epoch the lowest start any COPY_FINISHED segment up to it
// lists (a segment lists the epoch in force at its base as starting
// there), kept only while epochs and starts both increase.
func PlanRestart(segs []controller.RemoteSegmentMeta, leaderLocalStart int64) (controller.RemoteSegmentMeta, []storage.EpochStart, error) {
	seg, ok := SegmentFor(segs, leaderLocalStart-1)
	if !ok || leaderLocalStart <= 0 {
		return controller.RemoteSegmentMeta{}, nil, fmt.Errorf("%w: no copy holds offset %d", ErrNotCopied, leaderLocalStart-1)
	}
	starts := map[int32]int64{}
	for _, s := range segs {
		if s.State != controller.RemoteCopyFinished || s.BaseOffset > seg.EndOffset {
			continue
		}
		for _, e := range s.LeaderEpochs {
			if e.StartOffset > seg.EndOffset {
				continue
			}
			if cur, ok := starts[e.Epoch]; !ok || e.StartOffset < cur {
				starts[e.Epoch] = e.StartOffset
			}
		}
	}
	var epochs []storage.EpochStart
	for _, ep := range slices.Sorted(maps.Keys(starts)) {
		if n := len(epochs); n > 0 && starts[ep] <= epochs[n-1].Start {
			continue // an older epoch's copy said otherwise: keep the log's order
		}
		epochs = append(epochs, storage.EpochStart{Epoch: ep, Start: starts[ep]})
	}
	return seg, epochs, nil
}

// Restart plans a follower's restart (PlanRestart) and reads the
// segment's producer snapshot from the store. A snapshot the copy was
// made without gives a nil Snapshot; one that is missing though uploaded,
// or damaged (ErrDamaged), or any other store failure is returned, and
// the follower tries again later.
func (r *Reader) Restart(ctx context.Context, ref Ref, segs []controller.RemoteSegmentMeta, leaderLocalStart int64) (Restart, error) {
	seg, epochs, err := PlanRestart(segs, leaderLocalStart)
	if err != nil {
		return Restart{}, err
	}
	snap, err := r.getObject(ctx, ref, seg, controller.ObjectSnapshot, false)
	if errors.Is(err, remote.ErrNotFound) { // not uploaded (objects.go)
		snap, err = nil, nil
	}
	if err != nil {
		return Restart{}, err
	}
	return Restart{Offset: seg.EndOffset + 1, Epochs: epochs, Snapshot: snap, Segment: seg}, nil
}
