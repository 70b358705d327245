package broker

import (
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/fjordlog/fjord/group"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// coordinator runs the consumer groups this node coordinates. Membership is
// the deterministic state machine of package group; this type supplies the
// clock, routes replies to connections, and keeps the groups map.
//
// Concurrency: mu guards groups and every call into a group. A call that
// settles a group appends its metadata record under mu (a pwrite to the
// offsets partition, never an fsync: docs/lock-order.md); nothing waits on
// the network under it. Replies are delivered after mu is released. run is the one
// goroutine that applies timeouts, sleeping until the earliest deadline.
type coordinator struct {
	b    *Broker
	cfg  group.Config
	wake chan struct{} // cap 1: a deadline may have moved earlier
	mu   struct {
		sync.Mutex
		groups map[string]*group.Group
	}
}

func newCoordinator(b *Broker) *coordinator {
	c := &coordinator{b: b, wake: make(chan struct{}, 1), cfg: group.Config{
		MinSessionTimeoutMs:     b.cfg.GroupMinSessionMs,
		MaxSessionTimeoutMs:     b.cfg.GroupMaxSessionMs,
		InitialRebalanceDelayMs: int32(b.cfg.GroupInitialRebalanceMs),
		MaxRebalanceAttempts:    10,
		// Member ids must not repeat across restarts, or a client from
		// before the restart could pass for a new member.
		MemberIDNonce: strconv.FormatInt(time.Now().UnixNano(), 36),
	}}
	c.mu.groups = map[string]*group.Group{}
	return c
}

// replyFn is the token handed to the state machine with each request.
type replyFn func(kmsg.Response)

func deliver(replies []group.Reply) {
	for _, r := range replies {
		r.Token.(replyFn)(r.Resp)
	}
}

// with runs fn on the named group (created when create is set) under mu,
// then delivers the replies it produced and wakes the timer loop.
func (c *coordinator) with(id string, create bool, fn func(g *group.Group) []group.Reply) bool {
	c.mu.Lock()
	g := c.mu.groups[id]
	if g == nil && create {
		g = group.NewGroup(id, c.cfg)
		c.mu.groups[id] = g
	}
	var replies []group.Reply
	if g != nil {
		st, gen := g.State(), g.Generation()
		replies = fn(g)
		c.afterChangeLocked(id, g, st, gen)
	}
	c.mu.Unlock()
	deliver(replies)
	select {
	case c.wake <- struct{}{}:
	default:
	}
	return g != nil
}

// run applies the groups' timeouts until the broker stops.
func (c *coordinator) run() {
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		c.mu.Lock()
		next := int64(-1)
		for _, g := range c.mu.groups {
			if d := g.NextDeadline(); d >= 0 && (next < 0 || d < next) {
				next = d
			}
		}
		c.mu.Unlock()
		wait := time.Hour
		if next >= 0 {
			wait = max(time.Until(time.UnixMilli(next)), time.Millisecond)
		}
		timer.Reset(wait)
		select {
		case <-c.b.stop:
			return
		case <-c.wake:
			if !timer.Stop() {
				<-timer.C
			}
			continue
		case <-timer.C:
		}
		now := time.Now().UnixMilli()
		var replies []group.Reply
		c.mu.Lock()
		for id, g := range c.mu.groups {
			if d := g.NextDeadline(); d >= 0 && d <= now {
				st, gen := g.State(), g.Generation()
				replies = append(replies, g.Tick(now)...)
				c.afterChangeLocked(id, g, st, gen)
			}
		}
		c.mu.Unlock()
		deliver(replies)
	}
}

// afterChangeLocked stores a group whose state or generation changed once it
// has settled (Stable or Empty), forgets a Dead one and stores its
// tombstone. REQUIRES: c.mu held.
func (c *coordinator) afterChangeLocked(id string, g *group.Group, state string, gen int32) {
	now := g.State()
	if now == state && g.Generation() == gen {
		return
	}
	switch now {
	case "Dead":
		delete(c.mu.groups, id)
		c.b.offsets.storeGroup(id, nil)
	case "Stable", "Empty":
		c.b.offsets.storeGroup(id, g.Snapshot(time.Now().UnixMilli()))
	}
}

// restore installs a group read back from the offsets topic.
func (c *coordinator) restore(id string, v *kmsg.GroupMetadataValue) {
	g := group.Restore(id, c.cfg, v, time.Now().UnixMilli())
	c.mu.Lock()
	c.mu.groups[id] = g
	c.mu.Unlock()
	c.b.log.Info().Str("group", id).Str("state", g.State()).Int32("generation", g.Generation()).
		Int("members", g.NumMembers()).Msg("restored group")
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// checkCommitter validates an OffsetCommit's member against the group.
func (b *Broker) checkCommitter(id, member string, instance *string, generation int32) error {
	var err error
	exists := b.groups.with(id, false, func(g *group.Group) []group.Reply {
		err = g.ValidateOffsetCommit(member, instance, generation)
		return nil
	})
	if !exists && generation >= 0 {
		return group.ErrUnknownMember
	}
	return err
}

func groupErrorCode(err error) int16 { return group.ErrorCode(err) }

// groupSummary is what ListGroups and DescribeGroups report of a group.
type groupSummary struct {
	id, state, protocolType string
}

// listGroups returns every group known here: with members, or with
// committed offsets only (Empty).
func (c *coordinator) listGroups() []groupSummary {
	seen := map[string]groupSummary{}
	for _, id := range c.b.offsets.groupsWithOffsets() {
		seen[id] = groupSummary{id, "Empty", ""}
	}
	c.mu.Lock()
	for id, g := range c.mu.groups {
		seen[id] = groupSummary{id, g.State(), g.ProtocolType()}
	}
	c.mu.Unlock()
	out := make([]groupSummary, 0, len(seen))
	for _, s := range seen {
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].id < out[j].id })
	return out
}

// loadingCode is NOT_COORDINATOR when another node coordinates the group,
// COORDINATOR_LOAD_IN_PROGRESS while its offsets partition loads here, else
// 0.
func (b *Broker) loadingCode(id string) int16 {
	return errorCode(b.offsets.status(id))
}

// unload forgets the groups for which drop is true: this node no longer
// coordinates them. Their members rediscover the coordinator.
func (c *coordinator) unload(drop func(id string) bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for id := range c.mu.groups {
		if drop(id) {
			delete(c.mu.groups, id)
		}
	}
}

// members is the group's member count (0 for an unknown group).
func (c *coordinator) members(id string) int {
	n := 0
	c.with(id, false, func(g *group.Group) []group.Reply {
		n = g.NumMembers()
		return nil
	})
	return n
}
