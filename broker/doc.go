// Package broker serves the Kafka protocol on top of the storage engine: it
// owns the client listeners, dispatches each decoded request to its handler
// (one file per API key, NN_name.go), and keeps this node's partition
// replicas (leaders and followers, their high watermarks, ISR tracking,
// waiting produces and fetches) and consumer groups.
//
// Metadata comes from the metadata log. Every node applies it to an
// immutable controller.Image (metadataLog: the node's controller role when
// it has one, else a follower fetching the log from the voters,
// metafollow.go), and publishLoop makes the local replicas match each new
// image. Changes to metadata (registration, heartbeats, topic admin, ISR
// changes, producer-id blocks) are requests to the active controller,
// carried by ctlClient: in-process when this node leads the quorum, else to
// the leader's CONTROLLER listener.
//
// The controller role itself (the quorum member, the active controller and
// the CONTROLLER listener) is package controller/active. The broker builds
// it in one place (quorum.go, from its Config) and holds it through its own
// interfaces (metadataLog, activeController); it does not import
// controller/node.
package broker
