package active

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// The CONTROLLER listener's Kafka half serves brokers, not clients: broker
// registration and heartbeats, producer-id blocks, and the admin requests
// brokers forward, all decided by the Controller (Call); and, on any voter,
// the metadata log for broker-only nodes to follow (metalog.go); and, for
// admin clients given bootstrap.controllers, DescribeCluster of the
// controllers (describe.go). Which keys and versions it serves, who may
// send them, and what is audited are the broker's registry's
// (broker/registry.go, Config.KafkaHandler): the broker's dispatch
// authorizes a request and then hands it to Answer.

// Answer answers one request of the listener's Kafka half, already
// authorized by the caller: the metadata log's Fetch and FetchSnapshot and
// DescribeCluster from this voter, every other request through Call.
// reply gets nil when this node is not the active controller (now), or
// ctx ended or the controller closed first: the caller answers
// NOT_CONTROLLER and the broker retries at the leader. reply is called
// exactly once, from a goroutine Close waits for when the answer waits
// for the quorum: the caller's goroutine (a connection's reader) must not.
func (c *Controller) Answer(ctx context.Context, req kmsg.Request, reply func(kmsg.Response)) {
	switch r := req.(type) {
	case *kmsg.DescribeClusterRequest:
		reply(c.describeControllers(r))
		return
	case *kmsg.FetchSnapshotRequest:
		reply(c.serveMetadataSnapshot(r))
		return
	}
	if !c.spawn(func() {
		if f, ok := req.(*kmsg.FetchRequest); ok {
			reply(c.serveMetadataFetch(ctx, f))
			return
		}
		reply(c.Call(ctx, req))
	}) {
		reply(nil)
	}
}
