package sharefetch

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
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
// watermark (and with it the last stable offset) or leadership
// (Replica.Watch), or a share-partition's records (released, expired,
// acknowledged: the window has room again) or state (loaded, dropped). It
// registers before it looks, so no change is lost. An attempt whose reads
// held only gaps (control batches, aborted transactions) archives them and
// acquires nothing; the next attempt follows at once, from past them,
// rather than after a wait (up to maxRereads in a row).
//
// Under ReadCommitted (the group's share.isolation.level when the request
// came) the log is read up to the last stable offset, and the batches of
// aborted transactions are gaps too, as Kafka's SharePartition archives
// them (filterAbortedTransactionalAcquiredRecords).
type shareFetch struct {
	m     *Manager
	key   sessionKey
	ss    *session
	epoch int32 // the session's epoch once this request is answered
	iso   Isolation
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

// maxRereads bounds the attempts a fetch makes in a row, without waiting,
// past reads that held only gaps: each reads up to MaxBytes more of the
// log, so a long stretch of aborted transactions is crossed in one
// request without one request reading without end.
const maxRereads = 16

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
	rereads := 0
	for {
		final := !time.Now().Before(deadline)
		done, again := f.attempt(final, rereads < maxRereads)
		if done {
			return true
		}
		if again {
			rereads++
			continue
		}
		rereads = 0
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

// attempt is one look at the partitions; done when the fetch is to be
// answered now, again (only when reread allows) when it acquired nothing
// but archived gaps and should look again at once.
func (f *shareFetch) attempt(final, reread bool) (done, again bool) {
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
		return true, false
	}
	if f.minBytes > 0 && total < f.minBytes && !final {
		return false, false
	}
	if !m.current(f.ss, f.epoch) {
		f.stale = true
		return true, false
	}
	got, skipped := f.acquire(ready, now)
	switch {
	case got:
		return true, false
	case skipped && reread:
		return false, true
	}
	return final || f.minBytes <= 0, false
}

// read reads at most budget bytes (at least one whole batch) of fp's log
// from fp.from, up to the high watermark, or under ReadCommitted the last
// stable offset, first moving the share-partition's start to the log
// start if retention or DeleteRecords moved it past. True when the read
// failed (fp.err says why).
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
		limit := hw
		if f.iso == ReadCommitted {
			limit = min(hw, fp.rep.LastStable())
		}
		if off >= limit {
			return false
		}
		data, aborted, err := fp.rep.Read(off, budget, f.iso)
		if err != nil {
			// The log start may have moved since Offsets: try once more.
			if ls, _ := fp.rep.Offsets(); try == 0 && ls > off {
				continue
			}
			fp.err = fmt.Errorf("sharefetch: reading %x-%d at %d: %w", fp.id, fp.p, off, err)
			return true
		}
		fp.from, fp.data, fp.spans = off, data, scan(data)
		markAborted(fp.spans, aborted)
		return false
	}
}

// acquire acquires for the member from what the attempt read, partition
// by partition, MaxRecords in all. got: anything was acquired; skipped: a
// partition acquired nothing but moved past gaps it read (its next fetch
// offset went up), so reading on may find records.
func (f *shareFetch) acquire(ready []*fetchPart, now int64) (got, skipped bool) {
	remaining := f.maxRecords
	for _, fp := range ready {
		if fp.err != nil || len(fp.spans) == 0 || remaining <= 0 {
			continue
		}
		// Control batches and aborted transactions' batches are left out:
		// gaps, which the state machine archives.
		ranges := make([]sharepart.Range, 0, len(fp.spans))
		for _, s := range fp.spans {
			if !s.control && !s.aborted {
				ranges = append(ranges, sharepart.Range{First: s.base, Last: s.last})
			}
		}
		fetch := sharepart.Fetch{
			From: fp.from, End: fp.spans[len(fp.spans)-1].last + 1, Records: ranges,
			MaxRecords: remaining, BatchSize: f.batchSize,
		}
		var (
			acq  []kmsg.ShareFetchResponseTopicPartitionAcquiredRecord
			next int64
		)
		w, err := fp.sp.step(false, func(p *sharepart.Partition) []sharepart.Record {
			var recs []sharepart.Record
			acq, recs = p.Acquire(now, f.key.member, fetch)
			next = p.NextFetchOffset()
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
			skipped = skipped || next > fp.from
			continue
		}
		for _, a := range acq {
			remaining -= int(a.LastOffset - a.FirstOffset + 1)
		}
		fp.acquired = acq
		fp.records = fp.batchesHolding(acq[0].FirstOffset, acq[len(acq)-1].LastOffset)
		got = true
	}
	return got, skipped
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

// batchSpan is one record batch of a log read: its offsets, where its
// bytes are, and what it holds.
type batchSpan struct {
	base, last int64
	from, to   int
	control    bool
	// txn and pid: a transactional batch and its producer id.
	txn bool
	pid int64
	// aborted: a data batch of an aborted transaction (markAborted).
	aborted bool
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
		out = append(out, batchSpan{base: base, last: last, from: pos, to: pos + info.Bytes, control: info.Control,
			txn: info.Transactional, pid: info.ProducerID})
		pos += info.Bytes
	}
	return out
}

// markAborted marks the data batches of aborted transactions among spans:
// a transactional batch is aborted when its producer has an aborted
// transaction that began at or before it and whose abort marker comes
// after it. This is the rule a read_committed consumer applies to a
// Fetch's AbortedTransactions (and Kafka's SharePartition to its share
// fetches), with the marker's offset, which the log's index keeps, in
// place of watching for the marker among the batches. A producer has one
// transaction open at a time, so its aborted transactions do not overlap
// and, in marker order as the log lists them, ascend by first offset: the
// one that can hold a batch is the last to begin at or before it.
func markAborted(spans []batchSpan, aborted []AbortedTxn) {
	if len(aborted) == 0 {
		return
	}
	byPID := make(map[int64][]AbortedTxn)
	for _, a := range aborted {
		byPID[a.ProducerID] = append(byPID[a.ProducerID], a)
	}
	for _, txns := range byPID {
		slices.SortFunc(txns, func(x, y AbortedTxn) int { return cmp.Compare(x.FirstOffset, y.FirstOffset) })
	}
	for i := range spans {
		s := &spans[i]
		txns := byPID[s.pid]
		if !s.txn || s.control || len(txns) == 0 {
			continue
		}
		// The first to begin after the batch, and the one before it.
		j := sort.Search(len(txns), func(k int) bool { return txns[k].FirstOffset > s.base })
		s.aborted = j > 0 && s.base < txns[j-1].LastOffset
	}
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
