package broker

import (
	"context"
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
	started := b.goLoop(func() {
		ctx, cancel := context.WithTimeout(b.ctx, timeout)
		defer cancel()
		done(b.ctl.AlterPartition(ctx, prop))
	})
	if !started {
		done(-1, context.Canceled)
	}
}
