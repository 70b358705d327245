package storage

import (
	"fmt"

	"github.com/fjordlog/fjord/storage/recordbatch"
)

// AppendCoordinator appends a transactional batch that a coordinator of
// this broker wrote for a producer's transaction (recordbatch.BuildTxn: the group
// coordinator's transactional offset commits), as the leader of
// leaderEpoch. Kafka appends these with origin COORDINATOR: the producer's
// epoch is checked (an older one is ErrInvalidEpoch, a fenced producer),
// its sequence numbers are not (the batch is not the client's, and every
// such batch starts at sequence 0). The batch opens the producer's
// transaction on this partition, which its marker ends, as any
// transactional batch does.
func (l *Log) AppendCoordinator(batch []byte, info recordbatch.Info, leaderEpoch int32, now int64) (AppendResult, error) {
	if info.Control || !info.Transactional || !info.Idempotent() {
		return AppendResult{}, fmt.Errorf("%w: a coordinator's batch must be transactional data with a producer id", ErrInvalidRecord)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.writableLocked(); err != nil {
		return AppendResult{}, err
	}
	if e := l.mu.producers[info.ProducerID]; e != nil && info.ProducerEpoch < e.epoch {
		return AppendResult{}, fmt.Errorf("%w: producer %d epoch %d is older than %d", ErrInvalidEpoch, info.ProducerID, info.ProducerEpoch, e.epoch)
	}
	return l.appendLocked(batch, info, nil, leaderEpoch, now)
}
