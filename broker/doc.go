// Package broker serves the Kafka protocol on top of the storage engine: it
// owns the listeners, dispatches each decoded request to its handler (one
// file per API key, NN_name.go), keeps the partitions of this node, their
// high watermarks and waiting fetches, and the node's view of topic metadata.
//
// A single node is its own metadata authority for now: topics and producer-id
// blocks are kept in a small durable file (metastore.go). The controller's
// replicated metadata log takes that role when clustering lands; handlers
// reach metadata only through the Broker's methods so that swap stays local.
package broker
