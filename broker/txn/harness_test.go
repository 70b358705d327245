package txn

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// harness drives one Table from datadriven commands (testdata/*.txt). It
// plays the broker: it keeps the partition's log (the records reported
// written, in order), the records and markers in flight, and the requests
// not yet answered. Commands (t=ms sets the clock, which stays set):
//
//	new [unloaded] [legacy] [max-timeout=ms] [expiration=ms] [marker-timeout=ms]
//	    a table, loaded at coordinator epoch 1 from an empty log and given
//	    producer ids 1000-1999, unless unloaded
//	load [epoch=n] | begin-load [epoch=n] | finish-load | unload
//	    load the harness's log (a failover when the table was active)
//	ids first=n [count=n] | ids-failed
//	init id=s [timeout=60000] [pid=n epoch=n] [v=4] [tok=s]
//	add id=s pid=n epoch=n parts=(t-0,u-1) [verify] [v=3] [tok=s]
//	offsets id=s pid=n epoch=n [group=g] [gp=n] [v=3] [tok=s]
//	end id=s pid=n epoch=n commit|abort [v=3] [tok=s]
//	written [tok=(n,...)]          records reported committed (default: all in flight)
//	failed [tok=(n,...)] [code=NAME] records reported failed (default NOT_ENOUGH_REPLICAS)
//	markers-written [id=s] [seq=n] [parts=(..)]   (default: everything in flight)
//	marker-failed [id=s] [seq=n] [parts=(..)] code=NAME
//	tick | next | describe id=s | list [states=(..)] [pids=(..)] [duration=ms] | log
//	log-put id=s state=Name pid=n epoch=n [parts=(..)] [timeout=n] [start=n] [update=n] [tv=n] [prev=n] [next=n]
//	log-delete id=s | log-garbage id=s
//
// Every mutating command prints its Ready (appends decoded from their
// bytes, answers, markers, notes) and then the table, one line per id,
// after "> ". After every command the harness checks the table's
// invariants, that every answer answers an outstanding request once, and
// the NextDeadline contract.
type harness struct {
	t   *testing.T
	tb  *Table
	cfg Config
	now int64

	log      []LogRecord
	inflight map[Token]Append
	markers  map[uint64]*Marker // by sequence; Partitions shrink as reported
	open     map[string]bool    // request tokens not yet answered
	seq      int
}

func newHarness(t *testing.T) *harness {
	return &harness{t: t, inflight: map[Token]Append{}, markers: map[uint64]*Marker{}, open: map[string]bool{}}
}

func (h *harness) do(t *testing.T, d *datadriven.TestData) string {
	if d.HasArg("t") {
		h.now = int64(h.num(d, "t", 0))
	}
	if d.Cmd != "new" && h.tb == nil {
		d.Fatalf(t, "new first")
	}
	var rd Ready
	switch d.Cmd {
	case "new":
		h.cfg = DefaultConfig()
		h.cfg.LegacyValues = d.HasArg("legacy")
		h.cfg.MaxTimeoutMs = int32(h.num(d, "max-timeout", int(h.cfg.MaxTimeoutMs)))
		h.cfg.IDExpirationMs = int64(h.num(d, "expiration", int(h.cfg.IDExpirationMs)))
		h.cfg.MarkerTimeoutMs = int64(h.num(d, "marker-timeout", int(h.cfg.MarkerTimeoutMs)))
		h.tb = NewTable(h.cfg, 7)
		h.log, h.now, h.seq = nil, 0, 0
		clear(h.inflight)
		clear(h.markers)
		clear(h.open)
		if !d.HasArg("unloaded") {
			h.ready(h.tb.Load(h.now, 1, nil))
			h.ready(h.tb.SupplyProducerIDs(h.now, 1000, 1000))
		}
		return h.status()
	case "load":
		h.dropInflight()
		rd = h.tb.Load(h.now, int32(h.num(d, "epoch", 1)), h.log)
	case "begin-load":
		h.dropInflight()
		rd = h.tb.BeginLoad(int32(h.num(d, "epoch", 1)))
		if n, err := h.tb.LoadRecords(h.log); err != nil {
			rd.note("LoadRecords: %d applied: %v", n, err)
		}
	case "finish-load":
		rd = h.tb.FinishLoad(h.now)
	case "unload":
		h.dropInflight()
		rd = h.tb.Unload()
	case "ids":
		rd = h.tb.SupplyProducerIDs(h.now, int64(h.num(d, "first", 1000)), int64(h.num(d, "count", 1000)))
	case "ids-failed":
		rd = h.tb.ProducerIDsFailed(h.now)
	case "init":
		req := InitRequest{TxnID: h.str(d, "id", "x"), TimeoutMs: int32(h.num(d, "timeout", 60000)),
			ProducerID: int64(h.num(d, "pid", -1)), ProducerEpoch: int16(h.num(d, "epoch", -1)), Version: int16(h.num(d, "v", 4))}
		rd = h.tb.InitProducerID(h.now, req, h.token(d, "I"))
	case "add":
		req := AddPartitionsRequest{TxnID: h.str(d, "id", "x"), ProducerID: int64(h.num(d, "pid", -1)),
			ProducerEpoch: int16(h.num(d, "epoch", -1)), Partitions: h.parts(d, "parts"),
			VerifyOnly: d.HasArg("verify"), Version: int16(h.num(d, "v", 3))}
		rd = h.tb.AddPartitions(h.now, req, h.token(d, "A"))
	case "offsets":
		req := AddOffsetsRequest{TxnID: h.str(d, "id", "x"), ProducerID: int64(h.num(d, "pid", -1)),
			ProducerEpoch: int16(h.num(d, "epoch", -1)), Group: h.str(d, "group", "g"),
			OffsetsPartition: int32(h.num(d, "gp", 0)), Version: int16(h.num(d, "v", 3))}
		rd = h.tb.AddOffsets(h.now, req, h.token(d, "O"))
	case "end":
		if d.HasArg("commit") == d.HasArg("abort") {
			d.Fatalf(t, "end: commit or abort")
		}
		req := EndRequest{TxnID: h.str(d, "id", "x"), ProducerID: int64(h.num(d, "pid", -1)),
			ProducerEpoch: int16(h.num(d, "epoch", -1)), Commit: d.HasArg("commit"), Version: int16(h.num(d, "v", 3))}
		rd = h.tb.EndTxn(h.now, req, h.token(d, "E"))
	case "written", "failed":
		toks := h.tokens(d)
		code := h.code(d, "code", kerr.NotEnoughReplicas.Code)
		for _, tok := range toks {
			a, ok := h.inflight[tok]
			if !ok {
				d.Fatalf(t, "token %d not in flight", tok)
			}
			delete(h.inflight, tok)
			var r Ready
			if d.Cmd == "written" {
				h.log = append(h.log, LogRecord{Key: a.Key, Value: a.Value})
				r = h.tb.RecordWritten(h.now, tok)
			} else {
				r = h.tb.RecordFailed(h.now, tok, code)
			}
			merge(&rd, r)
		}
	case "markers-written", "marker-failed":
		code := h.code(d, "code", kerr.NotLeaderForPartition.Code)
		report := func(id MarkerID, parts []TopicPartition) {
			if d.Cmd == "markers-written" {
				merge(&rd, h.tb.MarkersWritten(h.now, id, parts))
			} else {
				merge(&rd, h.tb.MarkerFailed(h.now, id, parts, code))
			}
		}
		if seq := uint64(h.num(d, "seq", 0)); seq != 0 && d.HasArg("parts") {
			// Exactly this report, whatever the harness thinks is in
			// flight (a late or a stray one).
			id := MarkerID{TxnID: h.str(d, "id", "x"), Seq: seq}
			parts := h.parts(d, "parts")
			if m := h.markers[seq]; m != nil {
				id = m.ID
				m.Partitions = slices.DeleteFunc(m.Partitions, func(p TopicPartition) bool { return slices.Contains(parts, p) })
				if len(m.Partitions) == 0 {
					delete(h.markers, seq)
				}
			}
			report(id, parts)
			break
		}
		for _, seq := range h.markerSeqs(d) {
			m := h.markers[seq]
			parts := slices.Clone(m.Partitions)
			if d.HasArg("parts") {
				want := h.parts(d, "parts")
				parts = slices.DeleteFunc(parts, func(p TopicPartition) bool { return !slices.Contains(want, p) })
			}
			if len(parts) == 0 {
				continue
			}
			m.Partitions = slices.DeleteFunc(m.Partitions, func(p TopicPartition) bool { return slices.Contains(parts, p) })
			if len(m.Partitions) == 0 {
				delete(h.markers, seq)
			}
			report(m.ID, parts)
		}
	case "tick":
		rd = h.tb.Tick(h.now)
	case "next":
		return fmt.Sprint(h.tb.NextDeadline())
	case "describe":
		return describeString(h.tb.Describe(h.str(d, "id", "x")))
	case "list":
		f := ListFilter{DurationMs: int64(h.num(d, "duration", -1))}
		for _, a := range d.CmdArgs {
			switch a.Key {
			case "states":
				f.States = a.Vals
			case "pids":
				for _, v := range a.Vals {
					n, _ := strconv.ParseInt(v, 10, 64)
					f.ProducerIDs = append(f.ProducerIDs, n)
				}
			}
		}
		res := h.tb.List(h.now, f)
		var b strings.Builder
		fmt.Fprintf(&b, "list: %s", codeString(res.Code))
		if len(res.UnknownStateFilters) > 0 {
			fmt.Fprintf(&b, " unknown=%v", res.UnknownStateFilters)
		}
		for _, s := range res.States {
			fmt.Fprintf(&b, "\n  %s pid=%d %s", s.TransactionalID, s.ProducerID, s.TransactionState)
		}
		return b.String()
	case "log":
		var b strings.Builder
		for i, r := range h.log {
			fmt.Fprintf(&b, "%d: %s\n", i, recordString(r.Key, r.Value))
		}
		return b.String()
	case "log-put":
		st, err := kmsg.ParseTransactionState(h.str(d, "state", "Empty"))
		if err != nil {
			d.Fatalf(t, "%v", err)
		}
		m := meta{pid: int64(h.num(d, "pid", 1)), prevPid: int64(h.num(d, "prev", -1)), nextPid: int64(h.num(d, "next", -1)),
			epoch: int16(h.num(d, "epoch", 0)), lastEpoch: -1, timeoutMs: int32(h.num(d, "timeout", 60000)), state: st,
			parts: union(nil, h.parts(d, "parts")), startMs: int64(h.num(d, "start", -1)), updateMs: int64(h.num(d, "update", 0)),
			tv: int16(h.num(d, "tv", 0))}
		v := int16(1)
		if h.cfg.LegacyValues {
			v = 0
		}
		h.log = append(h.log, LogRecord{Key: encodeKey(h.str(d, "id", "x")), Value: m.value(v).AppendTo(nil)})
		return recordString(h.log[len(h.log)-1].Key, h.log[len(h.log)-1].Value)
	case "log-delete":
		h.log = append(h.log, LogRecord{Key: encodeKey(h.str(d, "id", "x"))})
		return recordString(h.log[len(h.log)-1].Key, nil)
	case "log-garbage":
		h.log = append(h.log, LogRecord{Key: encodeKey(h.str(d, "id", "x")), Value: []byte{0, 1, 2}})
		return "ok"
	default:
		d.Fatalf(t, "unknown command %s", d.Cmd)
	}
	out := h.ready(rd)
	return out + h.status()
}

func merge(dst *Ready, r Ready) {
	dst.Appends = append(dst.Appends, r.Appends...)
	dst.Answers = append(dst.Answers, r.Answers...)
	dst.Markers = append(dst.Markers, r.Markers...)
	dst.FetchProducerIDs = dst.FetchProducerIDs || r.FetchProducerIDs
	dst.Notes = append(dst.Notes, r.Notes...)
}

// dropInflight forgets the records in flight: a record in flight at a
// failover is lost (which a record not yet acknowledged may be), and the
// table would ignore its report anyway. Markers in flight are kept, so a
// test can report them late.
func (h *harness) dropInflight() {
	clear(h.inflight)
}

// ready records and prints rd.
func (h *harness) ready(rd Ready) string {
	var b strings.Builder
	for _, n := range rd.Notes {
		fmt.Fprintf(&b, "note: %s\n", n)
	}
	for _, a := range rd.Appends {
		if _, dup := h.inflight[a.Token]; dup {
			h.t.Fatalf("token %d issued twice", a.Token)
		}
		for _, o := range h.inflight {
			if o.TxnID == a.TxnID {
				h.t.Fatalf("%s: a second record in flight (#%d, #%d)", a.TxnID, o.Token, a.Token)
			}
		}
		h.inflight[a.Token] = a
		fmt.Fprintf(&b, "append #%d %s\n", a.Token, recordString(a.Key, a.Value))
	}
	for _, a := range rd.Answers {
		tok := a.Token.(string)
		if !h.open[tok] {
			h.t.Fatalf("answer to %s, which is not outstanding", tok)
		}
		delete(h.open, tok)
		fmt.Fprintf(&b, "answer %s: %s\n", tok, answerString(a))
	}
	for _, m := range rd.Markers {
		m := m
		m.Partitions = slices.Clone(m.Partitions)
		h.markers[m.ID.Seq] = &m
		fmt.Fprintf(&b, "marker %s\n", markerString(m))
	}
	if rd.FetchProducerIDs {
		b.WriteString("fetch producer ids\n")
	}
	if err := h.tb.checkInvariants(); err != nil {
		h.t.Fatalf("invariants: %v\n%s", err, h.status())
	}
	if d := h.tb.NextDeadline(); d >= 0 {
		before := h.tb.dump()
		if r := h.tb.Tick(d - 1); len(r.Appends)+len(r.Answers)+len(r.Markers) > 0 || r.FetchProducerIDs || h.tb.dump() != before {
			h.t.Fatalf("Tick(NextDeadline-1 = %d) acted:\n%s\n%s", d-1, before, h.tb.dump())
		}
	}
	return b.String()
}

func (h *harness) status() string {
	s := h.tb.dump()
	if len(h.open) > 0 {
		s += "\n  waiting: " + strings.Join(slices.Sorted(mapsKeys(h.open)), " ")
	}
	return s
}

func mapsKeys(m map[string]bool) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// dump is the table's state, one line per id.
func (t *Table) dump() string {
	var b strings.Builder
	fmt.Fprintf(&b, "> %s epoch=%d ids=%d", t.phase, t.coordEpoch, t.idsLeft())
	for _, id := range t.sortedIDs() {
		x := t.txns[id]
		m := x.m
		fmt.Fprintf(&b, "\n  %s: %s pid=%d/%d", id, m.state, m.pid, m.epoch)
		if m.lastEpoch >= 0 {
			fmt.Fprintf(&b, " last=%d", m.lastEpoch)
		}
		if m.prevPid != m.pid {
			fmt.Fprintf(&b, " prev=%d", m.prevPid)
		}
		if m.nextPid >= 0 {
			fmt.Fprintf(&b, " next=%d", m.nextPid)
		}
		if m.tv != 0 {
			fmt.Fprintf(&b, " tv%d", m.tv)
		}
		if len(m.parts) > 0 {
			fmt.Fprintf(&b, " parts=%v", m.parts)
		}
		if m.startMs >= 0 {
			fmt.Fprintf(&b, " start=%d", m.startMs)
		}
		fmt.Fprintf(&b, " update=%d", m.updateMs)
		if !x.durable {
			b.WriteString(" (not durable)")
		}
		if x.w != nil {
			to := "tombstone"
			if !x.w.tombstone {
				to = fmt.Sprintf("%s@%d", x.w.to.state, x.w.to.epoch)
			}
			fmt.Fprintf(&b, " writing=#%d(%s %s)", x.w.token, x.w.kind, to)
		}
		if x.retryAt > 0 {
			fmt.Fprintf(&b, " retry@%d", x.retryAt)
		}
		if x.c != nil {
			var ps []string
			for _, p := range m.parts {
				ms := x.c.pending[p]
				switch {
				case ms == nil:
				case ms.inflight != 0:
					ps = append(ps, fmt.Sprintf("%s#%d", p, ms.inflight))
				default:
					ps = append(ps, fmt.Sprintf("%s@%d", p, ms.retryAt))
				}
			}
			fmt.Fprintf(&b, " markers=[%s]", strings.Join(ps, " "))
		}
	}
	return b.String()
}

func recordString(key, value []byte) string {
	id, ok, err := decodeKey(key)
	if err != nil || !ok {
		return fmt.Sprintf("bad key %x: %v", key, err)
	}
	if value == nil {
		return id + ": tombstone"
	}
	v := kmsg.NewTxnMetadataValue()
	if err := v.ReadFrom(value); err != nil {
		return fmt.Sprintf("%s: bad value %x: %v", id, value, err)
	}
	var parts []string
	for _, t := range v.Topics {
		for _, p := range t.Partitions {
			parts = append(parts, fmt.Sprintf("%s-%d", t.Topic, p))
		}
	}
	ps := fmt.Sprint(parts)
	if v.Topics == nil {
		ps = "null"
	}
	s := fmt.Sprintf("%s: v%d %s pid=%d/%d timeout=%d parts=%s start=%d update=%d",
		id, v.Version, v.State, v.ProducerID, v.ProducerEpoch, v.TimeoutMillis, ps, v.StartTimestamp, v.LastUpdateTimestamp)
	if v.Version >= 1 {
		s += fmt.Sprintf(" prev=%d next=%d tv=%d", v.PreviousProducerID, v.NextProducerID, v.ClientTransactionVersion)
	}
	return s
}

func answerString(a Answer) string {
	s := codeString(a.Code)
	if a.ProducerID != -1 || a.ProducerEpoch != -1 {
		s += fmt.Sprintf(" pid=%d/%d", a.ProducerID, a.ProducerEpoch)
	}
	if a.Partitions != nil {
		var ps []string
		for _, p := range a.Partitions {
			ps = append(ps, fmt.Sprintf("%s=%s", p.TopicPartition, codeString(p.Code)))
		}
		s += " [" + strings.Join(ps, " ") + "]"
	}
	return s
}

func markerString(m Marker) string {
	what := "ABORT"
	if m.Commit {
		what = "COMMIT"
	}
	return fmt.Sprintf("%s#%d %s pid=%d/%d cepoch=%d tv%d %v", m.ID.TxnID, m.ID.Seq, what, m.ProducerID, m.ProducerEpoch,
		m.CoordinatorEpoch, m.TransactionVersion, m.Partitions)
}

func describeString(d kmsg.DescribeTransactionsResponseTransactionState) string {
	if d.ErrorCode != 0 {
		return fmt.Sprintf("describe %s: %s", d.TransactionalID, codeString(d.ErrorCode))
	}
	var ps []string
	for _, t := range d.Topics {
		for _, p := range t.Partitions {
			ps = append(ps, fmt.Sprintf("%s-%d", t.Topic, p))
		}
	}
	return fmt.Sprintf("describe %s: %s pid=%d/%d timeout=%d start=%d parts=%v",
		d.TransactionalID, d.State, d.ProducerID, d.ProducerEpoch, d.TimeoutMillis, d.StartTimestamp, ps)
}

func codeString(code int16) string {
	if code == 0 {
		return "NONE"
	}
	return codeName(code)
}

func (h *harness) token(d *datadriven.TestData, prefix string) string {
	h.seq++
	tok := fmt.Sprintf("%s%d", prefix, h.seq)
	if d.HasArg("tok") {
		tok = h.str(d, "tok", "")
	}
	if h.open[tok] {
		h.t.Fatalf("%s: token %s is still outstanding", d.Pos, tok)
	}
	h.open[tok] = true
	return tok
}

func (h *harness) tokens(d *datadriven.TestData) []Token {
	var toks []Token
	for _, a := range d.CmdArgs {
		if a.Key == "tok" {
			for _, v := range a.Vals {
				n, err := strconv.ParseUint(v, 10, 64)
				if err != nil {
					d.Fatalf(h.t, "tok: %v", err)
				}
				toks = append(toks, Token(n))
			}
			return toks
		}
	}
	for tok := range h.inflight {
		toks = append(toks, tok)
	}
	slices.Sort(toks)
	return toks
}

func (h *harness) markerSeqs(d *datadriven.TestData) []uint64 {
	if d.HasArg("seq") {
		return []uint64{uint64(h.num(d, "seq", 0))}
	}
	id := h.str(d, "id", "")
	var seqs []uint64
	for seq, m := range h.markers {
		if id == "" || m.ID.TxnID == id {
			seqs = append(seqs, seq)
		}
	}
	slices.Sort(seqs)
	return seqs
}

func (h *harness) str(d *datadriven.TestData, key, def string) string {
	for _, a := range d.CmdArgs {
		if a.Key == key {
			if len(a.Vals) != 1 {
				d.Fatalf(h.t, "%s: one value", key)
			}
			return a.Vals[0]
		}
	}
	return def
}

func (h *harness) num(d *datadriven.TestData, key string, def int) int {
	s := h.str(d, key, "")
	if s == "" {
		return def
	}
	n, err := strconv.Atoi(s)
	if err != nil {
		d.Fatalf(h.t, "%s: %v", key, err)
	}
	return n
}

func (h *harness) code(d *datadriven.TestData, key string, def int16) int16 {
	s := h.str(d, key, "")
	if s == "" {
		return def
	}
	for c := int16(-1); c < 200; c++ {
		if e, ok := kerr.ErrorForCode(c).(*kerr.Error); ok && e.Message == s {
			return c
		}
	}
	d.Fatalf(h.t, "%s: unknown error %s", key, s)
	return 0
}

func (h *harness) parts(d *datadriven.TestData, key string) []TopicPartition {
	var ps []TopicPartition
	for _, a := range d.CmdArgs {
		if a.Key != key {
			continue
		}
		for _, v := range a.Vals {
			i := strings.LastIndexByte(v, '-')
			n, err := strconv.Atoi(v[i+1:])
			if i < 0 || err != nil {
				d.Fatalf(h.t, "%s: want topic-partition, got %q", key, v)
			}
			ps = append(ps, TopicPartition{v[:i], int32(n)})
		}
	}
	return ps
}
