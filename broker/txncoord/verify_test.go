package txncoord

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
)

// TestProduceCode pins the mapping of the coordinator's answer to a
// produce's code, version by version, to Kafka's (AddPartitionsToTxnManager,
// then ReplicaManager's translation of coordinator errors).
func TestProduceCode(t *testing.T) {
	const none = int16(0)
	for _, c := range []struct {
		code     int16
		answered bool
		want     map[int16]int16 // produce version: code
	}{
		{none, true, map[int16]int16{3: none, 10: none, 11: none, 12: none, 13: none}},
		{none, false, map[int16]int16{3: kerr.NotEnoughReplicas.Code, 11: kerr.NotEnoughReplicas.Code, 13: kerr.NotEnoughReplicas.Code}},
		// Not in the transaction (a verify's answer): v11 added the code.
		{kerr.TransactionAbortable.Code, true, map[int16]int16{
			3: kerr.InvalidTxnState.Code, 10: kerr.InvalidTxnState.Code,
			11: kerr.TransactionAbortable.Code, 12: kerr.TransactionAbortable.Code}},
		{kerr.ProducerFenced.Code, true, map[int16]int16{3: kerr.InvalidProducerEpoch.Code, 11: kerr.InvalidProducerEpoch.Code, 13: kerr.InvalidProducerEpoch.Code}},
		{kerr.InvalidProducerEpoch.Code, true, map[int16]int16{3: kerr.InvalidProducerEpoch.Code, 13: kerr.InvalidProducerEpoch.Code}},
		{kerr.InvalidProducerIDMapping.Code, true, map[int16]int16{3: kerr.InvalidProducerIDMapping.Code, 13: kerr.InvalidProducerIDMapping.Code}},
		{kerr.InvalidTxnState.Code, true, map[int16]int16{3: kerr.InvalidTxnState.Code, 13: kerr.InvalidTxnState.Code}},
		// An add (v12+) passes CONCURRENT_TRANSACTIONS on; a verify does not.
		{kerr.ConcurrentTransactions.Code, true, map[int16]int16{
			3: kerr.NotEnoughReplicas.Code, 11: kerr.NotEnoughReplicas.Code,
			12: kerr.ConcurrentTransactions.Code, 13: kerr.ConcurrentTransactions.Code}},
		{kerr.CoordinatorLoadInProgress.Code, true, map[int16]int16{3: kerr.NotEnoughReplicas.Code, 13: kerr.NotEnoughReplicas.Code}},
		{kerr.CoordinatorNotAvailable.Code, true, map[int16]int16{3: kerr.NotEnoughReplicas.Code, 13: kerr.NotEnoughReplicas.Code}},
		{kerr.NotCoordinator.Code, true, map[int16]int16{3: kerr.NotEnoughReplicas.Code, 13: kerr.NotEnoughReplicas.Code}},
		{kerr.NetworkException.Code, true, map[int16]int16{3: kerr.NotEnoughReplicas.Code, 13: kerr.NotEnoughReplicas.Code}},
		{kerr.ClusterAuthorizationFailed.Code, true, map[int16]int16{3: kerr.InvalidTxnState.Code, 13: kerr.InvalidTxnState.Code}},
	} {
		for v, want := range c.want {
			if got := produceCode(v, c.code, c.answered); got != want {
				t.Errorf("coordinator code %d (answered %v) for Produce v%d: %d, want %d", c.code, c.answered, v, got, want)
			}
		}
	}
	for v := int16(0); v <= 13; v++ {
		if got, want := produceAddsPartitions(v), v >= 12; got != want {
			t.Errorf("Produce v%d adds partitions: %v, want %v", v, got, want)
		}
	}
}
