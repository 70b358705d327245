package compattests

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestShareGroupReadCommitted: share.isolation.level on a share group
// (KIP-932), set with IncrementalAlterConfigs on the GROUP resource. A
// franz-go transactional producer commits some transactions and aborts
// others, interleaved with non-transactional records (some written while
// a transaction is open), on a one-partition topic; then it leaves one
// transaction open, with plain records after it.
//
//   - A group at read_committed receives exactly the committed and the
//     non-transactional records written before the open transaction,
//     none of an aborted transaction, and nothing at or past the open
//     one (the last stable offset bounds what it reads, plain records
//     after it included) until it commits; then those too.
//   - A group left at read_uncommitted receives every data record, those
//     of the aborted and the open transactions included.
//   - Afterwards DescribeShareGroupOffsets shows both groups' start offset
//     at the partition's end with lag 0: the aborted records (and the
//     transaction markers) are archived, not left available.
//
// On one node and on three (RF 3, min.insync.replicas=2).
func TestShareGroupReadCommitted(t *testing.T) {
	for _, nodes := range []int{1, 3} {
		t.Run(fmt.Sprintf("nodes=%d", nodes), func(t *testing.T) {
			const topic = "sharerc"
			const committedGroup, uncommittedGroup = "sharerc-committed", "sharerc-uncommitted"
			st := startShareTarget(t, nodes)
			topicID := st.createTopicID(t, topic, 1, int16(nodes))
			setShareConfigs(t, committedGroup, st.nodes, "share.auto.offset.reset", "earliest", "share.isolation.level", "read_committed")
			setShareConfigs(t, uncommittedGroup, st.nodes, "share.auto.offset.reset", "earliest")

			tx := newClient(t, st.addrs[0], kgo.SeedBrokers(st.addrs...), kgo.TransactionalID("sharerc-txn"),
				kgo.DefaultProduceTopic(topic), kgo.TransactionTimeout(2*time.Minute))
			w := &rcWriter{t: t, plain: st.cl, tx: tx, topic: topic}

			// Decided before any member fetches.
			w.plainRecs("p", 5)
			w.txn("c1", 5, nil, kgo.TryCommit)
			w.plainRecs("p", 5)
			w.txn("a1", 5, nil, kgo.TryAbort)
			w.txn("c2", 5, func() { w.plainRecs("p", 3) }, kgo.TryCommit)
			w.txn("a2", 5, func() { w.plainRecs("p", 2) }, kgo.TryAbort)
			stable := w.values(func(v string) bool { return !strings.HasPrefix(v, "a") })
			// Open: o1-*, then plain records behind it.
			w.begin()
			w.txnRecs("o1", 3)
			w.plainRecs("late", 2)

			rcLog, ruLog := newShareLog(defaultShareLock), newShareLog(defaultShareLock)
			members := []*shareMember{
				startShareMember(t, "rc0", st.addrs, committedGroup, topic, rcLog, nil),
				startShareMember(t, "rc1", st.addrs, committedGroup, topic, rcLog, nil),
				startShareMember(t, "ru0", st.addrs, uncommittedGroup, topic, ruLog, nil),
			}
			defer func() {
				for _, m := range members {
					m.Close(10 * time.Second)
				}
			}()
			dumpOnFailure(t, rcLog, members[:2])
			dumpOnFailure(t, ruLog, members[2:])

			// read_uncommitted: everything written so far, aborted and
			// open transactions included.
			all := w.values(nil)
			waitUntil(t, 60*time.Second, "the read_uncommitted group accepts every record written", func() (bool, string) {
				return rcAccepted(ruLog, all)
			})
			// read_committed: the stable records, then nothing more while
			// the transaction stays open.
			waitUntil(t, 60*time.Second, "the read_committed group accepts every record below the open transaction", func() (bool, string) {
				return rcAccepted(rcLog, stable)
			})
			time.Sleep(3 * time.Second) // several long polls (500 ms each)
			if extra := rcUnexpected(rcLog, stable); len(extra) > 0 {
				t.Fatalf("the read_committed group received, while a transaction was open before them: %v", extra)
			}

			w.end(kgo.TryCommit)
			want := w.values(func(v string) bool { return !strings.HasPrefix(v, "a") })
			waitUntil(t, 60*time.Second, "the read_committed group accepts the committed transaction and the records after it", func() (bool, string) {
				return rcAccepted(rcLog, want)
			})
			if extra := rcUnexpected(rcLog, want); len(extra) > 0 {
				t.Errorf("the read_committed group received records of aborted transactions: %v", extra)
			}
			if extra := rcUnexpected(ruLog, all); len(extra) > 0 {
				t.Errorf("the read_uncommitted group received records never written: %v", extra)
			}

			ends := endOffsets(t, kadm.NewClient(st.cl), topic)
			adm := kadm.NewClient(st.cl)
			for _, g := range []string{committedGroup, uncommittedGroup} {
				waitUntil(t, 30*time.Second, g+": DescribeShareGroupOffsets start offset at the partition end, lag 0", func() (bool, string) {
					ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
					defer cancel()
					d, err := adm.DescribeShareGroupOffsets(ctx, g)
					if err != nil {
						return false, err.Error()
					}
					if err := d.Error(); err != nil {
						return false, err.Error()
					}
					so, ok := d[g].Offsets[topic][0]
					if !ok {
						return false, fmt.Sprintf("no offsets for %s[0]: %+v", topic, d[g])
					}
					if so.TopicID != kadm.TopicID(topicID) || so.Err != nil {
						return false, fmt.Sprintf("%+v", so)
					}
					return so.StartOffset == ends[0] && so.Lag == 0, fmt.Sprintf("start offset %d lag %d, partition end %d", so.StartOffset, so.Lag, ends[0])
				})
			}
			t.Logf("read_committed: %s", rcLog.figures())
			t.Logf("read_uncommitted: %s", ruLog.figures())
			checkShareLog(t, rcLog, w.byPos)
			checkShareLog(t, ruLog, w.byPos)
		})
	}
}

// rcWriter writes the test's records: plain ones through one client,
// transactional ones through a transactional client, in a known order,
// and remembers every record's value by position.
type rcWriter struct {
	t         *testing.T
	plain, tx *kgo.Client
	topic     string
	byPos     map[recKey]string
	n         map[string]int // next index per value prefix
}

func (w *rcWriter) produce(cl *kgo.Client, prefix string, n int) {
	w.t.Helper()
	if w.byPos == nil {
		w.byPos, w.n = map[recKey]string{}, map[string]int{}
	}
	var recs []*kgo.Record
	for range n {
		recs = append(recs, &kgo.Record{Topic: w.topic, Value: []byte(fmt.Sprintf("%s-%d", prefix, w.n[prefix]))})
		w.n[prefix]++
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res := cl.ProduceSync(ctx, recs...)
	if err := res.FirstErr(); err != nil {
		w.t.Fatalf("producing %d %s records: %v", n, prefix, err)
	}
	for _, r := range res {
		w.byPos[recKey{r.Record.Partition, r.Record.Offset}] = string(r.Record.Value)
	}
}

func (w *rcWriter) plainRecs(prefix string, n int) { w.produce(w.plain, prefix, n) }
func (w *rcWriter) txnRecs(prefix string, n int)   { w.produce(w.tx, prefix, n) }

func (w *rcWriter) begin() {
	w.t.Helper()
	if err := w.tx.BeginTransaction(); err != nil {
		w.t.Fatalf("BeginTransaction: %v", err)
	}
}

func (w *rcWriter) end(how kgo.TransactionEndTry) {
	w.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := w.tx.EndTransaction(ctx, how); err != nil {
		w.t.Fatalf("EndTransaction(%v): %v", how, err)
	}
}

// txn writes one transaction of n records (prefix-i), half of them, then
// middle (plain records, say), then the rest, and ends it.
func (w *rcWriter) txn(prefix string, n int, middle func(), how kgo.TransactionEndTry) {
	w.t.Helper()
	w.begin()
	w.txnRecs(prefix, n/2)
	if middle != nil {
		middle()
	}
	w.txnRecs(prefix, n-n/2)
	w.end(how)
}

// values are the values written so far that keep holds for (nil: all).
func (w *rcWriter) values(keep func(string) bool) map[string]bool {
	out := map[string]bool{}
	for _, v := range w.byPos {
		if keep == nil || keep(v) {
			out[v] = true
		}
	}
	return out
}

// rcAccepted reports whether every value of want has a confirmed
// acceptance in log.
func rcAccepted(log *shareLog, want map[string]bool) (bool, string) {
	got := map[string]bool{}
	for _, d := range log.snapshot() {
		if d.ack == kgo.AckAccept && d.outcome == ackConfirmed {
			got[d.value] = true
		}
	}
	var miss []string
	for v := range want {
		if !got[v] {
			miss = append(miss, v)
		}
	}
	sort.Strings(miss)
	return len(miss) == 0, fmt.Sprintf("%d of %d not accepted, e.g. %v; %s", len(miss), len(want), miss[:min(8, len(miss))], log.figures())
}

// rcUnexpected lists the values delivered in log that are not in want.
func rcUnexpected(log *shareLog, want map[string]bool) []string {
	var out []string
	for _, d := range log.snapshot() {
		if !want[d.value] && !slices.Contains(out, d.value) {
			out = append(out, d.value)
		}
	}
	sort.Strings(out)
	return out
}
