// Package active is the active controller: the one decider of a Fjord
// cluster, running on every node with the controller role and acting only
// while that node leads the metadata quorum.
//
// It turns Kafka's controller requests (BrokerRegistration,
// BrokerHeartbeat, CreateTopics, DeleteTopics, CreatePartitions,
// ElectLeaders, AlterPartition, AllocateProducerIDs) into the pure
// decisions of package controller, proposes each decision's records
// through the quorum member (controller/node) as one batch, waits for them
// to apply, and answers from the image. Between requests it fences brokers
// whose sessions expired and, if configured, moves leaderships back to
// preferred replicas.
//
// # Files
//
//   - config.go: Config, the settings the decisions use, filled in by the
//     broker from its own configuration.
//   - loop.go: Controller, its owner goroutine (run) and Call, the one way
//     in.
//   - decide.go: the kmsg adapter, one request at a time.
//
// This package never imports broker; the broker reaches it through Call.
package active
