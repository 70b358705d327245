package sharecoord

import (
	"errors"
	"fmt"

	"github.com/fjordlog/fjord/group/sharepart"
)

// checkInvariants checks what table's and entry's comments state.
func (t *table) checkInvariants() error {
	var errs []error
	for k, e := range t.keys {
		st := e.state
		for i, b := range st.Batches {
			switch {
			case b.FirstOffset > b.LastOffset:
				errs = append(errs, fmt.Errorf("%s: batch %d empty: %v", k, i, b))
			case st.StartOffset >= 0 && b.FirstOffset < st.StartOffset:
				errs = append(errs, fmt.Errorf("%s: batch %d below the start offset %d: %v", k, i, st.StartOffset, b))
			case b.DeliveryState == sharepart.Available && b.DeliveryCount == 0:
				errs = append(errs, fmt.Errorf("%s: batch %d available and never delivered: %v", k, i, b))
			case b.DeliveryState == sharepart.Acquired:
				errs = append(errs, fmt.Errorf("%s: batch %d acquired: %v", k, i, b))
			}
			if i > 0 {
				p := st.Batches[i-1]
				if p.LastOffset >= b.FirstOffset {
					errs = append(errs, fmt.Errorf("%s: batches %d and %d overlap or are out of order", k, i-1, i))
				} else if p.LastOffset+1 == b.FirstOffset && p.DeliveryState == b.DeliveryState && p.DeliveryCount == b.DeliveryCount {
					errs = append(errs, fmt.Errorf("%s: batches %d and %d agree and touch: not joined", k, i-1, i))
				}
			}
		}
		if e.fenceLeader < st.LeaderEpoch || e.fenceState < st.StateEpoch {
			errs = append(errs, fmt.Errorf("%s: fence %d/%d below the state's epochs %d/%d", k, e.fenceLeader, e.fenceState, st.LeaderEpoch, st.StateEpoch))
		}
		if e.updates < 0 {
			errs = append(errs, fmt.Errorf("%s: %d updates", k, e.updates))
		}
	}
	for i, m := range t.marks {
		if m.offset < t.committed {
			errs = append(errs, fmt.Errorf("mark %d at %d below the committed %d", i, m.offset, t.committed))
		}
		if i > 0 && t.marks[i-1].offset >= m.offset {
			errs = append(errs, fmt.Errorf("marks %d and %d out of order", i-1, i))
		}
	}
	for k, off := range t.needs {
		if off >= t.committed {
			errs = append(errs, fmt.Errorf("%s needs %d, not below the committed %d", k, off, t.committed))
		}
	}
	return errors.Join(errs...)
}
