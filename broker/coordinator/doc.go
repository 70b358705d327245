// Package coordinator is a broker's group coordinator: the consumer groups
// this node coordinates and their committed offsets, kept in memory and
// backed by the offsets topic (__consumer_offsets). The transaction
// coordinator is elsewhere (broker/txn, broker/txncoord); this package
// holds only the transactional offset commits waiting for their
// transaction's marker.
//
// A node coordinates the groups of the offsets partitions it leads. A group
// lives on partition abs(javaHashCode(group id)) % partitions, as in Kafka,
// so placement is the same as a Kafka cluster's. The coordinator learns
// which offsets partitions are local from the broker (Follow, after every
// metadata image and every change of a local offsets replica's role); when
// this node gains a partition's leadership it reads the partition's log
// back (the offsets, and the groups stored there) before it serves those
// groups, and when it loses it, it forgets them. Meanwhile requests for
// them fail with ErrLoading or ErrNotCoordinator, which the broker maps to
// Kafka error codes.
//
// Parts:
//
//   - Membership is the deterministic state machine of package group, one
//     per classic group, of group/consumer per KIP-848 consumer group and
//     of group/share per KIP-932 share group (nextgen.go, consumers.go,
//     shares.go: their records are committed before a heartbeat is
//     answered). A classic group with members and a consumer group convert
//     into each other online (KIP-848's upgrade and downgrade, nextgen.go:
//     upgradeLocked, maybeDowngradedLocked), and a consumer group serves
//     the classic APIs of its classic members (WithClassic); groupTable (groups.go) supplies the clock (one goroutine
//     sleeping until the earliest deadline of any group), serializes calls
//     into the groups and delivers the replies they produce.
//
//   - offsetStore (offsets.go) holds the committed offsets. A commit is
//     appended to the group's offsets partition as its leader, made durable
//     and committed like an acks=all produce (every in-sync replica has it),
//     and only then applied to the table and acknowledged.
//
//   - Loading (load.go) replays a partition's log into the table, in log
//     order; expiry (expiry.go) deletes the offsets of groups without
//     members once offsets.retention.minutes have passed (KIP-211).
//
//   - Transactional offset commits (txnoffsets.go) wait, per offsets
//     partition and producer, for their transaction's marker, which
//     applies or drops them (TxnCommit, TxnCompleted).
//
//   - The group APIs' room: each Kafka key about groups is one file here,
//     NN_name.go, with its registration (versions, rule, handler) for the
//     node's API registry (package broker/api); api.go gathers them
//     (Entries) and states what they need of the node (APIHost).
//
// Files: coordinator.go (Coordinator, Host, Config, Follow, the API the
// broker calls), groups.go, offsets.go, load.go, expiry.go, txnoffsets.go
// as above, metrics.go (the counts kafka_consumergroup_* series read),
// api.go and the group APIs: 08_offset_commit.go, 09_offset_fetch.go,
// 11_join_group.go, 12_heartbeat.go, 13_leave_group.go, 14_sync_group.go,
// 15_describe_groups.go, 16_list_groups.go, 42_delete_groups.go,
// 47_offset_delete.go, and those of KIP-848 and KIP-932 groups (68, 69,
// 76, 77; nextgen.go, nextgen_api.go, shares.go). The share-group offsets
// APIs, 90_describe_share_group_offsets.go,
// 91_alter_share_group_offsets.go and 92_delete_share_group_offsets.go,
// share shareoffsets.go: a share-partition's start offset is state of the
// share coordinator (broker/sharecoord), which they reach through
// APIHost.ShareStates.
//
// Coordinator owns both parts; the relation between them is one way:
// groupTable stores a group that settles through offsetStore, and the
// Coordinator does what involves both (loading a partition, unloading its
// groups, listing groups, expiry). The broker reaches the coordinator only
// through its exported API and the entries it registers, and gives it what
// it needs through Host (its tracked goroutines, its handling of a damaged
// log), APIHost and Config; this package never imports the broker.
//
// # Records
//
// The offsets topic holds Kafka's own record formats (kmsg), so Kafka's
// tools can read it. Every key starts with a big-endian int16 version:
//
//	key version 0 or 1: OffsetCommitKey   group, topic, partition
//	    value:          OffsetCommitValue v3: offset, leader epoch,
//	                    metadata, commit timestamp (ms); written as key v1
//	key version 2:      GroupMetadataKey  group
//	    value:          GroupMetadataValue: protocol, generation, leader,
//	                    members with their metadata and assignments
//	a null value (tombstone) deletes the key
//
// The topic is compacted (cleanup.policy=compact, retention.ms=-1), which
// keeps it small; a load applies every record in log order, so the latest
// of each key wins. Records whose key version is unknown, or that do not
// decode, are skipped.
//
// # Locks
//
//	groupTable.mu -> offsetStore.mu -> replica.Partition.roleMu (read)
//	              -> storage.Log.mu
//
// A group that settles has its metadata record appended under
// groupTable.mu, and a commit is appended under offsetStore.mu (a pwrite
// each, never an fsync); nothing waits on the network or an fsync under
// either. See docs/lock-order.md.
package coordinator
