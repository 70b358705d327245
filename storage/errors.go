package storage

import "errors"

// Errors a caller classifies with errors.Is. Each maps to one Kafka error code
// in the broker.
var (
	ErrCorruptBatch     = errors.New("storage: corrupt record batch")
	ErrBatchTooLarge    = errors.New("storage: record batch too large")
	ErrUnsupportedMagic = errors.New("storage: unsupported record batch magic")
	ErrOffsetOutOfRange = errors.New("storage: offset out of range")
	ErrOutOfOrderSeq    = errors.New("storage: out of order sequence number")
	ErrInvalidEpoch     = errors.New("storage: invalid producer epoch")
	ErrClosed           = errors.New("storage: log closed")
	ErrInvalidTimestamp = errors.New("storage: invalid timestamp")
	// ErrStaleLeaderEpoch: a batch's leader epoch is older than the latest
	// one already in the log. On a leader it is a write from a leadership
	// that has ended (NOT_LEADER_OR_FOLLOWER); on a follower, fetched data
	// that diverges from its log, which must be truncated first.
	ErrStaleLeaderEpoch = errors.New("storage: stale leader epoch")
	// ErrUnexpectedOffset: fetched batches do not continue the log (a gap,
	// or an overlap with what is already there), Kafka's
	// UnexpectedAppendOffsetException.
	ErrUnexpectedOffset = errors.New("storage: batch does not follow the log end")
)
