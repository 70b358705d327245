package sharepart

import (
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/fjordlog/fjord/group"
	"github.com/fjordlog/fjord/group/internal/datadriven"
)

// harness drives one Partition from datadriven commands (testdata/*.txt):
//
//	new [start=0] [lock=30000] [limit=5] [locks=2000] [snap=500] [se=0] [le=0]
//	log recs=0-4,5-9,12-12 end=15   the partition's log: record batches, and its end
//	fetch [t=ms] m=id [max=500] [batch=0] [from=N] [end=N]
//	                                reads the log from NextFetchOffset (or from) to
//	                                the log's end (or end), and acquires
//	acquire [t=ms] m=id from=N end=N [recs=a-b,c-d] [max=500] [batch=0]
//	ack [t=ms] m=id b=first-last:t[.t...][;first-last:t...]
//	release [t=ms] m=id | tick t=ms | logstart [t=ms] off=N
//	reset [t=ms] off=N | delete [t=ms] | snapshot [t=ms]
//	restore [t=ms] [le=N]           replaces the live Partition with one restored
//	                                from every record written so far (a failover)
//	state                           prints the window
//
// Mutating commands print their result, the records they wrote, and a
// status line. After every command the harness checks the invariants, that
// delivery counts did not go down, and that restoring from every record
// written so far gives the live Partition's durable state.
type harness struct {
	t    *testing.T
	p    *Partition
	now  int64
	recs []Record // every record written so far
	prev []StateBatch
	log  []Range
	end  int64
}

var testKey = Key{Group: "g", TopicID: [16]byte{0xab, 0xcd}, Partition: 3}

func newHarness(t *testing.T) *harness {
	h := &harness{t: t}
	h.create(datadriven.Args{})
	return h
}

func (h *harness) create(a datadriven.Args) string {
	cfg := Config{
		RecordLockDurationMs:             int32(a.Num("lock", 30000)),
		DeliveryCountLimit:               int16(a.Num("limit", 5)),
		PartitionMaxRecordLocks:          int32(a.Num("locks", 2000)),
		SnapshotUpdateRecordsPerSnapshot: int32(a.Num("snap", 500)),
	}
	h.now = 0
	var recs []Record
	h.p, recs = New(testKey, cfg, Init{
		StartOffset: a.Num("start", 0),
		StateEpoch:  int32(a.Num("se", 0)),
		LeaderEpoch: int32(a.Num("le", 0)),
	}, h.now)
	h.recs, h.prev = nil, nil
	return h.wrote(recs)
}

func (h *harness) do(c *datadriven.Case) string {
	a := c.Map()
	if _, ok := a["t"]; ok {
		h.now = a.Num("t", 0)
	}
	var b strings.Builder
	reset := false
	switch c.Cmd {
	case "new":
		b.WriteString(h.create(a))
		reset = true
	case "log":
		h.log = parseRanges(a["recs"])
		h.end = a.Num("end", 0)
		if n := len(h.log); n > 0 && h.end == 0 {
			h.end = h.log[n-1].Last + 1
		}
		return "ok"
	case "fetch", "acquire":
		f := Fetch{MaxRecords: int(a.Num("max", 500)), BatchSize: int(a.Num("batch", 0))}
		if c.Cmd == "fetch" {
			f.From = a.Num("from", h.p.NextFetchOffset())
			f.End = a.Num("end", h.end)
			for _, r := range h.log {
				if r.Last >= f.From && r.First < f.End {
					f.Records = append(f.Records, r)
				}
			}
		} else {
			f.From, f.End = a.Num("from", 0), a.Num("end", 0)
			f.Records = parseRanges(a["recs"])
		}
		got, recs := h.p.Acquire(h.now, a["m"], f)
		fmt.Fprintf(&b, "acquired:")
		for _, ar := range got {
			fmt.Fprintf(&b, " %s x%d", rng(ar.FirstOffset, ar.LastOffset), ar.DeliveryCount)
		}
		if len(got) == 0 {
			b.WriteString(" none")
		}
		b.WriteString("\n" + h.wrote(recs))
	case "ack":
		var batches []AckBatch
		for _, s := range strings.Split(a["b"], ";") {
			rg, types, _ := strings.Cut(s, ":")
			r := parseRanges(rg)[0]
			ab := AckBatch{First: r.First, Last: r.Last}
			for _, t := range strings.Split(types, ".") {
				if t != "" {
					ab.Types = append(ab.Types, int8(mustInt(t)))
				}
			}
			batches = append(batches, ab)
		}
		recs, err := h.p.Acknowledge(h.now, a["m"], batches)
		fmt.Fprintf(&b, "ack: %s\n%s", errName(err), h.wrote(recs))
	case "release":
		b.WriteString(h.wrote(h.p.ReleaseMember(h.now, a["m"])))
	case "tick":
		b.WriteString(h.wrote(h.p.Tick(h.now)))
	case "logstart":
		b.WriteString(h.wrote(h.p.AdvanceLogStart(h.now, a.Num("off", 0))))
	case "reset":
		recs, err := h.p.ResetStartOffset(h.now, a.Num("off", 0))
		fmt.Fprintf(&b, "reset: %s\n%s", errName(err), h.wrote(recs))
		reset = err == nil
	case "delete":
		recs, err := h.p.Delete(h.now)
		fmt.Fprintf(&b, "delete: %s\n%s", errName(err), h.wrote(recs))
		if err == nil {
			_, _, rerr := Restore(testKey, h.p.cfg, h.p.leaderEpoch, h.now, h.recs)
			fmt.Fprintf(&b, "restore after delete: %v\n", rerr)
			return b.String()
		}
	case "snapshot":
		b.WriteString(h.wrote(h.p.Snapshot(h.now)))
	case "restore":
		p, recs, err := Restore(testKey, h.p.cfg, int32(a.Num("le", int64(h.p.leaderEpoch))), h.now, h.recs)
		if err != nil {
			return fmt.Sprintf("restore: %v", err)
		}
		h.p = p
		b.WriteString(h.wrote(recs))
	case "state":
	default:
		h.t.Fatalf("%s: unknown command %q", c.Pos, c.Cmd)
	}
	b.WriteString(status(h.p))
	h.check(c.Pos, reset)
	return b.String()
}

// wrote records recs as written and prints them.
func (h *harness) wrote(recs []Record) string {
	h.recs = append(h.recs, recs...)
	var b strings.Builder
	for _, r := range recs {
		b.WriteString(describeRecord(r) + "\n")
	}
	return b.String()
}

// check verifies the invariants and the restore property after a step.
func (h *harness) check(pos string, reset bool) {
	h.t.Helper()
	if err := h.p.checkInvariants(); err != nil {
		h.t.Fatalf("%s: invariants: %v\n%s", pos, err, status(h.p))
	}
	cur := durableRuns(h.p)
	if !reset {
		if err := countsKept(h.prev, cur); err != nil {
			h.t.Fatalf("%s: %v", pos, err)
		}
	}
	h.prev = cur
	if err := restoresTo(h.p, h.recs); err != nil {
		h.t.Fatalf("%s: %v", pos, err)
	}
}

// durableRuns is p's window in durable form: ACQUIRED read as AVAILABLE,
// neighbours that agree merged, never-delivered offsets included.
func durableRuns(p *Partition) []StateBatch {
	var out []StateBatch
	for _, r := range p.runs {
		st, n := r.durable()
		if k := len(out); k > 0 && out[k-1].DeliveryState == st && out[k-1].DeliveryCount == n {
			out[k-1].LastOffset = r.last
			continue
		}
		out = append(out, StateBatch{r.first, r.last, st, n})
	}
	return out
}

// countsKept fails if an offset in both windows has a lower delivery count
// in cur than in prev.
func countsKept(prev, cur []StateBatch) error {
	i := 0
	for _, c := range cur {
		for i < len(prev) && prev[i].LastOffset < c.FirstOffset {
			i++
		}
		for j := i; j < len(prev) && prev[j].FirstOffset <= c.LastOffset; j++ {
			if c.DeliveryCount < prev[j].DeliveryCount {
				return fmt.Errorf("delivery count went down: %v was %v", c, prev[j])
			}
		}
	}
	return nil
}

// restoresTo checks that restoring from recs gives p's durable state.
func restoresTo(p *Partition, recs []Record) error {
	q, _, err := Restore(p.key, p.cfg, p.leaderEpoch, 0, recs)
	if err != nil {
		return fmt.Errorf("restore: %w", err)
	}
	if err := q.checkInvariants(); err != nil {
		return fmt.Errorf("restored invariants: %w", err)
	}
	want, got := durableRuns(p), durableRuns(q)
	if p.spso != q.spso || p.speo != q.speo || fmt.Sprint(want) != fmt.Sprint(got) ||
		p.stateEpoch != q.stateEpoch || p.complete != q.complete {
		return fmt.Errorf("restored state differs:\nlive     [%d, %d) se=%d done=%d %v\nrestored [%d, %d) se=%d done=%d %v",
			p.spso, p.speo, p.stateEpoch, p.complete, want, q.spso, q.speo, q.stateEpoch, q.complete, got)
	}
	return nil
}

func status(p *Partition) string {
	var b strings.Builder
	fmt.Fprintf(&b, "> spso=%d speo=%d next=%d deadline=%d", p.StartOffset(), p.EndOffset(), p.NextFetchOffset(), p.NextDeadline())
	for _, r := range p.Batches() {
		fmt.Fprintf(&b, " [%s %s x%d", rng(r.First, r.Last), short(r.State), r.DeliveryCount)
		if r.State == Acquired {
			fmt.Fprintf(&b, " %s@%d", r.Member, r.Deadline)
		}
		b.WriteString("]")
	}
	return b.String()
}

func describeRecord(r Record) string {
	d, err := DecodeRecord(r)
	if err != nil {
		return "undecodable: " + err.Error()
	}
	var b strings.Builder
	batches := func(bs []StateBatch) {
		for _, sb := range bs {
			fmt.Fprintf(&b, " [%s %s x%d]", rng(sb.FirstOffset, sb.LastOffset), short(sb.DeliveryState), sb.DeliveryCount)
		}
	}
	switch {
	case d.Snapshot != nil:
		v := d.Snapshot
		fmt.Fprintf(&b, "wrote snapshot epoch=%d se=%d le=%d start=%d done=%d", v.SnapshotEpoch, v.StateEpoch, v.LeaderEpoch, v.StartOffset, v.DeliveryCompleteCount)
		batches(v.StateBatches)
	case d.Update != nil:
		v := d.Update
		fmt.Fprintf(&b, "wrote update epoch=%d le=%d start=%d done=%d", v.SnapshotEpoch, v.LeaderEpoch, v.StartOffset, v.DeliveryCompleteCount)
		batches(v.StateBatches)
	default:
		b.WriteString("wrote tombstone")
	}
	return b.String()
}

func short(s State) string {
	switch s {
	case Available:
		return "AVL"
	case Acquired:
		return "ACQ"
	case Acknowledged:
		return "ACK"
	case Archived:
		return "ARC"
	}
	return s.String()
}

func rng(first, last int64) string {
	if first == last {
		return strconv.FormatInt(first, 10)
	}
	return fmt.Sprintf("%d-%d", first, last)
}

func parseRanges(s string) []Range {
	var out []Range
	for _, part := range strings.Split(s, ",") {
		if part == "" {
			continue
		}
		lo, hi, ok := strings.Cut(part, "-")
		r := Range{First: mustInt(lo)}
		r.Last = r.First
		if ok {
			r.Last = mustInt(hi)
		}
		out = append(out, r)
	}
	return out
}

func mustInt(s string) int64 {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		panic(err)
	}
	return n
}

// errName is the Kafka error code err maps to, as the test files write it.
func errName(err error) string { return datadriven.ErrName(group.ErrorCode(err)) }
