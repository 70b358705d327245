package txn

import (
	"github.com/twmb/franz-go/pkg/kerr"
)

// txn is one transactional id.
type txn struct {
	id string
	// m is the state as of the last record committed, or, before the
	// first (durable false), the new id's state: Empty at epoch -1.
	m       meta
	durable bool
	// w is the one record in flight (Kafka's pendingState); nil: none.
	w *write
	// c is the completion under way in Prepare*: the markers still to
	// write. nil outside Prepare* and while the table is not active.
	c *completion
	// retryAt is when the coordinator may try its own write again (a
	// timeout abort, a Complete*, a tombstone) after one failed; fails
	// counts its failures in a row. Requests are not held back by it.
	retryAt int64
	fails   int
}

// writeKind is why a record was asked for; it decides what its success
// answers and does next.
type writeKind int8

const (
	wInit      writeKind = iota // InitProducerId: Empty with a new epoch or producer id
	wFenceInit                  // InitProducerId over Ongoing: PrepareAbort, then CONCURRENT_TRANSACTIONS
	wAdd                        // AddPartitions / AddOffsets: Ongoing
	wEnd                        // EndTxn: Prepare*
	wTimeout                    // transaction.timeout.ms passed: PrepareAbort with an epoch bump
	wComplete                   // every marker written: Complete*
	wExpire                     // transactional.id.expiration.ms passed: tombstone
)

func (k writeKind) String() string {
	return [...]string{"init", "fence", "add", "end", "timeout", "complete", "expire"}[k]
}

// write is a record in flight and what waits on it.
type write struct {
	token     Token
	kind      writeKind
	to        meta // the state once the record is committed
	tombstone bool
	reply     *reply // the request to answer; nil for the coordinator's own writes
}

// api is the request an answer is for, which decides its version mapping.
type api int8

const (
	apiInit api = iota
	apiAdd
	apiOffsets
	apiEnd
)

// reply is a request waiting for its answer.
type reply struct {
	token   any
	api     api
	version int16
	parts   []TopicPartition // AddPartitions: the distinct requested partitions, in order
}

// answer builds the answer with code, mapped for the request's version.
func (r *reply) answer(code int16, pid int64, epoch int16) Answer {
	if code == kerr.ProducerFenced.Code && r.fencedIsOld() {
		// KafkaApis: clients before these versions do not know
		// PRODUCER_FENCED (KIP-588) and handle INVALID_PRODUCER_EPOCH the
		// same way.
		code = kerr.InvalidProducerEpoch.Code
	}
	if code != 0 || r.api == apiAdd || r.api == apiOffsets {
		pid, epoch = -1, -1
	}
	a := Answer{Token: r.token, Code: code, ProducerID: pid, ProducerEpoch: epoch}
	if r.api == apiAdd {
		for _, p := range r.parts {
			a.Partitions = append(a.Partitions, PartitionCode{p, code})
		}
	}
	return a
}

// fencedIsOld: the version predates PRODUCER_FENCED (InitProducerId v4,
// EndTxn, AddPartitionsToTxn and AddOffsetsToTxn v2).
func (r *reply) fencedIsOld() bool {
	if r.api == apiInit {
		return r.version < 4
	}
	return r.version < 2
}

// completion is the sending of a decided transaction's markers.
type completion struct {
	// base is the first marker sequence of this completion: reports with
	// an older one belong to an earlier transaction and are ignored.
	base uint64
	// pending are the partitions whose marker is not yet written.
	pending map[TopicPartition]*markerState
}

// markerState is one partition's marker.
type markerState struct {
	inflight uint64 // the sequence of the sending in flight; 0: none
	sentAt   int64  // when inflight was sent
	fails    int    // failures in a row
	retryAt  int64  // not sent again before this
}

// mapAppendError is the coordinator error for a failed append of a
// __transaction_state record (TransactionStateManager.appendTransactionToLog):
// retriable codes the client understands. 0 (a caller's mistake) counts as
// COORDINATOR_NOT_AVAILABLE.
func mapAppendError(code int16) int16 {
	switch code {
	case kerr.UnknownTopicOrPartition.Code, kerr.NotEnoughReplicas.Code,
		kerr.NotEnoughReplicasAfterAppend.Code, kerr.RequestTimedOut.Code, 0:
		return kerr.CoordinatorNotAvailable.Code
	case kerr.NotLeaderForPartition.Code, kerr.KafkaStorageError.Code:
		return kerr.NotCoordinator.Code
	case kerr.MessageTooLarge.Code, kerr.RecordListTooLarge.Code:
		return kerr.UnknownServerError.Code
	}
	return code
}
