package replicamgr

import (
	"context"
	"sync"
	"time"

	"github.com/fjordlog/fjord/controller"
)

// The leader keeps the ISR honest (Kafka's ISR management, KIP-497): its
// replica core (broker/replica) decides when a follower leaves or joins
// the ISR and when a leadership must be resigned; this file sends those
// decisions to the active controller as AlterPartition requests
// (Config.AlterPartitions). Only the committed change, arriving with a
// later image, counts.

// alterPartition sends the active controller, in the background, an
// AlterPartition from this leader for partition index of topicID at the
// given epochs, proposing isr (members' broker epochs as img knows them),
// and calls done with the partition's error code (-1 and the error when no
// answer came within timeout or the broker stopped). An isr without this
// broker is a resignation (controller.Resign).
//
// Proposals are batched, as Kafka's AlterPartitionManager does: one
// request in flight, carrying every proposal that queued while the one
// before it was answered, so a leader back from a restart among a
// thousand partitions sends a handful of requests rather than a thousand
// (each a quorum round trip at the controller).
func (m *Manager) alterPartition(img *controller.Image, topicID [16]byte, index, leaderEpoch, partitionEpoch int32,
	isr []int32, timeout time.Duration, done func(code int16, err error)) {
	prop := ISRProposal{BrokerEpoch: m.brokerEpoch(), TopicID: topicID, Index: index,
		LeaderEpoch: leaderEpoch, PartitionEpoch: partitionEpoch}
	for _, id := range isr {
		im := ISRMember{ID: id, Epoch: -1}
		if bs, ok := img.Broker(id); ok {
			im.Epoch = bs.Epoch
		}
		prop.ISR = append(prop.ISR, im)
	}
	m.alters.add(m, alterItem{prop: prop, timeout: timeout, done: done})
}

// ISRProposal is one AlterPartition from this leader: partition Index of
// TopicID at the epochs it saw, proposing ISR. An ISR without this broker
// is a resignation (controller.Resign).
type ISRProposal struct {
	BrokerEpoch                        int64 // this broker's
	TopicID                            [16]byte
	Index, LeaderEpoch, PartitionEpoch int32
	ISR                                []ISRMember
}

// ISRMember is a proposed ISR member: its broker id and, as the image
// knows it, its broker epoch (-1 if unknown).
type ISRMember struct {
	ID    int32
	Epoch int64
}

// alterBatcher queues this broker's AlterPartition proposals. Invariant: at
// most one goroutine (the sender) drains pending, and running says it exists.
type alterBatcher struct {
	mu      sync.Mutex
	pending []alterItem
	running bool
}

// alterItem is one queued proposal and whom to tell its outcome.
type alterItem struct {
	prop    ISRProposal
	timeout time.Duration
	done    func(code int16, err error)
}

// maxAlterBatch bounds the partitions of one AlterPartition request.
const maxAlterBatch = 2000

func (q *alterBatcher) add(m *Manager, it alterItem) {
	q.mu.Lock()
	q.pending = append(q.pending, it)
	start := !q.running
	q.running = true
	q.mu.Unlock()
	if start && !m.cfg.Go(func() { q.send(m) }) {
		q.mu.Lock()
		items := q.pending
		q.pending, q.running = nil, false
		q.mu.Unlock()
		for _, it := range items {
			it.done(-1, context.Canceled)
		}
	}
}

// send sends the queued proposals, a batch at a time, until none is left.
func (q *alterBatcher) send(m *Manager) {
	for {
		q.mu.Lock()
		if len(q.pending) == 0 {
			q.running = false
			q.mu.Unlock()
			return
		}
		// One request carries one broker epoch: take the first item's.
		epoch := q.pending[0].prop.BrokerEpoch
		var batch, rest []alterItem
		for _, it := range q.pending {
			if it.prop.BrokerEpoch == epoch && len(batch) < maxAlterBatch {
				batch = append(batch, it)
			} else {
				rest = append(rest, it)
			}
		}
		q.pending = rest
		q.mu.Unlock()

		timeout := time.Duration(0)
		props := make([]ISRProposal, len(batch))
		for i, it := range batch {
			props[i], timeout = it.prop, max(timeout, it.timeout)
		}
		ctx, cancel := context.WithTimeout(m.ctx, timeout)
		codes, err := m.cfg.AlterPartitions(ctx, epoch, props)
		cancel()
		for i, it := range batch {
			if err != nil {
				it.done(-1, err)
			} else {
				it.done(codes[i], nil)
			}
		}
	}
}
