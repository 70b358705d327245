package txn

import (
	"bytes"
	"flag"
	"fmt"
	"maps"
	"math/rand"
	"slices"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
)

// sim runs one seeded random history against a Table: producers sharing a
// few transactional ids (so they fence each other and race), the partition
// log with its writes committing, failing, or landing unacknowledged at a
// failover, markers written, refused, or never answered, producer id
// blocks arriving late or not at all, time passing, failovers and unloads.
// It returns the transcript (every input and output), and fails t as soon
// as a step breaks one of the model's rules:
//
//   - an answer that needed a record comes only once the record is in the
//     log: an InitProducerId's producer id and epoch, an added partition,
//     an EndTxn's decision are in the id's last committed record;
//   - at most one record per id is in flight;
//   - in the log, an id's epoch never goes backwards for a producer id; a
//     new producer id starts at epoch 0 and was never used before;
//   - after a PrepareCommit in the log the id's next different record is a
//     CompleteCommit (a decided commit is never turned into an abort), and
//     every marker matches the id's last record, which is Prepare*;
//   - Complete* is written only once every partition of the transaction
//     was reported done since the Prepare* (or the load);
//   - the table's state equals what a load of the log gives, for every
//     durable id;
//   - every request is answered exactly once; the table's invariants and
//     the NextDeadline contract hold after every step.
//
// At the end it lets the world cooperate (every write and marker
// succeeds, nobody sends anything) and ticks to each deadline: every id
// must then reach its end and expire (the forced exits).
func sim(t *testing.T, seed int64, steps int) []byte {
	s := newSim(t, seed)
	for step := range steps {
		s.step(step)
	}
	s.checkAgainstLog(true)
	s.drain()
	return s.tr.Bytes()
}

type simReq struct {
	p       *simProducer
	kind    string // init, add, offsets, verify, end
	version int16
	parts   []TopicPartition
	commit  bool
}

type simProducer struct {
	name    string
	txnID   string
	pid     int64
	epoch   int16
	v5      bool // ends with EndTxn v5
	pending int  // requests outstanding
	inTxn   bool // it has added partitions since its last end
}

type simMarker struct {
	m     Marker
	left  []TopicPartition
	epoch int32 // coordinator epoch it was sent at
}

type simState struct {
	t    *testing.T
	seed int64
	rng  *rand.Rand
	tr   bytes.Buffer
	cfg  Config
	tb   *Table
	now  int64

	log      []LogRecord
	inflight map[Token]Append
	markers  []*simMarker
	reqs     map[string]simReq
	nreq     int
	prods    []*simProducer
	loaded   bool
	epoch    int32
	idAsk    bool // a FetchProducerIDs is outstanding
	nextID   int64

	// Model state derived from the log and the reports.
	last     map[string]*meta                   // each id's last record in the log (absent: none or a tombstone)
	pidOwner map[int64]string                   // producer id -> the id that used it
	done     map[string]map[TopicPartition]bool // partitions reported done since the Prepare* or the load
}

func newSim(t *testing.T, seed int64) *simState {
	rng := rand.New(rand.NewSource(seed))
	cfg := DefaultConfig()
	cfg.MaxTimeoutMs = 5000
	cfg.IDExpirationMs = int64(10000 + rng.Intn(3)*20000)
	cfg.MarkerTimeoutMs = 300
	cfg.LegacyValues = rng.Intn(4) == 0
	s := &simState{t: t, seed: seed, rng: rng, cfg: cfg, tb: NewTable(cfg, 3),
		inflight: map[Token]Append{}, reqs: map[string]simReq{}, nextID: 100,
		last: map[string]*meta{}, pidOwner: map[int64]string{}, done: map[string]map[TopicPartition]bool{}}
	ids := []string{"a", "b", "c"}
	for i := range 4 {
		s.prods = append(s.prods, &simProducer{name: fmt.Sprintf("p%d", i), txnID: ids[i%len(ids)], pid: -1, epoch: -1, v5: rng.Intn(2) == 0})
	}
	s.failover("start")
	return s
}

var simParts = []TopicPartition{{"t", 0}, {"t", 1}, {"u", 0}}

func (s *simState) fatalf(format string, args ...any) {
	s.t.Helper()
	s.t.Fatalf("seed %d at %d: %s\n%s\nlog:\n%s", s.seed, s.now, fmt.Sprintf(format, args...), s.tb.dump(), s.logString())
}

func (s *simState) logString() string {
	var b strings.Builder
	for i, r := range s.log {
		fmt.Fprintf(&b, "  %d %s\n", i, recordString(r.Key, r.Value))
	}
	return b.String()
}

func (s *simState) step(step int) {
	s.now += int64(s.rng.Intn(3) * s.rng.Intn(200))
	r := s.rng.Intn(100)
	var what string
	switch {
	case r < 35:
		what = s.request()
	case r < 60 && len(s.inflight) > 0:
		toks := slices.Sorted(maps.Keys(s.inflight))
		tok := toks[s.rng.Intn(len(toks))]
		a := s.inflight[tok]
		delete(s.inflight, tok)
		if s.rng.Intn(8) > 0 {
			what = fmt.Sprintf("written #%d %s", tok, a.TxnID)
			s.commitRecord(a)
			s.ready(what, s.tb.RecordWritten(s.now, tok))
		} else {
			codes := []int16{kerr.NotEnoughReplicas.Code, kerr.NotLeaderForPartition.Code, kerr.RequestTimedOut.Code, kerr.MessageTooLarge.Code}
			code := codes[s.rng.Intn(len(codes))]
			what = fmt.Sprintf("failed #%d %s %s", tok, a.TxnID, codeName(code))
			s.ready(what, s.tb.RecordFailed(s.now, tok, code))
		}
	case r < 78 && len(s.markers) > 0:
		i := s.rng.Intn(len(s.markers))
		sm := s.markers[i]
		p := sm.left[s.rng.Intn(len(sm.left))]
		sm.left = slices.DeleteFunc(sm.left, func(q TopicPartition) bool { return q == p })
		if len(sm.left) == 0 {
			s.markers = slices.Delete(s.markers, i, i+1)
		}
		switch x := s.rng.Intn(10); {
		case x < 6:
			what = fmt.Sprintf("marker written %s#%d %s", sm.m.ID.TxnID, sm.m.ID.Seq, p)
			s.markerDone(sm, p)
			s.ready(what, s.tb.MarkersWritten(s.now, sm.m.ID, []TopicPartition{p}))
		case x < 9:
			codes := []int16{kerr.NotLeaderForPartition.Code, kerr.RequestTimedOut.Code, kerr.InvalidProducerEpoch.Code, kerr.UnknownTopicOrPartition.Code}
			code := codes[s.rng.Intn(len(codes))]
			what = fmt.Sprintf("marker failed %s#%d %s %s", sm.m.ID.TxnID, sm.m.ID.Seq, p, codeName(code))
			if code == kerr.InvalidProducerEpoch.Code {
				s.markerDone(sm, p)
			}
			s.ready(what, s.tb.MarkerFailed(s.now, sm.m.ID, []TopicPartition{p}, code))
		default:
			what = fmt.Sprintf("marker lost %s#%d %s", sm.m.ID.TxnID, sm.m.ID.Seq, p)
		}
	case r < 85:
		if d := s.tb.NextDeadline(); d >= 0 && s.rng.Intn(5) == 0 {
			s.now = max(s.now, d) // the owner's timer fires
		} else {
			s.now += int64(s.rng.Intn(600))
		}
		what = fmt.Sprintf("tick %d", s.now)
		s.ready(what, s.tb.Tick(s.now))
	case r < 89 && s.idAsk:
		s.idAsk = false
		if s.rng.Intn(3) == 0 {
			what = "ids failed"
			s.ready(what, s.tb.ProducerIDsFailed(s.now))
		} else {
			n := int64(1 + s.rng.Intn(50))
			what = fmt.Sprintf("ids %d+%d", s.nextID, n)
			s.nextID += n
			s.ready(what, s.tb.SupplyProducerIDs(s.now, s.nextID-n, n))
		}
	case r < 90 && s.rng.Intn(3) == 0:
		what = "failover"
		s.failover(what)
	case r < 91 && s.loaded && s.rng.Intn(4) == 0:
		what = "unload"
		s.inflight = map[Token]Append{}
		s.loaded = false
		s.ready(what, s.tb.Unload())
	case r < 97 && !s.loaded:
		what = "load"
		s.failover(what)
	default:
		// Read-only queries.
		id := []string{"a", "b", "c"}[s.rng.Intn(3)]
		d := s.tb.Describe(id)
		what = fmt.Sprintf("describe %s: %s", id, describeString(d))
		fmt.Fprintf(&s.tr, "%d %s\n", s.now, what)
		res := s.tb.List(s.now, ListFilter{DurationMs: -1})
		fmt.Fprintf(&s.tr, "  list %d %d\n", res.Code, len(res.States))
	}
	_ = step
}

// failover is a new coordinator (or this one again) loading the log: each
// record in flight lands in the log unacknowledged, or not at all.
func (s *simState) failover(what string) {
	for _, tok := range slices.Sorted(maps.Keys(s.inflight)) {
		if s.rng.Intn(2) == 0 {
			a := s.inflight[tok]
			fmt.Fprintf(&s.tr, "  landed #%d %s\n", tok, a.TxnID)
			s.commitRecord(a)
		}
	}
	s.inflight = map[Token]Append{}
	if s.rng.Intn(2) == 0 {
		s.markers = nil // else: reported late, and ignored
	}
	s.epoch++
	s.loaded = true
	clear(s.done)
	s.ready(fmt.Sprintf("%s epoch %d", what, s.epoch), s.tb.Load(s.now, s.epoch, s.log))
}

func (s *simState) request() string {
	p := s.prods[s.rng.Intn(len(s.prods))]
	if p.pending > 0 && s.rng.Intn(4) > 0 {
		return "idle"
	}
	s.nreq++
	tok := fmt.Sprintf("%s#%d", p.name, s.nreq)
	req := simReq{p: p}
	var rd Ready
	var what string
	pid, epoch := p.pid, p.epoch
	if s.rng.Intn(10) == 0 { // a stale or bogus id
		pid, epoch = pid+int64(s.rng.Intn(3))-1, epoch+int16(s.rng.Intn(3))-1
	}
	parts := func() []TopicPartition {
		var ps []TopicPartition
		for _, q := range simParts {
			if s.rng.Intn(2) == 0 {
				ps = append(ps, q)
			}
		}
		if len(ps) == 0 {
			ps = append(ps, simParts[s.rng.Intn(len(simParts))])
		}
		return ps
	}
	x := s.rng.Intn(10)
	if s.rng.Intn(4) > 0 { // mostly, what a producer does next
		switch {
		case p.pid < 0:
			x = 0
		case !p.inTxn:
			x = 2 + s.rng.Intn(4)
		default:
			x = []int{2, 5, 6, 7, 8, 9}[s.rng.Intn(6)]
		}
	}
	switch {
	case x < 2 || p.pid < 0:
		req.kind, req.version = "init", int16(s.rng.Intn(6))
		ir := InitRequest{TxnID: p.txnID, TimeoutMs: int32(1000 + s.rng.Intn(5)*1000), ProducerID: -1, ProducerEpoch: -1, Version: req.version}
		if req.version >= 3 && p.pid >= 0 && s.rng.Intn(2) == 0 {
			ir.ProducerID, ir.ProducerEpoch = pid, epoch
		}
		if s.rng.Intn(30) == 0 {
			ir.TimeoutMs = 6000
		}
		what = fmt.Sprintf("init %s %s v%d %d/%d", tok, p.txnID, req.version, ir.ProducerID, ir.ProducerEpoch)
		rd = s.tb.InitProducerID(s.now, ir, tok)
	case x < 5:
		req.kind, req.version, req.parts = "add", int16(s.rng.Intn(6)), parts()
		what = fmt.Sprintf("add %s %s v%d %d/%d %v", tok, p.txnID, req.version, pid, epoch, req.parts)
		rd = s.tb.AddPartitions(s.now, AddPartitionsRequest{TxnID: p.txnID, ProducerID: pid, ProducerEpoch: epoch, Partitions: req.parts, Version: req.version}, tok)
	case x < 6:
		req.kind, req.version, req.parts = "offsets", int16(s.rng.Intn(5)), []TopicPartition{{OffsetsTopic, 4}}
		what = fmt.Sprintf("offsets %s %s v%d %d/%d", tok, p.txnID, req.version, pid, epoch)
		rd = s.tb.AddOffsets(s.now, AddOffsetsRequest{TxnID: p.txnID, ProducerID: pid, ProducerEpoch: epoch, Group: "g", OffsetsPartition: 4, Version: req.version}, tok)
	case x < 7:
		req.kind, req.version, req.parts = "verify", 4, parts()
		what = fmt.Sprintf("verify %s %s %d/%d %v", tok, p.txnID, pid, epoch, req.parts)
		rd = s.tb.AddPartitions(s.now, AddPartitionsRequest{TxnID: p.txnID, ProducerID: pid, ProducerEpoch: epoch, Partitions: req.parts, VerifyOnly: true, Version: 4}, tok)
	default:
		req.kind, req.commit = "end", s.rng.Intn(3) > 0
		req.version = int16(s.rng.Intn(5))
		if p.v5 {
			req.version = 5
		}
		what = fmt.Sprintf("end %s %s v%d %d/%d commit=%v", tok, p.txnID, req.version, pid, epoch, req.commit)
		rd = s.tb.EndTxn(s.now, EndRequest{TxnID: p.txnID, ProducerID: pid, ProducerEpoch: epoch, Commit: req.commit, Version: req.version}, tok)
	}
	p.pending++
	s.reqs[tok] = req
	s.ready(what, rd)
	return what
}

// commitRecord appends a to the log and checks the log's rules.
func (s *simState) commitRecord(a Append) {
	s.log = append(s.log, LogRecord{Key: a.Key, Value: a.Value})
	prev := s.last[a.TxnID]
	hadPrev := prev != nil
	if a.Value == nil {
		if hadPrev && prev.state != Empty && prev.state != CompleteCommit && prev.state != CompleteAbort {
			s.fatalf("%s: tombstone after %s", a.TxnID, prev.state)
		}
		delete(s.last, a.TxnID)
		return
	}
	m, err := decodeValue(a.Value)
	if err != nil {
		s.fatalf("%s: %v", a.TxnID, err)
	}
	if owner, ok := s.pidOwner[m.pid]; ok && owner != a.TxnID {
		s.fatalf("%s: producer id %d belongs to %s", a.TxnID, m.pid, owner)
	}
	s.pidOwner[m.pid] = a.TxnID
	s.last[a.TxnID] = &m
	if hadPrev {
		if m.pid == prev.pid && m.epoch < prev.epoch {
			s.fatalf("%s: epoch %d after %d", a.TxnID, m.epoch, prev.epoch)
		}
		if m.pid != prev.pid && m.epoch != 0 {
			s.fatalf("%s: new producer id %d at epoch %d", a.TxnID, m.pid, m.epoch)
		}
		if prev.state == PrepareCommit && m.state != PrepareCommit && m.state != CompleteCommit {
			s.fatalf("%s: %s after PrepareCommit", a.TxnID, m.state)
		}
		if prev.state == PrepareAbort && m.state != PrepareAbort && m.state != CompleteAbort {
			s.fatalf("%s: %s after PrepareAbort", a.TxnID, m.state)
		}
	}
	if m.state == PrepareCommit || m.state == PrepareAbort {
		if !hadPrev || prev.state != m.state {
			s.done[a.TxnID] = map[TopicPartition]bool{}
		}
	}
}

// lastRecord is the id's last record in the log, nil if none (or a
// tombstone).
func (s *simState) lastRecord(id string) *meta { return s.last[id] }

func (s *simState) markerDone(sm *simMarker, p TopicPartition) {
	if sm.epoch != s.epoch {
		return // sent by an earlier load: ignored by the table
	}
	last := s.lastRecord(sm.m.ID.TxnID)
	if last != nil && last.pid == sm.m.ProducerID && last.epoch == sm.m.ProducerEpoch && (last.state == PrepareCommit) == sm.m.Commit {
		if s.done[sm.m.ID.TxnID] == nil {
			s.done[sm.m.ID.TxnID] = map[TopicPartition]bool{}
		}
		s.done[sm.m.ID.TxnID][p] = true
	}
}

// ready records rd and checks it.
func (s *simState) ready(what string, rd Ready) {
	fmt.Fprintf(&s.tr, "%d %s\n", s.now, what)
	for _, n := range rd.Notes {
		fmt.Fprintf(&s.tr, "  note %s\n", n)
	}
	for _, a := range rd.Appends {
		fmt.Fprintf(&s.tr, "  append #%d %x %x\n", a.Token, a.Key, a.Value)
		for _, o := range s.inflight {
			if o.TxnID == a.TxnID {
				s.fatalf("%s: second record in flight", a.TxnID)
			}
		}
		if a.Value != nil {
			m, _ := decodeValue(a.Value)
			if m.state == CompleteCommit || m.state == CompleteAbort {
				last := s.lastRecord(a.TxnID)
				if last == nil || (last.state != PrepareCommit && last.state != PrepareAbort) {
					s.fatalf("%s: Complete* without Prepare* in the log", a.TxnID)
				}
				for _, p := range last.parts {
					if !s.done[a.TxnID][p] {
						s.fatalf("%s: %s before the marker of %s was reported", a.TxnID, m.state, p)
					}
				}
			}
		}
		s.inflight[a.Token] = a
	}
	for _, m := range rd.Markers {
		fmt.Fprintf(&s.tr, "  marker %s\n", markerString(m))
		last := s.lastRecord(m.ID.TxnID)
		if last == nil || (last.state != PrepareCommit && last.state != PrepareAbort) ||
			last.pid != m.ProducerID || last.epoch != m.ProducerEpoch || (last.state == PrepareCommit) != m.Commit {
			s.fatalf("marker %s does not match the log", markerString(m))
		}
		if m.CoordinatorEpoch != s.epoch {
			s.fatalf("marker %s at coordinator epoch %d", markerString(m), s.epoch)
		}
		s.markers = append(s.markers, &simMarker{m: m, left: slices.Clone(m.Partitions), epoch: s.epoch})
	}
	for _, a := range rd.Answers {
		tok := a.Token.(string)
		fmt.Fprintf(&s.tr, "  answer %s %s\n", tok, answerString(a))
		req, ok := s.reqs[tok]
		if !ok {
			s.fatalf("answer to %s, not outstanding", tok)
		}
		delete(s.reqs, tok)
		req.p.pending--
		s.checkAnswer(req, a)
		s.onAnswer(req, a)
	}
	if rd.FetchProducerIDs {
		if s.idAsk {
			s.fatalf("a second FetchProducerIDs")
		}
		s.idAsk = true
		fmt.Fprintf(&s.tr, "  fetch ids\n")
	}
	if err := s.tb.checkInvariants(); err != nil {
		s.fatalf("after %s: %v", what, err)
	}
	if d := s.tb.NextDeadline(); d >= 0 {
		before := s.tb.dump()
		if r := s.tb.Tick(d - 1); len(r.Appends)+len(r.Answers)+len(r.Markers) > 0 || r.FetchProducerIDs || s.tb.dump() != before {
			s.fatalf("after %s: Tick(NextDeadline-1 = %d) acted", what, d-1)
		}
	}
	s.checkAgainstLog(false)
	fmt.Fprintf(&s.tr, "%s\n", s.tb.dump())
}

// checkAnswer: a success that needed a record is in the id's last record.
func (s *simState) checkAnswer(req simReq, a Answer) {
	id := req.p.txnID
	last := s.lastRecord(id)
	switch req.kind {
	case "init":
		if a.Code != 0 {
			return
		}
		if last == nil || last.state != Empty || last.pid != a.ProducerID || last.epoch != a.ProducerEpoch {
			s.fatalf("%s: init answered %d/%d, log has %+v", id, a.ProducerID, a.ProducerEpoch, last)
		}
	case "add", "offsets", "verify":
		for _, pc := range a.Partitions {
			if pc.Code != 0 {
				continue
			}
			if last == nil || last.state != Ongoing {
				s.fatalf("%s: %s %s acknowledged, log has %+v", id, req.kind, pc.TopicPartition, last)
			}
			if _, ok := slices.BinarySearchFunc(last.parts, pc.TopicPartition, comparePartitions); !ok {
				s.fatalf("%s: %s acknowledged, not in the log's %v", id, pc.TopicPartition, last.parts)
			}
		}
		if req.kind == "offsets" && a.Code == 0 {
			if last == nil || last.state != Ongoing || !slices.Contains(last.parts, req.parts[0]) {
				s.fatalf("%s: offsets acknowledged, log has %+v", id, last)
			}
		}
	case "end":
		if a.Code != 0 {
			return
		}
		want := []State{PrepareAbort, CompleteAbort}
		if req.commit {
			want = []State{PrepareCommit, CompleteCommit}
		}
		if last == nil || !slices.Contains(want, last.state) {
			s.fatalf("%s: end(commit=%v) answered, log has %+v", id, req.commit, last)
		}
		if !(a.ProducerID == last.pid && a.ProducerEpoch == last.epoch) && !(a.ProducerID == last.nextPid && a.ProducerEpoch == 0) {
			s.fatalf("%s: end answered %d/%d, log has %+v", id, a.ProducerID, a.ProducerEpoch, last)
		}
	}
}

// onAnswer: what the producer does with an answer.
func (s *simState) onAnswer(req simReq, a Answer) {
	p := req.p
	switch {
	case req.kind == "init" && a.Code == 0:
		p.pid, p.epoch, p.inTxn = a.ProducerID, a.ProducerEpoch, false
	case (req.kind == "add" || req.kind == "offsets") && a.Code == 0:
		p.inTxn = true
	case req.kind == "end" && a.Code == 0:
		p.inTxn = false
		if req.version >= 5 {
			p.pid, p.epoch = a.ProducerID, a.ProducerEpoch
		}
	case a.Code == kerr.ProducerFenced.Code || a.Code == kerr.InvalidProducerEpoch.Code || a.Code == kerr.InvalidProducerIDMapping.Code:
		if s.rng.Intn(5) > 0 {
			p.pid, p.epoch = -1, -1
		}
	}
}

// checkAgainstLog: the table's state is what a load of the log gives
// (each id's last record; a real load when full).
func (s *simState) checkAgainstLog(full bool) {
	if !s.tb.Active() {
		return
	}
	last := s.last
	if full {
		fresh := NewTable(s.cfg, 3)
		fresh.Load(s.now, s.epoch, s.log)
		last = map[string]*meta{}
		for id, x := range fresh.txns {
			last[id] = &x.m
		}
		if len(last) != len(s.last) {
			s.fatalf("a load gives %d ids, the model %d", len(last), len(s.last))
		}
	}
	for id, x := range s.tb.txns {
		y := last[id]
		if !x.durable {
			if y != nil {
				s.fatalf("%s: not durable in the table, but in the log", id)
			}
			continue
		}
		if y == nil {
			s.fatalf("%s: in the table, not in the log", id)
		}
		a, b := x.m, *y
		a.lastEpoch, b.lastEpoch = -1, -1
		if s.cfg.LegacyValues {
			a.prevPid, a.nextPid, a.tv = b.prevPid, b.nextPid, b.tv
		}
		if a.String() != b.String() {
			s.fatalf("%s: table %v, log %v", id, a, b)
		}
	}
	for id := range last {
		if s.tb.txns[id] == nil {
			s.fatalf("%s: in the log, not in the table", id)
		}
	}
}

// drain lets the world cooperate until every id has ended and expired.
func (s *simState) drain() {
	if !s.loaded {
		s.failover("load")
	}
	for i := 0; ; i++ {
		if i > 5000 {
			s.fatalf("does not settle")
		}
		switch {
		case s.idAsk:
			s.idAsk = false
			s.nextID += 10
			s.ready("ids", s.tb.SupplyProducerIDs(s.now, s.nextID-10, 10))
		case len(s.inflight) > 0:
			tok := slices.Min(slices.Collect(maps.Keys(s.inflight)))
			a := s.inflight[tok]
			delete(s.inflight, tok)
			s.commitRecord(a)
			s.ready(fmt.Sprintf("written #%d", tok), s.tb.RecordWritten(s.now, tok))
		case len(s.markers) > 0:
			sm := s.markers[0]
			s.markers = s.markers[1:]
			for _, p := range sm.left {
				s.markerDone(sm, p)
			}
			s.ready("markers written", s.tb.MarkersWritten(s.now, sm.m.ID, sm.left))
		default:
			d := s.tb.NextDeadline()
			if d < 0 {
				if s.tb.Len() > 0 || len(s.reqs) > 0 {
					s.fatalf("no deadline, %d ids and %d requests left", s.tb.Len(), len(s.reqs))
				}
				return
			}
			s.now = max(s.now, d)
			s.ready("tick", s.tb.Tick(s.now))
		}
	}
}

var simSeeds = flag.Int("sim.seeds", 100, "TestSim: how many seeded histories to run")

// TestSim runs seeded random histories (sim lists what each checks).
// go test ./broker/txn -run TestSim -sim.seeds 5000 for a longer search.
func TestSim(t *testing.T) {
	for seed := int64(1); seed <= int64(*simSeeds); seed++ {
		sim(t, seed, 400)
	}
}

// TestDeterminism replays seeded histories and requires byte-identical
// transcripts: every record, answer and marker is a function of the calls.
func TestDeterminism(t *testing.T) {
	for seed := int64(1001); seed <= 1010; seed++ {
		first := sim(t, seed, 400)
		if again := sim(t, seed, 400); !bytes.Equal(first, again) {
			i := 0
			for i < len(first) && i < len(again) && first[i] == again[i] {
				i++
			}
			lo := max(0, i-300)
			t.Fatalf("seed %d: transcripts differ at byte %d:\n%s\n---\n%s", seed, i,
				first[lo:min(len(first), i+200)], again[lo:min(len(again), i+200)])
		}
	}
}
