package broker

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordlog/fjord/broker/acl"
)

// ListPartitionReassignments: v0
//
// Behaviour:
//   - Forwarded to the active controller, which answers from its image:
//     every partition with a reassignment in progress (null topics), or
//     those among the named partitions, each with its replicas (the target
//     followed by the replicas leaving), adding and removing replicas.
//     Unknown topics and partitions and partitions not moving are left
//     out, as Kafka does.
//
// Version notes:
//   - v0: flexible (KIP-455)
func init() {
	register(api{
		key: 46, client: versions(0, 0), handle: handleListPartitionReassignments,
		controller:    versions(0, 0),
		rule:          authzRule{"DESCRIBE on CLUSTER", 0, clusterTop(acl.OpDescribe)},
		errorResponse: topErrorResponse,
	})
}

func handleListPartitionReassignments(b *Broker, cc *connCtx, kreq kmsg.Request, respond func(kmsg.Response)) {
	req := kreq.(*kmsg.ListPartitionReassignmentsRequest)
	forward(b, cc, req, forwarding[*kmsg.ListPartitionReassignmentsResponse]{timeoutMs: req.TimeoutMillis}, respond)
}
