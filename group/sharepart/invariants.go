package sharepart

import (
	"errors"
	"fmt"
)

// checkInvariants returns every broken invariant of the Partition doc
// comment that can be seen in one state. Tests call it after each step; it
// is not on any request path.
func (p *Partition) checkInvariants() error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }

	if p.spso < 0 || p.spso > p.speo {
		bad("window [%d, %d)", p.spso, p.speo)
	}
	next := p.spso
	var acquired, complete int64
	for i, r := range p.runs {
		if r.first != next {
			bad("run %d [%d, %d] starts at %d, want %d", i, r.first, r.last, r.first, next)
		}
		if r.first > r.last {
			bad("run %d [%d, %d] is empty", i, r.first, r.last)
		}
		next = r.last + 1
		if i > 0 && p.runs[i-1].sameAs(r) {
			bad("runs %d and %d are not merged: %+v %+v", i-1, i, p.runs[i-1], r)
		}
		switch r.state {
		case Available, Acknowledged, Archived:
			if r.member != "" || r.deadline != noDeadline {
				bad("run %d [%d, %d] %s has member %q deadline %d", i, r.first, r.last, r.state, r.member, r.deadline)
			}
		case Acquired:
			if r.member == "" || r.deadline == noDeadline {
				bad("run %d [%d, %d] acquired without member (%q) or deadline (%d)", i, r.first, r.last, r.member, r.deadline)
			}
			if r.count < 1 {
				bad("run %d [%d, %d] acquired with delivery count %d", i, r.first, r.last, r.count)
			}
			acquired += r.len()
		default:
			bad("run %d [%d, %d] in state %d", i, r.first, r.last, r.state)
		}
		if r.state.terminal() {
			complete += r.len()
		}
		if r.count < 0 {
			bad("run %d [%d, %d] delivery count %d", i, r.first, r.last, r.count)
		}
	}
	if len(p.runs) > 0 && p.runs[0].state.terminal() {
		bad("SPSO %d sits on a done run %s", p.spso, p.runs[0].state)
	}
	if next != p.speo {
		bad("runs end at %d, SPEO is %d", next, p.speo)
	}
	if acquired != p.acquired {
		bad("acquired counter %d, runs say %d", p.acquired, acquired)
	}
	if acquired > int64(p.cfg.PartitionMaxRecordLocks) {
		bad("%d records acquired, limit %d", acquired, p.cfg.PartitionMaxRecordLocks)
	}
	if complete != p.complete {
		bad("complete counter %d, runs say %d", p.complete, complete)
	}
	if len(p.dirty) > 0 || p.startMoved {
		bad("step state left over: dirty %v, startMoved %v", p.dirty, p.startMoved)
	}
	return errors.Join(errs...)
}
