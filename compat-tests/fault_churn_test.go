package compattests

// TestFaultChurnTopics (plan T15, issue 10): three fjord processes (the
// fault cluster, min.insync.replicas=2) run the fault workload on steady
// topics — an idempotent acks=all producer and a two-member consumer group,
// checked afterwards for lost, duplicated and reordered acknowledged records
// (fault_scenarios_test.go) — while several clients, each with its own admin
// client, create and delete topics of 1 to 30 partitions at RF 3 in a tight
// loop and write a few records to half of them. One node is SIGKILLed and
// restarted in the middle (full mode: twice, the busiest leader and then
// the active controller).
//
// Pass: no fjord process exits on its own and none logs a Go panic (the
// killed one dies once, by SIGKILL); the steady topics pass the fault
// checker; every churn topic is gone from every node's Metadata once the
// churn stops (deletes the churners could not confirm are retried first),
// and no node lists a deleted topic again once it had stopped listing it,
// unless the test restarted that node in between. Short (make compat): 16 s of churn, about 30 s in
// all; FJORD_FAULTS=full (make faults): 90 s, about 2 min. A "CHURN
// FIGURES" line gives the counts and the delete-to-gone times.

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

const (
	churnClients       = 3
	churnMaxPartitions = 30
	churnTopicPrefix   = "churn-"
	churnMaxPerClient  = 5000 // topics per churner, whatever the duration
)

func TestFaultChurnTopics(t *testing.T) {
	d, kills := 16*time.Second, 1
	if faultMode(t) == "full" {
		d, kills = 90*time.Second, 2
	}
	const down = 4 * time.Second // past the 3 s session timeout: the node is fenced, its leaderships move
	var fc *faultCluster
	runFaultScenario(t, "churn", 3*time.Second, func(r *faultRun) {
		fc = r.fc
		watch := watchExits(t, fc.nodesByID())
		ch := startChurn(t, fc, watch.Ctx, churnClients)
		r.logf("churn: %d clients creating and deleting topics of 1-%d partitions at RF 3 for %v", churnClients, churnMaxPartitions, d)

		// died fails the test with every node's panic, if a process
		// exited on its own.
		died := func() {
			t.Helper()
			ch.Stop()
			var b strings.Builder
			for _, id := range fc.IDs() {
				for _, p := range fc.Node(id).panics(40) {
					fmt.Fprintf(&b, "node %d logged a Go panic:\n%s\n", id, p)
				}
			}
			t.Fatalf("%s, %v after the churn began (%s):\n%s", strings.Join(watch.Died(), "; "),
				time.Since(ch.start).Round(100*time.Millisecond), ch.Figures(), b.String())
		}
		// until runs the churn until at, or fails the test if a node dies.
		until := func(at time.Time) {
			t.Helper()
			tm := time.NewTimer(time.Until(at))
			defer tm.Stop()
			select {
			case <-tm.C:
			case <-watch.Ctx.Done():
				died()
			}
		}

		for k := range kills {
			until(ch.start.Add(d * time.Duration(k+1) / time.Duration(kills+1)))
			victim := -1
			what := ""
			if k == 0 {
				p, l := r.busiestLeader()
				victim, what = l, fmt.Sprintf("leader of busiest partition p%d", p)
			} else {
				victim, what = fc.Controller(), "the active controller"
			}
			if victim < 0 || !fc.Running(victim) {
				victim, what = fc.LiveIDs()[0], "no live leader found; the first live node"
			}
			fc.Kill(victim)
			r.faults++
			r.logf("SIGKILL node %d (%s); %d acknowledged so far; churn so far: %s", victim, what, r.prod.Acked(), ch.Figures())
			until(time.Now().Add(down))
			st := time.Now()
			r.restartAll(victim)
			ch.restarted(victim)
			r.logf("node %d restarted and serving after %v", victim, time.Since(st).Round(10*time.Millisecond))
		}
		until(ch.start.Add(d))
		ch.Stop()
		if watch.Ctx.Err() != nil {
			died()
		}
		r.logf("churn stopped: %s", ch.Figures())

		// Deletes the churners could not confirm (a node was down, a
		// request timed out) are retried; then no node may list any churn
		// topic.
		st := time.Now()
		left, err := ch.deleteLeftovers(watch.Ctx, 60*time.Second)
		if watch.Ctx.Err() != nil {
			died()
		}
		if err != nil {
			t.Errorf("deleting the leftover churn topics: %v", err)
		}
		took, err := pollFor(watch.Ctx, 60*time.Second, 100*time.Millisecond, func() (bool, string) {
			var listed []string
			for _, id := range fc.IDs() {
				m, err := nodeMetadata(watch.Ctx, ch.nodeClient(id))
				if err != nil {
					return false, fmt.Sprintf("node %d: %v", id, err)
				}
				for _, tp := range m.Topics {
					if tp.Topic != nil && strings.HasPrefix(*tp.Topic, churnTopicPrefix) {
						listed = append(listed, fmt.Sprintf("node %d: %s", id, *tp.Topic))
					}
				}
			}
			if len(listed) > 10 {
				listed = append(listed[:10], fmt.Sprintf("... %d in all", len(listed)))
			}
			return len(listed) == 0, strings.Join(listed, "; ")
		})
		if watch.Ctx.Err() != nil {
			died()
		}
		if err == nil {
			ch.mu.Lock()
			ch.finalGone = time.Since(st)
			ch.mu.Unlock()
		}
		if err != nil {
			t.Errorf("churn topics still listed after the churn stopped: %v", err)
		} else {
			r.logf("no node lists a churn topic %v after the churn stopped (%d leftover deletes issued; the last check took %v)",
				time.Since(st).Round(time.Millisecond), left, took.Round(time.Millisecond))
		}
		for _, s := range ch.Resurrected() {
			t.Errorf("a deleted topic came back: %s", s)
		}
		t.Logf("CHURN FIGURES [%s]: %s | steady topic acked so far=%d | kills=%d", faultMode(t), ch.Figures(), r.prod.Acked(), r.faults)
		if ch.created.Load() == 0 || ch.deleted.Load() == 0 {
			t.Errorf("the churn created %d and deleted %d topics: nothing was exercised", ch.created.Load(), ch.deleted.Load())
		}
	})
	if fc == nil {
		return
	}
	// After the workload checks: every process still up, no panic in any
	// log (the killed process was killed by the test, not by itself).
	for _, id := range fc.IDs() {
		if !fc.Running(id) {
			t.Errorf("node %d is not running at the end", id)
		}
	}
	checkNodesHealthy(t, fc.nodesByID())
}

// churnTopicState is what a churner knows of one of its topics.
type churnTopicState struct {
	partitions int
	created    bool // the create was acknowledged (or TOPIC_ALREADY_EXISTS on a retry)
	deletedAt  time.Time
	goneAt     time.Time // first poll after deletedAt in which every live node answered and none listed it

	// Per node, from watchVanish's polls: whether its last answer listed
	// the topic, and (once it stopped listing it after the deletion) the
	// node's restart count then.
	listed  map[int]bool
	dropped map[int]int
}

// churn is the set of churners and the watcher that times deleted topics
// leaving every node's Metadata.
type churn struct {
	fc    *faultCluster
	start time.Time

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	attempted, created, createFailed, createUnknown atomic.Int64
	deleted, deleteFailed, neverExisted, partitions atomic.Int64
	recsAcked, recsFailed, recsUnanswered           atomic.Int64
	closeStuck                                      atomic.Int64 // clients whose Close did not return within 10s

	mu          sync.Mutex
	topics      map[string]*churnTopicState
	goneTimes   []time.Duration
	resurrected []string
	// staleAfterRestart counts deleted topics a node listed again after
	// the test restarted it (see watchVanish).
	staleAfterRestart int
	starts            map[int]int // node id -> restarts done by the test
	finalGone         time.Duration
	errSamples        map[string]int // error kinds of failed creates/deletes

	cmu     sync.Mutex
	clients map[int]*kgo.Client // per node, for its own Metadata
}

// startChurn starts n churners and the vanish watcher; Stop (also run at
// the test's clean-up, before the cluster's) ends them.
func startChurn(t *testing.T, fc *faultCluster, parent context.Context, n int) *churn {
	ctx, cancel := context.WithCancel(parent)
	ch := &churn{fc: fc, start: time.Now(), ctx: ctx, cancel: cancel, topics: map[string]*churnTopicState{},
		starts: map[int]int{}, errSamples: map[string]int{}, clients: map[int]*kgo.Client{}}
	t.Cleanup(func() {
		ch.Stop()
		ch.cmu.Lock()
		for _, cl := range ch.clients {
			cl.Close()
		}
		ch.cmu.Unlock()
	})
	for i := range n {
		adm, err := kgo.NewClient(kgo.SeedBrokers(fc.AllAddrs()...), kgo.DialTimeout(2*time.Second),
			kgo.RetryTimeout(8*time.Second), kgo.MetadataMinAge(250*time.Millisecond))
		if err != nil {
			t.Fatalf("churner %d admin client: %v", i, err)
		}
		prod, err := kgo.NewClient(kgo.SeedBrokers(fc.AllAddrs()...), kgo.DialTimeout(2*time.Second),
			kgo.RequiredAcks(kgo.AllISRAcks()), kgo.RecordPartitioner(kgo.ManualPartitioner()),
			kgo.RecordDeliveryTimeout(3*time.Second), kgo.MetadataMinAge(250*time.Millisecond))
		if err != nil {
			t.Fatalf("churner %d producer: %v", i, err)
		}
		ch.wg.Add(1)
		go func() {
			defer ch.wg.Done()
			ch.churner(i, kadm.NewClient(adm), prod)
			for _, cl := range []*kgo.Client{prod, adm} {
				if !closeWithin(cl, 10*time.Second) {
					ch.closeStuck.Add(1)
				}
			}
		}()
	}
	ch.wg.Add(1)
	go func() {
		defer ch.wg.Done()
		ch.watchVanish()
	}()
	return ch
}

// Stop ends the churners and the watcher and waits for them.
func (ch *churn) Stop() {
	ch.cancel()
	ch.wg.Wait()
}

// restarted notes that the test restarted node id (a restarted node may
// serve its old view for a moment; see watchVanish).
func (ch *churn) restarted(id int) {
	ch.mu.Lock()
	ch.starts[id]++
	ch.mu.Unlock()
}

func (ch *churn) sample(what string, err error) {
	k := what + ": " + err.Error()
	if i := strings.Index(k, "\n"); i > 0 {
		k = k[:i]
	}
	if len(k) > 120 {
		k = k[:120]
	}
	ch.mu.Lock()
	ch.errSamples[k]++
	ch.mu.Unlock()
}

// backoff waits d after a failed request, unless the churn ends first.
func (ch *churn) backoff(d time.Duration) {
	select {
	case <-ch.ctx.Done():
	case <-time.After(d):
	}
}

// churner creates topics churn-<id>-<n> of 1..30 partitions at RF 3 and
// deletes them again, keeping 0 to 3 alive at a time (so some die as soon
// as they are born, others after records were written to them), until the
// churn stops or it made churnMaxPerClient topics.
func (ch *churn) churner(id int, adm *kadm.Client, prod *kgo.Client) {
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), uint64(id)))
	var alive []string
	del := func(name string) {
		ctx, cancel := context.WithTimeout(ch.ctx, 10*time.Second)
		defer cancel()
		_, err := adm.DeleteTopic(ctx, name)
		now := time.Now()
		ch.mu.Lock()
		st := ch.topics[name]
		ch.mu.Unlock()
		switch {
		case err == nil:
			ch.deleted.Add(1)
			ch.mu.Lock()
			st.deletedAt = now
			ch.mu.Unlock()
			prod.PurgeTopicsFromClient(name)
		case errors.Is(err, kerr.UnknownTopicOrPartition):
			// Never created (its create failed or had an unknown
			// outcome), or an earlier delete of it did land.
			ch.neverExisted.Add(1)
			ch.mu.Lock()
			st.deletedAt = now
			ch.mu.Unlock()
			prod.PurgeTopicsFromClient(name)
		default:
			if ch.ctx.Err() == nil {
				ch.deleteFailed.Add(1)
				ch.sample("delete", err)
				ch.backoff(100 * time.Millisecond)
			}
			// Left for deleteLeftovers.
		}
	}
	for i := 0; i < churnMaxPerClient && ch.ctx.Err() == nil; i++ {
		name := fmt.Sprintf("%s%d-%05d", churnTopicPrefix, id, i)
		parts := 1 + rng.IntN(churnMaxPartitions)
		ch.mu.Lock()
		ch.topics[name] = &churnTopicState{partitions: parts}
		ch.mu.Unlock()
		ch.attempted.Add(1)
		ctx, cancel := context.WithTimeout(ch.ctx, 10*time.Second)
		_, err := adm.CreateTopic(ctx, int32(parts), 3, nil, name)
		cancel()
		refused := false
		switch {
		case err == nil, errors.Is(err, kerr.TopicAlreadyExists):
			ch.created.Add(1)
			ch.partitions.Add(int64(parts))
			ch.mu.Lock()
			ch.topics[name].created = true
			ch.mu.Unlock()
		case ch.ctx.Err() != nil:
			ch.createUnknown.Add(1)
		default:
			var ke *kerr.Error
			if errors.As(err, &ke) && !errors.Is(err, kerr.RequestTimedOut) && !errors.Is(err, kerr.NotController) {
				// Refused, say INVALID_REPLICATION_FACTOR while a
				// node is fenced: nothing to delete.
				refused = true
				ch.createFailed.Add(1)
				ch.mu.Lock()
				delete(ch.topics, name)
				ch.mu.Unlock()
			} else {
				ch.createUnknown.Add(1)
			}
			ch.sample("create", err)
			ch.backoff(100 * time.Millisecond)
		}
		if !refused {
			alive = append(alive, name)
		}
		if err == nil && i%2 == 0 {
			// A few records, as a test would write before deleting.
			var recs []*kgo.Record
			for p := range min(parts, 5) {
				recs = append(recs, &kgo.Record{Topic: name, Partition: int32(p), Value: []byte(name)})
			}
			pctx, pcancel := context.WithTimeout(ch.ctx, 5*time.Second)
			res, unanswered := produceWithin(pctx, prod, 2*time.Second, recs...)
			pcancel()
			for _, r := range res {
				if r.Err == nil {
					ch.recsAcked.Add(1)
				} else {
					ch.recsFailed.Add(1)
				}
			}
			ch.recsUnanswered.Add(int64(unanswered))
		}
		for keep := rng.IntN(4); len(alive) > keep && ch.ctx.Err() == nil; {
			del(alive[0])
			alive = alive[1:]
		}
	}
}

// nodeClient is a client seeded with node id alone (nodeMetadata).
func (ch *churn) nodeClient(id int) *kgo.Client {
	ch.cmu.Lock()
	defer ch.cmu.Unlock()
	if cl, ok := ch.clients[id]; ok {
		return cl
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(ch.fc.Addr(id)), kgo.DialTimeout(time.Second), kgo.RequestRetries(0))
	if err != nil {
		panic(err) // only on bad options
	}
	ch.clients[id] = cl
	return cl
}

// watchVanish asks every live node for its Metadata every 200ms. A deleted
// topic is gone at the first poll in which every live node answered and
// none listed it; the time from its delete's acknowledgement is recorded
// (a node that had not yet applied the topic's creation would make this
// early, so these figures are a lower bound; the final check is what
// passes or fails). Each node's view must be monotonic: a node that listed
// a topic and stopped listing it after its deletion must not list it
// again unless the test restarted it in between (a resurrection); after a
// restart it is counted, not failed (a restarted node may answer from its
// old view for a moment).
func (ch *churn) watchVanish() {
	tk := time.NewTicker(200 * time.Millisecond)
	defer tk.Stop()
	for {
		select {
		case <-ch.ctx.Done():
			return
		case <-tk.C:
		}
		live := ch.fc.LiveIDs()
		answers := map[int]map[string]bool{}
		for _, id := range live {
			m, err := nodeMetadata(ch.ctx, ch.nodeClient(id))
			if err != nil {
				continue
			}
			names := map[string]bool{}
			for _, tp := range m.Topics {
				if tp.Topic != nil {
					names[*tp.Topic] = true
				}
			}
			answers[id] = names
		}
		now := time.Now()
		ch.mu.Lock()
		for name, st := range ch.topics {
			if st.listed == nil {
				st.listed, st.dropped = map[int]bool{}, map[int]int{}
			}
			anyListed := false
			for id, names := range answers {
				on := names[name]
				anyListed = anyListed || on
				if st.deletedAt.IsZero() {
					st.listed[id] = on
					continue
				}
				start, wasDropped := st.dropped[id]
				switch {
				case on && wasDropped && start == ch.starts[id]:
					if len(ch.resurrected) < 20 {
						ch.resurrected = append(ch.resurrected, fmt.Sprintf("%s (deleted at %s) no longer listed by node %d, then listed again at %s",
							name, st.deletedAt.Format("15:04:05.000"), id, now.Format("15:04:05.000")))
					}
					delete(st.dropped, id)
				case on && wasDropped:
					ch.staleAfterRestart++
					delete(st.dropped, id)
				case !on && st.listed[id] && !wasDropped:
					st.dropped[id] = ch.starts[id]
				}
				st.listed[id] = on
			}
			if !st.deletedAt.IsZero() && st.goneAt.IsZero() && len(answers) == len(live) && !anyListed {
				st.goneAt = now
				if st.created {
					ch.goneTimes = append(ch.goneTimes, now.Sub(st.deletedAt))
				}
			}
		}
		ch.mu.Unlock()
	}
}

// deleteLeftovers deletes every churn topic any node still lists (deletes
// that failed or were cut short), retrying until none is listed or timeout;
// it returns how many deletes it issued.
func (ch *churn) deleteLeftovers(ctx context.Context, timeout time.Duration) (int, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(ch.fc.AllAddrs()...), kgo.DialTimeout(2*time.Second))
	if err != nil {
		return 0, err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	issued := 0
	_, err = pollFor(ctx, timeout, 200*time.Millisecond, func() (bool, string) {
		var left []string
		for _, id := range ch.fc.IDs() {
			m, err := nodeMetadata(ctx, ch.nodeClient(id))
			if err != nil {
				return false, fmt.Sprintf("node %d: %v", id, err)
			}
			for _, tp := range m.Topics {
				if tp.Topic != nil && strings.HasPrefix(*tp.Topic, churnTopicPrefix) && !slices.Contains(left, *tp.Topic) {
					left = append(left, *tp.Topic)
				}
			}
		}
		if len(left) == 0 {
			return true, ""
		}
		dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		rs, err := adm.DeleteTopics(dctx, left...)
		issued += len(left)
		if err != nil {
			return false, fmt.Sprintf("%d listed; delete: %v", len(left), err)
		}
		now := time.Now()
		var errs []string
		ch.mu.Lock()
		for _, r := range rs.Sorted() {
			if r.Err == nil || errors.Is(r.Err, kerr.UnknownTopicOrPartition) {
				if st, ok := ch.topics[r.Topic]; ok && st.deletedAt.IsZero() {
					st.deletedAt = now
				}
			} else if len(errs) < 5 {
				errs = append(errs, fmt.Sprintf("%s: %v", r.Topic, r.Err))
			}
		}
		ch.mu.Unlock()
		return false, fmt.Sprintf("%d still listed (%s); delete errors: %v", len(left), strings.Join(left[:min(5, len(left))], " "), errs)
	})
	return issued, err
}

// Resurrected lists deleted topics that came back (see watchVanish).
func (ch *churn) Resurrected() []string {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	return slices.Clone(ch.resurrected)
}

// Figures sums the churn up.
func (ch *churn) Figures() string {
	ch.mu.Lock()
	var errs []string
	for k, n := range ch.errSamples {
		errs = append(errs, fmt.Sprintf("%d× %s", n, k))
	}
	final := ch.finalGone
	stale := ch.staleAfterRestart
	resurrected := len(ch.resurrected)
	ch.mu.Unlock()
	slices.Sort(errs)
	if len(errs) > 8 {
		errs = append(errs[:8], fmt.Sprintf("... %d kinds", len(errs)))
	}
	s := fmt.Sprintf("topics attempted=%d created=%d (partitions %d) create-refused=%d create-unknown=%d deleted=%d delete-unknown-topic=%d delete-failed=%d; records on churn topics acked=%d failed=%d unanswered=%d; delete->gone from every live node %s",
		ch.attempted.Load(), ch.created.Load(), ch.partitions.Load(), ch.createFailed.Load(), ch.createUnknown.Load(),
		ch.deleted.Load(), ch.neverExisted.Load(), ch.deleteFailed.Load(), ch.recsAcked.Load(), ch.recsFailed.Load(), ch.recsUnanswered.Load(),
		durationFigures(&ch.mu, &ch.goneTimes))
	s += fmt.Sprintf("; deleted topics listed again: by a node not restarted since=%d, by a restarted node=%d", resurrected, stale)
	if final > 0 {
		s += fmt.Sprintf("; all gone from every node %v after the churn stopped", final.Round(time.Millisecond))
	}
	if n := ch.closeStuck.Load(); n > 0 {
		s += fmt.Sprintf("; %d churn clients still closing after 10s", n)
	}
	if len(errs) > 0 {
		s += "; errors: " + strings.Join(errs, "; ")
	}
	return s
}
