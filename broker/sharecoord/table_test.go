package sharecoord

import (
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"

	"github.com/fjordlog/fjord/group/sharepart"
)

// TestTable runs testdata/*.txt against a table, as the coordinator drives
// it: every record an operation returns is replayed at the next offset of
// an imaginary log. go test ./broker/sharecoord -run TestTable -rewrite
// regenerates the expected output; review the diff.
//
// Commands (key=group:topicByte:partition, e.g. g:1:0; now defaults to
// the previous now plus one):
//
//	init key= state= start=               initialize
//	write key= leader= [state=0] [start=-1] [dcc=-1] [batches=first-last/state/count,...]
//	read key= leader=
//	summary key=
//	delete key=
//	cold interval=                        cold snapshots
//	topics-deleted ids=1,2                tombstones for topics 1 and 2
//	replay key= value=hex [update]        replay raw value bytes (a snapshot's key, or an update's)
//	replay-update key= [leader=] [start=] [dcc=] [batches=]   replay an update no table writes first
//	commit hw=                            records below hw are committed
//	prune hw=                             the prune bound at hw
//	state [key=]                          the stored state of key, or of all
func TestTable(t *testing.T) {
	datadriven.Walk(t, "testdata", func(t *testing.T, path string) {
		h := &tableHarness{t: newTable(3)}
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			out := h.do(t, d)
			if err := h.t.checkInvariants(); err != nil {
				t.Fatalf("%s: invariants broken: %v\n%s", d.Pos, err, out)
			}
			return out
		})
	})
}

type tableHarness struct {
	t    *table
	next int64 // the imaginary log's end
	now  int64
}

func (h *tableHarness) do(t *testing.T, d *datadriven.TestData) string {
	h.now++
	if d.HasArg("now") {
		d.ScanArgs(t, "now", &h.now)
	}
	if d.HasArg("limit") {
		var n int
		d.ScanArgs(t, "limit", &n)
		h.t.updatesPerSnapshot = int32(n)
	}
	key := func() sharepart.Key {
		var s string
		d.ScanArgs(t, "key", &s)
		return parseTestKey(t, s)
	}
	intArg := func(name string, def int64) int64 {
		if !d.HasArg(name) {
			return def
		}
		var s string
		d.ScanArgs(t, name, &s)
		v, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			t.Fatalf("%s: %s=%q: %v", d.Pos, name, s, err)
		}
		return v
	}
	switch d.Cmd {
	case "init":
		r, err := h.t.initialize(key(), int32(intArg("state", 0)), intArg("start", 0), h.now)
		return h.apply(err, r)
	case "write":
		w := WriteState{LeaderEpoch: int32(intArg("leader", -1)), StateEpoch: int32(intArg("state", 0)),
			StartOffset: intArg("start", -1), DeliveryCompleteCount: int32(intArg("dcc", -1))}
		if d.HasArg("batches") {
			var s string
			d.ScanArgs(t, "batches", &s)
			w.Batches = parseBatches(t, s)
		}
		r, err := h.t.write(key(), w, false, h.now)
		return h.apply(err, r)
	case "read":
		st, r, err := h.t.read(key(), int32(intArg("leader", -1)), h.now)
		if err != nil {
			return "error: " + err.Error() + "\n"
		}
		out := "state: " + formatState(st) + "\n"
		if r != nil {
			out += h.apply(nil, *r)
		}
		return out
	case "summary":
		st, ok := h.t.summary(key())
		if !ok {
			return "none\n"
		}
		return formatState(st) + "\n"
	case "delete":
		r := h.t.remove(key())
		if r == nil {
			return "nothing to delete\n"
		}
		return h.apply(nil, *r)
	case "cold":
		return h.apply(nil, h.t.coldSnapshots(h.now, intArg("interval", 0))...)
	case "topics-deleted":
		var s string
		d.ScanArgs(t, "ids", &s)
		ids := map[[16]byte]bool{}
		for _, f := range strings.Split(s, ",") {
			n, _ := strconv.Atoi(f)
			ids[testTopic(byte(n))] = true
		}
		return h.apply(nil, h.t.topicsDeleted(ids)...)
	case "replay":
		var s, v string
		d.ScanArgs(t, "key", &s)
		d.ScanArgs(t, "value", &v)
		var val []byte
		if _, err := fmt.Sscanf(v, "%x", &val); err != nil {
			t.Fatalf("%s: value=%q: %v", d.Pos, v, err)
		}
		typ := sharepart.SnapshotRecord
		if d.HasArg("update") {
			typ = sharepart.UpdateRecord
		}
		r := sharepart.Record{Key: sharepart.EncodeKey(typ, parseTestKey(t, s)), Value: val}
		if err := h.t.replay(h.next, r); err != nil {
			h.next++
			return "skipped: " + err.Error() + "\n"
		}
		h.next++
		return "replayed\n"
	case "replay-update":
		v := &sharepart.UpdateValue{LeaderEpoch: int32(intArg("leader", -1)), StartOffset: intArg("start", -1),
			DeliveryCompleteCount: int32(intArg("dcc", -1))}
		if d.HasArg("batches") {
			var s string
			d.ScanArgs(t, "batches", &s)
			v.StateBatches = parseBatches(t, s)
		}
		return h.apply(nil, sharepart.EncodeUpdate(key(), v))
	case "commit":
		h.t.commit(intArg("hw", h.next))
		return fmt.Sprintf("needs: %s\n", h.needs())
	case "prune":
		return fmt.Sprintf("bound: %d\nneeds: %s\n", h.t.pruneBound(intArg("hw", h.next)), h.needs())
	case "state":
		if d.HasArg("key") {
			e := h.t.keys[key()]
			if e == nil {
				return "none\n"
			}
			return formatEntry(e) + "\n"
		}
		var b strings.Builder
		for _, k := range h.t.sortedKeys() {
			fmt.Fprintf(&b, "%s: %s\n", testKeyString(k), formatEntry(h.t.keys[k]))
		}
		if b.Len() == 0 {
			return "empty\n"
		}
		return b.String()
	}
	t.Fatalf("%s: unknown command %q", d.Pos, d.Cmd)
	return ""
}

// apply replays recs at the log's end and prints them, or prints err.
func (h *tableHarness) apply(err error, recs ...sharepart.Record) string {
	if err != nil {
		return "error: " + err.Error() + "\n"
	}
	if len(recs) == 0 {
		return "no records\n"
	}
	var b strings.Builder
	for _, r := range recs {
		fmt.Fprintf(&b, "%d: %s\n", h.next, formatRecord(r))
		if err := h.t.replay(h.next, r); err != nil {
			fmt.Fprintf(&b, "replay failed: %v\n", err)
		}
		h.next++
	}
	return b.String()
}

func (h *tableHarness) needs() string {
	var parts []string
	for _, k := range h.t.sortedKeys() {
		if off, ok := h.t.needs[k]; ok {
			parts = append(parts, fmt.Sprintf("%s@%d", testKeyString(k), off))
		}
	}
	for k, off := range h.t.needs {
		if h.t.keys[k] == nil {
			parts = append(parts, fmt.Sprintf("%s(deleted)@%d", testKeyString(k), off))
		}
	}
	return fmt.Sprintf("%v pending=%d", parts, len(h.t.marks))
}

func testTopic(b byte) [16]byte { return [16]byte{15: b} }

// parseTestKey reads group:topicByte:partition.
func parseTestKey(t testing.TB, s string) sharepart.Key {
	f := strings.Split(s, ":")
	if len(f) != 3 {
		t.Fatalf("key %q: want group:topic:partition", s)
	}
	tb, err1 := strconv.Atoi(f[1])
	p, err2 := strconv.Atoi(f[2])
	if err1 != nil || err2 != nil {
		t.Fatalf("key %q", s)
	}
	return sharepart.Key{Group: f[0], TopicID: testTopic(byte(tb)), Partition: int32(p)}
}

func testKeyString(k sharepart.Key) string {
	return fmt.Sprintf("%s:%d:%d", k.Group, k.TopicID[15], k.Partition)
}

var stateNames = map[string]sharepart.State{"avail": sharepart.Available, "acq": sharepart.Acquired,
	"ack": sharepart.Acknowledged, "arch": sharepart.Archived}

// parseBatches reads first-last/state/count,...; state a name or a number.
func parseBatches(t testing.TB, s string) []sharepart.StateBatch {
	var out []sharepart.StateBatch
	for _, f := range strings.Split(s, ",") {
		var first, last int64
		var st string
		var n int16
		if _, err := fmt.Sscanf(strings.ReplaceAll(f, "/", " "), "%d-%d %s %d", &first, &last, &st, &n); err != nil {
			t.Fatalf("batch %q: %v", f, err)
		}
		state, ok := stateNames[st]
		if !ok {
			v, err := strconv.Atoi(st)
			if err != nil {
				t.Fatalf("batch %q: state %q", f, st)
			}
			state = sharepart.State(v)
		}
		out = append(out, sharepart.StateBatch{FirstOffset: first, LastOffset: last, DeliveryState: state, DeliveryCount: n})
	}
	return out
}

func formatBatches(bs []sharepart.StateBatch) string {
	if len(bs) == 0 {
		return "[]"
	}
	parts := make([]string, len(bs))
	for i, b := range bs {
		parts[i] = fmt.Sprintf("%d-%d/%s/%d", b.FirstOffset, b.LastOffset, stateName(b.DeliveryState), b.DeliveryCount)
	}
	return "[" + strings.Join(parts, " ") + "]"
}

func stateName(s sharepart.State) string {
	for n, v := range stateNames {
		if v == s {
			return n
		}
	}
	return strconv.Itoa(int(s))
}

func formatState(st State) string {
	return fmt.Sprintf("snap=%d state=%d leader=%d start=%d dcc=%d batches=%s",
		st.SnapshotEpoch, st.StateEpoch, st.LeaderEpoch, st.StartOffset, st.DeliveryCompleteCount, formatBatches(st.Batches))
}

func formatEntry(e *entry) string {
	return fmt.Sprintf("%s fence=%d/%d updates=%d ts=%d/%d", formatState(e.state), e.fenceLeader, e.fenceState, e.updates, e.createTs, e.writeTs)
}

func formatRecord(r sharepart.Record) string {
	d, err := sharepart.DecodeRecord(r)
	if err != nil {
		return "undecodable: " + err.Error()
	}
	k := testKeyString(d.Key)
	switch {
	case d.Snapshot != nil:
		v := d.Snapshot
		return fmt.Sprintf("snapshot %s snap=%d state=%d leader=%d start=%d dcc=%d ts=%d/%d batches=%s", k,
			v.SnapshotEpoch, v.StateEpoch, v.LeaderEpoch, v.StartOffset, v.DeliveryCompleteCount,
			v.CreateTimestamp, v.WriteTimestamp, formatBatches(v.StateBatches))
	case d.Update != nil:
		v := d.Update
		return fmt.Sprintf("update %s snap=%d leader=%d start=%d dcc=%d batches=%s", k,
			v.SnapshotEpoch, v.LeaderEpoch, v.StartOffset, v.DeliveryCompleteCount, formatBatches(v.StateBatches))
	}
	return "tombstone " + k
}
