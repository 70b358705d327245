package history

import (
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// ---- unit tests of the checker on synthetic histories ----

// synthHistory builds a history of n attempts, key k<seq%keys>, all acked
// at consecutive offsets of partition key%parts.
func synthHistory(n, keys, parts int) ([]Attempt, []Record) {
	var h []Attempt
	var reads []Record
	next := map[int32]int64{}
	for i := range n {
		k := i % keys
		p := int32(k % parts)
		a := Attempt{Seq: int64(i), Key: fmt.Sprintf("k%d", k), Outcome: Acked, Partition: p, Offset: next[p]}
		next[p]++
		h = append(h, a)
	}
	// Read partition by partition, in offset order.
	for p := range int32(parts) {
		for _, a := range h {
			if a.Partition == p {
				reads = append(reads, Record{Partition: p, Offset: a.Offset, Key: a.Key, Value: strconv.FormatInt(a.Seq, 10)})
			}
		}
	}
	return h, reads
}

func TestCheckerClean(t *testing.T) {
	h, reads := synthHistory(100, 8, 3)
	r := Check(h, reads)
	if !r.OK() || r.Acked != 100 || r.Read != 100 {
		t.Fatalf("clean history: %s\n%s", r.Figures(), r.Details())
	}
}

func TestCheckerLost(t *testing.T) {
	h, reads := synthHistory(100, 8, 3)
	reads = slices.Delete(reads, 10, 12) // two records gone
	r := Check(h, reads)
	if r.Lost != 2 || r.Dup != 0 || r.Reordered != 0 || r.Unexpected != 0 || r.OK() {
		t.Fatalf("two lost: %s\n%s", r.Figures(), r.Details())
	}
	if !strings.Contains(r.Details(), "LOST") {
		t.Fatalf("details: %s", r.Details())
	}
}

func TestCheckerDuplicated(t *testing.T) {
	h, reads := synthHistory(50, 4, 2)
	// Partition 0's last record written again at the next offset.
	var last Record
	for _, rec := range reads {
		if rec.Partition == 0 {
			last = rec
		}
	}
	dup := last
	dup.Offset++
	i := slices.Index(reads, last)
	reads = slices.Insert(reads, i+1, dup)
	r := Check(h, reads)
	if r.Dup != 1 || r.Lost != 0 || r.Reordered != 0 || r.Misplaced != 0 || r.OK() {
		t.Fatalf("one duplicate: %s\n%s", r.Figures(), r.Details())
	}
}

func TestCheckerReordered(t *testing.T) {
	h, reads := synthHistory(40, 2, 1) // one partition, keys k0 k1
	// Swap the values at offsets 2 and 4 (both key k0): each is read at
	// the other's offset.
	reads[2].Value, reads[4].Value = reads[4].Value, reads[2].Value
	r := Check(h, reads)
	if r.Reordered != 1 || r.Lost != 0 || r.Dup != 0 || r.Misplaced != 2 || r.OK() {
		t.Fatalf("swapped pair: %s\n%s", r.Figures(), r.Details())
	}
	// Offsets going backwards within a partition.
	h, reads = synthHistory(10, 2, 1)
	reads[3], reads[5] = reads[5], reads[3]
	r = Check(h, reads)
	if r.Reordered == 0 || r.OK() {
		t.Fatalf("offsets out of order: %s\n%s", r.Figures(), r.Details())
	}
	// Key order only matters between acknowledged values: an indefinite
	// value read out of order is fine.
	h, reads = synthHistory(40, 2, 1)
	reads[2].Value, reads[4].Value = reads[4].Value, reads[2].Value
	h[2].Outcome, h[2].Err = Indefinite, kgo.ErrRecordTimeout.Error()
	h[4].Outcome, h[4].Err = Indefinite, kgo.ErrRecordTimeout.Error()
	r = Check(h, reads)
	if !r.OK() || r.IndefLanded != 2 {
		t.Fatalf("indefinite values out of order: %s\n%s", r.Figures(), r.Details())
	}
}

func TestCheckerUnexpected(t *testing.T) {
	h, reads := synthHistory(30, 3, 3)
	// Never attempted, garbage, wrong key, definitely failed but read.
	reads = append(reads,
		Record{Partition: 0, Offset: 100, Key: "k0", Value: "999"},
		Record{Partition: 0, Offset: 101, Key: "k0", Value: "x"})
	reads[1].Key = "k9"
	h[5].Outcome, h[5].Err = Definite, kerr.NotEnoughReplicas.Error()
	r := Check(h, reads)
	// reads[1]'s value is then missing (lost: it was acked) and unexpected.
	if r.Unexpected != 4 || r.Lost != 1 || r.Dup != 0 || r.OK() {
		t.Fatalf("unexpected reads: %s\n%s", r.Figures(), r.Details())
	}
}

func TestCheckerIndefinite(t *testing.T) {
	h, reads := synthHistory(20, 2, 1)
	// 3 indefinite of which 2 landed; 1 pending that did not land and
	// is missing from the log; 1 definite that did not land.
	for _, i := range []int{4, 7, 19} {
		h[i].Outcome, h[i].Err = Indefinite, kerr.NotEnoughReplicasAfterAppend.Error()
	}
	h[18].Outcome = Pending
	h[17].Outcome, h[17].Err = Definite, kerr.NotEnoughReplicas.Error()
	reads = slices.DeleteFunc(reads, func(rec Record) bool {
		return rec.Value == "19" || rec.Value == "18" || rec.Value == "17"
	})
	r := Check(h, reads)
	if !r.OK() || r.IndefLanded != 2 || r.IndefNotLanded != 2 || r.Definite != 1 || r.Acked != 15 {
		t.Fatalf("indefinite outcomes: %s\n%s", r.Figures(), r.Details())
	}
}

// The pattern of franz-go's sequence reuse (compat-tests faultDeliveryTimeout): value 5
// failed with a delivery timeout but was written at offset 5; value 7 was
// then acknowledged at offset 5 and written nowhere.
func TestCheckerFalseAck(t *testing.T) {
	h, reads := synthHistory(10, 1, 1)
	base := time.Unix(1000, 0)
	for i := range h {
		h[i].Sent, h[i].Done = base.Add(time.Duration(i)*time.Second), base.Add(time.Duration(i)*time.Second+time.Millisecond)
	}
	h[5].Outcome, h[5].Err = Indefinite, kgo.ErrRecordTimeout.Error()
	h[7].Offset = 5
	reads = slices.DeleteFunc(reads, func(rec Record) bool { return rec.Value == "7" })
	r := Check(h, reads)
	if r.Lost != 1 || r.FalseAcks != 1 || r.OK() || !strings.Contains(r.Details(), "deduplicated") {
		t.Fatalf("false ack: %s\n%s", r.Figures(), r.Details())
	}
	// A plain loss is not one.
	h, reads = synthHistory(10, 1, 1)
	reads = slices.Delete(reads, 7, 8)
	if r := Check(h, reads); r.Lost != 1 || r.FalseAcks != 0 {
		t.Fatalf("plain loss: %s\n%s", r.Figures(), r.Details())
	}
}

func TestCheckerMisplaced(t *testing.T) {
	h, reads := synthHistory(10, 1, 1)
	h[3].Offset = 7 // the ack said 7, the record is at 3
	r := Check(h, reads)
	if r.Misplaced != 1 || r.OK() {
		t.Fatalf("misplaced: %s\n%s", r.Figures(), r.Details())
	}
}

func TestClassify(t *testing.T) {
	for _, c := range []struct {
		err  error
		want Outcome
	}{
		{nil, Acked},
		{kerr.NotEnoughReplicas, Definite},
		{fmt.Errorf("wrapped: %w", kerr.NotEnoughReplicas), Definite},
		{kerr.InvalidRecord, Definite},
		{kerr.InvalidTopicException, Definite},
		{kerr.TopicAuthorizationFailed, Definite},
		{kerr.ClusterAuthorizationFailed, Definite},
		{kerr.NotEnoughReplicasAfterAppend, Indefinite},
		{kerr.RequestTimedOut, Indefinite},
		{kerr.NotLeaderForPartition, Indefinite},
		{kgo.ErrRecordTimeout, Indefinite},
		{fmt.Errorf("%w, last err: %w", kgo.ErrRecordTimeout, kerr.NotEnoughReplicas), Indefinite},
		{kgo.ErrRecordRetries, Indefinite},
		{kgo.ErrClientClosed, Indefinite},
		{syscall.ECONNRESET, Indefinite},
		{io.EOF, Indefinite},
		{&net.OpError{Op: "dial", Err: syscall.ECONNREFUSED}, Indefinite},
		{errors.New("something else"), Indefinite},
	} {
		if got := ClassifyProduceErr(c.err); got != c.want {
			t.Errorf("classify(%v) = %s, want %s", c.err, got, c.want)
		}
	}
}

func TestCheckerGroup(t *testing.T) {
	h, final := synthHistory(60, 6, 2)
	ends := map[int32]int64{0: 30, 1: 30}
	// Members processed partition 0 up to offset 19 and partition 1 up
	// to 9, committed 15 and 10; the new member reads from there.
	var consumed, resumed []Record
	for _, rec := range final {
		if (rec.Partition == 0 && rec.Offset < 20) || (rec.Partition == 1 && rec.Offset < 10) {
			consumed = append(consumed, rec)
		}
	}
	committed := map[int32]int64{0: 15, 1: 10}
	for _, rec := range final {
		if rec.Offset >= committed[rec.Partition] {
			resumed = append(resumed, rec)
		}
	}
	r := CheckGroup(h, final, consumed, committed, resumed, ends)
	if !r.OK() {
		t.Fatalf("clean group: %s\n%s", r.Figures(), r.Details())
	}

	// Committed past what was processed: partition 1 committed 12 with
	// offsets 10 and 11 never processed; the new member starts at 12.
	committed2 := map[int32]int64{0: 15, 1: 12}
	resumed2 := slices.DeleteFunc(slices.Clone(resumed), func(rec Record) bool { return rec.Partition == 1 && rec.Offset < 12 })
	r = CheckGroup(h, final, consumed, committed2, resumed2, ends)
	if r.CommitAhead != 1 || r.Gap != 2 || r.Skipped != 0 || r.OK() {
		t.Fatalf("commit ahead: %s\n%s", r.Figures(), r.Details())
	}

	// The new member skips a record after the committed offset.
	resumed3 := slices.DeleteFunc(slices.Clone(resumed), func(rec Record) bool { return rec.Partition == 0 && rec.Offset == 25 })
	r = CheckGroup(h, final, consumed, committed, resumed3, ends)
	if r.Skipped != 1 || r.Gap != 1 || r.OK() {
		t.Fatalf("skipped: %s\n%s", r.Figures(), r.Details())
	}

	// A member processed a record the final log does not hold (it was
	// read beyond the high watermark and truncated later).
	consumed4 := append(slices.Clone(consumed), Record{Partition: 0, Offset: 3, Key: "k0", Value: "12345"})
	r = CheckGroup(h, final, consumed4, committed, resumed, ends)
	if r.Phantom != 1 || r.OK() {
		t.Fatalf("phantom: %s\n%s", r.Figures(), r.Details())
	}

	// No commit at all: resume from the start.
	r = CheckGroup(h, final, nil, map[int32]int64{}, final, ends)
	if !r.OK() {
		t.Fatalf("no commits, full re-read: %s\n%s", r.Figures(), r.Details())
	}
}
