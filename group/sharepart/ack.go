package sharepart

import (
	"fmt"

	"github.com/fjordlog/fjord/group"
)

// Acknowledgement types (Kafka's AcknowledgeType ids, with 0 for a gap).
const (
	// AckGap says the offset holds no record the client could deliver;
	// the record is archived.
	AckGap int8 = 0
	// AckAccept: the record was processed; it is acknowledged.
	AckAccept int8 = 1
	// AckRelease: give the record to someone else; it is available again,
	// or archived if it reached the delivery limit.
	AckRelease int8 = 2
	// AckReject: the record cannot be processed; it is archived.
	AckReject int8 = 3
	// AckRenew (KIP-1222, Kafka 4.2): keep the record and restart its
	// acquisition lock. Only ShareAcknowledge v2 with IsRenewAck may carry
	// it; checking that is the broker's job.
	AckRenew int8 = 4
)

// AckBatch is one acknowledgement batch of a ShareFetch or
// ShareAcknowledge request: the offsets [First, Last] and either one type
// for all of them or one type per offset.
type AckBatch struct {
	First, Last int64
	Types       []int8
}

// Acknowledge applies member's acknowledgements to the records and returns
// the records to persist. It is all or nothing, as in Kafka: the first
// problem fails the whole call and changes nothing (beyond the lock
// expiries due at now). Errors, in the order Kafka checks:
//
//   - group.ErrInvalidRequest: a batch with First > Last, no types, a
//     types list whose length is neither 1 nor the batch's length, a type
//     outside 0-4, or batches out of order or overlapping (Kafka lets a
//     batch start on its predecessor's last offset; this package does not);
//     then, batch by batch, a batch reaching EndOffset or beyond.
//   - group.ErrInvalidRecordState: a record at or above StartOffset that is
//     not acquired by member: never delivered to it, delivered to someone
//     else, already acknowledged, or its lock has expired (a lock whose
//     deadline is at or before now has expired, even if Tick has not run).
//
// Offsets below StartOffset are skipped: they are done already.
func (p *Partition) Acknowledge(now int64, member string, batches []AckBatch) ([]Record, error) {
	p.expire(now)
	if err := validateBatches(batches); err != nil {
		return p.finish(now), err
	}
	for _, b := range batches {
		if err := p.checkAckable(member, b); err != nil {
			return p.finish(now), err
		}
	}
	for _, b := range batches {
		first := max(b.First, p.spso)
		if b.Last < first {
			continue
		}
		if len(b.Types) == 1 {
			p.ack(now, first, b.Last, b.Types[0])
			continue
		}
		// One type per offset: apply stretches of equal types.
		for lo := first; lo <= b.Last; {
			t := b.Types[lo-b.First]
			hi := lo
			for hi < b.Last && b.Types[hi+1-b.First] == t {
				hi++
			}
			p.ack(now, lo, hi, t)
			lo = hi + 1
		}
	}
	return p.finish(now), nil
}

// validateBatches is the shape check KafkaApis does before a share-partition
// sees the batches.
func validateBatches(batches []AckBatch) error {
	prevLast := int64(-1)
	for i, b := range batches {
		switch {
		case b.First > b.Last:
			return fmt.Errorf("sharepart: ack batch %d: first offset %d after last %d: %w", i, b.First, b.Last, group.ErrInvalidRequest)
		case b.First < 0 || b.First <= prevLast:
			return fmt.Errorf("sharepart: ack batch %d [%d, %d] overlaps or precedes the one before: %w", i, b.First, b.Last, group.ErrInvalidRequest)
		case len(b.Types) == 0:
			return fmt.Errorf("sharepart: ack batch %d: no acknowledge types: %w", i, group.ErrInvalidRequest)
		case len(b.Types) > 1 && int64(len(b.Types)) != b.Last-b.First+1:
			return fmt.Errorf("sharepart: ack batch %d: %d acknowledge types for %d offsets: %w", i, len(b.Types), b.Last-b.First+1, group.ErrInvalidRequest)
		}
		for _, t := range b.Types {
			if t < AckGap || t > AckRenew {
				return fmt.Errorf("sharepart: ack batch %d: unknown acknowledge type %d: %w", i, t, group.ErrInvalidRequest)
			}
		}
		prevLast = b.Last
	}
	return nil
}

// checkAckable is the per-batch check of SharePartition.acknowledge.
func (p *Partition) checkAckable(member string, b AckBatch) error {
	first := max(b.First, p.spso)
	if b.Last < first {
		return nil // all done already
	}
	if p.spso == p.speo {
		return fmt.Errorf("sharepart: ack [%d, %d]: nothing in flight: %w", b.First, b.Last, group.ErrInvalidRecordState)
	}
	if b.Last >= p.speo {
		return fmt.Errorf("sharepart: ack [%d, %d]: past the last record in flight %d: %w", b.First, b.Last, p.speo-1, group.ErrInvalidRequest)
	}
	for i := p.find(first); i < len(p.runs) && p.runs[i].first <= b.Last; i++ {
		r := p.runs[i]
		if r.state != Acquired {
			return fmt.Errorf("sharepart: ack [%d, %d]: offset %d is %s: %w", b.First, b.Last, max(r.first, first), r.state, group.ErrInvalidRecordState)
		}
		if r.member != member {
			return fmt.Errorf("sharepart: ack [%d, %d]: offset %d is acquired by another member: %w", b.First, b.Last, max(r.first, first), group.ErrInvalidRecordState)
		}
	}
	return nil
}

// ack applies one acknowledgement type to [first, last], all acquired by
// the acknowledging member.
func (p *Partition) ack(now, first, last int64, t int8) {
	i, j := p.span(first, last)
	for k := i; k < j; k++ {
		r := p.runs[k]
		switch t {
		case AckAccept:
			p.set(k, Acknowledged, r.count, "", noDeadline)
		case AckGap, AckReject:
			p.set(k, Archived, r.count, "", noDeadline)
		case AckRelease:
			p.release(k)
		case AckRenew:
			p.set(k, Acquired, r.count, r.member, now+int64(p.cfg.RecordLockDurationMs))
		}
	}
}
