package replica

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordlog/fjord/storage"
)

// KIP-405's follower path, the fetcher's side (broker/tier/follower.go
// has the why). A leader answers a fetch below its local log start that
// its tiered copy holds with OFFSET_MOVED_TO_TIERED_STORAGE; the fetcher
// then leaves the partition out of its fetches until it has restarted it:
// it asks the leader for its earliest local offset (ListOffsets -4, with
// this broker as the replica), has the host find the copied segment
// holding the offset before it and read that segment's producer snapshot
// (TierRestarter), and restarts the log at the segment's end with it
// (storage.Log.RestartFromCopy). A failure (the leader unreachable, this
// broker's image behind the leader's, the store down) is retried with
// backoff, doubling from restartBackoffMin to restartBackoffMax.
//
// The ListOffsets runs in the fetch loop, as fetches do: the leader's
// latency holds up its other partitions anyway. The store read and the
// log's restart run beside it, at most maxRestartsInFlight at a time per
// fetcher: a slow or unreachable store (up to restartTimeout per attempt)
// must not stall the replication of the leader's other partitions, which
// would then drop out of the ISR for a problem that is not theirs.
//
// Why ListOffsets -4 and not a field on the fetch response: it is
// Kafka's own way (its follower's fetchEarliestLocalOffset), a restart is
// rare (once per new replica), so the extra round trip costs nothing,
// and the leader's answer needs no Fjord-only tag that an old Fjord
// leader would not send. The epoch it carries is not needed: the image's
// segment metadata has the epochs of every copied offset.

// TierRestarter is what a FetchHost implements when the node has a
// remote store: the restart point for a partition whose leader's local
// log starts at leaderLocalStart, the leader epochs of the copied
// offsets below it, and the producer snapshot taken there (nil: none).
type TierRestarter interface {
	TierRestart(ctx context.Context, p *Partition, leaderLocalStart int64) (offset int64, epochs []storage.EpochStart, snapshot []byte, err error)
	// RestartedFromCopy counts p's log restarted at the copy's end.
	RestartedFromCopy(p *Partition)
}

const (
	restartBackoffMin   = 200 * time.Millisecond
	restartBackoffMax   = 10 * time.Second
	restartTimeout      = 30 * time.Second // one attempt's store read and restart
	maxRestartsInFlight = 4                // per fetcher: store reads beside the fetch loop
)

// tierRestart is a partition waiting to restart from the tiered copy.
// Owned by the fetch loop; result is the only part an attempt's goroutine
// touches (it sends once, into its buffer).
type tierRestart struct {
	fails  int        // consecutive failed attempts
	next   int64      // unix ms: not before
	result chan error // non-nil while an attempt runs; cap 1
}

// movedToTiered notes p for a restart before its next fetch.
func (f *fetcher) movedToTiered(p *Partition) {
	if f.restarts == nil {
		f.restarts = map[*Partition]*tierRestart{}
	}
	if f.restarts[p] == nil {
		f.restarts[p] = &tierRestart{}
	}
	// Forget partitions no longer fetched here (moved to another leader);
	// an attempt still running for one ends on its own (restartFromCopy
	// checks the view under roleMu before it changes the log).
	for q := range f.restarts {
		if !slices.Contains(f.partitions(), q) {
			delete(f.restarts, q)
		}
	}
}

// restartPending reports whether p waits for a restart from the copy:
// it collects a finished attempt, or starts one when its backoff has
// passed and fewer than maxRestartsInFlight run; true while p still waits.
func (f *fetcher) restartPending(p *Partition, now int64) bool {
	r := f.restarts[p]
	if r == nil {
		return false
	}
	var err error
	switch {
	case r.result != nil:
		select {
		case err = <-r.result:
			r.result = nil
		default:
			return true
		}
	case now < r.next || f.restarting.Load() >= maxRestartsInFlight:
		return true
	default:
		var run func(context.Context) error
		if run, err = f.prepareRestart(p); err == nil && run != nil {
			r.result = make(chan error, 1)
			f.restarting.Add(1)
			f.restartsWG.Add(1)
			go func() {
				defer f.restartsWG.Done()
				defer f.restarting.Add(-1)
				ctx, cancel := context.WithTimeout(f.ctx, restartTimeout)
				defer cancel()
				r.result <- run(ctx)
			}()
			return true
		}
	}
	if err == nil {
		delete(f.restarts, p)
		return false
	}
	r.fails++
	d := min(restartBackoffMin<<min(r.fails-1, 16), restartBackoffMax)
	r.next = now + d.Milliseconds()
	ev := p.Logger.Debug()
	if r.fails == 1 || r.fails%10 == 0 {
		ev = p.Logger.Warn()
	}
	ev.Err(err).Int("attempts", r.fails).Msg("restarting the follower from the tiered copy failed; retrying")
	return true
}

// prepareRestart asks the leader for p's earliest local offset and
// returns the rest of the restart (the store read and the log's restart),
// or nil when there is nothing to restart (p moved on, or its log reaches
// the leader's local start: it fetches again).
func (f *fetcher) prepareRestart(p *Partition) (func(context.Context) error, error) {
	v, lg := p.view.Load(), p.Log()
	if lg == nil || !v.Fetches(f.leader) {
		return nil, nil // moved on: a new leader starts over
	}
	th, ok := f.host.(TierRestarter)
	if !ok {
		return nil, errors.New("the leader's log below its local start is in tiered storage, and this node has no remote store")
	}
	if err := f.connect(); err != nil {
		return nil, fmt.Errorf("no route to leader %d: %w", f.leader, err)
	}
	localStart, err := f.leaderLocalStart(p, v.LeaderEpoch)
	if err != nil {
		return nil, fmt.Errorf("asking leader %d for its earliest local offset: %w", f.leader, err)
	}
	if localStart <= lg.EndOffset() {
		return nil, nil // the log reaches the leader's: fetch again
	}
	leader, epoch := f.leader, v.LeaderEpoch
	return func(ctx context.Context) error {
		offset, epochs, snap, err := th.TierRestart(ctx, p, localStart)
		if err != nil {
			return err
		}
		done, err := p.restartFromCopy(lg, leader, epoch, offset, epochs, snap)
		if done {
			th.RestartedFromCopy(p)
		}
		return err
	}, nil
}

// leaderLocalStart asks the leader for p's earliest local offset
// (ListOffsets EARLIEST_LOCAL_TIMESTAMP, -4, KIP-405).
func (f *fetcher) leaderLocalStart(p *Partition, epoch int32) (int64, error) {
	req := kmsg.NewPtrListOffsetsRequest()
	req.ReplicaID = f.host.NodeID()
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = p.Topic
	rp := kmsg.NewListOffsetsRequestTopicPartition()
	rp.Partition, rp.CurrentLeaderEpoch, rp.Timestamp = p.Index, epoch, -4
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	kresp, err := f.request(req, 10*time.Second)
	if err != nil {
		return 0, err
	}
	resp := kresp.(*kmsg.ListOffsetsResponse)
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		return 0, fmt.Errorf("malformed ListOffsets response")
	}
	sp := resp.Topics[0].Partitions[0]
	if sp.ErrorCode != 0 {
		return 0, kerr.ErrorForCode(sp.ErrorCode)
	}
	if sp.Offset < 0 {
		return 0, fmt.Errorf("earliest local offset %d", sp.Offset)
	}
	return sp.Offset, nil
}

// restartFromCopy restarts the log at offset with the copy's epochs and
// producer snapshot, while p still follows leader at epoch (under roleMu,
// as truncateTo: a role change waits for it).
func (p *Partition) restartFromCopy(lg *storage.Log, leader, epoch int32, offset int64, epochs []storage.EpochStart, snap []byte) (restarted bool, err error) {
	p.roleMu.RLock()
	v := p.view.Load()
	if v.Leader != leader || v.LeaderEpoch != epoch || !v.Fetches(leader) {
		p.roleMu.RUnlock()
		return false, nil // moved on meanwhile
	}
	from := lg.EndOffset()
	if offset <= from {
		// Never for a copy holding the offset before the leader's local
		// start, which is above this log's end: refused, and retried
		// with backoff rather than fetched again at once.
		p.roleMu.RUnlock()
		return false, fmt.Errorf("restart offset %d is not above the log end %d", offset, from)
	}
	if err := lg.RestartFromCopy(offset, epochs, snap); err != nil {
		p.roleMu.RUnlock()
		return false, fmt.Errorf("restart at %d: %w", offset, err)
	}
	p.roleMu.RUnlock()
	p.Logger.Warn().Int64("log_end", from).Int64("restart", offset).Int32("leader", leader).
		Msg("follower was below the leader's local log start: restarted at the end of the tiered copy; fetching from there")
	p.Step(Truncated{Start: lg.StartOffset(), End: lg.EndOffset()})
	return true, nil
}
