package compattests

// Fault-injection scenarios (the proof of "no acknowledged record is ever
// lost"): a three-node cluster with min.insync.replicas=2 takes a steady
// idempotent acks=all workload and a consumer group while nodes are killed,
// frozen or cut off; once the faults stop and the cluster heals, every
// partition is read back and checked against the producer's history
// (fault_checker_test.go).
//
// Each scenario: a 6-partition RF 3 topic; an idempotent acks=all producer
// writing ~800 records/s through every node (fault_workload_test.go); a
// consumer group of two members that leave, committing, as soon as the
// faults are over; faults; 3s more production; then, once every partition
// is led with a full ISR again, a new group member resumes from the commits
// and a fresh consumer reads every partition back. One "FAULT FIGURES" line
// per scenario sums it up (go test -v).
//
// FJORD_FAULTS picks the scenarios and durations:
//   - unset or "short" (CI): TestFaultKillLeader and TestFaultKillTwo, each
//     within about 25s, plus TestFaultRollingRestart (fault_rolling_test.go,
//     ~15s), TestFaultChurnTopics (fault_churn_test.go, ~30s) and
//     TestFaultDiskCorruption (fault_disk_test.go, ~55s);
//   - "full": all of them, TestFaultKillLeader for 60s, the others ~30s,
//     the churn test ~2 min, the disk test ~3 min (make faults).
//
// FJORD_FAULT_LOGS=dir keeps, per run, the node logs, franz-go's producer
// log, the producer's history and the records read back (history.tsv,
// final.tsv); FJORD_FAULT_DEBUG=1 makes the producer log debug level
// (every produce request and response); FJORD_FAULT_DELIVERY_TIMEOUT sets a
// producer delivery timeout (none by default: see faultDeliveryTimeout).

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

const (
	faultPartitions = 6
	faultRate       = 800 // records per second
)

// faultMode returns "short" or "full" from FJORD_FAULTS.
func faultMode(t *testing.T) string {
	t.Helper()
	switch m := os.Getenv("FJORD_FAULTS"); m {
	case "", "short":
		return "short"
	case "full":
		return "full"
	default:
		t.Fatalf("FJORD_FAULTS=%q: want short or full", m)
		return ""
	}
}

// faultRun is one scenario's run: the cluster, its workload and what the
// fault injector did.
type faultRun struct {
	t      *testing.T
	name   string
	fc     *faultCluster
	topic  string
	prod   *faultProducer
	start  time.Time
	faults int
	events []string
	// noAcks are intervals in which no record may be acknowledged.
	noAcks [][2]time.Time
	// members are the group's members during the faults.
	members []*faultMember
	// modeName, if set, is the mode the FAULT FIGURES line names
	// (default: FJORD_FAULTS's).
	modeName string
	// logDir holds the clients' logs (and, with FJORD_FAULT_LOGS, the
	// data files) that are kept with the node logs.
	logDir string
}

func (r *faultRun) mode() string {
	if r.modeName != "" {
		return r.modeName
	}
	return faultMode(r.t)
}

func (r *faultRun) logf(format string, args ...any) {
	now := time.Now()
	s := fmt.Sprintf("t+%5.1fs (%s) ", now.Sub(r.start).Seconds(), now.Format("15:04:05.000")) + fmt.Sprintf(format, args...)
	r.events = append(r.events, s)
	r.t.Log(s)
}

// busiestLeader returns the busiest partition and its current leader as a
// healthy node sees it (waiting up to 5s for one), or -1 for the leader.
func (r *faultRun) busiestLeader() (int32, int) {
	p := r.prod.Busiest()
	return p, r.fc.awaitLeaderOf(r.topic, p, 5*time.Second)
}

// restartAll restarts the given (killed) nodes at once and waits until
// each serves; ports cannot change, so a bind failure is retried.
func (r *faultRun) restartAll(ids ...int) {
	r.t.Helper()
	errs := make([]error, len(ids))
	var wg sync.WaitGroup
	for i, id := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			deadline := time.Now().Add(20 * time.Second)
			for {
				err := r.fc.launchNode(id)
				if err == nil || !errors.Is(err, errBindFailed) || time.Now().After(deadline) {
					errs[i] = err
					return
				}
				time.Sleep(200 * time.Millisecond)
			}
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			r.t.Fatalf("restarting node %d: %v\n%s", ids[i], err, r.fc.evidence(r.topic, nil, 60))
		}
	}
}

// runFaultScenario starts a cluster and the workload, runs inject (which
// returns once its faults are over and every node is back), lets the
// workload run on for tail, and checks everything.
func runFaultScenario(t *testing.T, name string, tail time.Duration, inject func(r *faultRun)) {
	begin := time.Now()
	fc := startFaultCluster(t, 3)
	runFaultScenarioOn(t, fc, begin, name, tail, inject, nil)
}

// faultCheck is a scenario's own check, run once the group's final
// commits are known: it returns its figures for the FAULT FIGURES line
// and whether it found a problem (which it reported with t.Errorf).
type faultCheck func(r *faultRun, committed map[int32]int64) (figures string, failed bool)

// runFaultScenarioOn is runFaultScenario on a cluster already started
// (begin is when its start began), with check (if not nil) run besides
// the common checks.
func runFaultScenarioOn(t *testing.T, fc *faultCluster, begin time.Time, name string, tail time.Duration, inject func(r *faultRun), check faultCheck) {
	runFaultScenarioRate(t, fc, begin, name, faultRate, tail, inject, check)
}

// runFaultScenarioRate is runFaultScenarioOn with the producer writing
// rate records per second.
func runFaultScenarioRate(t *testing.T, fc *faultCluster, begin time.Time, name string, rate int, tail time.Duration, inject func(r *faultRun), check faultCheck) {
	r := &faultRun{t: t, name: name, fc: fc, topic: "faults-" + name, logDir: t.TempDir()}
	logDir := r.logDir
	if keep := os.Getenv("FJORD_FAULT_LOGS"); keep != "" {
		// Runs before the cluster's own clean-up (LIFO): the nodes are
		// still up and their logs still there.
		t.Cleanup(func() { keepFaultLogs(t, fc, logDir, filepath.Join(keep, t.Name()+"-"+time.Now().Format("150405"))) })
	}
	fc.createFaultTopic(t, r.topic, faultPartitions)
	fc.createFaultTopic(t, r.topic+"-probe", 3) // for probes outside the checked history
	group := "faults-group-" + name
	m1 := startFaultMember(t, fc, "member-1", group, r.topic)
	m2 := startFaultMember(t, fc, "member-2", group, r.topic)
	r.members = []*faultMember{m1, m2}
	r.prod = startFaultProducer(t, fc, r.topic, rate, logDir)
	r.start = time.Now()

	// Warm up: traffic on every partition, the group settled.
	fc.WaitFor(t, 15*time.Second, func() bool { return r.prod.Acked() >= rate })
	time.Sleep(time.Second)
	r.logf("warm: %d acknowledged; injecting faults", r.prod.Acked())

	faultStart := time.Now()
	inject(r)
	faultTime := time.Since(faultStart)
	r.logf("faults over (%d injected in %v)", r.faults, faultTime.Round(100*time.Millisecond))
	// The members leave now, committing what they processed; what the
	// producer writes from here on is left for the resuming member.
	m1.Leave(t)
	m2.Leave(t)
	r.logf("group members left: %s; %s", m1.Summary(), m2.Summary())
	r.logf("producing on for %v", tail)
	time.Sleep(tail)
	r.prod.Stop(45 * time.Second)
	r.logf("producer stopped: %d attempted, %d acknowledged", len(r.prod.History()), r.prod.Acked())

	healed, ok := fc.awaitFullISR(t, r.topic, 90*time.Second)
	if !ok {
		t.Fatalf("the cluster did not recover: partitions never all led with a full ISR\n%s",
			fc.evidence(r.topic, allPartitions(), 80))
	}
	r.logf("every partition led with a full ISR on every node (%v after the producer stopped)", healed.Round(10*time.Millisecond))
	ends := fc.stableEndOffsets(t, r.topic, 30*time.Second)
	r.logf("end offsets %s", fmtOffsets(ends))

	committed := fc.committed(t, group, r.topic)
	r.logf("committed offsets %s", fmtOffsets(committed))
	var ownFigures string
	ownFailed := false
	if check != nil {
		ownFigures, ownFailed = check(r, committed)
		ownFigures = " | " + ownFigures
	}
	resumed := fc.resumeGroup(t, group, r.topic, ends)
	final := fc.readBack(t, r.topic, ends)

	history := r.prod.History()
	if keep := os.Getenv("FJORD_FAULT_LOGS"); keep != "" {
		writeFaultData(t, logDir, history, final)
	}
	rep := checkFaultHistory(history, final)
	grp := checkFaultGroup(history, final, append(m1.Consumed(), m2.Consumed()...), committed, resumed, ends)

	// Acknowledgements inside a no-ack window.
	var badAcks []string
	badAckN := 0
	for _, a := range history {
		if a.Outcome != faultAcked {
			continue
		}
		for _, w := range r.noAcks {
			if !a.Done.Before(w[0]) && a.Done.Before(w[1]) {
				badAckN++
				if len(badAcks) < 20 {
					badAcks = append(badAcks, fmt.Sprintf("value %d acked at p%d@%d at t+%.3fs (sent t+%.3fs)",
						a.Seq, a.Partition, a.Offset, a.Done.Sub(r.start).Seconds(), a.Sent.Sub(r.start).Seconds()))
				}
			}
		}
	}
	if badAckN > len(badAcks) {
		badAcks = append(badAcks, fmt.Sprintf("... and %d more", badAckN-len(badAcks)))
	}

	dataLoss := r.prod.DataLoss()
	t.Logf("FAULT FIGURES %s [%s]: acked=%d read=%d lost=%d (client-false-acks=%d) dup=%d reordered=%d unexpected=%d misplaced=%d indefinite(landed/not)=%d/%d definite-failed=%d attempted=%d | %s | acks-in-no-ack-windows=%d client-data-loss-events=%d | faults=%d fault-phase=%v duration=%v%s",
		name, r.mode(), rep.Acked, rep.Read, rep.Lost, rep.FalseAcks, rep.Dup, rep.Reordered, rep.Unexpected, rep.Misplaced,
		rep.IndefLanded, rep.IndefNotLanded, rep.Definite, rep.Attempted, grp.Figures(), badAckN, len(dataLoss),
		r.faults, faultTime.Round(100*time.Millisecond), time.Since(begin).Round(100*time.Millisecond), ownFigures)

	if errs := failureCounts(history); errs != "" {
		t.Logf("producer failures by error: %s", errs)
	}
	failed := ownFailed
	if !rep.OK() {
		failed = true
		t.Errorf("history check failed: %s\n%s", rep.Figures(), rep.Details())
	}
	if !grp.OK() {
		failed = true
		t.Errorf("consumer group check failed: %s\n%s", grp.Figures(), grp.Details())
	}
	if badAckN > 0 {
		failed = true
		t.Errorf("records acknowledged while acks=all could not be satisfied (windows %s):\n%s", r.fmtWindows(), strings.Join(badAcks, "\n"))
	}
	if rep.Acked == 0 {
		failed = true
		t.Errorf("nothing was acknowledged")
	}
	if len(dataLoss) > 0 {
		t.Logf("franz-go detected data loss (OUT_OF_ORDER_SEQUENCE_NUMBER / UNKNOWN_PRODUCER_ID) on: %s", strings.Join(dataLoss, "; "))
	}
	if failed || len(dataLoss) > 0 {
		t.Logf("fault events:\n%s", strings.Join(r.events, "\n"))
		t.Logf("producer log (errors, data loss):\n%s", r.prod.logLines(60, "data loss", "OUT_OF_ORDER", "UNKNOWN_PRODUCER", "DUPLICATE_SEQUENCE", "failing the producer ID", "resetting"))
		t.Logf("node logs:\n%s", fc.evidence(r.topic, involved(rep), 120))
	}
}

// failureCounts summarises failed records by error.
func failureCounts(h []faultAttempt) string {
	n := map[string]int{}
	for _, a := range h {
		if a.Outcome == faultDefinite || a.Outcome == faultIndefinite {
			n[a.Outcome.String()+": "+a.Err]++
		} else if a.Outcome == faultPending {
			n["pending"]++
		}
	}
	var out []string
	for e, c := range n {
		out = append(out, fmt.Sprintf("%d× %s", c, e))
	}
	slices.Sort(out)
	return strings.Join(out, "; ")
}

// writeFaultData writes the producer's history and the records read back
// as tab-separated files into dir (kept with FJORD_FAULT_LOGS).
func writeFaultData(t *testing.T, dir string, history []faultAttempt, final []faultRecord) {
	var hb strings.Builder
	hb.WriteString("seq\tkey\tsent\toutcome\tdone\tpartition\toffset\terr\n")
	for _, a := range history {
		fmt.Fprintf(&hb, "%d\t%s\t%s\t%s\t%s\t%d\t%d\t%s\n", a.Seq, a.Key, a.Sent.Format("15:04:05.000000"), a.Outcome,
			a.Done.Format("15:04:05.000000"), a.Partition, a.Offset, a.Err)
	}
	var fb strings.Builder
	fb.WriteString("partition\toffset\tkey\tvalue\n")
	for _, r := range final {
		fmt.Fprintf(&fb, "%d\t%d\t%s\t%s\n", r.Partition, r.Offset, r.Key, r.Value)
	}
	for name, data := range map[string]string{"history.tsv": hb.String(), "final.tsv": fb.String()} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
			t.Logf("writing %s: %v", name, err)
		}
	}
}

// keepFaultLogs copies the node logs and the client logs in logDir to dir
// (FJORD_FAULT_LOGS).
func keepFaultLogs(t *testing.T, fc *faultCluster, logDir, dir string) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Logf("keeping logs: %v", err)
		return
	}
	files := map[string]string{}
	for _, id := range fc.IDs() {
		files[fc.Node(id).logPath] = fmt.Sprintf("node%d.log", id)
	}
	ents, _ := os.ReadDir(logDir)
	for _, e := range ents {
		files[filepath.Join(logDir, e.Name())] = e.Name()
	}
	for from, to := range files {
		data, err := os.ReadFile(from)
		if err == nil {
			err = os.WriteFile(filepath.Join(dir, to), data, 0o644)
		}
		if err != nil {
			t.Logf("keeping %s: %v", from, err)
		}
	}
	t.Logf("logs kept in %s", dir)
}

func allPartitions() []int32 {
	var out []int32
	for p := range int32(faultPartitions) {
		out = append(out, p)
	}
	return out
}

// involved lists the partitions a failed check points at (all of them if
// it cannot tell).
func involved(rep faultReport) []int32 {
	set := map[int32]bool{}
	for _, line := range rep.Problems {
		for p := range int32(faultPartitions) {
			if strings.Contains(line, fmt.Sprintf("p%d@", p)) || strings.Contains(line, fmt.Sprintf("partition %d ", p)) {
				set[p] = true
			}
		}
	}
	if len(set) == 0 {
		return allPartitions()
	}
	var out []int32
	for p := range set {
		out = append(out, p)
	}
	slices.Sort(out)
	return out
}

func (r *faultRun) fmtWindows() string {
	var ws []string
	for _, w := range r.noAcks {
		ws = append(ws, fmt.Sprintf("[t+%.3fs, t+%.3fs)", w[0].Sub(r.start).Seconds(), w[1].Sub(r.start).Seconds()))
	}
	return strings.Join(ws, " ")
}

// TestFaultKillLeader: SIGKILL the leader of the busiest partition every 4s
// and restart it (same ports and data) 2s later.
func TestFaultKillLeader(t *testing.T) {
	d := 12 * time.Second
	if faultMode(t) == "full" {
		d = 60 * time.Second
	}
	const period, down = 4 * time.Second, 2 * time.Second
	runFaultScenario(t, "kill-leader", 3*time.Second, func(r *faultRun) {
		end := time.Now().Add(d)
		for time.Now().Before(end) {
			cycle := time.Now()
			p, l := r.busiestLeader()
			if l < 0 {
				l = r.fc.LiveIDs()[0]
				r.logf("p%d has no live leader; killing node %d instead", p, l)
			}
			r.fc.Kill(l)
			r.faults++
			r.logf("SIGKILL node %d (leader of busiest partition p%d); %d acknowledged so far", l, p, r.prod.Acked())
			time.Sleep(down)
			st := time.Now()
			r.fc.Restart(l)
			r.logf("node %d restarted and serving after %v", l, time.Since(st).Round(10*time.Millisecond))
			time.Sleep(time.Until(cycle.Add(period)))
		}
	})
}

// TestFaultKillTwo: SIGKILL two of the three nodes at once, keeping the
// leader of the busiest partition. While only one node is up, acks=all
// cannot be satisfied (min.insync.replicas=2, and no metadata quorum to
// shrink an ISR): nothing may be acknowledged, after a short grace for
// requests already replicated when the kills landed. Then both restart and
// nothing acknowledged may be missing.
func TestFaultKillTwo(t *testing.T) {
	down := 6 * time.Second
	rounds := 1
	if faultMode(t) == "full" {
		down, rounds = 8*time.Second, 2
	}
	const grace = time.Second
	batch := recordBatch(t, []byte("probe"), []byte("probe"))
	runFaultScenario(t, "kill-two", 3*time.Second, func(r *faultRun) {
		for round := range rounds {
			if round > 0 {
				time.Sleep(5 * time.Second) // recovered traffic between the rounds
			}
			p, keep := r.busiestLeader()
			if keep < 0 {
				keep = r.fc.LiveIDs()[0]
			}
			victims := others(r.fc.IDs(), keep)
			for _, id := range victims {
				r.fc.Kill(id)
			}
			killed := time.Now()
			r.faults += len(victims)
			r.logf("SIGKILL nodes %v, keeping node %d (leader of busiest partition p%d); %d acknowledged so far", victims, keep, p, r.prod.Acked())
			before := r.prod.Acked()
			probeDone := make(chan string)
			go func() { probeDone <- probeRefusal(r, keep, batch, killed.Add(grace), killed.Add(down)) }()
			time.Sleep(down)
			r.logf("probe of node %d: %s", keep, <-probeDone)
			restart := time.Now()
			r.noAcks = append(r.noAcks, [2]time.Time{killed.Add(grace), restart})
			r.logf("restarting nodes %v; %d acknowledged while down (%d within the %v grace)", victims, r.prod.Acked()-before,
				countAcked(r.prod.History(), killed, killed.Add(grace)), grace)
			r.restartAll(victims...)
			r.logf("nodes %v serving again after %v", victims, time.Since(restart).Round(10*time.Millisecond))
		}
	})
}

// probeRefusal sends, from start until end, one raw acks=all Produce
// request a second straight to node id for the partitions of the probe
// topic it leads (no client retries, so the broker's own answer shows):
// each must fail. It returns a summary; an acknowledged probe fails r's
// test.
func probeRefusal(r *faultRun, id int, batch []byte, start, end time.Time) string {
	time.Sleep(time.Until(start))
	topic := r.topic + "-probe"
	ls, err := r.fc.Leaders(topic)
	if err != nil {
		return fmt.Sprintf("no metadata: %v", err)
	}
	var led []int32
	for p, l := range ls {
		if int(l) == id {
			led = append(led, p)
		}
	}
	slices.Sort(led)
	if len(led) == 0 {
		return fmt.Sprintf("node %d leads no probe partition (%v)", id, ls)
	}
	// The probe names its topic: Produce v12 at most (v13 names it by id).
	cl, err := kgo.NewClient(kgo.SeedBrokers(r.fc.Addr(id)), kgo.RequestRetries(0), maxProduceVersion(12))
	if err != nil {
		return err.Error()
	}
	defer cl.Close()
	outcomes := map[string]int{}
	acked := 0
	for time.Until(end) > 2500*time.Millisecond { // a probe takes up to 2s (its timeout)
		req := kmsg.NewPtrProduceRequest()
		req.Acks, req.TimeoutMillis = -1, 2000
		rt := kmsg.NewProduceRequestTopic()
		rt.Topic = topic
		for _, p := range led {
			rp := kmsg.NewProduceRequestTopicPartition()
			rp.Partition, rp.Records = p, batch
			rt.Partitions = append(rt.Partitions, rp)
		}
		req.Topics = append(req.Topics, rt)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		resp, err := cl.Broker(id).Request(ctx, req)
		cancel()
		if err != nil {
			outcomes["request error: "+err.Error()]++
			time.Sleep(time.Second)
			continue
		}
		for _, tp := range resp.(*kmsg.ProduceResponse).Topics {
			for _, pp := range tp.Partitions {
				if pp.ErrorCode == 0 {
					acked++
					r.t.Errorf("probe to partition %d of node %d acknowledged at offset %d with two of three nodes down", pp.Partition, id, pp.BaseOffset)
					continue
				}
				outcomes[kerr.ErrorForCode(pp.ErrorCode).Error()]++
			}
		}
		time.Sleep(time.Second)
	}
	return fmt.Sprintf("%d acks=all probes to partitions %v acknowledged; answers: %v", acked, led, outcomes)
}

func countAcked(h []faultAttempt, from, to time.Time) int {
	n := 0
	for _, a := range h {
		if a.Outcome == faultAcked && !a.Done.Before(from) && a.Done.Before(to) {
			n++
		}
	}
	return n
}

// TestFaultFreezeLeader (full mode only): SIGSTOP the leader of the busiest
// partition for 6s, twice the session timeout, then SIGCONT. The rest of
// the cluster fences it and moves its leaderships; the zombie leader must
// not get acks=all writes acknowledged that are then lost.
func TestFaultFreezeLeader(t *testing.T) {
	if faultMode(t) != "full" {
		t.Skip("FJORD_FAULTS=full only")
	}
	const d, frozen, recover = 30 * time.Second, 6 * time.Second, 6 * time.Second
	runFaultScenario(t, "freeze-leader", 3*time.Second, func(r *faultRun) {
		end := time.Now().Add(d)
		for time.Until(end) >= frozen {
			p, l := r.busiestLeader()
			if l < 0 {
				r.logf("p%d has no live leader; waiting", p)
				time.Sleep(time.Second)
				continue
			}
			r.fc.Freeze(t, l)
			r.faults++
			r.logf("SIGSTOP node %d (leader of busiest partition p%d); %d acknowledged so far", l, p, r.prod.Acked())
			time.Sleep(frozen)
			r.fc.Thaw(t, l)
			r.logf("SIGCONT node %d", l)
			time.Sleep(min(recover, time.Until(end)))
		}
	})
}

// TestFaultIsolateLeader (full mode only): cut the leader of the busiest
// partition off from the other two nodes (quorum and replication links,
// through the proxies) for 8s while clients still reach it, then heal.
func TestFaultIsolateLeader(t *testing.T) {
	if faultMode(t) != "full" {
		t.Skip("FJORD_FAULTS=full only")
	}
	const d, cut, recover = 30 * time.Second, 8 * time.Second, 7 * time.Second
	runFaultScenario(t, "isolate-leader", 3*time.Second, func(r *faultRun) {
		end := time.Now().Add(d)
		for time.Until(end) >= cut {
			p, l := r.busiestLeader()
			if l < 0 {
				r.logf("p%d has no live leader; waiting", p)
				time.Sleep(time.Second)
				continue
			}
			r.fc.Isolate(l)
			r.faults++
			r.logf("cut node %d (leader of busiest partition p%d) off from the others; %d acknowledged so far", l, p, r.prod.Acked())
			time.Sleep(cut)
			r.fc.Rejoin(l)
			r.logf("healed node %d's links", l)
			time.Sleep(min(recover, time.Until(end)))
		}
	})
}
