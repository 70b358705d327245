// Package recordbatch is Kafka's record batch (magic 2) codec: reading and
// checking a batch's header, its CRC-32C and its records, building the
// batches the broker writes itself (coordinators' records, the metadata
// log's, transaction markers), and stamping the fields a leader owns. A
// batch is the same bytes on the wire (Produce, Fetch) and in a segment
// file, so the log stores what producers send and serves it unchanged.
//
// It is a leaf: it imports nothing of Fjord, so the partition log
// (storage), the controller's metadata log and the coordinators share it
// without depending on one another. It knows nothing of offsets beyond a
// batch's own fields, of files, or of producers' state.
//
// # Batch layout
//
// A record batch is, big-endian:
//
//	 0  int64  baseOffset            assigned by the broker; not covered by the CRC
//	 8  int32  batchLength           bytes after this field
//	12  int32  partitionLeaderEpoch  set by the broker; not covered by the CRC
//	16  int8   magic                 2; 0 and 1 (the old message sets) are refused
//	17  uint32 crc                   CRC-32C (Castagnoli) of bytes [21, end)
//	21  int16  attributes            bits 0-2 codec, 3 timestamp type, 4 transactional, 5 control
//	23  int32  lastOffsetDelta
//	27  int64  baseTimestamp
//	35  int64  maxTimestamp
//	43  int64  producerId            -1: none
//	51  int16  producerEpoch
//	53  int32  baseSequence          -1: none
//	57  int32  recordCount
//	61  ...    records (compressed as a whole when the codec is not none)
//
// The first 12 bytes (PrefixLen) are what batchLength does not count, so
// a batch is batchLength + 12 bytes long (Length); the header is 61 bytes
// (HeaderLen). Codecs: 0 none, 1 gzip, 2 snappy (raw, or in the xerial
// framing of the Java client), 3 lz4 (frame format), 4 zstd.
//
// # Record layout
//
// Each record is preceded by its length as a varint (zig-zag, as every
// varint here) and is:
//
//	int8     attributes     unused, 0
//	varlong  timestampDelta from baseTimestamp
//	varint   offsetDelta    from baseOffset: 0, 1, ... in a produced batch
//	varint   keyLength      -1: null key
//	bytes    key
//	varint   valueLength    -1: null value (a tombstone)
//	bytes    value
//	varint   headerCount
//	headerCount × (varint keyLength, bytes key (a string), varint valueLength, bytes value)
//
// # Transaction markers
//
// A control batch (attributes bits 4 and 5: transactional, control) is a
// transaction marker: exactly one record, whose key is Kafka's
// ControlRecordKey (int16 version 0, int16 type: 0 abort, 1 commit) and
// whose value is its EndTxnMarker (int16 version 0, int32 coordinator
// epoch); the batch carries the producer id and epoch of the transaction
// it ends, base sequence -1, both timestamps the time it was written
// (BuildMarker). Versions above 0 are read as 0 and bytes after the
// fields ignored, as Kafka does (ParseEndTxnMarker).
//
// # Errors
//
// Malformed input is an error, never a panic: ErrCorrupt, ErrTooLarge and
// ErrUnsupportedMagic, each of which the broker maps to one Kafka error
// code. Decompression is bounded (256 MiB per batch) against
// decompression bombs.
//
// # Files
//
//	batch.go     header fields, Info, ParseHeader, CheckCRC, Validate, EachRecord, Stamp
//	build.go     Build, BuildTxn, AppendRewritten: batches the broker encodes
//	marker.go    EndTxnMarker, ParseEndTxnMarker, BuildMarker
//	compress.go  the codecs, bounded decompression
//	batchtest/   a batch builder for tests, by hand (it shares no code with this package)
package recordbatch
