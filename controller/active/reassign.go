package active

import (
	"context"

	"github.com/fjordlog/fjord/controller"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Partition reassignment (KIP-455) for the active controller: the adapter
// of controller.Reassign and controller.ListReassignments, and the tick's
// completion of moves whose ISR has caught up (completeMoves).

// alterReassignments decides an AlterPartitionReassignments request as one
// batch: the partitions that pass change together or not at all.
func (c *Controller) alterReassignments(ctx context.Context, img *controller.Image, req *kmsg.AlterPartitionAssignmentsRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.AlterPartitionAssignmentsResponse)
	var rs []controller.Reassignment
	for _, rt := range req.Topics {
		for _, rp := range rt.Partitions {
			rs = append(rs, controller.Reassignment{Topic: rt.Topic, Partition: rp.Partition, Target: rp.Replicas})
		}
	}
	allowRF := req.Version < 1 || req.AllowReplicationFactorChange
	recs, results := controller.Reassign(img, rs, allowRF)
	_, perr := c.propose(ctx, recs)
	i := 0
	for _, rt := range req.Topics {
		st := kmsg.NewAlterPartitionAssignmentsResponseTopic()
		st.Topic = rt.Topic
		for _, rp := range rt.Partitions {
			sp := kmsg.NewAlterPartitionAssignmentsResponseTopicPartition()
			sp.Partition = rp.Partition
			r := results[i]
			i++
			switch {
			case r.ErrorCode != 0:
				sp.ErrorCode = r.ErrorCode
				m := r.Message
				sp.ErrorMessage = &m
			case perr != nil:
				sp.ErrorCode = proposeCode(perr)
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	if len(recs) > 0 && perr == nil {
		c.log.Info().Int("partitions", len(recs)).Msg("partition reassignments changed")
	}
	return resp
}

// listReassignments answers ListPartitionReassignments from the image:
// every reassigning partition, or those of the named ones.
func (c *Controller) listReassignments(img *controller.Image, req *kmsg.ListPartitionReassignmentsRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.ListPartitionReassignmentsResponse)
	type ask struct {
		topic      string
		partitions []int32
	}
	var asks []ask
	if req.Topics == nil {
		for _, name := range controller.ReassigningTopics(img) {
			asks = append(asks, ask{topic: name})
		}
	} else {
		for _, rt := range req.Topics {
			ps := rt.Partitions
			if ps == nil {
				ps = []int32{} // named with no partitions: none
			}
			asks = append(asks, ask{rt.Topic, ps})
		}
	}
	for _, a := range asks {
		ongoing := controller.ListReassignments(img, a.topic, a.partitions)
		if len(ongoing) == 0 {
			continue
		}
		st := kmsg.NewListPartitionReassignmentsResponseTopic()
		st.Topic = a.topic
		for _, o := range ongoing {
			sp := kmsg.NewListPartitionReassignmentsResponseTopicPartition()
			sp.Partition, sp.Replicas = o.Partition, o.Replicas
			sp.AddingReplicas, sp.RemovingReplicas = o.Adding, o.Removing
			if sp.AddingReplicas == nil {
				sp.AddingReplicas = []int32{}
			}
			if sp.RemovingReplicas == nil {
				sp.RemovingReplicas = []int32{}
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp
}

// completeMoves completes every reassignment whose ISR covers its target.
// The AlterPartition that grows the ISR normally completes the move itself;
// this catches the rest (a controller that took over mid-move, a proposal
// that was lost).
func (c *Controller) completeMoves() {
	recs := controller.CompleteReassignments(c.m.Image())
	if len(recs) == 0 {
		return
	}
	if _, err := c.propose(c.ctx, recs); err == nil {
		c.log.Info().Int("partitions", len(recs)).Msg("partition reassignments completed")
	}
}
