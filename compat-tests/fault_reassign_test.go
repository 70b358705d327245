package compattests

// TestFaultReassign: a partition reassignment under the fault workload,
// with SIGKILLs in the middle of the move. On a four-node cluster
// (min.insync.replicas=2, RF 3) one partition of the fault topic is
// filled with large records, then moved off its leader to the fourth
// broker while the acks=all workload runs; during the move the adding
// replica is killed and restarted, then the partition's leader (a
// replica the move removes), then the active controller if it is a third
// node. The move must complete, the removed broker must delete its copy,
// and every acknowledged record — the workload's and the fill's — must be
// read back exactly once, in order (fault_checker_test.go).
//
// FJORD_FAULTS unset or "short": 32 MB moved through a 2 MB/s
// replication throttle (~30 s in all). "full": 1 GB moved unthrottled;
// the FAULT FIGURES line gives the move's time and the workload's ack
// latency (p50/p99/max) before and during the move.

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// fillKey marks the records that fill the moved partition; they are not
// part of the workload's history and are checked on their own.
const fillKey = "fill"

// fillValue is fill record i: its decimal index, '/', then pseudo-random
// bytes seeded by i (incompressible, reproducible) to size bytes.
func fillValue(i, size int) []byte {
	v := make([]byte, 0, size)
	v = strconv.AppendInt(v, int64(i), 10)
	v = append(v, '/')
	r := rand.New(rand.NewPCG(uint64(i), 0x5eed))
	for len(v)+8 <= size {
		x := r.Uint64()
		v = append(v, byte(x), byte(x>>8), byte(x>>16), byte(x>>24), byte(x>>32), byte(x>>40), byte(x>>48), byte(x>>56))
	}
	for len(v) < size {
		v = append(v, byte(r.Uint32()))
	}
	return v
}

// fillPartition writes n fill records of size bytes to partition p of
// topic, acks=all, and fails unless every one is acknowledged.
func fillPartition(t testing.TB, fc *faultCluster, topic string, p int32, n, size int) {
	t.Helper()
	cl := newClient(t, fc.AllAddrs()[0], kgo.SeedBrokers(fc.AllAddrs()...), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerBatchMaxBytes(1<<20), kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.MaxBufferedBytes(64<<20))
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	errc := make(chan error, n)
	for i := range n {
		cl.Produce(ctx, &kgo.Record{Topic: topic, Partition: p, Key: []byte(fillKey), Value: fillValue(i, size)},
			func(_ *kgo.Record, err error) { errc <- err })
	}
	for range n {
		if err := <-errc; err != nil {
			t.Fatalf("filling %s[%d]: %v", topic, p, err)
		}
	}
}

// readBackFill reads every partition of topic from 0 to ends, returning the
// workload's records and the fill records' indexes in read order; a fill
// record whose bytes are not fillValue's is reported in bad.
func readBackFill(t testing.TB, fc *faultCluster, topic string, ends map[int32]int64, size int) (work []faultRecord, fill []int, bad []string) {
	t.Helper()
	starts := map[int32]kgo.Offset{}
	for p := range ends {
		starts[p] = kgo.NewOffset().At(0)
	}
	cl := newClient(t, fc.AllAddrs()[0], kgo.SeedBrokers(fc.AllAddrs()...),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: starts}),
		kgo.FetchMaxWait(200*time.Millisecond), kgo.FetchMaxBytes(64<<20))
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	next := map[int32]int64{}
	done := func() bool {
		for p, e := range ends {
			if next[p] < e {
				return false
			}
		}
		return true
	}
	for !done() {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Errorf("reading %q back: read up to %s, want %s", topic, fmtOffsets(next), fmtOffsets(ends))
			return
		}
		fs.EachRecord(func(r *kgo.Record) {
			next[r.Partition] = max(next[r.Partition], r.Offset+1)
			if string(r.Key) != fillKey {
				work = append(work, faultRecordOf(r))
				return
			}
			idx, _, _ := strings.Cut(string(r.Value[:min(len(r.Value), 24)]), "/")
			i, err := strconv.Atoi(idx)
			if err != nil || string(r.Value) != string(fillValue(i, size)) {
				bad = append(bad, fmt.Sprintf("p%d@%d: fill record %q damaged", r.Partition, r.Offset, idx))
				return
			}
			fill = append(fill, i)
		})
	}
	return
}

// latencies summarises the ack latency of the acknowledged attempts sent
// in [from, to).
func latencies(h []faultAttempt, from, to time.Time) string {
	var ds []time.Duration
	for _, a := range h {
		if a.Outcome == faultAcked && !a.Sent.Before(from) && a.Sent.Before(to) {
			ds = append(ds, a.Done.Sub(a.Sent))
		}
	}
	if len(ds) == 0 {
		return "n=0"
	}
	sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
	q := func(f float64) time.Duration {
		return ds[min(len(ds)-1, int(f*float64(len(ds))))].Round(100 * time.Microsecond)
	}
	return fmt.Sprintf("n=%d p50=%v p99=%v max=%v", len(ds), q(0.5), q(0.99), ds[len(ds)-1].Round(100*time.Microsecond))
}

func TestFaultReassign(t *testing.T) {
	begin := time.Now()
	mode := faultMode(t)
	fillN, fillSize := 512, 64<<10 // 32 MB
	extra := []string{"leader.replication.throttled.rate=2097152", "follower.replication.throttled.rate=2097152"}
	if mode == "full" {
		fillN, extra = 16384, nil // 1 GB, unthrottled
	}
	fc := startFaultCluster(t, 4, extra...)
	topic := "faults-reassign"
	logDir := t.TempDir()
	if keep := os.Getenv("FJORD_FAULT_LOGS"); keep != "" {
		t.Cleanup(func() { keepFaultLogs(t, fc, logDir, filepath.Join(keep, t.Name()+"-"+time.Now().Format("150405"))) })
	}
	all := "*"
	configs := map[string]*string{"leader.replication.throttled.replicas": &all, "follower.replication.throttled.replicas": &all}
	if resp, err := fc.Admin(1).CreateTopic(testCtx(t, 15*time.Second), faultPartitions, 3, configs, topic); err != nil {
		t.Fatalf("create %q: %v (%s)", topic, err, resp.ErrMessage)
	}
	ids := fc.IDs()
	full := func(d time.Duration) (kadm.TopicDetail, time.Duration) {
		return fc.awaitTopic(t, d, topic, ids, replicasOn(ids, 3))
	}
	full(30 * time.Second)
	const p = int32(0)

	r := &faultRun{t: t, name: "reassign", fc: fc, topic: topic}
	r.start = time.Now()
	fillStart := time.Now()
	fillPartition(t, fc, topic, p, fillN, fillSize)
	r.logf("filled p%d with %d MB in %v", p, fillN*fillSize>>20, time.Since(fillStart).Round(100*time.Millisecond))

	r.prod = startFaultProducer(t, fc, topic, faultRate, logDir)
	fc.WaitFor(t, 15*time.Second, func() bool { return r.prod.Acked() >= faultRate })
	warmEnd := time.Now()
	r.logf("warm: %d acknowledged", r.prod.Acked())

	var moves []reassignMove
	if mode == "full" {
		// First a move without faults, to measure it.
		moves = append(moves, r.reassignMove(p, ids, false))
	}
	m := r.reassignMove(p, ids, true)
	moves = append(moves, m)
	time.Sleep(3 * time.Second)
	r.prod.Stop(45 * time.Second)
	r.logf("producer stopped: %d attempted, %d acknowledged", len(r.prod.History()), r.prod.Acked())
	var figures []string
	for _, m := range moves {
		// Latency from the final history: acknowledgements still pending
		// at the move's end count too.
		m.latency = latencies(r.prod.History(), m.start, m.end)
		figures = append(figures, m.String())
	}
	if td, _ := full(90 * time.Second); !slices.Equal(td.Partitions[p].Replicas, m.target) {
		t.Errorf("p%d replicas %v after the move, want %v", p, td.Partitions[p].Replicas, m.target)
	}
	ends := fc.stableEndOffsets(t, topic, 30*time.Second)
	r.logf("end offsets %s", fmtOffsets(ends))
	work, fill, bad := readBackFill(t, fc, topic, ends, fillSize)

	history := r.prod.History()
	if os.Getenv("FJORD_FAULT_LOGS") != "" {
		writeFaultData(t, logDir, history, work)
	}
	rep := checkFaultHistory(history, work)
	// The fill: every record once, in order.
	fillOK := len(fill) == fillN && len(bad) == 0
	for i, v := range fill {
		if v != i {
			fillOK = false
			bad = append(bad, fmt.Sprintf("fill record %d read at position %d", v, i))
			break
		}
	}
	dataLoss := r.prod.DataLoss()
	t.Logf("FAULT FIGURES reassign [%s]: acked=%d read=%d lost=%d (client-false-acks=%d) dup=%d reordered=%d unexpected=%d misplaced=%d indefinite(landed/not)=%d/%d definite-failed=%d attempted=%d | fill=%d/%d records of %d KB ok=%t | %d MB moved: %s | ack latency before the moves %s | client-data-loss-events=%d | faults=%d duration=%v",
		mode, rep.Acked, rep.Read, rep.Lost, rep.FalseAcks, rep.Dup, rep.Reordered, rep.Unexpected, rep.Misplaced,
		rep.IndefLanded, rep.IndefNotLanded, rep.Definite, rep.Attempted, len(fill), fillN, fillSize>>10, fillOK,
		fillN*fillSize>>20, strings.Join(figures, "; "), latencies(history, r.start, warmEnd), len(dataLoss),
		r.faults, time.Since(begin).Round(100*time.Millisecond))
	failed := false
	if !rep.OK() {
		failed = true
		t.Errorf("history check failed: %s\n%s", rep.Figures(), rep.Details())
	}
	if !fillOK {
		failed = true
		t.Errorf("fill check failed: read %d of %d; %s", len(fill), fillN, strings.Join(bad[:min(len(bad), 20)], "; "))
	}
	if rep.Acked == 0 {
		failed = true
		t.Errorf("nothing was acknowledged")
	}
	if failed || len(dataLoss) > 0 {
		t.Logf("fault events:\n%s", strings.Join(r.events, "\n"))
		t.Logf("node logs:\n%s", fc.evidence(topic, []int32{p}, 120))
	}
}

// reassignMove is one move of the fault test and what it measured.
type reassignMove struct {
	from, target []int32
	leader       int32
	faults       int
	start, end   time.Time
	latency      string // the workload's ack latency during the move, set by the caller
}

func (m reassignMove) String() string {
	return fmt.Sprintf("%v->%v (leader %d) with %d kills in %v, ack latency during it %s",
		m.from, m.target, m.leader, m.faults, m.end.Sub(m.start).Round(100*time.Millisecond), m.latency)
}

// reassignMove moves partition p off its leader onto the broker that does
// not hold it, through a node that stays up, and waits until the move is
// done and the leader it left has deleted its copy. With kills, the adding
// replica, then the partition's leader, then the active controller (if it
// is a third node) are SIGKILLed and restarted 2 s later, each only while
// the move is still in progress.
func (r *faultRun) reassignMove(p int32, ids []int, kills bool) reassignMove {
	t, fc, topic := r.t, r.fc, r.topic
	t.Helper()
	td, _ := fc.awaitTopic(t, 60*time.Second, topic, ids, replicasOn(ids, 3))
	before := td.Partitions[p]
	m := reassignMove{from: before.Replicas, leader: before.Leader}
	spare := spareOf(ids, before.Replicas)
	m.target = append(slices.DeleteFunc(slices.Clone(before.Replicas), func(id int32) bool { return id == m.leader }), spare)
	r.logf("moving p%d from %v (leader %d) to %v", p, m.from, m.leader, m.target)

	admID := int(m.target[0])
	var req kadm.AlterPartitionAssignmentsReq
	req.Assign(topic, p, m.target)
	m.start = time.Now()
	resps, err := fc.Admin(admID).AlterPartitionAssignments(testCtx(t, 30*time.Second), req)
	if err == nil {
		err = resps[topic][p].Err
	}
	if err != nil {
		t.Fatalf("reassign: %v", err)
	}
	moving := func() (bool, string) {
		s := make(kadm.TopicsSet)
		s.Add(topic, p)
		got, err := fc.Admin(admID).ListPartitionReassignments(testCtx(t, 10*time.Second), s)
		if err != nil {
			return true, err.Error()
		}
		mv, ok := got[topic][p]
		return ok, fmt.Sprintf("%+v", mv)
	}
	if ok, st := moving(); !ok {
		t.Fatalf("the move is not listed right after it started (%s): too little data to kill anything mid-move", st)
	}
	kill := func(id int, why string) {
		if ok, _ := moving(); !ok {
			r.logf("move already complete; not killing node %d (%s)", id, why)
			return
		}
		fc.Kill(id)
		r.faults++
		m.faults++
		r.logf("SIGKILL node %d (%s); %d acknowledged so far", id, why, r.prod.Acked())
		time.Sleep(2 * time.Second)
		st := time.Now()
		fc.Restart(id)
		r.logf("node %d restarted and serving after %v", id, time.Since(st).Round(10*time.Millisecond))
	}
	if kills {
		time.Sleep(2 * time.Second)
		kill(int(spare), "the adding replica")
		time.Sleep(2 * time.Second)
		if l := fc.awaitLeaderOf(topic, p, 10*time.Second); l > 0 {
			kill(l, "the moving partition's leader")
		}
		time.Sleep(time.Second)
		if ctl := fc.Controller(); ctl > 0 && ctl != int(spare) && ctl != int(m.leader) {
			kill(ctl, "the active controller")
		}
	}
	fc.Await(t, 10*time.Minute, "the move completes", func() (bool, string) {
		ok, st := moving()
		return !ok, st
	})
	m.end = time.Now()
	r.logf("move complete after %v", m.end.Sub(m.start).Round(100*time.Millisecond))
	dir := filepath.Join(fc.Node(int(m.leader)).DataDir, fmt.Sprintf("%s-%d", topic, p))
	fc.Await(t, 30*time.Second, fmt.Sprintf("node %d deletes %s", m.leader, dir), func() (bool, string) {
		_, err := os.Stat(dir)
		return errors.Is(err, os.ErrNotExist), fmt.Sprint(err)
	})
	return m
}
