// Package ctllink is a broker's link to the controller quorum: everything
// a node sends to the active controller or fetches from the voters, and
// its membership of the cluster built on it. The controller side (the
// quorum member, the active controller, the CONTROLLER listener) is
// controller/active; this is the other end.
//
// Files:
//
//   - client.go: Client, the requests to the active controller — in
//     process when this node leads the quorum (Local), else over Kafka's
//     protocol to the leader's CONTROLLER listener, one kgo connection per
//     voter and route; Call retries while there is no controller or it
//     moves (notController), and gives back each answer at its request's
//     version with the controller's metadata offset taken out of it.
//   - requests.go: the broker's own typed requests (register, heartbeat,
//     AlterPartitions, AllocateProducerIDs, RemoteLogSegment — Fjord's
//     private key for tiered storage, protocol/fjordmsg), each checking its answer's
//     type and shape (errMalformedAnswer).
//   - follower.go: MetadataLog, the broker's view of the metadata log, and
//     Follower, which follows the log from the voters on a broker-only
//     node (Fetch and FetchSnapshot of __cluster_metadata-0).
//   - lifecycle.go: Lifecycle, register → heartbeat → unfenced, and the
//     controlled shutdown.
//
// The package takes plain values and small interfaces (Config,
// LifecycleConfig, Local, Replicas), never the broker: broker/cluster.go
// wires them from the broker's config and parts. Forwarding a client's
// admin request (broker/forward.go) stays in the broker: its steps around
// Client.Call are a handler's (the connection's context, the request's
// timeout, the registry's error responses).
package ctllink
