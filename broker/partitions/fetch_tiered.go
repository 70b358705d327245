package partitions

import (
	"fmt"

	"github.com/fjordlog/fjord/broker/replicamgr"
)

// movedToTiered classifies a follower's fetch at offset, below the local
// log start, that the local log refused with err (out of range): when the
// partition's tiered copy holds offset (at or above the remote log start)
// it is ErrMovedToTiered, which tells the follower to restart from the
// copy rather than fetch what the leader deleted locally; otherwise err
// stands (OFFSET_OUT_OF_RANGE with the log start, below which there is
// nothing anywhere). A follower's fetch is never read from the store.
func movedToTiered(h Host, t *replicamgr.Topic, partition int32, offset int64, err error) error {
	r := h.Remote()
	if r == nil {
		return err
	}
	if rs := r.Start(t.ID, partition); rs >= 0 && rs <= offset {
		return fmt.Errorf("%w: %s-%d at %d: %w", ErrMovedToTiered, t.Name, partition, offset, err)
	}
	return err
}
