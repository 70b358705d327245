package broker

import (
	"github.com/fjordlog/fjord/broker/acl"
	"github.com/fjordlog/fjord/broker/api"
)

// AllocateProducerIDs: v0, on the CONTROLLER listener only
//
// Behaviour:
//   - A broker asks the active controller for its next block of producer
//     ids (InitProducerId draws from it); the block is committed to the
//     metadata log before the answer, so no id is handed out twice. A
//     voter that does not lead the quorum answers NOT_CONTROLLER.
//   - Only brokers send it: CLUSTER_ACTION on CLUSTER (or a super user).
func init() {
	register(func(b *Broker) api.Entry {
		return api.Entry{
			Key:           67,
			Controller:    api.Versions(0, 0),
			Rule:          api.Needs("CLUSTER_ACTION on CLUSTER", 3, api.ClusterTop(acl.OpClusterAction)),
			ErrorResponse: api.TopErrorResponse,
		}
	})
}
