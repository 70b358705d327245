package broker

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordlog/fjord/controller"
)

// The leader keeps the ISR honest (Kafka's ISR management, KIP-497): a
// follower that has not caught up to the leader's log end within
// replica.lag.time.max.ms leaves the ISR; a replica whose log reaches the
// high watermark (and the start of the current leader epoch) joins it.
// Each change is proposed to the active controller with the partition
// epoch the leader last saw (AlterPartition); only the committed change,
// arriving with a later image, counts. While an expansion is in flight the
// high watermark already waits for the joining replica (the maximal ISR),
// so it never counts a member that lacks a committed record.

// isrLoop checks the ISRs of the partitions this broker leads.
func (b *Broker) isrLoop() {
	every := time.Duration(max(b.cfg.ReplicaLagTimeMaxMs/4, 50)) * time.Millisecond
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-b.stop:
			return
		case <-t.C:
		}
		now := time.Now()
		under := 0
		for _, tp := range b.topicsSnapshot() {
			for _, p := range tp.local() {
				st := p.state.Load()
				if st == nil || !st.leader {
					continue
				}
				if len(st.isr) < len(st.replicas) {
					under++
				}
				if next, ok := p.isrChange(now, time.Duration(b.cfg.ReplicaLagTimeMaxMs)*time.Millisecond); ok {
					b.proposeISR(p, st, next)
				}
			}
		}
		b.underReplicated.Store(int64(under))
	}
}

// isrChange decides the ISR this leader should propose now, if any. It
// marks the proposal in flight.
func (p *partition) isrChange(now time.Time, lag time.Duration) ([]int32, bool) {
	st := p.state.Load()
	hw := p.hw.Load()
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.mu.pendingISR != nil {
		return nil, false
	}
	next := make([]int32, 0, len(st.replicas))
	for _, id := range st.isr {
		if id == p.me {
			next = append(next, id)
			continue
		}
		caught := p.mu.leaderSince
		if f := p.mu.followers[id]; f != nil && f.lastCaughtUp.After(caught) {
			caught = f.lastCaughtUp
		}
		if now.Sub(caught) <= lag {
			next = append(next, id)
		}
	}
	for _, id := range st.replicas {
		if slices.Contains(st.isr, id) {
			continue
		}
		f := p.mu.followers[id]
		if f != nil && f.leo >= hw && f.leo >= p.mu.epochStart && now.Sub(f.lastFetch) <= lag {
			next = append(next, id)
		}
	}
	if sameMembers(next, st.isr) {
		return nil, false
	}
	p.mu.pendingISR = next
	return next, true
}

func sameMembers(a, b []int32) bool {
	if len(a) != len(b) {
		return false
	}
	for _, x := range a {
		if !slices.Contains(b, x) {
			return false
		}
	}
	return true
}

// proposeISR sends the AlterPartition for p in the background; a refusal
// clears the in-flight mark so the next check may try again.
func (b *Broker) proposeISR(p *partition, st *replicaState, isr []int32) {
	shrink := len(isr) < len(st.isr)
	if shrink {
		b.metrics.isrShrinks.Inc()
	} else {
		b.metrics.isrExpands.Inc()
	}
	p.logger.Info().Ints32("isr", st.isr).Ints32("proposed", isr).Msg("proposing an ISR change")
	b.alterPartition(b.image(), p.topicID, p.index, st.leaderEpoch, st.partitionEpoch, isr, 10*time.Second, func(code int16, _ error) {
		if code != 0 {
			p.logger.Info().Int16("code", code).Ints32("proposed", isr).Msg("ISR change not accepted")
			p.mu.Lock()
			if slices.Equal(p.mu.pendingISR, isr) {
				p.mu.pendingISR = nil
			}
			p.mu.Unlock()
		}
	})
}

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
	b.goLoop(func() {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		go func() {
			select {
			case <-b.stop:
				cancel()
			case <-ctx.Done():
			}
		}()
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
}
