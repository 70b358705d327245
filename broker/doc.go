// Package broker is a node's lifecycle and its Kafka front: it owns the
// client listeners, dispatches each decoded request to its handler (one
// file per API key, NN_name.go), follows the metadata log, and wires the
// rooms that do the work:
//
//   - broker/replica: each local partition replica — its replication
//     state as a deterministic core, the driver that does the core's I/O,
//     and the follower fetchers. The broker creates, assigns and
//     unassigns replicas as images arrive (replicas.go) and does the I/O
//     they ask for: opening logs within a descriptor budget, deleting
//     them, AlterPartition (replicahosts.go, isr.go).
//   - broker/coordinator: consumer groups and committed offsets, backed by
//     the __consumer_offsets replicas (groups.go is the broker's side).
//   - controller/active: the controller role (the quorum member, the
//     active controller and the CONTROLLER listener), built in one place
//     (quorum.go) and held through the broker's own interfaces
//     (metadataLog, activeController); broker does not import
//     controller/node.
//
// Metadata comes from the metadata log. Every node applies it to an
// immutable controller.Image (metadataLog: the node's controller role when
// it has one, else a follower fetching the log from the voters,
// metafollow.go), and publishLoop makes the local replicas match each new
// image. Changes to metadata (registration, heartbeats, topic admin, ISR
// changes, producer-id blocks) are requests to the active controller, all
// carried by ctlClient: in-process when this node leads the quorum, else
// to the leader's CONTROLLER listener. A client's admin requests go
// through one helper (forward.go), which answers once this broker's image
// has reached the metadata offset the controller committed them at.
//
// Client quotas are enforced per broker from the image: produce and fetch
// byte rates, request time and connection rate, with Kafka's windows; a
// client over its quota is answered with a throttle time and its
// connection muted (protocol.Request.Mute). broker/quota is the pure
// core (the sensors, precedence, throttle times, and the replication
// throttles' token buckets); quota.go and throttle.go are the glue.
//
// Every goroutine the broker starts goes through goLoop, which Close waits
// for; one root context (Broker.ctx) ends them all.
package broker
