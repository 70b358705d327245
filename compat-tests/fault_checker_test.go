package compattests

// The history checker of the fault tests: given every record the producer
// attempted with its outcome, and everything read back from the healed
// cluster, it counts what was lost, duplicated, reordered or unexpected.
// It also checks a consumer group's consumption and commits against the
// final log. Pure functions over plain data, unit-tested below on
// synthetic histories.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// faultOutcome is what became of a produced record.
type faultOutcome int

const (
	faultPending    faultOutcome = iota // no answer (yet): treated as indefinite
	faultAcked                          // acknowledged, at Partition/Offset
	faultDefinite                       // failed, and certainly not appended
	faultIndefinite                     // failed, but may have been appended
)

func (o faultOutcome) String() string {
	return [...]string{"pending", "acked", "failed-definite", "failed-indefinite"}[o]
}

// faultAttempt is one record the producer tried to write. Its value is
// strconv.FormatInt(Seq); Seq is also its index in the history.
type faultAttempt struct {
	Seq       int64
	Key       string
	Sent      time.Time // when it was handed to the producer
	Outcome   faultOutcome
	Done      time.Time // when the outcome arrived
	Partition int32     // acked: where it was written
	Offset    int64
	Err       string // failed: the producer's error
}

// faultRecord is one record read back: where it was, its key and value.
type faultRecord struct {
	Partition int32
	Offset    int64
	Key       string
	Value     string
}

func (r faultRecord) String() string {
	return fmt.Sprintf("p%d@%d %s=%s", r.Partition, r.Offset, r.Key, r.Value)
}

func faultRecordOf(r *kgo.Record) faultRecord {
	return faultRecord{Partition: r.Partition, Offset: r.Offset, Key: string(r.Key), Value: string(r.Value)}
}

// classifyProduceErr decides whether a record the producer failed with err
// might still have been appended. Definite: the broker refused it before
// appending (NOT_ENOUGH_REPLICAS, INVALID_*, authorization and other
// non-retriable request errors). Everything else — timeouts (request or
// delivery), NOT_ENOUGH_REPLICAS_AFTER_APPEND, NOT_LEADER_OR_FOLLOWER,
// connection errors, a closed client — is indefinite.
func classifyProduceErr(err error) faultOutcome {
	if err == nil {
		return faultAcked
	}
	// The client gave up (delivery timeout, retries, closed, cancelled):
	// an attempt before may have landed whatever the last error was.
	if errors.Is(err, kgo.ErrRecordTimeout) || errors.Is(err, kgo.ErrRecordRetries) ||
		errors.Is(err, kgo.ErrClientClosed) || errors.Is(err, context.DeadlineExceeded) ||
		errors.Is(err, context.Canceled) {
		return faultIndefinite
	}
	var ke *kerr.Error
	if errors.As(err, &ke) {
		switch {
		case errors.Is(err, kerr.NotEnoughReplicasAfterAppend), errors.Is(err, kerr.RequestTimedOut),
			errors.Is(err, kerr.NotLeaderForPartition), errors.Is(err, kerr.LeaderNotAvailable),
			errors.Is(err, kerr.NetworkException), errors.Is(err, kerr.UnknownServerError),
			errors.Is(err, kerr.OutOfOrderSequenceNumber), errors.Is(err, kerr.UnknownProducerID),
			errors.Is(err, kerr.KafkaStorageError):
			return faultIndefinite
		case errors.Is(err, kerr.NotEnoughReplicas), strings.HasPrefix(ke.Message, "INVALID_"),
			strings.Contains(ke.Message, "AUTHORIZATION"), strings.Contains(ke.Message, "SASL"),
			errors.Is(err, kerr.MessageTooLarge), errors.Is(err, kerr.RecordListTooLarge),
			errors.Is(err, kerr.CorruptMessage), errors.Is(err, kerr.UnknownTopicOrPartition),
			errors.Is(err, kerr.UnsupportedVersion), errors.Is(err, kerr.UnsupportedForMessageFormat):
			return faultDefinite
		}
		return faultIndefinite
	}
	// Connection errors (reset, refused, EOF) and anything unknown: the
	// request may have reached the broker.
	return faultIndefinite
}

// faultReport is the checker's result for one run.
type faultReport struct {
	Attempted  int
	Acked      int
	Definite   int // failed definitely
	Read       int // records read back (with duplicates)
	Lost       int // acknowledged, never read
	FalseAcks  int // of Lost: acknowledged at an offset holding a record the client failed earlier
	Dup        int // extra copies of values read more than once
	Reordered  int // per key or per partition order violations
	Unexpected int // read but never attempted, failed definitely, or with the wrong key
	Misplaced  int // acknowledged and read, but never at the acknowledged partition/offset

	IndefLanded    int // failed indefinitely (or pending) and read back
	IndefNotLanded int // failed indefinitely (or pending) and not read

	Problems []string // one line per problem, first ones kept
	more     int      // problems left out of Problems
}

const faultMaxProblems = 40

func (r *faultReport) problem(format string, args ...any) {
	if len(r.Problems) < faultMaxProblems {
		r.Problems = append(r.Problems, fmt.Sprintf(format, args...))
	} else {
		r.more++
	}
}

// OK is the pass criterion: nothing lost, duplicated, reordered,
// unexpected or misplaced.
func (r faultReport) OK() bool {
	return r.Lost == 0 && r.Dup == 0 && r.Reordered == 0 && r.Unexpected == 0 && r.Misplaced == 0
}

func (r faultReport) Figures() string {
	return fmt.Sprintf("attempted=%d acked=%d read=%d lost=%d (client-false-acks=%d) dup=%d reordered=%d unexpected=%d misplaced=%d indefinite(landed/not)=%d/%d definite-failed=%d",
		r.Attempted, r.Acked, r.Read, r.Lost, r.FalseAcks, r.Dup, r.Reordered, r.Unexpected, r.Misplaced, r.IndefLanded, r.IndefNotLanded, r.Definite)
}

func (r faultReport) Details() string {
	s := strings.Join(r.Problems, "\n")
	if r.more > 0 {
		s += fmt.Sprintf("\n... and %d more", r.more)
	}
	return s
}

// checkFaultHistory checks the records read back (in the order read; each
// partition's records in the order the consumer returned them) against the
// producer's history (history[i].Seq == i).
func checkFaultHistory(history []faultAttempt, reads []faultRecord) faultReport {
	var r faultReport
	r.Attempted = len(history)
	r.Read = len(reads)
	for _, a := range history {
		switch a.Outcome {
		case faultAcked:
			r.Acked++
		case faultDefinite:
			r.Definite++
		}
	}

	// Per partition: offsets strictly increasing in read order.
	lastOff := map[int32]int64{}
	for _, rec := range reads {
		if prev, ok := lastOff[rec.Partition]; ok && rec.Offset <= prev {
			r.Reordered++
			r.problem("REORDERED: partition %d read offset %d after offset %d", rec.Partition, rec.Offset, prev)
		}
		lastOff[rec.Partition] = rec.Offset
	}

	// Where each attempted value was read, and what each position holds.
	where := map[int64][]faultRecord{}
	type pos struct {
		p   int32
		off int64
	}
	at := map[pos]faultRecord{}
	for _, rec := range reads {
		at[pos{rec.Partition, rec.Offset}] = rec
	}
	maxAckedByKey := map[string]int64{} // highest acknowledged seq read so far, per key
	for _, rec := range reads {
		seq, err := strconv.ParseInt(rec.Value, 10, 64)
		if err != nil || seq < 0 || seq >= int64(len(history)) {
			r.Unexpected++
			r.problem("UNEXPECTED: %s was never attempted", rec)
			continue
		}
		a := history[seq]
		if a.Key != rec.Key {
			r.Unexpected++
			r.problem("UNEXPECTED: %s has key %q, but value %d was produced with key %q", rec, rec.Key, seq, a.Key)
			continue
		}
		where[seq] = append(where[seq], rec)
		if len(where[seq]) > 1 {
			r.Dup++
			r.problem("DUPLICATED: value %d (%s, sent %s) read again at %s, first at %s",
				seq, a.Outcome, a.Sent.Format("15:04:05.000"), rec, where[seq][0])
			continue
		}
		if a.Outcome == faultDefinite {
			r.Unexpected++
			r.problem("UNEXPECTED: %s failed definitely (%s) but was read", rec, a.Err)
		}
		if a.Outcome == faultAcked {
			if max, ok := maxAckedByKey[rec.Key]; ok && seq < max {
				r.Reordered++
				r.problem("REORDERED: key %s: acknowledged value %d read at %s after acknowledged value %d", rec.Key, seq, rec, max)
			} else {
				maxAckedByKey[rec.Key] = seq
			}
		}
	}

	for _, a := range history {
		got := where[a.Seq]
		switch a.Outcome {
		case faultAcked:
			if len(got) == 0 {
				r.Lost++
				there := "nothing"
				if rec, ok := at[pos{a.Partition, a.Offset}]; ok {
					there = rec.String()
					// The client's false acknowledgement (see
					// faultDeliveryTimeout): the position holds a value
					// the producer sent earlier and then failed itself.
					if seq, err := strconv.ParseInt(rec.Value, 10, 64); err == nil && seq >= 0 && seq < a.Seq && seq < int64(len(history)) {
						if w := history[seq]; w.Outcome == faultIndefinite && !w.Done.After(a.Done) {
							r.FalseAcks++
							there += fmt.Sprintf(" (value %d, which the producer failed at %s with %q: the client reused its idempotent sequence numbers and the broker deduplicated the new batch onto it)",
								seq, w.Done.Format("15:04:05.000"), w.Err)
						}
					}
				}
				r.problem("LOST: value %d key %s acknowledged at p%d@%d (sent %s, acked %s) was not read back; that offset holds %s",
					a.Seq, a.Key, a.Partition, a.Offset, a.Sent.Format("15:04:05.000"), a.Done.Format("15:04:05.000"), there)
				continue
			}
			if !slices.ContainsFunc(got, func(rec faultRecord) bool { return rec.Partition == a.Partition && rec.Offset == a.Offset }) {
				r.Misplaced++
				r.problem("MISPLACED: value %d acknowledged at p%d@%d but read at %s", a.Seq, a.Partition, a.Offset, got[0])
			}
		case faultIndefinite, faultPending:
			if len(got) > 0 {
				r.IndefLanded++
			} else {
				r.IndefNotLanded++
			}
		}
	}
	return r
}

// faultGroupReport is the result of checking a consumer group.
type faultGroupReport struct {
	Consumed    int // records the members processed during the run (with repeats)
	Resumed     int // records the resuming member read
	Phantom     int // processed records the final log does not hold at that position
	CommitAhead int // partitions whose committed offset passes a record the members never processed
	Skipped     int // records at or after a committed offset the resuming member did not read
	Gap         int // acknowledged records the group never processed at all

	Problems []string
	more     int
}

func (r *faultGroupReport) problem(format string, args ...any) {
	if len(r.Problems) < faultMaxProblems {
		r.Problems = append(r.Problems, fmt.Sprintf(format, args...))
	} else {
		r.more++
	}
}

func (r faultGroupReport) OK() bool {
	return r.Phantom == 0 && r.CommitAhead == 0 && r.Skipped == 0 && r.Gap == 0
}

func (r faultGroupReport) Figures() string {
	return fmt.Sprintf("group: consumed=%d resumed=%d phantom=%d commit-ahead=%d skipped=%d gap=%d",
		r.Consumed, r.Resumed, r.Phantom, r.CommitAhead, r.Skipped, r.Gap)
}

func (r faultGroupReport) Details() string {
	s := strings.Join(r.Problems, "\n")
	if r.more > 0 {
		s += fmt.Sprintf("\n... and %d more", r.more)
	}
	return s
}

// checkFaultGroup checks a consumer group against the final log (every
// record of every partition, as read back): what its members processed
// during the run (consumed), the offsets committed after they left
// (committed; a partition without a commit resumes from the start, 0), and
// what a new member of the group then read until the end (resumed).
// ends holds each partition's end offset.
//
//   - every processed record must be in the final log at the same position
//     (a member read nothing that was later truncated);
//   - committed[p] <= the first offset of p no member processed (the group
//     did not commit past a record it never saw);
//   - the resuming member reads every record of p from committed[p] to the
//     end;
//   - so every acknowledged record was processed by someone in the group.
func checkFaultGroup(history []faultAttempt, final, consumed []faultRecord, committed map[int32]int64, resumed []faultRecord, ends map[int32]int64) faultGroupReport {
	var r faultGroupReport
	r.Consumed, r.Resumed = len(consumed), len(resumed)
	type pos struct {
		p   int32
		off int64
	}
	log := map[pos]faultRecord{}
	byPart := map[int32][]faultRecord{}
	for _, rec := range final {
		log[pos{rec.Partition, rec.Offset}] = rec
		byPart[rec.Partition] = append(byPart[rec.Partition], rec)
	}
	for p := range byPart {
		sort.Slice(byPart[p], func(i, j int) bool { return byPart[p][i].Offset < byPart[p][j].Offset })
	}
	processed := map[pos]bool{}
	for _, rec := range consumed {
		at := pos{rec.Partition, rec.Offset}
		processed[at] = true
		if fr, ok := log[at]; !ok || fr.Value != rec.Value || fr.Key != rec.Key {
			r.Phantom++
			if ok {
				r.problem("PHANTOM: a member processed %s, the final log has %s there", rec, fr)
			} else {
				r.problem("PHANTOM: a member processed %s, the final log has nothing there", rec)
			}
		}
	}
	resumedAt := map[pos]bool{}
	for _, rec := range resumed {
		at := pos{rec.Partition, rec.Offset}
		resumedAt[at] = true
		if fr, ok := log[at]; !ok || fr.Value != rec.Value {
			r.Phantom++
			r.problem("PHANTOM: the resuming member read %s, not in the final log", rec)
		}
	}
	parts := map[int32]bool{}
	for p := range ends {
		parts[p] = true
	}
	for p := range byPart {
		parts[p] = true
	}
	for _, p := range slices.Sorted(func(yield func(int32) bool) {
		for p := range parts {
			if !yield(p) {
				return
			}
		}
	}) {
		c := committed[p] // 0 (the start) without a commit
		firstUnread := int64(-1)
		for _, rec := range byPart[p] {
			if !processed[pos{p, rec.Offset}] {
				firstUnread = rec.Offset
				break
			}
		}
		switch {
		case firstUnread >= 0 && c > firstUnread:
			r.CommitAhead++
			r.problem("COMMIT AHEAD: partition %d committed %d, but no member processed offset %d", p, c, firstUnread)
		case firstUnread < 0 && c > ends[p]:
			r.CommitAhead++
			r.problem("COMMIT AHEAD: partition %d committed %d beyond its end %d", p, c, ends[p])
		}
		skipped := 0
		for _, rec := range byPart[p] {
			if rec.Offset >= c && !resumedAt[pos{p, rec.Offset}] {
				if skipped == 0 {
					r.problem("SKIPPED: resuming from committed offset %d of partition %d, the new member did not read %s", c, p, rec)
				}
				skipped++
			}
		}
		r.Skipped += skipped
	}
	seen := map[string]bool{}
	for _, rec := range consumed {
		seen[rec.Value] = true
	}
	for _, rec := range resumed {
		seen[rec.Value] = true
	}
	for _, a := range history {
		if a.Outcome == faultAcked && !seen[strconv.FormatInt(a.Seq, 10)] {
			if _, inLog := log[pos{a.Partition, a.Offset}]; !inLog {
				continue // lost from the log itself: checkFaultHistory reports it
			}
			r.Gap++
			r.problem("GAP: acknowledged value %d at p%d@%d was never processed by the group", a.Seq, a.Partition, a.Offset)
		}
	}
	return r
}

// ---- unit tests of the checker on synthetic histories ----

// synthHistory builds a history of n attempts, key k<seq%keys>, all acked
// at consecutive offsets of partition key%parts.
func synthHistory(n, keys, parts int) ([]faultAttempt, []faultRecord) {
	var h []faultAttempt
	var reads []faultRecord
	next := map[int32]int64{}
	for i := range n {
		k := i % keys
		p := int32(k % parts)
		a := faultAttempt{Seq: int64(i), Key: fmt.Sprintf("k%d", k), Outcome: faultAcked, Partition: p, Offset: next[p]}
		next[p]++
		h = append(h, a)
	}
	// Read partition by partition, in offset order.
	for p := range int32(parts) {
		for _, a := range h {
			if a.Partition == p {
				reads = append(reads, faultRecord{Partition: p, Offset: a.Offset, Key: a.Key, Value: strconv.FormatInt(a.Seq, 10)})
			}
		}
	}
	return h, reads
}

func TestFaultCheckerClean(t *testing.T) {
	h, reads := synthHistory(100, 8, 3)
	r := checkFaultHistory(h, reads)
	if !r.OK() || r.Acked != 100 || r.Read != 100 {
		t.Fatalf("clean history: %s\n%s", r.Figures(), r.Details())
	}
}

func TestFaultCheckerLost(t *testing.T) {
	h, reads := synthHistory(100, 8, 3)
	reads = slices.Delete(reads, 10, 12) // two records gone
	r := checkFaultHistory(h, reads)
	if r.Lost != 2 || r.Dup != 0 || r.Reordered != 0 || r.Unexpected != 0 || r.OK() {
		t.Fatalf("two lost: %s\n%s", r.Figures(), r.Details())
	}
	if !strings.Contains(r.Details(), "LOST") {
		t.Fatalf("details: %s", r.Details())
	}
}

func TestFaultCheckerDuplicated(t *testing.T) {
	h, reads := synthHistory(50, 4, 2)
	// Partition 0's last record written again at the next offset.
	var last faultRecord
	for _, rec := range reads {
		if rec.Partition == 0 {
			last = rec
		}
	}
	dup := last
	dup.Offset++
	i := slices.Index(reads, last)
	reads = slices.Insert(reads, i+1, dup)
	r := checkFaultHistory(h, reads)
	if r.Dup != 1 || r.Lost != 0 || r.Reordered != 0 || r.Misplaced != 0 || r.OK() {
		t.Fatalf("one duplicate: %s\n%s", r.Figures(), r.Details())
	}
}

func TestFaultCheckerReordered(t *testing.T) {
	h, reads := synthHistory(40, 2, 1) // one partition, keys k0 k1
	// Swap the values at offsets 2 and 4 (both key k0): each is read at
	// the other's offset.
	reads[2].Value, reads[4].Value = reads[4].Value, reads[2].Value
	r := checkFaultHistory(h, reads)
	if r.Reordered != 1 || r.Lost != 0 || r.Dup != 0 || r.Misplaced != 2 || r.OK() {
		t.Fatalf("swapped pair: %s\n%s", r.Figures(), r.Details())
	}
	// Offsets going backwards within a partition.
	h, reads = synthHistory(10, 2, 1)
	reads[3], reads[5] = reads[5], reads[3]
	r = checkFaultHistory(h, reads)
	if r.Reordered == 0 || r.OK() {
		t.Fatalf("offsets out of order: %s\n%s", r.Figures(), r.Details())
	}
	// Key order only matters between acknowledged values: an indefinite
	// value read out of order is fine.
	h, reads = synthHistory(40, 2, 1)
	reads[2].Value, reads[4].Value = reads[4].Value, reads[2].Value
	h[2].Outcome, h[2].Err = faultIndefinite, kgo.ErrRecordTimeout.Error()
	h[4].Outcome, h[4].Err = faultIndefinite, kgo.ErrRecordTimeout.Error()
	r = checkFaultHistory(h, reads)
	if !r.OK() || r.IndefLanded != 2 {
		t.Fatalf("indefinite values out of order: %s\n%s", r.Figures(), r.Details())
	}
}

func TestFaultCheckerUnexpected(t *testing.T) {
	h, reads := synthHistory(30, 3, 3)
	// Never attempted, garbage, wrong key, definitely failed but read.
	reads = append(reads,
		faultRecord{Partition: 0, Offset: 100, Key: "k0", Value: "999"},
		faultRecord{Partition: 0, Offset: 101, Key: "k0", Value: "x"})
	reads[1].Key = "k9"
	h[5].Outcome, h[5].Err = faultDefinite, kerr.NotEnoughReplicas.Error()
	r := checkFaultHistory(h, reads)
	// reads[1]'s value is then missing (lost: it was acked) and unexpected.
	if r.Unexpected != 4 || r.Lost != 1 || r.Dup != 0 || r.OK() {
		t.Fatalf("unexpected reads: %s\n%s", r.Figures(), r.Details())
	}
}

func TestFaultCheckerIndefinite(t *testing.T) {
	h, reads := synthHistory(20, 2, 1)
	// 3 indefinite of which 2 landed; 1 pending that did not land and
	// is missing from the log; 1 definite that did not land.
	for _, i := range []int{4, 7, 19} {
		h[i].Outcome, h[i].Err = faultIndefinite, kerr.NotEnoughReplicasAfterAppend.Error()
	}
	h[18].Outcome = faultPending
	h[17].Outcome, h[17].Err = faultDefinite, kerr.NotEnoughReplicas.Error()
	reads = slices.DeleteFunc(reads, func(rec faultRecord) bool {
		return rec.Value == "19" || rec.Value == "18" || rec.Value == "17"
	})
	r := checkFaultHistory(h, reads)
	if !r.OK() || r.IndefLanded != 2 || r.IndefNotLanded != 2 || r.Definite != 1 || r.Acked != 15 {
		t.Fatalf("indefinite outcomes: %s\n%s", r.Figures(), r.Details())
	}
}

// The pattern of franz-go's sequence reuse (faultDeliveryTimeout): value 5
// failed with a delivery timeout but was written at offset 5; value 7 was
// then acknowledged at offset 5 and written nowhere.
func TestFaultCheckerFalseAck(t *testing.T) {
	h, reads := synthHistory(10, 1, 1)
	base := time.Unix(1000, 0)
	for i := range h {
		h[i].Sent, h[i].Done = base.Add(time.Duration(i)*time.Second), base.Add(time.Duration(i)*time.Second+time.Millisecond)
	}
	h[5].Outcome, h[5].Err = faultIndefinite, kgo.ErrRecordTimeout.Error()
	h[7].Offset = 5
	reads = slices.DeleteFunc(reads, func(rec faultRecord) bool { return rec.Value == "7" })
	r := checkFaultHistory(h, reads)
	if r.Lost != 1 || r.FalseAcks != 1 || r.OK() || !strings.Contains(r.Details(), "deduplicated") {
		t.Fatalf("false ack: %s\n%s", r.Figures(), r.Details())
	}
	// A plain loss is not one.
	h, reads = synthHistory(10, 1, 1)
	reads = slices.Delete(reads, 7, 8)
	if r := checkFaultHistory(h, reads); r.Lost != 1 || r.FalseAcks != 0 {
		t.Fatalf("plain loss: %s\n%s", r.Figures(), r.Details())
	}
}

func TestFaultCheckerMisplaced(t *testing.T) {
	h, reads := synthHistory(10, 1, 1)
	h[3].Offset = 7 // the ack said 7, the record is at 3
	r := checkFaultHistory(h, reads)
	if r.Misplaced != 1 || r.OK() {
		t.Fatalf("misplaced: %s\n%s", r.Figures(), r.Details())
	}
}

func TestFaultClassify(t *testing.T) {
	for _, c := range []struct {
		err  error
		want faultOutcome
	}{
		{nil, faultAcked},
		{kerr.NotEnoughReplicas, faultDefinite},
		{fmt.Errorf("wrapped: %w", kerr.NotEnoughReplicas), faultDefinite},
		{kerr.InvalidRecord, faultDefinite},
		{kerr.InvalidTopicException, faultDefinite},
		{kerr.TopicAuthorizationFailed, faultDefinite},
		{kerr.ClusterAuthorizationFailed, faultDefinite},
		{kerr.NotEnoughReplicasAfterAppend, faultIndefinite},
		{kerr.RequestTimedOut, faultIndefinite},
		{kerr.NotLeaderForPartition, faultIndefinite},
		{kgo.ErrRecordTimeout, faultIndefinite},
		{fmt.Errorf("%w, last err: %w", kgo.ErrRecordTimeout, kerr.NotEnoughReplicas), faultIndefinite},
		{kgo.ErrRecordRetries, faultIndefinite},
		{kgo.ErrClientClosed, faultIndefinite},
		{syscall.ECONNRESET, faultIndefinite},
		{io.EOF, faultIndefinite},
		{&net.OpError{Op: "dial", Err: syscall.ECONNREFUSED}, faultIndefinite},
		{errors.New("something else"), faultIndefinite},
	} {
		if got := classifyProduceErr(c.err); got != c.want {
			t.Errorf("classify(%v) = %s, want %s", c.err, got, c.want)
		}
	}
}

func TestFaultCheckerGroup(t *testing.T) {
	h, final := synthHistory(60, 6, 2)
	ends := map[int32]int64{0: 30, 1: 30}
	// Members processed partition 0 up to offset 19 and partition 1 up
	// to 9, committed 15 and 10; the new member reads from there.
	var consumed, resumed []faultRecord
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
	r := checkFaultGroup(h, final, consumed, committed, resumed, ends)
	if !r.OK() {
		t.Fatalf("clean group: %s\n%s", r.Figures(), r.Details())
	}

	// Committed past what was processed: partition 1 committed 12 with
	// offsets 10 and 11 never processed; the new member starts at 12.
	committed2 := map[int32]int64{0: 15, 1: 12}
	resumed2 := slices.DeleteFunc(slices.Clone(resumed), func(rec faultRecord) bool { return rec.Partition == 1 && rec.Offset < 12 })
	r = checkFaultGroup(h, final, consumed, committed2, resumed2, ends)
	if r.CommitAhead != 1 || r.Gap != 2 || r.Skipped != 0 || r.OK() {
		t.Fatalf("commit ahead: %s\n%s", r.Figures(), r.Details())
	}

	// The new member skips a record after the committed offset.
	resumed3 := slices.DeleteFunc(slices.Clone(resumed), func(rec faultRecord) bool { return rec.Partition == 0 && rec.Offset == 25 })
	r = checkFaultGroup(h, final, consumed, committed, resumed3, ends)
	if r.Skipped != 1 || r.Gap != 1 || r.OK() {
		t.Fatalf("skipped: %s\n%s", r.Figures(), r.Details())
	}

	// A member processed a record the final log does not hold (it was
	// read beyond the high watermark and truncated later).
	consumed4 := append(slices.Clone(consumed), faultRecord{Partition: 0, Offset: 3, Key: "k0", Value: "12345"})
	r = checkFaultGroup(h, final, consumed4, committed, resumed, ends)
	if r.Phantom != 1 || r.OK() {
		t.Fatalf("phantom: %s\n%s", r.Figures(), r.Details())
	}

	// No commit at all: resume from the start.
	r = checkFaultGroup(h, final, nil, map[int32]int64{}, final, ends)
	if !r.OK() {
		t.Fatalf("no commits, full re-read: %s\n%s", r.Figures(), r.Details())
	}
}
