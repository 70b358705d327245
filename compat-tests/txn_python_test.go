package compattests

// Transactions with confluent-kafka-python (Debian's python3-confluent-kafka
// 1.7, on librdkafka 2.0), on one node and on three at RF 3, driving
// testdata/confluent_txn.py: commit, abort and commit again, then exact
// sets for read_committed and read_uncommitted; a second producer with the
// same transactional.id fencing the first; and a consume-transform-produce
// loop with send_offsets_to_transaction (one transaction of it aborted)
// copying every input exactly once.

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// confluentPython is the interpreter with confluent_kafka: the system one,
// where apt-get installs python3-confluent-kafka (the python3 on PATH may
// be another). Skips when it is missing, unless
// FJORD_REQUIRE_CONFLUENT_KAFKA is set.
func confluentPython(t *testing.T) string {
	t.Helper()
	py := "/usr/bin/python3"
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if out, err := exec.CommandContext(ctx, py, "-c", "import confluent_kafka").CombinedOutput(); err != nil {
		if os.Getenv("FJORD_REQUIRE_CONFLUENT_KAFKA") != "" {
			t.Fatalf("python3-confluent-kafka missing and FJORD_REQUIRE_CONFLUENT_KAFKA is set: %v\n%s", err, out)
		}
		t.Skipf("python3-confluent-kafka not installed (%v: %s); set FJORD_REQUIRE_CONFLUENT_KAFKA to make this a failure", err, strings.TrimSpace(string(out)))
	}
	return py
}

func TestTxnConfluentPython(t *testing.T) {
	py := confluentPython(t)
	script, err := filepath.Abs("testdata/confluent_txn.py")
	if err != nil {
		t.Fatal(err)
	}
	for _, topo := range rdkTopologies {
		t.Run(topo.name, func(t *testing.T) {
			seeds := topo.start(t)
			c := &confluentTxn{py: py, script: script, seeds: seeds, bootstrap: strings.Join(seeds, ","), rf: topo.rf}
			t.Run("commit abort commit", func(t *testing.T) { t.Parallel(); c.testCommitAbort(t) })
			t.Run("fencing", func(t *testing.T) { t.Parallel(); c.testFencing(t) })
			t.Run("consume-transform-produce", func(t *testing.T) { t.Parallel(); c.testCTP(t) })
		})
	}
}

type confluentTxn struct {
	py, script string
	seeds      []string
	bootstrap  string
	rf         int16
}

// run runs the script (killed after 60 s) and decodes its JSON line into
// out; librdkafka's log lines on stderr are logged.
func (c *confluentTxn) run(t *testing.T, out any, args ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, c.py, append([]string{c.script}, args...)...)
	var stderr rdkBuffer
	cmd.Stderr = &stderr
	start := time.Now()
	stdout, err := cmd.Output()
	what := "confluent_txn.py " + strings.Join(args, " ")
	if ctx.Err() != nil {
		t.Fatalf("%s: killed after 60 s\nstdout:\n%s\nstderr:\n%s", what, tail(string(stdout)), tail(stderr.String()))
	}
	if err != nil {
		t.Fatalf("%s: %v\nstdout:\n%s\nstderr:\n%s", what, err, tail(string(stdout)), tail(stderr.String()))
	}
	if s := stderr.String(); s != "" {
		t.Logf("%s (%v) stderr:\n%s", what, time.Since(start).Round(time.Millisecond), tail(s))
	}
	if err := json.Unmarshal(stdout, out); err != nil {
		t.Fatalf("%s: %v in its output %q", what, err, tail(string(stdout)))
	}
}

type pyRecord struct {
	P int32  `json:"p"`
	O int64  `json:"o"`
	V string `json:"v"`
}

// read reads every partition of topic to its end with isolation level iso
// (librdkafka: read_committed ends at the last stable offset), checks the
// consumer's positions are the high watermarks, and returns the records.
func (c *confluentTxn) read(t *testing.T, topic, iso string, off rdkOffsets) []pyRecord {
	t.Helper()
	var got struct {
		Records   []pyRecord       `json:"records"`
		Positions map[string]int64 `json:"positions"`
	}
	c.run(t, &got, "read", c.bootstrap, topic, iso)
	for p, hw := range off.hw {
		if pos, ok := got.Positions[strconv.Itoa(int(p))]; !ok || pos != hw {
			t.Errorf("%s %s: position of partition %d is %d (reported %v), want the high watermark %d", topic, iso, p, pos, ok, hw)
		}
	}
	return got.Records
}

func pyValues(recs []pyRecord) []string {
	var out []string
	for _, r := range recs {
		out = append(out, r.V)
	}
	return out
}

// pyRound is the values of one round of confluent_txn.py's produce_round:
// prefix-0 … prefix-29, 10 per partition.
func pyRound(prefix string) []string {
	var out []string
	for i := range 30 {
		out = append(out, fmt.Sprintf("%s-%d", prefix, i))
	}
	return out
}

// offsetsOf returns the offsets read from partition p, sorted.
func offsetsOf(recs []pyRecord, p int32) []int64 {
	var out []int64
	for _, r := range recs {
		if r.P == p {
			out = append(out, r.O)
		}
	}
	slices.Sort(out)
	return out
}

func span(from, to int64) []int64 { // [from, to)
	var out []int64
	for o := from; o < to; o++ {
		out = append(out, o)
	}
	return out
}

// testCommitAbort: commit c0-*, abort a1-*, commit c2-*, 10 records a round
// on each of 3 partitions. Per partition the log is c0 at 0-9, its commit
// marker at 10, a1 at 11-20, the abort marker at 21, c2 at 22-31 and the
// commit marker at 32; read_committed gets exactly c0 and c2, at those
// offsets, read_uncommitted all three rounds.
func (c *confluentTxn) testCommitAbort(t *testing.T) {
	topic := rdkTopic("py-txn-ca")
	txnCreate(t, c.seeds, topic, 3, c.rf)
	var res struct {
		Rounds           []map[string]any `json:"rounds"`
		DeliveryFailures []string         `json:"delivery_failures"`
	}
	c.run(t, &res, "produce", c.bootstrap, topic, topic+"-tx")
	if len(res.DeliveryFailures) != 0 || len(res.Rounds) != 3 {
		t.Fatalf("producer: %d rounds, delivery failures %v", len(res.Rounds), res.DeliveryFailures)
	}
	off := rdkWaitStable(t, c.seeds, topic)
	for p, hw := range off.hw {
		if hw != 33 {
			t.Errorf("partition %d: high watermark %d, want 33 (30 records and 3 markers)", p, hw)
		}
	}
	rc := c.read(t, topic, "read_committed", off)
	rdkSameSet(t, "read_committed", pyValues(rc), slices.Concat(pyRound("c0"), pyRound("c2")))
	ru := c.read(t, topic, "read_uncommitted", off)
	rdkSameSet(t, "read_uncommitted", pyValues(ru), slices.Concat(pyRound("c0"), pyRound("a1"), pyRound("c2")))
	for p := range int32(3) {
		if got, want := offsetsOf(rc, p), slices.Concat(span(0, 10), span(22, 32)); !slices.Equal(got, want) {
			t.Errorf("read_committed partition %d: offsets %v, want %v", p, got, want)
		}
		if got, want := offsetsOf(ru, p), slices.Concat(span(0, 10), span(11, 21), span(22, 32)); !slices.Equal(got, want) {
			t.Errorf("read_uncommitted partition %d: offsets %v, want %v", p, got, want)
		}
	}
}

// testFencing: producer A's open transaction (zombie-*) is aborted when B
// with the same transactional.id calls init_transactions; B commits
// fresh-*; A's next commit fails as fenced (fatal).
func (c *confluentTxn) testFencing(t *testing.T) {
	topic := rdkTopic("py-txn-fence")
	txnCreate(t, c.seeds, topic, 3, c.rf)
	var res struct {
		ZombieFailures []string `json:"zombie_delivery_failures"`
		FreshFailures  []string `json:"fresh_delivery_failures"`
		AErr           *struct {
			Name  string `json:"name"`
			Str   string `json:"str"`
			Fatal bool   `json:"fatal"`
		} `json:"a_commit_error"`
	}
	c.run(t, &res, "fence", c.bootstrap, topic, topic+"-tx")
	if len(res.ZombieFailures)+len(res.FreshFailures) != 0 {
		t.Fatalf("delivery failures: zombie %v, fresh %v", res.ZombieFailures, res.FreshFailures)
	}
	switch {
	case res.AErr == nil:
		t.Errorf("the fenced producer committed")
	case !res.AErr.Fatal || !slices.Contains([]string{"_FENCED", "PRODUCER_FENCED", "INVALID_PRODUCER_EPOCH"}, res.AErr.Name):
		// Kafka answers a fenced producer's Produce with
		// INVALID_PRODUCER_EPOCH (its leaders turn the coordinator's
		// PRODUCER_FENCED from a KIP-890 verification into it), which
		// librdkafka takes as fatal (_FENCED); PRODUCER_FENCED in a
		// Produce answer is only abortable to librdkafka.
		t.Errorf("the fenced producer's commit failed with %s (fatal %v): %s; want a fatal fencing error (_FENCED, as after Kafka's INVALID_PRODUCER_EPOCH)", res.AErr.Name, res.AErr.Fatal, res.AErr.Str)
	default:
		t.Logf("the fenced producer: %s: %s", res.AErr.Name, res.AErr.Str)
	}
	off := rdkWaitStable(t, c.seeds, topic)
	for p, hw := range off.hw {
		if hw != 22 {
			t.Errorf("partition %d: high watermark %d, want 22 (10 zombie records, the abort marker, 10 fresh ones, the commit marker)", p, hw)
		}
	}
	rc := c.read(t, topic, "read_committed", off)
	rdkSameSet(t, "read_committed", pyValues(rc), pyRound("fresh"))
	ru := c.read(t, topic, "read_uncommitted", off)
	rdkSameSet(t, "read_uncommitted", pyValues(ru), slices.Concat(pyRound("zombie"), pyRound("fresh")))
}

// testCTP: 300 input records on 3 partitions copied to an output topic by
// a read_committed consumer and a transactional producer committing the
// consumer's positions with send_offsets_to_transaction; the second
// transaction is aborted and a new consumer of the group resumes from the
// committed offsets. Every input is in the committed output exactly once,
// the aborted copies only in read_uncommitted, and the group's offsets are
// the input's ends.
func (c *confluentTxn) testCTP(t *testing.T) {
	const n = 300
	in := rdkTopic("py-txn-in")
	out := in + "-out"
	txnCreate(t, c.seeds, in, 3, c.rf)
	txnCreate(t, c.seeds, out, 3, c.rf)
	var res struct {
		Copied           int              `json:"copied"`
		Commits          int              `json:"commits"`
		Aborted          []string         `json:"aborted"`
		DeliveryFailures []string         `json:"delivery_failures"`
		Committed        map[string]int64 `json:"committed"`
	}
	c.run(t, &res, "ctp", c.bootstrap, in, out, in+"-group", in+"-tx", strconv.Itoa(n))
	t.Logf("copied %d in %d committed transactions; aborted one of %d records", res.Copied, res.Commits, len(res.Aborted))
	if res.Copied != n || len(res.Aborted) == 0 || len(res.DeliveryFailures) != 0 {
		t.Fatalf("ctp: copied %d of %d, aborted %d, delivery failures %v", res.Copied, n, len(res.Aborted), res.DeliveryFailures)
	}
	for p := range 3 {
		if got := res.Committed[strconv.Itoa(p)]; got != n/3 {
			t.Errorf("group offset of %s[%d]: %d, want %d (the partition's end)", in, p, got, n/3)
		}
	}
	var want []string
	for i := range n {
		want = append(want, strconv.Itoa(i))
	}
	off := rdkWaitStable(t, c.seeds, out)
	rc := c.read(t, out, "read_committed", off)
	rdkSameSet(t, "read_committed output", pyValues(rc), want)
	ru := c.read(t, out, "read_uncommitted", off)
	counts := rdkCountBy(pyValues(ru), func(v string) string { return v })
	aborted := map[string]bool{}
	for _, v := range res.Aborted {
		aborted[v] = true
	}
	bad := 0
	for _, v := range want {
		w := 1
		if aborted[v] {
			w = 2
		}
		if counts[v] != w && bad < 10 {
			bad++
			t.Errorf("read_uncommitted output: %s %d times, want %d", v, counts[v], w)
		}
	}
	if len(ru) != n+len(res.Aborted) {
		t.Errorf("read_uncommitted output: %d records, want %d (%d copies and the %d aborted)", len(ru), n+len(res.Aborted), n, len(res.Aborted))
	}
}
