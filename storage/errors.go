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
)
