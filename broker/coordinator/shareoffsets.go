package coordinator

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/fjordlog/fjord/group"
	"github.com/fjordlog/fjord/group/share"
	"github.com/fjordlog/fjord/group/sharepart"
)

// What the share-group offsets APIs (90 DescribeShareGroupOffsets, 91
// AlterShareGroupOffsets, 92 DeleteShareGroupOffsets, and 42 DeleteGroups
// of a share group) share. A share-partition's start offset is not a
// committed offset of this coordinator: it is state of the share
// coordinator (broker/sharecoord), which this room reaches through
// ShareStates, on whichever node coordinates each share-partition. The
// group itself only lists which share-partitions have state
// (group/share's offsets.go), and its steps around the share coordinator's
// calls are committed before those calls are made, as in Kafka.
//
// Fencing: the share-partition leaders (broker/sharefetch), possibly on
// other nodes, hold the state in memory while they serve it. An alter
// initializes the state at a new state epoch, which the share coordinator
// holds against every later write carrying an older one; and this node's
// leaders of the group's share-partitions are told to drop theirs
// (APIHost.UnloadShareGroup). Kafka relies on the state epoch alone.

// ShareStates is the share coordinator as the share-group offsets APIs
// use it: the node's sharecoord.Persister, which calls this node's share
// coordinator for a share-partition it coordinates and sends Kafka's RPCs
// to the node that does otherwise, retrying within its bounds. Every
// method blocks until its outcome is known, at most until ctx ends.
type ShareStates interface {
	// Summary is ReadShareGroupStateSummary: key's start offset, the leader
	// epoch of the leader that last read it and its delivery-complete
	// count (KIP-1226); start offset, leader epoch and count -1 when key
	// has no state.
	Summary(ctx context.Context, key sharepart.Key) (ShareSummary, error)
	// Initialize is InitializeShareGroupState: key's state starts afresh at
	// stateEpoch and startOffset.
	Initialize(ctx context.Context, key sharepart.Key, stateEpoch int32, startOffset int64) error
	// Delete is DeleteShareGroupState; deleting none succeeds.
	Delete(ctx context.Context, key sharepart.Key) error
}

// ShareSummary is one share-partition's state as
// DescribeShareGroupOffsets reports it.
type ShareSummary struct {
	// StartOffset is the share-partition start offset (SPSO); -1 when
	// there is none.
	StartOffset int64
	LeaderEpoch int32
	// DeliveryCompleteCount is the number of records at or after
	// StartOffset whose delivery is complete; -1 when not known.
	DeliveryCompleteCount int32
}

// PartitionEnd is a partition's end offset as its leader answers
// ListOffsets for the latest offset (read_uncommitted: the high
// watermark), or the error code it answered.
type PartitionEnd struct {
	Offset int64
	Code   int16
}

// shareStateTimeout bounds one API's calls to the share coordinator, on
// top of the retries of each call.
const shareStateTimeout = 30 * time.Second

// shareStateCalls is how many calls to the share coordinator one request
// makes at once.
const shareStateCalls = 16

// shareContext bounds a mutation's calls to the share coordinator. It is
// not the connection's: once the group's first step is committed the
// calls are made even if the client goes away, so that the group's marks
// are cleared when they can be.
func shareContext() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), shareStateTimeout)
}

// concurrently runs fn(0) … fn(n-1), at most shareStateCalls at once, on
// the node's goroutines, and returns once every call has. A call the node
// does not start (it is closing) runs on the caller's goroutine.
func concurrently(h APIHost, n int, fn func(i int)) {
	var wg sync.WaitGroup
	sem := make(chan struct{}, shareStateCalls)
	for i := range n {
		sem <- struct{}{}
		wg.Add(1)
		run := func() {
			defer wg.Done()
			defer func() { <-sem }()
			fn(i)
		}
		if !h.Go(run) {
			run()
		}
	}
	wg.Wait()
}

// shareStep runs step on share group id (created first when create is
// set) and waits until its records are committed. It returns the group
// error Kafka answers, with its message (0 when the step ran and its
// records are committed): GROUP_ID_NOT_FOUND for no such group or one of
// another type, the step's refusal, or why its records did not commit.
func shareStep(h APIHost, id string, create bool, step func(g *share.Group, img *share.Image) ([]share.Record, error)) (int16, *string) {
	var stepErr error
	exists, wait, err := h.Coordinator().Share(id, create, func(g *share.Group, img *share.Image, _ int64) []share.Record {
		var recs []share.Record
		recs, stepErr = step(g, img)
		return recs
	})
	switch {
	case errors.Is(err, ErrOtherGroupType):
		return kerr.GroupIDNotFound.Code, msgf("Group %s is not a share group.", id)
	case !exists:
		return kerr.GroupIDNotFound.Code, msgf("Group %s not found.", id)
	case stepErr != nil:
		code := group.ErrorCode(stepErr)
		if errors.Is(stepErr, group.ErrGroupNotFound) {
			return code, msgf("Group %s not found.", id)
		}
		return code, errorMessage(code)
	case err != nil:
		code := CommitErrorCode(err, h.Code)
		return code, errorMessage(code)
	case wait != nil:
		if err := wait(); err != nil {
			h.Log().Warn().Err(err).Str("group", id).Msg("share group offsets records not committed")
			code := CommitErrorCode(err, h.Code)
			return code, errorMessage(code)
		}
	}
	return 0, nil
}

func msgf(format string, args ...any) *string {
	m := fmt.Sprintf(format, args...)
	return &m
}

// deleteShareStates deletes the state of every partition of parts of
// group's share-partitions, concurrently, and returns each topic's first
// error (nil for a topic whose state is all gone).
func deleteShareStates(ctx context.Context, h APIHost, id string, parts map[share.TopicID][]int32) map[share.TopicID]error {
	type job struct {
		key sharepart.Key
		err error
	}
	var jobs []job
	for t, ps := range parts {
		for _, p := range ps {
			jobs = append(jobs, job{key: sharepart.Key{Group: id, TopicID: t, Partition: p}})
		}
	}
	concurrently(h, len(jobs), func(i int) { jobs[i].err = h.ShareStates().Delete(ctx, jobs[i].key) })
	out := make(map[share.TopicID]error, len(parts))
	for t := range parts {
		out[t] = nil
	}
	for _, j := range jobs {
		if j.err != nil && out[j.key.TopicID] == nil {
			h.Log().Warn().Err(j.err).Str("group", id).Int32("partition", j.key.Partition).Msg("deleting share-partition state")
			out[j.key.TopicID] = j.err
		}
	}
	return out
}
