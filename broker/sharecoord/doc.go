// Package sharecoord is a broker's share coordinator (KIP-932, as shipped
// in Kafka 4.2): the durable state of share-partitions (share group,
// topic, partition: which records are done, and how often each in-flight
// one was delivered), kept in memory and backed by the internal topic
// __share_group_state. Share-partition leaders (broker/sharefetch) hold
// the live delivery state; they make it durable here, through the
// Persister (sharestate.Persister), which calls this node's Coordinator or
// another node's over Kafka's RPCs (InitializeShareGroupState,
// ReadShareGroupState, WriteShareGroupState, DeleteShareGroupState,
// ReadShareGroupStateSummary), which this package also serves (its room).
//
// # Placement
//
// A share-partition's state lives on state partition
// abs(javaStringHash("group:topicId:partition")) % partitions, the topic
// id written as Kafka's Uuid.toString (key.go), exactly where Kafka puts
// it; the node that leads that partition is its coordinator, which
// FindCoordinator (key type 2, broker/discovery) names.
//
// # Leading a state partition
//
// As the group coordinator (broker/coordinator) does with the offsets
// topic: the broker reports the state topic's local replicas (Follow,
// after every metadata image and every role change); a partition this
// node begins to lead is loaded in the background (its committed log
// replayed into a table) and served once loaded; one it stops leading is
// forgotten at once. Meanwhile its keys answer ErrLoading or
// ErrNotCoordinator, which tell a caller to retry or to look again.
//
// # The state, and how it changes
//
// Each state partition's keys are a table (table.go), Kafka's
// ShareCoordinatorShard as a plain struct: an operation decides on the
// current state and returns records (ShareSnapshot, ShareUpdate,
// tombstone: group/sharepart's formats, which are Kafka's); the records
// are appended to the partition as its leader, in one batch, and replayed
// into the table under the partition's lock, so the table is always the
// replay of the log, for this node and for whichever loads the log next.
// Every answer, a refusal included, waits until the log is committed up
// to the point it was decided at (fsynced, and on every in-sync replica,
// min.insync.replicas of them, for an answer that appended), so no caller
// acts on something a failover could take back.
//
// Kafka's rules, kept: a write merges its batches into the state (the
// greater delivery count wins, then the later state) and moves the start
// offset; every share.coordinator.snapshot.update.records.per.snapshot
// updates the key gets a snapshot of its merged state instead. A read by
// a leader of a newer leader epoch records that epoch (durably, before
// the state is handed over); from then on a read or write with an older
// epoch is FENCED_LEADER_EPOCH. Only an initialization sets the state
// epoch; a write with an older one is FENCED_STATE_EPOCH. A read or write
// of a key without state is INVALID_REQUEST (ErrUninitialized, a
// sharestate.ErrNoState).
//
// # Pruning
//
// The topic is not compacted (an update is a delta on the snapshot before
// it): cleanup.policy=delete, retention.ms=-1 (TopicConfigs), and the
// coordinator moves each led partition's log start up to the oldest
// committed record a live key still needs (prune.go), writing fresh
// snapshots of quiet keys so that they do not hold it back.
//
// # Errors
//
// The broker's one mapping (broker/errors.go) must know: ErrNotCoordinator
// NOT_COORDINATOR, ErrLoading COORDINATOR_LOAD_IN_PROGRESS,
// ErrUninitialized and ErrInvalidRequest INVALID_REQUEST (ErrUninitialized
// before any mapping of sharestate.ErrNoState), ErrFencedStateEpoch
// FENCED_STATE_EPOCH, ErrUnknownTopicOrPartition
// UNKNOWN_TOPIC_OR_PARTITION, sharestate.ErrFencedLeaderEpoch
// FENCED_LEADER_EPOCH, sharestate.ErrNotAvailable
// COORDINATOR_NOT_AVAILABLE. A failed append or flush is
// ErrNotCoordinator, a write not committed in time
// sharestate.ErrNotAvailable, as Kafka's coordinators answer them.
//
// # Locks
//
//	Coordinator.mu (the parts) is never held with part.mu.
//	part.mu -> replica.Partition.roleMu (read) -> storage.Log.mu
//
// A part's records are appended under part.mu (a pwrite, never an
// fsync); the flush and the wait for the replicas happen after it is
// released.
//
// Files: doc.go; config.go (Config, TopicConfigs); key.go (placement,
// FindCoordinator keys); table.go (the state machine); coordinator.go
// (Coordinator, Host, Follow, loading, the append path); ops.go (the
// operations); prune.go (pruning, cold snapshots, deleted topics);
// persister.go and remote.go (the Persister, local and over the wire);
// api.go and 83_initialize_share_group_state.go,
// 84_read_share_group_state.go, 85_write_share_group_state.go,
// 86_delete_share_group_state.go, 87_read_share_group_state_summary.go
// (the room).
package sharecoord
