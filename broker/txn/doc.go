// Package txn is the transaction coordinator's deterministic core: one
// state machine per transactional id, and a Table of them for one
// __transaction_state partition (Kafka's TransactionCoordinator,
// TransactionMetadata, TransactionStateManager and the bookkeeping of
// TransactionMarkerChannelManager). It reads no clock and does no I/O: time
// comes in as now (Unix milliseconds) on every call, and every call returns
// a Ready with what the caller must do: records to append, answers to
// deliver, markers to send, producer ids to fetch. Given the same calls, a
// Table returns the same Readys byte for byte (sim_test.go).
//
// # Driving it
//
// The broker owns one Table per __transaction_state partition it leads,
// on one goroutine (calls are not concurrent), and:
//
//   - routes InitProducerId (with a transactional id), AddPartitionsToTxn
//     (each transaction of a v4+ request separately), AddOffsetsToTxn and
//     EndTxn to the table of abs(javaHashCode(id)) % partitions, with a
//     token for the connection's responder; Describe and List answer
//     DescribeTransactions and ListTransactions directly;
//   - appends each Ready.Appends record to the partition (acks=all,
//     uncompressed) and reports it: RecordWritten once it is committed (in
//     every in-sync replica), RecordFailed otherwise, exactly once per
//     token;
//   - sends each Ready.Markers through WriteTxnMarkers to the partitions'
//     leaders and reports each partition: MarkersWritten (or when its topic
//     is gone), MarkerFailed with the error;
//   - delivers each Ready.Answers answer (they are final);
//   - on Ready.FetchProducerIDs, gets a block of producer ids from the
//     controller and calls SupplyProducerIDs, or ProducerIDsFailed;
//   - calls Tick at NextDeadline (and whenever convenient);
//   - on becoming the partition's leader: BeginLoad(leader epoch),
//     LoadRecords (the log from its start, in order), FinishLoad (or Load
//     with everything at once); on losing it: Unload.
//
// # States
//
//	           InitProducerId
//	(new id) -----------------> Empty <---------------------+
//	                              |                         |
//	             AddPartitions,   |                         | InitProducerId
//	             AddOffsets       v                         | (epoch + 1)
//	                 +-------> Ongoing -------------+       |
//	        add more |            |  |  EndTxn(commit)      |
//	                 +------------+  |              v       |
//	                                 |        PrepareCommit |
//	    EndTxn(abort), the timeout,  |              | markers
//	    InitProducerId (epoch + 1)   |              v       |
//	                                 |        CompleteCommit+
//	                                 v                      |
//	                           PrepareAbort                 |
//	                                 | markers              |
//	                                 v                      |
//	                           CompleteAbort ---------------+
//
// CompleteCommit and CompleteAbort take the same requests as Empty:
// AddPartitions or AddOffsets start the next transaction (Ongoing),
// InitProducerId bumps the epoch (Empty). Empty, CompleteCommit and
// CompleteAbort idle for transactional.id.expiration.ms get a tombstone,
// and then the id is gone. An EndTxn v5 bumps the epoch at Prepare*.
//
// Kafka's PrepareEpochFence is not a state here: a fence (the timeout, or
// an InitProducerId over an Ongoing transaction) writes PrepareAbort with
// the bumped epoch in one step; Dead is the tombstone in flight.
//
// # Records
//
// Every transition is one record in the id's partition, Kafka's own
// format, so Kafka's tools (kafka-dump-log --transaction-log-decoder) read
// it. Integers are big-endian.
//
//	key   TxnMetadataKey v0:  int16 version=0 | int16 len | transactional id
//	value TxnMetadataValue v0 (Config.LegacyValues) or v1:
//	      int16 version | int64 producer id | int16 producer epoch
//	      | int32 transaction timeout ms | int8 state
//	      | partitions: array of (topic string, array of int32), null in Empty
//	      | int64 last update ms | int64 start ms (-1 in Empty)
//	      v1 is flexible (compact arrays and strings, uvarint lengths+1,
//	      tag buffers) and adds tagged fields: 0 previous producer id,
//	      1 next producer id, 2 client transaction version (KIP-890);
//	      each is left out at its default (-1, -1, 0).
//	a null value (tombstone) removes the id.
//
// States are numbered as Kafka numbers them: 0 Empty, 1 Ongoing, 2
// PrepareCommit, 3 PrepareAbort, 4 CompleteCommit, 5 CompleteAbort (6 Dead
// and 7 PrepareEpochFence are never written). The partition is compacted;
// a load applies the records in log order, so each id's last record wins.
// Kafka's in-memory lastProducerEpoch (used to recognize retries) is not
// in the record, as in Kafka, so a retry spanning a failover can be
// fenced.
//
// # What is durable before what
//
//   - An answer that reports a change (a producer id and epoch, added
//     partitions, an end decision) goes out only after its record is
//     committed: acknowledging first would lose the change, or a commit
//     decision, on failover.
//   - Markers go out only after the Prepare* record is committed: once it
//     is, the decision is final, and any coordinator that loads the log
//     finishes it the same way.
//   - Complete* is written only after every partition's marker is written
//     (or needs none); the id takes requests for a new transaction only
//     then.
//   - An id is forgotten only after its tombstone is committed.
//   - At most one record per id is in flight (Kafka's pendingState);
//     requests that would write another get CONCURRENT_TRANSACTIONS.
//
// A record that fails leaves the id's state as it was (the answer is the
// retriable error Kafka maps the append error to); one in flight at an
// unload is forgotten, and its request answered NOT_COORDINATOR. If such a
// record landed after all, the successor loads it: nothing was
// acknowledged on it, and the client's retry meets it.
//
// # Forced exits
//
// No state waits for an event that may never come:
//
//   - Empty, CompleteCommit, CompleteAbort: transactional.id.expiration.ms
//     removes the id.
//   - Ongoing: transaction.timeout.ms (from the first partition added)
//     aborts it with an epoch bump, which fences the producer.
//   - PrepareCommit, PrepareAbort: markers are sent again after a failure
//     or MarkerTimeoutMs without a report, with a backoff capped at
//     MarkerBackoff.Max, forever: the coordinator never gives up on a
//     decision. A partition whose topic is gone, or whose leader says it
//     needs no marker from this coordinator, counts as done.
//   - The coordinator's own records (a timeout abort, Complete*, a
//     tombstone) that fail are written again after WriteBackoff.
//   - A request waiting on a record is answered when the record is
//     reported, or at an unload.
//   - A producer id block that does not come is asked for again after
//     WriteBackoff; meanwhile requests that need an id get
//     COORDINATOR_LOAD_IN_PROGRESS.
//
// # Where this follows Kafka and where it does not
//
// It follows Apache Kafka's coordinator (core/.../coordinator/transaction,
// 3.9 to 4.0): the order of checks and the error codes (PRODUCER_FENCED
// becomes INVALID_PRODUCER_EPOCH for InitProducerId before v4 and the
// others before v2, as KafkaApis does), KIP-360 retries of InitProducerId,
// epoch exhaustion at 32766 (a new producer id), KIP-890 part 1
// verification and part 2 (EndTxn v5: an epoch bump at every end, retries
// recognized by the epoch before the bump, the next producer id on
// overflow). It departs where Kafka waits forever or is inconsistent:
//
//   - Kafka stops sending a transaction's markers when a leader answers
//     INVALID_PRODUCER_EPOCH or TRANSACTION_COORDINATOR_FENCED, leaving it
//     in Prepare* until the partition is loaded again; here the partition
//     counts as done and the transaction completes.
//   - A failed fence keeps its epoch bump in Kafka's memory
//     (hasFailedEpochFence); here a failed record changes nothing, and the
//     next fence bumps from the same epoch to the same value.
//   - The answer to an EndTxn v5 that overflowed the epoch carries the new
//     producer id at epoch 0 (what KIP-890 specifies, and what a retry
//     gets); Kafka at this writing answers the old id at epoch 32767.
//   - An AddPartitions without partitions is answered NONE without a
//     record (Kafka writes an Ongoing record without partitions).
//   - Timeouts and expirations happen at their deadline; Kafka checks every
//     10 s and every hour.
//   - Ongoing, Prepare* and transactions-v1 Complete* records carry the
//     id's previous producer id as the coordinator holds it (the one
//     before the last rotation); Kafka's in-memory state does the same, but
//     what it writes there is not settled across its versions.
package txn
