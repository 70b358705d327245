package admin

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordlog/fjord/broker/acl"
	"github.com/fjordlog/fjord/broker/api"
)

// AlterPartitionReassignments: v0-1
//
// Behaviour:
//   - Forwarded to the active controller (controller/reassign.go). A
//     partition with target replicas T starts moving: its replicas become T
//     followed by the ones leaving, the new replicas copy the log from the
//     leader, and once all of T is in sync the controller shrinks the
//     replicas to T (leadership moves to T's first live member if the
//     leader leaves) and the departed brokers delete their copies.
//   - Null replicas cancel the partition's move: the original replicas
//     come back and the added ones are dropped (NO_REASSIGNMENT_IN_PROGRESS
//     when none is in progress). A change that would leave only dropped
//     replicas in sync is refused with INVALID_REPLICA_ASSIGNMENT: it would
//     need an unclean election, which Fjord never makes.
//   - INVALID_REPLICA_ASSIGNMENT also for an empty target, a broker twice,
//     or a broker that is not registered; UNKNOWN_TOPIC_OR_PARTITION for a
//     partition that does not exist; INVALID_REQUEST for a partition named
//     twice. The request's partitions that pass are applied together, as
//     one metadata record.
//   - The answer comes once this broker's own image shows every change.
//
// Version notes:
//   - v0: flexible (KIP-455); v1: AllowReplicationFactorChange (KIP-1101):
//     false refuses a target of another size with
//     INVALID_REPLICATION_FACTOR.
func alterPartitionReassignmentsEntry(h Host) api.Entry {
	return api.Entry{
		Key: 45, Client: api.Versions(0, 1), Handle: bindTo(h, handleAlterPartitionReassignments),
		Controller:    api.Versions(0, 1),
		Rule:          api.Needs("ALTER on CLUSTER", 4, api.ClusterTop(acl.OpAlter)),
		Mutates:       true,
		ErrorResponse: api.TopErrorResponse,
	}
}

func handleAlterPartitionReassignments(h Host, cc *api.Conn, kreq kmsg.Request, respond func(kmsg.Response)) {
	req := kreq.(*kmsg.AlterPartitionAssignmentsRequest)
	api.Forward(h, cc, req, api.Forwarding[*kmsg.AlterPartitionAssignmentsResponse]{TimeoutMs: req.TimeoutMillis}, respond)
}
