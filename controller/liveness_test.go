package controller

import (
	"reflect"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
)

const session = 9000 // broker.session.timeout.ms

// beat heartbeats every broker but skip at now, unfenced and caught up.
func beat(t *testing.T, c *cluster, l *Liveness, now int64, skip ...int32) {
	t.Helper()
	for _, b := range c.img.Brokers() {
		if slices.Contains(skip, b.ID) {
			continue
		}
		if recs, code := l.Heartbeat(c.img, b.ID, b.Epoch, true, now); code != 0 || len(recs) != 0 {
			t.Fatalf("heartbeat %d: %d %v", b.ID, code, recs)
		}
	}
}

func TestTickFencesAndElects(t *testing.T) {
	c := newCluster(t)
	c.brokers("", "", "")
	tp := c.create("t", 30, 3)
	before := map[int32]Partition{}
	for i, p := range tp.Partitions {
		before[int32(i)] = p
	}
	l := NewLiveness()
	if recs := l.Tick(c.img, 0, session); recs != nil { // first sight: session starts
		t.Fatal(recs)
	}
	beat(t, c, l, 5000, 2)
	if recs := l.Tick(c.img, 8999, session); recs != nil {
		t.Fatalf("fenced early: %v", recs)
	}
	recs := l.Tick(c.img, 9000, session)
	if len(recs) == 0 || !reflect.DeepEqual(recs[0].Body, FenceBroker{ID: 2, Epoch: c.epoch(2)}) {
		t.Fatalf("tick: %v", recs)
	}
	led := c.img.PartitionsLedBy(2)
	c.apply(recs...)
	if b, _ := c.img.Broker(2); !b.Fenced {
		t.Fatal("not fenced")
	}
	if len(led) != 10 || len(c.img.PartitionsLedBy(2)) != 0 {
		t.Fatalf("led %d before, %d after", len(led), len(c.img.PartitionsLedBy(2)))
	}
	for i, p := range c.img.Topic("t").Partitions {
		old := before[int32(i)]
		if slices.Contains(p.ISR, 2) || len(p.ISR) != 2 {
			t.Errorf("partition %d: ISR %v still has 2", i, p.ISR)
		}
		if old.Leader == 2 {
			if p.Leader == 2 || !slices.Contains(old.ISR, p.Leader) || p.LeaderEpoch != old.LeaderEpoch+1 {
				t.Errorf("partition %d: leader %d epoch %d, was %d epoch %d", i, p.Leader, p.LeaderEpoch, old.Leader, old.LeaderEpoch)
			}
		} else if p.Leader != old.Leader || p.LeaderEpoch != old.LeaderEpoch {
			t.Errorf("partition %d: leader moved without cause", i)
		}
	}
	if recs := l.Tick(c.img, 9001, session); recs != nil {
		t.Fatalf("fenced twice: %v", recs)
	}
}

func TestTickNoUncleanElection(t *testing.T) {
	c := newCluster(t)
	c.brokers("", "")
	res := CreateTopics(c.img, []TopicSpec{{Name: "t", Partitions: -1, RF: -1, Assignment: map[int32][]int32{0: {1, 2}}}}, Defaults{}, c.ids(1))
	c.apply(res[0].Records...)
	tp := c.img.Topic("t")
	// The leader shrinks the ISR to itself.
	recs, code := AlterPartition(c.img, 1, c.epoch(1), tp.ID, 0, 0, 0, []int32{1})
	if code != 0 {
		t.Fatal(code)
	}
	c.apply(recs...)
	l := NewLiveness()
	l.Tick(c.img, 0, session)
	beat(t, c, l, 1000, 1)
	c.apply(l.Tick(c.img, session, session)...)
	p := c.part(tp, 0)
	if p.Leader != -1 || !slices.Equal(p.ISR, []int32{1}) || p.LeaderEpoch != 1 {
		t.Fatalf("want leader -1 and ISR [1] (no unclean election of 2): %+v", p)
	}
	// Broker 2 alone, out of sync, never leads: ElectPreferred and ticks
	// leave it alone.
	if recs := ElectPreferred(c.img); recs != nil {
		t.Fatal(recs)
	}
	// Broker 1 comes back: its caught-up heartbeat unfences it and it leads.
	recs, code = l.Heartbeat(c.img, 1, c.epoch(1), false, 20000)
	if code != 0 || recs != nil {
		t.Fatalf("not caught up yet: %d %v", code, recs)
	}
	recs, code = l.Heartbeat(c.img, 1, c.epoch(1), true, 20001)
	if code != 0 || len(recs) != 2 || recs[0].Type() != TypeUnfenceBroker {
		t.Fatalf("unfence: %d %v", code, recs)
	}
	c.apply(recs...)
	if p := c.part(tp, 0); p.Leader != 1 || p.LeaderEpoch != 2 {
		t.Fatalf("after return: %+v", p)
	}
}

func TestHeartbeatErrorsAndRegister(t *testing.T) {
	c := newCluster(t)
	l := NewLiveness()
	reg := RegisterBroker{ID: 1, Incarnation: [16]byte{1}, Endpoints: []Endpoint{{"PLAINTEXT", "h", 1}}}
	recs, code := l.Register(c.img, reg, 0, session)
	if code != 0 || len(recs) != 1 {
		t.Fatal(code, recs)
	}
	c.apply(recs...)
	if _, code := l.Heartbeat(c.img, 2, 1, true, 1); code != kerr.BrokerIDNotRegistered.Code {
		t.Fatal(code)
	}
	if _, code := l.Heartbeat(c.img, 1, 99, true, 1); code != kerr.StaleBrokerEpoch.Code {
		t.Fatal(code)
	}
	recs, code = l.Heartbeat(c.img, 1, c.epoch(1), true, 1)
	if code != 0 || !reflect.DeepEqual(recs, []Record{NewRecord(UnfenceBroker{ID: 1, Epoch: c.epoch(1)})}) {
		t.Fatal(code, recs)
	}
	c.apply(recs...)
	c.create("t", 2, 1)
	// A retried registration needs nothing.
	if recs, code := l.Register(c.img, reg, 2, session); code != 0 || recs != nil {
		t.Fatal(code, recs)
	}
	// Another process claiming id 1 inside the session is refused.
	reg2 := reg
	reg2.Incarnation = [16]byte{2}
	if _, code := l.Register(c.img, reg2, 3, session); code != kerr.DuplicateBrokerRegistration.Code {
		t.Fatal(code)
	}
	// After the session, the new incarnation replaces the old one, which
	// loses its leaderships (ISR keeps it: it was the only member).
	recs, code = l.Register(c.img, reg2, 3+session, session)
	if code != 0 || len(recs) != 3 {
		t.Fatal(code, recs)
	}
	c.apply(recs...)
	if b, _ := c.img.Broker(1); !b.Fenced || b.Incarnation != reg2.Incarnation || len(c.img.PartitionsLedBy(1)) != 0 {
		t.Fatalf("%+v", b)
	}
	recs, _ = l.Heartbeat(c.img, 1, c.epoch(1), true, 4+session)
	c.apply(recs...)
	if len(c.img.PartitionsLedBy(1)) != 2 {
		t.Fatal("new incarnation did not take its partitions back")
	}
}

// After every node restarted at once (a power cut), the new active
// controller has heard none of the old incarnations, which the image still
// shows unfenced: the first Tick grants them a session, but a restarted
// broker's new incarnation is registered at once, not refused as a
// duplicate for that session. One heard by this controller still holds
// its id, and the image never shows two incarnations of one id.
func TestRegisterAfterControllerRestart(t *testing.T) {
	c := newCluster(t)
	c.brokers("", "", "")
	tp := c.create("t", 6, 3)
	l := NewLiveness() // the restarted controller's
	if recs := l.Tick(c.img, 0, session); len(recs) != 0 {
		t.Fatalf("first tick fenced: %v", recs)
	}

	// Broker 1 comes back as a new process: accepted at once, starting
	// fenced, its old incarnation out of every leadership and ISR.
	reg1 := RegisterBroker{ID: 1, Incarnation: [16]byte{0x11}, Endpoints: []Endpoint{{"PLAINTEXT", "h", 9093}}}
	recs, code := l.Register(c.img, reg1, 100, session)
	if code != 0 || len(recs) == 0 {
		t.Fatalf("new incarnation of 1 after the controller restarted: code %d, %v", code, recs)
	}
	c.apply(recs...)
	b1, _ := c.img.Broker(1)
	if !b1.Fenced || b1.Incarnation != reg1.Incarnation {
		t.Fatalf("broker 1 after its new registration: %+v", b1)
	}
	for p := range int32(6) {
		if pt := c.part(tp, p); pt.Leader == 1 || slices.Contains(pt.ISR, 1) {
			t.Fatalf("partition %d still led by or in sync with the old incarnation: %+v", p, pt)
		}
	}

	// Broker 2's old process is alive after all: its heartbeat reaches the
	// new controller before any new process claims its id, which is then a
	// duplicate for a session.
	if recs, code := l.Heartbeat(c.img, 2, c.epoch(2), true, 200); code != 0 || len(recs) != 0 {
		t.Fatalf("broker 2 heartbeat: %d %v", code, recs)
	}
	reg2 := RegisterBroker{ID: 2, Incarnation: [16]byte{0x22}, Endpoints: []Endpoint{{"PLAINTEXT", "h", 9094}}}
	if _, code := l.Register(c.img, reg2, 300, session); code != kerr.DuplicateBrokerRegistration.Code {
		t.Fatalf("a second process for a broker heard 100 ms ago: code %d, want DUPLICATE_BROKER_REGISTRATION", code)
	}
	// Broker 3 was heard only through an arrival (Heard): the same.
	l.Heard(c.img, 3, c.epoch(3), 250)
	reg3 := RegisterBroker{ID: 3, Incarnation: [16]byte{0x33}, Endpoints: []Endpoint{{"PLAINTEXT", "h", 9095}}}
	if _, code := l.Register(c.img, reg3, 300, session); code != kerr.DuplicateBrokerRegistration.Code {
		t.Fatalf("a second process for a broker heard 50 ms ago: code %d", code)
	}

	// The new incarnation of 1 heartbeats: now it holds the id, and the old
	// one, were it alive, is stale and refused.
	recs, code = l.Heartbeat(c.img, 1, c.epoch(1), true, 400)
	if code != 0 {
		t.Fatalf("new incarnation's heartbeat: %d", code)
	}
	c.apply(recs...)
	if _, code := l.Heartbeat(c.img, 1, b1.Epoch-1, true, 450); code != kerr.StaleBrokerEpoch.Code {
		t.Fatalf("old incarnation's heartbeat: %d, want STALE_BROKER_EPOCH", code)
	}
	old1 := RegisterBroker{ID: 1, Incarnation: [16]byte{1}, Endpoints: []Endpoint{{"PLAINTEXT", "h", 9093}}}
	if _, code := l.Register(c.img, old1, 500, session); code != kerr.DuplicateBrokerRegistration.Code {
		t.Fatalf("old incarnation re-registering while the new one heartbeats: %d", code)
	}
	if b, _ := c.img.Broker(1); b.Fenced || b.Incarnation != reg1.Incarnation {
		t.Fatalf("broker 1: %+v", b)
	}
}

func TestElectPreferred(t *testing.T) {
	c := newCluster(t)
	c.brokers("", "", "")
	tp := c.create("t", 6, 3)
	l := NewLiveness()
	l.Tick(c.img, 0, session)
	beat(t, c, l, 1, 1)
	c.apply(l.Tick(c.img, session, session)...)
	if len(c.img.LiveBrokers()) != 2 {
		t.Fatal("want only broker 1 fenced")
	}
	if n := len(c.img.PartitionsLedBy(1)); n != 0 {
		t.Fatal(n)
	}
	if recs := ElectPreferred(c.img); recs != nil {
		t.Fatalf("broker 1 is fenced: %v", recs)
	}
	recs, _ := l.Heartbeat(c.img, 1, c.epoch(1), true, session+2)
	c.apply(recs...)
	// Broker 1 is back but not in any ISR yet: no preferred election.
	if recs := ElectPreferred(c.img); recs != nil {
		t.Fatalf("broker 1 is out of sync: %v", recs)
	}
	for i, p := range c.img.Topic("t").Partitions {
		recs, code := AlterPartition(c.img, p.Leader, c.epoch(p.Leader), tp.ID, int32(i), p.LeaderEpoch, p.PartitionEpoch, p.Replicas)
		if code != 0 {
			t.Fatal(code)
		}
		c.apply(recs...)
	}
	recs = ElectPreferred(c.img)
	if len(recs) != 2 {
		t.Fatalf("want 2 elections, got %v", recs)
	}
	c.apply(recs...)
	for i, p := range c.img.Topic("t").Partitions {
		if p.Leader != p.Replicas[0] {
			t.Errorf("partition %d: leader %d, preferred %d", i, p.Leader, p.Replicas[0])
		}
	}
	if recs := ElectPreferred(c.img); recs != nil {
		t.Fatal(recs)
	}
}

// TestDeterminism runs the same scenario twice and compares every record
// byte for byte.
func TestDeterminism(t *testing.T) {
	run := func() (out [][]byte) {
		c := newCluster(t)
		c.brokers("a", "b", "a", "b", "c")
		emit := func(recs ...Record) {
			for _, r := range recs {
				out = append(out, Encode(r))
			}
			c.apply(recs...)
		}
		res := CreateTopics(c.img, []TopicSpec{
			{Name: "x", Partitions: 17, RF: 3, Configs: map[string]string{"a": "1", "b": "2", "c": "3"}},
			{Name: "y", Partitions: 5, RF: 2},
		}, Defaults{}, c.ids(2))
		for _, r := range res {
			emit(r.Records...)
		}
		l := NewLiveness()
		l.Tick(c.img, 0, session)
		beat(t, c, l, 10, 2, 4)
		emit(l.Tick(c.img, session, session)...)
		if len(c.img.LiveBrokers()) != 3 {
			t.Fatal("want brokers 2 and 4 fenced")
		}
		for _, id := range []int32{2, 4} {
			recs, _ := l.Heartbeat(c.img, id, c.epoch(id), true, session+20)
			emit(recs...)
		}
		emit(ElectPreferred(c.img)...)
		recs, _, _ := CreatePartitions(c.img, "y", 9, nil, Defaults{})
		emit(recs...)
		return out
	}
	a, b := run(), run()
	if !reflect.DeepEqual(a, b) {
		t.Fatal("same inputs gave different records")
	}
	if len(a) < 30 {
		t.Fatalf("scenario too small: %d records", len(a))
	}
}

// TestControlledShutdown: a broker asking to shut down is fenced at once,
// leaves every ISR and leadership (leaders move inside the ISR, epochs
// bumped), is never unfenced by that heartbeat again, and its next
// incarnation registers without waiting out a session.
func TestControlledShutdown(t *testing.T) {
	c := newCluster(t)
	c.brokers("", "", "")
	tp := c.create("t", 12, 3)
	solo := c.create("solo", 3, 1)
	l := NewLiveness()
	l.Tick(c.img, 0, session)
	beat(t, c, l, 1000)
	led := c.img.PartitionsLedBy(2)
	soloLed := 0
	for _, p := range solo.Partitions {
		if p.Leader == 2 {
			soloLed++
		}
	}

	recs, code := l.Shutdown(c.img, 2, c.epoch(2), 2000)
	if code != 0 || len(recs) == 0 || !reflect.DeepEqual(recs[0].Body, FenceBroker{ID: 2, Epoch: c.epoch(2)}) {
		t.Fatalf("shutdown: %d %v", code, recs)
	}
	c.apply(recs...)
	if b, _ := c.img.Broker(2); !b.Fenced {
		t.Fatal("not fenced")
	}
	if len(led) == 0 || len(c.img.PartitionsLedBy(2)) != 0 {
		t.Fatalf("led %d before, %d after", len(led), len(c.img.PartitionsLedBy(2)))
	}
	for i, p := range c.img.Topic(tp.Name).Partitions {
		if slices.Contains(p.ISR, 2) || p.Leader == 2 || p.Leader < 0 {
			t.Errorf("%s-%d: %+v", tp.Name, i, p)
		}
	}
	left := 0
	for _, p := range c.img.Topic(solo.Name).Partitions {
		if slices.Equal(p.ISR, []int32{2}) {
			left++
			if p.Leader != -1 {
				t.Errorf("solo partition kept leader %d", p.Leader)
			}
		}
	}
	if left != soloLed {
		t.Errorf("%d single-replica partitions of broker 2 kept it as their ISR, want %d", left, soloLed)
	}
	// Asked again (the broker waits for ShouldShutDown): nothing more, and
	// a caught-up heartbeat would unfence, but a shutdown one does not.
	if recs, code := l.Shutdown(c.img, 2, c.epoch(2), 2100); code != 0 || recs != nil {
		t.Fatalf("repeated shutdown: %d %v", code, recs)
	}
	if _, code := l.Shutdown(c.img, 2, 99, 2100); code != kerr.StaleBrokerEpoch.Code {
		t.Fatalf("stale epoch: %d", code)
	}
	// The next incarnation registers at once, well inside the old session.
	recs, code = l.Register(c.img, RegisterBroker{ID: 2, Incarnation: [16]byte{42}, Endpoints: []Endpoint{{"PLAINTEXT", "h", 2}}}, 2200, session)
	if code != 0 || len(recs) != 1 {
		t.Fatalf("re-register: %d %v", code, recs)
	}
}

// A broker whose listeners refuse connections is fenced at once, its
// leaderships moved; heartbeats it sent before do not unfence it, one sent
// after does, and then that registration is never fenced early again.
func TestRefusedFencesEarlyOnce(t *testing.T) {
	c := newCluster(t)
	c.brokers("", "", "")
	c.create("t", 6, 3)
	l := NewLiveness()
	l.Tick(c.img, 0, session)
	if recs := l.Refused(c.img, 2, c.epoch(2)+1, 100); recs != nil {
		t.Fatalf("another registration fenced: %v", recs)
	}
	recs := l.Refused(c.img, 2, c.epoch(2), 100)
	if len(recs) == 0 || !reflect.DeepEqual(recs[0].Body, FenceBroker{ID: 2, Epoch: c.epoch(2)}) {
		t.Fatalf("refused: %v", recs)
	}
	c.apply(recs...)
	if b, _ := c.img.Broker(2); !b.Fenced || len(c.img.PartitionsLedBy(2)) != 0 {
		t.Fatalf("broker 2 not fenced, or still leads %d partitions", len(c.img.PartitionsLedBy(2)))
	}
	if recs := l.Refused(c.img, 2, c.epoch(2), 150); recs != nil {
		t.Fatalf("fenced twice: %v", recs)
	}
	// Sent before the refusal, decided after it: nothing.
	if recs, code := l.HeartbeatSent(c.img, 2, c.epoch(2), true, 90, 200); code != 0 || recs != nil {
		t.Fatalf("stale heartbeat: %d %v", code, recs)
	}
	if !l.MayFenceEarly(2, c.epoch(2)) {
		t.Fatal("a stale heartbeat disproved the refusal")
	}
	// Sent after: the broker lives; it is unfenced, and never fenced early
	// again at this epoch.
	recs, code := l.HeartbeatSent(c.img, 2, c.epoch(2), true, 300, 300)
	if code != 0 || len(recs) == 0 || !reflect.DeepEqual(recs[0].Body, UnfenceBroker{ID: 2, Epoch: c.epoch(2)}) {
		t.Fatalf("heartbeat after: %d %v", code, recs)
	}
	c.apply(recs...)
	if l.MayFenceEarly(2, c.epoch(2)) {
		t.Fatal("early fencing still allowed after it was disproved")
	}
	if recs := l.Refused(c.img, 2, c.epoch(2), 400); recs != nil {
		t.Fatalf("fenced early again: %v", recs)
	}
	// The session still fences it.
	beat(t, c, l, 5000, 2)
	if recs := l.Tick(c.img, 300+session, session); len(recs) == 0 {
		t.Fatal("silent broker not fenced by its session")
	}
}
