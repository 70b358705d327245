package tier

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/fjordlog/fjord/controller"
	"github.com/fjordlog/fjord/storage/remote"
)

// TestHealthAndBackoff: failed rounds back off doubling up to MaxBackoff;
// the node logs one line per change between working and failing (and of
// the failure's kind), not one per round or partition; Health counts
// what waits, and since when.
func TestHealthAndBackoff(t *testing.T) {
	var logs bytes.Buffer
	m := NewManager(ManagerConfig{Interval: time.Second, MaxBackoff: 8 * time.Second, Logger: zerolog.New(&logs)})
	now := time.Unix(1000, 0)
	tps := []controller.TopicPartition{{Partition: 0}, {Partition: 1}, {Partition: 2}}
	down := fmt.Errorf("put: %w", remote.ErrUnavailable)
	seen := map[controller.TopicPartition]pending{}
	for _, tp := range tps {
		seen[tp] = pending{base: 10, segments: 2, bytes: 2048}
	}
	var waits []time.Duration
	for round := 0; round < 6; round++ {
		for _, tp := range tps {
			m.settle(tp, zerolog.Nop(), now, nil, down)
		}
		waits = append(waits, m.mu.notBefore[tps[0]].Sub(now))
		m.notePending(now, clone(seen))
		m.noteState(m.cfg.Logger)
		now = now.Add(10 * time.Second)
	}
	if want := []time.Duration{1, 2, 4, 8, 8, 8}; fmt.Sprint(waits) != fmt.Sprint(scale(want, time.Second)) {
		t.Errorf("backoffs %v, want %v", waits, scale(want, time.Second))
	}
	h := m.Health(now)
	if h.Failing != "unavailable" || h.FailingPartitions != 3 || h.Waiting != 3 || h.PendingSegments != 6 || h.PendingBytes != 6144 || h.OldestPending != 60*time.Second {
		t.Errorf("health while failing: %+v", h)
	}
	if n := strings.Count(logs.String(), "uploads failing"); n != 1 {
		t.Errorf("%d lines say uploads fail over 6 rounds of 3 partitions, want 1:\n%s", n, logs.String())
	}
	// The kind changes: one more line, an error.
	m.settle(tps[0], zerolog.Nop(), now, nil, fmt.Errorf("put: %w", remote.ErrAccessDenied))
	m.noteState(m.cfg.Logger)
	m.noteState(m.cfg.Logger)
	if n := strings.Count(logs.String(), `"level":"error"`); n != 1 || m.Health(now).Failing != "access_denied" {
		t.Errorf("%d error lines, failing %q; want 1, access_denied", n, m.Health(now).Failing)
	}
	// A copy moves the oldest waiting segment: its wait starts again.
	seen[tps[0]] = pending{base: 20, segments: 1, bytes: 1024}
	m.notePending(now, clone(seen))
	// Working again: one line, and nothing failing.
	for _, tp := range tps {
		m.settle(tp, zerolog.Nop(), now, nil, nil)
	}
	m.noteState(m.cfg.Logger)
	h = m.Health(now.Add(time.Second))
	if n := strings.Count(logs.String(), "uploads work again"); n != 1 || h.Failing != "" || h.FailingPartitions != 0 || h.OldestPending != 61*time.Second {
		t.Errorf("%d lines say uploads work again; health %+v", n, h)
	}
	// A proposal the controller refused (a leader change fenced it) backs
	// the partition off but raises no alert.
	m.settle(tps[2], zerolog.Nop(), now, nil, fmt.Errorf("%w: COPY_FINISHED: FENCED_LEADER_EPOCH", errRefused))
	m.noteState(m.cfg.Logger)
	if h := m.Health(now); h.Failing != "" || h.FailingPartitions != 0 || !m.mu.notBefore[tps[2]].After(now) || strings.Count(logs.String(), "uploads failing") != 1 {
		t.Errorf("after a refused proposal: %+v, backing off until %v", h, m.mu.notBefore[tps[2]])
	}
	m.settle(tps[2], zerolog.Nop(), now, nil, nil)
	// A partition no longer led here takes its failure with it.
	m.settle(tps[1], zerolog.Nop(), now, nil, down)
	delete(seen, tps[1])
	m.notePending(now, clone(seen))
	if h := m.Health(now); h.FailingPartitions != 0 || h.Waiting != 2 {
		t.Errorf("after the failing partition moved away: %+v", h)
	}
}

func clone(m map[controller.TopicPartition]pending) map[controller.TopicPartition]pending {
	out := map[controller.TopicPartition]pending{}
	for k, v := range m {
		out[k] = v
	}
	return out
}

func scale(ns []time.Duration, unit time.Duration) []time.Duration {
	out := make([]time.Duration, len(ns))
	for i, n := range ns {
		out[i] = n * unit
	}
	return out
}

// TestPendingOf: the segments waiting are those past the copied end and
// wholly below the high watermark and the last stable offset.
func TestPendingOf(t *testing.T) {
	p := Partition{HighWatermark: 300, LastStable: 250,
		Sealed: []LocalSegment{{Base: 0, Last: 99, Size: 10}, {Base: 100, Last: 199, Size: 20}, {Base: 200, Last: 249, Size: 30}, {Base: 250, Last: 299, Size: 40}},
		Remote: []controller.RemoteSegmentMeta{{RemoteSegment: controller.RemoteSegment{BaseOffset: 0, EndOffset: 99}, State: controller.RemoteCopyFinished}}}
	if got := pendingOf(p); got.base != 100 || got.segments != 2 || got.bytes != 50 {
		t.Errorf("pendingOf = %+v, want base 100, 2 segments, 50 bytes", got)
	}
}
