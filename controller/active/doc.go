// Package active is a node's controller role: its member of the metadata
// quorum, the active controller (the one decider of a Fjord cluster, which
// runs on every voter and acts only while its node leads the quorum), and
// the CONTROLLER listener both serve on.
//
// The active controller turns Kafka's controller requests
// (BrokerRegistration, BrokerHeartbeat, CreateTopics, DeleteTopics,
// CreatePartitions, ElectLeaders, AlterPartition, AllocateProducerIDs) into
// the pure decisions of package controller, proposes each decision's
// records through the quorum member (controller/node) as one batch, waits
// for them to apply, and answers from the image. Between requests it fences
// brokers whose sessions expired and, if configured, moves leaderships back
// to preferred replicas.
//
// # API
//
// Start(Config) opens the raft log and joins the quorum; Serve starts
// deciding and serving the CONTROLLER listener's Kafka half; Close stops
// both and closes the log. Call is the in-process way to the decisions, the
// one the listener uses too; Image, WaitFor and Leader expose the applied
// metadata log. ErrorResponse builds a controller request's error answer,
// and MetadataTopic names the log for followers.
//
// # Files
//
//   - config.go: Config, a plain struct the broker fills from its own
//     configuration.
//   - controller.go: Controller, Start, Serve, Close; raft ids (node.id+1).
//   - loop.go: the owner goroutine (run) and Call, the one way in.
//   - decide.go: the kmsg adapter, one request at a time.
//   - listener.go: the CONTROLLER listener's Kafka half: its API versions,
//     its handler, ErrorResponse.
//   - metalog.go: the metadata log served to broker-only nodes (Fetch and
//     FetchSnapshot of __cluster_metadata-0).
//   - mux.go: the listener split by first byte between raft (node.Preamble)
//     and Kafka.
//
// Dependencies point one way: this package imports controller,
// controller/node, controller/quorum, protocol and storage/recordbatch
// (the record batch format of the shipped log), never broker or storage
// (deps_test.go); broker reaches it
// through small interfaces of its own (a metadata log, an active
// controller) and builds it in one place (broker/quorum.go).
package active
