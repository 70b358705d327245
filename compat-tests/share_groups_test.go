package compattests

import (
	"context"
	"crypto/rand"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// KIP-932 share groups with franz-go's share consumer (kgo.ShareGroup):
// several members consume one partition, each record is acquired by one
// member at a time under a lock, acknowledged one by one (accept,
// release, reject), delivered again when its lock expires or it is
// released, and archived after share.delivery.count.limit deliveries.
// The helpers are in share_helpers_test.go.

// shareClusterOverrides are the three-node settings: data, the offsets
// topic and __share_group_state (its replication factor defaults to 3,
// capped at the voters, min ISR 2) at RF 3 with min.insync.replicas=2.
var shareClusterOverrides = append([]string{
	"offsets.topic.replication.factor=3", "default.replication.factor=3", "min.insync.replicas=2",
}, shareBrokerOverrides...)

// churnTopics creates and deletes 2-partition side topics every 300 ms
// until the returned stop is called, so that every step of a test sees a
// changed metadata image.
func churnTopics(t *testing.T, adm *kadm.Client, prefix string) (stop func()) {
	stopc, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; ; i++ {
			select {
			case <-stopc:
				return
			case <-time.After(300 * time.Millisecond):
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			name := fmt.Sprintf("%s-%d", prefix, i)
			if _, err := adm.CreateTopic(ctx, 2, -1, nil, name); err != nil {
				t.Logf("side topic %s: %v", name, err)
			}
			if i > 0 {
				_, _ = adm.DeleteTopics(ctx, fmt.Sprintf("%s-%d", prefix, i-1))
			}
			cancel()
		}
	}()
	return func() { close(stopc); <-done }
}

// shareTarget is where a share test runs: one node or three.
type shareTarget struct {
	addrs []string
	cl    *kgo.Client   // reaches every node
	nodes []*kgo.Client // one pinned client per node (group config checks)
	c     *Cluster      // nil on one node
}

func startShareTarget(t *testing.T, nodes int, extra ...string) *shareTarget {
	t.Helper()
	st := &shareTarget{}
	if nodes == 1 {
		b := startBroker(t, t.TempDir(), append(slices.Clone(shareBrokerOverrides), extra...)...)
		st.addrs = []string{b.Addr}
	} else {
		st.c = startCluster(t, nodes, append(slices.Clone(shareClusterOverrides), extra...)...)
		st.addrs = st.c.Addrs()
	}
	st.cl = newClient(t, st.addrs[0], kgo.SeedBrokers(st.addrs...))
	if st.c == nil {
		st.nodes = []*kgo.Client{st.cl}
	} else {
		for _, id := range st.c.IDs() {
			st.nodes = append(st.nodes, st.c.Client(id))
		}
	}
	return st
}

// createTopicID creates topic at RF rf and returns its id.
func (st *shareTarget) createTopicID(t *testing.T, topic string, partitions int32, rf int16) [16]byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	resp, err := kadm.NewClient(st.cl).CreateTopic(ctx, partitions, rf, nil, topic)
	if err != nil {
		t.Fatalf("create topic %s: %v (%s)", topic, err, resp.ErrMessage)
	}
	return [16]byte(resp.ID)
}

// TestShareGroupFranzBusy: eight franz-go share consumers on a
// 2-partition topic (four per partition, by the simple assignor) while
// records are produced before and during the run and other topics come
// and go. Every member gets a share of the records: that is what share
// groups are for (a consumer group would leave six of the eight idle).
// Every acknowledged record is accepted (acknowledgement confirmed) at
// least once, none is delivered with a delivery count below 1, counts
// never go down, no record is acquired again once an acceptance of it was
// confirmed, no acknowledgement fails, and every share-partition's start
// offset reaches the end of its partition. ShareGroupDescribe shows the
// eight members with one partition each; ListGroups v5 filtered on type
// "share" lists the group as "share", filtered on "consumer" and
// "classic" it does not. On one node and on three (RF 3,
// min.insync.replicas=2).
func TestShareGroupFranzBusy(t *testing.T) {
	for _, nodes := range []int{1, 3} {
		t.Run(fmt.Sprintf("nodes=%d", nodes), func(t *testing.T) {
			const topic, group, partitions, nMembers = "sharebusy", "sharebusy-group", 2, 8
			st := startShareTarget(t, nodes)
			topicID := st.createTopicID(t, topic, partitions, int16(nodes))
			setShareConfigs(t, group, st.nodes, "share.auto.offset.reset", "earliest")
			acked := produceAcked(t, st.cl, topic, "upfront", 1000)
			prod := startBgProducer(st.cl, topic, "bg")
			stopChurn := churnTopics(t, kadm.NewClient(st.cl), "sideshare")
			defer stopChurn()

			log := newShareLog(defaultShareLock)
			var members []*shareMember
			for i := range nMembers {
				// 20 records a fetch at most, so a fetch does not take
				// everything there is.
				members = append(members, startShareMember(t, fmt.Sprintf("s%d", i), st.addrs, group, topic, log, nil, kgo.ShareMaxRecords(20)))
			}
			defer func() {
				for _, m := range members {
					m.Close(10 * time.Second)
				}
			}()
			dumpOnFailure(t, log, members)

			// Busy with the records produced while they run, not only
			// with the backlog: each takes its turn at the new ones.
			live := func(d shareDelivery) bool { return strings.HasPrefix(d.value, "bg-") }
			d := waitUntil(t, 60*time.Second, "every member accepts records produced while it runs", func() (bool, string) {
				got := log.confirmedAccepts(live)
				for _, m := range members {
					if got[m.name] == 0 {
						return false, fmt.Sprintf("confirmed accepts of records produced meanwhile, per member: %v", got)
					}
				}
				return true, ""
			})
			t.Logf("all %d members busy after %v: accepts per member %v, of records produced meanwhile %v", nMembers, d.Round(time.Millisecond), log.confirmedAccepts(nil), log.confirmedAccepts(live))
			var view shareGroupView
			waitUntil(t, 30*time.Second, "ShareGroupDescribe: 8 members at the group epoch, one partition each, four per partition", func() (bool, string) {
				var err error
				if view, err = describeShareGroup(st.cl, group); err != nil {
					return false, err.Error()
				}
				per := map[int32]int{}
				for _, m := range view.members {
					if len(m.assigned) != 1 || m.epoch != view.epoch {
						return false, view.String()
					}
					per[m.assigned[0]]++
				}
				return view.state == "Stable" && len(view.members) == nMembers && per[0] == 4 && per[1] == 4, view.String()
			})
			clients := map[string]bool{}
			for _, m := range view.members {
				clients[m.client] = true
			}
			for _, m := range members {
				if !clients[m.name] {
					t.Errorf("member %s is not described: %s", m.name, view)
				}
			}
			t.Logf("described: %s", view)

			if typ, ok := listGroupsOfType(t, st.addrs, "share")[group]; !ok || typ != "share" {
				t.Errorf("ListGroups v5 of type share: %s listed %v as %q, want share", group, ok, typ)
			}
			if typ, ok := listGroupsOfType(t, st.addrs, "consumer", "classic")[group]; ok {
				t.Errorf("ListGroups v5 of types consumer, classic: %s listed as %q", group, typ)
			}

			mergeAcked(acked, prod.Stop(t), produceAcked(t, st.cl, topic, "final", 200))
			waitUntil(t, 60*time.Second, "every acknowledged record accepted", func() (bool, string) {
				miss := log.missing(acked, true)
				return len(miss) == 0, fmt.Sprintf("%d of %d not accepted, e.g. %v", len(miss), len(acked), miss[:min(5, len(miss))])
			})
			awaitShareDone(t, st.cl, group, topicID, endOffsets(t, kadm.NewClient(st.cl), topic), 30*time.Second)
			t.Logf("%d records produced: %s", len(acked), log.figures())
			checkShareLog(t, log, acked)
			var unconfirmed []string
			for _, d := range log.snapshot() {
				if d.outcome != ackConfirmed {
					unconfirmed = append(unconfirmed, fmt.Sprintf("p%d@%d %v", d.key.p, d.key.off, d))
				}
			}
			if len(unconfirmed) > 0 {
				t.Errorf("%d acknowledgements not confirmed without any fault, e.g.\n  %s", len(unconfirmed), strings.Join(unconfirmed[:min(10, len(unconfirmed))], "\n  "))
			}
		})
	}
}

// checkShareLog runs the checks every share test makes of its log: locks
// as long as the group's, values as produced, delivery counts at least 1
// and never down, the same count never delivered twice (Fjord persists
// acquisitions), and no record acquired again after an acceptance of it
// was confirmed.
func checkShareLog(t *testing.T, log *shareLog, acked map[recKey]string) {
	t.Helper()
	if late := log.checkAcquired(); len(late) > 0 {
		t.Errorf("%d deliveries whose lock, as announced, ends more than the group's lock duration after their poll, e.g. %v", len(late), late[:min(5, len(late))])
	}
	if wrong := log.checkValues(acked); len(wrong) > 0 {
		t.Errorf("%d deliveries with the wrong value, e.g. %v", len(wrong), wrong[:min(5, len(wrong))])
	}
	bad, repeated := log.checkDeliveryCounts()
	if len(bad) > 0 {
		t.Errorf("%d delivery count violations, e.g.\n  %s", len(bad), strings.Join(bad[:min(10, len(bad))], "\n  "))
	}
	if len(repeated) > 0 {
		t.Errorf("%d records delivered twice with one delivery count (Fjord persists every acquisition's count, group/sharepart/doc.go), e.g.\n  %s",
			len(repeated), strings.Join(repeated[:min(10, len(repeated))], "\n  "))
	}
	if again := log.checkAcceptedStayDone(); len(again) > 0 {
		t.Errorf("%d deliveries after a confirmed acceptance, e.g.\n  %s", len(again), strings.Join(again[:min(10, len(again))], "\n  "))
	}
}

// dumpOnFailure logs the members' errors if the test fails.
func dumpOnFailure(t *testing.T, log *shareLog, members []*shareMember) {
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		t.Logf("share log: %s", log.figures())
		for _, m := range members {
			t.Log(m.Events())
		}
	})
}

// TestShareGroupCrashRedelivery: consumer A acquires records and dies
// without acknowledging them; consumer B gets exactly those records again
// with delivery count 2. share.record.lock.duration.ms is 2000 on the
// group (below the broker's default floor, so the broker runs with
// group.share.min.record.lock.duration.ms=1000, Kafka's own lowest).
//
//   - frozen: A's connections stay open but fall silent (a hung host, a
//     network partition without resets): the broker learns nothing, so
//     the records come back when A's acquisition lock expires, not
//     before (B gets them no earlier than A's lock deadline).
//   - cut: A's connections are closed (a killed process, whose kernel
//     closes its sockets): the broker ends A's share session and releases
//     what A held then, as Kafka does, or at the latest when the lock
//     expires.
func TestShareGroupCrashRedelivery(t *testing.T) {
	const lockMs = 2000
	for _, how := range []string{"frozen", "cut"} {
		t.Run(how, func(t *testing.T) {
			const topic, group, n = "sharecrash", "sharecrash-group", 30
			st := startShareTarget(t, 1, "group.share.min.record.lock.duration.ms=1000")
			st.createTopicID(t, topic, 1, 1)
			setShareConfigs(t, group, st.nodes, "share.auto.offset.reset", "earliest", "share.record.lock.duration.ms", fmt.Sprint(lockMs))
			acked := produceAcked(t, st.cl, topic, "rec", n)

			// A polls once and never acknowledges: its next poll would
			// accept what the last one returned.
			aNet := &shareNet{}
			a, err := kgo.NewClient(kgo.SeedBrokers(st.addrs...), kgo.ClientID("a"), kgo.Dialer(aNet.dial),
				kgo.ShareGroup(group), kgo.ConsumeTopics(topic), kgo.FetchMaxWait(500*time.Millisecond))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				aNet.Release()
				if !closeWithin(a, 10*time.Second) {
					t.Log("consumer a: Close did not return")
				}
			})
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			fs := a.PollFetches(ctx)
			cancel()
			held := map[recKey]time.Time{} // what A got, with its lock deadline
			var lockEnd time.Time
			fs.EachRecord(func(r *kgo.Record) {
				k := recKey{r.Partition, r.Offset}
				held[k] = r.AcquisitionDeadline()
				if r.DeliveryCount() != 1 {
					t.Errorf("a: p%d@%d delivered with count %d, want 1", k.p, k.off, r.DeliveryCount())
				}
				if lockEnd.IsZero() || r.AcquisitionDeadline().Before(lockEnd) {
					lockEnd = r.AcquisitionDeadline()
				}
			})
			if len(held) == 0 {
				t.Fatalf("a: first poll returned nothing: %v", fs.Errors())
			}
			if how == "frozen" {
				aNet.Freeze()
			} else {
				aNet.Cut()
			}
			killed := time.Now()
			t.Logf("a holds %d of %d records, lock until %s (%v from now); network %s",
				len(held), n, lockEnd.Format("15:04:05.000"), time.Until(lockEnd).Round(time.Millisecond), how)

			log := newShareLog(lockMs * time.Millisecond)
			b := startShareMember(t, "b", st.addrs, group, topic, log, nil)
			defer b.Close(10 * time.Second)
			dumpOnFailure(t, log, []*shareMember{b})
			waitUntil(t, 30*time.Second, "b accepts every record", func() (bool, string) {
				miss := log.missing(acked, true)
				return len(miss) == 0, fmt.Sprintf("%d of %d not accepted", len(miss), n)
			})
			// Nothing more comes: a lock's length with nothing held.
			time.Sleep(lockMs*time.Millisecond + time.Second)
			b.StopPolling()

			first := time.Time{}
			for k := range acked {
				ds := log.deliveries(k)
				if len(ds) != 1 {
					t.Errorf("p%d@%d delivered %d times to b, want once: %v", k.p, k.off, len(ds), ds)
					continue
				}
				d := ds[0]
				_, wasHeld := held[k]
				switch {
				case wasHeld && d.dc != 2:
					t.Errorf("p%d@%d, which a held, came to b with delivery count %d, want 2", k.p, k.off, d.dc)
				case !wasHeld && d.dc != 1 && d.dc != 2:
					// a's client may have fetched it after the poll.
					t.Errorf("p%d@%d, which a did not poll, came to b with delivery count %d", k.p, k.off, d.dc)
				}
				if wasHeld && (first.IsZero() || d.polled.Before(first)) {
					first = d.polled
				}
			}
			t.Logf("b got a's records back %v after a's network was %s (a's lock deadline %v after it): %s",
				first.Sub(killed).Round(time.Millisecond), how, lockEnd.Sub(killed).Round(time.Millisecond), log.figures())
			// The deadline is a's client's (decode time plus the lock), a
			// little after the broker's; 250 ms covers that.
			if how == "frozen" && first.Before(lockEnd.Add(-250*time.Millisecond)) {
				t.Errorf("b got a's records at %s, before a's lock expired at %s: the broker released them without knowing a was gone",
					first.Format("15:04:05.000"), lockEnd.Format("15:04:05.000"))
			}
			if first.After(lockEnd.Add(5 * time.Second)) {
				t.Errorf("b got a's records at %s, more than 5 s after a's lock expired at %s", first.Format("15:04:05.000"), lockEnd.Format("15:04:05.000"))
			}
			checkShareLog(t, log, acked)
		})
	}
}

// TestShareGroupPoisonRecord: one record among others is one no consumer
// can process.
//
//   - release: the two consumers release it every time (AckRelease); with
//     share.delivery.count.limit=3 on the group it is delivered exactly
//     three times (counts 1, 2, 3) and then archived: never delivered
//     again, while every other record, the ones before and after it and
//     those produced after it was archived, is accepted once.
//   - reject: a consumer rejects it (AckReject): archived at once, never
//     delivered again.
//
// The share coordinator's state summary (ReadShareGroupStateSummary,
// what DescribeShareGroupOffsets reads) shows the share-partition's start
// offset past the record once the rest is accepted: archived, not
// available.
func TestShareGroupPoisonRecord(t *testing.T) {
	const limit = 3
	for _, how := range []kgo.AckStatus{kgo.AckRelease, kgo.AckReject} {
		t.Run(how.String(), func(t *testing.T) {
			const topic, group = "sharepoison", "sharepoison-group"
			st := startShareTarget(t, 1)
			topicID := st.createTopicID(t, topic, 1, 1)
			setShareConfigs(t, group, st.nodes, "share.auto.offset.reset", "earliest", "share.delivery.count.limit", fmt.Sprint(limit))
			acked := produceAcked(t, st.cl, topic, "before", 20)
			poison := map[recKey]string{}
			maps.Copy(poison, produceAcked(t, st.cl, topic, "poison", 1))
			mergeAcked(acked, produceAcked(t, st.cl, topic, "after", 20))
			var pk recKey
			for k := range poison {
				pk = k
			}

			decide := func(r *kgo.Record) kgo.AckStatus {
				if r.Partition == pk.p && r.Offset == pk.off {
					return how
				}
				return kgo.AckAccept
			}
			log := newShareLog(defaultShareLock)
			var members []*shareMember
			for _, name := range []string{"c1", "c2"} {
				members = append(members, startShareMember(t, name, st.addrs, group, topic, log, decide, kgo.ShareMaxRecords(5)))
			}
			defer func() {
				for _, m := range members {
					m.Close(10 * time.Second)
				}
			}()
			dumpOnFailure(t, log, members)

			want := limit
			if how == kgo.AckReject {
				want = 1
			}
			waitUntil(t, 30*time.Second, fmt.Sprintf("the poison record delivered %d times, the others accepted", want), func() (bool, string) {
				n := len(log.deliveries(pk))
				miss := log.missing(acked, true)
				return n >= want && len(miss) == 0, fmt.Sprintf("poison delivered %d times, %d others not accepted", n, len(miss))
			})
			archived := time.Now()
			// Records produced after it was archived flow; it stays away.
			mergeAcked(acked, produceAcked(t, st.cl, topic, "later", 20))
			waitUntil(t, 30*time.Second, "the later records accepted", func() (bool, string) {
				miss := log.missing(acked, true)
				return len(miss) == 0, fmt.Sprintf("%d not accepted", len(miss))
			})
			awaitShareDone(t, st.cl, group, topicID, endOffsets(t, kadm.NewClient(st.cl), topic), 15*time.Second)
			time.Sleep(time.Until(archived.Add(2 * time.Second)))
			for _, m := range members {
				m.StopPolling()
			}

			ds := log.deliveries(pk)
			var counts []int32
			for _, d := range ds {
				counts = append(counts, d.dc)
				if d.ack != how || d.outcome != ackConfirmed {
					t.Errorf("poison delivery %v: want a confirmed %v", d, how)
				}
			}
			slices.Sort(counts)
			wantCounts := []int32{1, 2, 3}[:want]
			if !slices.Equal(counts, wantCounts) {
				t.Errorf("poison record p%d@%d delivered with counts %v, want %v: %v", pk.p, pk.off, counts, wantCounts, ds)
			}
			for k := range acked {
				if ds := log.deliveries(k); len(ds) != 1 || ds[0].dc != 1 {
					t.Errorf("p%d@%d: delivered %v, want once with count 1", k.p, k.off, ds)
				}
			}
			t.Logf("poison p%d@%d delivered with counts %v (%s), %d others: %s", pk.p, pk.off, counts, how, len(acked), log.figures())
			mergeAcked(acked, poison)
			checkShareLog(t, log, acked)
		})
	}
}

// TestShareGroupSessionConfig: a share group runs with the heartbeat
// interval and session timeout it is configured with, as Kafka's
// GroupMetadataManager reads them for every heartbeat: the group's
// share.heartbeat.interval.ms / share.session.timeout.ms (group configs,
// IncrementalAlterConfigs on the GROUP resource), else the broker's
// group.share.heartbeat.interval.ms / group.share.session.timeout.ms.
// One member joins each of two groups with a raw ShareGroupHeartbeat
// (epoch 0) and never heartbeats again: the response carries the
// configured interval, and the member is removed once its session ends,
// not before and not much after.
//
//   - defaults: the broker runs with heartbeat 500 ms and session 6 s;
//   - overridden: the group sets 800 ms and 7 s.
func TestShareGroupSessionConfig(t *testing.T) {
	st := startShareTarget(t, 1, "group.share.min.session.timeout.ms=6000", "group.share.session.timeout.ms=6000")
	const topic = "sharecfg"
	st.createTopicID(t, topic, 1, 1)
	setShareConfigs(t, "sharecfg-overridden", st.nodes, "share.heartbeat.interval.ms", "800", "share.session.timeout.ms", "7000")
	for _, c := range []struct {
		group    string
		interval int32
		session  time.Duration
	}{
		{"sharecfg-defaults", 500, 6 * time.Second},
		{"sharecfg-overridden", 800, 7 * time.Second},
	} {
		t.Run(strings.TrimPrefix(c.group, "sharecfg-"), func(t *testing.T) {
			req := kmsg.NewPtrShareGroupHeartbeatRequest()
			req.GroupID = c.group
			var id [16]byte
			rand.Read(id[:])
			req.MemberID = topicIDString(id) // client-generated, as a Uuid (KIP-1082)
			req.MemberEpoch = 0
			req.SubscribedTopicNames = []string{topic}
			resp, err := req.RequestWith(testCtx(t, 10*time.Second), st.cl)
			if err != nil {
				t.Fatalf("ShareGroupHeartbeat: %v", err)
			}
			joined := time.Now()
			if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
				t.Fatalf("ShareGroupHeartbeat: %v", err)
			}
			if resp.HeartbeatIntervalMillis != c.interval {
				t.Errorf("ShareGroupHeartbeat answered HeartbeatIntervalMillis %d, want the configured %d", resp.HeartbeatIntervalMillis, c.interval)
			}
			// Polled by hand: a member still there long after its
			// session is the finding, not a timeout.
			var gone time.Duration
			var last string
			for gone == 0 && time.Since(joined) < c.session+10*time.Second {
				time.Sleep(100 * time.Millisecond)
				v, err := describeShareGroup(st.cl, c.group)
				switch {
				case err != nil:
					last = err.Error()
				case len(v.members) == 0:
					gone = time.Since(joined)
				default:
					last = v.String()
				}
			}
			switch {
			case gone == 0:
				t.Errorf("the silent member is still in the group %v after it joined, its session being %v: the configured session timeout is not applied (last: %s)",
					time.Since(joined).Round(time.Millisecond), c.session, last)
			case gone < c.session-time.Second:
				t.Errorf("the silent member was removed %v after it joined, before its %v session ended", gone.Round(time.Millisecond), c.session)
			case gone > c.session+3*time.Second:
				t.Errorf("the silent member was removed %v after it joined, more than 3 s after its %v session ended", gone.Round(time.Millisecond), c.session)
			default:
				t.Logf("the silent member was removed %v after it joined (session %v)", gone.Round(time.Millisecond), c.session)
			}
		})
	}
}
