package compattests

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// bgProducer writes small batches of records to a topic until stopped,
// remembering every acknowledged record.
type bgProducer struct {
	stop chan struct{}
	done chan struct{}

	mu     sync.Mutex
	acked  map[recKey]string
	failed int
	errs   []string
}

func startBgProducer(cl *kgo.Client, topic, prefix string) *bgProducer {
	p := &bgProducer{stop: make(chan struct{}), done: make(chan struct{}), acked: map[recKey]string{}}
	go func() {
		defer close(p.done)
		for i := 0; ; {
			select {
			case <-p.stop:
				return
			default:
			}
			var recs []*kgo.Record
			for j := 0; j < 20; j++ {
				recs = append(recs, &kgo.Record{Topic: topic, Key: []byte(fmt.Sprintf("key-%d", i%97)), Value: []byte(fmt.Sprintf("%s-%d", prefix, i))})
				i++
			}
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			res := cl.ProduceSync(ctx, recs...)
			cancel()
			p.mu.Lock()
			for _, r := range res {
				if r.Err != nil {
					p.failed++
					if len(p.errs) < 5 {
						p.errs = append(p.errs, r.Err.Error())
					}
					continue
				}
				p.acked[recKey{r.Record.Partition, r.Record.Offset}] = string(r.Record.Value)
			}
			p.mu.Unlock()
			time.Sleep(20 * time.Millisecond) // pacing, not waiting for a condition
		}
	}()
	return p
}

func (p *bgProducer) Acked() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.acked)
}

// Stop ends production and returns the acknowledged records.
func (p *bgProducer) Stop(t testing.TB) map[recKey]string {
	close(p.stop)
	<-p.done
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.failed > 0 {
		t.Logf("background producer: %d records not acknowledged (excluded from the check): %v", p.failed, p.errs)
	}
	return p.acked
}

func mergeAcked(dst map[recKey]string, srcs ...map[recKey]string) {
	for _, s := range srcs {
		for k, v := range s {
			dst[k] = v
		}
	}
}

// checkAllConsumed waits until log covers every acked record, then logs
// the duplicate count.
func checkAllConsumed(t *testing.T, log *consumedLog, acked map[recKey]string, timeout time.Duration, members ...*franzMember) {
	t.Helper()
	var missing []recKey
	var wrong []string
	var dups int
	start := time.Now()
	for {
		missing, wrong, dups = log.check(acked)
		if len(missing) == 0 || time.Since(start) > timeout {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("at-least-once: %d records acknowledged, %d distinct consumed, missing=%d, duplicates=%d, per member %v",
		len(acked), log.distinct(), len(missing), dups, log.memberCounts())
	if len(wrong) > 0 {
		t.Errorf("%d records consumed with the wrong value, e.g. %v", len(wrong), wrong[:min(5, len(wrong))])
	}
	if len(missing) > 0 {
		for _, m := range members {
			t.Log(m.History())
		}
		t.Fatalf("missing=%d acknowledged records never consumed after %v, e.g. %v", len(missing), timeout, missing[:min(10, len(missing))])
	}
}

// checkCommittedAtEnd makes the members commit what they marked and waits
// until the group's committed offsets equal the topic's end offsets.
func checkCommittedAtEnd(t *testing.T, adm *kadm.Client, group, topic string, members ...*franzMember) {
	t.Helper()
	end := endOffsets(t, adm, topic)
	waitUntil(t, 15*time.Second, "committed offsets reach the end offsets", func() (bool, string) {
		for _, m := range members {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			if err := m.cl.CommitMarkedOffsets(ctx); err != nil {
				t.Logf("%s CommitMarkedOffsets: %v", m.name, err)
			}
			cancel()
		}
		got := committedOffsets(t, adm, group, topic)
		return sameOffsets(got, end), fmt.Sprintf("committed %s, end %s", fmtOffsets(got), fmtOffsets(end))
	})
}

// TestGroupFranzFailover: two franz-go members split a 6-partition topic; one
// vanishes from the network without leaving (its connections are cut), the
// survivor takes all partitions after the session timeout; a third member
// joins and the partitions are spread again. A producer writes throughout;
// every acknowledged record is consumed at least once.
func TestGroupFranzFailover(t *testing.T) {
	for _, tc := range []struct {
		name     string
		balancer kgo.GroupBalancer
	}{
		{"EagerRange", kgo.RangeBalancer()},
		{"CooperativeSticky", kgo.CooperativeStickyBalancer()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const topic, group, partitions = "failover", "failover-group", 6
			b := startBroker(t, t.TempDir(), groupBrokerOverrides...)
			adm := newAdmin(t, b.Addr)
			createTopic(t, adm, topic, partitions, nil)
			prodCl := newClient(t, b.Addr)
			acked := produceAcked(t, prodCl, topic, "upfront", 1200)
			prod := startBgProducer(prodCl, topic, "bg")

			log := newConsumedLog()
			bal := kgo.Balancers(tc.balancer)
			ma := startFranzMember(t, "member-a", b.Addr, group, topic, log, nil, bal)
			mb := startFranzMember(t, "member-b", b.Addr, group, topic, log, nil, bal)
			d := waitUntil(t, 30*time.Second, "two members own 3 partitions each", func() (bool, string) {
				return ownership(partitions, 3, 3, ma, mb)
			})
			t.Logf("split 3/3 after %v: a=%v b=%v", d, ma.Owned(), mb.Owned())
			waitUntil(t, 15*time.Second, "member-b processes records", func() (bool, string) {
				n := log.memberCounts()["member-b"]
				return n > 0, fmt.Sprintf("member-b processed %d", n)
			})

			// Let member-b commit some progress first, so that the survivor
			// must pick up its commits.
			waitUntil(t, 15*time.Second, "member-b commits offsets", func() (bool, string) {
				com := committedOffsets(t, adm, group, topic)
				for _, p := range mb.Owned() {
					if com[p] > 0 {
						return true, ""
					}
				}
				return false, fmt.Sprintf("committed %s, member-b owns %v", fmtOffsets(com), mb.Owned())
			})

			// Crash member-b: stop processing, then cut its network. It
			// never sends LeaveGroup.
			mb.StopPolling()
			mb.dialer.Cut()
			d = waitUntil(t, groupSessionTimeout+15*time.Second, "survivor owns all 6 partitions", func() (bool, string) {
				return ownership(partitions, partitions, partitions, ma)
			})
			t.Logf("survivor owns all %d partitions %v after member-b's network was cut (session timeout %v)", partitions, d, groupSessionTimeout)
			if d < groupSessionTimeout/2 {
				t.Logf("note: the survivor took over well before the session timeout: the broker presumably removed member-b when its connections closed")
			}

			mc := startFranzMember(t, "member-c", b.Addr, group, topic, log, nil, bal)
			d = waitUntil(t, 30*time.Second, "survivor and new member both own partitions", func() (bool, string) {
				return ownership(partitions, 1, partitions-1, ma, mc)
			})
			t.Logf("rebalanced after member-c joined in %v: a=%v c=%v", d, ma.Owned(), mc.Owned())
			waitUntil(t, 15*time.Second, "member-c processes records", func() (bool, string) {
				n := log.memberCounts()["member-c"]
				return n > 0, fmt.Sprintf("member-c processed %d", n)
			})

			mergeAcked(acked, prod.Stop(t), produceAcked(t, prodCl, topic, "final", 300))
			checkAllConsumed(t, log, acked, 30*time.Second, ma, mb, mc)
			checkCommittedAtEnd(t, adm, group, topic, ma, mc)
			t.Log(ma.History())
			t.Log(mb.History())
			t.Log(mc.History())
			ma.Close(10 * time.Second)
			mc.Close(10 * time.Second)
			mb.Close(2 * time.Second) // cut off: cannot leave
		})
	}
}

// TestGroupFranzRestartResume: a member commits exactly half of every
// partition and leaves; after a broker restart, FetchOffsets returns the
// same offsets and a new member of the group starts exactly there.
func TestGroupFranzRestartResume(t *testing.T) {
	const topic, group, partitions = "resume", "resume-group", 4
	b := startBroker(t, t.TempDir(), groupBrokerOverrides...)
	adm := newAdmin(t, b.Addr)
	createTopic(t, adm, topic, partitions, nil)

	// Partition p holds 100+10p records.
	prod := newClient(t, b.Addr, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	var recs []*kgo.Record
	for p := int32(0); p < partitions; p++ {
		for i := 0; i < 100+10*int(p); i++ {
			recs = append(recs, &kgo.Record{Topic: topic, Partition: p, Value: []byte(fmt.Sprintf("p%d-%d", p, i))})
		}
	}
	if err := prod.ProduceSync(testCtx(t, 30*time.Second), recs...).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
	end := endOffsets(t, adm, topic)
	half := map[int32]int64{}
	for p, o := range end {
		half[p] = o / 2
	}

	groupOpts := func(addr string) []kgo.Opt {
		return []kgo.Opt{
			kgo.SeedBrokers(addr),
			kgo.ConsumerGroup(group),
			kgo.ConsumeTopics(topic),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
			kgo.DisableAutoCommit(),
			kgo.SessionTimeout(groupSessionTimeout),
			kgo.HeartbeatInterval(groupHeartbeat),
			kgo.FetchMaxWait(200 * time.Millisecond),
		}
	}

	// First member: read until every partition has reached its half, then
	// commit the record just before the half (offset half-1 -> commit half).
	c1, err := kgo.NewClient(groupOpts(b.Addr)...)
	if err != nil {
		t.Fatal(err)
	}
	atHalf := map[int32]*kgo.Record{}
	ctx := testCtx(t, 30*time.Second)
	for len(atHalf) < partitions {
		fs := c1.PollFetches(ctx)
		if ctx.Err() != nil {
			c1.Close()
			t.Fatalf("first member reached the half of %d of %d partitions in 30s", len(atHalf), partitions)
		}
		fs.EachError(func(tp string, p int32, err error) { t.Errorf("first member fetch %s[%d]: %v", tp, p, err) })
		for _, r := range fs.Records() {
			if r.Offset == half[r.Partition]-1 {
				atHalf[r.Partition] = r
			}
		}
	}
	var toCommit []*kgo.Record
	for _, r := range atHalf {
		toCommit = append(toCommit, r)
	}
	if err := c1.CommitRecords(testCtx(t, 15*time.Second), toCommit...); err != nil {
		c1.Close()
		t.Fatalf("CommitRecords: %v", err)
	}
	c1.Close()

	before := committedOffsets(t, adm, group, topic)
	if !sameOffsets(before, half) {
		t.Fatalf("before restart: FetchOffsets %s, committed %s", fmtOffsets(before), fmtOffsets(half))
	}

	b.Stop()
	b.Restart()
	adm2 := newAdmin(t, b.Addr)
	after := committedOffsets(t, adm2, group, topic)
	if !sameOffsets(after, before) {
		t.Fatalf("after restart: FetchOffsets %s, before restart %s", fmtOffsets(after), fmtOffsets(before))
	}
	t.Logf("committed offsets %s survive the restart", fmtOffsets(after))

	// Second member: the first record of each partition is at the committed
	// offset, and it reads exactly the rest.
	c2 := newClient(t, b.Addr, groupOpts(b.Addr)[1:]...)
	first := map[int32]int64{}
	count := map[int32]int64{}
	var want int64
	for p := range end {
		want += end[p] - half[p]
	}
	var got int64
	ctx = testCtx(t, 30*time.Second)
	for got < want {
		fs := c2.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("second member read %d of %d records in 30s (first offsets %s)", got, want, fmtOffsets(first))
		}
		fs.EachError(func(tp string, p int32, err error) { t.Errorf("second member fetch %s[%d]: %v", tp, p, err) })
		for _, r := range fs.Records() {
			if _, ok := first[r.Partition]; !ok {
				first[r.Partition] = r.Offset
			}
			if wantV := fmt.Sprintf("p%d-%d", r.Partition, r.Offset); string(r.Value) != wantV {
				t.Errorf("p%d@%d: value %q, want %q", r.Partition, r.Offset, r.Value, wantV)
			}
			count[r.Partition]++
			got++
		}
	}
	if !sameOffsets(first, half) {
		t.Errorf("after restart the group resumed at %s, want the committed %s", fmtOffsets(first), fmtOffsets(half))
	}
	for p := range end {
		if count[p] != end[p]-half[p] {
			t.Errorf("partition %d: read %d records after resuming, want %d", p, count[p], end[p]-half[p])
		}
	}
}

// brokerAddr reads b.Addr under the harness's lock (Restart rewrites it).
func brokerAddr(b *Broker) string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.Addr
}

// TestGroupFranzBrokerRestart: two franz-go members consume while a producer
// writes; the broker is stopped and restarted under them. All clients dial
// whatever address the broker has now, so they follow it even if its port
// changed. Both members must rejoin on their own and every acknowledged
// record must be consumed.
func TestGroupFranzBrokerRestart(t *testing.T) {
	const topic, group, partitions = "midflight", "midflight-group", 4
	b := startBroker(t, t.TempDir(), groupBrokerOverrides...)
	createTopic(t, newAdmin(t, b.Addr), topic, partitions, nil)
	follow := func() *cutDialer { return &cutDialer{target: func() string { return brokerAddr(b) }} }

	prodCl := newClient(t, b.Addr, kgo.Dialer(follow().dial), kgo.MetadataMinAge(250*time.Millisecond),
		kgo.RetryBackoffFn(func(int) time.Duration { return 100 * time.Millisecond }))
	acked := produceAcked(t, prodCl, topic, "upfront", 400)
	prod := startBgProducer(prodCl, topic, "bg")
	log := newConsumedLog()
	ma := startFranzMember(t, "member-a", b.Addr, group, topic, log, follow())
	mb := startFranzMember(t, "member-b", b.Addr, group, topic, log, follow())
	waitUntil(t, 30*time.Second, "two members own 2 partitions each", func() (bool, string) {
		return ownership(partitions, 2, 2, ma, mb)
	})
	waitUntil(t, 15*time.Second, "both members process records", func() (bool, string) {
		c := log.memberCounts()
		return c["member-a"] > 0 && c["member-b"] > 0, fmt.Sprint(c)
	})

	oldAddr := b.Addr
	assignedBefore := map[string]int{"member-a": ma.Assignments(), "member-b": mb.Assignments()}
	stopAt := time.Now()
	b.Stop()
	b.Restart()
	restartedAt := time.Now()
	t.Logf("broker stopped and restarted in %v", restartedAt.Sub(stopAt))
	if b.Addr != oldAddr {
		t.Logf("broker restarted on a new address %s (was %s); the clients' dialer follows it", b.Addr, oldAddr)
	}

	// Records acknowledged by the restarted broker, on every partition,
	// must reach both members: each member consumes again (records
	// fetched before the restart and polled after it do not count).
	post := map[recKey]string{}
	waitUntil(t, 20*time.Second, "records produced after the restart land on every partition", func() (bool, string) {
		mergeAcked(post, produceAcked(t, prodCl, topic, fmt.Sprintf("post-%d", len(post)), 40))
		ps := map[int32]bool{}
		for k := range post {
			ps[k.p] = true
		}
		return len(ps) == partitions, fmt.Sprintf("partitions %v", ps)
	})
	t.Logf("%d records acknowledged by the restarted broker on all partitions %v after the restart", len(post), time.Since(restartedAt))
	mergeAcked(acked, post)
	waitUntil(t, groupSessionTimeout+30*time.Second, "both members consume records produced after the restart", func() (bool, string) {
		by, pending := log.consumersOf(post)
		return by["member-a"] > 0 && by["member-b"] > 0, fmt.Sprintf("post-restart records consumed per member %v, %d pending", by, pending)
	})
	t.Logf("both members consume post-restart records %v after the restart; assignments before/after: a %d/%d, b %d/%d",
		time.Since(restartedAt), assignedBefore["member-a"], ma.Assignments(), assignedBefore["member-b"], mb.Assignments())

	adm := newAdmin(t, b.Addr)
	waitUntil(t, 20*time.Second, "group Stable with both members assigned", func() (bool, string) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		dg, err := adm.DescribeGroups(ctx, group)
		if err != nil {
			return false, err.Error()
		}
		g := dg[group]
		if g.Err != nil || g.State != "Stable" || len(g.Members) != 2 {
			return false, fmt.Sprintf("state %q, %d members, err %v", g.State, len(g.Members), g.Err)
		}
		for _, m := range g.Members {
			ca, ok := m.Assigned.AsConsumer()
			if !ok || len(ca.Topics) == 0 || len(ca.Topics[0].Partitions) == 0 {
				return false, fmt.Sprintf("member %s (%s) has no partitions", m.MemberID, m.ClientID)
			}
		}
		ok, desc := ownership(partitions, 1, partitions-1, ma, mb)
		return ok, desc
	})

	mergeAcked(acked, prod.Stop(t), produceAcked(t, prodCl, topic, "final", 200))
	checkAllConsumed(t, log, acked, 30*time.Second, ma, mb)
	checkCommittedAtEnd(t, adm, group, topic, ma, mb)
	t.Log(ma.History())
	t.Log(mb.History())
	ma.Close(10 * time.Second)
	mb.Close(10 * time.Second)
}
