package sharepart

import (
	"fmt"
	"sort"
)

// State is the delivery state of one in-flight record. The values are
// Kafka's (RecordState ids), which are also the DeliveryState values of
// the __share_group_state records; ACQUIRED is never written there.
type State int8

const (
	// Available records can be acquired by the next fetch.
	Available State = 0
	// Acquired records are locked to one member until it acknowledges them
	// or the lock deadline passes.
	Acquired State = 1
	// Acknowledged records were accepted by a consumer: done.
	Acknowledged State = 2
	// Archived records are done without being accepted: rejected, past the
	// delivery limit, or offsets that hold no deliverable record (gaps).
	Archived State = 4
)

func (s State) String() string {
	switch s {
	case Available:
		return "AVAILABLE"
	case Acquired:
		return "ACQUIRED"
	case Acknowledged:
		return "ACKNOWLEDGED"
	case Archived:
		return "ARCHIVED"
	}
	return fmt.Sprintf("State(%d)", int8(s))
}

// terminal states are final: SPSO moves past them.
func (s State) terminal() bool { return s == Acknowledged || s == Archived }

// noDeadline is the deadline of a record that is not acquired. Time is Unix
// milliseconds, so real deadlines are positive.
const noDeadline = -1

// run is a maximal stretch [first, last] of in-flight offsets that share
// every attribute. Runs are how this package keeps state per record without
// a slot per record: a fetch of 500 records is one run, and a run splits
// only where an acknowledgement, an expiry or a gap in the log makes its
// records differ. This is Kafka's choice too (InFlightBatch, split into
// per-offset state on demand), with one difference: Kafka never merges
// split state back, while runs merge again (normalize) as soon as their
// records agree, so the number of runs is bounded by the number of real
// differences, not by history.
//
// Invariants (checked by checkInvariants):
//   - first <= last;
//   - state == Acquired iff member != "" iff deadline != noDeadline;
//   - state == Acquired implies count >= 1; count >= 0.
type run struct {
	first, last int64
	state       State
	// count is the delivery count: how many times the records were
	// acquired. Never decreases while the records are in flight.
	count int16
	// member holds the records while state == Acquired.
	member string
	// deadline (Unix ms) is when the acquisition lock ends, while Acquired.
	deadline int64
}

func (r run) len() int64 { return r.last - r.first + 1 }

// sameAs reports whether r and o differ only in their offsets.
func (r run) sameAs(o run) bool {
	return r.state == o.state && r.count == o.count && r.member == o.member && r.deadline == o.deadline
}

// durable is what the __share_group_state records say about r's records:
// an acquisition lock does not outlive the leader that granted it, so an
// acquired record is stored as available with its delivery count.
func (r run) durable() (State, int16) {
	if r.state == Acquired {
		return Available, r.count
	}
	return r.state, r.count
}

// find returns the index of the run holding off, or len(p.runs) if off is
// not in flight.
func (p *Partition) find(off int64) int {
	i := sort.Search(len(p.runs), func(i int) bool { return p.runs[i].last >= off })
	if i < len(p.runs) && p.runs[i].first <= off {
		return i
	}
	return len(p.runs)
}

// splitAt makes off the first offset of a run and returns that run's
// index; off == p.speo returns len(p.runs).
// REQUIRES: p.spso <= off <= p.speo.
func (p *Partition) splitAt(off int64) int {
	if off == p.speo {
		return len(p.runs)
	}
	i := p.find(off)
	r := p.runs[i]
	if r.first == off {
		return i
	}
	lo, hi := r, r
	lo.last, hi.first = off-1, off
	p.runs = append(p.runs, run{})
	copy(p.runs[i+2:], p.runs[i+1:])
	p.runs[i], p.runs[i+1] = lo, hi
	return i + 1
}

// span splits runs so that runs[i:j] cover exactly [first, last].
// REQUIRES: p.spso <= first <= last < p.speo.
func (p *Partition) span(first, last int64) (i, j int) {
	i = p.splitAt(first)
	j = p.splitAt(last + 1)
	return i, j
}

// set changes the attributes of runs[i], keeping the counters and the
// record of durable changes up to date.
func (p *Partition) set(i int, state State, count int16, member string, deadline int64) {
	r := &p.runs[i]
	oldState, oldCount := r.durable()
	p.account(*r, -1)
	r.state, r.count, r.member, r.deadline = state, count, member, deadline
	p.account(*r, +1)
	if newState, newCount := r.durable(); newState != oldState || newCount != oldCount {
		p.markDirty(r.first, r.last)
	}
}

// push appends r at the end of the window.
// REQUIRES: r.first == p.speo.
func (p *Partition) push(r run) {
	p.runs = append(p.runs, r)
	p.speo = r.last + 1
	p.account(r, +1)
	if st, n := r.durable(); st != Available || n != 0 {
		p.markDirty(r.first, r.last)
	}
}

// account adds (sign=+1) or removes (-1) r's records from the counters.
func (p *Partition) account(r run, sign int64) {
	switch {
	case r.state == Acquired:
		p.acquired += sign * r.len()
	case r.state.terminal():
		p.complete += sign * r.len()
	}
}

// normalize merges neighbouring runs that agree on everything.
func (p *Partition) normalize() {
	if len(p.runs) < 2 {
		return
	}
	out := p.runs[:1]
	for _, r := range p.runs[1:] {
		if last := &out[len(out)-1]; last.sameAs(r) {
			last.last = r.last
			continue
		}
		out = append(out, r)
	}
	clear(p.runs[len(out):])
	p.runs = out
}

// advanceStart moves SPSO past the done (acknowledged or archived) records
// at the head of the window.
func (p *Partition) advanceStart() {
	n := 0
	for n < len(p.runs) && p.runs[n].state.terminal() {
		p.account(p.runs[n], -1)
		n++
	}
	if n == 0 {
		return
	}
	p.dropRuns(n)
	if len(p.runs) > 0 {
		p.spso = p.runs[0].first
	} else {
		p.spso = p.speo
	}
	p.startMoved = true
}

// dropBefore forgets every in-flight record below off and moves SPSO (and
// SPEO, if the window empties) to off.
// REQUIRES: off > p.spso.
func (p *Partition) dropBefore(off int64) {
	if off >= p.speo {
		for _, r := range p.runs {
			p.account(r, -1)
		}
		p.dropRuns(len(p.runs))
		p.spso, p.speo = off, off
		p.startMoved = true
		return
	}
	i := p.splitAt(off)
	for _, r := range p.runs[:i] {
		p.account(r, -1)
	}
	p.dropRuns(i)
	p.spso = off
	p.startMoved = true
}

// dropRuns removes the first n runs, clearing the vacated tail so that it
// holds no member ids.
func (p *Partition) dropRuns(n int) {
	k := copy(p.runs, p.runs[n:])
	clear(p.runs[k:])
	p.runs = p.runs[:k]
}
