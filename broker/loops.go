package broker

import (
	"errors"
	"strings"
	"time"

	"github.com/fjordlog/fjord/broker/config"
	"github.com/fjordlog/fjord/broker/replica"
	"github.com/fjordlog/fjord/broker/replicamgr"
	"github.com/fjordlog/fjord/storage"
)

// Background loops: retention, relaxed flushing and log compaction. Each is
// started by Start through goLoop and ends when b.stop closes. (Offset
// expiry is the coordinator's: broker/coordinator.)

// retentionLoop applies retention every log.retention.check.interval.ms.
func (b *Broker) retentionLoop() {
	t := time.NewTicker(time.Duration(max(b.cfg.RetentionCheckInterval, 10)) * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-b.stop:
			return
		case <-t.C:
		}
		now := time.Now().UnixMilli()
		for _, tp := range b.replicas.Topics() {
			if !b.policyHas(tp, "delete") {
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

// flushLoop fsyncs partitions of relaxed topics (flush.messages > 1) once
// flush.ms has passed or flush.messages records are waiting.
func (b *Broker) flushLoop() {
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	last := map[*replica.Partition]time.Time{}
	for {
		select {
		case <-b.stop:
			return
		case <-t.C:
		}
		now := time.Now()
		for _, tp := range b.replicas.Topics() {
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

// policyHas reports whether the topic's effective cleanup.policy (its
// override, else log.cleanup.policy) includes p.
func (b *Broker) policyHas(t *replicamgr.Topic, p string) bool {
	v, _ := config.FindTopicKey("cleanup.policy").Effective(b.live(), t.Configs)
	return strings.Contains(v, p)
}

// cleanerLoop compacts the partitions of topics with cleanup.policy
// containing "compact": after each segment roll (new inactive data), and
// again once delete.retention.ms (at most ten minutes) has passed, so
// expired tombstones go. One partition at a time,
// on this one goroutine: cleaning is background work and appends continue
// meanwhile.
func (b *Broker) cleanerLoop() {
	// The pause is re-read each pass: log.cleaner.backoff.ms is dynamic.
	t := time.NewTimer(time.Duration(b.live().CleanerBackoffMs) * time.Millisecond)
	defer t.Stop()
	type mark struct {
		segments int
		at       time.Time
	}
	last := map[*replica.Partition]mark{}
	for {
		select {
		case <-b.stop:
			return
		case <-t.C:
			t.Reset(time.Duration(b.live().CleanerBackoffMs) * time.Millisecond)
		}
		for _, tp := range b.replicas.Topics() {
			if !b.policyHas(tp, "compact") {
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
				case <-b.stop:
					return
				default:
				}
			}
		}
	}
}
