// Package sharepart is the delivery state machine of one share-partition
// under KIP-932 share groups, as shipped in Kafka 4.2: for share group G,
// topic T and partition P, which records are available, acquired by which
// member until when, acknowledged or archived, and how often each was
// delivered; and the __share_group_state records that make it durable.
//
// A Partition is a plain struct: no goroutines, clocks, locks, logs or I/O.
// Time comes in as now (Unix milliseconds) on every call. The broker reads
// the partition's log, holds the lock, calls one method at a time, appends
// the returned records to the replicated state topic before it answers, and
// calls Tick at NextDeadline. Given the same calls, a Partition returns the
// same results byte for byte.
//
// # Offsets
//
//	   done         in flight (<= PartitionMaxRecordLocks records, plus gaps)     not read yet
//	--------------|--------------------------------------------------------|---------------->
//	              SPSO                                                      SPEO
//	              first record not yet done                                 next offset to consider
//
// SPSO (StartOffset) moves past every acknowledged or archived record at the
// head of the window. SPEO (EndOffset) moves when a fetch considers new
// offsets. Gaps, offsets that hold no deliverable record (compacted away,
// control batches, records of aborted transactions under read_committed),
// are archived as soon as a fetch reveals them, so they never hold SPSO
// back. Offsets a restored Partition knows nothing about are available with
// delivery count 0: a fetch delivers them, or reveals them as gaps.
//
// State is kept per run of offsets that agree on everything (state,
// delivery count, member, deadline), not per offset: a fetch of 500
// records is one run until acknowledgements or expiries make its records
// differ, and runs merge again once they agree. This is Kafka's
// InFlightBatch with per-offset state on demand, minus its one-way split.
// It keeps memory proportional to the differences in flight (at most about
// two runs per in-flight record, however large the gaps), restores a
// state of any width in time proportional to its batches, and yields
// AcquiredRecords ranges and state batches directly.
//
// # A record's life
//
//	                 Acquire: count+1, locked to the member
//	                 until now + RecordLockDurationMs
//	+-----------+ -------------------------------------> +----------+ ---+
//	| AVAILABLE |                                         | ACQUIRED |    | AckRenew:
//	+-----------+ <------------------------------------- +----------+ <--+ lock restarts
//	      |        AckRelease, lock expired (Tick),        |      |
//	      |        member gone (ReleaseMember),            |      | AckAccept
//	      |        while count < DeliveryCountLimit        |      v
//	      |                                                |  +--------------+
//	      | a gap revealed by a fetch;    the same at      |  | ACKNOWLEDGED |
//	      | count >= limit when acquired  count >= limit;  |  +--------------+
//	      v                               AckReject/AckGap |          |
//	+----------+ <-----------------------------------------+          |
//	| ARCHIVED |                                                      |
//	+----------+ ----------> SPSO moves past: no longer in flight <----+
//
// Every transition keeps or raises the delivery count; none lowers it.
//
// # Persistence
//
// The durable form of a record is its state with ACQUIRED read as
// AVAILABLE (a lock does not survive its leader), and its delivery count.
// Every step whose durable form changed, or that moved SPSO, returns one
// record: a ShareUpdate with the changed offsets as state batches and the
// new SPSO, or, every SnapshotUpdateRecordsPerSnapshot updates, a
// ShareSnapshot of everything in flight. Never-delivered available records
// are left out, as Kafka leaves them out. Restore replays a snapshot and the
// updates after it and gets a Partition whose every in-flight offset has
// the durable form the live one had: the tests check this after every step
// of random runs.
//
// The records are Kafka's (share-coordinator/src/main/resources/common/
// message, coordinator records): big-endian, a key and a value each
// prefixed by an int16, flexible value versions with compact arrays
// (unsigned varint length+1) and tagged fields (unsigned varint count, then
// per field unsigned varint tag, unsigned varint size, data), written
// with group/internal/wire as group/consumer and group/share write theirs.
//
//	key   = int16 type (0 ShareSnapshotKey, 1 ShareUpdateKey)
//	        int16 len, group id bytes | uuid topic id (16 bytes) | int32 partition
//	ShareSnapshotValue v0 = int16 version (0)
//	        int32 SnapshotEpoch | int32 StateEpoch | int32 LeaderEpoch | int64 StartOffset
//	        int64 CreateTimestamp | int64 WriteTimestamp | StateBatches | tags
//	ShareUpdateValue v0   = int16 version (0)
//	        int32 SnapshotEpoch | int32 LeaderEpoch | int64 StartOffset | StateBatches | tags
//	StateBatches = uvarint n+1, n times: int64 FirstOffset | int64 LastOffset
//	        int8 DeliveryState (0 available, 2 acknowledged, 4 archived) | int16 DeliveryCount | uvarint 0
//	tags  = uvarint count; tag 0 is DeliveryCompleteCount (int32, KIP-1226), written unless -1
//	tombstone = a snapshot key with a null value
//
// # Where this follows Kafka and where it does not
//
// It follows Kafka 4.2's SharePartition and share coordinator: record
// states and their ids, available records re-acquired first and lowest
// offset first, the in-flight limit (new records only while the window is
// below group.share.partition.max.record.locks; records already in flight
// can always be fetched again), the delivery limit (a record released or
// expired after DeliveryCountLimit deliveries is archived), a member that
// leaves keeping its records' delivery counts (KAFKA-19972), 4.2's
// throttling of records near the delivery limit (a record on its last
// attempt is delivered alone), acknowledgement validation and error codes
// (INVALID_REQUEST for malformed batches and offsets past what was fetched,
// INVALID_RECORD_STATE for records not acquired by the member, the whole
// acknowledgement failing on the first error), an acknowledgement after the
// lock expired being refused, renew (KIP-1222), DeliveryCompleteCount and
// lag (KIP-1226), the snapshot cadence, and the coordinator's replay
// (updates merged by highest delivery count, then state). It departs where
// Kafka is lazy, loses information, or works in whole log batches:
//
//   - Acquisition is persisted: the step that acquires records writes
//     their new delivery count. Kafka writes nothing when it acquires, so
//     after a failover a record can be delivered again with a lower count,
//     and a poison record that crashes its consumers can outlive the
//     delivery limit. Expiry and release of an acquired record below the
//     limit then need no write at all, since the durable form is unchanged.
//   - Records already in flight are re-acquired up to MaxRecords and the
//     lock limit; Kafka caps them by the window's remaining room while it
//     has any.
//   - Limits are exact: at most MaxRecords records are acquired (Kafka's
//     default batch_optimized mode hands out whole log batches beyond it),
//     and the in-flight limit never lets more than PartitionMaxRecordLocks
//     records be acquired at once, even after a Restore under a lower limit.
//     Throttling halves MaxRecords rather than the in-flight batch's size.
//   - Gaps are archived by the broker's account of the log (Fetch.Records),
//     not reported by the client as acknowledge type 0; a client that does
//     acknowledge them as gaps is still answered as Kafka answers.
//   - An available record whose delivery count already reached the limit
//     (only after a Restore under a lower limit) is archived rather than
//     delivered once more.
//   - A moved log start offset (AdvanceLogStart) drops in-flight records
//     below it at once, acquired ones included, and writes the new SPSO at
//     once; Kafka archives the available ones, lets the acquired ones time
//     out, and writes the start offset with the next acknowledgement.
//   - Acknowledgement batches may not overlap at all; Kafka lets a batch
//     start on its predecessor's last offset.
//   - ResetStartOffset and Delete are refused while a member holds records;
//     Kafka refuses AlterShareGroupOffsets and DeleteShareGroupOffsets while
//     the group has members, which the group coordinator checks.
//   - Restore writes a snapshot carrying the new leader epoch (Kafka's
//     readState raises the stored leader epoch with an update). A write
//     that fails is not rolled back here: the caller drops the Partition
//     and restores it from what was written.
//   - Kafka's group.share.* property ranges are the broker's to enforce;
//     Config accepts any value the state machine can work with.
package sharepart
