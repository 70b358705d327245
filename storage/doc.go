// Package storage is one partition's log on disk: segment files of record
// batches, each with a sparse offset index and a time index, recovery after a
// crash, retention, and the idempotent-producer state that must agree with the
// log. For replication it keeps the leader-epoch cache, appends batches
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
//	00000000000000001234.snapshot   producer state as of offset 1234
//	leader-epoch-checkpoint         leader epochs and where each began
//	partition.metadata              topic id (written by the broker)
//	clean-shutdown                  present only after a clean close
//
// A record batch (magic 2) is, big-endian:
//
//	 0  int64  baseOffset        assigned by the broker; not covered by the CRC
//	 8  int32  batchLength       bytes after this field
//	12  int32  partitionLeaderEpoch  set by the broker; not covered by the CRC
//	16  int8   magic             2
//	17  uint32 crc               CRC-32C (Castagnoli) of bytes [21, end)
//	21  int16  attributes        bits 0-2 codec, 3 timestamp type, 4 transactional, 5 control
//	23  int32  lastOffsetDelta
//	27  int64  baseTimestamp
//	35  int64  maxTimestamp
//	43  int64  producerId
//	51  int16  producerEpoch
//	53  int32  baseSequence
//	57  int32  recordCount
//	61  ...    records (compressed as a whole when the codec is not none)
//
// An .index entry is int32 offset relative to the segment base, then int32
// byte position of a batch in the .log whose last offset is that offset; one
// entry per log.index.interval.bytes of log. A .timeindex entry is int64 the
// largest timestamp seen so far in the segment, then int32 the relative offset
// of the batch that carried it; entries are appended only when that maximum
// grows. Indexes are derived data: recovery rebuilds them from the .log.
//
// A .snapshot file (Fjord's own format, version 2; version 1 lacked
// lastAppendMs and is still read) is:
//
//	"FJPS" | uint8 version | int64 endOffset | uint32 producerCount | producers... | uint32 CRC-32C of all before
//	producer: int64 id | int16 epoch | int64 lastAppendMs | uint8 n | n × (int32 firstSeq, int32 lastSeq, int64 firstOffset, int64 lastOffset)
//
// Producers idle for producer.id.expiration.ms (one day) are dropped at
// segment rolls and retention checks.
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
// parent), a new segment's files, a renamed snapshot or epoch checkpoint, a
// compacted segment swapped in, truncation's removals, and Delete's rename.
// Retention's removals are not synced: a crash may bring deleted segments
// back, whole and unchanged, for the next retention check.
//
// # File system
//
// Every file operation goes through FS (vfs.go): OSFS, the operating
// system's, by default; MemFS in tests. MemFS.CrashClone gives what a power
// loss would leave under those rules (each file as of its last sync, each
// directory's names as of its last sync, maybe some of what came after),
// and TestCrashRecovery crashes random workloads with it at every kind of
// step, recovery included, and checks that no acknowledged record is lost
// and none invented.
package storage
