package sharepart

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand"
	"slices"
	"testing"

	"github.com/fjordlog/fjord/group"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// simLog is a partition's log as the broker sees it: record batches in
// [start, end), with holes where compaction, control records or aborted
// transactions left no deliverable record.
type simLog struct {
	start, end int64
	batches    []Range
}

func (l *simLog) grow(rng *rand.Rand) {
	for range 1 + rng.Intn(3) {
		if rng.Intn(4) == 0 {
			l.end += int64(1 + rng.Intn(3)) // a marker or an aborted batch
		}
		n := int64(1 + rng.Intn(8))
		l.batches = append(l.batches, Range{l.end, l.end + n - 1})
		l.end += n
	}
}

// compact removes one record, splitting its batch.
func (l *simLog) compact(rng *rand.Rand) {
	if len(l.batches) == 0 {
		return
	}
	i := rng.Intn(len(l.batches))
	b := l.batches[i]
	off := b.First + rng.Int63n(b.Last-b.First+1)
	var repl []Range
	if off > b.First {
		repl = append(repl, Range{b.First, off - 1})
	}
	if off < b.Last {
		repl = append(repl, Range{off + 1, b.Last})
	}
	l.batches = slices.Replace(l.batches, i, i+1, repl...)
}

func (l *simLog) advanceStart(off int64) {
	off = min(off, l.end)
	l.start = max(l.start, off)
	var keep []Range
	for _, b := range l.batches {
		if b.Last >= l.start {
			b.First = max(b.First, l.start)
			keep = append(keep, b)
		}
	}
	l.batches = keep
}

// read returns what a log read from from covers, up to n batches.
func (l *simLog) read(from int64, n int) (end int64, recs []Range) {
	end = l.end
	for _, b := range l.batches {
		if b.Last < from {
			continue
		}
		if len(recs) == n {
			return b.First, recs
		}
		recs = append(recs, b)
	}
	return end, recs
}

// sim runs one seeded random scenario and returns its transcript. It fails
// t on any broken invariant, lowered delivery count, restore mismatch or
// unexpected outcome.
func sim(t *testing.T, seed int64, steps int) []byte {
	t.Helper()
	rng := rand.New(rand.NewSource(seed))
	cfg := Config{
		RecordLockDurationMs:             int32(100 + rng.Intn(2000)),
		DeliveryCountLimit:               int16(1 + rng.Intn(6)),
		PartitionMaxRecordLocks:          int32(3 + rng.Intn(40)),
		SnapshotUpdateRecordsPerSnapshot: int32(1 + rng.Intn(10)),
	}
	var tr bytes.Buffer
	now := int64(1000)
	leaderEpoch := int32(rng.Intn(3))
	log := &simLog{}
	log.grow(rng)
	p, all := New(testKey, cfg, Init{StartOffset: 0, LeaderEpoch: leaderEpoch}, now)
	suffix := slices.Clone(all) // from the latest snapshot on, as a pruning broker keeps
	members := []string{"m1", "m2", "m3"}
	prev := durableRuns(p)

	for step := range steps {
		now += rng.Int63n(int64(cfg.RecordLockDurationMs) / 2)
		var recs []Record
		var op string
		reset := false
		before := settled(p, now)

		switch k := rng.Intn(100); {
		case k < 35: // fetch
			m := members[rng.Intn(len(members))]
			if p.NextFetchOffset() < log.start {
				recs = append(recs, p.AdvanceLogStart(now, log.start)...)
				before = settled(p, now)
			}
			from := p.NextFetchOffset()
			switch rng.Intn(6) {
			case 0:
				from = max(0, from-int64(rng.Intn(5)))
			case 1:
				from = rng.Int63n(p.speo + 3)
			}
			from = max(from, log.start)
			end, rs := log.read(from, 1+rng.Intn(4))
			f := Fetch{From: from, End: end, Records: rs, MaxRecords: rng.Intn(25), BatchSize: rng.Intn(6)}
			got, r := p.Acquire(now, m, f)
			recs = append(recs, r...)
			op = fmt.Sprintf("fetch %s %+v -> %v", m, f, got)
			checkAcquired(t, seed, step, before, p, m, now, got)
		case k < 65: // acknowledge
			m, batches := randomAcks(rng, before, members)
			r, err := p.Acknowledge(now, m, batches)
			recs = r
			op = fmt.Sprintf("ack %s %v -> %s", m, batches, errName(err))
			if err != nil {
				if !errors.Is(err, group.ErrInvalidRecordState) && !errors.Is(err, group.ErrInvalidRequest) {
					t.Fatalf("seed %d step %d: %s: unexpected error %v", seed, step, op, err)
				}
				if fmt.Sprint(p.Batches()) != fmt.Sprint(before.Batches()) {
					t.Fatalf("seed %d step %d: %s: failed acknowledgement changed state\nbefore %v\nafter  %v", seed, step, op, before.Batches(), p.Batches())
				}
			}
		case k < 73:
			recs = p.Tick(now)
			op = "tick"
		case k < 78:
			m := members[rng.Intn(len(members))]
			recs = p.ReleaseMember(now, m)
			op = "release " + m
			for _, b := range p.Batches() {
				if b.State == Acquired && b.Member == m {
					t.Fatalf("seed %d step %d: %s left %v acquired", seed, step, op, b)
				}
			}
		case k < 86:
			log.grow(rng)
			op = "log grows"
		case k < 89:
			log.compact(rng)
			op = "log compacted"
		case k < 92:
			log.advanceStart(log.start + rng.Int63n(10))
			recs = p.AdvanceLogStart(now, log.start)
			op = fmt.Sprintf("log starts at %d", log.start)
		case k < 94:
			off := rng.Int63n(log.end + 1)
			r, err := p.ResetStartOffset(now, off)
			recs = r
			op = fmt.Sprintf("reset %d -> %s", off, errName(err))
			if (err == nil) != (before.acquired == 0) {
				t.Fatalf("seed %d step %d: %s with %d acquired", seed, step, op, before.acquired)
			}
			reset = err == nil
		case k < 96:
			recs = p.Snapshot(now)
			op = "snapshot"
		default: // failover
			leaderEpoch += int32(rng.Intn(2))
			q, r, err := Restore(testKey, cfg, leaderEpoch, now, suffix)
			if err != nil {
				t.Fatalf("seed %d step %d: failover: %v", seed, step, err)
			}
			p, recs = q, r
			op = fmt.Sprintf("failover to epoch %d", leaderEpoch)
		}

		all = append(all, recs...)
		for _, r := range recs {
			if typ, _, _ := DecodeKey(r.Key); typ == SnapshotRecord {
				suffix = suffix[:0]
			}
			suffix = append(suffix, r)
		}
		fmt.Fprintf(&tr, "%d %s\n  %s\n", now, op, status(p))
		for _, r := range recs {
			fmt.Fprintf(&tr, "  %s\n", describeRecord(r))
		}

		if err := p.checkInvariants(); err != nil {
			t.Fatalf("seed %d step %d: %s: invariants: %v\n%s", seed, step, op, err, status(p))
		}
		if n := len(p.runs); n > 2*int(cfg.PartitionMaxRecordLocks)+1 {
			t.Fatalf("seed %d step %d: %s: %d runs for at most %d records in flight", seed, step, op, n, cfg.PartitionMaxRecordLocks)
		}
		cur := durableRuns(p)
		if !reset {
			if err := countsKept(prev, cur); err != nil {
				t.Fatalf("seed %d step %d: %s: %v", seed, step, op, err)
			}
		}
		prev = cur
		if err := restoresTo(p, all); err != nil {
			t.Fatalf("seed %d step %d: %s: from all records: %v\n%s", seed, step, op, err, tr.String())
		}
		if err := restoresTo(p, suffix); err != nil {
			t.Fatalf("seed %d step %d: %s: from the latest snapshot on: %v", seed, step, op, err)
		}
	}
	return tr.Bytes()
}

// checkAcquired checks an Acquire's answer against the state before it
// (after its expiries): every offset handed out was available (or new),
// is now acquired by m with a fresh lock and a delivery count one higher.
func checkAcquired(t *testing.T, seed int64, step int, before, after *Partition, m string, now int64, got []kmsg.ShareFetchResponseTopicPartitionAcquiredRecord) {
	t.Helper()
	prevEnd := int64(-1)
	for _, ar := range got {
		if ar.FirstOffset > ar.LastOffset || ar.FirstOffset <= prevEnd {
			t.Fatalf("seed %d step %d: acquired ranges out of order: %v", seed, step, got)
		}
		prevEnd = ar.LastOffset
		for off := ar.FirstOffset; off <= ar.LastOffset; off++ {
			wantCount := int16(1)
			if off < before.speo {
				r := before.runs[before.find(off)]
				if r.state != Available {
					t.Fatalf("seed %d step %d: acquired %d, which was %s", seed, step, off, r.state)
				}
				wantCount = r.count + 1
			}
			r := after.runs[after.find(off)]
			if r.state != Acquired || r.member != m || r.deadline != now+int64(after.cfg.RecordLockDurationMs) ||
				r.count != wantCount || ar.DeliveryCount != wantCount {
				t.Fatalf("seed %d step %d: acquired %d (x%d): now %+v, want count %d", seed, step, off, ar.DeliveryCount, r, wantCount)
			}
		}
	}
}

// randomAcks makes acknowledgements, mostly of records the member holds,
// sometimes of anything.
func randomAcks(rng *rand.Rand, p *Partition, members []string) (string, []AckBatch) {
	m := members[rng.Intn(len(members))]
	if bs := p.Batches(); rng.Intn(5) > 0 {
		// Mostly a member that holds something.
		for _, i := range rng.Perm(len(bs)) {
			if bs[i].State == Acquired {
				m = bs[i].Member
				break
			}
		}
	}
	var held []Batch
	for _, b := range p.Batches() {
		if b.State == Acquired && (b.Member == m || rng.Intn(10) == 0) {
			held = append(held, b)
		}
	}
	types := []int8{AckAccept, AckAccept, AckAccept, AckRelease, AckRelease, AckReject, AckGap, AckRenew}
	var out []AckBatch
	for _, b := range held {
		if rng.Intn(3) == 0 {
			continue
		}
		first := b.First + rng.Int63n(b.Last-b.First+1)
		last := first + rng.Int63n(b.Last-first+1)
		ab := AckBatch{First: first, Last: last, Types: []int8{types[rng.Intn(len(types))]}}
		if rng.Intn(3) == 0 {
			ab.Types = nil
			for range last - first + 1 {
				ab.Types = append(ab.Types, types[rng.Intn(len(types))])
			}
		}
		out = append(out, ab)
	}
	if rng.Intn(8) == 0 || len(out) == 0 {
		first := max(0, p.spso-3) + rng.Int63n(p.speo-p.spso+6)
		out = append(out, AckBatch{First: first, Last: first + rng.Int63n(4), Types: []int8{int8(rng.Intn(6))}})
		slices.SortFunc(out, func(a, b AckBatch) int { return int(a.First - b.First) })
	}
	return m, out
}

// settled is p as the next step will find it once the locks due at now
// have ended.
func settled(p *Partition, now int64) *Partition {
	q := p.clone()
	q.expire(now)
	q.normalize()
	q.advanceStart()
	q.dirty, q.startMoved = nil, false
	return q
}

func (p *Partition) clone() *Partition {
	q := *p
	q.runs = slices.Clone(p.runs)
	q.dirty = slices.Clone(p.dirty)
	return &q
}

func TestRandom(t *testing.T) {
	seeds, steps := 50, 300
	if testing.Short() {
		seeds = 15
	}
	for seed := range int64(seeds) {
		sim(t, seed, steps)
	}
}

// TestDeterminism runs seeds twice: same calls, same results, byte for byte.
func TestDeterminism(t *testing.T) {
	for seed := range int64(5) {
		a, b := sim(t, seed, 200), sim(t, seed, 200)
		if !bytes.Equal(a, b) {
			t.Fatalf("seed %d: transcripts differ", seed)
		}
	}
}
