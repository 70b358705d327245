package broker

import (
	"errors"
	"os"
	"syscall"

	"github.com/fjordlog/fjord/broker/config"
	"github.com/fjordlog/fjord/broker/coordinator"
	"github.com/fjordlog/fjord/broker/partitions"
	"github.com/fjordlog/fjord/broker/replica"
	"github.com/fjordlog/fjord/broker/sharecoord"
	"github.com/fjordlog/fjord/broker/sharestate"
	"github.com/fjordlog/fjord/broker/txncoord"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/fjordlog/fjord/storage"
	"github.com/fjordlog/fjord/storage/recordbatch"
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
	case errors.Is(err, syscall.ENOSPC), errors.Is(err, syscall.EDQUOT), errors.Is(err, syscall.EIO),
		errors.Is(err, syscall.EROFS):
		// The disk is full, over quota, failing or read-only: what Kafka
		// answers for a log directory that failed, which clients retry
		// (UNKNOWN_SERVER_ERROR, which they do not, made an acks=all
		// producer give up on a disk that room was being made on).
		return kerr.KafkaStorageError.Code
	case errors.Is(err, partitions.ErrRemoteReadsFull):
		// Kafka's reader pool refusing the task (RejectedExecutionException
		// in ReplicaManager's remote fetch), which it answers as an
		// unknown error; consumers retry the fetch.
		return kerr.UnknownServerError.Code
	case errors.Is(err, partitions.ErrRemoteStorage):
		// The tiered copy could not be read (or not with its aborted
		// transactions): retriable, as Kafka answers a failed remote read.
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
	case errors.Is(err, partitions.ErrNotEnoughReplicas):
		return kerr.NotEnoughReplicas.Code
	case errors.Is(err, partitions.ErrAcksAllRequired):
		return kerr.InvalidRequiredAcks.Code
	case errors.Is(err, replica.ErrNotEnoughReplicasAfterAppend):
		return kerr.NotEnoughReplicasAfterAppend.Code
	case errors.Is(err, replica.ErrTimedOut):
		return kerr.RequestTimedOut.Code
	case errors.Is(err, recordbatch.ErrTooLarge):
		return kerr.MessageTooLarge.Code
	case errors.Is(err, partitions.ErrMovedToTiered):
		// Before ErrOffsetOutOfRange, which it wraps.
		return kerr.OffsetMovedToTieredStorage.Code
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
	case errors.Is(err, config.ErrInvalidConfig):
		return kerr.InvalidConfig.Code
	case errors.Is(err, coordinator.ErrLoading):
		return kerr.CoordinatorLoadInProgress.Code
	case errors.Is(err, coordinator.ErrNotCoordinator), errors.Is(err, txncoord.ErrNotCoordinator):
		return kerr.NotCoordinator.Code
	case errors.Is(err, txncoord.ErrLoading), errors.Is(err, sharecoord.ErrLoading):
		return kerr.CoordinatorLoadInProgress.Code
	case errors.Is(err, sharecoord.ErrNotCoordinator):
		return kerr.NotCoordinator.Code
	// KIP-932's share state: ErrUninitialized is a sharestate.ErrNoState,
	// and is checked first.
	case errors.Is(err, sharecoord.ErrUninitialized), errors.Is(err, sharecoord.ErrInvalidRequest):
		return kerr.InvalidRequest.Code
	case errors.Is(err, sharecoord.ErrFencedStateEpoch):
		return kerr.FencedStateEpoch.Code
	case errors.Is(err, sharecoord.ErrUnknownTopicOrPartition):
		return kerr.UnknownTopicOrPartition.Code
	case errors.Is(err, sharestate.ErrFencedLeaderEpoch):
		return kerr.FencedLeaderEpoch.Code
	case errors.Is(err, sharestate.ErrNotAvailable):
		return kerr.CoordinatorNotAvailable.Code
	}
	return kerr.UnknownServerError.Code
}
