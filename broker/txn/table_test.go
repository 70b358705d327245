package txn

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/fjordlog/fjord/protocol/lifecycle"
	"github.com/twmb/franz-go/pkg/kerr"
)

func TestConfig(t *testing.T) {
	if err := (Config{}).Validate(); err != nil {
		t.Errorf("zero config: %v", err)
	}
	c := Config{}.withDefaults()
	if c.MaxTimeoutMs != 900000 || c.IDExpirationMs != 604800000 || c.MarkerTimeoutMs != 30000 || c.LegacyValues {
		t.Errorf("defaults: %+v", c)
	}
	bad := Config{MaxTimeoutMs: -1, IDExpirationMs: -1, MarkerTimeoutMs: -1, MarkerBackoff: lifecycle.Backoff{Initial: 10 * time.Millisecond, Max: 5 * time.Millisecond}}
	err := bad.Validate()
	for _, want := range []string{"transaction.max.timeout.ms", "transactional.id.expiration.ms", "marker timeout", "marker backoff"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Validate: %v, want it to name %s", err, want)
		}
	}
	defer func() {
		if recover() == nil {
			t.Error("NewTable with a bad config did not panic")
		}
	}()
	NewTable(bad, 0)
}

// The default retry schedule, in the table's milliseconds.
func TestBackoff(t *testing.T) {
	b := Config{}.withDefaults().MarkerBackoff
	var got []int64
	for n := 1; n <= 8; n++ {
		got = append(got, retryIn(b, n))
	}
	want := []int64{100, 200, 400, 800, 1600, 3200, 5000, 5000}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("delays %v, want %v", got, want)
		}
	}
}

// The stock of producer ids is topped up when a tenth of the last block is
// left (Kafka's RPCProducerIdManager prefetches at 90% used), one ask at a
// time.
func TestProducerIDPrefetch(t *testing.T) {
	tb := NewTable(Config{}, 0)
	if rd := tb.Load(0, 1, nil); !rd.FetchProducerIDs {
		t.Fatal("an empty stock is not asked for at the load")
	}
	tb.SupplyProducerIDs(0, 1000, 100)
	asked := -1
	for i := range 100 {
		rd := tb.InitProducerID(0, InitRequest{TxnID: string(rune('a'+i%26)) + string(rune('a'+i/26)), TimeoutMs: 1000, ProducerID: -1, ProducerEpoch: -1, Version: 4}, i)
		if rd.FetchProducerIDs {
			if asked >= 0 {
				t.Fatalf("asked twice: at %d and %d", asked, i)
			}
			asked = i
		}
	}
	if asked != 89 { // after the 90th id, 10 are left
		t.Errorf("asked after %d ids, want 89", asked)
	}
	rd := tb.InitProducerID(0, InitRequest{TxnID: "last", TimeoutMs: 1000, ProducerID: -1, ProducerEpoch: -1, Version: 4}, "last")
	if len(rd.Answers) != 1 || rd.Answers[0].Code != kerr.CoordinatorLoadInProgress.Code {
		t.Errorf("with no ids: %+v, want COORDINATOR_LOAD_IN_PROGRESS", rd.Answers)
	}
	tb.SupplyProducerIDs(0, 5000, 10)
	if id, _ := tb.takeID(); id != 5000 {
		t.Errorf("next id %d, want 5000", id)
	}
}

func TestLoadRecordsErrors(t *testing.T) {
	tb := NewTable(Config{}, 0)
	if _, err := tb.LoadRecords(nil); err == nil {
		t.Error("LoadRecords while unloaded: no error")
	}
	tb.BeginLoad(1)
	good := meta{pid: 1, prevPid: 1, nextPid: -1, epoch: 0, timeoutMs: 1000, state: Empty, startMs: -1}
	recs := []LogRecord{
		{Key: encodeKey("a"), Value: good.value(1).AppendTo(nil)},
		{Key: []byte{0, 5, 0, 0}, Value: []byte("unknown key version: skipped")},
		{Key: encodeKey("b"), Value: []byte{0, 1}},
		{Key: encodeKey("c"), Value: good.value(0).AppendTo(nil)},
	}
	n, err := tb.LoadRecords(recs)
	if n != 2 || !errors.Is(err, ErrBadRecord) || !strings.Contains(err.Error(), "b:") {
		t.Fatalf("LoadRecords: %d, %v; want 2 and a bad record for b", n, err)
	}
	if n, err := tb.LoadRecords(recs[n+1:]); n != 1 || err != nil {
		t.Fatalf("LoadRecords after the bad one: %d, %v", n, err)
	}
	tb.FinishLoad(0)
	if tb.Len() != 2 || !tb.Active() {
		t.Errorf("after the load: %d ids, active %v", tb.Len(), tb.Active())
	}
	if s, ok := tb.Get("c"); !ok || s.State != Empty || s.PreviousProducerID != -1 {
		t.Errorf("c: %+v %v", s, ok)
	}
}

func TestMetrics(t *testing.T) {
	tb := NewTable(Config{}, 0)
	tb.Load(0, 1, nil)
	tb.SupplyProducerIDs(0, 1, 10)
	rd := tb.InitProducerID(0, InitRequest{TxnID: "x", TimeoutMs: 1000, ProducerID: -1, ProducerEpoch: -1, Version: 4}, 1)
	tb.RecordWritten(0, rd.Appends[0].Token)
	rd = tb.AddPartitions(0, AddPartitionsRequest{TxnID: "x", ProducerID: 1, ProducerEpoch: 0, Partitions: []TopicPartition{{"a", 0}, {"a", 1}}, Version: 3}, 2)
	tb.RecordWritten(0, rd.Appends[0].Token)
	rd = tb.EndTxn(0, EndRequest{TxnID: "x", ProducerID: 1, ProducerEpoch: 0, Commit: true, Version: 3}, 3)
	if m := tb.Metrics(); m.IDs[Ongoing] != 1 || m.WritesInFlight != 1 || m.ProducerIDsLeft != 9 {
		t.Errorf("while ending: %+v", m)
	}
	tb.RecordWritten(0, rd.Appends[0].Token)
	if m := tb.Metrics(); m.IDs[PrepareCommit] != 1 || m.MarkersPending != 2 || m.WritesInFlight != 0 {
		t.Errorf("while committing: %+v", m)
	}
}
