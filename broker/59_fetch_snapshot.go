package broker

import (
	"github.com/fjordlog/fjord/broker/acl"
	"github.com/fjordlog/fjord/broker/api"
)

// FetchSnapshot: v0-1, on the CONTROLLER listener only
//
// Behaviour:
//   - A broker-only node following the metadata log from a voter fetches
//     the image as a snapshot when the log it needs has been compacted
//     (broker/ctllink/follower.go). Any voter answers, leading the quorum or not.
//   - The image holds SCRAM credentials, ACLs and dynamic configs: only
//     brokers and controllers may read it, CLUSTER_ACTION on CLUSTER (or a
//     super user), as Kafka requires for raft's own fetches.
//
// Version notes:
//   - v1: replica directory id, a tagged field (KIP-853)
func init() {
	register(func(b *Broker) api.Entry {
		return api.Entry{
			Key:        59,
			Controller: api.Versions(0, 1),
			Rule:       api.Needs("CLUSTER_ACTION on CLUSTER", 5, api.ClusterTop(acl.OpClusterAction)),
		}
	})
}
