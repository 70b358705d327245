package broker

import (
	"github.com/prometheus/client_golang/prometheus"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fjordlog/fjord/controller"
	"github.com/fjordlog/fjord/storage"
	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kerr"
)

// partition is this node's replica of one topic partition. The metadata
// image says whether it leads (publishLoop calls setState on every image);
// only a leader takes produce requests and serves consumers.
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
	// state is the partition's replication state in the image this broker
	// last applied; nil once the replica is dropped.
	state atomic.Pointer[replicaState]

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

// replicaState is what the image says about this replica's partition.
type replicaState struct {
	leader      bool // this broker leads
	leaderID    int32
	leaderEpoch int32
	isr         []int32 // read-only
}

// setState records the image's view of the partition.
func (p *partition) setState(ip controller.Partition, me int32) {
	prev := p.state.Load()
	st := &replicaState{leader: ip.Leader == me, leaderID: ip.Leader, leaderEpoch: ip.LeaderEpoch, isr: ip.ISR}
	p.state.Store(st)
	if prev == nil || prev.leader != st.leader || prev.leaderEpoch != st.leaderEpoch {
		p.logger.Info().Bool("leader", st.leader).Int32("leader_id", st.leaderID).Int32("leader_epoch", st.leaderEpoch).
			Ints32("isr", st.isr).Msg("replica state")
	}
	p.wakeAll()
}

// setOffline marks a replica this broker no longer holds.
func (p *partition) setOffline() { p.state.Store(nil) }

// leads reports whether this broker leads the partition now.
func (p *partition) leads() bool {
	if p == nil {
		return false
	}
	st := p.state.Load()
	return st != nil && st.leader
}

// checkEpoch compares a client's current leader epoch (-1: unchecked)
// with this leader's, as Kafka does (KIP-320): older is
// FENCED_LEADER_EPOCH, newer (this broker is behind) UNKNOWN_LEADER_EPOCH.
func (p *partition) checkEpoch(clientEpoch int32) int16 {
	st := p.state.Load()
	switch {
	case clientEpoch < 0 || st == nil:
		return 0
	case clientEpoch < st.leaderEpoch:
		return kerr.FencedLeaderEpoch.Code
	case clientEpoch > st.leaderEpoch:
		return kerr.UnknownLeaderEpoch.Code
	}
	return 0
}

// leaderEpoch is the current leader epoch (0 before any state).
func (p *partition) leaderEpoch() int32 {
	if st := p.state.Load(); st != nil {
		return st.leaderEpoch
	}
	return 0
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
