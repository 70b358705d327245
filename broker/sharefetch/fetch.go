package sharefetch

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordlog/fjord/group/sharepart"
	"github.com/fjordlog/fjord/storage/recordbatch"
)

// shareFetch is the fetching part of one ShareFetch: the partitions to
// fetch (the session's), read from the log and acquired for the member,
// waiting for data up to MaxWaitMs.
//
// An attempt looks every partition's share-partition up (loading it on
// first use), reads the log of those that can acquire from where each
// would deliver next, and, once MinBytes are there (or the wait is over),
// acquires from what it read, MaxRecords in all. Between attempts the
// fetch sleeps until something it watches moves: a partition's high
// watermark or leadership (Replica.Watch), or a share-partition's records
// (released, expired, acknowledged: the window has room again) or state
// (loaded, dropped). It registers before it looks, so no change is lost.
type shareFetch struct {
	m     *Manager
	key   sessionKey
	ss    *session
	epoch int32 // the session's epoch once this request is answered
	parts []*fetchPart

	maxBytes, minBytes    int
	maxRecords, batchSize int

	wake chan struct{}
	// stale: another request replaced or advanced the session before this
	// one acquired anything; it answers INVALID_SHARE_SESSION_EPOCH, as
	// Kafka, and acquires nothing.
	stale bool
}

// fetchPart is one partition of a fetch.
type fetchPart struct {
	tp
	requiresUpdate bool // the session wants it in the answer
	rep            Replica
	// err is why the partition is answered with an error, nil if it is
	// not. Decided before the first attempt (unknown topic id, denied,
	// not led here) or by one (leadership lost, a read or write failed).
	err error
	// watched is the share-partition whose waiters hold the fetch's wake
	// channel; sp the one the current attempt uses.
	watched, sp *sharePartition

	// The current attempt's read: the share-partition's start offset,
	// and the batches from from on.
	start int64
	from  int64
	data  []byte
	spans []batchSpan

	// The answer: what was acquired, the batches holding it, and the
	// writes to wait for first.
	acquired []kmsg.ShareFetchResponseTopicPartitionAcquiredRecord
	records  []byte
	writes   []*pendingWrite
}

// resolve decides the partitions' errors known before any attempt, in
// Kafka's order: the topic id is unknown (UNKNOWN_TOPIC_ID), its topic
// may not be read (TOPIC_AUTHORIZATION_FAILED), the node does not lead
// the partition or it does not exist (the node's code).
func (f *shareFetch) resolve(r *readable) {
	for _, fp := range f.parts {
		name := f.m.host.TopicName(fp.id)
		switch {
		case name == "":
			fp.err = fmt.Errorf("sharefetch: topic id %x: %w", fp.id, kerr.UnknownTopicID)
		case !r.ok(name):
			fp.err = fmt.Errorf("sharefetch: topic %s: %w", name, kerr.TopicAuthorizationFailed)
		default:
			rep, code := f.m.host.Partition(fp.id, fp.p)
			if code != 0 {
				fp.err = fmt.Errorf("sharefetch: %s-%d: %w", name, fp.p, codeError(code))
				f.m.lost(sharepart.Key{Group: f.key.group, TopicID: fp.id, Partition: fp.p}, code)
				continue
			}
			fp.rep = rep
		}
	}
}

// run attempts until something is acquired, an error needs answering,
// or wait is over (or the Manager closes). False when ctx (the
// connection) ended first: nobody is listening.
func (f *shareFetch) run(ctx context.Context, wait time.Duration) bool {
	f.wake = make(chan struct{}, 1)
	defer f.unwatchAll()
	deadline := time.Now().Add(wait)
	timer := time.NewTimer(max(wait, 0))
	defer timer.Stop()
	closing := f.m.ctx.Done()
	for {
		final := !time.Now().Before(deadline)
		if f.attempt(final) {
			return true
		}
		select {
		case <-f.wake:
		case <-timer.C:
		case <-ctx.Done():
			return false
		case <-closing:
			deadline, closing = time.Now(), nil
		}
	}
}

// attempt is one look at the partitions; true when the fetch is to be
// answered now.
func (f *shareFetch) attempt(final bool) bool {
	m := f.m
	now := m.now()
	var ready []*fetchPart
	live, failed := 0, false
	for _, fp := range f.parts {
		fp.data, fp.spans = nil, nil
		if fp.err != nil {
			continue
		}
		if fp.watched != nil {
			if err := fp.watched.dropReason(); err != nil && !benign(err) {
				fp.err, failed = err, true
				continue
			}
		}
		fp.rep.Watch(f.wake)
		key := sharepart.Key{Group: f.key.group, TopicID: fp.id, Partition: fp.p}
		sp, err := m.partition(key, fp.rep, now)
		if err != nil {
			fp.err, failed = err, true
			continue
		}
		live++
		f.watch(fp, sp)
		pk, err := sp.look()
		switch {
		case errors.Is(err, errLoading), err != nil && benign(err):
			// Its state (or drop) will wake the fetch.
			continue
		case err != nil:
			fp.err, failed = err, true
			continue
		case !pk.canAcquire:
			continue
		}
		fp.sp, fp.from, fp.start = sp, pk.next, pk.start
		ready = append(ready, fp)
	}
	budget := max(1, f.maxBytes/max(1, len(ready)))
	for _, fp := range ready {
		if f.read(fp, budget, now) {
			failed = true
		}
	}
	total := 0
	for _, fp := range ready {
		if len(fp.spans) > 0 {
			total += fp.spans[len(fp.spans)-1].to
		}
	}
	if live == 0 || failed {
		return true
	}
	if f.minBytes > 0 && total < f.minBytes && !final {
		return false
	}
	if !m.current(f.ss, f.epoch) {
		f.stale = true
		return true
	}
	if f.acquire(ready, now) || final || f.minBytes <= 0 {
		return true
	}
	return false
}

// read reads at most budget bytes (at least one whole batch) of fp's log
// from fp.from, first moving the share-partition's start to the log start
// if retention or DeleteRecords moved it past. True when the read failed
// (fp.err says why).
func (f *shareFetch) read(fp *fetchPart, budget int, now int64) bool {
	start := fp.start
	for try := 0; ; try++ {
		logStart, hw := fp.rep.Offsets()
		if logStart > start {
			// Its write is ordered before this fetch's acquisition, which
			// the answer waits for.
			w, err := fp.sp.step(true, func(p *sharepart.Partition) []sharepart.Record { return p.AdvanceLogStart(now, logStart) })
			if err != nil {
				fp.err = err
				return true
			}
			if w != nil {
				fp.writes = append(fp.writes, w)
			}
			start = logStart
		}
		off := max(fp.from, logStart)
		if off >= hw {
			return false
		}
		data, err := fp.rep.Read(off, budget)
		if err != nil {
			// The log start may have moved since Offsets: try once more.
			if ls, _ := fp.rep.Offsets(); try == 0 && ls > off {
				continue
			}
			fp.err = fmt.Errorf("sharefetch: reading %x-%d at %d: %w", fp.id, fp.p, off, err)
			return true
		}
		fp.from, fp.data, fp.spans = off, data, scan(data)
		return false
	}
}

// acquire acquires for the member from what the attempt read, partition
// by partition, MaxRecords in all. True when anything was acquired.
func (f *shareFetch) acquire(ready []*fetchPart, now int64) bool {
	remaining := f.maxRecords
	got := false
	for _, fp := range ready {
		if fp.err != nil || len(fp.spans) == 0 || remaining <= 0 {
			continue
		}
		ranges := make([]sharepart.Range, 0, len(fp.spans))
		for _, s := range fp.spans {
			if !s.control {
				ranges = append(ranges, sharepart.Range{First: s.base, Last: s.last})
			}
		}
		fetch := sharepart.Fetch{
			From: fp.from, End: fp.spans[len(fp.spans)-1].last + 1, Records: ranges,
			MaxRecords: remaining, BatchSize: f.batchSize,
		}
		var acq []kmsg.ShareFetchResponseTopicPartitionAcquiredRecord
		w, err := fp.sp.step(false, func(p *sharepart.Partition) []sharepart.Record {
			var recs []sharepart.Record
			acq, recs = p.Acquire(now, f.key.member, fetch)
			return recs
		})
		if err != nil {
			fp.err = err
			continue
		}
		if w != nil {
			fp.writes = append(fp.writes, w)
		}
		if len(acq) == 0 {
			continue
		}
		for _, a := range acq {
			remaining -= int(a.LastOffset - a.FirstOffset + 1)
		}
		fp.acquired = acq
		fp.records = fp.batchesHolding(acq[0].FirstOffset, acq[len(acq)-1].LastOffset)
		got = true
	}
	return got
}

// settle waits for the writes the answer depends on; a partition whose
// write failed answers the failure instead of its records (the
// share-partition is dropped, so they are not locked to anyone).
func (f *shareFetch) settle() {
	for _, fp := range f.parts {
		for _, w := range fp.writes {
			if err := w.wait(); err != nil && fp.err == nil {
				fp.err, fp.acquired, fp.records = err, nil, nil
			}
		}
	}
}

// watch moves the fetch's wake channel to sp's waiters.
func (f *shareFetch) watch(fp *fetchPart, sp *sharePartition) {
	if fp.watched == sp {
		return
	}
	if fp.watched != nil {
		fp.watched.unwatch(f.wake)
	}
	sp.watch(f.wake)
	fp.watched = sp
}

func (f *shareFetch) unwatchAll() {
	for _, fp := range f.parts {
		if fp.watched != nil {
			fp.watched.unwatch(f.wake)
			fp.watched = nil
		}
		if fp.rep != nil {
			fp.rep.Unwatch(f.wake)
		}
	}
}

// batchSpan is one record batch of a log read: its offsets and where its
// bytes are.
type batchSpan struct {
	base, last int64
	from, to   int
	control    bool
}

// scan lists the whole, well-framed batches at the front of a log read,
// in order; it stops at anything else (the log hands out only whole
// batches, so that is a truncated tail or damage, which is not served).
func scan(data []byte) []batchSpan {
	var out []batchSpan
	for pos := 0; len(data)-pos >= recordbatch.HeaderLen; {
		b := data[pos:]
		info, err := recordbatch.ParseHeader(b)
		if err != nil || info.Bytes > len(b) {
			break
		}
		base, last := recordbatch.BaseOffset(b), recordbatch.LastOffset(b)
		if last < base || (len(out) > 0 && base <= out[len(out)-1].last) {
			break
		}
		out = append(out, batchSpan{base: base, last: last, from: pos, to: pos + info.Bytes, control: info.Control})
		pos += info.Bytes
	}
	return out
}

// batchesHolding is the bytes of the read's batches from the one holding
// first to the one holding last: what the member needs to see the records
// it acquired (it skips the rest, as Kafka's clients do).
func (fp *fetchPart) batchesHolding(first, last int64) []byte {
	i, j := -1, -1
	for k, s := range fp.spans {
		if i < 0 && s.last >= first {
			i = k
		}
		if s.base <= last {
			j = k
		}
	}
	if i < 0 || j < i {
		return nil
	}
	return fp.data[fp.spans[i].from:fp.spans[j].to]
}
