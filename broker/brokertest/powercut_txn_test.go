package brokertest

// The transactional chain of the power-cut tests: a franz-go
// GroupTransactSession copies the idempotent producer's topic to another,
// one transaction per poll (the copies and the group's offsets together),
// through every power cut; the checker (checkChain, a pure function over
// what the chain recorded and what the topics hold at the end) then wants
// every committed transaction whole, nothing of an aborted one, and every
// input record copied exactly once.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/fjordlog/fjord/cmd/fjord/history"
)

// chainValue is the value of every record the chain writes: the input it
// copies, the transaction that wrote it and how many records that
// transaction wrote to each output partition, so the checker tells a copy
// from a duplicate and a whole transaction from a torn one on its own.
type chainValue struct {
	InPartition int32  `json:"ip"`
	InOffset    int64  `json:"io"`
	Value       string `json:"v"`
	Txn         string `json:"t"`
	Counts      []int  `json:"c"`
}

// chainOutcome is what the chain learned of one of its transactions.
type chainOutcome int

const (
	chainCommitted chainOutcome = iota // End said committed
	chainAborted                       // End said not committed, without an error
	chainUnknown                       // End failed: either
)

func (o chainOutcome) String() string {
	return [...]string{"committed", "aborted", "unknown"}[o]
}

// chainTxn is one transaction of the chain.
type chainTxn struct {
	ID      string
	Counts  []int // records written to each output partition
	Outcome chainOutcome
	Err     string
}

// chain is the consume-transform-produce member. Its fields after mu
// are guarded by it.
type chain struct {
	seeds          []string
	in, out, group string
	outParts       int
	stop           chan struct{}
	done           chan struct{}

	mu       sync.Mutex
	txns     []chainTxn
	sessions int
	lastErr  string
}

func startChain(seeds []string, in, out, group string, outParts int) *chain {
	ch := &chain{seeds: seeds, in: in, out: out, group: group, outParts: outParts, stop: make(chan struct{}), done: make(chan struct{})}
	go ch.run()
	return ch
}

// Stop ends the chain after its transaction in progress.
func (ch *chain) Stop() {
	close(ch.stop)
	<-ch.done
}

func (ch *chain) stopped() bool {
	select {
	case <-ch.stop:
		return true
	default:
		return false
	}
}

// run runs sessions one after another until Stop: a session that fails
// (the cluster lost power under it, its producer was fenced) is closed and
// a new one, with the same transactional id, takes over from the group's
// committed offsets.
func (ch *chain) run() {
	defer close(ch.done)
	for !ch.stopped() {
		err := ch.session()
		if err == nil {
			return
		}
		ch.mu.Lock()
		ch.lastErr = err.Error()
		ch.mu.Unlock()
		select {
		case <-ch.stop:
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func (ch *chain) session() error {
	ch.mu.Lock()
	ch.sessions++
	inc := ch.sessions
	ch.mu.Unlock()
	s, err := kgo.NewGroupTransactSession(
		kgo.SeedBrokers(ch.seeds...),
		kgo.TransactionalID(ch.group+"-txn"),
		kgo.TransactionTimeout(20*time.Second),
		kgo.ConsumerGroup(ch.group),
		kgo.ConsumeTopics(ch.in),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.RequireStableFetchOffsets(),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.SessionTimeout(6*time.Second),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.FetchMaxWait(200*time.Millisecond),
		kgo.MetadataMinAge(250*time.Millisecond),
		kgo.RetryBackoffFn(func(int) time.Duration { return 100 * time.Millisecond }),
	)
	if err != nil {
		return fmt.Errorf("new session: %w", err)
	}
	defer func() {
		done := make(chan struct{})
		go func() { s.Close(); close(done) }()
		select {
		case <-done:
		case <-time.After(20 * time.Second):
		}
	}()
	next := 0
	for n := 1; !ch.stopped(); {
		pctx, cancel := context.WithTimeout(context.Background(), time.Second)
		fs := s.PollRecords(pctx, 200)
		cancel()
		if fs.IsClientClosed() {
			return errors.New("client closed")
		}
		recs := fs.Records()
		if len(recs) == 0 {
			continue
		}
		txn := chainTxn{ID: fmt.Sprintf("%d.%d", inc, n), Counts: make([]int, ch.outParts)}
		n++
		if err := s.Begin(); err != nil {
			return fmt.Errorf("begin %s: %w", txn.ID, err)
		}
		parts := make([]int32, len(recs))
		for i := range recs {
			parts[i] = int32(next % ch.outParts)
			next++
			txn.Counts[parts[i]]++
		}
		for i, r := range recs {
			v, _ := json.Marshal(chainValue{InPartition: r.Partition, InOffset: r.Offset, Value: string(r.Value), Txn: txn.ID, Counts: txn.Counts})
			s.Produce(context.Background(), &kgo.Record{Topic: ch.out, Partition: parts[i], Key: r.Key, Value: v}, nil)
		}
		ectx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		committed, err := s.End(ectx, kgo.TryCommit)
		cancel()
		switch {
		case err != nil:
			txn.Outcome, txn.Err = chainUnknown, err.Error()
		case committed:
			txn.Outcome = chainCommitted
		default:
			txn.Outcome = chainAborted
		}
		ch.mu.Lock()
		ch.txns = append(ch.txns, txn)
		ch.mu.Unlock()
		if err != nil {
			return fmt.Errorf("end %s: %w", txn.ID, err)
		}
	}
	return nil
}

// Txns returns the chain's transactions so far and its session count.
func (ch *chain) Txns() ([]chainTxn, int) {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	return slices.Clone(ch.txns), ch.sessions
}

// chainReport is checkChain's result.
type chainReport struct {
	Txns, Committed, Aborted, Unknown int
	Visible                           int // transactions with records read_committed shows
	Copies                            int // output records read
	Partial                           int // transactions visible in part
	CommittedLost                     int // committed, but nothing visible
	AbortedVisible                    int // aborted, but visible
	Duplicates                        int // input records copied by more than one visible transaction
	Phantom                           int // copies of records the final input log does not hold
	Uncopied                          int // input records no visible transaction copied
	Problems                          []string
}

func (r *chainReport) problem(format string, args ...any) {
	if len(r.Problems) < history.MaxProblems {
		r.Problems = append(r.Problems, fmt.Sprintf(format, args...))
	}
}

func (r chainReport) OK() bool {
	return r.Partial == 0 && r.CommittedLost == 0 && r.AbortedVisible == 0 && r.Duplicates == 0 && r.Phantom == 0 && r.Uncopied == 0
}

func (r chainReport) Figures() string {
	return fmt.Sprintf("txns=%d (committed=%d aborted=%d unknown=%d) visible=%d copies=%d partial=%d committed-lost=%d aborted-visible=%d duplicates=%d phantom=%d uncopied=%d",
		r.Txns, r.Committed, r.Aborted, r.Unknown, r.Visible, r.Copies, r.Partial, r.CommittedLost, r.AbortedVisible, r.Duplicates, r.Phantom, r.Uncopied)
}

// checkChain checks the chain's transactions against out, the output
// topic read with read_committed, and in, the whole input topic as read
// back. A transaction's records are either all visible or none; a
// committed one all, an aborted one none; each input record has exactly
// one visible copy, of what the input log holds there.
func checkChain(txns []chainTxn, in, out []history.Record) chainReport {
	r := chainReport{Txns: len(txns), Copies: len(out)}
	type pos struct {
		p   int32
		off int64
	}
	input := map[pos]string{}
	for _, rec := range in {
		input[pos{rec.Partition, rec.Offset}] = rec.Value
	}
	seen := map[string][]int{} // per transaction, records read per output partition
	counts := map[string][]int{}
	copiedBy := map[pos]string{}
	for _, rec := range out {
		var v chainValue
		if err := json.Unmarshal([]byte(rec.Value), &v); err != nil || int(rec.Partition) >= len(v.Counts) {
			r.Phantom++
			r.problem("PHANTOM: output %s is no copy the chain wrote", rec)
			continue
		}
		if seen[v.Txn] == nil {
			seen[v.Txn] = make([]int, len(v.Counts))
			counts[v.Txn] = v.Counts
		}
		seen[v.Txn][rec.Partition]++
		at := pos{v.InPartition, v.InOffset}
		if val, ok := input[at]; !ok || val != v.Value {
			r.Phantom++
			r.problem("PHANTOM: transaction %s copied p%d@%d=%s, the input log holds %q there", v.Txn, at.p, at.off, v.Value, val)
		}
		if first, ok := copiedBy[at]; ok {
			r.Duplicates++
			r.problem("DUPLICATE: input p%d@%d copied by transaction %s and again by %s", at.p, at.off, first, v.Txn)
			continue
		}
		copiedBy[at] = v.Txn
	}
	r.Visible = len(seen)
	for id, got := range seen {
		if !slices.Equal(got, counts[id]) {
			r.Partial++
			r.problem("PARTIAL: transaction %s wrote %v records to the output partitions, read_committed shows %v", id, counts[id], got)
		}
	}
	for _, t := range txns {
		_, visible := seen[t.ID]
		switch t.Outcome {
		case chainCommitted:
			r.Committed++
			if !visible {
				r.CommittedLost++
				r.problem("COMMITTED LOST: transaction %s (%v records per partition) committed, nothing of it is visible", t.ID, t.Counts)
			}
		case chainAborted:
			r.Aborted++
			if visible {
				r.AbortedVisible++
				r.problem("ABORTED VISIBLE: transaction %s aborted, read_committed shows it", t.ID)
			}
		case chainUnknown:
			r.Unknown++
		}
	}
	var missing []string
	for at := range input {
		if _, ok := copiedBy[at]; !ok {
			r.Uncopied++
			if len(missing) < 5 {
				missing = append(missing, fmt.Sprintf("p%d@%d", at.p, at.off))
			}
		}
	}
	if r.Uncopied > 0 {
		slices.Sort(missing)
		r.problem("UNCOPIED: %d input records have no visible copy, e.g. %s", r.Uncopied, strings.Join(missing, " "))
	}
	return r
}

// TestCheckChain: the chain's checker on synthetic histories, one per
// anomaly it must report, and a clean one it must pass.
func TestCheckChain(t *testing.T) {
	in := []history.Record{{Partition: 0, Offset: 0, Value: "0"}, {Partition: 0, Offset: 1, Value: "1"}, {Partition: 1, Offset: 0, Value: "2"}}
	cp := func(part int32, off int64, inP int32, inO int64, val, txn string, counts ...int) history.Record {
		v, _ := json.Marshal(chainValue{InPartition: inP, InOffset: inO, Value: val, Txn: txn, Counts: counts})
		return history.Record{Partition: part, Offset: off, Value: string(v)}
	}
	committed := func(id string, counts ...int) chainTxn {
		return chainTxn{ID: id, Counts: counts, Outcome: chainCommitted}
	}
	// Two transactions: 1.1 copies inputs 0@0, 0@1 (one to each output
	// partition), 1.2 copies 1@0.
	whole := []history.Record{cp(0, 0, 0, 0, "0", "1.1", 1, 1), cp(1, 0, 0, 1, "1", "1.1", 1, 1), cp(0, 2, 1, 0, "2", "1.2", 1, 0)}
	for _, c := range []struct {
		name string
		txns []chainTxn
		out  []history.Record
		bad  func(chainReport) int
	}{
		{"clean", []chainTxn{committed("1.1", 1, 1), committed("1.2", 1, 0)}, whole, nil},
		{"an unknown outcome, whole", []chainTxn{committed("1.1", 1, 1), {ID: "1.2", Outcome: chainUnknown}}, whole, nil},
		{"partial", []chainTxn{committed("1.1", 1, 1), committed("1.2", 1, 0)}, slices.Delete(slices.Clone(whole), 1, 2),
			func(r chainReport) int { return r.Partial }},
		{"committed lost", []chainTxn{committed("1.1", 1, 1), committed("1.2", 1, 0)}, whole[:2],
			func(r chainReport) int { return r.CommittedLost }},
		{"aborted visible", []chainTxn{committed("1.1", 1, 1), {ID: "1.2", Outcome: chainAborted}}, whole,
			func(r chainReport) int { return r.AbortedVisible }},
		{"duplicate", []chainTxn{committed("1.1", 1, 1), committed("1.2", 1, 0), committed("2.1", 1, 0)},
			append(slices.Clone(whole), cp(0, 4, 1, 0, "2", "2.1", 1, 0)), func(r chainReport) int { return r.Duplicates }},
		{"phantom", []chainTxn{committed("1.1", 1, 1), committed("1.2", 1, 0)},
			[]history.Record{whole[0], whole[1], cp(0, 2, 1, 0, "9", "1.2", 1, 0)}, func(r chainReport) int { return r.Phantom }},
		{"uncopied", []chainTxn{committed("1.1", 1, 1)}, whole[:2], func(r chainReport) int { return r.Uncopied }},
	} {
		r := checkChain(c.txns, in, c.out)
		switch {
		case c.bad == nil && !r.OK():
			t.Errorf("%s: %s\n%s", c.name, r.Figures(), strings.Join(r.Problems, "\n"))
		case c.bad != nil && (r.OK() || c.bad(r) == 0):
			t.Errorf("%s: not reported: %s", c.name, r.Figures())
		}
	}
}
