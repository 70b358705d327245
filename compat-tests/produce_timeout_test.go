package compattests

import (
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestProduceAcksAllTimeoutManyPartitions: an acks=all produce to several
// partitions whose followers are frozen answers REQUEST_TIMED_OUT for every
// partition once its timeout passes. (A timer shared by the partitions'
// waits once fired for the first only, and the answer never came.)
func TestProduceAcksAllTimeoutManyPartitions(t *testing.T) {
	fc := startFaultCluster(t, 3)
	ctx := testCtx(t, 60*time.Second)
	const topic = "acks-all-timeout"
	leader := fc.IDs()[0]
	var others []int32
	for _, id := range fc.IDs()[1:] {
		others = append(others, int32(id))
	}
	// Both partitions led by one node, followed by the two others.
	create := kmsg.NewPtrCreateTopicsRequest()
	ct := kmsg.NewCreateTopicsRequestTopic()
	ct.Topic, ct.NumPartitions, ct.ReplicationFactor = topic, -1, -1
	for p := range int32(2) {
		a := kmsg.NewCreateTopicsRequestTopicReplicaAssignment()
		a.Partition, a.Replicas = p, append([]int32{int32(leader)}, others...)
		ct.ReplicaAssignment = append(ct.ReplicaAssignment, a)
	}
	create.Topics = append(create.Topics, ct)
	create.TimeoutMillis = 10000
	cresp, err := create.RequestWith(ctx, fc.Client(leader))
	if err != nil || len(cresp.Topics) != 1 || cresp.Topics[0].ErrorCode != 0 {
		t.Fatalf("create: %v %+v", err, cresp)
	}
	fc.Await(t, 10*time.Second, fmt.Sprintf("both partitions led by node %d", leader), func() (bool, string) {
		tm := rawMetadata(t, fc.Client(leader), topic)
		if tm.ErrorCode != 0 || len(tm.Partitions) != 2 {
			return false, "not listed"
		}
		for _, p := range tm.Partitions {
			if p.Leader != int32(leader) || len(p.ISR) != 3 {
				return false, "leader or ISR not there yet"
			}
		}
		return true, ""
	})

	for _, id := range others {
		fc.Freeze(t, int(id))
	}
	defer func() {
		for _, id := range others {
			fc.Thaw(t, int(id))
		}
	}()
	req := kmsg.NewPtrProduceRequest()
	req.Version, req.Acks, req.TimeoutMillis = 9, -1, 1000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	for p := range int32(2) {
		rp := kmsg.NewProduceRequestTopicPartition()
		rp.Partition, rp.Records = p, recordBatch(t, nil, []byte("v"))
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	conn := dialRaw(t, fc.Addr(leader))
	start := time.Now()
	resp := conn.roundTrip(t, req).(*kmsg.ProduceResponse)
	t.Logf("answered in %v (timeout 1 s)", time.Since(start))
	for _, st := range resp.Topics {
		for _, sp := range st.Partitions {
			if sp.ErrorCode != kerr.RequestTimedOut.Code {
				t.Errorf("partition %d: code %d, want REQUEST_TIMED_OUT", sp.Partition, sp.ErrorCode)
			}
		}
	}
}
