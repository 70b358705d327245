package active

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/fjordlog/fjord/controller"
	"github.com/fjordlog/fjord/controller/node"
	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// fakeMember is a quorum of one in memory: Propose applies the record at
// the next index at once (through Encode and Decode, as raft would carry
// it), unless fail is set.
type fakeMember struct {
	mu      sync.Mutex
	img     *controller.Image
	leader  bool
	fail    error // returned by Propose instead of applying
	propose int   // Propose calls
	// slow, if set, is how long each Propose takes (a busy disk).
	slow time.Duration
	// fences lists every broker a proposal fenced.
	fences []int32
}

func newFakeMember() *fakeMember { return &fakeMember{img: new(controller.Image), leader: true} }

func (f *fakeMember) Image() *controller.Image {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.img
}

func (f *fakeMember) IsLeader() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.leader
}

func (f *fakeMember) Propose(ctx context.Context, r controller.Record) (uint64, error) {
	f.mu.Lock()
	slow := f.slow
	f.mu.Unlock()
	if slow > 0 {
		time.Sleep(slow)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.propose++
	if f.fail != nil {
		return 0, f.fail
	}
	d, err := controller.Decode(controller.Encode(r))
	if err != nil {
		return 0, err
	}
	idx := f.img.Version() + 1
	next, err := f.img.Apply(idx, d)
	if err != nil {
		return idx, err
	}
	for _, b := range f.img.LiveBrokers() {
		if nb, ok := next.Broker(b.ID); ok && nb.Fenced {
			f.fences = append(f.fences, b.ID)
		}
	}
	f.img = next
	return idx, nil
}

// fenced lists the brokers fenced so far, in order, once per fencing.
func (f *fakeMember) fenced() []int32 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.fences)
}

func (f *fakeMember) set(fn func(f *fakeMember)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fn(f)
}

func testConfig() Config {
	return Config{
		BrokerSessionTimeout: 9 * time.Second,
		NumPartitions:        3,
		DefaultReplication:   1,
		DeleteTopicEnable:    true,
		Logger:               zerolog.Nop(),
	}
}

// start serves a Controller over m until the test ends.
func start(t *testing.T, cfg Config, m member) *Controller {
	t.Helper()
	c, err := newController(cfg, m)
	if err != nil {
		t.Fatal(err)
	}
	c.Serve()
	t.Cleanup(func() { c.Close() })
	return c
}

// ask is c.Call's response alone.
func ask(c *Controller, ctx context.Context, req kmsg.Request) kmsg.Response {
	resp, _ := c.Call(ctx, req)
	return resp
}

// join registers broker id and heartbeats it unfenced; it returns the
// broker epoch.
func join(t *testing.T, c *Controller, id int32) int64 {
	t.Helper()
	reg := kmsg.NewPtrBrokerRegistrationRequest()
	reg.BrokerID, reg.IncarnationID = id, [16]byte{byte(id)}
	l := kmsg.NewBrokerRegistrationRequestListener()
	l.Name, l.Host, l.Port = "PLAINTEXT", "localhost", uint16(9092+id)
	reg.Listeners = append(reg.Listeners, l)
	rr, ok := ask(c, t.Context(), reg).(*kmsg.BrokerRegistrationResponse)
	if !ok || rr.ErrorCode != 0 || rr.BrokerEpoch <= 0 {
		t.Fatalf("register %d: %+v", id, rr)
	}
	hb := kmsg.NewPtrBrokerHeartbeatRequest()
	hb.BrokerID, hb.BrokerEpoch, hb.CurrentMetadataOffset = id, rr.BrokerEpoch, rr.BrokerEpoch
	hr, ok := ask(c, t.Context(), hb).(*kmsg.BrokerHeartbeatResponse)
	if !ok || hr.ErrorCode != 0 || hr.IsFenced || !hr.IsCaughtUp {
		t.Fatalf("heartbeat %d: %+v", id, hr)
	}
	return rr.BrokerEpoch
}

func createTopic(t *testing.T, c *Controller, name string) *kmsg.CreateTopicsResponseTopic {
	t.Helper()
	req := kmsg.NewPtrCreateTopicsRequest()
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = name, -1, -1
	req.Topics = append(req.Topics, rt)
	resp, ok := ask(c, t.Context(), req).(*kmsg.CreateTopicsResponse)
	if !ok || len(resp.Topics) != 1 {
		t.Fatalf("create %s: %+v", name, resp)
	}
	return &resp.Topics[0]
}

func TestConfigValidate(t *testing.T) {
	if _, err := newController(Config{}, newFakeMember()); err == nil {
		t.Fatal("zero Config accepted")
	}
	cfg := testConfig()
	cfg.AutoLeaderRebalance = true
	if _, err := newController(cfg, newFakeMember()); err == nil {
		t.Fatal("AutoLeaderRebalance without an interval accepted")
	}
}

func TestRegisterHeartbeatCreateTopic(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newFakeMember()
		c := start(t, testConfig(), m)
		join(t, c, 1)
		st := createTopic(t, c, "t")
		if st.ErrorCode != 0 || st.NumPartitions != 3 || st.ReplicationFactor != 1 {
			t.Fatalf("create: %+v", st)
		}
		if tp := m.Image().Topic("t"); tp == nil || tp.ID != st.TopicID || len(tp.Partitions) != 3 {
			t.Fatalf("image topic: %+v", tp)
		}
		if st := createTopic(t, c, "t"); st.ErrorCode != kerr.TopicAlreadyExists.Code {
			t.Fatalf("second create: %v", kerr.ErrorForCode(st.ErrorCode))
		}
	})
}

func TestTopicConfigValidated(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := testConfig()
		cfg.ValidateTopicConfig = func(name, value string) error {
			if name != "retention.ms" {
				return errors.New("unknown")
			}
			return nil
		}
		c := start(t, cfg, newFakeMember())
		join(t, c, 1)
		req := kmsg.NewPtrCreateTopicsRequest()
		for _, name := range []string{"good", "bad"} {
			rt := kmsg.NewCreateTopicsRequestTopic()
			rt.Topic, rt.NumPartitions, rt.ReplicationFactor = name, 1, 1
			k, v := "retention.ms", "1000"
			if name == "bad" {
				k = "no.such.config"
			}
			rt.Configs = append(rt.Configs, kmsg.CreateTopicsRequestTopicConfig{Name: k, Value: &v})
			req.Topics = append(req.Topics, rt)
		}
		resp := ask(c, t.Context(), req).(*kmsg.CreateTopicsResponse)
		if resp.Topics[0].ErrorCode != 0 || resp.Topics[1].ErrorCode != kerr.InvalidConfig.Code {
			t.Fatalf("codes %d, %d", resp.Topics[0].ErrorCode, resp.Topics[1].ErrorCode)
		}
	})
}

func TestDeleteTopicDisabled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := testConfig()
		cfg.DeleteTopicEnable = false
		m := newFakeMember()
		c := start(t, cfg, m)
		join(t, c, 1)
		createTopic(t, c, "t")
		req := kmsg.NewPtrDeleteTopicsRequest()
		req.Version = 5
		req.TopicNames = []string{"t"}
		resp := ask(c, t.Context(), req).(*kmsg.DeleteTopicsResponse)
		if len(resp.Topics) != 1 || resp.Topics[0].ErrorCode != kerr.TopicDeletionDisabled.Code {
			t.Fatalf("delete: %+v", resp.Topics)
		}
		if m.Image().Topic("t") == nil {
			t.Fatal("topic deleted")
		}
	})
}

// A node that does not lead answers nothing: the caller says
// NOT_CONTROLLER, and nothing is proposed.
func TestNotLeaderAnswersNil(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newFakeMember()
		m.leader = false
		c := start(t, testConfig(), m)
		if resp := ask(c, t.Context(), kmsg.NewPtrBrokerRegistrationRequest()); resp != nil {
			t.Fatalf("follower answered %+v", resp)
		}
		m.set(func(f *fakeMember) {
			if f.propose != 0 {
				t.Error("follower proposed")
			}
		})
	})
}

// A proposal known not to have committed is NOT_CONTROLLER (the broker
// retries at the new leader); one whose outcome is unknown, or any other
// failure, is REQUEST_TIMED_OUT (a retry could make the change twice).
func TestProposalFailureCodes(t *testing.T) {
	for _, tc := range []struct {
		err  error
		code int16
	}{
		{node.ErrNotCommitted, kerr.NotController.Code},
		{node.ErrLeadershipLost, kerr.RequestTimedOut.Code},
		{&node.NotLeaderError{Leader: 2}, kerr.NotController.Code},
		{context.DeadlineExceeded, kerr.RequestTimedOut.Code},
	} {
		t.Run(tc.err.Error(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				m := newFakeMember()
				c := start(t, testConfig(), m)
				join(t, c, 1)
				m.set(func(f *fakeMember) { f.fail = tc.err })
				if st := createTopic(t, c, "t"); st.ErrorCode != tc.code {
					t.Errorf("code %v, want %v", kerr.ErrorForCode(st.ErrorCode), kerr.ErrorForCode(tc.code))
				}
			})
		})
	}
}

// A broker silent for a session is fenced by the loop's tick; one that
// keeps heartbeating is not.
func TestSessionExpiryFences(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newFakeMember()
		cfg := testConfig()
		c := start(t, cfg, m)
		join(t, c, 1)
		e2 := join(t, c, 2)
		for range 3 * int(cfg.BrokerSessionTimeout/time.Second) {
			time.Sleep(time.Second)
			hb := kmsg.NewPtrBrokerHeartbeatRequest()
			hb.BrokerID, hb.BrokerEpoch, hb.CurrentMetadataOffset = 2, e2, e2
			if r := ask(c, t.Context(), hb).(*kmsg.BrokerHeartbeatResponse); r.ErrorCode != 0 || r.IsFenced {
				t.Fatalf("broker 2 heartbeat: %+v", r)
			}
		}
		if b, _ := m.Image().Broker(1); !b.Fenced {
			t.Fatal("silent broker 1 not fenced")
		}
		if b, _ := m.Image().Broker(2); b.Fenced {
			t.Fatal("live broker 2 fenced")
		}
	})
}

// Brokers heartbeating on time while the loop is stuck behind proposals
// slower than a session are not fenced for silence: heartbeats queued
// meanwhile are heard before the silence check.
func TestHeartbeatsQueuedBehindASlowProposal(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newFakeMember()
		cfg := testConfig()
		cfg.BrokerSessionTimeout = 3 * time.Second
		c := start(t, cfg, m)
		epochs := map[int32]int64{1: join(t, c, 1), 2: join(t, c, 2)}
		// Every proposal now takes longer than a session.
		m.set(func(f *fakeMember) { f.slow = 3500 * time.Millisecond })
		var wg sync.WaitGroup
		for id, e := range epochs {
			wg.Go(func() {
				for range 14 {
					hb := kmsg.NewPtrBrokerHeartbeatRequest()
					hb.BrokerID, hb.BrokerEpoch, hb.CurrentMetadataOffset = id, e, e
					ask(c, t.Context(), hb)
					time.Sleep(time.Second)
				}
			})
		}
		wg.Go(func() {
			for i := range 3 {
				createTopic(t, c, fmt.Sprintf("slow-%d", i))
			}
		})
		wg.Wait()
		for id := range epochs {
			if b, _ := m.Image().Broker(id); b.Fenced {
				t.Fatalf("broker %d fenced though it heartbeat every second", id)
			}
		}
	})
}

// A heartbeat proves its broker alive when it arrives, not when a busy
// loop answers it. Here the tick's own proposal (moving a leadership back
// to its preferred replica) is slower than a session, and the brokers'
// heartbeats give up meanwhile, as a broker's do (HeartbeatTimeout):
// before, the silence check right after that proposal fenced every broker
// at once, and the fencing's proposal stalled the loop again.
func TestHeartbeatsThatGiveUpBehindASlowTick(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newFakeMember()
		cfg := testConfig()
		cfg.BrokerSessionTimeout = 3 * time.Second
		cfg.DefaultReplication = 2
		cfg.AutoLeaderRebalance, cfg.LeaderImbalanceCheckInterval = true, time.Second
		c := start(t, cfg, m)
		epochs := map[int32]int64{1: join(t, c, 1), 2: join(t, c, 2)}
		if tp := createTopic(t, c, "t"); tp.ErrorCode != 0 {
			t.Fatalf("create: %+v", tp)
		}
		pref := m.Image().Topic("t").Partitions[0].Replicas[0]
		var silent atomic.Int32
		silent.Store(pref) // the preferred leader goes quiet, loses its leadership
		var wg sync.WaitGroup
		ctx, stop := context.WithCancel(t.Context())
		for id, e := range epochs {
			wg.Go(func() {
				for ctx.Err() == nil {
					if silent.Load() != id {
						hb := kmsg.NewPtrBrokerHeartbeatRequest()
						hb.BrokerID, hb.BrokerEpoch, hb.CurrentMetadataOffset = id, e, int64(m.Image().Version())
						hctx, cancel := context.WithTimeout(ctx, controller.HeartbeatTimeout(cfg.BrokerSessionTimeout, time.Second))
						ask(c, hctx, hb)
						cancel()
					}
					time.Sleep(100 * time.Millisecond)
				}
			})
		}
		time.Sleep(cfg.BrokerSessionTimeout + time.Second)
		if l := m.Image().Topic("t").Partitions[0].Leader; l == pref {
			t.Fatalf("leader still %d after its session", l)
		}
		// The preferred replica returns and the leader takes it back into
		// the ISR; every proposal from now on takes longer than a session,
		// the tick's move of the leadership back among them.
		silent.Store(-1)
		time.Sleep(time.Second)
		ar := alterISR(m.Image(), "t", epochs, []int32{0}, []int32{1, 2})
		m.set(func(f *fakeMember) { f.slow = 3500 * time.Millisecond })
		if r, ok := ask(c, t.Context(), ar).(*kmsg.AlterPartitionResponse); !ok || r.ErrorCode != 0 || r.Topics[0].Partitions[0].ErrorCode != 0 {
			t.Fatalf("AlterPartition: %+v", r)
		}
		before := len(m.fenced())
		time.Sleep(15 * time.Second)
		stop()
		wg.Wait()
		if f := m.fenced()[before:]; len(f) > 0 {
			t.Fatalf("brokers %v fenced though their heartbeats kept arriving", f)
		}
		if l := m.Image().Topic("t").Partitions[0].Leader; l != pref {
			b, _ := m.Image().Broker(pref)
			t.Fatalf("leadership not moved back to %d: leader %d; %+v %+v", pref, l, b, m.Image().Topic("t").Partitions[0])
		}
	})
}

// Losing leadership forgets liveness; leading again gives every broker a
// full session from the first tick instead of fencing it at once.
func TestNewLeaderGivesAFullSession(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newFakeMember()
		cfg := testConfig()
		c := start(t, cfg, m)
		join(t, c, 1)
		m.set(func(f *fakeMember) { f.leader = false })
		time.Sleep(2 * cfg.BrokerSessionTimeout)
		m.set(func(f *fakeMember) { f.leader = true })
		time.Sleep(cfg.BrokerSessionTimeout - time.Second)
		if b, _ := m.Image().Broker(1); b.Fenced {
			t.Fatal("broker fenced before a full session under the new leader")
		}
		time.Sleep(2 * time.Second)
		if b, _ := m.Image().Broker(1); !b.Fenced {
			t.Fatal("broker not fenced after a full session")
		}
	})
}

// Close answers callers still waiting, and calls after it, with nil.
func TestCloseReleasesCallers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, err := newController(testConfig(), newFakeMember())
		if err != nil {
			t.Fatal(err)
		}
		// Never served: the call waits in the queue until Close.
		got := make(chan kmsg.Response, 1)
		go func() { got <- ask(c, t.Context(), kmsg.NewPtrBrokerRegistrationRequest()) }()
		synctest.Wait()
		c.Close()
		if r := <-got; r != nil {
			t.Fatalf("answered %+v after Close", r)
		}
		if r := ask(c, t.Context(), kmsg.NewPtrBrokerRegistrationRequest()); r != nil {
			t.Fatalf("answered %+v after Close", r)
		}
		c.Serve() // after Close: does nothing
	})
}

// Losing the leadership forgets liveness but leaves an empty table, never
// a nil one: the loop may still be in a turn that fences for silence (a
// queued call found the leadership gone; a node died of this).
func TestLivenessNeverNil(t *testing.T) {
	m := newFakeMember()
	idx, err := m.Propose(t.Context(), controller.NewRecord(controller.RegisterBroker{ID: 1}))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Propose(t.Context(), controller.NewRecord(controller.UnfenceBroker{ID: 1, Epoch: int64(idx)})); err != nil {
		t.Fatal(err)
	}
	c, err := newController(testConfig(), m)
	if err != nil {
		t.Fatal(err)
	}
	if !c.leading() {
		t.Fatal("fake member leads")
	}
	m.set(func(f *fakeMember) { f.leader = false })
	if c.leading() {
		t.Fatal("still leading")
	}
	if recs := c.live.Tick(m.Image(), time.Now().UnixMilli(), c.sessionMs()); len(recs) != 0 {
		t.Fatalf("a forgotten liveness fenced: %v", recs)
	}
}

// alterISR is the AlterPartition the leader of topic's partitions sends,
// proposing isr for each (a partition may be named twice), at the epochs
// the image img shows.
func alterISR(img *controller.Image, topic string, epochs map[int32]int64, partitions, isr []int32) *kmsg.AlterPartitionRequest {
	tp := img.Topic(topic)
	ar := kmsg.NewPtrAlterPartitionRequest()
	ar.Version = 3
	at := kmsg.NewAlterPartitionRequestTopic()
	at.TopicID = tp.ID
	for _, p := range partitions {
		pt := tp.Partitions[p]
		ar.BrokerID, ar.BrokerEpoch = pt.Leader, epochs[pt.Leader]
		ap := kmsg.NewAlterPartitionRequestTopicPartition()
		ap.Partition, ap.LeaderEpoch, ap.PartitionEpoch = p, pt.LeaderEpoch, pt.PartitionEpoch
		for _, id := range isr {
			me := kmsg.NewAlterPartitionRequestTopicPartitionNewEpochISR()
			me.BrokerID, me.BrokerEpoch = id, epochs[id]
			ap.NewEpochISR = append(ap.NewEpochISR, me)
			ap.NewISR = append(ap.NewISR, id)
		}
		at.Partitions = append(at.Partitions, ap)
	}
	ar.Topics = append(ar.Topics, at)
	return ar
}

// One AlterPartition for many partitions is one proposal; a partition
// named twice is decided against the first change, committed.
func TestAlterPartitionBatched(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newFakeMember()
		cfg := testConfig()
		cfg.DefaultReplication = 2
		c := start(t, cfg, m)
		epochs := map[int32]int64{1: join(t, c, 1), 2: join(t, c, 2)}
		if tp := createTopic(t, c, "t"); tp.ErrorCode != 0 {
			t.Fatalf("create: %+v", tp)
		}
		// Broker 1's partitions shrink their ISR to broker 1 alone.
		var mine []int32
		for i, pt := range m.Image().Topic("t").Partitions {
			if pt.Leader == 1 {
				mine = append(mine, int32(i))
			}
		}
		if len(mine) < 2 {
			mine = nil // placement gave broker 1 one leadership: use broker 2's
			for i, pt := range m.Image().Topic("t").Partitions {
				if pt.Leader == 2 {
					mine = append(mine, int32(i))
				}
			}
		}
		leader := m.Image().Topic("t").Partitions[mine[0]].Leader
		m.mu.Lock()
		before := m.propose
		m.mu.Unlock()
		r := ask(c, t.Context(), alterISR(m.Image(), "t", epochs, mine, []int32{leader})).(*kmsg.AlterPartitionResponse)
		m.mu.Lock()
		proposals := m.propose - before
		m.mu.Unlock()
		if proposals != 1 {
			t.Fatalf("%d proposals for one AlterPartition of %d partitions", proposals, len(mine))
		}
		for i, sp := range r.Topics[0].Partitions {
			if sp.ErrorCode != 0 || !slices.Equal(sp.ISR, []int32{leader}) {
				t.Fatalf("partition %d: %+v", mine[i], sp)
			}
			if pt := m.Image().Topic("t").Partitions[mine[i]]; !slices.Equal(pt.ISR, []int32{leader}) {
				t.Fatalf("partition %d ISR %v in the image", mine[i], pt.ISR)
			}
		}
		// The same partition twice at the same epochs: the first change
		// commits, the second is stale against it.
		twice := alterISR(m.Image(), "t", epochs, []int32{mine[0], mine[0]}, []int32{1, 2})
		r = ask(c, t.Context(), twice).(*kmsg.AlterPartitionResponse)
		if got := r.Topics[0].Partitions; got[0].ErrorCode != 0 || got[1].ErrorCode == 0 {
			t.Fatalf("partition named twice: %+v", got)
		}
	})
}
