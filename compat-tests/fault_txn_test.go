package compattests

// TestFaultTxnChain (plan T17, issue 11): exactly-once consume-transform-
// produce across SIGKILLs. Three fjord processes behind the fault proxies
// (fault_cluster_test.go), topics `in` and `out` at RF 3 with
// min.insync.replicas=2:
//
//   - a seeder (the fault workload's idempotent acks=all producer,
//     fault_workload_test.go) writes keyed, numbered records to `in` and
//     records every outcome;
//   - two franz-go GroupTransactSession members (transactional ids,
//     read_committed, RequireStableFetchOffsets, transaction.timeout.ms
//     10 s) copy `in` to `out`, one transaction per poll batch spread
//     round-robin over the `out` partitions; each copy's value names its
//     input and its transaction (fault_txn_helpers_test.go);
//   - a live read_committed reader follows `out` the whole time;
//   - faults, one every 10 s: in turn, SIGKILL the transaction coordinator
//     of a member's transactional id (FindCoordinator key type 1), the
//     leader of an `out` partition, and a random node; each killed node is
//     restarted 4 s later (past the 3 s broker session timeout, so its
//     leaderships move) and the next kill waits until every partition of
//     `in`, `out`, __transaction_state and __consumer_offsets is led with a
//     full ISR again: at most one node is ever down. With every second kill
//     of a round a member also crashes: it is cut off from the network as
//     it writes an EndTxn (its records and TxnOffsetCommit are in), and
//     comes back with the same transactional id either after the
//     transaction timeout (the coordinator aborts it) or at once (its
//     InitProducerId does).
//
// Then the seeder stops, the chain catches up (the group's stable
// committed offsets reach `in`'s ends) and stops, the transactions settle
// (`out`'s last stable offsets reach its high watermarks, neither
// transactional id has a transaction in progress), and checkTxnChain
// checks the whole history: `out` read with read_uncommitted, markers
// included, is the ground truth of which transaction committed; read_committed
// must return exactly the committed records (and the live reader nothing
// else); every transaction is visible whole or not at all; every record of
// `in` has exactly one visible copy; the group's committed offsets are
// exactly where the copies end; and the seeder's acknowledged records are
// all in `in` (checkFaultHistory). A "TXN FAULT FIGURES" line sums it up.
//
// Short (make test): 3 kills and a member crash in about 25 s of faults,
// about 35 s in all; FJORD_FAULTS=full (make faults): 18 kills and 6
// member crashes over 3 minutes.
// FJORD_FAULT_LOGS=dir keeps the node logs, franz-go's logs of the seeder
// and the members, and the data (history.tsv, final.tsv for `in`;
// out.tsv, out-rc.tsv, out-live.tsv, txns.tsv); FJORD_FAULT_DEBUG=1 makes
// the franz-go logs debug level; FJORD_FAULT_SEED picks the victims' seed.

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
)

const (
	txnInParts  = 4
	txnOutParts = 3
	txnRate     = 250 // input records per second
	txnTimeout  = 10 * time.Second
)

func TestFaultTxnChain(t *testing.T) {
	kills, period := 3, 10*time.Second
	if faultMode(t) == "full" {
		kills = 18
	}
	const down = 4 * time.Second
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("FJORD_FAULT_SEED"); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("FJORD_FAULT_SEED=%q: %v", s, err)
		}
		seed = v
	}
	rng := rand.New(rand.NewPCG(seed, seed))

	begin := time.Now()
	fc := startFaultCluster(t, 3)
	r := &faultRun{t: t, name: "txn-chain", fc: fc, topic: "out", logDir: t.TempDir()}
	if keep := os.Getenv("FJORD_FAULT_LOGS"); keep != "" {
		t.Cleanup(func() { keepFaultLogs(t, fc, r.logDir, filepath.Join(keep, t.Name()+"-"+time.Now().Format("150405"))) })
	}
	createTxnFaultTopic(t, fc, "in", txnInParts)
	watch := watchExits(t, fc.nodesByID())

	r.prod = startFaultProducer(t, fc, "in", txnRate, r.logDir)
	r.start = time.Now()
	chain := startTxnChain(r, "in", "out", "fjord-chain")
	members := chain.members
	r.logf("warm: %d inputs acknowledged, %d copied; injecting %d kills (seed %d)", r.prod.Acked(), chain.Copied(), kills, seed)

	faultStart := time.Now()
	kinds := []string{"coordinator", "out-leader", "random"}
	byKind := map[string]int{}
	crashes := 0
	for k := range kills {
		cycle := time.Now()
		kind := kinds[k%len(kinds)]
		victim, what := -1, ""
		switch kind {
		case "coordinator":
			m := members[(k/len(kinds))%len(members)]
			victim = txnCoordinatorOf(fc, m.txnID, 5*time.Second)
			what = fmt.Sprintf("transaction coordinator of %s's %s", m.name, m.txnID)
		case "out-leader":
			p := int32(rng.IntN(txnOutParts))
			victim = fc.awaitLeaderOf("out", p, 5*time.Second)
			what = fmt.Sprintf("leader of out[%d]", p)
		default:
			victim = fc.IDs()[rng.IntN(fc.N())]
			what = "a random node"
		}
		if victim < 1 || !fc.Running(victim) {
			ids := fc.LiveIDs()
			victim = ids[rng.IntN(len(ids))]
			what += " not found; a random live node"
		}
		if k%len(kinds) == 1 {
			// A member crash between its TxnOffsetCommit and its EndTxn,
			// during this cycle's kill: the coordinator's timeout aborts
			// the transaction, or the member's next InitProducerId does.
			chain.Crash(k / len(kinds))
			crashes++
		}
		where := chain.where()
		fc.Kill(victim)
		r.faults++
		byKind[kind]++
		r.logf("SIGKILL node %d (%s); %d inputs acknowledged, %d copied so far; before the kill: %s", victim, what, r.prod.Acked(), chain.Copied(), where)
		time.Sleep(down)
		st := time.Now()
		r.restartAll(victim)
		r.logf("node %d restarted and serving after %v", victim, time.Since(st).Round(10*time.Millisecond))
		st = time.Now()
		for _, tp := range []string{"in", "out", "__transaction_state", "__consumer_offsets"} {
			if _, ok := fc.awaitFullISR(t, tp, 60*time.Second); !ok {
				t.Fatalf("%s: no full ISR after restarting node %d\n%s", tp, victim, fc.evidence(tp, nil, 60))
			}
		}
		r.logf("every partition of in, out, __transaction_state and __consumer_offsets led with a full ISR %v later", time.Since(st).Round(10*time.Millisecond))
		if watch.Ctx.Err() != nil {
			t.Fatalf("%s", strings.Join(watch.Died(), "; "))
		}
		if k < kills-1 {
			time.Sleep(time.Until(cycle.Add(period)))
		}
	}
	faultTime := time.Since(faultStart)
	r.logf("faults over (%d kills in %v); %d inputs acknowledged, %d copied", r.faults, faultTime.Round(100*time.Millisecond), r.prod.Acked(), chain.Copied())

	// The seeder stops; the chain catches up, stops, and is checked.
	r.prod.Stop(45 * time.Second)
	history := r.prod.History()
	r.logf("seeder stopped: %d attempted, %d acknowledged", len(history), r.prod.Acked())
	res := chain.finish()
	if keep := os.Getenv("FJORD_FAULT_LOGS"); keep != "" {
		writeFaultData(t, r.logDir, history, res.inLog)
	}
	rep := checkFaultHistory(history, res.inLog)
	trep := res.rep

	t.Logf("TXN FAULT FIGURES [%s]: acked-inputs=%d in-log=%d outputs-committed=%d duplicates=%d aborted-visible=%d live-bad=%d partial=%d lost=%d kills=%d (coordinator %d, out-leader %d, random %d) member-crashes=%d/%d | %s | in: %s | fault-phase=%v duration=%v seed=%d",
		faultMode(t), rep.Acked, trep.InRecords, trep.Visible, trep.Dup, trep.AbortedVisible, trep.LiveBad, trep.Partial, trep.Lost,
		r.faults, byKind["coordinator"], byKind["out-leader"], byKind["random"], res.crashed, crashes, trep.Figures(), rep.Figures(),
		faultTime.Round(100*time.Millisecond), time.Since(begin).Round(100*time.Millisecond), seed)

	failed := res.failed
	if !rep.OK() {
		failed = true
		t.Errorf("seeder history check on in failed: %s\n%s", rep.Figures(), rep.Details())
	}
	if failed {
		t.Logf("fault events:\n%s", strings.Join(r.events, "\n"))
		chain.evidence()
	}
	watch.Stop()
	for _, id := range fc.IDs() {
		if !fc.Running(id) {
			t.Errorf("node %d is not running at the end", id)
		}
	}
	checkNodesHealthy(t, fc.nodesByID())
}

// txnChain is a transactional chain (consume-transform-produce): two
// txnMembers of one group copying in to out in transactions, and a live
// read_committed reader of out. TestFaultTxnChain runs it alone under
// SIGKILLs; TestNetworkFaults beside the fault workload under network
// faults, copying the workload's own topic. Its input is any topic the
// fault workload's producer writes (the values are its sequence numbers,
// which the copies carry).
type txnChain struct {
	r        *faultRun
	in, out  string
	group    string
	outParts int
	members  []*txnMember
	live     *txnLiveReader
	adm      *kadm.Client
	stopped  bool
}

// txnChainResult is what txnChain.finish found.
type txnChainResult struct {
	rep      txnReport
	inLog    []faultRecord // in, read back to its end offsets
	caughtUp bool          // the group's commits reached in's ends
	settled  bool          // no transaction left open
	crashed  int           // member crashes that happened
	failed   bool          // an error was reported
}

// startTxnChain creates out (txnOutParts partitions, RF 3,
// min.insync.replicas 2), starts the members and the live reader and
// waits until both members have committed a transaction.
func startTxnChain(r *faultRun, in, out, group string) *txnChain {
	t, fc := r.t, r.fc
	t.Helper()
	createTxnFaultTopic(t, fc, out, txnOutParts)
	c := &txnChain{r: r, in: in, out: out, group: group, outParts: txnOutParts,
		adm: kadm.NewClient(newClient(t, fc.AllAddrs()[0], fc.seeds()...))}
	for i := 1; i <= 2; i++ {
		c.members = append(c.members, startTxnMember(t, fc, fmt.Sprintf("member-%d", i), fmt.Sprintf("%s-txn-%d", group, i),
			group, in, out, txnOutParts, txnTimeout, r.logDir))
	}
	t.Cleanup(c.stop)
	c.live = startTxnLiveReader(t, fc, out, txnOutParts)
	fc.Await(t, 30*time.Second, "both chain members commit transactions", func() (bool, string) {
		var s []string
		ok := true
		for _, m := range c.members {
			n, recs := m.Committed()
			ok = ok && n > 0
			s = append(s, fmt.Sprintf("%s: %d transactions (%d records)", m.name, n, recs))
		}
		return ok, strings.Join(s, ", ")
	})
	return c
}

func (c *txnChain) stop() {
	if c.stopped {
		return
	}
	c.stopped = true
	for _, m := range c.members {
		if err := m.Stop(60 * time.Second); err != nil {
			c.r.t.Errorf("%v", err)
		}
	}
}

// Copied is how many input records committed transactions copied so far.
func (c *txnChain) Copied() int { return txnCopied(c.members) }

// Crash makes the k-th crash's member (they take turns) crash at its next
// EndTxn. Crashes come in pairs: the first two stay away longer than the
// transaction timeout (the coordinator aborts), the next two come back at
// once (their InitProducerId aborts), and so on.
func (c *txnChain) Crash(k int) {
	m, pause := c.members[k%len(c.members)], txnTimeout+2*time.Second
	if (k/2)%2 == 1 {
		pause = 0
	}
	m.Crash(pause)
	c.r.logf("%s will crash at its next EndTxn and come back %v after giving up", m.name, pause)
}

// where describes the coordinators and out's leaders, for the event log.
func (c *txnChain) where() string { return txnWhere(c.r.fc, c.adm, c.members, c.group) }

// finish runs once in's producer has stopped: it waits up to 60 s for the
// chain to catch up (the group's stable commits reach in's ends), stops
// the members, waits for the transactions to settle (out's last stable
// offsets reach its high watermarks, neither transactional id has a
// transaction in progress), reads in and out back and checks the whole
// history with checkTxnChain. Failures are reported with t.Errorf.
func (c *txnChain) finish() txnChainResult {
	r, t, fc := c.r, c.r.t, c.r.fc
	t.Helper()
	var res txnChainResult
	inEnds := fc.stableEndOffsets(t, c.in, 30*time.Second)
	var committed map[int32]int64
	st := time.Now()
	var lastErr error
	for time.Since(st) < 60*time.Second {
		committed, lastErr = stableCommitted(c.adm, c.group, c.in)
		if lastErr == nil && sameOffsets(committed, inEnds) {
			res.caughtUp = true
			break
		}
		time.Sleep(250 * time.Millisecond)
	}
	if res.caughtUp {
		r.logf("the chain caught up %v after the seeder stopped: committed offsets = %s's ends %s", time.Since(st).Round(10*time.Millisecond), c.in, fmtOffsets(inEnds))
	} else {
		r.logf("the chain did not catch up within 60s: committed %s (last error %v), %s's ends %s", fmtOffsets(committed), lastErr, c.in, fmtOffsets(inEnds))
	}
	c.stop()
	for _, m := range c.members {
		res.crashed += len(m.Crashes())
		r.logf("%s", m.Summary())
	}

	st = time.Now()
	var outEnds, outLSO map[int32]int64
	state := ""
	for time.Since(st) < 3*txnTimeout {
		outEnds, outLSO, state = txnSettleState(c.adm, c.out, []string{c.members[0].txnID, c.members[1].txnID})
		if state == "" {
			res.settled = true
			break
		}
		time.Sleep(250 * time.Millisecond)
	}
	if res.settled {
		r.logf("transactions settled %v after the chain stopped: %s's LSO = HW %s", time.Since(st).Round(10*time.Millisecond), c.out, fmtOffsets(outEnds))
	} else {
		res.failed = true
		t.Errorf("transactions did not settle within %v after the chain stopped: %s", 3*txnTimeout, state)
	}
	time.Sleep(500 * time.Millisecond) // the live reader fetches the last markers
	liveRecs := c.live.Stop()
	r.logf("%s", c.live.Summary())
	if committed, lastErr = stableCommitted(c.adm, c.group, c.in); lastErr != nil {
		res.failed = true
		t.Errorf("the group's committed offsets: %v", lastErr)
	}
	if outEnds == nil {
		outEnds = fc.stableEndOffsets(t, c.out, 30*time.Second)
	}
	if outLSO == nil {
		outLSO = outEnds
	}

	res.inLog = fc.readBack(t, c.in, inEnds)
	outLog, err := readTxnOut(t, fc, c.out, outEnds, false, 60*time.Second)
	if err != nil {
		res.failed = true
		t.Errorf("reading %s (read_uncommitted): %v", c.out, err)
	}
	outRC, err := readTxnOut(t, fc, c.out, outLSO, true, 60*time.Second)
	if err != nil {
		res.failed = true
		t.Errorf("reading %s (read_committed): %v", c.out, err)
	}
	var batches []txnBatch
	for _, m := range c.members {
		batches = append(batches, m.Batches()...)
	}
	if keep := os.Getenv("FJORD_FAULT_LOGS"); keep != "" {
		writeTxnData(t, r.logDir, outLog, outRC, liveRecs, batches)
	}
	res.rep = checkTxnChain(txnChainData{In: res.inLog, InEnds: inEnds, OutLog: outLog, OutRC: outRC, Live: liveRecs,
		Committed: committed, Batches: batches, OutParts: c.outParts})
	if !res.rep.OK() {
		res.failed = true
		t.Errorf("transactional chain check failed: %s\n%s", res.rep.Figures(), res.rep.Details())
	}
	if res.rep.TxnCommitted == 0 || res.rep.Visible == 0 {
		res.failed = true
		t.Errorf("the chain copied nothing")
	}
	if !res.caughtUp {
		res.failed = true
		t.Errorf("the chain did not catch up with %s within 60s of the seeder stopping (committed %s, ends %s)", c.in, fmtOffsets(committed), fmtOffsets(inEnds))
	}
	return res
}

// evidence logs the members' summaries and the node logs about out and
// transactions, for a failed run.
func (c *txnChain) evidence() {
	t := c.r.t
	for _, m := range c.members {
		t.Logf("%s", m.Summary())
	}
	t.Logf("node logs (%s):\n%s", c.out, c.r.fc.evidence(c.out, []int32{0, 1, 2}, 120))
	t.Logf("node logs (transactions):\n%s", txnEvidence(c.r.fc, 80))
}

// createTxnFaultTopic creates topic at RF 3 with min.insync.replicas=2 and
// waits until every node agrees on it with full ISRs.
func createTxnFaultTopic(t *testing.T, fc *faultCluster, topic string, partitions int32) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	two := "2"
	resp, err := fc.Admin(1).CreateTopic(ctx, partitions, 3, map[string]*string{"min.insync.replicas": &two}, topic)
	if err != nil {
		t.Fatalf("create %q: %v (%s)", topic, err, resp.ErrMessage)
	}
	if _, ok := fc.awaitFullISR(t, topic, 30*time.Second); !ok {
		t.FailNow()
	}
}

// txnCoordinatorOf asks healthy nodes (FindCoordinator, key type 1) for
// the transaction coordinator of txnID, for up to timeout; -1 if none
// answered.
func txnCoordinatorOf(fc *faultCluster, txnID string, timeout time.Duration) int {
	deadline := time.Now().Add(timeout)
	for {
		for _, id := range fc.HealthyIDs() {
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
			resps := fc.Admin(id).FindTxnCoordinators(ctx, txnID)
			cancel()
			if c, ok := resps[txnID]; ok && c.Err == nil && c.NodeID > 0 {
				return int(c.NodeID)
			}
		}
		if time.Now().After(deadline) {
			return -1
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// txnWhere describes the coordinators and out's leaders, for the event log.
func txnWhere(fc *faultCluster, adm *kadm.Client, members []*txnMember, group string) string {
	var s []string
	for _, m := range members {
		s = append(s, fmt.Sprintf("%s coordinator %d", m.txnID, txnCoordinatorOf(fc, m.txnID, 0)))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	if g, ok := adm.FindGroupCoordinators(ctx, group)[group]; ok && g.Err == nil {
		s = append(s, fmt.Sprintf("group coordinator %d", g.NodeID))
	}
	if ls, err := fc.Leaders("out"); err == nil {
		s = append(s, fmt.Sprintf("out leaders %v", ls))
	}
	return strings.Join(s, ", ")
}

func txnCopied(members []*txnMember) int {
	n := 0
	for _, m := range members {
		_, recs := m.Committed()
		n += recs
	}
	return n
}

// stableCommitted returns group's committed offsets on topic with
// RequireStable (an error while a transactional commit is pending).
func stableCommitted(adm *kadm.Client, group, topic string) (map[int32]int64, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := adm.FetchOffsets(kadm.RequireStable(ctx), group)
	if err != nil {
		return nil, err
	}
	out := map[int32]int64{}
	var errs []error
	for tp, ps := range resp {
		for p, o := range ps {
			if o.Err != nil {
				errs = append(errs, fmt.Errorf("%s[%d]: %w", tp, p, o.Err))
				continue
			}
			if tp == topic {
				out[p] = o.At
			}
		}
	}
	return out, errors.Join(errs...)
}

// txnSettleState returns topic's high watermarks and last stable offsets
// and, unless every partition's are equal and none of txnIDs has a
// transaction in progress, what is still unsettled.
func txnSettleState(adm *kadm.Client, topic string, txnIDs []string) (hw, lso map[int32]int64, unsettled string) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		return nil, nil, "end offsets: " + err.Error()
	}
	stable, err := adm.ListCommittedOffsets(ctx, topic)
	if err == nil {
		err = stable.Error()
	}
	if err != nil {
		return nil, nil, "last stable offsets: " + err.Error()
	}
	hw, lso = map[int32]int64{}, map[int32]int64{}
	ends.Each(func(o kadm.ListedOffset) { hw[o.Partition] = o.Offset })
	stable.Each(func(o kadm.ListedOffset) { lso[o.Partition] = o.Offset })
	var why []string
	if !sameOffsets(hw, lso) {
		why = append(why, fmt.Sprintf("LSO %s < HW %s", fmtOffsets(lso), fmtOffsets(hw)))
	}
	ds, err := adm.DescribeTransactions(ctx, txnIDs...)
	if err != nil {
		why = append(why, "describe transactions: "+err.Error())
	}
	for _, d := range ds.Sorted() {
		switch {
		case d.Err != nil:
			why = append(why, fmt.Sprintf("%s: %v", d.TxnID, d.Err))
		case d.State != "Empty" && d.State != "CompleteCommit" && d.State != "CompleteAbort":
			why = append(why, fmt.Sprintf("%s: %s (producer %d epoch %d, partitions %v)", d.TxnID, d.State, d.ProducerID, d.ProducerEpoch, d.Topics))
		}
	}
	return hw, lso, strings.Join(why, "; ")
}

// txnEvidence returns, per node, the last max log lines about transactions
// (coordinator, markers, producer state) and the cluster-level lines.
func txnEvidence(fc *faultCluster, max int) string {
	var sb strings.Builder
	subs := []string{"transaction", "txn", "marker", "producer", "=== compat-tests", "panic"}
	for _, id := range fc.IDs() {
		var keep []string
		for _, l := range strings.Split(fc.Node(id).readLog(), "\n") {
			ll := strings.ToLower(l)
			for _, s := range subs {
				if strings.Contains(ll, s) {
					keep = append(keep, l)
					break
				}
			}
		}
		if len(keep) > max {
			keep = append([]string{fmt.Sprintf("... %d earlier lines left out", len(keep)-max)}, keep[len(keep)-max:]...)
		}
		fmt.Fprintf(&sb, "==== node %d (%s): %d lines about transactions:\n%s\n", id, fc.Node(id).logPath, len(keep), strings.Join(keep, "\n"))
	}
	return sb.String()
}

// writeTxnData writes out's records (read_uncommitted, read_committed, the
// live reader) and the members' transactions as tab-separated files into
// dir (kept with FJORD_FAULT_LOGS).
func writeTxnData(t *testing.T, dir string, outLog, outRC, live []txnOutRec, batches []txnBatch) {
	recs := func(rs []txnOutRec) string {
		var b strings.Builder
		b.WriteString("partition\toffset\tpid\tepoch\ttransactional\tcontrol\tcommit\tkey\tvalue\n")
		for _, r := range rs {
			fmt.Fprintf(&b, "%d\t%d\t%d\t%d\t%v\t%v\t%v\t%s\t%s\n", r.Partition, r.Offset, r.PID, r.Epoch, r.Txnl, r.Control, r.Commit, r.Key, r.Raw)
		}
		return b.String()
	}
	var tb strings.Builder
	tb.WriteString("id\tmember\tsession\tstart\tdone\tinputs\tcounts\toutcome\tpid\tepoch\tproduce_errors\terr\n")
	for _, b := range batches {
		fmt.Fprintf(&tb, "%s\t%s\t%d\t%s\t%s\t%d\t%v\t%s\t%d\t%d\t%d %s\t%s\n", b.ID, b.Member, b.Session, b.Start.Format("15:04:05.000000"),
			b.Done.Format("15:04:05.000000"), b.Inputs, b.Counts, b.Outcome, b.PID, b.Epoch, b.ProdErrs, b.ProdErr, b.Err)
	}
	for name, data := range map[string]string{"out.tsv": recs(outLog), "out-rc.tsv": recs(outRC), "out-live.tsv": recs(live), "txns.tsv": tb.String()} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
			t.Logf("writing %s: %v", name, err)
		}
	}
}
