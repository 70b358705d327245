package txn

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
)

// Loading. The table becomes the coordinator of its partition when this
// broker leads it: BeginLoad, then the partition's records from its start
// to its end in log order (LoadRecords, as often as needed), then
// FinishLoad. Until then requests get COORDINATOR_LOAD_IN_PROGRESS. The
// last record of each id wins; a tombstone removes it. After the load:
// Ongoing transactions keep their start time (and may time out at once),
// ids in Empty or Complete* keep their last update time (for expiration),
// and Prepare* resumes sending every marker of the transaction: the
// previous coordinator may have written none, some or all of them, and a
// marker written twice is harmless.

// BeginLoad starts a load at coordinatorEpoch (the partition's leader
// epoch). Whatever the table held is dropped first, as by Unload.
func (t *Table) BeginLoad(coordinatorEpoch int32) Ready {
	t.begin()
	t.unload()
	t.phase, t.coordEpoch = loading, coordinatorEpoch
	t.rd.note("loading __transaction_state-%d at coordinator epoch %d", t.partition, coordinatorEpoch)
	return t.end(0)
}

// LoadRecords applies records read from the partition, in log order. It
// returns an error, and applies nothing more of recs, at the first record
// that does not decode; the caller decides whether to skip it (the id then
// keeps its earlier state) and go on with the rest. Records with a key of
// another version are skipped, as Kafka does. A value in a state Kafka
// never writes is skipped too (Dead counts as a tombstone).
func (t *Table) LoadRecords(recs []LogRecord) (int, error) {
	if t.phase != loading {
		return 0, fmt.Errorf("txn: LoadRecords while %s", t.phase)
	}
	for i, r := range recs {
		id, ok, err := decodeKey(r.Key)
		if err != nil {
			return i, err
		}
		if !ok {
			continue
		}
		if r.Value == nil {
			delete(t.txns, id)
			continue
		}
		m, err := decodeValue(r.Value)
		if err != nil {
			return i, fmt.Errorf("%s: %w", id, err)
		}
		switch m.state {
		case Dead:
			delete(t.txns, id)
			continue
		case Empty, Ongoing, PrepareCommit, PrepareAbort, CompleteCommit, CompleteAbort:
		default:
			return i, fmt.Errorf("%w: %s: state %d", ErrBadRecord, id, m.state)
		}
		if m.state == Ongoing && len(m.parts) == 0 {
			m.state = Empty // an Ongoing without partitions (Kafka can write one) holds nothing
			m.startMs = -1
		}
		t.txns[id] = &txn{id: id, m: m, durable: true}
	}
	return len(recs), nil
}

// FinishLoad ends the load: the table serves from now on, and the
// transactions in Prepare* send their markers.
func (t *Table) FinishLoad(now int64) Ready {
	t.begin()
	if t.phase == loading {
		t.phase = active
		n := 0
		for _, id := range t.sortedIDs() {
			x := t.txns[id]
			if x.m.state == PrepareCommit || x.m.state == PrepareAbort {
				n++
				t.startCompletion(now, x)
			}
		}
		t.rd.note("loaded __transaction_state-%d at coordinator epoch %d: %d ids, %d completing", t.partition, t.coordEpoch, len(t.txns), n)
	}
	return t.end(now)
}

// Load is BeginLoad, LoadRecords and FinishLoad in one call, for a log
// read in one piece. A record that does not decode is skipped, with a note.
func (t *Table) Load(now int64, coordinatorEpoch int32, recs []LogRecord) Ready {
	rd := t.BeginLoad(coordinatorEpoch)
	for len(recs) > 0 {
		n, err := t.LoadRecords(recs)
		if err == nil {
			break
		}
		rd.note("skipping a record: %v", err)
		recs = recs[n+1:]
	}
	fin := t.FinishLoad(now)
	rd.Appends = append(rd.Appends, fin.Appends...)
	rd.Answers = append(rd.Answers, fin.Answers...)
	rd.Markers = append(rd.Markers, fin.Markers...)
	rd.FetchProducerIDs = rd.FetchProducerIDs || fin.FetchProducerIDs
	rd.Notes = append(rd.Notes, fin.Notes...)
	return rd
}

// Unload makes the table stop coordinating (this broker no longer leads
// the partition, or it shuts down): every request waiting on a record is
// answered NOT_COORDINATOR, and everything is forgotten; the records in
// flight and the markers sent are ignored when reported. The successor
// loads the partition and carries on from its log.
func (t *Table) Unload() Ready {
	t.begin()
	if t.phase != unloaded {
		t.rd.note("unloaded __transaction_state-%d (coordinator epoch %d)", t.partition, t.coordEpoch)
	}
	t.unload()
	return t.end(0)
}

func (t *Table) unload() {
	for _, id := range t.sortedIDs() {
		if w := t.txns[id].w; w != nil && w.reply != nil {
			t.answer(w.reply.answer(kerr.NotCoordinator.Code, -1, -1))
		}
	}
	clear(t.txns)
	clear(t.writes)
	t.phase = unloaded
}
