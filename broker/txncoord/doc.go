// Package txncoord is the transaction room: a broker's transaction
// coordinator, and the Kafka APIs of transactions, which it serves. The
// coordinator runs the state machines of package txn for the
// __transaction_state partitions this node leads, and does their I/O. A
// transactional id lives on partition abs(javaHashCode(id)) % partitions,
// as in Kafka, and is coordinated by that partition's leader.
//
// For each led partition it keeps one txn.Table and:
//
//   - loads it when this node gains the leadership (the partition's log,
//     from its start, in order) and unloads it when it loses it;
//   - appends the records a Table asks for to the partition as its leader,
//     waits until they are committed (durable on every in-sync replica,
//     like an acks=all produce), and reports them written or failed;
//   - sends the transaction markers a Table asks for, through
//     WriteTxnMarkers to each partition's leader (Host.WriteMarkers), and
//     reports each partition;
//   - fetches producer id blocks from the controller (Host);
//   - ticks each Table at its next deadline from one timer goroutine.
//
// Calls into a Table are serialized by that partition's mutex, held only
// for the pure call; the I/O a call asks for runs after the mutex is
// released, on the host's tracked goroutines. The package never imports
// the broker: it reaches it through Host.
//
// # The APIs
//
// The room owns the API keys of transactions, one file per key headed by
// its versions and behaviour, with its handler and its authorization
// rule: InitProducerID (idempotent producers' ids included), the
// producer's AddPartitionsToTxn, AddOffsetsToTxn, EndTxn and
// TxnOffsetCommit, the coordinators' WriteTxnMarkers, and KIP-664's
// DescribeProducers, DescribeTransactions and ListTransactions. Entries
// registers them in the node's API registry (package broker/api), bound
// to an APIHost: what they need of the broker (this coordinator, the
// local replicas and image, the group coordinator's transactional
// offsets, requests to other brokers). The produce path stays in the
// broker, but asks this package whether a transactional batch may open a
// transaction (VerifyProduce, KIP-890 part 1), which from Produce v12
// adds the partition to the transaction (part 2).
//
// # Locks
//
//	Coordinator.mu -> part.mu (never the other way; part.mu is held for a
//	Table call only, never across I/O); Coordinator.pids is a leaf.
//
// # Files
//
//   - doc.go: this comment.
//   - txncoord.go: Coordinator, Host, Config; the requests the APIs hand
//     to the tables, appends, markers and the timer.
//   - load.go: Follow, loading and unloading led partitions.
//   - entries.go: APIHost, Offsets and Entries, the room's registrations.
//   - verify.go: VerifyProduce, a produce's check with the coordinator
//     (or its add of the partition), and the mapping of its answer to
//     Produce codes.
//   - 22_init_producer_id.go (and AllocProducerID),
//     24_add_partitions_to_txn.go, 25_add_offsets_to_txn.go, 26_end_txn.go,
//     27_write_txn_markers.go (and WriteMarkers, which Host.WriteMarkers
//     uses for this node's own markers), 28_txn_offset_commit.go,
//     61_describe_producers.go, 65_describe_transactions.go,
//     66_list_transactions.go: one API key each.
//
// # Tests
//
// rig_test.go runs a Coordinator against real replicas of the topic
// (replica.Partition over storage logs on a MemFS, committed when the test
// has the followers fetch) and a fake Host, in synctest bubbles:
// append_test.go (records, their commit and their failures),
// markers_test.go (grouping by leader, retries, re-routing), load_test.go
// (loads, unloads, failover). entries_test.go checks that Entries binds
// its host without calling it; the APIs' rules are run by the broker's
// registry tests (broker/authz_test.go, broker/securitydoc_test.go).
package txncoord
