// Package discovery is the room of the APIs a client uses to find its way
// around the cluster: Metadata (brokers, topics, partitions and their
// leaders; auto-creation of topics on first use), DescribeTopicPartitions
// (KIP-966's paged topic description), DescribeCluster (KIP-700) and
// FindCoordinator (which node coordinates a group or a transactional id).
// Each key is one file, NN_name.go, headed by its versions and behaviour
// and holding its registration for the node's API registry (package
// broker/api).
//
// Every answer is built from this node's applied image, with the
// endpoints of the listener the client connected to, but one:
// FindCoordinator names a coordinator only once that coordinator has
// loaded the key's partition, and asks it over the inter-broker listener
// when it is another broker (10_find_coordinator.go says how and within
// which bounds). What the room needs of the node is Host; it never
// imports the broker.
//
// Files: doc.go, api.go (Host, Entries), 03_metadata.go,
// 10_find_coordinator.go, 60_describe_cluster.go,
// 75_describe_topic_partitions.go; tests: find_coordinator_test.go,
// describe_topic_partitions_test.go.
package discovery
