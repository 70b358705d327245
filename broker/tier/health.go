package tier

import (
	"errors"
	"time"

	"github.com/rs/zerolog"

	"github.com/fjordlog/fjord/controller"
	"github.com/fjordlog/fjord/storage/remote"
)

// Health is the remote log manager's state for an operator: what the
// metrics export and the console's alert card shows. A store that is down
// or refuses the credentials shows as Failing with segments waiting;
// nothing is lost meanwhile (local retention keeps every segment the
// store does not hold, storage.TierRetention), but the local disk fills.
type Health struct {
	// Failing is the failure kind (remote.Kind's) of the latest failed
	// round while any partition's last round failed on the store; ""
	// when none did. A proposal the controller refused (a leader change
	// fenced it) backs its partition off too, but is no store failure.
	Failing string
	// FailingPartitions is how many partitions' last round failed on the
	// store.
	FailingPartitions int
	// LastError is the latest failure's text ("" when none is failing).
	LastError string
	// Waiting is how many partitions this node leads have a sealed
	// segment below the high watermark not yet copied; PendingSegments
	// and PendingBytes sum those segments.
	Waiting         int
	PendingSegments int
	PendingBytes    int64
	// OldestPending is how long the partition waiting longest has had its
	// oldest such segment waiting (0: none waits), as seen by the rounds.
	OldestPending time.Duration
}

// pending is one partition's segments waiting to be copied at a round:
// base is the oldest one's, since when a round first saw it waiting.
type pending struct {
	base     int64
	since    time.Time
	segments int
	bytes    int64
}

// pendingOf is what p has waiting: sealed segments past the copied end
// and wholly below the high watermark and the last stable offset (what
// Candidate would copy, one after another).
func pendingOf(p Partition) pending {
	copied := CopiedEnd(p.Remote)
	limit := min(p.HighWatermark, p.LastStable)
	out := pending{base: -1}
	for _, s := range p.Sealed {
		if s.Last <= copied {
			continue
		}
		if s.Last >= limit {
			break
		}
		if out.base < 0 {
			out.base = s.Base
		}
		out.segments++
		out.bytes += s.Size
	}
	return out
}

// Health returns the state at now.
func (m *Manager) Health(now time.Time) Health {
	m.mu.Lock()
	defer m.mu.Unlock()
	h := Health{FailingPartitions: m.storeFailsLocked()}
	if h.FailingPartitions > 0 {
		h.Failing, h.LastError = m.mu.lastKind, m.mu.lastErr
	}
	for _, p := range m.mu.pending {
		if p.segments == 0 {
			continue
		}
		h.Waiting++
		h.PendingSegments += p.segments
		h.PendingBytes += p.bytes
		h.OldestPending = max(h.OldestPending, now.Sub(p.since))
	}
	return h
}

// notePending replaces the pending table with a round's, keeping when a
// partition's oldest waiting segment was first seen, and forgets the
// failures of partitions the round did not see.
func (m *Manager) notePending(now time.Time, seen map[controller.TopicPartition]pending) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for tp, p := range seen {
		if p.segments == 0 {
			continue
		}
		p.since = now
		if old, ok := m.mu.pending[tp]; ok && old.segments > 0 && old.base == p.base {
			p.since = old.since
		}
		seen[tp] = p
	}
	m.mu.pending = seen
	// A partition no longer led here (or no longer tiered) is no longer
	// this node's to retry: its failures go with it.
	for tp := range m.mu.fails {
		if _, ok := seen[tp]; !ok {
			delete(m.mu.fails, tp)
			delete(m.mu.notBefore, tp)
			delete(m.mu.kinds, tp)
		}
	}
}

// noteState logs the node's change between uploads working and failing,
// once per change (and once more when the kind of failure changes), not
// once per round or partition: a store down for an hour is two lines.
func (m *Manager) noteState(log zerolog.Logger) {
	m.mu.Lock()
	defer m.mu.Unlock()
	state := ""
	failing := m.storeFailsLocked()
	if failing > 0 {
		state = m.mu.lastKind
	}
	if state == m.mu.state {
		return
	}
	prev := m.mu.state
	m.mu.state = state
	switch state {
	case "":
		log.Info().Str("was", prev).Msg("tiered storage: uploads work again; local retention catches up")
	case "access_denied", "no_bucket":
		log.Error().Str("kind", state).Int("partitions", failing).Str("error", m.mu.lastErr).
			Msg("tiered storage: the store refuses this node (credentials or bucket: rsm.config.storage.*); uploads stopped, local segments kept until copied, reads below the local log fail")
	default:
		log.Warn().Str("kind", state).Int("partitions", failing).Str("error", m.mu.lastErr).
			Msg("tiered storage: uploads failing; retrying with backoff, local segments kept until copied")
	}
}

// storeFailsLocked is how many partitions' last round failed on the
// store (not refused by the controller). Under m.mu.
func (m *Manager) storeFailsLocked() int {
	n := 0
	for _, k := range m.mu.kinds {
		if k != "refused" {
			n++
		}
	}
	return n
}

// kindOf is err's kind for Health: remote.Kind's, or "refused".
func kindOf(err error) string {
	if errors.Is(err, errRefused) {
		return "refused"
	}
	return remote.Kind(err)
}
