package broker

import (
	"github.com/prometheus/client_golang/prometheus"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fjordlog/fjord/storage"
	"github.com/rs/zerolog"
)

// partition is this node's replica of one topic partition; on a single node
// it is always the leader.
//
// The log has one writer at a time (storage.Log serialises appends). The high
// watermark is what consumers may see and what acks wait for: on a topic that
// fsyncs before acknowledging it follows the durable end of the log, so a
// record is never visible before it would survive a crash; on a relaxed
// topic (flush.messages > 1) it follows the log end.
//
// Invariant: hw only grows while the partition lives, and hw <= log end.
type partition struct {
	topic   string
	index   int32
	topicID [16]byte
	log     *storage.Log
	logger  zerolog.Logger

	settings atomic.Pointer[topicSettings]
	hw       atomic.Int64 // written by advanceHW only

	mu struct {
		sync.Mutex
		waiters map[chan struct{}]struct{} // fetches waiting for hw to move
	}
	unflushed atomic.Int64 // appended records since the last flush (relaxed topics)
	flushTime prometheus.Observer
}

func newPartition(topic string, index int32, id [16]byte, lg *storage.Log, s topicSettings, logger zerolog.Logger) *partition {
	p := &partition{topic: topic, index: index, topicID: id, log: lg, logger: logger}
	p.settings.Store(&s)
	p.mu.waiters = make(map[chan struct{}]struct{})
	p.hw.Store(lg.EndOffset()) // all of a recovered log is durable
	return p
}

// syncOnAck reports whether acknowledgements wait for fsync.
func (p *partition) syncOnAck() bool { return p.settings.Load().flushMessages <= 1 }

// advanceHW publishes a new high watermark from the log's state and wakes
// waiting fetches.
func (p *partition) advanceHW() {
	next := p.log.EndOffset()
	if p.syncOnAck() {
		next = p.log.DurableOffset()
	}
	for {
		cur := p.hw.Load()
		if next <= cur {
			return
		}
		if p.hw.CompareAndSwap(cur, next) {
			break
		}
	}
	p.wakeAll()
}

// wakeAll signals every waiting fetch once.
func (p *partition) wakeAll() {
	p.mu.Lock()
	for ch := range p.mu.waiters {
		select {
		case ch <- struct{}{}:
		default:
		}
		delete(p.mu.waiters, ch)
	}
	p.mu.Unlock()
}

// watch registers ch to be signalled once when hw moves; unwatch removes it.
func (p *partition) watch(ch chan struct{}) {
	p.mu.Lock()
	p.mu.waiters[ch] = struct{}{}
	p.mu.Unlock()
}

func (p *partition) unwatch(ch chan struct{}) {
	p.mu.Lock()
	delete(p.mu.waiters, ch)
	p.mu.Unlock()
}

// flush fsyncs the log and publishes the new high watermark.
func (p *partition) flush() error {
	start := time.Now()
	err := p.log.Flush()
	if p.flushTime != nil {
		p.flushTime.Observe(time.Since(start).Seconds())
	}
	if err != nil {
		p.logger.Error().Err(err).Msg("flush failed; partition takes no more writes")
		return err
	}
	p.unflushed.Store(0)
	p.advanceHW()
	return nil
}
