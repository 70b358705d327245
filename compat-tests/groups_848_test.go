package compattests

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// KIP-848 consumer groups with franz-go's next-generation consumer: the
// broker assigns the partitions through ConsumerGroupHeartbeat and a
// member joining or leaving moves only the partitions it must.

// kip848 opts a franz-go client into the KIP-848 consumer protocol, which
// franz-go 1.21 keeps behind a context value while it calls it a beta
// (its own tests opt in the same way). Without it the client uses the
// classic protocol whatever the broker offers.
func kip848() kgo.Opt {
	return kgo.WithContext(context.WithValue(context.Background(), "opt_in_kafka_next_gen_balancer_beta", true))
}

// groupBroker848Overrides make KIP-848 members heartbeat every 250 ms, so
// reconciliation steps (each a heartbeat) take a test seconds, not
// minutes.
var groupBroker848Overrides = append([]string{
	"group.consumer.heartbeat.interval.ms=250",
	"group.consumer.session.timeout.ms=6000",
}, groupBrokerOverrides...)

// overlapWatch samples the members' owned partitions until stopped and
// records every moment two members owned one partition at once, which
// KIP-848's reconciliation forbids (a partition is assigned only once its
// previous owner has revoked it).
type overlapWatch struct {
	stop chan struct{}
	done chan struct{}
	mu   sync.Mutex
	mems []*franzMember
	seen []string
}

func watchOverlap(members ...*franzMember) *overlapWatch {
	w := &overlapWatch{stop: make(chan struct{}), done: make(chan struct{}), mems: members}
	go func() {
		defer close(w.done)
		for {
			select {
			case <-w.stop:
				return
			case <-time.After(5 * time.Millisecond):
			}
			w.mu.Lock()
			owner := map[int32]string{}
			for _, m := range w.mems {
				for _, p := range m.Owned() {
					if o, dup := owner[p]; dup && len(w.seen) < 20 {
						w.seen = append(w.seen, fmt.Sprintf("%s p%d owned by %s and %s", time.Now().Format("15:04:05.000"), p, o, m.name))
					}
					owner[p] = m.name
				}
			}
			w.mu.Unlock()
		}
	}()
	return w
}

func (w *overlapWatch) add(m *franzMember) {
	w.mu.Lock()
	w.mems = append(w.mems, m)
	w.mu.Unlock()
}

func (w *overlapWatch) Stop() []string {
	close(w.stop)
	<-w.done
	return w.seen
}

// describe848 is ConsumerGroupDescribe of one group.
func describe848(t testing.TB, cl *kgo.Client, group string) kmsg.ConsumerGroupDescribeResponseGroup {
	t.Helper()
	req := kmsg.NewPtrConsumerGroupDescribeRequest()
	req.Groups = []string{group}
	resp, err := req.RequestWith(testCtx(t, 10*time.Second), cl)
	if err != nil {
		t.Fatalf("ConsumerGroupDescribe: %v", err)
	}
	if len(resp.Groups) != 1 {
		t.Fatalf("ConsumerGroupDescribe: %d groups", len(resp.Groups))
	}
	return resp.Groups[0]
}

// TestGroup848FranzChurn: five franz-go KIP-848 consumers join a
// 12-partition topic one by one while a producer writes, two leave and two
// others join. Throughout, no partition is owned by two members at once;
// after each step the partitions are spread 2-3 per member; every
// acknowledged record is consumed; the group reports type "consumer".
// Run on one node and on three (offsets topic and data at RF 3), while
// other topics are created and deleted.
func TestGroup848FranzChurn(t *testing.T) {
	for _, nodes := range []int{1, 3} {
		t.Run(fmt.Sprintf("nodes=%d", nodes), func(t *testing.T) {
			const topic, group, partitions = "churn848", "churn848-group", 12
			var addr string
			if nodes == 1 {
				addr = startBroker(t, t.TempDir(), groupBroker848Overrides...).Addr
			} else {
				c := startCluster(t, 3, append([]string{"offsets.topic.replication.factor=3", "default.replication.factor=3", "min.insync.replicas=2"}, groupBroker848Overrides...)...)
				addr = c.Addr(1) // clients find the others through it
			}
			adm := newAdmin(t, addr)
			if _, err := adm.CreateTopic(testCtx(t, 15*time.Second), partitions, int16(nodes), nil, topic); err != nil {
				t.Fatalf("create topic %s: %v", topic, err)
			}
			prodCl := newClient(t, addr)
			acked := produceAcked(t, prodCl, topic, "upfront", 600)
			prod := startBgProducer(prodCl, topic, "bg")

			// Other topics come and go throughout: every group step sees
			// a changed metadata image.
			churnStop, churnDone := make(chan struct{}), make(chan struct{})
			go func() {
				defer close(churnDone)
				for i := 0; ; i++ {
					select {
					case <-churnStop:
						return
					case <-time.After(300 * time.Millisecond):
					}
					ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
					name := fmt.Sprintf("side848-%d", i)
					if _, err := adm.CreateTopic(ctx, 2, -1, nil, name); err != nil {
						t.Logf("side topic %s: %v", name, err)
					}
					if i > 0 {
						_, _ = adm.DeleteTopics(ctx, fmt.Sprintf("side848-%d", i-1))
					}
					cancel()
				}
			}()
			defer func() { close(churnStop); <-churnDone }()

			log := newConsumedLog()
			var members []*franzMember
			closed := map[*franzMember]bool{}
			watch := watchOverlap()
			start := func(name string) *franzMember {
				m := startFranzMember(t, name, addr, group, topic, log, nil, kip848())
				members = append(members, m)
				watch.add(m)
				return m
			}
			live := func() []*franzMember {
				var out []*franzMember
				for _, m := range members {
					if !closed[m] {
						out = append(out, m)
					}
				}
				return out
			}
			settle := func(what string) {
				ms := live()
				lo, hi := partitions/len(ms), (partitions+len(ms)-1)/len(ms)
				d := waitUntil(t, 45*time.Second, what, func() (bool, string) { return ownership(partitions, lo, hi, ms...) })
				t.Logf("%s: settled in %v", what, d)
			}
			for i := range 5 {
				start(fmt.Sprintf("m%d", i))
				settle(fmt.Sprintf("%d members own %d partitions", i+1, partitions))
			}
			d := describe848(t, prodCl, group)
			if d.ErrorCode != 0 || d.State != "Stable" || len(d.Members) != 5 {
				t.Fatalf("ConsumerGroupDescribe: error %v state %q members %d, want Stable with 5", kerr.ErrorForCode(d.ErrorCode), d.State, len(d.Members))
			}
			lreq := kmsg.NewPtrListGroupsRequest()
			lreq.TypesFilter = []string{"Consumer"} // compared case-insensitively, as Kafka does
			lresp, err := lreq.RequestWith(testCtx(t, 10*time.Second), prodCl)
			if err != nil {
				t.Fatal(err)
			}
			if len(lresp.Groups) != 1 || lresp.Groups[0].Group != group || lresp.Groups[0].GroupType != "consumer" {
				t.Fatalf("ListGroups of type consumer: %+v, want only %s", lresp.Groups, group)
			}

			// Two leave (one by one), two others join.
			for _, i := range []int{1, 3} {
				members[i].Close(15 * time.Second)
				closed[members[i]] = true
				settle(fmt.Sprintf("after m%d left", i))
			}
			start("m5")
			start("m6")
			settle("after m5 and m6 joined")

			mergeAcked(acked, prod.Stop(t), produceAcked(t, prodCl, topic, "final", 300))
			checkAllConsumed(t, log, acked, 30*time.Second, members...)
			checkCommittedAtEnd(t, adm, group, topic, live()...)
			if overlaps := watch.Stop(); len(overlaps) > 0 {
				for _, m := range members {
					t.Log(m.History())
				}
				t.Fatalf("partitions owned by two members at once: %v", overlaps)
			}
			for _, m := range live() {
				m.Close(10 * time.Second)
			}
		})
	}
}
