// Package controller is Fjord's cluster metadata as a deterministic state
// machine: metadata records, applied in log order, produce immutable images,
// and the active controller's decisions read an image and return records to
// propose. Nothing here starts a goroutine, reads a clock, touches a socket
// or a file, or logs; time comes in as `now` in milliseconds. A later layer
// puts the records behind etcd raft (the raft log is the metadata log) and
// owns the one goroutine that drives all of this.
//
// # Pieces
//
//   - records.go: the record types and the Record envelope.
//   - codec.go: Encode and Decode, the log format drawn below.
//   - image.go: Image, an immutable snapshot; Apply(index, record) returns a
//     new image whose Version is index. A Batch record applies several
//     records atomically; NewBatch makes one entry of a decision's records.
//   - decide.go, place.go, liveness.go: the pure decisions of the active
//     controller (topic admin, AlterPartition, placement, broker liveness and
//     leader election).
//
// # Flow
//
//	request ─► decision(img) ─► []Record ─► propose ─► commit ─► img.Apply ─► img'
//
// The active controller decides against its latest image, which already
// includes its own proposed-but-uncommitted records (it applies them
// speculatively, as Kafka's controller does). Raft commits a leader's
// proposals in order or the leader steps down and rebuilds from the
// committed image, so every decided record applies cleanly. Apply still
// re-checks each record and returns an error if one does not apply; callers
// treat that as a bug.
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
// body's schema version (1 for every type today). The body is the record's
// fields in declaration order, with these encodings:
//
//	int32, int64     fixed width, big-endian (two's complement)
//	byte, ResourceType  one byte
//	[16]byte (ids)   16 raw bytes
//	string           uvarint length, then the bytes
//	[]int32          uvarint count, then count int32s
//	[]Endpoint       uvarint count, then per endpoint: Name, Host, Port
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
package controller
