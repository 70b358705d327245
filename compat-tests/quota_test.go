package compattests

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Client quotas (KIP-546 admin APIs, enforcement of KIP-13/KIP-219).

func qname(s string) *string { return &s }

func qentity(kv ...string) kadm.ClientQuotaEntity {
	var e kadm.ClientQuotaEntity
	for i := 0; i < len(kv); i += 2 {
		c := kadm.ClientQuotaEntityComponent{Type: kv[i]}
		if kv[i+1] != "<default>" {
			c.Name = qname(kv[i+1])
		}
		e = append(e, c)
	}
	return e
}

// describedSet renders described quotas as sorted "entity: k=v ..." lines.
func describedSet(qs kadm.DescribedClientQuotas) []string {
	var out []string
	for _, q := range qs {
		var es, vs []string
		for _, c := range q.Entity {
			n := "<default>"
			if c.Name != nil {
				n = *c.Name
			}
			es = append(es, c.Type+"="+n)
		}
		sort.Strings(es)
		for _, v := range q.Values {
			vs = append(vs, fmt.Sprintf("%s=%g", v.Key, v.Value))
		}
		sort.Strings(vs)
		out = append(out, strings.Join(es, ",")+": "+strings.Join(vs, " "))
	}
	sort.Strings(out)
	return out
}

func describeQuotas(t *testing.T, adm *kadm.Client, strict bool, comps ...kadm.DescribeClientQuotaComponent) []string {
	t.Helper()
	qs, err := adm.DescribeClientQuotas(testCtx(t, 10*time.Second), strict, comps)
	if err != nil {
		t.Fatalf("DescribeClientQuotas(strict=%t, %+v): %v", strict, comps, err)
	}
	return describedSet(qs)
}

func alterQuotas(t *testing.T, adm *kadm.Client, validate bool, entries ...kadm.AlterClientQuotaEntry) kadm.AlteredClientQuotas {
	t.Helper()
	f := adm.AlterClientQuotas
	if validate {
		f = adm.ValidateAlterClientQuotas
	}
	res, err := f(testCtx(t, 15*time.Second), entries)
	if err != nil {
		t.Fatalf("AlterClientQuotas: %v", err)
	}
	if len(res) != len(entries) {
		t.Fatalf("AlterClientQuotas: %d results for %d entries", len(res), len(entries))
	}
	return res
}

func set(k string, v float64) kadm.AlterClientQuotaOp {
	return kadm.AlterClientQuotaOp{Key: k, Value: v}
}
func remove(k string) kadm.AlterClientQuotaOp { return kadm.AlterClientQuotaOp{Key: k, Remove: true} }

// TestClientQuotasKadm: AlterClientQuotas and DescribeClientQuotas with
// kadm on one node: defaults, every match type, strict, validate-only,
// removal, and the per-entry errors.
func TestClientQuotasKadm(t *testing.T) {
	b := startBroker(t, t.TempDir())
	adm := newAdmin(t, b.Addr)

	res := alterQuotas(t, adm, false,
		kadm.AlterClientQuotaEntry{Entity: qentity("client-id", "A"), Ops: []kadm.AlterClientQuotaOp{set("producer_byte_rate", 1048576), set("consumer_byte_rate", 2097152)}},
		kadm.AlterClientQuotaEntry{Entity: qentity("user", "alice", "client-id", "<default>"), Ops: []kadm.AlterClientQuotaOp{set("request_percentage", 50)}},
		kadm.AlterClientQuotaEntry{Entity: qentity("client-id", "<default>"), Ops: []kadm.AlterClientQuotaOp{set("producer_byte_rate", 1e9)}},
		kadm.AlterClientQuotaEntry{Entity: qentity("ip", "10.1.2.3"), Ops: []kadm.AlterClientQuotaOp{set("connection_creation_rate", 100)}},
		kadm.AlterClientQuotaEntry{Entity: qentity("user", "<default>"), Ops: []kadm.AlterClientQuotaOp{set("controller_mutation_rate", 2.5)}},
	)
	for _, r := range res {
		if r.Err != nil {
			t.Fatalf("alter %v: %v %s", r.Entity, r.Err, r.ErrMessage)
		}
	}

	any := func(typ string) kadm.DescribeClientQuotaComponent {
		return kadm.DescribeClientQuotaComponent{Type: typ, MatchType: 2}
	}
	def := func(typ string) kadm.DescribeClientQuotaComponent {
		return kadm.DescribeClientQuotaComponent{Type: typ, MatchType: 1}
	}
	exact := func(typ, n string) kadm.DescribeClientQuotaComponent {
		return kadm.DescribeClientQuotaComponent{Type: typ, MatchType: 0, MatchName: qname(n)}
	}
	const (
		lineA       = "client-id=A: consumer_byte_rate=2.097152e+06 producer_byte_rate=1.048576e+06"
		lineAlice   = "client-id=<default>,user=alice: request_percentage=50"
		lineDefault = "client-id=<default>: producer_byte_rate=1e+09"
		lineIP      = "ip=10.1.2.3: connection_creation_rate=100"
		lineUserDef = "user=<default>: controller_mutation_rate=2.5"
	)
	for _, c := range []struct {
		name   string
		strict bool
		comps  []kadm.DescribeClientQuotaComponent
		want   []string
	}{
		{"everything", false, nil, []string{lineAlice, lineDefault, lineA, lineIP, lineUserDef}},
		{"strict empty filter", true, nil, nil},
		{"exact client-id", false, []kadm.DescribeClientQuotaComponent{exact("client-id", "A")}, []string{lineA}},
		{"exact unknown", false, []kadm.DescribeClientQuotaComponent{exact("client-id", "zzz")}, nil},
		{"default client-id", false, []kadm.DescribeClientQuotaComponent{def("client-id")}, []string{lineAlice, lineDefault}},
		{"default client-id strict", true, []kadm.DescribeClientQuotaComponent{def("client-id")}, []string{lineDefault}},
		{"any client-id strict", true, []kadm.DescribeClientQuotaComponent{any("client-id")}, []string{lineDefault, lineA}},
		{"any user", false, []kadm.DescribeClientQuotaComponent{any("user")}, []string{lineAlice, lineUserDef}},
		{"user and client-id", true, []kadm.DescribeClientQuotaComponent{exact("user", "alice"), def("client-id")}, []string{lineAlice}},
		{"any ip", false, []kadm.DescribeClientQuotaComponent{any("ip")}, []string{lineIP}},
	} {
		if got := describeQuotas(t, adm, c.strict, c.comps...); !slices.Equal(got, c.want) {
			t.Errorf("%s: got\n  %s\nwant\n  %s", c.name, strings.Join(got, "\n  "), strings.Join(c.want, "\n  "))
		}
	}

	// Filter errors are the response's.
	for name, c := range map[string]struct {
		comps []kadm.DescribeClientQuotaComponent
		want  error
	}{
		"exact without name": {[]kadm.DescribeClientQuotaComponent{{Type: "user", MatchType: 0}}, kerr.InvalidRequest},
		"default with name":  {[]kadm.DescribeClientQuotaComponent{{Type: "user", MatchType: 1, MatchName: qname("x")}}, kerr.InvalidRequest},
		"ip and user":        {[]kadm.DescribeClientQuotaComponent{any("ip"), any("user")}, kerr.InvalidRequest},
		"type twice":         {[]kadm.DescribeClientQuotaComponent{any("user"), def("user")}, kerr.InvalidRequest},
		"custom type":        {[]kadm.DescribeClientQuotaComponent{any("group")}, kerr.UnsupportedVersion},
	} {
		_, err := adm.DescribeClientQuotas(testCtx(t, 10*time.Second), false, c.comps)
		if !errors.Is(err, c.want) {
			t.Errorf("describe %s: %v, want %v", name, err, c.want)
		}
	}

	// Validate-only checks and changes nothing.
	res = alterQuotas(t, adm, true,
		kadm.AlterClientQuotaEntry{Entity: qentity("client-id", "V"), Ops: []kadm.AlterClientQuotaOp{set("producer_byte_rate", 1000)}},
		kadm.AlterClientQuotaEntry{Entity: qentity("client-id", "V"), Ops: []kadm.AlterClientQuotaOp{set("bogus", 1000)}},
	)
	if res[0].Err != nil || !errors.Is(res[1].Err, kerr.InvalidRequest) {
		t.Errorf("validate-only: %v / %v", res[0].Err, res[1].Err)
	}
	if got := describeQuotas(t, adm, false, exact("client-id", "V")); len(got) != 0 {
		t.Errorf("validate-only changed quotas: %v", got)
	}

	// Each entry stands alone: the bad ones are INVALID_REQUEST with a
	// message, the good one in the same request applies.
	bad := []kadm.AlterClientQuotaEntry{
		{Entity: qentity("client-id", "B"), Ops: []kadm.AlterClientQuotaOp{set("no_such_quota", 10)}},
		{Entity: qentity("client-id", "B"), Ops: []kadm.AlterClientQuotaOp{set("producer_byte_rate", 0)}},
		{Entity: qentity("client-id", "B"), Ops: []kadm.AlterClientQuotaOp{set("producer_byte_rate", -5)}},
		{Entity: qentity("client-id", "B"), Ops: []kadm.AlterClientQuotaOp{set("producer_byte_rate", 1.5)}},
		{Entity: qentity("client-id", "B"), Ops: []kadm.AlterClientQuotaOp{set("connection_creation_rate", 5)}},
		{Entity: qentity("ip", "10.0.0.1", "client-id", "B"), Ops: []kadm.AlterClientQuotaOp{set("connection_creation_rate", 5)}},
		{Entity: qentity("ip", "not-an-ip"), Ops: []kadm.AlterClientQuotaOp{set("connection_creation_rate", 5)}},
		{Entity: qentity("group", "g"), Ops: []kadm.AlterClientQuotaOp{set("producer_byte_rate", 5)}},
		{Entity: nil, Ops: []kadm.AlterClientQuotaOp{set("producer_byte_rate", 5)}},
	}
	good := kadm.AlterClientQuotaEntry{Entity: qentity("client-id", "C"), Ops: []kadm.AlterClientQuotaOp{set("producer_byte_rate", 4096)}}
	res = alterQuotas(t, adm, false, append(bad, good)...)
	for i := range bad {
		if !errors.Is(res[i].Err, kerr.InvalidRequest) || res[i].ErrMessage == "" {
			t.Errorf("bad entry %d (%v %+v): %v %q, want INVALID_REQUEST with a message", i, bad[i].Entity, bad[i].Ops, res[i].Err, res[i].ErrMessage)
		}
	}
	if res[len(bad)].Err != nil {
		t.Errorf("good entry beside bad ones: %v", res[len(bad)].Err)
	}
	if got := describeQuotas(t, adm, false, any("client-id")); slices.Contains(got, "client-id=B: ") || !slices.Contains(got, "client-id=C: producer_byte_rate=4096") {
		t.Errorf("after the mixed request: %v", got)
	}
	t.Logf("an unknown key: %q", res[0].ErrMessage)

	// Removal: one key, then the last; a removed key that is not set is fine.
	alterQuotas(t, adm, false, kadm.AlterClientQuotaEntry{Entity: qentity("client-id", "A"), Ops: []kadm.AlterClientQuotaOp{remove("consumer_byte_rate")}})
	if got := describeQuotas(t, adm, true, exact("client-id", "A")); !slices.Equal(got, []string{"client-id=A: producer_byte_rate=1.048576e+06"}) {
		t.Errorf("after removing one key: %v", got)
	}
	res = alterQuotas(t, adm, false, kadm.AlterClientQuotaEntry{Entity: qentity("client-id", "A"), Ops: []kadm.AlterClientQuotaOp{remove("producer_byte_rate"), remove("request_percentage")}})
	if res[0].Err != nil {
		t.Fatalf("removing: %v", res[0].Err)
	}
	if got := describeQuotas(t, adm, false, exact("client-id", "A")); len(got) != 0 {
		t.Errorf("after removing every key: %v", got)
	}
}

// TestClientQuotasSarama: sarama's ClusterAdmin alters and describes
// quotas at v0 (Kafka 2.6) and v1 (2.8, flexible), and sees an invalid key
// refused.
func TestClientQuotasSarama(t *testing.T) {
	b := startBroker(t, t.TempDir())
	for _, v := range []sarama.KafkaVersion{sarama.V2_6_0_0, sarama.V2_8_0_0} {
		cfg := sarama.NewConfig()
		cfg.Version = v
		ca, err := sarama.NewClusterAdmin([]string{b.Addr}, cfg)
		if err != nil {
			t.Fatalf("%s: NewClusterAdmin: %v", v, err)
		}
		name := "sarama-" + v.String()
		entity := []sarama.QuotaEntityComponent{{EntityType: sarama.QuotaEntityClientID, MatchType: sarama.QuotaMatchExact, Name: name}}
		if err := ca.AlterClientQuotas(entity, sarama.ClientQuotasOp{Key: "producer_byte_rate", Value: 5000}, false); err != nil {
			t.Fatalf("%s: AlterClientQuotas: %v", v, err)
		}
		userDefault := []sarama.QuotaEntityComponent{{EntityType: sarama.QuotaEntityUser, MatchType: sarama.QuotaMatchDefault}}
		if err := ca.AlterClientQuotas(userDefault, sarama.ClientQuotasOp{Key: "consumer_byte_rate", Value: 7000}, false); err != nil {
			t.Fatalf("%s: AlterClientQuotas(user default): %v", v, err)
		}
		if err := ca.AlterClientQuotas(entity, sarama.ClientQuotasOp{Key: "no_such_quota", Value: 1}, false); err == nil {
			t.Errorf("%s: an unknown key was accepted", v)
		} else {
			t.Logf("%s: unknown key refused: %v", v, err)
		}
		got, err := ca.DescribeClientQuotas([]sarama.QuotaFilterComponent{{EntityType: sarama.QuotaEntityClientID, MatchType: sarama.QuotaMatchExact, Match: name}}, true)
		if err != nil {
			t.Fatalf("%s: DescribeClientQuotas: %v", v, err)
		}
		if len(got) != 1 || got[0].Values["producer_byte_rate"] != 5000 || len(got[0].Entity) != 1 || got[0].Entity[0].Name != name {
			t.Errorf("%s: described %+v", v, got)
		}
		got, err = ca.DescribeClientQuotas([]sarama.QuotaFilterComponent{{EntityType: sarama.QuotaEntityUser, MatchType: sarama.QuotaMatchDefault}}, true)
		if err != nil || len(got) != 1 || got[0].Values["consumer_byte_rate"] != 7000 {
			t.Errorf("%s: user default described %+v, %v", v, got, err)
		}
		if err := ca.AlterClientQuotas(entity, sarama.ClientQuotasOp{Key: "producer_byte_rate", Remove: true}, false); err != nil {
			t.Fatalf("%s: remove: %v", v, err)
		}
		got, err = ca.DescribeClientQuotas([]sarama.QuotaFilterComponent{{EntityType: sarama.QuotaEntityClientID, MatchType: sarama.QuotaMatchExact, Match: name}}, false)
		if err != nil || len(got) != 0 {
			t.Errorf("%s: after removal %+v, %v", v, got, err)
		}
		ca.Close()
	}
}

// throttleSeen counts the throttles brokers imposed on a franz-go client.
type throttleSeen struct{ n, ms atomic.Int64 }

func (h *throttleSeen) OnBrokerThrottle(_ kgo.BrokerMetadata, d time.Duration, _ bool) {
	if d > 0 {
		h.n.Add(1)
		h.ms.Add(d.Milliseconds())
	}
}

// produceFor produces 1 KiB random values to topic as client id for d, or
// until limit bytes are acknowledged (0: no limit), and returns the value
// bytes acknowledged and the time they took.
func produceFor(t *testing.T, addr, topic, clientID string, d time.Duration, limit int64, hook *throttleSeen) (int64, time.Duration) {
	opts := []kgo.Opt{kgo.ClientID(clientID), kgo.DefaultProduceTopic(topic),
		kgo.ProducerBatchMaxBytes(16 << 10), kgo.ProducerBatchCompression(kgo.NoCompression()),
		kgo.MaxBufferedRecords(128), kgo.ProducerLinger(0)}
	if hook != nil {
		opts = append(opts, kgo.WithHooks(hook))
	}
	cl := newClient(t, addr, opts...)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var acked atomic.Int64
	start := time.Now()
	end := start.Add(d)
	var last atomic.Int64 // ns after start of the last counted ack
	val := make([]byte, 1024)
	rand.Read(val)
	for time.Now().Before(end) && (limit == 0 || acked.Load() < limit) {
		cl.Produce(ctx, &kgo.Record{Value: val}, func(r *kgo.Record, err error) {
			if now := time.Now(); err == nil && now.Before(end) && (limit == 0 || acked.Load() < limit) {
				acked.Add(int64(len(r.Value)))
				last.Store(int64(now.Sub(start)))
			}
		})
	}
	n := acked.Load()
	cancel()
	if limit == 0 || n < limit {
		return n, d
	}
	return n, time.Duration(last.Load())
}

// TestClientQuotaProduceEnforced: with producer_byte_rate 256 KiB/s on
// client id A, producers A and B write to the same broker at once for
// 10.5 s (just under the 11 s after which Kafka's first sample expires): A
// is held to its quota ±20%, B, with no quota, is not (more than 3× A's
// quota). Then the same for consumers with consumer_byte_rate.
func TestClientQuotaProduceEnforced(t *testing.T) {
	const quota = 256 << 10
	const run = 10500 * time.Millisecond
	b := startBroker(t, t.TempDir())
	adm := newAdmin(t, b.Addr)
	createTopic(t, adm, "quota-a", 1, nil)
	createTopic(t, adm, "quota-b", 1, nil)
	res := alterQuotas(t, adm, false,
		kadm.AlterClientQuotaEntry{Entity: qentity("client-id", "quota-A"), Ops: []kadm.AlterClientQuotaOp{set("producer_byte_rate", quota)}},
		kadm.AlterClientQuotaEntry{Entity: qentity("client-id", "quota-C"), Ops: []kadm.AlterClientQuotaOp{set("consumer_byte_rate", quota)}},
	)
	for _, r := range res {
		if r.Err != nil {
			t.Fatal(r.Err)
		}
	}

	// B stops at 16x the quota's worth for the run (42 MiB), which
	// is plenty to tell it apart and spares a shared disk.
	var wg sync.WaitGroup
	var bytesA, bytesB int64
	var tookA, tookB time.Duration
	hookA, hookB := &throttleSeen{}, &throttleSeen{}
	wg.Add(2)
	go func() { defer wg.Done(); bytesA, tookA = produceFor(t, b.Addr, "quota-a", "quota-A", run, 0, hookA) }()
	go func() {
		defer wg.Done()
		bytesB, tookB = produceFor(t, b.Addr, "quota-b", "quota-B", run, int64(16*quota*run.Seconds()), hookB)
	}()
	wg.Wait()
	rateA, rateB := float64(bytesA)/tookA.Seconds(), float64(bytesB)/tookB.Seconds()
	t.Logf("produce: quota %d B/s; A (quota) %.0f B/s = %.3f of the quota, throttled %d times for %d ms; B (none) %.0f B/s = %.1fx the quota, throttled %d times",
		quota, rateA, rateA/quota, hookA.n.Load(), hookA.ms.Load(), rateB, rateB/quota, hookB.n.Load())
	if rateA < 0.8*quota || rateA > 1.2*quota {
		t.Errorf("throttled producer A: %.0f B/s, want %d ±20%%", rateA, quota)
	}
	if rateB < 3*quota {
		t.Errorf("unthrottled producer B: %.0f B/s, want more than 3x %d", rateB, quota)
	}
	if hookA.n.Load() == 0 || hookB.n.Load() != 0 {
		t.Errorf("throttle responses: A %d, B %d; want some for A, none for B", hookA.n.Load(), hookB.n.Load())
	}

	// Consumers: quota-b holds what B wrote (many times the quota's run).
	var consA, consB int64
	hookC, hookD := &throttleSeen{}, &throttleSeen{}
	wg.Add(2)
	go func() { defer wg.Done(); consA = consumeFor(t, b.Addr, "quota-b", "quota-C", run, hookC) }()
	go func() { defer wg.Done(); consB = consumeFor(t, b.Addr, "quota-b", "quota-D", run, hookD) }()
	wg.Wait()
	rateC, rateD := float64(consA)/run.Seconds(), float64(consB)/run.Seconds()
	t.Logf("fetch: quota %d B/s; C (quota) %.0f B/s = %.3f of the quota, throttled %d times for %d ms; D (none) %.0f B/s = %.1fx the quota",
		quota, rateC, rateC/quota, hookC.n.Load(), hookC.ms.Load(), rateD, rateD/quota)
	if bytesB < 2*int64(quota*run.Seconds()) {
		t.Logf("topic holds only %d bytes: the consumer comparison is skipped", bytesB)
		return
	}
	if rateC < 0.8*quota || rateC > 1.2*quota {
		t.Errorf("throttled consumer C: %.0f B/s, want %d ±20%%", rateC, quota)
	}
	if rateD < 3*quota {
		t.Errorf("unthrottled consumer D: %.0f B/s, want more than 3x %d", rateD, quota)
	}
}

// consumeFor reads topic from the start as client id for d and returns
// the value bytes received within d.
func consumeFor(t *testing.T, addr, topic, clientID string, d time.Duration, hook *throttleSeen) int64 {
	cl := newClient(t, addr, kgo.ClientID(clientID), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxBytes(64<<10), kgo.FetchMaxPartitionBytes(64<<10), kgo.WithHooks(hook))
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	var n int64
	for ctx.Err() == nil {
		fs := cl.PollFetches(ctx)
		fs.EachRecord(func(r *kgo.Record) { n += int64(len(r.Value)) })
	}
	return n
}

// TestClientQuotaCluster: on three nodes a quota set through one node is
// in the metadata log: every node describes it, the leader on another
// node throttles the client, and after every node restarts the quota is
// still there and still enforced.
func TestClientQuotaCluster(t *testing.T) {
	c := startCluster(t, 3)
	all := c.IDs()
	const topic = "quota-cluster"
	c.createOn(t, all[0], topic, 1, 3)
	td, _ := c.awaitTopic(t, 10*time.Second, topic, all, replicasOn(all, 3))
	leader := int(td.Partitions[0].Leader)
	via := others(all, leader)[0]
	t.Logf("partition leader: node %d; setting the quota through node %d", leader, via)

	res := alterQuotas(t, c.Admin(via), false, kadm.AlterClientQuotaEntry{
		Entity: qentity("client-id", "slow"), Ops: []kadm.AlterClientQuotaOp{set("producer_byte_rate", 1024)}})
	if res[0].Err != nil {
		t.Fatal(res[0].Err)
	}
	const want = "client-id=slow: producer_byte_rate=1024"
	awaitDescribed := func(what string) {
		c.Await(t, 15*time.Second, "every node describes the quota "+what, func() (bool, string) {
			for _, id := range all {
				qs, err := c.Admin(id).DescribeClientQuotas(testCtx(t, 5*time.Second), true,
					[]kadm.DescribeClientQuotaComponent{{Type: "client-id", MatchType: 0, MatchName: qname("slow")}})
				if err != nil {
					return false, fmt.Sprintf("node %d: %v", id, err)
				}
				if got := describedSet(qs); !slices.Equal(got, []string{want}) {
					return false, fmt.Sprintf("node %d: %v", id, got)
				}
			}
			return true, ""
		})
	}
	awaitDescribed("")

	// 32 KiB is three times what 1 KiB/s allows over the window: the
	// leader must throttle (the answer says so even to one request).
	throttled := func(what string) {
		hook := &throttleSeen{}
		cl := newClient(t, c.Addr(leader), kgo.ClientID("slow"), kgo.DefaultProduceTopic(topic), kgo.WithHooks(hook),
			kgo.ProducerBatchMaxBytes(8<<10), kgo.ProducerLinger(0), kgo.ProducerBatchCompression(kgo.NoCompression())) // the quota counts bytes as sent
		val := make([]byte, 1024)
		for range 32 {
			if err := cl.ProduceSync(testCtx(t, 60*time.Second), &kgo.Record{Value: val}).FirstErr(); err != nil {
				t.Fatalf("%s: produce: %v", what, err)
			}
			if hook.n.Load() > 0 {
				break
			}
		}
		if hook.n.Load() == 0 {
			t.Fatalf("%s: node %d never throttled client id slow", what, leader)
		}
		t.Logf("%s: node %d throttled client id slow %d ms", what, leader, hook.ms.Load())
		cl.Close()
	}
	throttled("set through node " + fmt.Sprint(via))

	for _, id := range all {
		c.Kill(id)
	}
	// All at once: none answers until a quorum of them is back.
	errs := make([]error, len(all))
	var wg sync.WaitGroup
	for i, id := range all {
		wg.Add(1)
		go func() { defer wg.Done(); errs[i] = c.launchNode(id) }()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatalf("restarting: %v", err)
	}
	c.waitAllListed(t, 30*time.Second)
	awaitDescribed("after restarting every node")
	td, _ = c.awaitTopic(t, 15*time.Second, topic, all, replicasOn(all, 3))
	leader = int(td.Partitions[0].Leader)
	throttled("after the restart")
}

// TestClientQuotaConnectionRate: with connection_creation_rate 2/s on
// 127.0.0.1, a burst of 40 connections gets only the window's worth
// (about 20) served; the others are closed unanswered. Then removing the
// quota lets connections in again at once.
func TestClientQuotaConnectionRate(t *testing.T) {
	b := startBroker(t, t.TempDir())
	adm := newAdmin(t, b.Addr)
	res := alterQuotas(t, adm, false, kadm.AlterClientQuotaEntry{Entity: qentity("ip", "127.0.0.1"), Ops: []kadm.AlterClientQuotaOp{set("connection_creation_rate", 2)}})
	if res[0].Err != nil {
		t.Fatal(res[0].Err)
	}
	burst := func() (served int) {
		conns := make([]*rawConn, 40)
		for i := range conns {
			conns[i] = dialRaw(t, b.Addr)
		}
		var wg sync.WaitGroup
		var n atomic.Int64
		for _, c := range conns {
			wg.Add(1)
			go func() {
				defer wg.Done()
				req := kmsg.NewPtrApiVersionsRequest()
				req.SetVersion(0)
				if _, err := c.Write(c.frame(req)); err != nil {
					return
				}
				if _, err := c.readFrame(5 * time.Second); err == nil {
					n.Add(1)
				}
				c.Close()
			}()
		}
		wg.Wait()
		return int(n.Load())
	}
	served := burst()
	t.Logf("connection_creation_rate=2: %d of 40 connections served", served)
	if served == 0 || served >= 40 {
		t.Errorf("%d of 40 connections served, want some but not all", served)
	}
	res = alterQuotas(t, adm, false, kadm.AlterClientQuotaEntry{Entity: qentity("ip", "127.0.0.1"), Ops: []kadm.AlterClientQuotaOp{remove("connection_creation_rate")}})
	if res[0].Err != nil {
		t.Fatal(res[0].Err)
	}
	if served := burst(); served != 40 {
		t.Errorf("without the quota %d of 40 connections served", served)
	}
}

// TestClientQuotasVersions: both APIs at every advertised version over raw
// TCP, each answer canonical at its version (roundTripStrict).
func TestClientQuotasVersions(t *testing.T) {
	b := startBroker(t, t.TempDir())
	c := dialRaw(t, b.Addr)
	for v := int16(0); v <= 1; v++ {
		name := fmt.Sprintf("raw-v%d", v)
		alter := kmsg.NewPtrAlterClientQuotasRequest()
		alter.Version = v
		re := kmsg.NewAlterClientQuotasRequestEntry()
		ee := kmsg.NewAlterClientQuotasRequestEntryEntity()
		ee.Type, ee.Name = "client-id", &name
		re.Entity = append(re.Entity, ee)
		op := kmsg.NewAlterClientQuotasRequestEntryOp()
		op.Key, op.Value = "consumer_byte_rate", 4096
		re.Ops = append(re.Ops, op)
		alter.Entries = append(alter.Entries, re)
		ar := c.roundTripStrict(t, alter).(*kmsg.AlterClientQuotasResponse)
		if len(ar.Entries) != 1 || ar.Entries[0].ErrorCode != 0 || len(ar.Entries[0].Entity) != 1 || *ar.Entries[0].Entity[0].Name != name {
			t.Errorf("AlterClientQuotas v%d: %+v", v, ar.Entries)
		}
		desc := kmsg.NewPtrDescribeClientQuotasRequest()
		desc.Version = v
		comp := kmsg.NewDescribeClientQuotasRequestComponent()
		comp.EntityType, comp.MatchType, comp.Match = "client-id", 0, &name
		desc.Components = append(desc.Components, comp)
		dr := c.roundTripStrict(t, desc).(*kmsg.DescribeClientQuotasResponse)
		if dr.ErrorCode != 0 || len(dr.Entries) != 1 || len(dr.Entries[0].Values) != 1 || dr.Entries[0].Values[0].Value != 4096 {
			t.Errorf("DescribeClientQuotas v%d: %+v", v, dr)
		}
		// No match is an empty list; a bad filter an error and no list.
		desc.Components[0].Match = kmsg.StringPtr("nobody")
		if dr := c.roundTripStrict(t, desc).(*kmsg.DescribeClientQuotasResponse); dr.ErrorCode != 0 || dr.Entries == nil || len(dr.Entries) != 0 {
			t.Errorf("DescribeClientQuotas v%d, no match: %+v", v, dr)
		}
		desc.Components[0].Match = nil
		if dr := c.roundTripStrict(t, desc).(*kmsg.DescribeClientQuotasResponse); dr.ErrorCode != kerr.InvalidRequest.Code || dr.ErrorMessage == nil {
			t.Errorf("DescribeClientQuotas v%d, exact without a name: %+v", v, dr)
		}
	}
}

// TestClientQuotasKafkaGo: segmentio/kafka-go's Client alters and
// describes quotas (it has no null names but for defaults: "" is the
// default entity), and gets the per-entry error for an unknown key.
func TestClientQuotasKafkaGo(t *testing.T) {
	b := startBroker(t, t.TempDir())
	cl := &kafka.Client{Addr: kafka.TCP(b.Addr), Timeout: 10 * time.Second}
	ctx := testCtx(t, 30*time.Second)
	ar, err := cl.AlterClientQuotas(ctx, &kafka.AlterClientQuotasRequest{Entries: []kafka.AlterClientQuotaEntry{
		{Entities: []kafka.AlterClientQuotaEntity{{EntityType: "client-id", EntityName: "kgo-app"}},
			Ops: []kafka.AlterClientQuotaOps{{Key: "producer_byte_rate", Value: 12345}}},
		{Entities: []kafka.AlterClientQuotaEntity{{EntityType: "user"}}, // the default user
			Ops: []kafka.AlterClientQuotaOps{{Key: "consumer_byte_rate", Value: 54321}}},
		{Entities: []kafka.AlterClientQuotaEntity{{EntityType: "client-id", EntityName: "kgo-app"}},
			Ops: []kafka.AlterClientQuotaOps{{Key: "no_such_quota", Value: 1}}},
	}})
	if err != nil {
		t.Fatalf("AlterClientQuotas: %v", err)
	}
	if len(ar.Entries) != 3 || ar.Entries[0].Error != nil || ar.Entries[1].Error != nil || !errors.Is(ar.Entries[2].Error, kafka.InvalidRequest) {
		t.Fatalf("AlterClientQuotas answered %+v", ar.Entries)
	}
	dr, err := cl.DescribeClientQuotas(ctx, &kafka.DescribeClientQuotasRequest{
		Components: []kafka.DescribeClientQuotasRequestComponent{{EntityType: "client-id", MatchType: 0, Match: "kgo-app"}}, Strict: true})
	if err != nil || dr.Error != nil {
		t.Fatalf("DescribeClientQuotas: %v %v", err, dr.Error)
	}
	if len(dr.Entries) != 1 || len(dr.Entries[0].Values) != 1 || dr.Entries[0].Values[0].Value != 12345 || dr.Entries[0].Entities[0].EntityName != "kgo-app" {
		t.Errorf("described %+v", dr.Entries)
	}
	dr, err = cl.DescribeClientQuotas(ctx, &kafka.DescribeClientQuotasRequest{
		Components: []kafka.DescribeClientQuotasRequestComponent{{EntityType: "user", MatchType: 1}}})
	if err != nil || dr.Error != nil || len(dr.Entries) != 1 || dr.Entries[0].Values[0].Key != "consumer_byte_rate" || dr.Entries[0].Entities[0].EntityName != "" {
		t.Errorf("default user described %+v, %v", dr, err)
	}
}

// TestClientQuotaRequestPercentage: a client over a tiny
// request_percentage is throttled (the connection muted), as the broker's
// fjord_quota_throttle_seconds_total{type="request"} shows; another client
// id is not.
func TestClientQuotaRequestPercentage(t *testing.T) {
	metricsAddr := "127.0.0.1:" + freePort(t)
	b := startBroker(t, t.TempDir(), "fjord.metrics.listener="+metricsAddr)
	adm := newAdmin(t, b.Addr)
	res := alterQuotas(t, adm, false, kadm.AlterClientQuotaEntry{Entity: qentity("client-id", "busy"), Ops: []kadm.AlterClientQuotaOp{set("request_percentage", 0.0001)}})
	if res[0].Err != nil {
		t.Fatal(res[0].Err)
	}
	throttled := func() float64 {
		resp, err := http.Get("http://" + metricsAddr + "/metrics")
		if err != nil {
			t.Fatalf("metrics: %v", err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		for _, l := range strings.Split(string(body), "\n") {
			if v, ok := strings.CutPrefix(l, `fjord_quota_throttle_seconds_total{type="request"} `); ok {
				var f float64
				fmt.Sscan(v, &f)
				return f
			}
		}
		return 0
	}
	// 0.0001% of a thread over the 10 s window is 10 µs of handler time.
	other := kadm.NewClient(newClient(t, b.Addr, kgo.ClientID("calm")))
	for range 20 {
		if _, err := other.ListTopics(testCtx(t, 10*time.Second)); err != nil {
			t.Fatal(err)
		}
	}
	if f := throttled(); f != 0 {
		t.Fatalf("a client without a request quota was throttled (%v s)", f)
	}
	busy := kadm.NewClient(newClient(t, b.Addr, kgo.ClientID("busy")))
	for i := range 50 {
		if _, err := busy.ListTopics(testCtx(t, 10*time.Second)); err != nil {
			t.Fatal(err)
		}
		if f := throttled(); f > 0 {
			t.Logf("throttled after %d requests: %v s", i+1, f)
			return
		}
	}
	t.Fatal("50 requests over request_percentage=0.0001 never throttled")
}
