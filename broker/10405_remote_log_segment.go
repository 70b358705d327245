package broker

import (
	"github.com/fjordlog/fjord/broker/acl"
	"github.com/fjordlog/fjord/broker/api"
	"github.com/fjordlog/fjord/protocol/fjordmsg"
)

// RemoteLogSegment (Fjord private key 10405): v0, on the CONTROLLER
// listener only
//
// Behaviour:
//   - A partition leader's proposal of one remote log segment metadata
//     record (tiered storage, KIP-405): an upload attempt's start
//     (COPY_STARTED) or its next state. The active controller decides it
//     (controller.DecideRemoteLogSegment): only the partition's leader at
//     its current leader epoch and broker epoch, states only forward.
//     Wire format: protocol/fjordmsg. A voter that does not lead the
//     quorum answers NOT_CONTROLLER.
//   - Only brokers send it: CLUSTER_ACTION on CLUSTER (or a super user),
//     as AlterPartition.
//
// Version notes:
//   - v0: the first (Kafka has no such key: its RLMM is a topic).
func init() {
	register(func(b *Broker) api.Entry {
		return api.Entry{
			Key:           fjordmsg.RemoteLogSegmentKey,
			Controller:    api.Versions(0, 0),
			Rule:          api.Needs("CLUSTER_ACTION on CLUSTER", 5, api.ClusterTop(acl.OpClusterAction)),
			ErrorResponse: api.TopErrorResponse,
		}
	})
}
