package sharepart

import (
	"fmt"

	"github.com/fjordlog/fjord/group"
)

// AdvanceLogStart tells the Partition that the log now starts at logStart
// (retention or DeleteRecords removed what was below). In-flight records
// below it are dropped, acquired or not, and SPSO moves up to it; an
// acknowledgement of a dropped record is then ignored, as for any offset
// below SPSO. Kafka archives the available ones and leaves the acquired
// ones to their lock timeout, and writes the new start offset lazily; this
// package writes it at once, so that Restore sees it. A logStart at or
// below SPSO changes nothing.
func (p *Partition) AdvanceLogStart(now, logStart int64) []Record {
	p.expire(now)
	if logStart > p.spso {
		p.dropBefore(logStart)
	}
	return p.finish(now)
}

// ResetStartOffset moves SPSO to offset and forgets everything in flight,
// for AlterShareGroupOffsets. As in Kafka, it bumps the state epoch and
// writes a fresh ShareSnapshot. Kafka refuses it while the share group has
// members (the group coordinator checks that); here it is refused while any
// member holds a record, with group.ErrNonEmptyGroup. The offset may be
// below SPSO (to consume again) or above it; a negative one is
// group.ErrInvalidRequest.
func (p *Partition) ResetStartOffset(now, offset int64) ([]Record, error) {
	p.expire(now)
	if offset < 0 {
		return p.finish(now), fmt.Errorf("sharepart: %s: reset to negative offset %d: %w", p.key, offset, group.ErrInvalidRequest)
	}
	if p.acquired > 0 {
		return p.finish(now), fmt.Errorf("sharepart: %s: reset to %d while %d records are acquired: %w", p.key, offset, p.acquired, group.ErrNonEmptyGroup)
	}
	clear(p.runs)
	p.runs = p.runs[:0]
	p.spso, p.speo = offset, offset
	p.acquired, p.complete = 0, 0
	p.dirty, p.startMoved = p.dirty[:0], false
	p.stateEpoch++
	return []Record{p.snapshot(now)}, nil
}

// Delete ends the share-partition's state, for DeleteShareGroupOffsets (and
// the deletion of the group or topic): it returns the tombstone Kafka
// writes. It is refused while any member holds a record, with
// group.ErrNonEmptyGroup. After a successful Delete the caller drops the
// Partition; the next use of the share-partition starts again with New.
func (p *Partition) Delete(now int64) ([]Record, error) {
	p.expire(now)
	if p.acquired > 0 {
		return p.finish(now), fmt.Errorf("sharepart: %s: delete while %d records are acquired: %w", p.key, p.acquired, group.ErrNonEmptyGroup)
	}
	p.dirty, p.startMoved = p.dirty[:0], false
	p.normalize()
	return []Record{Tombstone(p.key)}, nil
}
