package active

import (
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/fjordlog/fjord/controller"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// A move is started and listed through the controller's requests, and
// completed by the tick once the image shows the ISR covering the target,
// with no AlterPartition seen by this controller (as after a failover).
func TestReassignCompletesOnTick(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newFakeMember()
		c := start(t, testConfig(), m)
		for id := int32(1); id <= 4; id++ {
			join(t, c, id)
		}
		ct := kmsg.NewPtrCreateTopicsRequest()
		rt := kmsg.NewCreateTopicsRequestTopic()
		rt.Topic, rt.NumPartitions, rt.ReplicationFactor = "t", -1, -1
		ra := kmsg.NewCreateTopicsRequestTopicReplicaAssignment()
		ra.Partition, ra.Replicas = 0, []int32{1, 2, 3}
		rt.ReplicaAssignment = append(rt.ReplicaAssignment, ra)
		ct.Topics = append(ct.Topics, rt)
		if r := ask(c, t.Context(), ct).(*kmsg.CreateTopicsResponse); r.Topics[0].ErrorCode != 0 {
			t.Fatalf("create: %+v", r)
		}

		alter := func(replicas []int32) int16 {
			req := kmsg.NewPtrAlterPartitionAssignmentsRequest()
			at := kmsg.NewAlterPartitionAssignmentsRequestTopic()
			at.Topic = "t"
			ap := kmsg.NewAlterPartitionAssignmentsRequestTopicPartition()
			ap.Partition, ap.Replicas = 0, replicas
			at.Partitions = append(at.Partitions, ap)
			req.Topics = append(req.Topics, at)
			r := ask(c, t.Context(), req).(*kmsg.AlterPartitionAssignmentsResponse)
			return r.Topics[0].Partitions[0].ErrorCode
		}
		if code := alter(nil); code != kerr.NoReassignmentInProgress.Code {
			t.Fatalf("cancel of nothing: %v", kerr.ErrorForCode(code))
		}
		if code := alter([]int32{2, 3, 4}); code != 0 {
			t.Fatalf("reassign: %v", kerr.ErrorForCode(code))
		}
		list := ask(c, t.Context(), kmsg.NewPtrListPartitionReassignmentsRequest()).(*kmsg.ListPartitionReassignmentsResponse)
		if len(list.Topics) != 1 || len(list.Topics[0].Partitions) != 1 ||
			!slices.Equal(list.Topics[0].Partitions[0].AddingReplicas, []int32{4}) {
			t.Fatalf("listed: %+v", list.Topics)
		}

		// The ISR grows to cover the target in a record this controller did
		// not decide.
		tp := m.Image().Topic("t")
		isr := []int32{1, 2, 3, 4}
		if _, err := m.Propose(t.Context(), controller.NewRecord(controller.ChangePartition{TopicID: tp.ID, Partition: 0, ISR: &isr})); err != nil {
			t.Fatal(err)
		}
		time.Sleep(2 * tickInterval)
		p, _ := m.Image().Partition(tp.ID, 0)
		if !slices.Equal(p.Replicas, []int32{2, 3, 4}) || !slices.Equal(p.ISR, []int32{2, 3, 4}) || p.Leader != 2 || p.Reassigning() {
			t.Fatalf("after a tick: %+v", p)
		}
		list = ask(c, t.Context(), kmsg.NewPtrListPartitionReassignmentsRequest()).(*kmsg.ListPartitionReassignmentsResponse)
		if len(list.Topics) != 0 {
			t.Fatalf("listed after completion: %+v", list.Topics)
		}
	})
}
