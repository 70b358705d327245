package partitions

import (
	"context"
	"fmt"
	"math/bits"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordlog/fjord/broker/replicamgr"
	"github.com/fjordlog/fjord/broker/tier"
	"github.com/fjordlog/fjord/storage"
)

// A consumer's read below the local log (KIP-405) runs on the node's
// remote reader pool (tier.ReadPool) when it has one, so a slow store
// holds up only the partitions read from it: fetchOnce asks the pool,
// answers the partition without records while the read is under way,
// and gives handleFetch the read's channel; handleFetch answers at once
// when the local partitions meet MinBytes (the remote result waits in the
// pool for the consumer's next fetch of that offset), or else waits for
// the reads, up to the longer of MaxWaitMillis and
// remote.fetch.max.wait.ms (Kafka's DelayedRemoteFetch), and reads again,
// taking the results.

// remoteFetch reads a consumer's fetch of offset below the local log from
// the partition's tiered copy, with its aborted transactions when
// readCommitted. ok is false when no copied segment holds offset. wait
// is non-nil while the read runs on the pool: nothing to answer yet.
func remoteFetch(h Host, t *replicamgr.Topic, partition int32, lg *storage.Log, offset int64, maxBytes int, readCommitted bool) (data []byte, aborted []storage.AbortedTxn, ok bool, wait <-chan struct{}, err error) {
	read := func(ctx context.Context) tier.ReadResult {
		data, ok, err := remoteRead(ctx, h, t, partition, offset, maxBytes)
		var aborted []storage.AbortedTxn
		if ok && err == nil && readCommitted && len(data) > 0 {
			aborted, err = remoteAbortedIn(ctx, h, t, partition, lg, offset, data)
		}
		return tier.ReadResult{Data: data, Aborted: aborted, OK: ok, Err: err}
	}
	r := h.Remote()
	if r == nil {
		return nil, nil, false, nil, nil
	}
	pool := r.Reads()
	if pool == nil {
		ctx, cancel := context.WithTimeout(context.Background(), remoteReadTimeout)
		defer cancel()
		res := read(ctx)
		return res.Data, res.Aborted, res.OK, nil, res.Err
	}
	key := tier.ReadKey{TopicID: t.ID, Partition: partition, Offset: offset, ReadCommitted: readCommitted,
		MaxBytesBucket: bits.Len(uint(maxBytes))}
	res, done, wait, err := pool.Poll(key, read)
	switch {
	case err != nil:
		return nil, nil, true, nil, fmt.Errorf("%w: %s-%d at %d: %w", ErrRemoteReadsFull, t.Name, partition, offset, err)
	case !done:
		return nil, nil, true, wait, nil
	}
	return res.Data, res.Aborted, res.OK, nil, res.Err
}

// remoteWait is how long a fetch whose first read gave n bytes waits:
// MaxWaitMillis, or remote.fetch.max.wait.ms when longer and remote reads
// are under way with MinBytes not met by the rest.
func remoteWait(h Host, resp *PooledFetch, n int, req *kmsg.FetchRequest) time.Duration {
	wait := time.Duration(req.MaxWaitMillis) * time.Millisecond
	if len(resp.remoteWaits) > 0 && n < int(max(req.MinBytes, 1)) {
		if r := h.Remote(); r != nil {
			wait = max(wait, r.FetchMaxWait())
		}
	}
	return wait
}

// forwardDone wakes ch (a fetch's wake-up channel, buffered) when any of
// waits closes, until the returned stop is called.
func forwardDone(waits []<-chan struct{}, ch chan struct{}) (stop func()) {
	if len(waits) == 0 {
		return func() {}
	}
	quit := make(chan struct{})
	for _, w := range waits {
		go func() {
			select {
			case <-w:
				select {
				case ch <- struct{}{}:
				default:
				}
			case <-quit:
			}
		}()
	}
	var once sync.Once
	return func() { once.Do(func() { close(quit) }) }
}
