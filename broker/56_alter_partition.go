package broker

import (
	"github.com/fjordlog/fjord/broker/acl"
	"github.com/fjordlog/fjord/broker/api"
)

// AlterPartition: v2-3, on the CONTROLLER listener only
//
// Behaviour:
//   - A partition leader's proposal of a new ISR (or ELR), decided by the
//     active controller against the partition epoch it carries (stale ones
//     are refused), batched per request (replicamgr/isr.go sends them). A voter that
//     does not lead the quorum answers NOT_CONTROLLER.
//   - Only brokers send it: CLUSTER_ACTION on CLUSTER (or a super user),
//     as Kafka's controllers require.
//
// Version notes:
//   - v2: topic ids (KIP-516); v3: broker epochs of ISR members (KIP-903,
//     NewEpochISR)
func init() {
	register(func(b *Broker) api.Entry {
		return api.Entry{
			Key:           56,
			Controller:    api.Versions(2, 3),
			Rule:          api.Needs("CLUSTER_ACTION on CLUSTER", 5, api.ClusterTop(acl.OpClusterAction)),
			ErrorResponse: api.TopErrorResponse,
		}
	})
}
