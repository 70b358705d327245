package admin

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordlog/fjord/broker/acl"
	"github.com/fjordlog/fjord/broker/api"
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
func listPartitionReassignmentsEntry(h Host) api.Entry {
	return api.Entry{
		Key: 46, Client: api.Versions(0, 0), Handle: bindTo(h, handleListPartitionReassignments),
		Controller:    api.Versions(0, 0),
		Rule:          api.Needs("DESCRIBE on CLUSTER", 0, api.ClusterTop(acl.OpDescribe)),
		ErrorResponse: api.TopErrorResponse,
	}
}

func handleListPartitionReassignments(h Host, cc *api.Conn, kreq kmsg.Request, respond func(kmsg.Response)) {
	req := kreq.(*kmsg.ListPartitionReassignmentsRequest)
	api.Forward(h, cc, req, api.Forwarding[*kmsg.ListPartitionReassignmentsResponse]{TimeoutMs: req.TimeoutMillis}, respond)
}
