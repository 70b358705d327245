package txn

import (
	"cmp"
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// The core's inputs (requests, reports) and its output (Ready).

// State is a transaction's state, numbered as Kafka numbers it in
// TxnMetadataValue (TransactionMetadata.scala's TransactionState ids).
type State = kmsg.TransactionState

// The states. Dead and PrepareEpochFence are Kafka's transient in-memory
// states; they are never written, and a table holds no id in them (an
// expiring id is removed once its tombstone is durable; a fence goes
// straight to PrepareAbort).
const (
	Empty             = kmsg.TransactionStateEmpty
	Ongoing           = kmsg.TransactionStateOngoing
	PrepareCommit     = kmsg.TransactionStatePrepareCommit
	PrepareAbort      = kmsg.TransactionStatePrepareAbort
	CompleteCommit    = kmsg.TransactionStateCompleteCommit
	CompleteAbort     = kmsg.TransactionStateCompleteAbort
	Dead              = kmsg.TransactionStateDead
	PrepareEpochFence = kmsg.TransactionStatePrepareEpochFence
)

// OffsetsTopic is the topic AddOffsetsToTxn adds a partition of.
const OffsetsTopic = "__consumer_offsets"

// TopicPartition names a partition of a transaction.
type TopicPartition struct {
	Topic     string
	Partition int32
}

func (p TopicPartition) String() string { return fmt.Sprintf("%s-%d", p.Topic, p.Partition) }

func comparePartitions(a, b TopicPartition) int {
	if c := cmp.Compare(a.Topic, b.Topic); c != 0 {
		return c
	}
	return cmp.Compare(a.Partition, b.Partition)
}

// InitRequest is an InitProducerId with a transactional id (the broker
// serves the idempotent producer's, without one, itself).
type InitRequest struct {
	TxnID     string
	TimeoutMs int32
	// ProducerID and ProducerEpoch (v3+, KIP-360) are the producer's
	// current ones when it wants to keep its producer id after an error;
	// -1 and -1 otherwise. One without the other is INVALID_REQUEST.
	ProducerID    int64
	ProducerEpoch int16
	Version       int16
}

// AddPartitionsRequest is one transaction of an AddPartitionsToTxn: the
// whole request up to v3 (clients), one of its Transactions from v4
// (brokers). The broker has already refused the partitions the client may
// not write or that do not exist (TOPIC_AUTHORIZATION_FAILED,
// UNKNOWN_TOPIC_OR_PARTITION, OPERATION_NOT_ATTEMPTED for the rest), as
// KafkaApis does; what comes here is to be added.
type AddPartitionsRequest struct {
	TxnID         string
	ProducerID    int64
	ProducerEpoch int16
	Partitions    []TopicPartition
	// VerifyOnly (v4+, from a partition leader, KIP-890 part 1) asks
	// whether the partitions are in the transaction without adding them.
	VerifyOnly bool
	Version    int16
}

// AddOffsetsRequest is an AddOffsetsToTxn. OffsetsPartition is the
// __consumer_offsets partition that holds Group (the caller's group
// placement: abs(javaHashCode(group)) % partitions).
type AddOffsetsRequest struct {
	TxnID            string
	ProducerID       int64
	ProducerEpoch    int16
	Group            string
	OffsetsPartition int32
	Version          int16
}

// EndRequest is an EndTxn. Version 5 means transactions v2 (KIP-890 part
// 2): the epoch is bumped at every end and the answer carries the producer
// id and epoch to use next.
type EndRequest struct {
	TxnID         string
	ProducerID    int64
	ProducerEpoch int16
	Commit        bool
	Version       int16
}

// Answer is a response to deliver. Token is whatever the caller passed
// with the request. Code is already mapped for the request's version
// (PRODUCER_FENCED becomes INVALID_PRODUCER_EPOCH for old clients, as
// KafkaApis does).
type Answer struct {
	Token any
	Code  int16
	// ProducerID and ProducerEpoch: InitProducerId's result, and EndTxn's
	// (v5 puts them in the response: the id and epoch to use next); -1
	// with an error.
	ProducerID    int64
	ProducerEpoch int16
	// Partitions are AddPartitions' per-partition codes, one per distinct
	// requested partition, in the request's order; nil for the others.
	Partitions []PartitionCode
}

// PartitionCode is one partition's result in an AddPartitions answer.
type PartitionCode struct {
	TopicPartition
	Code int16
}

// Token identifies one record the core asked the caller to append; the
// caller quotes it in RecordWritten or RecordFailed. Tokens are unique for
// the life of a Table.
type Token uint64

// Append is one record to append to the table's __transaction_state
// partition: uncompressed, acks=all, timestamp now. Key and Value are
// Kafka's bytes (TxnMetadataKey v0, TxnMetadataValue v0 or v1); a nil
// Value is a tombstone. Meta is Value decoded (nil for a tombstone), for
// logs and tests. The Table keeps no reference to them.
type Append struct {
	Token Token
	TxnID string
	Key   []byte
	Value []byte
	Meta  *kmsg.TxnMetadataValue
}

// MarkerID identifies one sending of markers; reports quote it. Seq is
// unique for the life of a Table.
type MarkerID struct {
	TxnID string
	Seq   uint64
}

// Marker asks the caller to write the transaction's end marker (a control
// batch) to each of Partitions, through WriteTxnMarkers to each partition's
// leader, and to report each partition with MarkersWritten or MarkerFailed.
type Marker struct {
	ID               MarkerID
	ProducerID       int64
	ProducerEpoch    int16
	Commit           bool
	CoordinatorEpoch int32
	// TransactionVersion is WriteTxnMarkers v2's field: 2 when the
	// transaction ended under transactions v2, else 0.
	TransactionVersion int8
	Partitions         []TopicPartition // sorted
}

// LogRecord is one record read back from the partition on load. Value is
// nil for a tombstone. The Table does not keep the slices.
type LogRecord struct {
	Key, Value []byte
}

// Ready is what one call asks of the caller. The three lists are
// independent: every Answer may be delivered at once (an answer that needed
// a record comes only after the caller reported it written), every Append
// appended, every Marker sent.
type Ready struct {
	Appends []Append
	Answers []Answer
	Markers []Marker
	// FetchProducerIDs: ask the controller for a block of producer ids and
	// answer with SupplyProducerIDs or ProducerIDsFailed. Not asked again
	// before one of those.
	FetchProducerIDs bool
	// Notes are state changes worth one log line each.
	Notes []string
}

func (r *Ready) note(format string, args ...any) {
	r.Notes = append(r.Notes, fmt.Sprintf(format, args...))
}

// TopicPartitions is one topic's partitions, as requests list them.
type TopicPartitions struct {
	Topic      string
	Partitions []int32
}

// ByTopic groups tps by topic, topics and partitions in first-seen order,
// for the requests that carry them per topic (WriteTxnMarkers,
// AddPartitionsToTxn).
func ByTopic(tps []TopicPartition) []TopicPartitions {
	var out []TopicPartitions
	idx := map[string]int{}
	for _, tp := range tps {
		i, ok := idx[tp.Topic]
		if !ok {
			i = len(out)
			idx[tp.Topic] = i
			out = append(out, TopicPartitions{Topic: tp.Topic})
		}
		out[i].Partitions = append(out[i].Partitions, tp.Partition)
	}
	return out
}
