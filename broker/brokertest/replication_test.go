package brokertest

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordlog/fjord/broker/config"
)

func replicatedCluster(t *testing.T) *Cluster {
	t.Helper()
	c, err := Start(Options{Nodes: 3, Dir: t.TempDir(), Configure: func(_ int32, cfg *config.Config) {
		cfg.ReplicaLagTimeMaxMs = 2000
		cfg.MinInsyncReplicas = 2
		cfg.LeaderImbalanceCheckSecs = 1
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func producer(t *testing.T, c *Cluster, topic string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(c.Addrs()...), kgo.DefaultProduceTopic(topic),
		kgo.RecordRetries(3), kgo.ProduceRequestTimeout(5 * time.Second), kgo.RecordDeliveryTimeout(20 * time.Second),
		kgo.MetadataMinAge(100 * time.Millisecond), kgo.RetryBackoffFn(func(int) time.Duration { return 100 * time.Millisecond })}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// produce sends n keyed records acks=all and returns how many were
// acknowledged and the first error.
func produce(t *testing.T, cl *kgo.Client, from, n int) (int, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var recs []*kgo.Record
	for i := from; i < from+n; i++ {
		recs = append(recs, &kgo.Record{Key: []byte("k" + strconv.Itoa(i%7)), Value: []byte(strconv.Itoa(i))})
	}
	res := cl.ProduceSync(ctx, recs...)
	ok := 0
	var first error
	for _, r := range res {
		if r.Err == nil {
			ok++
		} else if first == nil {
			first = r.Err
		}
	}
	return ok, first
}

// consumeValues reads the whole topic and returns the values seen.
func consumeValues(t *testing.T, c *Cluster, topic string, want int) []string {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.Addrs()...), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(200*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var out []string
	deadline := time.Now().Add(20 * time.Second)
	for len(out) < want && time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		fs := cl.PollFetches(ctx)
		cancel()
		fs.EachRecord(func(r *kgo.Record) { out = append(out, string(r.Value)) })
	}
	return out
}

// waitTopic waits until every running node has the topic with its full ISR.
func waitTopic(t *testing.T, c *Cluster, topic string, partitions int) {
	t.Helper()
	for _, addr := range c.Addrs() {
		eventually(t, 10*time.Second, "topic on "+addr, func() bool {
			ps := isrOf(t, c, addr, topic)
			return len(ps) == partitions
		})
	}
}

func isrOf(t *testing.T, c *Cluster, addr, topic string) []kmsg.MetadataResponseTopicPartition {
	ps, _ := layout(t, addr, topic)
	return ps
}

// Acknowledged acks=all writes survive the leader's loss, and the old
// leader catches up and rejoins the ISR when it returns.
func TestReplicationSurvivesLeaderLoss(t *testing.T) {
	c := replicatedCluster(t)
	if code := createTopic(t, c.Addr(1), "r", 1, 3); code != 0 {
		t.Fatalf("create: %v", kerr.ErrorForCode(code))
	}
	waitTopic(t, c, "r", 1)
	cl := producer(t, c, "r")
	if ok, err := produce(t, cl, 0, 200); err != nil || ok != 200 {
		t.Fatalf("produce: %d acked, %v", ok, err)
	}
	ps := isrOf(t, c, c.Addr(1), "r")
	leader := ps[0].Leader
	if len(ps[0].ISR) != 3 {
		t.Fatalf("ISR %v after writes", ps[0].ISR)
	}
	if err := c.Stop(leader); err != nil {
		t.Fatal(err)
	}
	other := int32(1)
	for other == leader {
		other++
	}
	eventually(t, 15*time.Second, "a new leader", func() bool {
		ps := isrOf(t, c, c.Addr(other), "r")
		return len(ps) == 1 && ps[0].Leader != leader && ps[0].Leader >= 0
	})
	if ok, err := produce(t, cl, 200, 100); err != nil || ok != 100 {
		t.Fatalf("produce after failover: %d acked, %v", ok, err)
	}
	got := consumeValues(t, c, "r", 300)
	checkAll(t, got, 300)
	if err := c.Restart(leader); err != nil {
		t.Fatal(err)
	}
	eventually(t, 20*time.Second, "the old leader back in the ISR", func() bool {
		ps := isrOf(t, c, c.Addr(other), "r")
		return len(ps) == 1 && len(ps[0].ISR) == 3
	})
	// It was the preferred replica: leadership moves back to it.
	eventually(t, 10*time.Second, "leadership back on the preferred replica", func() bool {
		ps := isrOf(t, c, c.Addr(other), "r")
		return len(ps) == 1 && ps[0].Leader == leader
	})
	// Every node applies the move in its own time: wait until the new
	// leader knows it leads (its own metadata says so) before writing.
	eventually(t, 10*time.Second, "the preferred replica applies its leadership", func() bool {
		ps := isrOf(t, c, c.Addr(leader), "r")
		return len(ps) == 1 && ps[0].Leader == leader
	})
	if ok, err := produce(t, cl, 300, 50); err != nil || ok != 50 {
		t.Fatalf("produce after rebalance: %d acked, %v", ok, err)
	}
	checkAll(t, consumeValues(t, c, "r", 350), 350)
}

// ElectLeaders: a preferred election moves leadership where it can and
// says why where it cannot; unclean elections are refused.
func TestElectLeaders(t *testing.T) {
	c, err := Start(Options{Nodes: 3, Dir: t.TempDir(), Configure: func(_ int32, cfg *config.Config) {
		cfg.AutoLeaderRebalance = false
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if code := createTopic(t, c.Addr(1), "e", 1, 3); code != 0 {
		t.Fatalf("create: %v", kerr.ErrorForCode(code))
	}
	waitTopic(t, c, "e", 1)
	pref := isrOf(t, c, c.Addr(1), "e")[0].Replicas[0]
	if err := c.Stop(pref); err != nil {
		t.Fatal(err)
	}
	other := int32(1)
	for other == pref {
		other++
	}
	eventually(t, 15*time.Second, "leadership moved off the stopped preferred replica", func() bool {
		ps := isrOf(t, c, c.Addr(other), "e")
		return len(ps) == 1 && ps[0].Leader >= 0 && ps[0].Leader != pref
	})
	if err := c.Restart(pref); err != nil {
		t.Fatal(err)
	}
	elect := func(typ int8) int16 {
		req := kmsg.NewPtrElectLeadersRequest()
		req.ElectionType = typ
		rt := kmsg.NewElectLeadersRequestTopic()
		rt.Topic, rt.Partitions = "e", []int32{0}
		req.Topics = append(req.Topics, rt)
		resp, err := request(t, c.Addr(other), req)
		if err != nil {
			return -1
		}
		r := resp.(*kmsg.ElectLeadersResponse)
		if r.ErrorCode != 0 {
			return r.ErrorCode
		}
		return r.Topics[0].Partitions[0].ErrorCode
	}
	if code := elect(1); code != kerr.ElectionNotNeeded.Code {
		t.Fatalf("unclean election: code %d", code)
	}
	eventually(t, 20*time.Second, "preferred election succeeds once the replica is back in sync", func() bool {
		return elect(0) == 0
	})
	if ps := isrOf(t, c, c.Addr(other), "e"); ps[0].Leader != pref {
		t.Fatalf("leader %d after election, want %d", ps[0].Leader, pref)
	}
	if code := elect(0); code != kerr.ElectionNotNeeded.Code {
		t.Fatalf("second election: code %d", code)
	}
}

// checkAll asserts values 0..n-1 each appear exactly once.
func checkAll(t *testing.T, got []string, n int) {
	t.Helper()
	seen := map[string]int{}
	for _, v := range got {
		seen[v]++
	}
	var lost, dup []int
	for i := range n {
		switch seen[strconv.Itoa(i)] {
		case 0:
			lost = append(lost, i)
		case 1:
		default:
			dup = append(dup, i)
		}
	}
	if len(lost) > 0 || len(dup) > 0 || len(got) != n {
		t.Fatalf("read %d records: lost %v, duplicated %v", len(got), lost, dup)
	}
}

// With two of three replicas gone, acks=all writes are refused
// (NOT_ENOUGH_REPLICAS) rather than acknowledged on one copy; once the
// replicas return, writes succeed and nothing acknowledged is missing.
func TestReplicationRefusesBelowMinISR(t *testing.T) {
	c := replicatedCluster(t)
	if code := createTopic(t, c.Addr(1), "m", 1, 3); code != 0 {
		t.Fatalf("create: %v", kerr.ErrorForCode(code))
	}
	waitTopic(t, c, "m", 1)
	// Not idempotent, no retries: an idempotent franz-go producer never
	// gives up on a batch whose outcome is unknown, which is right for
	// applications and wrong for observing the refusal.
	cl := producer(t, c, "m", kgo.RecordRetries(0), kgo.DisableIdempotentWrite())
	if ok, err := produce(t, cl, 0, 50); err != nil || ok != 50 {
		t.Fatalf("produce: %d acked, %v", ok, err)
	}
	ps := isrOf(t, c, c.Addr(1), "m")
	leader := ps[0].Leader
	var down []int32
	for id := int32(1); id <= 3; id++ {
		if id != leader {
			down = append(down, id)
			if err := c.Stop(id); err != nil {
				t.Fatal(err)
			}
		}
	}
	// The two stopped nodes were a majority of the quorum: no controller,
	// so the ISR cannot shrink; the leader times out waiting or refuses.
	acked, err := produce(t, cl, 50, 10)
	if acked != 0 || err == nil {
		t.Fatalf("with 2 of 3 replicas down: %d acked, err %v", acked, err)
	}
	if !errors.Is(err, kerr.NotEnoughReplicas) && !errors.Is(err, kerr.NotEnoughReplicasAfterAppend) &&
		!errors.Is(err, kerr.RequestTimedOut) && !errors.Is(err, context.DeadlineExceeded) {
		t.Logf("refused with %v", err)
	}
	for _, id := range down {
		if err := c.Restart(id); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, 30*time.Second, "writes accepted again", func() bool {
		ok, _ := produce(t, cl, 1000, 1)
		return ok == 1
	})
	got := consumeValues(t, c, "m", 51)
	have := map[string]bool{}
	for _, v := range got {
		have[v] = true
	}
	for i := range 50 {
		if !have[strconv.Itoa(i)] {
			t.Fatalf("acknowledged record %d lost; read %v", i, got)
		}
	}
}
