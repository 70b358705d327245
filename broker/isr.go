package broker

import (
	"context"
	"sync"
	"time"

	"github.com/fjordlog/fjord/controller"
)

// The leader keeps the ISR honest (Kafka's ISR management, KIP-497): its
// replica core (broker/replica) decides when a follower leaves or joins
// the ISR and when a leadership must be resigned; this file sends those
// decisions to the active controller as AlterPartition requests. Only the
// committed change, arriving with a later image, counts.

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
func (b *Broker) alterPartition(img *controller.Image, topicID [16]byte, index, leaderEpoch, partitionEpoch int32,
	isr []int32, timeout time.Duration, done func(code int16, err error)) {
	prop := isrProposal{brokerEpoch: b.brokerEpoch.Load(), topicID: topicID, index: index,
		leaderEpoch: leaderEpoch, partitionEpoch: partitionEpoch}
	for _, id := range isr {
		m := isrMember{id: id, epoch: -1}
		if bs, ok := img.Broker(id); ok {
			m.epoch = bs.Epoch
		}
		prop.isr = append(prop.isr, m)
	}
	b.alters.add(b, alterItem{prop: prop, timeout: timeout, done: done})
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
	prop    isrProposal
	timeout time.Duration
	done    func(code int16, err error)
}

// maxAlterBatch bounds the partitions of one AlterPartition request.
const maxAlterBatch = 2000

func (q *alterBatcher) add(b *Broker, it alterItem) {
	q.mu.Lock()
	q.pending = append(q.pending, it)
	start := !q.running
	q.running = true
	q.mu.Unlock()
	if start && !b.goLoop(func() { q.send(b) }) {
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
func (q *alterBatcher) send(b *Broker) {
	for {
		q.mu.Lock()
		if len(q.pending) == 0 {
			q.running = false
			q.mu.Unlock()
			return
		}
		// One request carries one broker epoch: take the first item's.
		epoch := q.pending[0].prop.brokerEpoch
		var batch, rest []alterItem
		for _, it := range q.pending {
			if it.prop.brokerEpoch == epoch && len(batch) < maxAlterBatch {
				batch = append(batch, it)
			} else {
				rest = append(rest, it)
			}
		}
		q.pending = rest
		q.mu.Unlock()

		timeout := time.Duration(0)
		props := make([]isrProposal, len(batch))
		for i, it := range batch {
			props[i], timeout = it.prop, max(timeout, it.timeout)
		}
		ctx, cancel := context.WithTimeout(b.ctx, timeout)
		codes, err := b.ctl.AlterPartitions(ctx, epoch, props)
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
