// Package admin is the room of the administration APIs the active
// controller decides: topics (CreateTopics, DeleteTopics,
// CreatePartitions), elections
// and reassignments, ACLs, client quotas and SCRAM credentials. Each key
// is one file, NN_name.go, headed by its versions and behaviour and
// holding its registration (versions, rule, handler, error response) for
// the node's API registry (package broker/api).
//
// A mutation is forwarded to the active controller through api.Forward
// and answered once this node's image has the records it committed, so a
// client sees its change on the broker it asked at once. Descriptions are
// answered from this node's image.
//
// What the room needs of the node is Host: forwarding, the images, the
// replica manager (the descriptor budget's refusals, DeleteTopics' wait
// for the other brokers), the running configuration (topic defaults) and
// topic-id lookup. It never imports the broker. CreateTopics is also the
// node's own way to create a topic (auto-creation, the internal topics).
//
// Files: doc.go, api.go (Host, Entries), and the APIs:
// 19_create_topics.go, 20_delete_topics.go, 29_describe_acls.go, 30_create_acls.go,
// 31_delete_acls.go, 37_create_partitions.go, 43_elect_leaders.go,
// 45_alter_partition_reassignments.go, 46_list_partition_reassignments.go,
// 48_describe_client_quotas.go, 49_alter_client_quotas.go,
// 50_describe_user_scram_credentials.go, 51_alter_user_scram_credentials.go.
package admin
