package broker

import (
	"github.com/fjordlog/fjord/broker/acl"
	"github.com/fjordlog/fjord/broker/api"
)

// BrokerHeartbeat: v0-1, on the CONTROLLER listener only
//
// Behaviour:
//   - A registered broker's heartbeat: it keeps its session, reports its
//     metadata offset, asks to be unfenced or to shut down (broker/ctllink/lifecycle.go). The
//     active controller answers whether it is fenced; a voter that does not
//     lead the quorum answers NOT_CONTROLLER.
//   - Only brokers send it: CLUSTER_ACTION on CLUSTER (or a super user).
//     Without it anyone could keep a dead broker unfenced.
//
// Version notes:
//   - v1: offline log dirs as a tagged field (KIP-858)
func init() {
	register(func(b *Broker) api.Entry {
		return api.Entry{
			Key:           63,
			Controller:    api.Versions(0, 1),
			Rule:          api.Needs("CLUSTER_ACTION on CLUSTER", 5, api.ClusterTop(acl.OpClusterAction)),
			ErrorResponse: api.TopErrorResponse,
		}
	})
}
