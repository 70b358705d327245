package share

import (
	"bytes"
	"fmt"
	"math/rand"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// simClient is a share consumer that mostly behaves as franz-go's does
// (join with epoch 0 and its subscription, heartbeat with the epoch it was
// given, rejoin with epoch 0 after FENCED_MEMBER_EPOCH or
// UNKNOWN_MEMBER_ID, leave with -1) and sometimes does not.
type simClient struct {
	id     string
	epoch  int32 // the epoch it will send; 0: (re)join
	subs   []string
	sentOK bool // its last heartbeat succeeded (it need not resend its subscription)
}

// sim runs one seeded random scenario against a Group, as a coordinator
// would drive it (dropping the group when it becomes Dead), and returns
// the transcript: every call, every response encoded with kmsg, every
// record, and the group's state after each step. It fails t on any broken
// invariant, on a replay that does not rebuild the group, and on any
// violation of the NextDeadline contract or of the assignment's coverage.
func sim(t *testing.T, seed int64, steps int) []byte {
	rng := rand.New(rand.NewSource(seed))
	cfg := DefaultConfig()
	cfg.SessionTimeoutMs = int32(2000 + rng.Intn(4)*1000)
	cfg.HeartbeatIntervalMs = 1000
	cfg.MaxSize = int32(2 + rng.Intn(6))
	discipline := 1 + rng.Intn(4) // in quarters: how often clients do what they should

	var tr bytes.Buffer
	now := int64(0)

	// The topics: names, partition counts, generations (a recreated
	// topic gets a new id).
	names := []string{"a", "b", "c", "d"}
	parts := map[string]int32{"a": 3, "b": 1}
	gens := map[string]byte{}
	image := func() *Image {
		var ts []Topic
		for _, n := range names {
			if p := parts[n]; p > 0 {
				ts = append(ts, Topic{Name: n, ID: topicID(n, gens[n]), Partitions: p})
			}
		}
		return NewImage(ts)
	}
	img := image()

	g := New("g", cfg)
	var log []Record         // the group's records since it was created
	replica := New("g", cfg) // replays log as it grows
	applyLog := func(step int, recs []Record) {
		log = append(log, recs...)
		for _, r := range recs {
			if err := replica.Replay(r.Key, r.Value); err != nil {
				t.Fatalf("seed %d step %d: replay: %v", seed, step, err)
			}
			fmt.Fprintf(&tr, "  rec %x %x\n", r.Key, r.Value)
		}
	}

	var clients []*simClient
	for i := range 8 {
		clients = append(clients, &simClient{id: fmt.Sprintf("c%d", i)})
	}
	randomSubs := func() []string {
		var s []string
		for _, n := range names {
			if rng.Intn(3) == 0 {
				s = append(s, n)
			}
		}
		if len(s) == 0 {
			s = []string{names[rng.Intn(len(names))]}
		}
		return s
	}
	for _, c := range clients {
		c.subs = randomSubs()
	}

	for step := range steps {
		now += int64(rng.Intn(1500))
		good := rng.Intn(4) < discipline
		switch k := rng.Intn(20); {
		case k < 13: // a heartbeat
			c := clients[rng.Intn(len(clients))]
			req := kmsg.NewPtrShareGroupHeartbeatRequest()
			req.Version = int16(rng.Intn(2))
			req.GroupID = "g"
			req.MemberID = c.id
			req.MemberEpoch = c.epoch
			if c.epoch == 0 || !c.sentOK {
				req.SubscribedTopicNames = c.subs
			}
			if !good {
				switch rng.Intn(8) {
				case 0:
					req.MemberEpoch = int32(rng.Intn(int(g.Epoch()) + 3))
				case 1:
					req.MemberEpoch = -1 // leave
				case 2:
					c.subs = randomSubs()
					req.SubscribedTopicNames = c.subs
				case 3:
					req.SubscribedTopicNames = nil
				case 4:
					r := fmt.Sprintf("rack%d", rng.Intn(2))
					req.RackID = &r
				case 5:
					req.MemberEpoch = -2 - int32(rng.Intn(2))
				case 6:
					req.MemberEpoch = 0 // a rejoin
					req.SubscribedTopicNames = c.subs
				case 7:
					req.MemberID = ""
				}
			}
			cl := Client{ID: "client-" + c.id, Host: fmt.Sprintf("/10.0.0.%d", rng.Intn(2))}
			before := g.durable()
			resp, recs := g.HeartbeatFrom(now, img, req, cl)
			fmt.Fprintf(&tr, "%d t=%d hb %s e=%d subs=%v: %x\n", step, now, req.MemberID, req.MemberEpoch, req.SubscribedTopicNames, resp.AppendTo(nil))
			if resp.ErrorCode != 0 && (len(recs) > 0 || g.durable() != before) {
				t.Fatalf("seed %d step %d: a refused heartbeat changed the group", seed, step)
			}
			applyLog(step, recs)
			switch {
			case resp.ErrorCode == 0 && req.MemberEpoch == -1:
				c.epoch, c.sentOK = 0, false
			case resp.ErrorCode == 0:
				c.epoch, c.sentOK = resp.MemberEpoch, true
				m := g.members[c.id]
				if m == nil || m.epoch != resp.MemberEpoch {
					t.Fatalf("seed %d step %d: response epoch %d, member %+v", seed, step, resp.MemberEpoch, m)
				}
				if resp.Assignment != nil {
					got := map[TopicID][]int32{}
					for _, tp := range resp.Assignment.TopicPartitions {
						got[tp.TopicID] = tp.Partitions
					}
					if !normalize(got).equal(m.assigned) {
						t.Fatalf("seed %d step %d: response assignment differs from the member's", seed, step)
					}
				}
			default:
				// What franz-go does: rejoin with the same id.
				c.epoch, c.sentOK = 0, false
			}
		case k < 15: // the image changes
			n := names[rng.Intn(len(names))]
			switch rng.Intn(3) {
			case 0:
				parts[n]++
			case 1:
				parts[n] = 0 // deleted
			case 2:
				gens[n]++ // recreated
				parts[n] = 1 + int32(rng.Intn(3))
			}
			img = image()
			recs := g.MetadataChanged(now, img)
			fmt.Fprintf(&tr, "%d t=%d metadata %v\n", step, now, img.Topics())
			applyLog(step, recs)
		case k < 18: // time passes
			deadline := g.NextDeadline()
			at := now
			if deadline > 0 && rng.Intn(2) == 0 {
				at = max(now, deadline)
			}
			if deadline < 0 || at < deadline {
				// Nothing may happen before the deadline.
				if recs := g.Tick(at, img); len(recs) > 0 {
					t.Fatalf("seed %d step %d: tick at %d before the deadline %d removed members", seed, step, at, deadline)
				}
			}
			now = at
			n := g.NumMembers()
			recs := g.Tick(now, img)
			if deadline > 0 && now >= deadline && g.NumMembers() >= n {
				t.Fatalf("seed %d step %d: tick at the deadline %d removed nobody", seed, step, deadline)
			}
			fmt.Fprintf(&tr, "%d t=%d tick\n", step, now)
			applyLog(step, recs)
		case k < 19: // the coordinator releases what departed members held
			fmt.Fprintf(&tr, "%d left %v\n", step, g.Left())
		default: // DeleteGroups
			recs, err := g.Delete()
			fmt.Fprintf(&tr, "%d delete: %v\n", step, err)
			applyLog(step, recs)
			if err == nil {
				if g.State() != "Dead" {
					t.Fatalf("seed %d step %d: deleted group is %s", seed, step, g.State())
				}
				// The coordinator drops a Dead group; the next join
				// creates a new one. Replaying the old log and then the
				// new one must still work (the tombstone ends the old).
				g = New("g", cfg)
			}
		}

		if err := g.checkInvariants(true); err != nil {
			t.Fatalf("seed %d step %d: invariants: %v\n%s", seed, step, err, g.dump(img))
		}
		if replica.dead && !g.dead {
			// The log ends with a deleted group's tombstone and the live
			// group is the new one, which has written nothing yet.
			if g.durable() != New("g", cfg).durable() {
				t.Fatalf("seed %d step %d: the log ends Dead but the group is\n%s", seed, step, g.durable())
			}
		} else if got, want := replica.durable(), g.durable(); got != want {
			t.Fatalf("seed %d step %d: replay rebuilds another group:\n%s\nwant:\n%s", seed, step, got, want)
		}
		if step%64 == 63 {
			fresh := New("g", cfg)
			for i, r := range log {
				if err := fresh.Replay(r.Key, r.Value); err != nil {
					t.Fatalf("seed %d step %d: full replay record %d: %v", seed, step, i, err)
				}
			}
			if fresh.dead != replica.dead || fresh.durable() != replica.durable() {
				t.Fatalf("seed %d step %d: full replay differs from incremental replay", seed, step)
			}
		}
		checkCoverage(t, seed, step, g, img)
		fmt.Fprintf(&tr, "  > %s\n", g.durable())
	}
	return tr.Bytes()
}

// checkCoverage: once the target is current, every partition of every
// subscribed topic has a member, and only members subscribed to its topic.
func checkCoverage(t *testing.T, seed int64, step int, g *Group, img *Image) {
	if g.dead || g.targetEpoch != g.epoch {
		return
	}
	for _, id := range g.memberIDs() {
		m := g.members[id]
		sub := map[TopicID]bool{}
		for _, tp := range img.Resolve(m.topics) {
			sub[tp.ID] = true
		}
		for tp := range g.target[id] {
			if !sub[tp] {
				t.Fatalf("seed %d step %d: member %s's target has topic %x it does not subscribe to", seed, step, id, tp)
			}
		}
	}
	for tp, ps := range g.SubscribedPartitions(img) {
		for _, p := range ps {
			held := false
			for _, a := range g.target {
				if slices.Contains(a[tp], p) {
					held = true
				}
			}
			if !held {
				t.Fatalf("seed %d step %d: partition %x/%d has no member\n%s", seed, step, tp, p, g.dump(img))
			}
		}
	}
}

// TestSimInvariants runs random scenarios for about two seconds.
func TestSimInvariants(t *testing.T) {
	budget := 2 * time.Second
	if testing.Short() {
		budget = 200 * time.Millisecond
	}
	start := time.Now()
	seeds := 0
	for seed := int64(0); time.Since(start) < budget; seed++ {
		sim(t, seed, 400)
		seeds++
	}
	t.Logf("%d seeds", seeds)
}

// TestDeterminism: the same calls give the same responses and records,
// byte for byte.
func TestDeterminism(t *testing.T) {
	for seed := range int64(20) {
		a, b := sim(t, seed, 300), sim(t, seed, 300)
		if !bytes.Equal(a, b) {
			t.Fatalf("seed %d: two runs differ", seed)
		}
	}
}
