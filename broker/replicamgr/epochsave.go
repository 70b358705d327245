package replicamgr

import (
	"errors"
	"sync"

	"github.com/fjordlog/fjord/storage"
)

// epochSaveWorkers bounds the leader-epoch checkpoints written at once: a
// restart or failover leaves one pending per partition led here, each two
// fsyncs.
const epochSaveWorkers = 4

// epochSaver writes, in the background, the leader-epoch checkpoints that
// new leaderships left pending (storage.Log.AssignEpoch keeps the entry in
// memory, so a leader change waits for no fsync). Whichever comes first,
// this or the epoch's first append, writes it; the other finds nothing to
// do.
//
// Invariant: a log is in queue at most once (queued), and workers counts
// the goroutines draining queue, at most epochSaveWorkers; a worker exits
// when it finds queue empty, under mu, so nothing added is left without
// one.
type epochSaver struct {
	m       *Manager
	mu      sync.Mutex
	queue   []*storage.Log
	queued  map[*storage.Log]struct{}
	workers int
}

// add queues lg if its epoch checkpoint is pending.
func (s *epochSaver) add(lg *storage.Log) {
	if lg == nil || !lg.EpochPending() {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.queued[lg]; ok {
		return
	}
	if s.queued == nil {
		s.queued = map[*storage.Log]struct{}{}
	}
	s.queued[lg] = struct{}{}
	s.queue = append(s.queue, lg)
	if s.workers >= epochSaveWorkers {
		return
	}
	if s.m.cfg.Go(s.work) {
		s.workers++
	} else if s.workers == 0 {
		// Shutting down: nobody will drain the queue, and Close writes
		// what is pending.
		s.queue, s.queued = nil, nil
	}
}

func (s *epochSaver) work() {
	for {
		s.mu.Lock()
		if len(s.queue) == 0 || s.m.ctx.Err() != nil {
			s.workers--
			s.mu.Unlock()
			return
		}
		lg := s.queue[0]
		s.queue[0] = nil
		s.queue = s.queue[1:]
		delete(s.queued, lg)
		s.mu.Unlock()
		// A closed log has nothing to do (Close wrote what was pending);
		// a failed one is repaired and reopened, and its appends would
		// fail the same way.
		if err := lg.SaveEpochs(); err != nil && !errors.Is(err, storage.ErrClosed) {
			s.m.log.Warn().Err(err).Msg("writing a new leader's epoch checkpoint in the background failed; the epoch's first append tries again")
		}
	}
}
