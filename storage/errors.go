package storage

import (
	"errors"
	"fmt"
)

// Errors a caller classifies with errors.Is. Each maps to one Kafka error code
// in the broker. An error about a batch that is not well-formed wraps
// recordbatch's ErrCorrupt, ErrTooLarge or ErrUnsupportedMagic instead.
var (
	ErrOffsetOutOfRange = errors.New("storage: offset out of range")
	ErrOutOfOrderSeq    = errors.New("storage: out of order sequence number")
	ErrInvalidEpoch     = errors.New("storage: invalid producer epoch")
	ErrClosed           = errors.New("storage: log closed")
	ErrInvalidTimestamp = errors.New("storage: invalid timestamp")
	// ErrInvalidRecord: a batch the log refuses to take as produced, such
	// as a control batch from a client (INVALID_RECORD).
	ErrInvalidRecord = errors.New("storage: invalid record")
	// ErrInvalidTxnState: a non-transactional batch from a producer whose
	// transaction is open on the partition (INVALID_TXN_STATE).
	ErrInvalidTxnState = errors.New("storage: invalid transaction state")
	// ErrCoordinatorFenced: a marker from a transaction coordinator older
	// than the one that wrote the producer's last marker
	// (TRANSACTION_COORDINATOR_FENCED).
	ErrCoordinatorFenced = errors.New("storage: transaction coordinator fenced")
	// ErrStaleLeaderEpoch: a batch's leader epoch is older than the latest
	// one already in the log. On a leader it is a write from a leadership
	// that has ended (NOT_LEADER_OR_FOLLOWER); on a follower, fetched data
	// that diverges from its log, which must be truncated first.
	ErrStaleLeaderEpoch = errors.New("storage: stale leader epoch")
	// ErrUnexpectedOffset: a fetched batch overlaps what is already in the
	// log, or its offsets go back (Kafka's UnexpectedAppendOffsetException
	// and OffsetsOutOfOrderException). A gap before a batch is not an
	// error: compaction on the leader leaves them (see AppendReplica).
	ErrUnexpectedOffset = errors.New("storage: batch does not follow the log end")
	// ErrCorruptLog: bytes already in the log fail their CRC or do not
	// follow the batches before them (bit rot, a damaged sealed segment);
	// returned as a *CorruptLogError, which says where.
	ErrCorruptLog = errors.New("storage: corrupt data in the log")
	// ErrTruncatedDuringRead: a read met bytes that did not parse while
	// the log was being truncated, again and again; the replica is a
	// follower cutting its log (NOT_LEADER_OR_FOLLOWER), not damaged.
	ErrTruncatedDuringRead = errors.New("storage: log truncated during the read")
)

// CorruptLogError is a read that found a stored batch it will not return.
// Offset is where the log stops being trustworthy: Truncate(Offset)
// removes the bad batch and everything after it, and nothing before.
type CorruptLogError struct {
	Segment  int64 // base offset of the segment holding the bad batch
	Position int64 // its byte position in the segment file
	Offset   int64
	Reason   string
}

func (e *CorruptLogError) Error() string {
	return fmt.Sprintf("%v: segment %d at byte %d (offset %d): %s", ErrCorruptLog, e.Segment, e.Position, e.Offset, e.Reason)
}

func (e *CorruptLogError) Unwrap() error { return ErrCorruptLog }
