package sharepart

import (
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Range is the offsets [First, Last].
type Range struct{ First, Last int64 }

// Fetch is what the broker read from the partition's log for one share
// fetch, and the fetch's limits.
type Fetch struct {
	// From and End bound what the read examined: every offset in
	// [From, End) either holds a deliverable record, listed in Records, or
	// is a gap. The broker reads from NextFetchOffset (or from the start of
	// the log batch holding it); From must not be above EndOffset, or
	// nothing past EndOffset is considered.
	From, End int64
	// Records are the offsets in [From, End) that hold deliverable records,
	// sorted and not overlapping; the broker passes one Range per log batch
	// (base offset to last offset) so that acquired ranges split on batch
	// boundaries. Offsets in [From, End) outside them are gaps: compacted
	// away, control records, or, under read_committed, records of aborted
	// transactions. Gaps are archived (done without delivery). Ranges that
	// are empty, out of order or overlapping are cut to fit.
	Records []Range
	// MaxRecords is the ShareFetch MaxRecords: at most this many records
	// are acquired (strictly; Kafka's default batch_optimized mode may hand
	// out whole log batches beyond it). <= 0 acquires nothing.
	MaxRecords int
	// BatchSize is the ShareFetch BatchSize: an acquired range is not
	// extended across a log batch boundary once it holds this many records.
	// <= 0 never splits.
	BatchSize int
}

// NextFetchOffset is where the broker should read the log for the next
// fetch: the first available record in flight (released, or its lock
// expired), else EndOffset.
func (p *Partition) NextFetchOffset() int64 {
	for _, r := range p.runs {
		if r.state == Available {
			return r.first
		}
	}
	return p.speo
}

// CanAcquire reports whether a fetch could acquire anything now, ignoring
// what the log holds: Kafka's canAcquireRecords. The broker skips reading
// the log for a share-partition that cannot.
func (p *Partition) CanAcquire() bool {
	limit := int64(p.cfg.PartitionMaxRecordLocks)
	if p.acquired >= limit {
		return false
	}
	return p.NextFetchOffset() < p.speo || p.speo-p.spso < limit
}

// Acquire locks records of f to member until now + RecordLockDurationMs
// and returns them as ShareFetch AcquiredRecords, in offset order, with
// their delivery counts (1 on first delivery), and the records to persist.
//
// In-flight available records in [f.From, f.End) go first, lowest offset
// first, then new records past EndOffset while the window (EndOffset -
// StartOffset at the start of the call) is below PartitionMaxRecordLocks.
// At most f.MaxRecords are acquired, and never so many that more than
// PartitionMaxRecordLocks records would be acquired at once. As in Kafka
// 4.2, a record on its last allowed delivery is delivered alone, and
// records delivered at least max(2, ceil(DeliveryCountLimit/2)) times are
// handed out in ever smaller groups (MaxRecords halved per further
// delivery), so that one poison record drags as few others as possible to
// the delivery limit. Gaps that f reveals are archived; an available record
// already delivered DeliveryCountLimit times (possible only after Restore
// under a lower limit) is archived instead of delivered again. An empty
// member, MaxRecords <= 0 or an empty read acquires nothing (locks due at
// now still end).
func (p *Partition) Acquire(now int64, member string, f Fetch) ([]kmsg.ShareFetchResponseTopicPartitionAcquiredRecord, []Record) {
	p.expire(now)
	if member == "" || f.MaxRecords <= 0 || f.End <= f.From {
		return nil, p.finish(now)
	}
	a := acquirer{
		p:        p,
		member:   member,
		deadline: now + int64(p.cfg.RecordLockDurationMs),
		max:      int64(f.MaxRecords),
		batch:    int64(f.BatchSize),
		limit:    min(int64(f.MaxRecords), int64(p.cfg.PartitionMaxRecordLocks)-p.acquired),
		room:     int64(p.cfg.PartitionMaxRecordLocks) - (p.speo - p.spso),
	}
	recs := clip(f.Records, max(f.From, p.spso), f.End)
	a.inWindow(recs, max(f.From, p.spso), min(f.End, p.speo))
	if f.From <= p.speo && f.End > p.speo {
		a.beyondWindow(recs, f.End)
	}
	return a.out, p.finish(now)
}

// acquirer is one Acquire call in progress.
type acquirer struct {
	p        *Partition
	member   string
	deadline int64
	max      int64 // f.MaxRecords
	batch    int64 // f.BatchSize
	limit    int64 // records this call may acquire
	room     int64 // new records this call may add past SPEO
	got      int64 // records acquired so far
	stop     bool  // acquire no more (gaps are still archived)
	out      []kmsg.ShareFetchResponseTopicPartitionAcquiredRecord
	outRec   int // index in recs of the log batch the last out entry ends in
}

// piece is a stretch of available in-flight records that share a delivery
// count and either all hold records (present) or are all gaps.
type piece struct {
	first, last int64
	count       int16
	present     bool
	rec         int // index in recs, if present
}

// inWindow acquires or archives the available records in [lo, hi).
func (a *acquirer) inWindow(recs []Range, lo, hi int64) {
	p := a.p
	if lo >= hi {
		return
	}
	// Plan first, over the unchanged runs; then apply, splitting runs.
	var pieces []piece
	ri := 0
	for i := p.find(lo); i < len(p.runs) && p.runs[i].first < hi; i++ {
		r := p.runs[i]
		if r.state != Available {
			continue
		}
		for cur, end := max(r.first, lo), min(r.last, hi-1); cur <= end; {
			for ri < len(recs) && recs[ri].Last < cur {
				ri++
			}
			pc := piece{first: cur, count: r.count}
			switch {
			case ri < len(recs) && recs[ri].First <= cur:
				pc.last, pc.present, pc.rec = min(recs[ri].Last, end), true, ri
			case ri < len(recs):
				pc.last = min(recs[ri].First-1, end)
			default:
				pc.last = end
			}
			pieces = append(pieces, pc)
			cur = pc.last + 1
		}
	}

	limit, throttle := p.cfg.DeliveryCountLimit, p.cfg.throttleLimit()
	for _, pc := range pieces {
		if !pc.present || pc.count >= limit {
			p.archive(pc.first, pc.last)
			continue
		}
		if a.stop {
			continue
		}
		lastTry := limit > 2 && pc.count == limit-1
		throttled := pc.count >= throttle
		if (lastTry || throttled) && a.got > 0 {
			// Kafka isolates such records from the ones before them.
			a.stop = true
			continue
		}
		n := min(pc.last-pc.first+1, a.limit-a.got)
		if throttled {
			n = min(n, max(1, a.max>>min(pc.count-throttle+1, 63)))
		}
		if lastTry {
			n = min(n, 1)
		}
		if n <= 0 {
			a.stop = true
			continue
		}
		a.take(pc.first, pc.first+n-1, pc.count+1, pc.rec, false)
		if n < pc.last-pc.first+1 || a.got >= a.limit || lastTry || throttled {
			a.stop = true
		}
	}
}

// beyondWindow adds records from SPEO on: gaps archived, records acquired.
func (a *acquirer) beyondWindow(recs []Range, end int64) {
	p := a.p
	added := int64(0)
	for ri, r := range recs {
		if a.stop {
			return
		}
		if r.Last < p.speo {
			continue
		}
		first := max(r.First, p.speo)
		n := min(r.Last-first+1, a.limit-a.got, a.room-added)
		if n <= 0 {
			a.stop = true
			return
		}
		if first > p.speo {
			p.push(run{first: p.speo, last: first - 1, state: Archived, deadline: noDeadline})
		}
		a.take(first, first+n-1, 1, ri, true)
		added += n
		if n < r.Last-first+1 {
			a.stop = true
		}
	}
	if !a.stop && p.speo < end {
		p.push(run{first: p.speo, last: end - 1, state: Archived, deadline: noDeadline})
	}
}

// take acquires [first, last], in flight already or (push) new at SPEO,
// with delivery count count, and adds it to the answer.
func (a *acquirer) take(first, last int64, count int16, rec int, push bool) {
	p := a.p
	if push {
		p.push(run{first: first, last: last, state: Acquired, count: count, member: a.member, deadline: a.deadline})
	} else {
		i, j := p.span(first, last)
		for k := i; k < j; k++ {
			p.set(k, Acquired, count, a.member, a.deadline)
		}
	}
	a.got += last - first + 1
	if n := len(a.out); n > 0 {
		prev := &a.out[n-1]
		joins := prev.LastOffset+1 == first && prev.DeliveryCount == count &&
			(a.batch <= 0 || rec == a.outRec || prev.LastOffset-prev.FirstOffset+1 < a.batch)
		if joins {
			prev.LastOffset, a.outRec = last, rec
			return
		}
	}
	ar := kmsg.NewShareFetchResponseTopicPartitionAcquiredRecord()
	ar.FirstOffset, ar.LastOffset, ar.DeliveryCount = first, last, count
	a.out = append(a.out, ar)
	a.outRec = rec
}

// archive marks the available records [first, last] done without
// delivery, keeping their delivery counts.
func (p *Partition) archive(first, last int64) {
	i, j := p.span(first, last)
	for k := i; k < j; k++ {
		p.set(k, Archived, p.runs[k].count, "", noDeadline)
	}
}

// clip cuts ranges to [lo, hi), dropping what is empty, out of order or
// overlapping its predecessor.
func clip(rs []Range, lo, hi int64) []Range {
	out := make([]Range, 0, len(rs))
	next := lo
	for _, r := range rs {
		r.First, r.Last = max(r.First, next), min(r.Last, hi-1)
		if r.First > r.Last {
			continue
		}
		out = append(out, r)
		next = r.Last + 1
	}
	return out
}
