// Package active is a node's controller role: its member of the metadata
// quorum, the active controller (the one decider of a Fjord cluster, which
// runs on every voter and acts only while its node leads the quorum), and
// the CONTROLLER listener both serve on.
//
// The active controller answers the requests brokers send it on the
// CONTROLLER listener: BrokerRegistration, BrokerHeartbeat,
// AllocateProducerIDs, CreateTopics, DeleteTopics, CreatePartitions,
// AlterPartition, ElectLeaders, IncrementalAlterConfigs, AlterConfigs,
// AlterClientQuotas, AlterUserScramCredentials,
// AlterPartitionReassignments, ListPartitionReassignments, CreateAcls and
// DeleteAcls. Package controller decides each (a controller.Decision);
// this package does the I/O around the decision: it reads the clock once
// per request, draws fresh topic ids, proposes each round of the
// decision's records through the quorum member (controller/node) as one
// batch, waits for them to apply, logs the decision's notes and answers.
// Most requests are one round; AlterPartition takes another for a
// partition named again and CreatePartitions one per topic. Between
// requests it fences brokers whose sessions expired or whose listeners
// refuse connections, completes reassignments whose ISR has caught up
// and, if configured, moves leaderships back to preferred replicas: each
// a pure decision of package controller too, proposed on its own.
//
// # API
//
// Start(Config) opens the raft log and joins the quorum; Serve starts
// deciding and serving the CONTROLLER listener's Kafka half; Close stops
// both and closes the log. Call is the in-process way to the decisions;
// Answer is the listener's, behind the broker's dispatch
// (Config.KafkaHandler), which authorizes and audits every request through
// the broker's API registry first: this package serves no Kafka request by
// itself. Beside each answer, Call returns the metadata offset from which
// the records it committed are in the image; Answer carries it to the
// forwarding broker in a tagged field (OffsetTag), which TakeOffset reads
// and removes, so the broker answers its client once its own image has
// reached that offset. Image, WaitFor and Leader expose the applied
// metadata log, and MetadataTopic names the log for followers.
//
// # Files
//
//   - config.go: Config, a plain struct the broker fills from its own
//     configuration.
//   - controller.go: Controller, Start, Serve, Close; raft ids (node.id+1).
//   - loop.go: the owner goroutine (run) with its tick (session expiry,
//     preferred leaders, completed reassignments), Call, the one way in,
//     and propose, the one way to the quorum.
//   - decide.go: one request's I/O: the clock, topic ids, the rounds of
//     its controller.Decision proposed and waited for, its notes logged.
//   - watch.go: the watch of every unfenced broker's listeners that fences
//     a broker whose process is gone.
//   - listener.go: Answer, the CONTROLLER listener's Kafka half after the
//     broker's dispatch: the metadata log, DescribeCluster, or Call; the
//     offset's tagged field (OffsetTag, TakeOffset).
//   - describe.go: DescribeCluster of the controllers (KIP-919).
//   - metalog.go: the metadata log served to broker-only nodes (Fetch and
//     FetchSnapshot of __cluster_metadata-0).
//   - mux.go: the listener split by first byte between raft (node.Preamble)
//     and Kafka; a raft connection is counted against a bound, and
//     authenticated and authorized, before it reaches raft.
//   - raftauth.go: the SASL exchange of raft connections, both sides.
//
// Dependencies point one way: this package imports controller,
// controller/node, controller/quorum, protocol and storage/recordbatch
// (the record batch format of the shipped log), never broker or storage
// (deps_test.go); broker reaches it
// through small interfaces of its own (a metadata log, an active
// controller) and builds it in one place (broker/quorum.go).
package active
