// Package partitions is the data path's room: what clients and followers
// do with partitions — produce to them, fetch from them (consumers and the
// followers that replicate them), find offsets, delete records, and
// describe their log directories and producers. Each of these Kafka keys
// is one file here, NN_name.go, with its registration (versions, rule,
// handler) for the node's API registry (package broker/api); api.go
// gathers them (Entries) and states what they need of the node (Host).
//
// The replicas themselves are elsewhere: broker/replica (a partition's
// replication state and its log) and broker/replicamgr (the node's set of
// them, the topic map the handlers read). This package turns requests
// into calls on them and their answers into responses, and keeps the hot
// paths as lean as they were in the broker: the handlers ask Host for the
// replica manager and the metrics once per request, never per partition
// or record, and Produce keeps nothing of its request once it returns, so
// the front end recycles the request's buffer.
//
// The node gives the room, through Host, its replica manager and metrics,
// the client-quota wrappers of produce and fetch, the transactional
// produce check (KIP-890: a verification, or from Produce v12 the adding
// of the partition to the transaction), the replication throttles' leader
// side, log dirs, topic-id names, the handling of a damaged log, its
// goroutines and its one mapping of errors to Kafka codes; this package
// never imports the broker.
//
// Files:
//   - doc.go: this comment.
//   - api.go: Host, Entries, the binding of handlers and rules, the
//     resolution and authorization of topics named by id (Produce and
//     Fetch v13+), the produce errors the node maps, LeaderThrottle.
//   - 00_produce.go: Produce — validation, parallel appends of wide
//     requests, group fsync (flushAll), acks=all waits.
//   - 01_fetch.go: Fetch — reads into pooled buffers (PooledFetch), long
//     polls, follower fetches and their throttle, read_committed
//     (lastStable, abortedIn), byte counts.
//   - 02_list_offsets.go: ListOffsets.
//   - 21_delete_records.go: DeleteRecords and its wait for the replicas'
//     low watermark.
//   - 23_offset_for_leader_epoch.go: OffsetForLeaderEpoch.
//   - 34_alter_replica_log_dirs.go: AlterReplicaLogDirs.
//   - 35_describe_log_dirs.go: DescribeLogDirs, and log.dirs as absolute
//     paths (logDirsAbs).
package partitions
