package broker

import (
	"github.com/fjordlog/fjord/broker/acl"
	"github.com/fjordlog/fjord/broker/api"
)

// BrokerRegistration: v0-4, on the CONTROLLER listener only
//
// Behaviour:
//   - A broker registers its id, incarnation, listeners, rack and
//     supported features with the active controller, which answers its
//     broker epoch (broker/ctllink/lifecycle.go sends it). A voter that does not lead the
//     quorum answers NOT_CONTROLLER.
//   - Only brokers send it: CLUSTER_ACTION on CLUSTER (or a super user).
//     Without it anyone reaching the port could register a broker id.
//
// Version notes:
//   - v1: is-migrating-zk-broker; v2: log dirs (KIP-858); v3: previous
//     broker epoch (KIP-966); v4: nothing new in the request
func init() {
	register(func(b *Broker) api.Entry {
		return api.Entry{
			Key:           62,
			Controller:    api.Versions(0, 4),
			Rule:          api.Needs("CLUSTER_ACTION on CLUSTER", 5, api.ClusterTop(acl.OpClusterAction)),
			ErrorResponse: api.TopErrorResponse,
		}
	})
}
