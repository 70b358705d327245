// Package controller is Fjord's cluster metadata as a deterministic state
// machine: metadata records, applied in log order, produce immutable images,
// and the active controller's decisions read an image and return records to
// propose. Nothing here starts a goroutine, reads a clock, touches a socket
// or a file, or logs; time comes in as `now` in milliseconds.
//
// # Packages
//
// This package is the bottom of the metadata quorum; each layer above adds
// one kind of I/O and imports only the layers below it:
//
//   - controller/raftlog: raft's log, hard state and snapshots in pebble.
//   - controller/quorum: one raft member (etcd raft's RawNode) whose state
//     machine is an Image; no sockets, disks, goroutines or clocks. It also
//     applies the log as shipped to nodes that follow it outside the quorum.
//   - controller/node: the I/O shell around a member: its owner goroutine,
//     the clock, raft messages over TCP, proposals, the published image.
//   - controller/active: a node's controller role: it builds the node, runs
//     the active controller (Kafka's controller requests in, decisions of
//     this package proposed through the node, answers out) and serves the
//     CONTROLLER listener. The broker holds it through interfaces of its own.
//
// # Pieces
//
//   - records.go: the record types and the Record envelope.
//   - codec.go: Encode and Decode, the log format drawn below.
//   - image.go: Image, an immutable snapshot; Apply(index, record) returns a
//     new image whose Version is index. A Batch record applies several
//     records atomically; NewBatch makes one entry of a decision's records.
//   - decision.go: Decision, how the active controller drives a request's
//     decision in rounds (Next, Proposed, Answer), and Note, what it logs.
//   - decide.go: topic admin (CreateTopics, CreatePartitions, DeleteTopics,
//     with their names, counts and manual assignments) and producer-id
//     blocks; the Decisions of those requests.
//   - place.go: Place, automatic replica placement across racks and
//     brokers.
//   - alter.go: AlterPartition (a leader's ISR change) and Resign; the
//     AlterPartition request's Decision, which batches its partitions.
//   - liveness.go: Liveness, the active controller's soft state of broker
//     heartbeats: registration, heartbeats, fencing on session expiry, on
//     refused connections and on controlled shutdown, leader elections
//     (never unclean) and preferred leaders; the Decisions of
//     BrokerRegistration, BrokerHeartbeat and ElectLeaders.
//   - reassign.go: partition reassignment (KIP-455): starting, completing
//     and cancelling moves, and the ChangeReplicas record's invariants; the
//     Decisions of AlterPartitionReassignments and
//     ListPartitionReassignments.
//   - configs.go: AlterConfigs and IncrementalAlterConfigs of topic,
//     broker and group resources against a ConfigPolicy the broker
//     supplies, and their Decisions. The image keeps topic configs in their
//     Topic, broker and group configs by resource name.
//   - quota.go: client quotas (KIP-546): the ClientQuota record, the image's
//     quotas by entity, and the AlterClientQuotas decision.
//   - scram.go: SCRAM credentials (KIP-554): the ScramCredential record,
//     the image's part, and the AlterUserScramCredentials decision.
//   - acl.go: ACL bindings: the ACLChange record, the image's part, the
//     DeleteAcls filter match, and the CreateAcls and DeleteAcls decisions.
//   - remote.go: tiered storage (KIP-405): the RemoteSegment and
//     RemoteSegmentStateChange records of remote log segment attempts
//     (COPY_STARTED → COPY_FINISHED → DELETE_STARTED → DELETE_FINISHED),
//     the image's per-partition segment lists, and DecideRemoteSegment,
//     which fences every proposal by the partition's leader and epoch.
//
// Tests: datadriven_test.go runs testdata/*.txt (alter_partition,
// create_topics, elections, fencing, acls, remote_segments), each command a request whose
// Decision is driven as the active controller drives it, printing every
// round's records and the answer; -rewrite regenerates them.
//
// # Flow
//
//	request ─► Decision.Next(img) ─► []Record ─► propose ─► commit ─► img.Apply ─► img'
//	                 ▲                                                              │
//	                 └──────────── next round, if any; then Answer(img') ◄──────────┘
//
// A decision takes what it cannot compute from the image as arguments:
// the time (now, ms) for liveness, fresh topic ids for CreateTopics. Its
// driver reads the clock and draws the ids.
//
// The active controller decides one request at a time against the applied
// image and waits until the decision's records have applied before it
// decides the next, so every decision sees every earlier one; there is no
// speculative image of proposed-but-uncommitted records (Kafka's controller
// keeps one). A decided record can still meet an image it was not decided
// against: a new leader may decide before it has applied every entry its
// predecessor proposed, and those then commit ahead of its own. Apply
// therefore re-checks every record and returns an error wrapping
// ErrNotApplicable if it does not apply; the quorum skips such an entry
// (the image's version still advances to its index) and its proposer gets
// the error.
//
// # Record format (version 1)
//
// Every record is one raft entry:
//
//	 0        1        2        3                        7
//	+--------+--------+--------+------------------------+-------------//-+
//	| format | type   | version| CRC-32C, big-endian    | body ...       |
//	| = 1    |        |        | over bytes 1-2 and body|                |
//	+--------+--------+--------+------------------------+-------------//-+
//
// format is the envelope format (1). type is a RecordType. version is the
// body's schema version (1 for every type today; RemoteSegment 1 or 2).
// The body is the record's fields in declaration order, with these
// encodings:
//
//	int32, int64     fixed width, big-endian (two's complement)
//	float64          its IEEE 754 bits as a big-endian uint64
//	byte, ResourceType  one byte
//	[16]byte (ids)   16 raw bytes
//	string           uvarint length, then the bytes
//	[]int32          uvarint count, then count int32s
//	[]Endpoint       uvarint count, then per endpoint: Name, Host, Port
//	[]QuotaEntityPart uvarint count, then per part: Type, Name (*string)
//	map[string]string uvarint count, then key, value pairs, keys strictly increasing
//	*T (optional)    presence byte 0 (nil) or 1, then T
//	[]Record (Batch) uvarint count (> 0), then per record a uvarint length
//	                 and that record's whole encoding: envelope, checksum, body
//
// A Batch (type 11) carries several records in one entry, applied all or
// nothing at the entry's index. Each record in it is a complete record,
// checked against its own checksum; none may be a Batch (Decode rejects
// nesting and empty batches).
//
// A ClientQuota (type 12) is Entity, Key, then Value as *float64 (absent:
// the key is removed). The entity parts keep the order they were proposed
// in (the decision proposes user, client-id, ip); Apply reads them as a set.
//
// A RemoteSegment (type 16) is TopicID, Partition, SegmentID, BaseOffset,
// EndOffset, MaxTimestamp, SizeBytes, then LeaderEpochs as a uvarint count
// of (Epoch int32, StartOffset int64) pairs, then Broker and LeaderEpoch;
// at version 2 (written when the segment's objects have checksums) then
// Objects as a uvarint count (> 0) of (Kind byte, Size int64, CRC uint32).
// A RemoteSegmentStateChange (type 17) is TopicID, Partition, SegmentID, the
// State byte, Broker and LeaderEpoch.
//
// Varints must be minimal and presence bytes 0 or 1, so the encoding is
// canonical: Decode accepts exactly the bytes Encode produces, and
// Encode(Decode(b)) == b. Empty and nil slices and maps encode alike and
// decode as nil.
//
// Evolution: a new field or meaning bumps that type's version; Decode keeps
// reading every older version into the current struct. A new type gets a new
// tag; old code rejects it with ErrCorrupt, so a mixed-version cluster must
// not emit it before every node can read it (gate on a metadata version).
// Batch is such a type: code from before it stops on a Batch entry.
// ChangeReplicas (type 13) is another, written only once an operator
// reassigns a partition: upgrade every node before moving partitions.
// A SetConfig on a group resource (ResourceType 32, KIP-848 and KIP-932
// group configs) decodes everywhere but does not apply on code from before
// group configs (ErrNotApplicable: such a node skips the entry, and its
// image lacks the config): upgrade every node before setting group
// configs. RemoteSegment and RemoteSegmentStateChange (types 16, 17) are
// written only by partition leaders of topics with remote.storage.enable:
// upgrade every node before enabling tiered storage. RemoteSegment version
// 2 (object checksums) is written by every partition leader of this code
// that copies a segment, and code from before it stops on such an entry:
// run the upgrade with fjord.remote.log.object.checksums.enable=false
// (leaders then write version 1) and turn it on once every node runs this
// code (the version-1 records in the log keep decoding, unchecked).
package controller
