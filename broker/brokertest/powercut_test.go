package brokertest

// Power loss: an acks=all idempotent producer, a consumer group
// committing its offsets and a transactional chain (powercut_txn_test.go)
// work against a three-node cluster in power-loss mode while the power of
// every node (TestPowerCutAllNodes) or of one (TestPowerCutOneNode) is cut
// at seeded random moments, half of them right after a new topic's first
// records were acknowledged. At the end the histories go through the
// fault tests' checker (cmd/fjord/history): no acknowledged record lost,
// none duplicated or reordered, the group's commits consistent with what
// it processed; and through checkChain. After every cut, each committed
// offset the coordinator acknowledged before it must still be committed,
// at that offset or past it, and the new topic must hold every record
// acknowledged there.
//
// By default TestPowerCutAllNodes runs two seeds and TestPowerCutOneNode
// one (about a minute in all); FJORD_POWERCUT_SEEDS=n runs n seeds per
// test (make faults: 200), FJORD_POWERCUT_SKIP=k leaves out the first k
// (so one long run can be split over several, each taking the next
// seeds); FJORD_POWERCUT_SEED=s replays seed s alone
// (the cut moments, the nodes cut and what their disks keep follow from
// it; the scheduling of goroutines does not); FJORD_POWERCUT_LOGS=1
// prints the nodes' logs of a failed seed, =all of every seed.

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordlog/fjord/broker/config"
	"github.com/fjordlog/fjord/cmd/fjord/history"
)

// powerSeeds is the seeds a power-cut test runs: short ones by default,
// FJORD_POWERCUT_SEEDS of them when set, one when FJORD_POWERCUT_SEED is.
func powerSeeds(t *testing.T, short int, base uint64) []uint64 {
	if s := os.Getenv("FJORD_POWERCUT_SEED"); s != "" {
		seed, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("FJORD_POWERCUT_SEED=%q: %v", s, err)
		}
		return []uint64{seed}
	}
	n := short
	if s := os.Getenv("FJORD_POWERCUT_SEEDS"); s != "" {
		v, err := strconv.Atoi(s)
		if err != nil || v < 1 {
			t.Fatalf("FJORD_POWERCUT_SEEDS=%q: want a count", s)
		}
		n = v
	}
	skip := 0
	if s := os.Getenv("FJORD_POWERCUT_SKIP"); s != "" {
		v, err := strconv.Atoi(s)
		if err != nil || v < 0 {
			t.Fatalf("FJORD_POWERCUT_SKIP=%q: want a count", s)
		}
		skip = v
	}
	seeds := make([]uint64, n)
	for i := range seeds {
		seeds[i] = base + uint64(skip+i)
	}
	return seeds
}

// TestPowerCutAllNodes cuts the power of all three nodes at once, twice
// per seed, at random moments of the workload.
func TestPowerCutAllNodes(t *testing.T) {
	for _, seed := range powerSeeds(t, 2, 1000) {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			runPowerCuts(t, seed, true)
		})
	}
}

// TestPowerCutOneNode cuts the power of one node at a time, a random one,
// three times per seed, while the other two go on. One seed by default:
// the whole-cluster cut is the harder case, and each seed costs ~20 s.
func TestPowerCutOneNode(t *testing.T) {
	for _, seed := range powerSeeds(t, 1, 2000) {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			runPowerCuts(t, seed, false)
		})
	}
}

// powerHistory is what the workload's clients learned, for the checker.
type powerHistory struct {
	mu       sync.Mutex
	attempts []history.Attempt // attempts[i].Seq == i
	consumed []history.Record  // what the group's member processed
	// commits is, per partition, the highest offset whose commit the
	// coordinator acknowledged.
	commits map[int32]int64
}

func runPowerCuts(t *testing.T, seed uint64, all bool) {
	const (
		topic      = "powercut"
		group      = "powercut-group"
		out        = "powercut-out"
		chainGroup = "powercut-chain"
		partitions = 3
		settle     = 60 * time.Second
	)
	t.Logf("seed %d (replay: FJORD_POWERCUT_SEED=%d)", seed, seed)
	rng := rand.New(rand.NewPCG(seed, 0))
	logs := &logBuf{}
	c, err := Start(Options{Nodes: 3, PowerLoss: true, PowerLossSeed: seed,
		Logger: zerolog.New(logs).Level(zerolog.InfoLevel),
		Configure: func(_ int32, cfg *config.Config) {
			cfg.MinInsyncReplicas = 2
			cfg.DefaultReplication = 3
			// Few, small logs: MemFS copies a file at every sync.
			cfg.OffsetsTopicPartitions = 3
			cfg.TxnTopicPartitions = 3
			cfg.ShareStatePartitions = 1
			cfg.SegmentBytes = 64 << 10
			// A cut node's Close waits this long (at most) for a
			// controlled shutdown no controller can confirm.
			cfg.BrokerSessionTimeoutMs = 2000
		}})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		c.Close()
		if v := os.Getenv("FJORD_POWERCUT_LOGS"); (t.Failed() && v != "") || v == "all" {
			logs.mu.Lock()
			t.Log(logs.buf.String())
			logs.mu.Unlock()
		}
	}()
	for _, name := range []string{topic, out} {
		if code := createTopicWithConfigs(t, c.Addr(1), name, partitions, 3, map[string]string{"min.insync.replicas": "2"}); code != 0 {
			t.Fatalf("create %s: error code %d", name, code)
		}
		waitTopic(t, c, name, partitions)
	}

	h := &powerHistory{commits: map[int32]int64{}}
	clientOpts := []kgo.Opt{
		kgo.SeedBrokers(c.Addrs()...),
		kgo.MetadataMinAge(250 * time.Millisecond),
		kgo.RetryBackoffFn(func(int) time.Duration { return 100 * time.Millisecond }),
	}
	// No delivery timeout and no retry limit: franz-go then fails no
	// batch that may have been written, so every acknowledgement stands
	// for a write and a duplicate is the broker's.
	prod, err := kgo.NewClient(append(slices.Clone(clientOpts),
		kgo.DefaultProduceTopic(topic),
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.RecordRetries(1<<30),
		kgo.ProduceRequestTimeout(5*time.Second),
	)...)
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	member, err := kgo.NewClient(append(slices.Clone(clientOpts),
		kgo.ConsumerGroup(group),
		kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.AutoCommitMarks(),
		kgo.AutoCommitInterval(200*time.Millisecond),
		kgo.AutoCommitCallback(func(_ *kgo.Client, req *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
			if err != nil {
				return
			}
			h.noteCommits(topic, req, resp)
		}),
		kgo.FetchMaxWait(200*time.Millisecond),
		kgo.SessionTimeout(6*time.Second),
	)...)
	if err != nil {
		t.Fatal(err)
	}
	mctx, mcancel := context.WithCancel(context.Background())
	mdone := make(chan struct{})
	go func() {
		defer close(mdone)
		for {
			fs := member.PollRecords(mctx, 500)
			if mctx.Err() != nil || fs.IsClientClosed() {
				return
			}
			recs := fs.Records()
			h.mu.Lock()
			for _, r := range recs {
				h.consumed = append(h.consumed, history.RecordOf(r))
			}
			h.mu.Unlock()
			member.MarkCommitRecords(recs...)
		}
	}()

	// The producer: two records every 5 ms until stop closes.
	stop := make(chan struct{})
	pdone := make(chan struct{})
	go func() {
		defer close(pdone)
		tk := time.NewTicker(5 * time.Millisecond)
		defer tk.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tk.C:
			}
			for range 2 {
				h.mu.Lock()
				seq := int64(len(h.attempts))
				a := history.Attempt{Seq: seq, Key: "k" + strconv.Itoa(int(seq%8)), Sent: time.Now(), Partition: -1, Offset: -1}
				h.attempts = append(h.attempts, a)
				h.mu.Unlock()
				prod.Produce(context.Background(), &kgo.Record{Key: []byte(a.Key), Value: []byte(strconv.FormatInt(seq, 10))}, func(r *kgo.Record, err error) {
					h.mu.Lock()
					defer h.mu.Unlock()
					at := &h.attempts[seq]
					at.Done, at.Outcome = time.Now(), history.ClassifyProduceErr(err)
					if err != nil {
						at.Err = err.Error()
					} else {
						at.Partition, at.Offset = r.Partition, r.Offset
					}
				})
			}
		}
	}()

	ch := startChain(c.Addrs(), topic, out, chainGroup, partitions)
	chainStopped := false
	defer func() {
		if !chainStopped {
			ch.Stop()
		}
	}()

	adm := kadm.NewClient(prod)
	cuts := 3
	if all {
		cuts = 2
	}
	for i := range cuts {
		wait := time.Duration(300+rng.IntN(1700)) * time.Millisecond
		time.Sleep(wait)
		ids := []int32{1, 2, 3}
		if !all {
			ids = []int32{int32(1 + rng.IntN(3))}
		}
		// Every other cut on average comes right after a new topic's
		// first records are acknowledged: its directories, files and
		// names are then as new as they get.
		var fresh string
		var freshAcked []string
		if rng.IntN(2) == 0 {
			fresh = fmt.Sprintf("powercut-fresh-%d", i+1)
			freshAcked = freshTopic(t, c, clientOpts, fresh)
		}
		h.mu.Lock()
		before := cloneCommits(h.commits)
		acked := h.ackedLocked()
		h.mu.Unlock()
		start := time.Now()
		if err := c.PowerCut(ids...); err != nil {
			t.Fatalf("cut %d of nodes %v: %v", i+1, ids, err)
		}
		t.Logf("cut %d: nodes %v lost power after %v of work (%d records acknowledged so far, commits %v, %d to a new topic just before); serving again after %v",
			i+1, ids, wait, acked, before, len(freshAcked), time.Since(start).Round(time.Millisecond))
		if err := commitsKept(adm, group, topic, before, settle); err != nil {
			t.Errorf("cut %d: %v", i+1, err)
		}
		if len(freshAcked) > 0 {
			if err := freshKept(adm, clientOpts, fresh, freshAcked, settle); err != nil {
				t.Errorf("cut %d: %v", i+1, err)
			}
		}
	}
	time.Sleep(500 * time.Millisecond)
	close(stop)
	<-pdone
	fctx, fcancel := context.WithTimeout(context.Background(), settle)
	if err := prod.Flush(fctx); err != nil {
		t.Logf("outcomes still pending after %v: %v", settle, err)
	}
	fcancel()

	ends, err := powerEnds(adm, topic, settle)
	if err != nil {
		t.Fatal(err)
	}
	// Let the member catch up to the ends, then commit and leave.
	deadline := time.Now().Add(settle)
	for time.Now().Before(deadline) {
		h.mu.Lock()
		next := map[int32]int64{}
		for _, r := range h.consumed {
			next[r.Partition] = max(next[r.Partition], r.Offset+1)
		}
		h.mu.Unlock()
		caught := true
		for p, e := range ends {
			caught = caught && next[p] >= e
		}
		if caught {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	mcancel()
	<-mdone
	cctx, ccancel := context.WithTimeout(context.Background(), 15*time.Second)
	if err := member.CommitMarkedOffsets(cctx); err != nil {
		t.Logf("the member's last commit: %v", err)
	}
	ccancel()
	member.Close()

	committed, err := fetchCommits(adm, group, topic, settle)
	if err != nil {
		t.Fatal(err)
	}
	// The chain too catches up to the ends (its commits are its
	// transactions'), then stops.
	deadline = time.Now().Add(settle)
	for {
		got, err := fetchCommits(adm, chainGroup, topic, settle)
		caught := err == nil
		for p, e := range ends {
			caught = caught && got[p] >= e
		}
		if caught {
			break
		}
		if time.Now().After(deadline) {
			txns, sessions := ch.Txns()
			ch.mu.Lock()
			last := ch.lastErr
			ch.mu.Unlock()
			t.Fatalf("the transactional chain did not copy the input up to its ends %v within %v: committed %v (%v); %d transactions in %d sessions, the last session error: %s",
				ends, settle, got, err, len(txns), sessions, last)
		}
		time.Sleep(200 * time.Millisecond)
	}
	ch.Stop()
	chainStopped = true
	resumer, err := kgo.NewClient(append(slices.Clone(clientOpts), kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
		kgo.DisableAutoCommit(), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(200*time.Millisecond))...)
	if err != nil {
		t.Fatal(err)
	}
	resumeEnds := map[int32]int64{}
	for p, e := range ends {
		if committed[p] < e {
			resumeEnds[p] = e
		}
	}
	resumed, rerr := powerRead(resumer, resumeEnds, settle)
	resumer.Close()
	from := map[int32]kgo.Offset{}
	for p := range ends {
		from[p] = kgo.NewOffset().At(0)
	}
	reader, err := kgo.NewClient(append(slices.Clone(clientOpts), kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: from}),
		kgo.FetchMaxWait(200*time.Millisecond))...)
	if err != nil {
		t.Fatal(err)
	}
	final, ferr := powerRead(reader, ends, settle)
	reader.Close()
	if ferr != nil {
		t.Fatalf("reading the topic back: %v", ferr)
	}
	outEnds, err := powerEnds(adm, out, settle)
	if err != nil {
		t.Fatal(err)
	}
	outFrom := map[int32]kgo.Offset{}
	for p := range outEnds {
		outFrom[p] = kgo.NewOffset().At(0)
	}
	outReader, err := kgo.NewClient(append(slices.Clone(clientOpts), kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{out: outFrom}),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.KeepControlRecords(), kgo.FetchMaxWait(200*time.Millisecond))...)
	if err != nil {
		t.Fatal(err)
	}
	copies, oerr := powerRead(outReader, outEnds, settle)
	outReader.Close()
	if oerr != nil {
		t.Fatalf("reading %s back (read_committed): %v", out, oerr)
	}
	if rerr != nil {
		t.Fatalf("resuming the group: %v", rerr)
	}

	h.mu.Lock()
	attempts := slices.Clone(h.attempts)
	consumed := slices.Clone(h.consumed)
	h.mu.Unlock()
	failures := map[string]int{}
	for _, a := range attempts {
		if a.Outcome != history.Acked {
			failures[a.Outcome.String()+": "+a.Err]++
		}
	}
	if len(failures) > 0 {
		t.Logf("records not acknowledged, by outcome and error: %v", failures)
	}
	rep := history.Check(attempts, final)
	grp := history.CheckGroup(attempts, final, consumed, committed, resumed, ends)
	txns, sessions := ch.Txns()
	chn := checkChain(txns, final, copies)
	t.Logf("POWER CUT FIGURES seed=%d all=%v cuts=%d: %s | %s | chain: sessions=%d %s", seed, all, cuts, rep.Figures(), grp.Figures(), sessions, chn.Figures())
	if !chn.OK() {
		t.Errorf("transactional chain: %s\n%s", chn.Figures(), strings.Join(chn.Problems, "\n"))
	}
	if rep.Acked == 0 {
		t.Error("nothing was acknowledged: nothing verified")
	}
	if !rep.OK() {
		t.Errorf("records: %s\n%s", rep.Figures(), rep.Details())
	}
	if !grp.OK() {
		t.Errorf("group: %s\n%s", grp.Figures(), grp.Details())
	}
}

// noteCommits records the offsets of req that resp acknowledged.
func (h *powerHistory) noteCommits(topic string, req *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for i, rt := range resp.Topics {
		if rt.Topic != topic || i >= len(req.Topics) || req.Topics[i].Topic != topic {
			continue
		}
		for j, rp := range rt.Partitions {
			if rp.ErrorCode != 0 || j >= len(req.Topics[i].Partitions) {
				continue
			}
			qp := req.Topics[i].Partitions[j]
			if qp.Partition == rp.Partition && qp.Offset > h.commits[rp.Partition] {
				h.commits[rp.Partition] = qp.Offset
			}
		}
	}
}

// ackedLocked counts the acknowledged records. REQUIRES: h.mu held.
func (h *powerHistory) ackedLocked() int {
	n := 0
	for _, a := range h.attempts {
		if a.Outcome == history.Acked {
			n++
		}
	}
	return n
}

func cloneCommits(m map[int32]int64) map[int32]int64 {
	out := make(map[int32]int64, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// freshTopic creates topic (one partition, RF 3, min.insync.replicas 2)
// and returns the values of the records an acks=all producer then had
// acknowledged there, at most 20.
func freshTopic(t *testing.T, c *Cluster, clientOpts []kgo.Opt, topic string) []string {
	t.Helper()
	if code := createTopicWithConfigs(t, c.Addr(1), topic, 1, 3, map[string]string{"min.insync.replicas": "2"}); code != 0 {
		t.Logf("creating %s: error code %d; the cut goes on without it", topic, code)
		return nil
	}
	cl, err := kgo.NewClient(append(slices.Clone(clientOpts), kgo.DefaultProduceTopic(topic),
		kgo.RequiredAcks(kgo.AllISRAcks()), kgo.ProduceRequestTimeout(5*time.Second))...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var acked []string
	for i := range 20 {
		v := fmt.Sprintf("%s-%d", topic, i)
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte(v)}).FirstErr(); err != nil {
			break
		}
		acked = append(acked, v)
	}
	return acked
}

// freshKept checks that topic, made by freshTopic before a cut, holds
// every record acknowledged there.
func freshKept(adm *kadm.Client, clientOpts []kgo.Opt, topic string, acked []string, bound time.Duration) error {
	ends, err := powerEnds(adm, topic, bound)
	if err != nil {
		return fmt.Errorf("NEW TOPIC LOST? %w", err)
	}
	cl, err := kgo.NewClient(append(slices.Clone(clientOpts),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().At(0)}}))...)
	if err != nil {
		return err
	}
	defer cl.Close()
	recs, err := powerRead(cl, ends, bound)
	if err != nil {
		return fmt.Errorf("reading %s back: %w", topic, err)
	}
	got := map[string]bool{}
	for _, r := range recs {
		got[r.Value] = true
	}
	var lost []string
	for _, v := range acked {
		if !got[v] {
			lost = append(lost, v)
		}
	}
	if len(lost) > 0 {
		return fmt.Errorf("LOST from a topic created just before the cut: %d of %d acknowledged records: %v", len(lost), len(acked), lost)
	}
	return nil
}

// commitsKept checks that the group's committed offsets are each at or
// past before, the highest the coordinator acknowledged before a cut.
func commitsKept(adm *kadm.Client, group, topic string, before map[int32]int64, bound time.Duration) error {
	got, err := fetchCommits(adm, group, topic, bound)
	if err != nil {
		return err
	}
	var lost []string
	for p, off := range before {
		if got[p] < off {
			lost = append(lost, fmt.Sprintf("partition %d: committed %d, acknowledged %d before the cut", p, got[p], off))
		}
	}
	if len(lost) > 0 {
		return fmt.Errorf("COMMITTED OFFSETS LOST: %s", strings.Join(lost, "; "))
	}
	return nil
}

// fetchCommits is the group's committed offsets of topic, retried while
// the coordinator is loading or moving.
func fetchCommits(adm *kadm.Client, group, topic string, bound time.Duration) (map[int32]int64, error) {
	deadline := time.Now().Add(bound)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		offs, err := adm.FetchOffsets(ctx, group)
		cancel()
		if err == nil {
			err = offs.Error()
		}
		if err == nil {
			out := map[int32]int64{}
			offs.Each(func(o kadm.OffsetResponse) {
				if o.Topic == topic && o.Err == nil && o.At >= 0 {
					out[o.Partition] = o.At
				}
			})
			return out, nil
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("committed offsets of %s: %w", group, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// powerEnds lists the topic's end offsets, retrying while a partition has
// no leader.
func powerEnds(adm *kadm.Client, topic string, bound time.Duration) (map[int32]int64, error) {
	deadline := time.Now().Add(bound)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		l, err := adm.ListEndOffsets(ctx, topic)
		cancel()
		if err == nil {
			err = l.Error()
		}
		if err == nil {
			ends := map[int32]int64{}
			l.Each(func(o kadm.ListedOffset) { ends[o.Partition] = o.Offset })
			return ends, nil
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("end offsets of %s: %w", topic, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// powerRead polls cl until each partition p has returned its record at
// ends[p]-1, or bound passes. Control records (a client with
// KeepControlRecords: transaction markers) count towards the ends but are
// not returned.
func powerRead(cl *kgo.Client, ends map[int32]int64, bound time.Duration) ([]history.Record, error) {
	ctx, cancel := context.WithTimeout(context.Background(), bound)
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
	var out []history.Record
	for !done() {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			return out, fmt.Errorf("after %v: read up to %v, want %v", bound, next, ends)
		}
		fs.EachRecord(func(r *kgo.Record) {
			next[r.Partition] = max(next[r.Partition], r.Offset+1)
			if !r.Attrs.IsControl() {
				out = append(out, history.RecordOf(r))
			}
		})
	}
	return out, nil
}
