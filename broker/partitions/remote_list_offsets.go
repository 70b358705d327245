package partitions

import (
	"context"
	"fmt"
	"time"

	"github.com/fjordlog/fjord/broker/replicamgr"
	"github.com/fjordlog/fjord/storage"
)

// remoteOffsetForTimestamp answers ListOffsets by timestamp ts for a
// tiered partition: when its copy reaches below the local log start, the
// copied segments are searched first, and a record found there is the
// answer; otherwise the local answer (off, rts, err) stands. The store is
// read on the request's goroutine, bounded by remoteTimestampTimeout
// (ListOffsets v10's TimeoutMillis is the client's own bound on it).
func remoteOffsetForTimestamp(h Host, t *replicamgr.Topic, partition int32, lg *storage.Log, ts, off, rts int64, err error) (int64, int64, error) {
	r := h.Remote()
	if r == nil {
		return off, rts, err
	}
	if rs := r.Start(t.ID, partition); rs < 0 || rs >= lg.StartOffset() {
		return off, rts, err // nothing only in the copy
	}
	ctx, cancel := context.WithTimeout(context.Background(), remoteTimestampTimeout)
	defer cancel()
	roff, rrts, ok, rerr := r.OffsetForTimestamp(ctx, t.Name, t.ID, partition, ts)
	switch {
	case rerr != nil:
		return -1, -1, fmt.Errorf("%w: offset for timestamp %d of %s-%d: %w", ErrRemoteStorage, ts, t.Name, partition, rerr)
	case ok:
		return roff, rrts, nil
	}
	return off, rts, err
}

// remoteTimestampTimeout bounds a ListOffsets search of the store.
const remoteTimestampTimeout = 10 * time.Second
