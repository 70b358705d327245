package compattests

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// KIP-848's online migration with real clients: a classic group of
// franz-go and sarama consumers becomes a consumer group when franz-go
// KIP-848 consumers join it (the classic members carry on as classic
// members of the consumer group), and becomes a classic group again when
// the KIP-848 consumers leave. A producer writes throughout; a checker
// sees every acknowledged record consumed, the committed offsets never
// move backwards, and no partition owned by two members at once, by the
// clients' own assigned and revoked callbacks.

// ownLedger is the checker of exclusive ownership: every member reports
// the partitions it is assigned and gives up, from its client's
// callbacks, as they happen; a partition assigned to one member while
// another still holds it is an overlap.
type ownLedger struct {
	mu       sync.Mutex
	owner    map[int32]string
	events   []string
	overlaps []string
}

func newOwnLedger() *ownLedger { return &ownLedger{owner: map[int32]string{}} }

func (l *ownLedger) assigned(member string, ps []int32) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := time.Now().Format("15:04:05.000")
	for _, p := range ps {
		if o, ok := l.owner[p]; ok && o != member {
			l.overlaps = append(l.overlaps, fmt.Sprintf("%s p%d assigned to %s while %s holds it", now, p, member, o))
		}
		l.owner[p] = member
	}
	l.events = append(l.events, fmt.Sprintf("%s %s +%v", now, member, sorted32(ps)))
}

func (l *ownLedger) revoked(member, how string, ps []int32) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, p := range ps {
		if l.owner[p] == member {
			delete(l.owner, p)
		}
	}
	l.events = append(l.events, fmt.Sprintf("%s %s %s%v", time.Now().Format("15:04:05.000"), member, how, sorted32(ps)))
}

// owners is who holds each partition now.
func (l *ownLedger) owners() map[int32]string {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := map[int32]string{}
	for p, o := range l.owner {
		out[p] = o
	}
	return out
}

func (l *ownLedger) report() (overlaps []string, history string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.overlaps...), strings.Join(l.events, "\n  ")
}

// commitWatch reads the group's committed offsets every 100 ms and
// records every one that moved backwards.
type commitWatch struct {
	stop, done chan struct{}
	mu         sync.Mutex
	last       map[int32]int64
	backwards  []string
	reads      int
}

func watchCommits(adm *kadm.Client, group, topic string) *commitWatch {
	w := &commitWatch{stop: make(chan struct{}), done: make(chan struct{}), last: map[int32]int64{}}
	go func() {
		defer close(w.done)
		for {
			select {
			case <-w.stop:
				return
			case <-time.After(100 * time.Millisecond):
			}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			resp, err := adm.FetchOffsets(ctx, group)
			cancel()
			if err != nil {
				continue // a coordinator move or a conversion in flight: read again
			}
			w.mu.Lock()
			w.reads++
			for p, o := range resp[topic] {
				if o.Err != nil || o.At < 0 {
					continue
				}
				if prev, ok := w.last[p]; ok && o.At < prev {
					w.backwards = append(w.backwards, fmt.Sprintf("%s p%d committed %d after %d", time.Now().Format("15:04:05.000"), p, o.At, prev))
				}
				w.last[p] = max(w.last[p], o.At)
			}
			w.mu.Unlock()
		}
	}()
	return w
}

func (w *commitWatch) Stop() (backwards []string, reads int) {
	close(w.stop)
	<-w.done
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.backwards, w.reads
}

// migrationMember is one consumer of the test: franz-go (classic or
// KIP-848) or sarama, feeding the ledger from its callbacks and the
// consumed log from what it processes.
type migrationMember struct {
	name  string
	close func()
}

// startFranzMigrant starts a franz-go member: classic with the
// cooperative-sticky balancer first and range second (the protocol it
// shares with sarama), or KIP-848 with kip848().
func startFranzMigrant(t *testing.T, name, addr, group, topic string, next bool, ledger *ownLedger, log *consumedLog) *migrationMember {
	t.Helper()
	opts := []kgo.Opt{
		kgo.SeedBrokers(addr),
		kgo.ClientID(name),
		kgo.ConsumerGroup(group),
		kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.SessionTimeout(groupSessionTimeout),
		kgo.HeartbeatInterval(groupHeartbeat),
		kgo.RebalanceTimeout(15 * time.Second),
		kgo.AutoCommitMarks(),
		kgo.AutoCommitInterval(200 * time.Millisecond),
		kgo.FetchMaxWait(200 * time.Millisecond),
		kgo.RetryBackoffFn(func(int) time.Duration { return 100 * time.Millisecond }),
		kgo.MetadataMinAge(250 * time.Millisecond),
		kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, a map[string][]int32) {
			if len(a[topic]) > 0 {
				ledger.assigned(name, a[topic])
			}
		}),
		kgo.OnPartitionsRevoked(func(ctx context.Context, cl *kgo.Client, r map[string][]int32) {
			// Commit what was processed before giving the partitions up,
			// as the default revoke does.
			if err := cl.CommitMarkedOffsets(ctx); err != nil {
				t.Logf("%s: commit on revoke: %v", name, err)
			}
			if len(r[topic]) > 0 {
				ledger.revoked(name, "-", r[topic])
			}
		}),
		kgo.OnPartitionsLost(func(_ context.Context, _ *kgo.Client, l map[string][]int32) {
			if len(l[topic]) > 0 {
				ledger.revoked(name, "lost", l[topic])
			}
		}),
	}
	if next {
		opts = append(opts, kip848())
	} else {
		opts = append(opts, kgo.Balancers(kgo.CooperativeStickyBalancer(), kgo.RangeBalancer()))
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			fs := cl.PollRecords(ctx, 200)
			if ctx.Err() != nil || fs.IsClientClosed() {
				return
			}
			recs := fs.Records()
			for _, r := range recs {
				log.add(name, r)
			}
			cl.MarkCommitRecords(recs...)
		}
	}()
	m := &migrationMember{name: name}
	var once sync.Once
	m.close = func() {
		once.Do(func() {
			cancel()
			<-done
			closed := make(chan struct{})
			go func() { cl.Close(); close(closed) }()
			select {
			case <-closed:
			case <-time.After(20 * time.Second):
				t.Logf("%s: Close did not return in 20s", name)
			}
		})
	}
	t.Cleanup(m.close)
	return m
}

// saramaMigrant is a sarama group member's handler: Setup and Cleanup
// are its assigned and revoked callbacks.
type saramaMigrant struct {
	name   string
	topic  string
	ledger *ownLedger
	log    *consumedLog
}

func (h *saramaMigrant) Setup(sess sarama.ConsumerGroupSession) error {
	if ps := sess.Claims()[h.topic]; len(ps) > 0 {
		h.ledger.assigned(h.name, ps)
	}
	return nil
}

func (h *saramaMigrant) Cleanup(sess sarama.ConsumerGroupSession) error {
	// Commit before the partitions go (sarama commits marks at the end of
	// a session too; this makes it synchronous).
	sess.Commit()
	if ps := sess.Claims()[h.topic]; len(ps) > 0 {
		h.ledger.revoked(h.name, "-", ps)
	}
	return nil
}

func (h *saramaMigrant) ConsumeClaim(sess sarama.ConsumerGroupSession, claim sarama.ConsumerGroupClaim) error {
	for {
		select {
		case msg, ok := <-claim.Messages():
			if !ok {
				return nil
			}
			h.log.add(h.name, &kgo.Record{Partition: msg.Partition, Offset: msg.Offset, Value: msg.Value})
			sess.MarkMessage(msg, "")
		case <-sess.Context().Done():
			return nil
		}
	}
}

// startSaramaMigrant starts a sarama member (eager, range).
func startSaramaMigrant(t *testing.T, name, addr, group, topic string, ledger *ownLedger, log *consumedLog) *migrationMember {
	t.Helper()
	cfg := sarama.NewConfig()
	cfg.Version = sarama.V3_0_0_0
	cfg.ClientID = name
	cfg.Consumer.Offsets.Initial = sarama.OffsetOldest
	cfg.Consumer.Offsets.AutoCommit.Enable = true
	cfg.Consumer.Offsets.AutoCommit.Interval = 100 * time.Millisecond
	cfg.Consumer.Group.Session.Timeout = groupSessionTimeout
	cfg.Consumer.Group.Heartbeat.Interval = groupHeartbeat
	cfg.Consumer.Group.Rebalance.Timeout = 15 * time.Second
	cfg.Consumer.Group.Rebalance.GroupStrategies = []sarama.BalanceStrategy{sarama.NewBalanceStrategyRange()}
	cfg.Consumer.Return.Errors = true
	cfg.Metadata.Retry.Backoff = 50 * time.Millisecond
	g, err := sarama.NewConsumerGroup([]string{addr}, group, cfg)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	h := &saramaMigrant{name: name, topic: topic, ledger: ledger, log: log}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		for e := range g.Errors() {
			t.Logf("%s: %v", name, e)
		}
	}()
	go func() {
		defer wg.Done()
		for ctx.Err() == nil {
			if err := g.Consume(ctx, []string{topic}, h); err != nil {
				if errors.Is(err, sarama.ErrClosedConsumerGroup) {
					return
				}
				time.Sleep(100 * time.Millisecond)
			}
		}
	}()
	m := &migrationMember{name: name}
	var once sync.Once
	m.close = func() {
		once.Do(func() {
			cancel()
			if err := g.Close(); err != nil {
				t.Logf("%s: Close: %v", name, err)
			}
			wg.Wait()
		})
	}
	t.Cleanup(m.close)
	return m
}

// describeClassic is DescribeGroups v5 of one group.
func describeClassic(t testing.TB, cl *kgo.Client, group string) kmsg.DescribeGroupsResponseGroup {
	t.Helper()
	req := kmsg.NewPtrDescribeGroupsRequest()
	req.Version = 5
	req.Groups = []string{group}
	resp, err := req.RequestWith(testCtx(t, 10*time.Second), cl)
	if err != nil || len(resp.Groups) != 1 {
		t.Fatalf("DescribeGroups: %v", err)
	}
	return resp.Groups[0]
}

// covered reports whether the ledger has an owner for each of the
// partitions, each owner among members, and every member of want owning
// something.
func covered(l *ownLedger, partitions int, want ...string) (bool, string) {
	own := l.owners()
	per := map[string][]int32{}
	for p, o := range own {
		per[o] = append(per[o], p)
	}
	var desc []string
	for m, ps := range per {
		desc = append(desc, fmt.Sprintf("%s=%v", m, sorted32(ps)))
	}
	sort.Strings(desc)
	ok := len(own) == partitions
	for _, m := range want {
		ok = ok && len(per[m]) > 0
	}
	return ok, strings.Join(desc, " ")
}

// TestGroupMigrationFranzSarama: two franz-go classic consumers and one
// sarama consumer form a classic group on a 6-partition topic; two
// franz-go KIP-848 consumers join the same group id, which upgrades it
// (ConsumerGroupDescribe: a consumer group with classic and consumer
// members); they leave, which downgrades it (DescribeGroups: a classic
// group again). On one node and on three at RF 3.
func TestGroupMigrationFranzSarama(t *testing.T) {
	for _, nodes := range []int{1, 3} {
		t.Run(fmt.Sprintf("nodes=%d", nodes), func(t *testing.T) {
			const topic, group, partitions = "migrate", "migrate-group", 6
			var addr string
			if nodes == 1 {
				addr = startBroker(t, t.TempDir(), groupBroker848Overrides...).Addr
			} else {
				c := startCluster(t, 3, append([]string{"offsets.topic.replication.factor=3", "default.replication.factor=3", "min.insync.replicas=2"}, groupBroker848Overrides...)...)
				addr = c.Addr(1)
			}
			adm := newAdmin(t, addr)
			if _, err := adm.CreateTopic(testCtx(t, 15*time.Second), partitions, int16(nodes), nil, topic); err != nil {
				t.Fatalf("create topic %s: %v", topic, err)
			}
			prodCl := newClient(t, addr)
			acked := produceAcked(t, prodCl, topic, "upfront", 600)
			prod := startBgProducer(prodCl, topic, "bg")
			ledger := newOwnLedger()
			log := newConsumedLog()
			commits := watchCommits(adm, group, topic)
			defer func() {
				if t.Failed() {
					_, h := ledger.report()
					t.Logf("ownership history:\n  %s", h)
				}
			}()

			// 1. The classic group. sarama (eager range only) comes first, so
			// that the group's protocol is range from its first generation:
			// franz-go members joining a cooperative-sticky group that
			// sarama then downgrades to eager revoke only after the new
			// assignment is out (franz-go's documented caveat), which the
			// ledger would rightly call an overlap, and which is no
			// business of the broker's.
			startSaramaMigrant(t, "sarama", addr, group, topic, ledger, log)
			waitUntil(t, 30*time.Second, "sarama owns the partitions", func() (bool, string) {
				return covered(ledger, partitions, "sarama")
			})
			startFranzMigrant(t, "classic-a", addr, group, topic, false, ledger, log)
			startFranzMigrant(t, "classic-b", addr, group, topic, false, ledger, log)
			d1 := waitUntil(t, 45*time.Second, "the classic members own the 6 partitions", func() (bool, string) {
				ok, desc := covered(ledger, partitions, "classic-a", "classic-b", "sarama")
				d := describeClassic(t, prodCl, group)
				return ok && d.State == "Stable" && len(d.Members) == 3, fmt.Sprintf("%s; DescribeGroups %s %q %d members", desc, kerr.ErrorForCode(d.ErrorCode), d.State, len(d.Members))
			})

			// 2. KIP-848 members join: the group is upgraded.
			next := []*migrationMember{
				startFranzMigrant(t, "next-a", addr, group, topic, true, ledger, log),
				startFranzMigrant(t, "next-b", addr, group, topic, true, ledger, log),
			}
			d2 := waitUntil(t, 60*time.Second, "a consumer group with both member types, all 5 consuming", func() (bool, string) {
				ok, desc := covered(ledger, partitions, "classic-a", "classic-b", "sarama", "next-a", "next-b")
				d := describe848(t, prodCl, group)
				types := map[int8]int{}
				for _, m := range d.Members {
					types[m.MemberType]++
				}
				return ok && d.ErrorCode == 0 && d.State == "Stable" && types[0] == 3 && types[1] == 2,
					fmt.Sprintf("%s; ConsumerGroupDescribe %s %q member types %v", desc, kerr.ErrorForCode(d.ErrorCode), d.State, types)
			})
			if d := describeClassic(t, prodCl, group); d.State != "Dead" {
				t.Errorf("DescribeGroups of the consumer group: state %q, want Dead (Kafka 4.x describes classic groups only)", d.State)
			}
			// The mixed group consumes for a while under the producer.
			time.Sleep(2 * time.Second)
			if d := describe848(t, prodCl, group); d.ErrorCode != 0 || len(d.Members) != 5 {
				t.Fatalf("the mixed group after 2s: %v, %d members", kerr.ErrorForCode(d.ErrorCode), len(d.Members))
			}

			// 3. The KIP-848 members leave: the group is downgraded.
			for _, m := range next {
				m.close()
			}
			d3 := waitUntil(t, 60*time.Second, "a classic group of the 3 classic members again", func() (bool, string) {
				ok, desc := covered(ledger, partitions, "classic-a", "classic-b", "sarama")
				d := describeClassic(t, prodCl, group)
				return ok && d.ErrorCode == 0 && d.State == "Stable" && d.ProtocolType == "consumer" && len(d.Members) == 3,
					fmt.Sprintf("%s; DescribeGroups %s %q type %q %d members", desc, kerr.ErrorForCode(d.ErrorCode), d.State, d.ProtocolType, len(d.Members))
			})
			if d := describe848(t, prodCl, group); d.ErrorCode != kerr.GroupIDNotFound.Code {
				t.Errorf("ConsumerGroupDescribe of the downgraded group: %v, want GROUP_ID_NOT_FOUND", kerr.ErrorForCode(d.ErrorCode))
			}

			t.Logf("classic group settled in %v, upgraded in %v, downgraded in %v", d1, d2, d3)

			// Everything acknowledged is consumed and committed.
			mergeAcked(acked, prod.Stop(t), produceAcked(t, prodCl, topic, "final", 300))
			checkAllConsumed(t, log, acked, 45*time.Second)
			end := endOffsets(t, adm, topic)
			waitUntil(t, 30*time.Second, "committed offsets reach the end offsets", func() (bool, string) {
				got := committedOffsets(t, adm, group, topic)
				return sameOffsets(got, end), fmt.Sprintf("committed %s, end %s", fmtOffsets(got), fmtOffsets(end))
			})
			backwards, reads := commits.Stop()
			if len(backwards) > 0 {
				t.Errorf("committed offsets moved backwards (%d reads): %v", reads, backwards)
			}
			if overlaps, _ := ledger.report(); len(overlaps) > 0 {
				t.Errorf("partitions owned by two members at once: %v", overlaps)
			}
			t.Logf("%d committed-offset reads, no partition owned twice", reads)
		})
	}
}

// TestGroupMigrationPolicyDisabled: with group.consumer.migration.policy
// disabled, a KIP-848 join to a classic group with members is refused as
// Kafka refuses it (GROUP_ID_NOT_FOUND, "Group <id> is not a consumer
// group."), and the group stays classic.
func TestGroupMigrationPolicyDisabled(t *testing.T) {
	const topic, group = "nomigrate", "nomigrate-group"
	b := startBroker(t, t.TempDir(), append([]string{"group.consumer.migration.policy=DISABLED"}, groupBroker848Overrides...)...)
	adm := newAdmin(t, b.Addr)
	createTopic(t, adm, topic, 2, nil)
	cl := newClient(t, b.Addr)
	ledger, log := newOwnLedger(), newConsumedLog()
	startFranzMigrant(t, "classic", b.Addr, group, topic, false, ledger, log)
	waitUntil(t, 30*time.Second, "a Stable classic group", func() (bool, string) {
		d := describeClassic(t, cl, group)
		return d.State == "Stable", d.State
	})
	req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	req.Version = 1
	req.Group, req.MemberID, req.MemberEpoch = group, "next-member-1", 0
	req.RebalanceTimeoutMillis = 30000
	req.SubscribedTopicNames = []string{topic}
	req.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
	resp, err := req.RequestWith(testCtx(t, 10*time.Second), cl)
	if err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("Group %s is not a consumer group.", group)
	if resp.ErrorCode != kerr.GroupIDNotFound.Code || resp.ErrorMessage == nil || *resp.ErrorMessage != want {
		t.Fatalf("KIP-848 join: %v %q, want GROUP_ID_NOT_FOUND %q", kerr.ErrorForCode(resp.ErrorCode), deref(resp.ErrorMessage), want)
	}
	if d := describeClassic(t, cl, group); d.ErrorCode != 0 || d.State != "Stable" || len(d.Members) != 1 {
		t.Fatalf("after the refused join: %v %q %d members", kerr.ErrorForCode(d.ErrorCode), d.State, len(d.Members))
	}
}
