package replicamgr

import (
	"errors"
	"strings"
	"time"

	"github.com/fjordlog/fjord/broker/replica"
	"github.com/fjordlog/fjord/storage"
)

// Background upkeep of the local logs: retention, relaxed flushing and log
// compaction, each a loop on its own goroutine that ends when Upkeep.Stop
// closes. (Offset expiry is the group coordinator's.)

// Upkeep is what the upkeep loops read of the node.
type Upkeep struct {
	Stop <-chan struct{}
	// RetentionCheck is log.retention.check.interval.ms.
	RetentionCheck time.Duration
	// Policy is a topic's effective cleanup.policy (its override, else
	// log.cleanup.policy), read at each pass: it is dynamic.
	Policy func(t *Topic) string
	// CleanerBackoff is log.cleaner.backoff.ms, read at each pass.
	CleanerBackoff func() time.Duration
}

func policyHas(u Upkeep, t *Topic, p string) bool { return strings.Contains(u.Policy(t), p) }

// RetentionLoop applies retention every log.retention.check.interval.ms.
func (m *Manager) RetentionLoop(u Upkeep) {
	t := time.NewTicker(max(u.RetentionCheck, 10*time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-u.Stop:
			return
		case <-t.C:
		}
		now := time.Now().UnixMilli()
		for _, tp := range m.Topics() {
			if !policyHas(u, tp, "delete") {
				continue // compact-only topics keep everything the cleaner keeps
			}
			for _, p := range tp.Local() {
				lg, _, code := p.Serve(replica.LocalRead)
				if code != 0 {
					continue
				}
				n, err := lg.DeleteOldSegments(now)
				if err != nil && !errors.Is(err, storage.ErrClosed) {
					p.Logger.Warn().Err(err).Msg("retention")
				}
				if n > 0 {
					// The core counts the start in the low watermark
					// DeleteRecords waits for.
					p.Step(replica.StartMoved{Start: lg.StartOffset()})
				}
			}
		}
	}
}

// FlushLoop fsyncs partitions of relaxed topics (flush.messages > 1) once
// flush.ms has passed or flush.messages records are waiting.
func (m *Manager) FlushLoop(u Upkeep) {
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	last := map[*replica.Partition]time.Time{}
	for {
		select {
		case <-u.Stop:
			return
		case <-t.C:
		}
		now := time.Now()
		for _, tp := range m.Topics() {
			for _, p := range tp.Local() {
				s := p.Settings()
				n := p.Unflushed()
				if s.FlushMessages <= 1 || n == 0 {
					continue
				}
				if n >= s.FlushMessages || now.Sub(last[p]) >= time.Duration(s.FlushMs)*time.Millisecond {
					p.Flush()
					last[p] = now
				}
			}
		}
	}
}

// CleanerLoop compacts the partitions of topics with cleanup.policy
// containing "compact": after each segment roll (new inactive data), and
// again once delete.retention.ms (at most ten minutes) has passed, so
// expired tombstones go. One partition at a time,
// on this one goroutine: cleaning is background work and appends continue
// meanwhile.
func (m *Manager) CleanerLoop(u Upkeep) {
	// The pause is re-read each pass: log.cleaner.backoff.ms is dynamic.
	t := time.NewTimer(u.CleanerBackoff())
	defer t.Stop()
	type mark struct {
		segments int
		at       time.Time
	}
	last := map[*replica.Partition]mark{}
	for {
		select {
		case <-u.Stop:
			return
		case <-t.C:
			t.Reset(u.CleanerBackoff())
		}
		for _, tp := range m.Topics() {
			if !policyHas(u, tp, "compact") {
				continue
			}
			for _, p := range tp.Local() {
				lg, _, code := p.Serve(replica.LocalRead)
				if code != 0 {
					continue
				}
				n := lg.SegmentCount()
				m := last[p]
				// Tombstones expire with time, not with new segments: look
				// again once delete.retention.ms could have passed.
				again := min(10*time.Minute, time.Duration(p.Settings().DeleteRetentionMs)*time.Millisecond)
				if n < 2 || (n == m.segments && time.Since(m.at) < again) {
					continue
				}
				st, err := lg.Compact(time.Now().UnixMilli(), p.Settings().DeleteRetentionMs)
				last[p] = mark{lg.SegmentCount(), time.Now()}
				if err != nil && !errors.Is(err, storage.ErrClosed) {
					p.Logger.Error().Err(err).Msg("compaction failed")
					continue
				}
				if st.Segments > 0 {
					p.Logger.Info().Int("segments", st.Segments).Int64("purged", st.RecordsPurged).
						Int64("kept", st.RecordsKept).Dur("took", st.Duration).Msg("compacted")
				}
				select {
				case <-u.Stop:
					return
				default:
				}
			}
		}
	}
}
