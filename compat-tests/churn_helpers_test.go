package compattests

// Shared pieces of the topic churn tests (issue 10: a follower's replica
// fetcher dereferenced a partition that a topic deletion had just taken
// away, and the process died of a nil pointer panic):
//
//   - churnTarget: one topology a client integration suite runs against
//     (one fjord process at RF 1, three at RF 3, or an external cluster
//     named by FJORD_KAFKA_SEEDS), with a watcher that notices at once when
//     a fjord process exits without the test stopping it, so the cases
//     still running give up instead of waiting for their deadlines;
//   - churnCases and runChurnSuite: the case list both client suites
//     (churn_suite_test.go with franz-go, churn_kafkago_test.go with
//     segmentio/kafka-go) implement, and the runner that runs it on every
//     topology and compares the counts of passing cases;
//   - polling helpers that wait on a condition with a deadline, asking
//     every node for its own Metadata (a raw request straight to that
//     node, not a client's cache).
//
// The brokers run with auto.create.topics.enable=false: kafka-go's
// Conn.ReadPartitions asks with AllowAutoTopicCreation=true, so a client
// still holding a deleted topic could bring it back and the "gone from
// every node" checks would measure the client, not the broker.

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// churnSuiteSettings are the broker settings of the churn suites' nodes.
var churnSuiteSettings = []string{
	"auto.create.topics.enable=false",
	"group.initial.rebalance.delay.ms=0",
}

// churnClusterSettings are added on the three-node topology.
var churnClusterSettings = []string{
	"default.replication.factor=3",
	"offsets.topic.replication.factor=3",
	"min.insync.replicas=2",
}

// ---- process health ----

// exitedOnItsOwn reports whether b's current process has exited although
// the test neither stopped nor killed it (Stop and Kill clear b.cmd first),
// and with what.
func (b *Broker) exitedOnItsOwn() (bool, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.cmd == nil {
		return false, nil
	}
	select {
	case <-b.done:
		return true, b.waitErr
	default:
		return false, nil
	}
}

// panics returns every Go panic in b's log (all of its processes), each as
// the "panic:" line and up to stackLines lines after it.
func (b *Broker) panics(stackLines int) []string {
	var out []string
	var cur []string
	left := 0
	sc := bufio.NewScanner(strings.NewReader(b.readLog()))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	flush := func() {
		if cur != nil {
			out = append(out, strings.Join(cur, "\n"))
			cur = nil
		}
	}
	for sc.Scan() {
		l := sc.Text()
		switch {
		case strings.HasPrefix(l, "panic:") || strings.HasPrefix(l, "fatal error:"):
			flush()
			cur, left = []string{l}, stackLines
		case left > 0:
			cur = append(cur, l)
			left--
		}
	}
	flush()
	return out
}

// exitWatch polls a set of fjord processes every 50ms. The first one found
// to have exited on its own (see exitedOnItsOwn) cancels Ctx; Died says
// which and how. It stops at the test's clean-up, before the processes are
// killed.
type exitWatch struct {
	Ctx    context.Context
	cancel context.CancelFunc
	stop   chan struct{}
	done   chan struct{}

	mu   sync.Mutex
	died []string
}

func watchExits(t testing.TB, nodes map[int]*Broker) *exitWatch {
	ctx, cancel := context.WithCancel(context.Background())
	w := &exitWatch{Ctx: ctx, cancel: cancel, stop: make(chan struct{}), done: make(chan struct{})}
	ids := make([]int, 0, len(nodes))
	for id := range nodes {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	go func() {
		defer close(w.done)
		tk := time.NewTicker(50 * time.Millisecond)
		defer tk.Stop()
		reported := map[int]bool{}
		for {
			select {
			case <-w.stop:
				return
			case <-tk.C:
			}
			for _, id := range ids {
				if reported[id] {
					continue
				}
				if gone, err := nodes[id].exitedOnItsOwn(); gone {
					reported[id] = true
					w.mu.Lock()
					w.died = append(w.died, fmt.Sprintf("node %d exited on its own at %s (%v)", id, time.Now().Format("15:04:05.000"), err))
					w.mu.Unlock()
					cancel()
				}
			}
		}
	}()
	t.Cleanup(w.Stop)
	return w
}

// Stop ends the watch (idempotent).
func (w *exitWatch) Stop() {
	select {
	case <-w.stop:
	default:
		close(w.stop)
	}
	<-w.done
}

// Died lists the processes that exited on their own so far.
func (w *exitWatch) Died() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.died)
}

// checkNodesHealthy fails t for every node whose process exited on its own
// or whose log holds a Go panic (with the stack), and returns how many
// problems it found.
func checkNodesHealthy(t testing.TB, nodes map[int]*Broker) int {
	t.Helper()
	ids := make([]int, 0, len(nodes))
	for id := range nodes {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	bad := 0
	for _, id := range ids {
		b := nodes[id]
		if gone, err := b.exitedOnItsOwn(); gone {
			bad++
			t.Errorf("node %d: process exited on its own (%v)", id, err)
		}
		for _, p := range b.panics(40) {
			bad++
			t.Errorf("node %d logged a Go panic:\n%s", id, p)
		}
	}
	return bad
}

// cause is ", because: <why>" when ctx is done (a node died, the case
// timed out), for error messages of calls that failed with it; else "".
func cause(ctx context.Context) string {
	if ctx.Err() == nil {
		return ""
	}
	return ", because: " + context.Cause(ctx).Error()
}

// nodesByID returns the cluster's nodes keyed by id.
func (c *Cluster) nodesByID() map[int]*Broker {
	out := map[int]*Broker{}
	for _, id := range c.IDs() {
		out[id] = c.Node(id)
	}
	return out
}

// produceWithin produces recs through cl and waits for their answers
// until ctx ends and then at most grace more; it returns the answers that
// came and how many records had none. (franz-go v1.21.7 was seen to keep a
// ProduceSync waiting for minutes past both its context and its
// RecordDeliveryTimeout once two of three nodes were gone; a test must not
// hang with it.)
func produceWithin(ctx context.Context, cl *kgo.Client, grace time.Duration, recs ...*kgo.Record) (kgo.ProduceResults, int) {
	var mu sync.Mutex
	var res kgo.ProduceResults
	left := len(recs)
	all := make(chan struct{})
	for _, r := range recs {
		cl.Produce(ctx, r, func(r *kgo.Record, err error) {
			mu.Lock()
			defer mu.Unlock()
			res = append(res, kgo.ProduceResult{Record: r, Err: err})
			if left--; left == 0 {
				close(all)
			}
		})
	}
	select {
	case <-all:
	case <-ctx.Done():
		tm := time.NewTimer(grace)
		defer tm.Stop()
		select {
		case <-all:
		case <-tm.C:
		}
	}
	mu.Lock()
	defer mu.Unlock()
	return slices.Clone(res), left
}

// closeWithin closes cl, giving up waiting after d (see produceWithin);
// it reports whether Close returned.
func closeWithin(cl *kgo.Client, d time.Duration) bool {
	done := make(chan struct{})
	go func() {
		cl.Close()
		close(done)
	}()
	tm := time.NewTimer(d)
	defer tm.Stop()
	select {
	case <-done:
		return true
	case <-tm.C:
		return false
	}
}

// ---- polling ----

// errNodeDied is returned by the polls when the exit watch fired.
var errNodeDied = errors.New("a fjord process exited on its own")

// pollFor calls cond every interval until it returns true, ctx is done, or
// timeout passes; the error carries cond's last description. It does not
// fail the test, so goroutines may use it.
func pollFor(ctx context.Context, timeout, interval time.Duration, cond func() (bool, string)) (time.Duration, error) {
	start := time.Now()
	deadline := start.Add(timeout)
	var last string
	for {
		ok, state := cond()
		if ok {
			return time.Since(start), nil
		}
		last = state
		if ctx.Err() != nil {
			return time.Since(start), fmt.Errorf("%w; last state: %s", context.Cause(ctx), last)
		}
		if time.Now().After(deadline) {
			return time.Since(start), fmt.Errorf("not within %v; last state: %s", timeout, last)
		}
		select {
		case <-ctx.Done():
		case <-time.After(interval):
		}
	}
}

// nodeMetadata asks the broker at addr itself (cl is seeded with addr
// alone) for metadata of topics (nil: every topic), never auto-creating.
func nodeMetadata(ctx context.Context, cl *kgo.Client, topics ...string) (*kmsg.MetadataResponse, error) {
	req := kmsg.NewPtrMetadataRequest()
	req.AllowAutoTopicCreation = false
	if topics != nil {
		for _, tp := range topics {
			rt := kmsg.NewMetadataRequestTopic()
			rt.Topic = kmsg.StringPtr(tp)
			req.Topics = append(req.Topics, rt)
		}
	}
	seeds := cl.SeedBrokers()
	if len(seeds) == 0 {
		return nil, errors.New("no seed broker")
	}
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	resp, err := seeds[0].Request(ctx, req)
	if err != nil {
		return nil, err
	}
	return resp.(*kmsg.MetadataResponse), nil
}

// topicIn returns topic's entry of a metadata response, if listed.
func topicIn(m *kmsg.MetadataResponse, topic string) (kmsg.MetadataResponseTopic, bool) {
	for _, t := range m.Topics {
		if t.Topic != nil && *t.Topic == topic {
			return t, true
		}
	}
	return kmsg.MetadataResponseTopic{}, false
}

// topicReadyIn reports whether a metadata response lists topic with the
// given partitions, each led and with rf replicas; else why not.
func topicReadyIn(m *kmsg.MetadataResponse, topic string, partitions int, rf int16) (bool, string) {
	td, ok := topicIn(m, topic)
	if !ok {
		return false, "not listed"
	}
	if td.ErrorCode != 0 {
		return false, kerr.ErrorForCode(td.ErrorCode).Error()
	}
	if len(td.Partitions) != partitions {
		return false, fmt.Sprintf("%d partitions, want %d", len(td.Partitions), partitions)
	}
	for _, p := range td.Partitions {
		if p.ErrorCode != 0 || p.Leader < 0 || len(p.Replicas) != int(rf) {
			return false, fmt.Sprintf("p%d leader %d replicas %v isr %v err %v", p.Partition, p.Leader, p.Replicas, p.ISR, kerr.ErrorForCode(p.ErrorCode))
		}
	}
	return true, ""
}

// ---- topologies ----

// churnTarget is one topology a churn suite runs against.
type churnTarget struct {
	name  string
	seeds []string        // every broker's client address
	rf    int16           // replication factor of the suite's topics
	nodes map[int]*Broker // the fjord processes by node id; empty for an external cluster
	watch *exitWatch      // nil for an external cluster

	mu     sync.Mutex
	pinned map[string]*kgo.Client // per address, for nodeMetadata

	created, deleted, produced, consumed atomic.Int64
	goneMu                               sync.Mutex
	goneTimes                            []time.Duration // delete acknowledged -> gone from every node
}

// Ctx is cancelled when a fjord process of the target exits on its own.
func (tg *churnTarget) Ctx() context.Context {
	if tg.watch == nil {
		return context.Background()
	}
	return tg.watch.Ctx
}

// caseCtx is a context for one case: cancelled at timeout, at the end of
// the test, or as soon as a node dies (with errNodeDied as its cause).
func (tg *churnTarget) caseCtx(t testing.TB, timeout time.Duration) context.Context {
	ctx, cancel := context.WithTimeoutCause(context.Background(), timeout, fmt.Errorf("case timeout %v", timeout))
	t.Cleanup(cancel)
	if tg.watch != nil {
		cctx, ccancel := context.WithCancelCause(ctx)
		stop := context.AfterFunc(tg.watch.Ctx, func() { ccancel(errNodeDied) })
		t.Cleanup(func() { stop(); ccancel(nil) })
		return cctx
	}
	return ctx
}

// client returns a franz-go client seeded with addr alone (so a request to
// its seed broker is that node's own answer), closed at the target's end.
func (tg *churnTarget) client(t testing.TB, addr string) *kgo.Client {
	tg.mu.Lock()
	defer tg.mu.Unlock()
	if cl, ok := tg.pinned[addr]; ok {
		return cl
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.DialTimeout(time.Second), kgo.RequestRetries(1))
	if err != nil {
		t.Fatalf("kgo.NewClient(%s): %v", addr, err)
	}
	tg.pinned[addr] = cl
	return cl
}

func (tg *churnTarget) closeClients() {
	tg.mu.Lock()
	defer tg.mu.Unlock()
	for a, cl := range tg.pinned {
		cl.Close()
		delete(tg.pinned, a)
	}
}

// awaitReady waits until every broker lists topic with partitions
// partitions, each led, with tg.rf replicas.
func (tg *churnTarget) awaitReady(t testing.TB, ctx context.Context, topic string, partitions int) time.Duration {
	t.Helper()
	d, err := pollFor(ctx, 30*time.Second, 20*time.Millisecond, func() (bool, string) {
		var states []string
		for _, addr := range tg.seeds {
			m, err := nodeMetadata(ctx, tg.client(t, addr), topic)
			if err != nil {
				return false, fmt.Sprintf("%s: %v", addr, err)
			}
			if ok, why := topicReadyIn(m, topic, partitions, tg.rf); !ok {
				states = append(states, fmt.Sprintf("%s: %s", addr, why))
			}
		}
		return len(states) == 0, strings.Join(states, "; ")
	})
	if err != nil {
		t.Fatalf("topic %q (%d partitions, rf %d) not ready on every broker: %v", topic, partitions, tg.rf, err)
	}
	return d
}

// awaitGone waits until no broker lists topic in its full Metadata, and
// records how long that took from deleted (the delete's acknowledgement).
func (tg *churnTarget) awaitGone(t testing.TB, ctx context.Context, topic string, deleted time.Time) {
	t.Helper()
	_, err := pollFor(ctx, 30*time.Second, 20*time.Millisecond, func() (bool, string) {
		for _, addr := range tg.seeds {
			m, err := nodeMetadata(ctx, tg.client(t, addr))
			if err != nil {
				return false, fmt.Sprintf("%s: %v", addr, err)
			}
			if td, ok := topicIn(m, topic); ok {
				return false, fmt.Sprintf("%s still lists it (%d partitions)", addr, len(td.Partitions))
			}
		}
		return true, ""
	})
	if err != nil {
		t.Fatalf("deleted topic %q still listed: %v", topic, err)
	}
	tg.goneMu.Lock()
	tg.goneTimes = append(tg.goneTimes, time.Since(deleted))
	tg.goneMu.Unlock()
	tg.deleted.Add(1)
	// Asked by name, every broker must answer UNKNOWN_TOPIC_OR_PARTITION.
	for _, addr := range tg.seeds {
		m, err := nodeMetadata(ctx, tg.client(t, addr), topic)
		if err != nil {
			t.Fatalf("metadata of deleted %q from %s: %v", topic, addr, err)
		}
		td, ok := topicIn(m, topic)
		if !ok || td.ErrorCode != kerr.UnknownTopicOrPartition.Code {
			t.Errorf("%s: metadata of deleted %q answers %v (listed %v), want UNKNOWN_TOPIC_OR_PARTITION", addr, topic, kerr.ErrorForCode(td.ErrorCode), ok)
		}
	}
}

func (tg *churnTarget) goneFigures() string { return durationFigures(&tg.goneMu, &tg.goneTimes) }

// durationFigures summarises *ds (guarded by mu) as n, p50, p99 and max.
func durationFigures(mu *sync.Mutex, ds *[]time.Duration) string {
	mu.Lock()
	s := slices.Clone(*ds)
	mu.Unlock()
	if len(s) == 0 {
		return "n=0"
	}
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	q := func(f float64) time.Duration { return s[min(len(s)-1, int(f*float64(len(s))))] }
	return fmt.Sprintf("n=%d p50=%v p99=%v max=%v", len(s), q(0.5).Round(time.Millisecond), q(0.99).Round(time.Millisecond), s[len(s)-1].Round(time.Millisecond))
}

// startChurnSingle is one fjord process; the suite's topics have RF 1.
func startChurnSingle(t *testing.T) *churnTarget {
	b := startBroker(t, t.TempDir(), churnSuiteSettings...)
	nodes := map[int]*Broker{1: b}
	tg := &churnTarget{name: "single", seeds: []string{b.Addr}, rf: 1, nodes: nodes, pinned: map[string]*kgo.Client{}}
	tg.watch = watchExits(t, nodes)
	t.Cleanup(tg.closeClients)
	return tg
}

// startChurnCluster3 is three combined fjord processes; RF 3.
func startChurnCluster3(t *testing.T) *churnTarget {
	c := startCluster(t, 3, append(slices.Clone(churnSuiteSettings), churnClusterSettings...)...)
	nodes := c.nodesByID()
	tg := &churnTarget{name: "cluster3", seeds: c.Addrs(), rf: 3, nodes: nodes, pinned: map[string]*kgo.Client{}}
	tg.watch = watchExits(t, nodes)
	t.Cleanup(tg.closeClients)
	return tg
}

// startChurnExternal is a running cluster (Apache Kafka, say) named by
// FJORD_KAFKA_SEEDS (comma-separated host:port, every broker), with
// auto.create.topics.enable=false for the "gone" checks to hold; RF is
// min(3, brokers).
func startChurnExternal(t *testing.T, seeds []string) *churnTarget {
	tg := &churnTarget{name: "external", seeds: seeds, nodes: map[int]*Broker{}, pinned: map[string]*kgo.Client{}}
	t.Cleanup(tg.closeClients)
	m, err := nodeMetadata(context.Background(), tg.client(t, seeds[0]))
	if err != nil {
		t.Fatalf("FJORD_KAFKA_SEEDS: metadata from %s: %v", seeds[0], err)
	}
	tg.rf = int16(min(3, len(m.Brokers)))
	return tg
}

// ---- the suite ----

// churnCase is one case of a client integration suite, in the manner of
// kafka-go's and franz-go's own: a fresh topic, some records, read back,
// maybe a group, listed and described, deleted and checked gone.
type churnCase struct {
	name       string
	partitions int
	records    int
	group      bool // also consume with a consumer group and check its commits
	parallel   bool // t.Parallel()
	deleteLive bool // delete while the case's producer and consumers are still open
	recreate   bool // then create the same name again (other partitions), check it holds only new records
	grow       int  // > 0: add partitions up to this count after the first records, and use them
	// quick > 0: no records; create a topic, wait until every broker
	// lists it, delete it at once, that many times (a test that gives up
	// early and runs its deferred delete; kafka-go's TestClientDeleteTopics).
	quick int
}

// churnCases is the case list both client suites implement: 24 cases of
// 1 to 10 partitions, most of them parallel, and 4 that create and at once
// delete topics of 4 to 10 partitions, 5 each.
func churnCases() []churnCase {
	var cs []churnCase
	for i := range 24 {
		c := churnCase{
			partitions: 1 + (i*7)%10,
			records:    40 + 23*(i%7),
			group:      i%3 == 1,
			parallel:   i%4 != 0,
			deleteLive: i%5 == 2,
			recreate:   i == 9 || i == 21,
			grow:       0,
		}
		if i == 5 || i == 17 {
			c.grow = c.partitions + 3
		}
		var flags []string
		for _, f := range []struct {
			on   bool
			name string
		}{{c.group, "group"}, {c.deleteLive, "live"}, {c.recreate, "recreate"}, {c.grow > 0, fmt.Sprintf("grow%d", c.grow)}, {!c.parallel, "serial"}} {
			if f.on {
				flags = append(flags, f.name)
			}
		}
		c.name = fmt.Sprintf("%02d-p%d-r%d", i, c.partitions, c.records)
		if len(flags) > 0 {
			c.name += "-" + strings.Join(flags, "-")
		}
		cs = append(cs, c)
	}
	for i, p := range []int{10, 7, 4, 10} {
		cs = append(cs, churnCase{name: fmt.Sprintf("%02d-p%d-create-delete-x5", 24+i, p), partitions: p, parallel: true, quick: 5})
	}
	return cs
}

// uniqueTopic is a topic name no other run uses (external clusters too).
func uniqueTopic(prefix string) string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return prefix + "-" + hex.EncodeToString(b[:])
}

// churnValue is record i's value in topic; churnKey its key (keys repeat,
// so per-key order is checkable).
func churnValue(topic string, i int) string { return fmt.Sprintf("%s#%d", topic, i) }
func churnKey(i int) string                 { return fmt.Sprintf("k%d", i%13) }

// churnSuite runs one case against one target.
type churnSuite func(t *testing.T, tg *churnTarget, c churnCase)

// runChurnSuite runs every case of churnCases through run on each topology
// (one node, three nodes at RF 3, and FJORD_KAFKA_SEEDS when set), then
// checks that every case passed on each and no fjord process died.
func runChurnSuite(t *testing.T, client string, run churnSuite) {
	cases := churnCases()
	type topo struct {
		name  string
		start func(*testing.T) *churnTarget
	}
	topos := []topo{{"single", startChurnSingle}, {"cluster3", startChurnCluster3}}
	if s := os.Getenv("FJORD_KAFKA_SEEDS"); s != "" {
		seeds := strings.Split(s, ",")
		topos = append(topos, topo{"external", func(t *testing.T) *churnTarget { return startChurnExternal(t, seeds) }})
	}
	passed := map[string]int{}
	for _, tp := range topos {
		t.Run(tp.name, func(t *testing.T) {
			tg := tp.start(t)
			start := time.Now()
			var n atomic.Int32
			t.Run("cases", func(t *testing.T) {
				for _, c := range cases {
					t.Run(c.name, func(t *testing.T) {
						if c.parallel {
							t.Parallel()
						}
						if tg.Ctx().Err() != nil {
							t.Fatalf("not run: %s", strings.Join(tg.watch.Died(), "; "))
						}
						run(t, tg, c)
						if !t.Failed() {
							n.Add(1)
						}
					})
				}
			})
			took := time.Since(start)
			if tg.watch != nil {
				tg.watch.Stop()
				for _, d := range tg.watch.Died() {
					t.Errorf("%s", d)
				}
			}
			bad := checkNodesHealthy(t, tg.nodes)
			passed[tp.name] = int(n.Load())
			t.Logf("CHURN SUITE %s %s: %d of %d cases passed in %v; topics created=%d deleted-and-gone=%d records produced=%d consumed=%d; delete->gone on every node %s; node problems (exits, panics)=%d",
				client, tp.name, n.Load(), len(cases), took.Round(10*time.Millisecond), tg.created.Load(), tg.deleted.Load(),
				tg.produced.Load(), tg.consumed.Load(), tg.goneFigures(), bad)
			if int(n.Load()) != len(cases) {
				t.Errorf("%d of %d cases passed", n.Load(), len(cases))
			}
		})
	}
	var figs []string
	for _, tp := range topos {
		figs = append(figs, fmt.Sprintf("%s=%d", tp.name, passed[tp.name]))
	}
	for _, tp := range topos[1:] {
		if passed[tp.name] != passed[topos[0].name] {
			t.Errorf("passing cases differ between topologies: %s (of %d)", strings.Join(figs, " "), len(cases))
			break
		}
	}
}

// checkRead compares records read back (value -> where, in read order per
// partition) with what was acknowledged (value -> where): every
// acknowledged record read once, at its position, nothing else, offsets
// increasing per partition.
func checkRead(t testing.TB, what string, acked map[string]recPos, read []readRec) {
	t.Helper()
	seen := map[string]int{}
	last := map[int32]int64{}
	var problems []string
	for _, r := range read {
		seen[r.value]++
		if prev, ok := last[r.pos.p]; ok && r.pos.off <= prev {
			problems = append(problems, fmt.Sprintf("p%d offset %d read after %d", r.pos.p, r.pos.off, prev))
		}
		last[r.pos.p] = r.pos.off
		want, ok := acked[r.value]
		switch {
		case !ok:
			problems = append(problems, fmt.Sprintf("unexpected record %q at p%d@%d", r.value, r.pos.p, r.pos.off))
		case want != r.pos:
			problems = append(problems, fmt.Sprintf("%q read at p%d@%d, acknowledged at p%d@%d", r.value, r.pos.p, r.pos.off, want.p, want.off))
		}
	}
	for v, n := range seen {
		if n > 1 {
			problems = append(problems, fmt.Sprintf("%q read %d times", v, n))
		}
	}
	missing := 0
	for v := range acked {
		if seen[v] == 0 {
			missing++
			if missing <= 5 {
				problems = append(problems, fmt.Sprintf("acknowledged %q never read", v))
			}
		}
	}
	if len(problems) > 0 {
		if len(problems) > 20 {
			problems = append(problems[:20], fmt.Sprintf("... and %d more", len(problems)-20))
		}
		t.Errorf("%s: %d acknowledged, %d read, %d missing:\n%s", what, len(acked), len(read), missing, strings.Join(problems, "\n"))
	}
}

type recPos struct {
	p   int32
	off int64
}

type readRec struct {
	value string
	pos   recPos
}
