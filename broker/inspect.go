package broker

import (
	"errors"
	"fmt"

	"github.com/fjordlog/fjord/broker/replica"
	"github.com/fjordlog/fjord/controller"
	"github.com/fjordlog/fjord/storage"
	"github.com/fjordlog/fjord/storage/recordbatch"
)

// ReplicaState is one local replica as tests and tools see it.
type ReplicaState struct {
	Leader      bool
	LeaderEpoch int32
	ISR         []int32
	LogStart    int64
	LogEnd      int64
	HighWater   int64
	// Values are the record values from LogStart to LogEnd, in offset
	// order (nil for a null value).
	Values [][]byte
	// LocalBytes is the local log's size.
	LocalBytes int64
	// Remote are the partition's remote segment attempts in this
	// broker's applied image (tiered storage), in offset order.
	Remote []controller.RemoteSegmentMeta
}

// Replica reads this broker's replica of a partition for inspection: its
// role, offsets and every record value, the committed and the not yet
// committed alike. It is meant for tests that check the exact log on
// every replica after faults; it reads the whole log.
func (b *Broker) Replica(topic string, partition int32) (ReplicaState, error) {
	t := b.replicas.Topic(topic)
	if t == nil || partition < 0 || int(partition) >= len(t.Parts) || t.Parts[partition] == nil {
		return ReplicaState{}, fmt.Errorf("%s-%d: no replica on broker %d", topic, partition, b.cfg.NodeID)
	}
	p := t.Parts[partition]
	// Retention (local.retention.* once tiered) may move the log start
	// past the offset being read: take the snapshot again from the new
	// start, a few times at most.
	for try := 1; ; try++ {
		rs, err := replicaState(b, p, topic, partition)
		if err == nil || !errors.Is(err, storage.ErrOffsetOutOfRange) || try == 3 {
			return rs, err
		}
	}
}

// replicaState is one attempt of Replica.
func replicaState(b *Broker, p *replica.Partition, topic string, partition int32) (ReplicaState, error) {
	lg, v, code := p.Serve(replica.LocalRead)
	if code != 0 {
		return ReplicaState{}, fmt.Errorf("%s-%d: replica on broker %d is %s", topic, partition, b.cfg.NodeID, v.Phase)
	}
	rs := ReplicaState{LogStart: lg.StartOffset(), LogEnd: lg.EndOffset(), HighWater: p.HW(), LocalBytes: lg.Size()}
	if img := b.replicas.Image(); img != nil {
		rs.Remote = img.RemoteSegments(controller.TopicPartition{TopicID: p.TopicID, Partition: partition})
	}
	rs.Leader, rs.LeaderEpoch, rs.ISR = v.Leads(), v.LeaderEpoch, v.ISR
	off := rs.LogStart
	for off < rs.LogEnd {
		data, err := lg.Read(off, 1<<20, rs.LogEnd, nil)
		if err != nil {
			return rs, err
		}
		if len(data) == 0 {
			break
		}
		for len(data) > 0 {
			info, err := recordbatch.ParseHeader(data)
			if err != nil || info.Bytes > len(data) {
				return rs, fmt.Errorf("%s-%d: bad batch at %d", topic, partition, off)
			}
			base := recordbatch.BaseOffset(data)
			recordbatch.EachRecord(data[:info.Bytes], info, func(r recordbatch.Record) bool {
				rs.Values = append(rs.Values, r.Value)
				return true
			})
			off = base + int64(info.LastDelta) + 1
			data = data[info.Bytes:]
		}
	}
	return rs, nil
}
