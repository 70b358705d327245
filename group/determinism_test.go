package group

import (
	"bytes"
	"fmt"
	"math/rand"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// simClient is a consumer that reacts to the group's replies roughly as a
// real client does, with some misbehaviour mixed in.
type simClient struct {
	name     string
	inst     *string
	version  int16 // JoinGroup version
	st, rt   int32
	protos   []kmsg.JoinGroupRequestProtocol
	memberID string
	gen      int32
	leader   bool
	members  []string // from the leader's JoinGroup response
	joining  bool     // a JoinGroup is outstanding
	syncing  bool     // a SyncGroup is outstanding
	epoch    int      // process incarnation; replies to older ones are dropped
	next     string   // what a well-behaved client does next: "join", "sync" or ""
}

type simToken struct {
	c     *simClient
	epoch int
}

// sim runs one seeded random scenario against a Group and returns the
// transcript: every request, every reply encoded with kmsg, and the group's
// state after each step. It fails t on any broken invariant, any request
// answered twice or never, and any violation of the NextDeadline contract.
func sim(t *testing.T, seed int64, steps int) []byte {
	rng := rand.New(rand.NewSource(seed))
	cfg := DefaultConfig()
	cfg.InitialRebalanceDelayMs = int32(rng.Intn(2) * 3000)
	cfg.MaxRebalanceAttempts = 1 + rng.Intn(4)
	cfg.MaxSize = int32(rng.Intn(2) * 5)
	discipline := rng.Intn(4) // in quarters: how often clients do what they should
	g := NewGroup("g", cfg)
	var tr bytes.Buffer
	now := int64(0)

	protoSets := [][]string{{"range"}, {"range", "rr"}, {"rr", "range"}, {"sticky", "range"}, {"rr"}}
	var clients []*simClient
	for i := range 6 {
		c := &simClient{
			name:    fmt.Sprintf("c%d", i),
			version: []int16{3, 4, 5, 9}[rng.Intn(4)],
			st:      int32(6000 + rng.Intn(4)*2000),
			rt:      int32(5000 + rng.Intn(4)*5000),
		}
		if i%3 == 0 && c.version >= 5 {
			inst := fmt.Sprintf("inst%d", i)
			c.inst = &inst
		}
		c.setProtocols(protoSets[rng.Intn(len(protoSets))])
		clients = append(clients, c)
	}

	outstanding := map[string]simToken{}
	seq := 0
	newToken := func(c *simClient) string {
		seq++
		tok := fmt.Sprintf("%s#%d", c.name, seq)
		outstanding[tok] = simToken{c, c.epoch}
		return tok
	}
	deliver := func(replies []Reply) {
		for _, r := range replies {
			tok := r.Token.(string)
			st, ok := outstanding[tok]
			if !ok {
				t.Fatalf("seed %d: reply to %s, not outstanding", seed, tok)
			}
			delete(outstanding, tok)
			fmt.Fprintf(&tr, "  -> %s %x\n", tok, r.Resp.AppendTo(nil))
			if st.epoch == st.c.epoch { // else: the connection died with the process
				st.c.onReply(r.Resp)
			}
		}
	}
	check := func(what string) {
		if err := g.checkInvariants(); err != nil {
			t.Fatalf("seed %d after %s: %v\n%s", seed, what, err, g.dump())
		}
		nparked := 0
		for _, m := range g.order {
			for _, p := range []*parked{m.join, m.sync} {
				if p != nil {
					nparked++
					if _, ok := outstanding[p.token.(string)]; !ok {
						t.Fatalf("seed %d after %s: parked %v is not outstanding", seed, what, p.token)
					}
				}
			}
		}
		if nparked != len(outstanding) {
			t.Fatalf("seed %d after %s: %d parked, %d outstanding", seed, what, nparked, len(outstanding))
		}
		// NextDeadline contract: nothing happens before it.
		if d := g.NextDeadline(); d >= 0 {
			before := g.dump()
			if out := g.Tick(d - 1); len(out) > 0 || g.dump() != before {
				t.Fatalf("seed %d after %s: Tick(NextDeadline-1=%d) acted:\n%s\n%s", seed, what, d-1, before, g.dump())
			}
		}
		fmt.Fprintf(&tr, "%s\n", g.dump())
	}

	for step := range steps {
		now += int64(rng.Intn(3)) * int64(rng.Intn(2000))
		c := clients[rng.Intn(len(clients))]
		r := rng.Intn(100)
		if rng.Intn(4) < discipline {
			// Clients (mostly) do what the protocol asks of them next.
			for i, off := 0, rng.Intn(len(clients)); i < len(clients); i++ {
				if cc := clients[(i+off)%len(clients)]; cc.next != "" {
					c = cc
					r = map[string]int{"join": 30, "sync": 50}[cc.next]
					break
				}
			}
		}
		var what string
		switch {
		case r < 10:
			// The broker's timer loop: sleep until the next deadline.
			d := g.NextDeadline()
			if d < 0 {
				continue
			}
			now = max(now, d)
			before := g.dump()
			what = fmt.Sprintf("tick %d (deadline %d)", now, d)
			fmt.Fprintf(&tr, "%d %s\n", step, what)
			deliver(g.Tick(now))
			if g.dump() == before {
				t.Fatalf("seed %d: Tick(NextDeadline=%d) did nothing:\n%s", seed, d, before)
			}
		case r < 15:
			now += int64(rng.Intn(20000))
			what = fmt.Sprintf("tick %d", now)
			fmt.Fprintf(&tr, "%d %s\n", step, what)
			deliver(g.Tick(now))
		case r < 45:
			if rng.Intn(8) == 0 {
				// The process restarts: a new connection and no member id
				// (a static member keeps its instance id).
				c.epoch++
				c.memberID, c.gen, c.leader, c.joining, c.syncing = "", -1, false, false, false
			}
			if c.joining && rng.Intn(4) > 0 {
				continue
			}
			req := kmsg.NewPtrJoinGroupRequest()
			req.Version = c.version
			req.Group = "g"
			req.MemberID = c.memberID
			if rng.Intn(20) == 0 {
				req.MemberID = "bogus"
			}
			req.InstanceID = c.inst
			req.SessionTimeoutMillis = c.st
			req.RebalanceTimeoutMillis = c.rt
			req.ProtocolType = "consumer"
			if rng.Intn(10) == 0 {
				c.setProtocols(protoSets[rng.Intn(len(protoSets))])
			}
			req.Protocols = c.protos
			c.joining, c.next = true, ""
			tok := newToken(c)
			what = fmt.Sprintf("join %s m=%q", tok, req.MemberID)
			fmt.Fprintf(&tr, "%d %d %s %x\n", step, now, what, req.AppendTo(nil))
			deliver(g.Join(now, req, JoinMeta{ClientID: c.name, ClientHost: "h"}, tok))
		case r < 65:
			if c.memberID == "" || (c.syncing && rng.Intn(4) > 0) {
				continue
			}
			req := kmsg.NewPtrSyncGroupRequest()
			req.Version = int16(rng.Intn(6))
			req.MemberID = c.memberID
			req.Generation = c.gen
			if req.Version >= 3 {
				req.InstanceID = c.inst
			}
			if c.leader {
				for i, id := range c.members {
					req.GroupAssignment = append(req.GroupAssignment, kmsg.SyncGroupRequestGroupAssignment{
						MemberID: id, MemberAssignment: []byte{byte(i), byte(step)},
					})
				}
			}
			c.syncing, c.next = true, ""
			tok := newToken(c)
			what = fmt.Sprintf("sync %s", tok)
			fmt.Fprintf(&tr, "%d %d %s %x\n", step, now, what, req.AppendTo(nil))
			deliver(g.Sync(now, req, tok))
		case r < 90:
			req := kmsg.NewPtrHeartbeatRequest()
			req.Version = int16(rng.Intn(5))
			req.MemberID = c.memberID
			req.Generation = c.gen
			if rng.Intn(10) == 0 {
				req.Generation += int32(rng.Intn(3)) - 1
			}
			if req.Version >= 3 {
				req.InstanceID = c.inst
			}
			what = "heartbeat " + c.name
			resp := g.Heartbeat(now, req)
			fmt.Fprintf(&tr, "%d %d %s %x -> %x\n", step, now, what, req.AppendTo(nil), resp.AppendTo(nil))
			c.onReply(resp)
		default:
			req := kmsg.NewPtrLeaveGroupRequest()
			req.Version = int16(rng.Intn(6))
			if req.Version < 3 {
				req.MemberID = c.memberID
			} else {
				lm := kmsg.NewLeaveGroupRequestMember()
				lm.MemberID = c.memberID
				lm.InstanceID = c.inst
				if c.inst != nil && rng.Intn(2) == 0 {
					lm.MemberID = "" // admin removal by instance id
				}
				req.Members = append(req.Members, lm)
			}
			what = "leave " + c.name
			replies, resp := g.Leave(now, req)
			fmt.Fprintf(&tr, "%d %d %s %x -> %x\n", step, now, what, req.AppendTo(nil), resp.AppendTo(nil))
			deliver(replies)
			c.memberID, c.gen, c.leader = "", -1, false
		}
		check(what)
	}
	// Drain: with nobody talking, the deadlines empty the group and answer
	// every parked request.
	for i := 0; g.NextDeadline() >= 0; i++ {
		if i > 1000 {
			t.Fatalf("seed %d: deadlines never settle:\n%s", seed, g.dump())
		}
		deliver(g.Tick(g.NextDeadline()))
		check("drain")
	}
	if g.State() != "Empty" || len(outstanding) > 0 {
		t.Fatalf("seed %d: after draining: %s, %d outstanding", seed, g.dump(), len(outstanding))
	}
	return tr.Bytes()
}

func (c *simClient) setProtocols(names []string) {
	c.protos = nil
	for _, n := range names {
		c.protos = append(c.protos, kmsg.JoinGroupRequestProtocol{Name: n, Metadata: []byte(c.name)})
	}
}

func (c *simClient) onReply(resp kmsg.Response) {
	var code int16
	switch r := resp.(type) {
	case *kmsg.JoinGroupResponse:
		c.joining = false
		code = r.ErrorCode
		switch code {
		case 0:
			c.memberID, c.gen, c.leader = r.MemberID, r.Generation, r.LeaderID == r.MemberID
			c.members = c.members[:0]
			for _, m := range r.Members {
				c.members = append(c.members, m.MemberID)
			}
			c.next = "sync"
		case kerr.MemberIDRequired.Code:
			c.memberID = r.MemberID
			c.next = "join"
		}
	case *kmsg.SyncGroupResponse:
		c.syncing = false
		code = r.ErrorCode
		if code == 0 {
			c.next = ""
		}
	case *kmsg.HeartbeatResponse:
		code = r.ErrorCode
	}
	switch code {
	case kerr.UnknownMemberID.Code, kerr.FencedInstanceID.Code:
		c.memberID, c.gen, c.leader = "", -1, false
		c.next = "join"
	case kerr.RebalanceInProgress.Code, kerr.IllegalGeneration.Code:
		c.next = "join"
	}
}

// TestDeterminism replays seeded scenarios and requires byte-identical
// transcripts (requests, encoded replies and states), besides everything
// sim itself checks on each step.
func TestDeterminism(t *testing.T) {
	for seed := int64(1); seed <= 60; seed++ {
		first := sim(t, seed, 400)
		for range 2 {
			if again := sim(t, seed, 400); !bytes.Equal(first, again) {
				i := 0
				for i < len(first) && i < len(again) && first[i] == again[i] {
					i++
				}
				lo := max(0, i-300)
				t.Fatalf("seed %d: transcripts differ at byte %d:\n%s\n---\n%s", seed, i,
					first[lo:min(len(first), i+200)], again[lo:min(len(again), i+200)])
			}
		}
	}
}
