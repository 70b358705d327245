// Package history is the checker of a produce/consume history, shared by
// the fault tests (compat-tests) and `fjord verify`, so that both judge a
// cluster by one set of rules.
//
// The history checker of the fault tests: given every record the producer
// attempted with its outcome, and everything read back from the healed
// cluster, it counts what was lost, duplicated, reordered or unexpected.
// It also checks a consumer group's consumption and commits against the
// final log. Pure functions over plain data, unit-tested on
// synthetic histories.
package history

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Outcome is what became of a produced record.
type Outcome int

const (
	Pending    Outcome = iota // no answer (yet): treated as indefinite
	Acked                     // acknowledged, at Partition/Offset
	Definite                  // failed, and certainly not appended
	Indefinite                // failed, but may have been appended
)

func (o Outcome) String() string {
	return [...]string{"pending", "acked", "failed-definite", "failed-indefinite"}[o]
}

// Attempt is one record the producer tried to write. Its value is
// strconv.FormatInt(Seq); Seq is also its index in the history.
type Attempt struct {
	Seq       int64
	Key       string
	Sent      time.Time // when it was handed to the producer
	Outcome   Outcome
	Done      time.Time // when the outcome arrived
	Partition int32     // acked: where it was written
	Offset    int64
	Err       string // failed: the producer's error
}

// Record is one record read back: where it was, its key and value.
type Record struct {
	Partition int32
	Offset    int64
	Key       string
	Value     string
}

func (r Record) String() string {
	return fmt.Sprintf("p%d@%d %s=%s", r.Partition, r.Offset, r.Key, r.Value)
}

func RecordOf(r *kgo.Record) Record {
	return Record{Partition: r.Partition, Offset: r.Offset, Key: string(r.Key), Value: string(r.Value)}
}

// ClassifyProduceErr decides whether a record the producer failed with err
// might still have been appended. Definite: the broker refused it before
// appending (NOT_ENOUGH_REPLICAS, INVALID_*, authorization and other
// non-retriable request errors). Everything else — timeouts (request or
// delivery), NOT_ENOUGH_REPLICAS_AFTER_APPEND, NOT_LEADER_OR_FOLLOWER,
// connection errors, a closed client — is indefinite.
func ClassifyProduceErr(err error) Outcome {
	if err == nil {
		return Acked
	}
	// The client gave up (delivery timeout, retries, closed, cancelled):
	// an attempt before may have landed whatever the last error was.
	if errors.Is(err, kgo.ErrRecordTimeout) || errors.Is(err, kgo.ErrRecordRetries) ||
		errors.Is(err, kgo.ErrClientClosed) || errors.Is(err, context.DeadlineExceeded) ||
		errors.Is(err, context.Canceled) {
		return Indefinite
	}
	var ke *kerr.Error
	if errors.As(err, &ke) {
		switch {
		case errors.Is(err, kerr.NotEnoughReplicasAfterAppend), errors.Is(err, kerr.RequestTimedOut),
			errors.Is(err, kerr.NotLeaderForPartition), errors.Is(err, kerr.LeaderNotAvailable),
			errors.Is(err, kerr.NetworkException), errors.Is(err, kerr.UnknownServerError),
			errors.Is(err, kerr.OutOfOrderSequenceNumber), errors.Is(err, kerr.UnknownProducerID),
			errors.Is(err, kerr.KafkaStorageError):
			return Indefinite
		case errors.Is(err, kerr.NotEnoughReplicas), strings.HasPrefix(ke.Message, "INVALID_"),
			strings.Contains(ke.Message, "AUTHORIZATION"), strings.Contains(ke.Message, "SASL"),
			errors.Is(err, kerr.MessageTooLarge), errors.Is(err, kerr.RecordListTooLarge),
			errors.Is(err, kerr.CorruptMessage), errors.Is(err, kerr.UnknownTopicOrPartition),
			errors.Is(err, kerr.UnsupportedVersion), errors.Is(err, kerr.UnsupportedForMessageFormat):
			return Definite
		}
		return Indefinite
	}
	// Connection errors (reset, refused, EOF) and anything unknown: the
	// request may have reached the broker.
	return Indefinite
}

// Report is the checker's result for one run.
type Report struct {
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

const MaxProblems = 40

func (r *Report) problem(format string, args ...any) {
	if len(r.Problems) < MaxProblems {
		r.Problems = append(r.Problems, fmt.Sprintf(format, args...))
	} else {
		r.more++
	}
}

// OK is the pass criterion: nothing lost, duplicated, reordered,
// unexpected or misplaced.
func (r Report) OK() bool {
	return r.Lost == 0 && r.Dup == 0 && r.Reordered == 0 && r.Unexpected == 0 && r.Misplaced == 0
}

func (r Report) Figures() string {
	return fmt.Sprintf("attempted=%d acked=%d read=%d lost=%d (client-false-acks=%d) dup=%d reordered=%d unexpected=%d misplaced=%d indefinite(landed/not)=%d/%d definite-failed=%d",
		r.Attempted, r.Acked, r.Read, r.Lost, r.FalseAcks, r.Dup, r.Reordered, r.Unexpected, r.Misplaced, r.IndefLanded, r.IndefNotLanded, r.Definite)
}

func (r Report) Details() string {
	s := strings.Join(r.Problems, "\n")
	if r.more > 0 {
		s += fmt.Sprintf("\n... and %d more", r.more)
	}
	return s
}

// Check checks the records read back (in the order read; each
// partition's records in the order the consumer returned them) against the
// producer's history (history[i].Seq == i).
func Check(history []Attempt, reads []Record) Report {
	var r Report
	r.Attempted = len(history)
	r.Read = len(reads)
	for _, a := range history {
		switch a.Outcome {
		case Acked:
			r.Acked++
		case Definite:
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
	where := map[int64][]Record{}
	type pos struct {
		p   int32
		off int64
	}
	at := map[pos]Record{}
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
		if a.Outcome == Definite {
			r.Unexpected++
			r.problem("UNEXPECTED: %s failed definitely (%s) but was read", rec, a.Err)
		}
		if a.Outcome == Acked {
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
		case Acked:
			if len(got) == 0 {
				r.Lost++
				there := "nothing"
				if rec, ok := at[pos{a.Partition, a.Offset}]; ok {
					there = rec.String()
					// The client's false acknowledgement (see
					// compat-tests faultDeliveryTimeout): the position holds a value
					// the producer sent earlier and then failed itself.
					if seq, err := strconv.ParseInt(rec.Value, 10, 64); err == nil && seq >= 0 && seq < a.Seq && seq < int64(len(history)) {
						if w := history[seq]; w.Outcome == Indefinite && !w.Done.After(a.Done) {
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
			if !slices.ContainsFunc(got, func(rec Record) bool { return rec.Partition == a.Partition && rec.Offset == a.Offset }) {
				r.Misplaced++
				r.problem("MISPLACED: value %d acknowledged at p%d@%d but read at %s", a.Seq, a.Partition, a.Offset, got[0])
			}
		case Indefinite, Pending:
			if len(got) > 0 {
				r.IndefLanded++
			} else {
				r.IndefNotLanded++
			}
		}
	}
	return r
}

// GroupReport is the result of checking a consumer group.
type GroupReport struct {
	Consumed    int // records the members processed during the run (with repeats)
	Resumed     int // records the resuming member read
	Phantom     int // processed records the final log does not hold at that position
	CommitAhead int // partitions whose committed offset passes a record the members never processed
	Skipped     int // records at or after a committed offset the resuming member did not read
	Gap         int // acknowledged records the group never processed at all

	Problems []string
	more     int
}

func (r *GroupReport) problem(format string, args ...any) {
	if len(r.Problems) < MaxProblems {
		r.Problems = append(r.Problems, fmt.Sprintf(format, args...))
	} else {
		r.more++
	}
}

func (r GroupReport) OK() bool {
	return r.Phantom == 0 && r.CommitAhead == 0 && r.Skipped == 0 && r.Gap == 0
}

func (r GroupReport) Figures() string {
	return fmt.Sprintf("group: consumed=%d resumed=%d phantom=%d commit-ahead=%d skipped=%d gap=%d",
		r.Consumed, r.Resumed, r.Phantom, r.CommitAhead, r.Skipped, r.Gap)
}

func (r GroupReport) Details() string {
	s := strings.Join(r.Problems, "\n")
	if r.more > 0 {
		s += fmt.Sprintf("\n... and %d more", r.more)
	}
	return s
}

// CheckGroup checks a consumer group against the final log (every
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
func CheckGroup(history []Attempt, final, consumed []Record, committed map[int32]int64, resumed []Record, ends map[int32]int64) GroupReport {
	var r GroupReport
	r.Consumed, r.Resumed = len(consumed), len(resumed)
	type pos struct {
		p   int32
		off int64
	}
	log := map[pos]Record{}
	byPart := map[int32][]Record{}
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
		if a.Outcome == Acked && !seen[strconv.FormatInt(a.Seq, 10)] {
			if _, inLog := log[pos{a.Partition, a.Offset}]; !inLog {
				continue // lost from the log itself: Check reports it
			}
			r.Gap++
			r.problem("GAP: acknowledged value %d at p%d@%d was never processed by the group", a.Seq, a.Partition, a.Offset)
		}
	}
	return r
}
