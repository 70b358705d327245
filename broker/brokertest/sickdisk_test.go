package brokertest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordlog/fjord/broker/config"
	"github.com/fjordlog/fjord/storage"
)

// Sick disks (issue 28): one node's files go through a storage.ErrorFS
// over the real disk, which a test makes fail (EIO, ENOSPC) or stall.
// Each test runs an acks=all idempotent franz-go producer through the
// fault and checks with a counting checker that every acknowledged record
// is read back.

// sickNode is where a node of a sickCluster serves its metrics and its
// console.
type sickNode struct{ metrics, console string }

// sickCluster starts three nodes, each on an ErrorFS of its own (kept
// across restarts), with min.insync.replicas 2, metrics and a console.
func sickCluster(t *testing.T, configure func(cfg *config.Config)) (*Cluster, map[int32]*storage.ErrorFS, map[int32]sickNode) {
	t.Helper()
	fss := map[int32]*storage.ErrorFS{}
	nodes := map[int32]sickNode{}
	for id := int32(1); id <= 3; id++ {
		fss[id] = storage.NewErrorFS(nil)
		mp, err := freePort()
		if err != nil {
			t.Fatal(err)
		}
		cp, err := freePort()
		if err != nil {
			t.Fatal(err)
		}
		nodes[id] = sickNode{fmt.Sprintf("127.0.0.1:%d", mp), fmt.Sprintf("127.0.0.1:%d", cp)}
	}
	var lg zerolog.Logger
	if path := os.Getenv("FJORD_SICKDISK_LOG"); path != "" {
		// The nodes' logs, for a look at what each replica did.
		f, err := os.Create(path)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { f.Close() })
		lg = zerolog.New(f).With().Timestamp().Logger()
	} else {
		lg = zerolog.Nop()
	}
	c, err := Start(Options{Nodes: 3, Dir: t.TempDir(), Logger: lg,
		FS: func(id int32) storage.FS { return fss[id] },
		Configure: func(id int32, cfg *config.Config) {
			cfg.MetricsAddr, cfg.ConsoleAddr = nodes[id].metrics, nodes[id].console
			cfg.ReplicaLagTimeMaxMs = 2000
			cfg.MinInsyncReplicas = 2
			if configure != nil {
				configure(cfg)
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c, fss, nodes
}

// diskState is how many local replicas node n's metrics count in a disk
// state, and its console's count of replicas in trouble.
func diskState(t *testing.T, n sickNode, state string) (metric, console int) {
	t.Helper()
	m := regexp.MustCompile(`(?m)^fjord_replica_storage_state\{state="` + state + `"\} (\d+)$`).FindStringSubmatch(scrape(t, n.metrics))
	if m == nil {
		t.Fatalf("no fjord_replica_storage_state for %q at %s", state, n.metrics)
	}
	metric, _ = strconv.Atoi(m[1])
	cm := regexp.MustCompile(`id="sick-disk">(\d+)<`).FindStringSubmatch(page(t, n.console, "/"))
	if cm == nil {
		t.Fatalf("no disk trouble count on the console at %s", n.console)
	}
	console, _ = strconv.Atoi(cm[1])
	return metric, console
}

// workload is an acks=all idempotent producer sending unique values to
// its topics one record after another (each waits for its ack), retrying
// as franz-go does, and counting: acked values, and every outcome that
// was an error.
type workload struct {
	cl     *kgo.Client
	cancel context.CancelFunc
	done   chan struct{}

	mu     sync.Mutex
	acked  map[string][]string // by topic
	failed int
	codes  map[string]int // errors seen by the client, by text
	lastOK time.Time
}

func startWorkload(t *testing.T, c *Cluster, topics ...string) *workload {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.Addrs()...), kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.ProduceRequestTimeout(5*time.Second), kgo.RecordDeliveryTimeout(90*time.Second),
		kgo.MetadataMinAge(100*time.Millisecond), kgo.ProducerLinger(0),
		kgo.RetryBackoffFn(func(int) time.Duration { return 100 * time.Millisecond }))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	w := &workload{cl: cl, cancel: cancel, done: make(chan struct{}), acked: map[string][]string{}, codes: map[string]int{}}
	var wg sync.WaitGroup
	for _, topic := range topics {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ctx.Err() == nil; i++ {
				v := topic + "-" + strconv.Itoa(i)
				err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte(v)}).FirstErr()
				w.mu.Lock()
				if err == nil {
					w.acked[topic] = append(w.acked[topic], v)
					w.lastOK = time.Now()
				} else if ctx.Err() == nil {
					w.failed++
					w.codes[err.Error()]++
				}
				w.mu.Unlock()
			}
		}()
	}
	go func() { wg.Wait(); close(w.done) }()
	return w
}

// ackedCount is how many records of topic have been acknowledged so far.
func (w *workload) ackedCount(topic string) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.acked[topic])
}

// stop ends the workload and returns what was acknowledged.
func (w *workload) stop() map[string][]string {
	w.cancel()
	<-w.done
	w.cl.Close()
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.acked
}

// checkKept reads topic back whole and reports the counting checker's
// figures: acknowledged, read, lost (acknowledged, not read) and
// duplicates; it fails the test for any loss.
func checkKept(t *testing.T, c *Cluster, topic string, acked []string) string {
	t.Helper()
	got := consumeValues(t, c, topic, len(acked))
	seen := map[string]int{}
	for _, v := range got {
		seen[v]++
	}
	lost, dups := 0, 0
	for _, v := range acked {
		if seen[v] == 0 {
			lost++
		}
	}
	for _, n := range seen {
		if n > 1 {
			dups += n - 1
		}
	}
	figures := fmt.Sprintf("%s: acknowledged %d, read %d, lost %d, duplicates %d", topic, len(acked), len(got), lost, dups)
	if lost > 0 {
		t.Errorf("%s", figures)
	}
	return figures
}

// leaderOf is the leader of topic-0 as node via shows it.
func leaderOf(t *testing.T, c *Cluster, via int32, topic string) kmsg.MetadataResponseTopicPartition {
	t.Helper()
	return partitionVia(t, c, via, topic)
}

// createLedBy creates topic with one partition on all three nodes, led
// by node leader (the first replica of its assignment).
func createLedBy(t *testing.T, c *Cluster, topic string, leader int32) {
	t.Helper()
	createOn(t, c, topic, leader, otherThan(leader), otherThan(otherThan(leader)))
}

// createOn creates topic with one partition on replicas, led by the
// first, and waits until it leads with all of them in sync.
func createOn(t *testing.T, c *Cluster, topic string, replicas ...int32) {
	t.Helper()
	leader := replicas[0]
	req := kmsg.NewPtrCreateTopicsRequest()
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = topic, -1, -1
	ra := kmsg.NewCreateTopicsRequestTopicReplicaAssignment()
	ra.Partition, ra.Replicas = 0, replicas
	rt.ReplicaAssignment = append(rt.ReplicaAssignment, ra)
	req.Topics = append(req.Topics, rt)
	req.TimeoutMillis = 10000
	resp, err := request(t, c.Addr(1), req)
	if err != nil {
		t.Fatal(err)
	}
	if code := resp.(*kmsg.CreateTopicsResponse).Topics[0].ErrorCode; code != 0 {
		t.Fatalf("create %s: %v", topic, kerr.ErrorForCode(code))
	}
	waitTopic(t, c, topic, 1)
	waitPartition(t, c, leader, topic, 10*time.Second, topic+" led by its first replica", func(p kmsg.MetadataResponseTopicPartition) bool {
		return p.Leader == leader && len(p.ISR) == len(replicas)
	})
}

// otherThan is a node id other than id.
func otherThan(id int32) int32 { return id%3 + 1 }

// TestSickDiskFull: the disk under one partition of the leader fills up
// (ENOSPC on writes). Produces to it get KAFKA_STORAGE_ERROR, which
// franz-go retries (not UNKNOWN_SERVER_ERROR, which it does not); the
// other topic on the same node keeps taking writes; nothing acknowledged
// before is lost; once room returns the same producer's records go
// through without a restart.
func TestSickDiskFull(t *testing.T) {
	step := stepper(t)
	c, fss, nodes := sickCluster(t, nil)
	if code := createTopic(t, c.Addr(1), "full", 1, 3); code != 0 {
		t.Fatalf("create: %v", kerr.ErrorForCode(code))
	}
	waitTopic(t, c, "full", 1)
	victim := leaderOf(t, c, 1, "full").Leader
	// fine-0 is led by the victim too, so the node that is full for one
	// partition is seen serving another.
	createLedBy(t, c, "fine", victim)
	w := startWorkload(t, c, "full", "fine")
	eventually(t, 20*time.Second, "records acknowledged", func() bool { return w.ackedCount("full") >= 50 && w.ackedCount("fine") >= 50 })
	fss[victim].Add(storage.Fault{Op: storage.OpWrite, Path: "full-0", Err: syscall.ENOSPC})
	step("node %d (leader of full-0 and fine-0) is out of space for full-0", victim)

	code := produceTo(t, c, victim, "full", -1, 5000, "raw-probe")
	if code != kerr.KafkaStorageError.Code {
		t.Errorf("a produce to the full partition: %v, want KAFKA_STORAGE_ERROR", kerr.ErrorForCode(code))
	}
	step("a raw acks=all produce gets %v", kerr.ErrorForCode(code))
	fullAt, fineAt := w.ackedCount("full"), w.ackedCount("fine")
	eventually(t, 20*time.Second, "fine-0 keeps taking writes on the full node", func() bool { return w.ackedCount("fine") >= fineAt+100 })
	if got := w.ackedCount("full"); got > fullAt+1 {
		t.Errorf("full-0 acknowledged %d records while its disk was full", got-fullAt)
	}
	step("while full: fine-0 took %d more records, full-0 %d", w.ackedCount("fine")-fineAt, w.ackedCount("full")-fullAt)
	if m, cons := diskState(t, nodes[victim], "full"); m != 1 || cons != 1 {
		t.Errorf("node %d while full: metric counts %d full replicas, console %d in trouble; want 1, 1", victim, m, cons)
	}

	fss[victim].Clear()
	cleared := time.Now()
	eventually(t, 60*time.Second, "full-0 takes writes again", func() bool { return w.ackedCount("full") >= fullAt+50 })
	step("room returned: full-0 takes writes again after %v (no restart); leader now %d",
		time.Since(cleared).Round(time.Millisecond), leaderOf(t, c, 1, "full").Leader)
	if m, cons := diskState(t, nodes[victim], "full"); m != 0 || cons != 0 {
		t.Errorf("node %d once room returned: metric counts %d full replicas, console %d in trouble; want 0, 0", victim, m, cons)
	}
	acked := w.stop()
	w.mu.Lock()
	step("client errors: %d failed records %v", w.failed, w.codes)
	w.mu.Unlock()
	for _, topic := range []string{"full", "fine"} {
		step("%s", checkKept(t, c, topic, acked[topic]))
	}
}

// setAside lists node id's set-aside copies of topic-0
// (<dir>.<ms>.failed).
func setAside(t *testing.T, c *Cluster, id int32, topic string) []string {
	t.Helper()
	ents, err := os.ReadDir(filepath.Join(c.opts.Dir, fmt.Sprintf("node-%d", id)))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), topic+"-0.") && strings.HasSuffix(e.Name(), ".failed") {
			out = append(out, e.Name())
		}
	}
	return out
}

// TestSickDiskEIO: the leader's disk answers EIO to every fsync of one
// partition. That replica goes offline: it resigns, another in-sync
// replica is elected, and the acks=all producer goes on there; the node's
// other partition keeps serving throughout. The failed copy is set aside
// (renamed, kept for the operator) and the replica, emptied, is fetched
// again from the new leader and rejoins the ISR, without a restart. Every
// acknowledged record is read back.
func TestSickDiskEIO(t *testing.T) {
	step := stepper(t)
	c, fss, nodes := sickCluster(t, nil)
	if code := createTopic(t, c.Addr(1), "sick", 1, 3); code != 0 {
		t.Fatalf("create: %v", kerr.ErrorForCode(code))
	}
	waitTopic(t, c, "sick", 1)
	before := leaderOf(t, c, 1, "sick")
	victim := before.Leader
	createLedBy(t, c, "well", victim)
	w := startWorkload(t, c, "sick", "well")
	eventually(t, 20*time.Second, "records acknowledged", func() bool { return w.ackedCount("sick") >= 50 && w.ackedCount("well") >= 50 })

	fss[victim].Add(storage.Fault{Op: storage.OpSync, Path: "sick-0/"})
	faulted := time.Now()
	wellAt := w.ackedCount("well")
	step("node %d (leader of sick-0 and well-0) fails every fsync of sick-0 with EIO", victim)
	after := waitPartition(t, c, otherThan(victim), "sick", 30*time.Second, "sick-0 gets a new leader",
		func(p kmsg.MetadataResponseTopicPartition) bool { return p.Leader >= 0 && p.Leader != victim })
	step("sick-0: new leader %d at epoch %d, isr %v, %v after the fault", after.Leader, after.LeaderEpoch, after.ISR,
		time.Since(faulted).Round(time.Millisecond))
	sickAt := w.ackedCount("sick")
	eventually(t, 30*time.Second, "the producer goes on at the new leader", func() bool { return w.ackedCount("sick") >= sickAt+50 })
	eventually(t, 30*time.Second, "well-0 keeps serving on the sick node", func() bool { return w.ackedCount("well") >= wellAt+100 })
	if l := leaderOf(t, c, otherThan(victim), "well").Leader; l != victim {
		t.Errorf("well-0 moved to node %d; its disk was fine", l)
	}
	step("sick-0 took %d more records at node %d; well-0 %d more at node %d",
		w.ackedCount("sick")-sickAt, after.Leader, w.ackedCount("well")-wellAt, victim)

	// The bad blocks stay behind with the set-aside copy: the disk's
	// fresh files are sound.
	eventually(t, 30*time.Second, "the failed copy set aside", func() bool { return len(setAside(t, c, victim, "sick")) > 0 })
	// The fresh copy fails too while the disk does; the next repair waits
	// out a backoff, while the metrics and the console show it failed.
	eventually(t, 30*time.Second, "the metrics and the console show the replica failed", func() bool {
		m, cons := diskState(t, nodes[victim], "failed")
		return m == 1 && cons == 1
	})
	fss[victim].Clear()
	cleared := time.Now()
	step("set aside on node %d: %v", victim, setAside(t, c, victim, "sick"))
	back := waitPartition(t, c, otherThan(victim), "sick", 60*time.Second, "the repaired replica rejoins the ISR",
		func(p kmsg.MetadataResponseTopicPartition) bool { return len(p.ISR) == 3 })
	step("repaired: node %d back in the ISR %v %v after the set-aside copy's disk was cleared", victim, back.ISR,
		time.Since(cleared).Round(time.Millisecond))
	sickAt = w.ackedCount("sick")
	eventually(t, 30*time.Second, "more records after the repair", func() bool { return w.ackedCount("sick") >= sickAt+50 })
	acked := w.stop()
	w.mu.Lock()
	step("client errors: %d failed records %v", w.failed, w.codes)
	w.mu.Unlock()
	for _, topic := range []string{"sick", "well"} {
		step("%s", checkKept(t, c, topic, acked[topic]))
	}
	// The repaired replica holds the whole partition again.
	_, vs, err := replicaLog(c, victim, "sick")
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, 20*time.Second, "the repaired copy holds every acknowledged record", func() bool {
		_, vs, err = replicaLog(c, victim, "sick")
		return err == nil && len(vs) >= len(acked["sick"])
	})
	step("node %d's repaired copy of sick-0 holds %d records", victim, len(vs))

	// A restart neither trips over the set-aside copy nor removes it.
	aside := setAside(t, c, victim, "sick")
	if err := c.Stop(victim); err != nil {
		t.Fatal(err)
	}
	waitPartition(t, c, otherThan(victim), "sick", 30*time.Second, "the stopped node out of the ISR",
		func(p kmsg.MetadataResponseTopicPartition) bool { return !slices.Contains(p.ISR, victim) })
	if err := c.Restart(victim); err != nil {
		t.Fatal(err)
	}
	waitPartition(t, c, otherThan(victim), "sick", 30*time.Second, "the restarted node back in the ISR",
		func(p kmsg.MetadataResponseTopicPartition) bool { return len(p.ISR) == 3 })
	if got := setAside(t, c, victim, "sick"); len(got) != len(aside) {
		t.Errorf("set-aside copies after a restart: %v, before %v", got, aside)
	}
	step("node %d restarted: back in the ISR, set-aside copies kept: %v", victim, aside)
}

// TestSickDiskStall: every fsync of one partition on its leader hangs
// for 4 s. The leader notices its own stall after
// fjord.log.flush.stall.max.ms (1 s here), resigns, and another in-sync
// replica is elected; the producer goes on there. Once the disk answers
// again, the old leader catches up and rejoins the ISR. Nothing
// acknowledged is lost.
func TestSickDiskStall(t *testing.T) { sickDiskStall(t, nil) }

// TestSickDiskStallAtRoll is TestSickDiskStall with 1 KiB segments: the
// stalled fsyncs include a roll's, which runs under the log's lock and so
// also holds up the partition's appends (and, on the stalled node, the
// role change that follows the resignation, until that fsync returns).
func TestSickDiskStallAtRoll(t *testing.T) {
	sickDiskStall(t, map[string]string{"segment.bytes": "1024"})
}

func sickDiskStall(t *testing.T, configs map[string]string) {
	step := stepper(t)
	const bound = 1000
	c, fss, nodes := sickCluster(t, func(cfg *config.Config) { cfg.LogFlushStallMaxMs = bound })
	if code := createTopicWithConfigs(t, c.Addr(1), "slow", 1, 3, configs); code != 0 {
		t.Fatalf("create: %v", kerr.ErrorForCode(code))
	}
	waitTopic(t, c, "slow", 1)
	victim := leaderOf(t, c, 1, "slow").Leader
	createLedBy(t, c, "brisk", victim)
	w := startWorkload(t, c, "slow", "brisk")
	eventually(t, 20*time.Second, "records acknowledged", func() bool { return w.ackedCount("slow") >= 50 })

	fss[victim].Add(storage.Fault{Op: storage.OpSync, Path: "slow-0/", Delay: 4 * time.Second})
	stalled := time.Now()
	step("node %d (leader of slow-0) stalls every fsync of slow-0 for 4 s; bound %d ms", victim, bound)
	after := waitPartition(t, c, otherThan(victim), "slow", 30*time.Second, "slow-0 gets a new leader",
		func(p kmsg.MetadataResponseTopicPartition) bool { return p.Leader >= 0 && p.Leader != victim })
	step("slow-0: new leader %d at epoch %d, isr %v, %v after the stall began", after.Leader, after.LeaderEpoch, after.ISR,
		time.Since(stalled).Round(time.Millisecond))
	slowAt := w.ackedCount("slow")
	eventually(t, 30*time.Second, "the producer goes on at the new leader", func() bool { return w.ackedCount("slow") >= slowAt+50 })
	step("slow-0 took %d more records at node %d while node %d's disk stalled", w.ackedCount("slow")-slowAt, after.Leader, victim)
	if l := leaderOf(t, c, otherThan(victim), "brisk").Leader; l != victim {
		t.Errorf("brisk-0 moved to node %d; its disk did not stall", l)
	}
	eventually(t, 30*time.Second, "the metrics and the console show the stall", func() bool {
		m, cons := diskState(t, nodes[victim], "stalled")
		return m == 1 && cons == 1
	})

	fss[victim].Clear()
	cleared := time.Now()
	back := waitPartition(t, c, otherThan(victim), "slow", 60*time.Second, "the old leader rejoins the ISR",
		func(p kmsg.MetadataResponseTopicPartition) bool { return len(p.ISR) == 3 })
	step("node %d back in the ISR %v %v after the stall ended; leader %d", victim, back.ISR,
		time.Since(cleared).Round(time.Millisecond), back.Leader)
	acked := w.stop()
	w.mu.Lock()
	step("client errors: %d failed records %v", w.failed, w.codes)
	w.mu.Unlock()
	for _, topic := range []string{"slow", "brisk"} {
		step("%s", checkKept(t, c, topic, acked[topic]))
	}
}

// TestSickDiskFullAtFsync: the leader's disk runs out of space where a
// file system reports it at fsync (delayed allocation, thin volumes):
// writes land in the page cache, and every fsync of one partition meets
// ENOSPC. (Where the write itself meets ENOSPC, TestSickDiskFull: the
// write is undone and the leader keeps the partition.) A failed fsync
// fails the log (its page cache is no longer trusted), so the leader
// resigns and the producer goes on at another in-sync replica; the copy
// is reopened in place, never set aside (a full disk is not a bad one),
// and retried with backoff until room returns, when it catches up and
// rejoins the ISR without a restart. Nothing acknowledged is lost.
func TestSickDiskFullAtFsync(t *testing.T) {
	step := stepper(t)
	c, fss, nodes := sickCluster(t, nil)
	if code := createTopic(t, c.Addr(1), "tight", 1, 3); code != 0 {
		t.Fatalf("create: %v", kerr.ErrorForCode(code))
	}
	waitTopic(t, c, "tight", 1)
	victim := leaderOf(t, c, 1, "tight").Leader
	createLedBy(t, c, "roomy", victim)
	w := startWorkload(t, c, "tight", "roomy")
	eventually(t, 20*time.Second, "records acknowledged", func() bool { return w.ackedCount("tight") >= 50 })

	fss[victim].Add(storage.Fault{Op: storage.OpSync, Path: "tight-0/", Err: syscall.ENOSPC})
	faulted := time.Now()
	step("node %d (leader of tight-0 and roomy-0) is out of space for tight-0, at fsync", victim)
	after := waitPartition(t, c, otherThan(victim), "tight", 30*time.Second, "tight-0 gets a new leader",
		func(p kmsg.MetadataResponseTopicPartition) bool { return p.Leader >= 0 && p.Leader != victim })
	step("tight-0: new leader %d at epoch %d, isr %v, %v after the fault", after.Leader, after.LeaderEpoch, after.ISR,
		time.Since(faulted).Round(time.Millisecond))
	tightAt, roomyAt := w.ackedCount("tight"), w.ackedCount("roomy")
	eventually(t, 30*time.Second, "the producer goes on at the new leader", func() bool { return w.ackedCount("tight") >= tightAt+50 })
	eventually(t, 30*time.Second, "roomy-0 keeps serving on the full node", func() bool { return w.ackedCount("roomy") >= roomyAt+50 })
	eventually(t, 30*time.Second, "the metrics and the console show the disk trouble", func() bool {
		full, _ := diskState(t, nodes[victim], "full")
		failed, cons := diskState(t, nodes[victim], "failed")
		return full+failed >= 1 && cons >= 1
	})
	step("while full: tight-0 took %d more records at node %d, roomy-0 %d at node %d",
		w.ackedCount("tight")-tightAt, after.Leader, w.ackedCount("roomy")-roomyAt, victim)

	fss[victim].Clear()
	cleared := time.Now()
	back := waitPartition(t, c, otherThan(victim), "tight", 60*time.Second, "the replica rejoins the ISR once room returns",
		func(p kmsg.MetadataResponseTopicPartition) bool { return len(p.ISR) == 3 })
	step("room returned: node %d back in the ISR %v %v later, no restart", victim, back.ISR, time.Since(cleared).Round(time.Millisecond))
	if aside := setAside(t, c, victim, "tight"); len(aside) > 0 {
		t.Errorf("a full disk's copy was set aside: %v", aside)
	}
	acked := w.stop()
	w.mu.Lock()
	step("client errors: %d failed records %v", w.failed, w.codes)
	w.mu.Unlock()
	for _, topic := range []string{"tight", "roomy"} {
		step("%s", checkKept(t, c, topic, acked[topic]))
	}
}

// TestSickDiskFullRetention: while one partition's segment files meet
// ENOSPC (the only partition of the cluster, so the fault can name its
// .log files), retention keeps deleting its old segments on the full
// node (its log start moves on), and the producer's writes go through
// again, without a restart, once room returns.
func TestSickDiskFullRetention(t *testing.T) {
	step := stepper(t)
	c, fss, _ := sickCluster(t, func(cfg *config.Config) { cfg.RetentionCheckInterval = 200 })
	if code := createTopicWithConfigs(t, c.Addr(1), "aging", 1, 3, map[string]string{
		"segment.bytes": "1024", "retention.ms": "3000"}); code != 0 {
		t.Fatalf("create: %v", kerr.ErrorForCode(code))
	}
	waitTopic(t, c, "aging", 1)
	victim := leaderOf(t, c, 1, "aging").Leader
	w := startWorkload(t, c, "aging")
	eventually(t, 20*time.Second, "records acknowledged", func() bool { return w.ackedCount("aging") >= 100 })
	fss[victim].Add(storage.Fault{Op: storage.OpWrite, Path: ".log", Err: syscall.ENOSPC})
	rs, _, err := replicaLog(c, victim, "aging")
	if err != nil {
		t.Fatal(err)
	}
	startAt, ackedAt := rs.LogStart, w.ackedCount("aging")
	step("node %d (leader of aging-0) is out of space for its segments; log [%d, %d)", victim, rs.LogStart, rs.LogEnd)
	eventually(t, 30*time.Second, "retention deletes segments on the full node", func() bool {
		rs, _, err := replicaLog(c, victim, "aging")
		return err == nil && rs.LogStart > startAt
	})
	rs, _, _ = replicaLog(c, victim, "aging")
	step("retention ran while full: log start %d -> %d; %d records acknowledged meanwhile", startAt, rs.LogStart, w.ackedCount("aging")-ackedAt)
	fss[victim].Clear()
	cleared := time.Now()
	ackedAt = w.ackedCount("aging")
	eventually(t, 60*time.Second, "aging-0 takes writes again", func() bool { return w.ackedCount("aging") >= ackedAt+50 })
	step("room returned: writes go through again after %v; leader %d", time.Since(cleared).Round(time.Millisecond), leaderOf(t, c, 1, "aging").Leader)
	w.stop()
	w.mu.Lock()
	step("client errors: %d failed records %v", w.failed, w.codes)
	w.mu.Unlock()
}

// TestSickDiskFollowerStall: every fsync of one partition on a follower
// hangs for 4 s. No rule of the stall check applies (it is the leader's
// own): the follower's fetch offset is its durable end, which stops, so
// the leader drops it from the ISR after replica.lag.time.max.ms (2 s
// here) and acks=all goes on with the other two; it rejoins once its disk
// answers again. Nothing acknowledged is lost.
func TestSickDiskFollowerStall(t *testing.T) {
	step := stepper(t)
	c, fss, _ := sickCluster(t, func(cfg *config.Config) { cfg.LogFlushStallMaxMs = 1000 })
	if code := createTopic(t, c.Addr(1), "lag", 1, 3); code != 0 {
		t.Fatalf("create: %v", kerr.ErrorForCode(code))
	}
	waitTopic(t, c, "lag", 1)
	p := leaderOf(t, c, 1, "lag")
	leader := p.Leader
	follower := otherThan(leader)
	w := startWorkload(t, c, "lag")
	eventually(t, 20*time.Second, "records acknowledged", func() bool { return w.ackedCount("lag") >= 50 })
	fss[follower].Add(storage.Fault{Op: storage.OpSync, Path: "lag-0/", Delay: 4 * time.Second})
	stalled := time.Now()
	step("node %d (a follower of lag-0, led by %d) stalls every fsync of lag-0 for 4 s", follower, leader)
	out := waitPartition(t, c, leader, "lag", 30*time.Second, "the stalled follower leaves the ISR",
		func(p kmsg.MetadataResponseTopicPartition) bool { return !slices.Contains(p.ISR, follower) })
	step("node %d out of the ISR %v %v after the stall began; leader still %d", follower, out.ISR,
		time.Since(stalled).Round(time.Millisecond), out.Leader)
	if out.Leader != leader {
		t.Errorf("the leadership moved to %d; the leader's disk was fine", out.Leader)
	}
	at := w.ackedCount("lag")
	eventually(t, 30*time.Second, "acks=all goes on without the stalled follower", func() bool { return w.ackedCount("lag") >= at+50 })
	fss[follower].Clear()
	cleared := time.Now()
	back := waitPartition(t, c, leader, "lag", 60*time.Second, "the follower rejoins the ISR",
		func(p kmsg.MetadataResponseTopicPartition) bool { return len(p.ISR) == 3 })
	step("node %d back in the ISR %v %v after the stall ended", follower, back.ISR, time.Since(cleared).Round(time.Millisecond))
	acked := w.stop()
	w.mu.Lock()
	step("client errors: %d failed records %v", w.failed, w.codes)
	w.mu.Unlock()
	step("%s", checkKept(t, c, "lag", acked["lag"]))
}
