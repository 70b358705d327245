package broker

import (
	"errors"
	"os"

	"github.com/fjordlog/fjord/broker/coordinator"
	"github.com/fjordlog/fjord/broker/partitions"
	"github.com/fjordlog/fjord/broker/replica"
	"github.com/fjordlog/fjord/broker/txncoord"
	"github.com/fjordlog/fjord/group"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/fjordlog/fjord/storage"
	"github.com/fjordlog/fjord/storage/recordbatch"
)

// Broker-level failures that map to Kafka error codes.
var (
	errInvalidTopic      = errors.New("broker: invalid topic name")
	errInvalidConfig     = errors.New("broker: invalid config")
	errNotEnoughReplicas = partitions.ErrNotEnoughReplicas
	errAcksAllRequired   = partitions.ErrAcksAllRequired
	errMalformedShip     = errors.New("broker: malformed metadata log response")
	errStaleShip         = errors.New("broker: voter is behind this broker's metadata")
)

// errorCode is the one place a Go error becomes a Kafka error code.
func errorCode(err error) int16 {
	var ce replica.CodeError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ce):
		return int16(ce)
	case errors.Is(err, storage.ErrCorruptLog):
		// Damaged on this broker's disk: retriable, the client refreshes
		// metadata and finds the replica that takes over.
		return kerr.KafkaStorageError.Code
	case errors.Is(err, recordbatch.ErrCorrupt):
		return kerr.CorruptMessage.Code
	case errors.Is(err, recordbatch.ErrUnsupportedMagic):
		// magic 0/1 message sets: a format Fjord does not take, not corruption
		return kerr.UnsupportedForMessageFormat.Code
	case errors.Is(err, storage.ErrInvalidRecord):
		return kerr.InvalidRecord.Code
	case errors.Is(err, storage.ErrInvalidTxnState):
		return kerr.InvalidTxnState.Code
	case errors.Is(err, storage.ErrCoordinatorFenced):
		return kerr.TransactionCoordinatorFenced.Code
	case errors.Is(err, errNotEnoughReplicas):
		return kerr.NotEnoughReplicas.Code
	case errors.Is(err, errAcksAllRequired):
		return kerr.InvalidRequiredAcks.Code
	case errors.Is(err, replica.ErrNotEnoughReplicasAfterAppend):
		return kerr.NotEnoughReplicasAfterAppend.Code
	case errors.Is(err, replica.ErrTimedOut):
		return kerr.RequestTimedOut.Code
	case errors.Is(err, recordbatch.ErrTooLarge):
		return kerr.MessageTooLarge.Code
	case errors.Is(err, storage.ErrOffsetOutOfRange):
		return kerr.OffsetOutOfRange.Code
	case errors.Is(err, storage.ErrOutOfOrderSeq):
		return kerr.OutOfOrderSequenceNumber.Code
	case errors.Is(err, storage.ErrInvalidEpoch):
		return kerr.InvalidProducerEpoch.Code
	case errors.Is(err, storage.ErrInvalidTimestamp):
		return kerr.InvalidTimestamp.Code
	case errors.Is(err, storage.ErrClosed), errors.Is(err, os.ErrClosed), errors.Is(err, replica.ErrNotLeader),
		errors.Is(err, storage.ErrStaleLeaderEpoch), errors.Is(err, storage.ErrTruncatedDuringRead):
		return kerr.NotLeaderForPartition.Code
	case errors.Is(err, errInvalidTopic):
		return kerr.InvalidTopicException.Code
	case errors.Is(err, errInvalidConfig):
		return kerr.InvalidConfig.Code
	case errors.Is(err, coordinator.ErrLoading):
		return kerr.CoordinatorLoadInProgress.Code
	case errors.Is(err, coordinator.ErrNotCoordinator), errors.Is(err, txncoord.ErrNotCoordinator):
		return kerr.NotCoordinator.Code
	case errors.Is(err, txncoord.ErrLoading):
		return kerr.CoordinatorLoadInProgress.Code
	}
	return kerr.UnknownServerError.Code
}

// groupErrorCode maps an error of package group (a member's request
// refused by its group's state machine) to its Kafka error code.
func groupErrorCode(err error) int16 { return group.ErrorCode(err) }

// errMessage is the optional error message some responses carry.
func errMessage(err error) *string {
	if err == nil {
		return nil
	}
	s := err.Error()
	return &s
}
