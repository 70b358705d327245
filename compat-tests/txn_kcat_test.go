package compattests

// Transactions with kcat (1.7.1, librdkafka 2.0.2), on one node and on
// three at RF 3. kcat -P with -X transactional.id runs
// init_transactions and begin_transaction before reading its input, and
// commit_transaction at the end of it; a SIGINT or SIGTERM makes it call
// abort_transaction instead, but kcat 1.7.1 only gets there if the signal
// comes while it waits for input with none buffered (else it exits with
// "Program terminated while producing message", leaving the transaction
// open), so the SIGINT case writes a whole number of its 1024-byte reads
// of complete lines. kcat 1.7.1 also produces nothing before it has read
// 1024 bytes or the end of its input (fixed in kcat 1.8), which the same
// whole reads take care of. The other aborts are a kcat killed by SIGKILL
// mid-transaction: its transaction ends by the coordinator's
// transaction.timeout.ms, or when the next producer with its
// transactional.id fences it.

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestTxnKcat(t *testing.T) {
	kcat := kcatPath(t)
	for _, topo := range rdkTopologies {
		t.Run(topo.name, func(t *testing.T) {
			seeds := topo.start(t)
			k := &kcatTxn{kcat: kcat, seeds: seeds, brokers: strings.Join(seeds, ","), rf: topo.rf}
			t.Run("commit at EOF", func(t *testing.T) { t.Parallel(); k.testCommit(t) })
			t.Run("SIGINT aborts", func(t *testing.T) { t.Parallel(); k.testSigint(t) })
			t.Run("SIGKILL then transaction timeout", func(t *testing.T) { t.Parallel(); k.testTimeout(t) })
			t.Run("SIGKILL then fenced by the next producer", func(t *testing.T) { t.Parallel(); k.testFenced(t) })
		})
	}
}

type kcatTxn struct {
	kcat    string
	seeds   []string
	brokers string // seeds for -b
	rf      int16
}

// kcat's stderr lines at the end of a transaction (KC_INFO).
const (
	kcatCommitted = "Transaction successfully committed"
	kcatAborting  = "Aborting transaction due to termination signal"
)

// kcatLines returns n input lines "prefix-NNN:prefix-NNN-xxx…", 64 bytes
// each with the newline, so 16 lines are exactly one of kcat 1.7.1's
// 1024-byte reads.
func kcatLines(prefix string, n int) []string {
	var out []string
	for i := range n {
		l := fmt.Sprintf("%s-%03d:%s-%03d-", prefix, i, prefix, i)
		out = append(out, l+strings.Repeat("x", 63-len(l))+"\n")
	}
	return out
}

// kcatValues are the values of lines (after the key delimiter).
func kcatValues(lines ...[]string) []string {
	var out []string
	for _, ls := range lines {
		for _, l := range ls {
			out = append(out, strings.TrimSuffix(strings.SplitN(l, ":", 2)[1], "\n"))
		}
	}
	return out
}

// rdkBuffer is a bytes.Buffer safe to write from a process while read.
type rdkBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *rdkBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *rdkBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// kcatProc is a running kcat -P with its input on a pipe.
type kcatProc struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	output *rdkBuffer // stdout and stderr
	done   chan struct{}
	err    error // of Wait, once done is closed
}

// startProducer starts kcat -P as a transactional producer to topic
// (keyed lines, -K:), killed after 30 s at the latest. -m 20 gives its
// init and commit 20 s (default 5).
func (k *kcatTxn) startProducer(t *testing.T, topic, txid string, extra ...string) *kcatProc {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	args := append([]string{"-P", "-b", k.brokers, "-t", topic, "-K:", "-m", "20",
		"-X", "transactional.id=" + txid, "-X", "acks=all", "-X", "linger.ms=0"}, extra...)
	cmd := exec.CommandContext(ctx, k.kcat, args...)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	p := &kcatProc{cmd: cmd, stdin: stdin, output: &rdkBuffer{}, done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = p.output, p.output
	if err := cmd.Start(); err != nil {
		cancel()
		t.Fatalf("kcat %s: %v", strings.Join(args, " "), err)
	}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		cancel()
		<-p.done
	})
	return p
}

func (p *kcatProc) write(t *testing.T, lines []string) {
	t.Helper()
	if _, err := io.WriteString(p.stdin, strings.Join(lines, "")); err != nil {
		t.Fatalf("writing to kcat: %v\n%s", err, tail(p.output.String()))
	}
}

// wait waits for kcat to exit (at most until its 30 s context kills it)
// and returns its exit error.
func (p *kcatProc) wait() error {
	<-p.done
	return p.err
}

// produceCommit runs one kcat transactional producer over lines to EOF and
// checks it reported the commit.
func (k *kcatTxn) produceCommit(t *testing.T, topic, txid string, lines []string) {
	t.Helper()
	p := k.startProducer(t, topic, txid)
	p.write(t, lines)
	p.stdin.Close()
	if err := p.wait(); err != nil || !strings.Contains(p.output.String(), kcatCommitted) {
		t.Fatalf("kcat -P -X transactional.id=%s: exit %v, no %q in its output:\n%s", txid, err, kcatCommitted, tail(p.output.String()))
	}
}

type kcatRecord struct {
	P    int32
	O    int64
	K, V string
}

// read consumes every partition of topic from the beginning to its end
// (-e: for read_committed, the last stable offset) with isolation.level
// iso.
func (k *kcatTxn) read(t *testing.T, topic, iso string) []kcatRecord {
	t.Helper()
	out := runKcat(t, k.kcat, "", "-C", "-b", k.brokers, "-t", topic, "-o", "beginning", "-e", "-q",
		"-X", "isolation.level="+iso, "-f", `%p|%o|%k|%s\n`)
	var recs []kcatRecord
	for _, l := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
		if l == "" {
			continue
		}
		f := strings.SplitN(l, "|", 4)
		if len(f) != 4 {
			t.Fatalf("kcat -C printed %q", l)
		}
		p, _ := strconv.Atoi(f[0])
		o, _ := strconv.ParseInt(f[1], 10, 64)
		recs = append(recs, kcatRecord{P: int32(p), O: o, K: f[2], V: f[3]})
	}
	return recs
}

func kcatRecValues(recs []kcatRecord) []string {
	var out []string
	for _, r := range recs {
		out = append(out, r.V)
	}
	return out
}

// checkReads reads topic with kcat at both isolation levels and checks
// read_committed gives exactly committed and read_uncommitted exactly all.
// It returns what read_uncommitted read.
func (k *kcatTxn) checkReads(t *testing.T, topic, when string, committed, all []string) []kcatRecord {
	t.Helper()
	rc := k.read(t, topic, "read_committed")
	rdkSameSet(t, when+": kcat read_committed", kcatRecValues(rc), committed)
	ru := k.read(t, topic, "read_uncommitted")
	rdkSameSet(t, when+": kcat read_uncommitted", kcatRecValues(ru), all)
	return ru
}

// checkMarkers checks each partition's high watermark is its records plus
// one marker per transaction that wrote to it, the transactions told
// apart by the value prefix before the first '-'.
func checkMarkers(t *testing.T, off rdkOffsets, all []kcatRecord) {
	t.Helper()
	txns := map[int32]map[string]bool{}
	recs := map[int32]int64{}
	for _, r := range all {
		if txns[r.P] == nil {
			txns[r.P] = map[string]bool{}
		}
		txns[r.P][strings.SplitN(r.V, "-", 2)[0]] = true
		recs[r.P]++
	}
	for p, hw := range off.hw {
		if want := recs[p] + int64(len(txns[p])); hw != want {
			t.Errorf("partition %d: high watermark %d, want %d (%d records + %d transaction markers)", p, hw, want, recs[p], len(txns[p]))
		}
	}
}

// testCommit: kcat commits at EOF; both isolation levels read every record,
// and each partition has one commit marker after its records.
func (k *kcatTxn) testCommit(t *testing.T) {
	topic := rdkTopic("kcat-txn-commit")
	txnCreate(t, k.seeds, topic, 3, k.rf)
	lines := kcatLines("commit", 300)
	k.produceCommit(t, topic, topic+"-tx", lines)
	off := rdkWaitStable(t, k.seeds, topic)
	all := k.checkReads(t, topic, "committed", kcatValues(lines), kcatValues(lines))
	if len(off.hw) != 3 || len(rdkCountBy(all, func(r kcatRecord) int32 { return r.P })) != 3 {
		t.Errorf("300 keys did not spread over the 3 partitions: offsets %v", off)
	}
	checkMarkers(t, off, all)
}

// testSigint: a SIGINT while kcat waits for input makes it abort. While
// open, read_committed shows nothing and read_uncommitted all; after the
// abort the same; then the same transactional id commits more, and
// read_committed shows exactly those.
func (k *kcatTxn) testSigint(t *testing.T) {
	topic := rdkTopic("kcat-txn-sigint")
	txnCreate(t, k.seeds, topic, 3, k.rf)
	txid := topic + "-tx"
	p := k.startProducer(t, topic, txid)
	aborted := kcatLines("aborted", 32) // two whole 1024-byte reads
	p.write(t, aborted)
	rdkAwaitOffsets(t, k.seeds, topic, 15*time.Second, "32 records written", func(o rdkOffsets) bool { return o.hwTotal() == 32 })
	k.checkReads(t, topic, "open", nil, kcatValues(aborted))

	if err := p.cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	time.Sleep(500 * time.Millisecond) // so that the handler has run before kcat reads the EOF
	p.stdin.Close()
	err := p.wait()
	if !strings.Contains(p.output.String(), kcatAborting) {
		t.Fatalf("kcat after SIGINT and EOF: exit %v, no %q in its output:\n%s", err, kcatAborting, tail(p.output.String()))
	}
	if out := p.output.String(); strings.Contains(out, "ERROR") {
		t.Errorf("kcat's abort (exit %v): %s", err, tail(out))
	}
	off := rdkWaitStable(t, k.seeds, topic)
	all := k.checkReads(t, topic, "aborted", nil, kcatValues(aborted))
	checkMarkers(t, off, all)

	fresh := kcatLines("fresh", 40)
	k.produceCommit(t, topic, txid, fresh)
	off = rdkWaitStable(t, k.seeds, topic)
	all = k.checkReads(t, topic, "aborted, then committed", kcatValues(fresh), kcatValues(aborted, fresh))
	checkMarkers(t, off, all)
}

// testTimeout: kcat with transaction.timeout.ms=3000 is SIGKILLed mid-
// transaction; the coordinator aborts the transaction once it times out.
// read_committed never shows its records, before or after; read_uncommitted
// always does.
func (k *kcatTxn) testTimeout(t *testing.T) {
	topic := rdkTopic("kcat-txn-timeout")
	txnCreate(t, k.seeds, topic, 3, k.rf)
	p := k.startProducer(t, topic, topic+"-tx", "-X", "transaction.timeout.ms=3000")
	zombie := kcatLines("zombie", 32)
	p.write(t, zombie)
	// At least 32: on a slow machine the coordinator may already have
	// aborted (three markers more) 3 s after the first AddPartitionsToTxn.
	written := rdkAwaitOffsets(t, k.seeds, topic, 15*time.Second, "32 records written", func(o rdkOffsets) bool { return o.hwTotal() >= 32 })
	if err := p.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	p.wait()
	if strings.Contains(p.output.String(), kcatCommitted) || strings.Contains(p.output.String(), kcatAborting) {
		t.Fatalf("kcat ended its transaction before the SIGKILL:\n%s", p.output.String())
	}
	if written.stable() {
		t.Logf("the transaction had timed out before kcat was killed: %v", written)
	}
	k.checkReads(t, topic, "killed", nil, kcatValues(zombie))
	// Until the coordinator's timeout aborts it, and after, read_committed
	// shows none of it.
	adm := txnAdmin(t, k.seeds)
	var off rdkOffsets
	for {
		var err error
		off, err = rdkListOffsets(adm, topic)
		if err == nil && off.stable() {
			break
		}
		if time.Since(killed) > 20*time.Second {
			t.Fatalf("transaction still open 20 s after its producer was killed (transaction.timeout.ms=3000): %v (error %v)", off, err)
		}
		if rc := k.read(t, topic, "read_committed"); len(rc) != 0 {
			t.Fatalf("%v after the kill, before the abort: read_committed shows %d records (first %+v)", time.Since(killed), len(rc), rc[0])
		}
		time.Sleep(300 * time.Millisecond)
	}
	t.Logf("aborted (LSO = HW) %v after the kill", time.Since(killed).Round(10*time.Millisecond))
	all := k.checkReads(t, topic, "timed out", nil, kcatValues(zombie))
	checkMarkers(t, off, all)
}

// testFenced: kcat is SIGKILLed mid-transaction (timeout 60 s); a new kcat
// with the same transactional id fences it (InitProducerId aborts the open
// transaction) and commits. read_committed shows only the new records.
func (k *kcatTxn) testFenced(t *testing.T) {
	topic := rdkTopic("kcat-txn-fenced")
	txnCreate(t, k.seeds, topic, 3, k.rf)
	txid := topic + "-tx"
	old := k.startProducer(t, topic, txid, "-X", "transaction.timeout.ms=60000")
	zombie := kcatLines("zombie", 32)
	old.write(t, zombie)
	rdkAwaitOffsets(t, k.seeds, topic, 15*time.Second, "32 records written", func(o rdkOffsets) bool { return o.hwTotal() == 32 })
	if err := old.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	old.wait()
	k.checkReads(t, topic, "killed, open", nil, kcatValues(zombie))

	start := time.Now()
	fresh := kcatLines("fresh", 48)
	k.produceCommit(t, topic, txid, fresh)
	if d := time.Since(start); d > 20*time.Second {
		t.Errorf("the new producer took %v: it waited for the old transaction's timeout instead of fencing it", d)
	}
	off := rdkWaitStable(t, k.seeds, topic)
	all := k.checkReads(t, topic, "fenced", kcatValues(fresh), kcatValues(zombie, fresh))
	checkMarkers(t, off, all)
	// The zombie's records come before its abort marker, the fresh ones
	// after it: per partition every zombie offset is below every fresh one.
	for _, p := range []int32{0, 1, 2} {
		var z, f []int64
		for _, r := range all {
			if r.P == p && strings.HasPrefix(r.V, "zombie-") {
				z = append(z, r.O)
			} else if r.P == p {
				f = append(f, r.O)
			}
		}
		if len(z) > 0 && len(f) > 0 && slices.Max(z) >= slices.Min(f) {
			t.Errorf("partition %d: zombie offsets %v, fresh offsets %v", p, z, f)
		}
	}
}
