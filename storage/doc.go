// Package storage is one partition's log on disk: segment files of record
// batches, each with a sparse offset index and a time index, recovery after a
// crash, retention, and the idempotent and transactional producers' state
// that must agree with the log (txn.go: markers, the first unstable offset,
// the aborted transaction index). For replication it keeps the leader-epoch cache, appends batches
// fetched from a leader verbatim (AppendReplica) and truncates to a
// divergence point (Truncate); it knows nothing of networking, or of how
// replicas agree.
//
// # On-disk layout
//
// Kafka's own layout, so operators' tools and habits carry over. A partition
// directory <topic>-<partition>/ holds, per segment, files named by the
// segment's base offset as 20 decimal digits:
//
//	00000000000000000000.log        record batches, exactly as Kafka stores them
//	00000000000000000000.index      sparse offset index: 8-byte entries
//	00000000000000000000.timeindex  sparse time index: 12-byte entries
//	00000000000000000000.txnindex   aborted transactions whose marker is in the segment: 34-byte entries;
//	                                only for a segment that holds such an abort
//	00000000000000001234.snapshot   producer state as of offset 1234
//	leader-epoch-checkpoint         leader epochs and where each began
//	log-start-offset                the log start offset, when DeleteRecords moved it
//	                                inside the first segment (logstart.go)
//	partition.metadata              the owning topic's id, written by the broker (partdir.go)
//	clean-shutdown                  present only after a clean close
//
// Files are created 0600 and directories 0700 (FileMode, DirMode): the
// records are the cluster's data, readable by the broker's user alone.
//
// A .log file is record batches (magic 2) back to back, the bytes a
// producer sent with the broker's fields stamped (base offset, leader
// epoch, and the timestamp for LogAppendTime topics); the batch and record
// layout, CRC-32C included, is drawn in package recordbatch, the codec
// this package, the controller and the coordinators share.
//
// An .index entry is int32 offset relative to the segment base, then int32
// byte position of a batch in the .log whose last offset is that offset; one
// entry per log.index.interval.bytes of log. A .timeindex entry is int64 the
// largest timestamp seen so far in the segment, then int32 the relative offset
// of the batch that carried it; entries are appended only when that maximum
// grows. Indexes are derived data: recovery rebuilds them from the .log.
// The active segment's are served from memory, its files written whole
// when it is sealed and at a clean close (and stale or absent meanwhile);
// a sealed segment's are read from its files into the node's IndexCache,
// within its budget. No index file is held open (see FileCache).
//
// A control batch (attributes bits 4 and 5: transactional, control) is a
// transaction marker, written by the leader (AppendMarker) in the form
// recordbatch.BuildMarker gives: one record holding Kafka's
// ControlRecordKey and EndTxnMarker, the producer id and epoch of the
// transaction it ends, both timestamps the time it was written.
//
// A .txnindex entry is Kafka's AbortedTxn: int16 version (0), int64
// producerId, int64 firstOffset (the transaction's first batch), int64
// lastOffset (its abort marker, in this segment), int64 lastStableOffset
// (the first offset of the oldest transaction still open once the marker
// was appended, or the marker's offset + 1), big-endian, in marker order.
// The file is created at the segment's first abort that ends a transaction,
// so a topic without aborted transactions has none.
//
// A .snapshot file (Fjord's own format, version 3; versions 1 and 2, which
// came before transactions and version 2 before lastAppendMs, are still
// read) is:
//
//	"FJPS" | uint8 version | int64 endOffset | uint32 producerCount | producers... | uint32 CRC-32C of all before
//	producer: int64 id | int16 epoch | int64 lastAppendMs | int32 coordinatorEpoch | int64 txnFirstOffset |
//	          uint8 n | n × (int32 firstSeq, int32 lastSeq, int64 firstOffset, int64 lastOffset)
//
// coordinatorEpoch is that of the producer's last marker (-1: none);
// txnFirstOffset is the first offset of its open transaction (-1: none),
// which may lie below the log start (retention does not wait for
// transactions, as in Kafka). Producers idle for producer.id.expiration.ms
// (one day) are dropped at segment rolls and retention checks, except
// those with a transaction open.
//
// leader-epoch-checkpoint is Kafka's own text format (version 0), so Kafka's
// tools read it: lines "0", the entry count, then one "<epoch> <startOffset>"
// per leader epoch that wrote the log, both strictly increasing. It is
// derived data (each batch carries its partitionLeaderEpoch): written
// atomically before a new epoch's first batch, rebuilt from the batch
// headers when missing, unreadable or behind the log (see epochs.go).
//
// # Offsets and gaps
//
// Offsets strictly increase from batch to batch, within a segment and
// across segments, but need not be contiguous: compaction (Compact)
// removes records, and whole batches, from sealed segments, and a follower
// copies its leader's log as it is, gaps included (AppendReplica), where
// they may land in its active segment and between its segments. So any
// segment may have gaps, and the log end offset is the last batch's last
// offset + 1. A Read of an offset inside a gap returns the batch after it,
// as Kafka does; Truncate to an offset inside one ends the log after the
// batch before it. Recovery accepts gaps and checks only what a gap cannot
// excuse: a base offset (not under the CRC) must go forward and end within
// the int32 offsets relative to the segment base that the indexes hold
// (see plausibleBase in segment.go).
//
// # Durability
//
// Append writes to the page cache; Flush makes everything appended so far
// durable with fdatasync, and concurrent Flush callers share one sync (group
// commit). The durable end offset is published so the broker can hold back
// acknowledgements and consumer visibility until data is on disk.
//
// Names are made durable as POSIX requires, by syncing the directory that
// holds them, never by relying on a file system that commits metadata in
// order (ext4's journal mostly does): a new partition directory (in its
// parent), a new segment's files, a renamed snapshot, epoch checkpoint or
// partition.metadata, a compacted segment swapped in, truncation's
// removals, and a deleted partition directory's rename
// (DeletePartitionDir).
// Retention's removals are not synced: a crash may bring deleted segments
// back, whole and unchanged, for the next retention check (a segment's files
// go .log first and .txnindex last, and Open removes a .txnindex without its
// .log, so none outlives its segment).
//
// Tiered storage (KIP-405) reaches the log through one hook, Config.Tier
// (TierRetention) with Log.SetRemoteCopiedEnd: a tiered log keeps every
// segment the remote store does not hold yet, and applies
// local.retention.ms/bytes to the rest. Copying segments and deleting
// remote ones is broker/tier's; storage knows no store (tiered.go is what
// it shows of a log to the copy).
//
// # What recovery trusts
//
// Open trusts a sealed segment's .log and indexes once their checks pass
// (the indexes are cross-checked against the .log, and rebuilt if they
// disagree), and the active segment only after a clean shutdown; otherwise
// the active segment is read batch by batch, CRC included, cut at the first
// bad batch, and its indexes rebuilt. Producer state is the newest readable
// snapshot at or below the log end, then a replay of the batches from its
// offset on, which also rebuilds the aborted transaction index entries of
// the markers it replays. A .txnindex cannot be checked against its segment
// alone (an entry's first offset and last stable offset depend on the log
// before it), so its entries are trusted exactly where a snapshot vouches
// for them: every entry below a snapshot's offset was fsynced, and its name
// made durable, before that snapshot was written (a roll syncs the old
// segment's .txnindex before the new segment's snapshot, Close every one
// before its own). Entries at or past the snapshot recovery starts from are
// replaced by the replay's, and the file rewritten and fsynced; a trusted
// entry that fails its checks (damage) has Open remove every snapshot and
// replay the whole log instead. A failed .txnindex write fails the log, so
// that a segment is never sealed without an entry.
//
// # File system
//
// Every file operation goes through FS (vfs.go): OSFS, the operating
// system's, by default; MemFS in tests. MemFS.CrashClone gives what a power
// loss would leave under those rules (each file as of its last sync, each
// directory's names as of its last sync, maybe some of what came after),
// and TestCrashRecovery crashes random workloads with it at every kind of
// step, recovery included, and checks that no acknowledged record is lost
// and none invented. ErrorFS (errorfs.go) wraps any FS and fails chosen
// operations on chosen paths (EIO, ENOSPC, a failed directory sync), or
// stalls them (Fault.Delay: an fsync that hangs), so tests check what a
// sick disk does: TestSyncFailureStopsTheLog (a failed fdatasync stops
// the log, and a power loss right after keeps every acknowledged batch),
// TestPartitionMetadataFaults (a failure at any step of replacing
// partition.metadata leaves the old id or the new one) and TestErrorFSStall
// (a stalled fsync shows in Log.SyncStalledFor, which the broker's stall
// check reads, and loses nothing). A log that failed (Log.Failed) takes no
// appends until it is closed and opened again; the broker then repairs it
// (broker/replica/failure.go), setting a directory aside with SetAsideDir
// when its disk answered EIO.
package storage
