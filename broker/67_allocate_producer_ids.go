package broker

import "github.com/fjordlog/fjord/broker/acl"

// AllocateProducerIDs: v0, on the CONTROLLER listener only
//
// Behaviour:
//   - A broker asks the active controller for its next block of producer
//     ids (InitProducerId draws from it); the block is committed to the
//     metadata log before the answer, so no id is handed out twice. A
//     voter that does not lead the quorum answers NOT_CONTROLLER.
//   - Only brokers send it: CLUSTER_ACTION on CLUSTER (or a super user).
func init() {
	register(api{
		key:           67,
		controller:    versions(0, 0),
		rule:          authzRule{"CLUSTER_ACTION on CLUSTER", 3, clusterTop(acl.OpClusterAction)},
		errorResponse: topErrorResponse,
	})
}
