package sharepart

// Tick ends the acquisition locks whose deadline is at or before now: their
// records become available again, or archived if they have been delivered
// DeliveryCountLimit times. It returns the records to persist.
func (p *Partition) Tick(now int64) []Record {
	p.expire(now)
	return p.finish(now)
}

// NextDeadline is the earliest acquisition-lock deadline (Unix ms), or -1
// if no record is acquired. The caller calls Tick then.
func (p *Partition) NextDeadline() int64 {
	next := int64(noDeadline)
	for _, r := range p.runs {
		if r.state == Acquired && (next == noDeadline || r.deadline < next) {
			next = r.deadline
		}
	}
	return next
}

// ReleaseMember releases every record member holds, as Kafka does when a
// member's share session closes or the member leaves or is fenced: the
// records become available, keeping their delivery counts (Kafka 4.2 counts
// a delivery that ended this way, KAFKA-19972), or archived at the delivery
// limit. It returns the records to persist.
func (p *Partition) ReleaseMember(now int64, member string) []Record {
	p.expire(now)
	for i, r := range p.runs {
		if r.state == Acquired && r.member == member {
			p.release(i)
		}
	}
	return p.finish(now)
}

// expire releases the records whose lock has ended by now.
func (p *Partition) expire(now int64) {
	for i, r := range p.runs {
		if r.state == Acquired && r.deadline <= now {
			p.release(i)
		}
	}
}

// release ends the lock on runs[i]: available again, or archived once the
// records have been delivered DeliveryCountLimit times.
func (p *Partition) release(i int) {
	st, count := Available, p.runs[i].count
	if count >= p.cfg.DeliveryCountLimit {
		st = Archived
	}
	p.set(i, st, count, "", noDeadline)
}
