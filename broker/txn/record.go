package txn

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// meta is one transactional id's durable state: what one TxnMetadataValue
// says, plus lastEpoch, which Kafka keeps in memory only.
type meta struct {
	// pid is the producer id in use; prevPid the one before the last
	// rotation (equal to pid when there was none since the last
	// InitProducerId, as in Kafka's TransactionMetadata); nextPid the id
	// a transactions-v2 end allocated because the epoch was exhausted,
	// taken up by the Complete* record (-1: none).
	pid, prevPid, nextPid int64
	// epoch is the producer epoch: -1 only before the first record of a
	// new id. lastEpoch is the epoch before the last bump that a retry may
	// still quote (-1: none); not persisted, so -1 after a load.
	epoch, lastEpoch int16
	timeoutMs        int32
	state            State
	// parts are the transaction's partitions, sorted and distinct; empty
	// in Empty and Complete*.
	parts []TopicPartition
	// startMs is when the transaction began (its first partition added);
	// -1 in Empty. updateMs is the time of the last transition.
	startMs, updateMs int64
	// tv is the client's transaction version recorded with the last
	// transition: 2 for an end by EndTxn v5 (epoch bump on every end),
	// else 0.
	tv int16
}

func (m meta) clone() meta {
	m.parts = slices.Clone(m.parts)
	return m
}

// Kafka's limits (TransactionMetadata.isEpochExhausted): epochs up to
// MaxInt16-2 are handed to clients; MaxInt16-1 is handed out last, after
// which InitProducerId rotates the producer id; MaxInt16 is kept for the
// coordinator to fence with.
const maxEpoch = 32767

func epochExhausted(e int16) bool { return e >= maxEpoch-1 }

// encodeKey is the TxnMetadataKey v0: int16 version 0, then the
// transactional id as an int16-length string.
func encodeKey(txnID string) []byte {
	k := kmsg.NewTxnMetadataKey()
	k.TransactionalID = txnID
	return k.AppendTo(nil)
}

// value is m as Kafka's TxnMetadataValue at version v (0 or 1).
func (m meta) value(v int16) *kmsg.TxnMetadataValue {
	val := kmsg.NewTxnMetadataValue()
	val.Version = v
	val.ProducerID = m.pid
	val.ProducerEpoch = m.epoch
	val.TimeoutMillis = m.timeoutMs
	val.State = m.state
	if m.state != Empty { // Kafka writes a null array for Empty
		val.Topics = []kmsg.TxnMetadataValueTopic{}
		for _, p := range m.parts {
			if n := len(val.Topics); n > 0 && val.Topics[n-1].Topic == p.Topic {
				val.Topics[n-1].Partitions = append(val.Topics[n-1].Partitions, p.Partition)
				continue
			}
			t := kmsg.NewTxnMetadataValueTopic()
			t.Topic, t.Partitions = p.Topic, []int32{p.Partition}
			val.Topics = append(val.Topics, t)
		}
	}
	val.LastUpdateTimestamp = m.updateMs
	val.StartTimestamp = m.startMs
	if v >= 1 {
		val.PreviousProducerID = m.prevPid
		val.NextProducerID = m.nextPid
		val.ClientTransactionVersion = m.tv
	}
	return &val
}

// ErrBadRecord marks a __transaction_state record that does not decode
// (LoadRecords wraps it with the id and the cause).
var ErrBadRecord = errors.New("txn: bad __transaction_state record")

// decodeKey returns the transactional id of a TxnMetadataKey, ok false for
// a key of another version (Kafka skips those with a warning: "a left over
// from an aborted upgrade").
func decodeKey(key []byte) (id string, ok bool, err error) {
	if len(key) < 2 {
		return "", false, fmt.Errorf("%w: key of %d bytes", ErrBadRecord, len(key))
	}
	if v := int16(binary.BigEndian.Uint16(key)); v != 0 {
		return "", false, nil
	}
	k := kmsg.NewTxnMetadataKey()
	if err := k.ReadFrom(key); err != nil {
		return "", false, fmt.Errorf("%w: key: %v", ErrBadRecord, err)
	}
	return k.TransactionalID, true, nil
}

// decodeValue reads a TxnMetadataValue v0 or v1 into a meta.
func decodeValue(b []byte) (meta, error) {
	v := kmsg.NewTxnMetadataValue()
	if err := v.ReadFrom(b); err != nil {
		return meta{}, fmt.Errorf("%w: value: %v", ErrBadRecord, err)
	}
	if v.Version < 0 || v.Version > 1 {
		return meta{}, fmt.Errorf("%w: value version %d", ErrBadRecord, v.Version)
	}
	m := meta{
		pid: v.ProducerID, prevPid: -1, nextPid: -1,
		epoch: v.ProducerEpoch, lastEpoch: -1,
		timeoutMs: v.TimeoutMillis, state: v.State,
		startMs: v.StartTimestamp, updateMs: v.LastUpdateTimestamp,
	}
	if v.Version >= 1 {
		m.prevPid, m.nextPid, m.tv = v.PreviousProducerID, v.NextProducerID, v.ClientTransactionVersion
	}
	if m.state != Empty {
		for _, t := range v.Topics {
			for _, p := range t.Partitions {
				m.parts = append(m.parts, TopicPartition{t.Topic, p})
			}
		}
		slices.SortFunc(m.parts, comparePartitions)
		m.parts = slices.Compact(m.parts)
	}
	return m, nil
}
