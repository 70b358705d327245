package broker

import (
	"context"
	"errors"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

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
	req := kmsg.NewPtrAlterPartitionRequest()
	req.BrokerID, req.BrokerEpoch = b.cfg.NodeID, b.brokerEpoch.Load()
	rt := kmsg.NewAlterPartitionRequestTopic()
	rt.TopicID = topicID
	rp := kmsg.NewAlterPartitionRequestTopicPartition()
	rp.Partition, rp.LeaderEpoch, rp.PartitionEpoch = index, leaderEpoch, partitionEpoch
	for _, id := range isr {
		rp.NewISR = append(rp.NewISR, id)
		m := kmsg.NewAlterPartitionRequestTopicPartitionNewEpochISR()
		m.BrokerID, m.BrokerEpoch = id, -1
		if bs, ok := img.Broker(id); ok {
			m.BrokerEpoch = bs.Epoch
		}
		rp.NewEpochISR = append(rp.NewEpochISR, m)
	}
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	started := b.goLoop(func() {
		ctx, cancel := context.WithTimeout(b.ctx, timeout)
		defer cancel()
		kresp, err := b.ctl.call(ctx, req)
		if err != nil {
			done(-1, err)
			return
		}
		r := kresp.(*kmsg.AlterPartitionResponse)
		switch {
		case r.ErrorCode != 0:
			done(r.ErrorCode, nil)
		case len(r.Topics) != 1 || len(r.Topics[0].Partitions) != 1:
			done(-1, errors.New("malformed AlterPartition response"))
		default:
			done(r.Topics[0].Partitions[0].ErrorCode, nil)
		}
	})
	if !started {
		done(-1, context.Canceled)
	}
}
