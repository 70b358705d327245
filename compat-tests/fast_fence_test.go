package compattests

import (
	"context"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestFastFencing: with broker sessions of a minute, a leader killed with
// SIGKILL loses its leadership and an acks=all write succeeds on the new
// leader long before its session could expire: the active controller saw
// its listeners refuse connections. A frozen node (SIGSTOP) keeps its
// sockets and is not fenced early: it stays a registered, unfenced broker
// until its session ends.
func TestFastFencing(t *testing.T) {
	c := startCluster(t, 3, "broker.session.timeout.ms=60000", "broker.heartbeat.interval.ms=1000")
	ctx := testCtx(t, 90*time.Second)
	ctl := c.Controller()
	adm := c.Admin(ctl)
	if _, err := adm.CreateTopic(ctx, 1, 3, map[string]*string{"min.insync.replicas": kadm.StringPtr("2")}, "ff"); err != nil {
		t.Fatal(err)
	}
	leaderOf := func(id int) (int32, []int32, []int32) {
		m, err := c.Metadata(id, "ff")
		if err != nil || len(m.Topics["ff"].Partitions) != 1 {
			return -1, nil, nil
		}
		p := m.Topics["ff"].Partitions[0]
		return p.Leader, p.ISR, brokerIDs(m)
	}
	c.Await(t, 30*time.Second, "a full ISR", func() (bool, string) {
		l, isr, _ := leaderOf(ctl)
		return l >= 0 && len(isr) == 3, ""
	})
	// The leader dies; if it was also the active controller, the new one
	// finds it gone on its first look.
	l, _, _ := leaderOf(ctl)
	victim := int(l)
	seeds := []string{}
	for _, id := range c.IDs() {
		if id != victim {
			seeds = append(seeds, c.Addr(id))
		}
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.DefaultProduceTopic("ff"), kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.MetadataMinAge(100*time.Millisecond), kgo.RecordDeliveryTimeout(40*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if err := cl.ProduceSync(ctx, kgo.StringRecord("before")).FirstErr(); err != nil {
		t.Fatal(err)
	}
	c.Kill(victim)
	killed := time.Now()
	pctx, cancel := context.WithTimeout(ctx, 40*time.Second)
	err = cl.ProduceSync(pctx, kgo.StringRecord("after")).FirstErr()
	cancel()
	if err != nil {
		t.Fatalf("acks=all write after killing leader %d: %v", victim, err)
	}
	if took := time.Since(killed); took > 30*time.Second {
		t.Fatalf("the write took %v: the killed leader waited for its 60 s session", took)
	}
	other := -1
	for _, id := range c.IDs() {
		if id != victim {
			other = id
			break
		}
	}
	if l, isr, brokers := leaderOf(other); int(l) == victim || slices.Contains(isr, int32(victim)) || slices.Contains(brokers, int32(victim)) {
		t.Fatalf("killed node %d still leads, is in the ISR %v or listed among %v", victim, isr, brokers)
	}
	t.Logf("leader %d killed: acks=all write acknowledged by leader %d after %v", victim, func() int32 { l, _, _ := leaderOf(other); return l }(), time.Since(killed))

	// Freeze a live node other than the controller: it is not fenced for
	// as long as its session lasts, though its process answers nothing.
	c.Restart(victim)
	ctl = c.Controller()
	frozen := -1
	for _, id := range c.IDs() {
		if id != ctl {
			frozen = id
			break
		}
	}
	b := c.Node(frozen)
	b.mu.Lock()
	proc := b.cmd.Process
	b.mu.Unlock()
	if err := proc.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	defer proc.Signal(syscall.SIGCONT)
	time.Sleep(5 * time.Second)
	_, _, brokers := leaderOf(ctl)
	proc.Signal(syscall.SIGCONT)
	if !slices.Contains(brokers, int32(frozen)) {
		t.Fatalf("frozen node %d fenced within 5 s of a 60 s session: brokers %v", frozen, brokers)
	}
}
