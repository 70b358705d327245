package coordinator

import (
	"fmt"
	"sync"
	"time"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordlog/fjord/group"
	"github.com/fjordlog/fjord/group/consumer"
	"github.com/fjordlog/fjord/group/share"
	"github.com/fjordlog/fjord/storage/recordbatch"
)

// groupTable runs the consumer groups this node coordinates. Membership is
// the deterministic state machine of package group; this type supplies the
// clock, routes replies to connections, and keeps the groups map.
//
// Concurrency: mu guards groups and every call into a group. A call that
// settles a group appends its metadata record under mu (offsets.storeGroup:
// a pwrite to the offsets partition, never an fsync: docs/lock-order.md);
// nothing waits on the network under it. Replies are delivered after mu is
// released. run is the one goroutine that applies timeouts, sleeping until
// the earliest deadline.
type groupTable struct {
	cfg   group.Config
	ccfg  consumer.Config
	scfg  share.Config
	image func() *consumer.Image // the topics KIP-848 groups see now
	// timeouts, if set, is a next-generation group's session timeout and
	// heartbeat interval (its group config, else the broker's); 0: keep.
	timeouts func(kind, id string) (sessionMs, heartbeatMs int32)
	log      zerolog.Logger
	offsets  *offsetStore  // where a group that settles is stored
	wake     chan struct{} // cap 1: a deadline may have moved earlier
	mu       struct {
		sync.Mutex
		groups map[string]*group.Group
		// nextgen are the KIP-848 consumer groups and KIP-932 share
		// groups (nextgen.go). Invariant: no id is in both maps.
		nextgen map[string]*ngGroup
	}
}

func newGroupTable(cfg group.Config, ccfg consumer.Config, scfg share.Config, image func() *consumer.Image, offsets *offsetStore, log zerolog.Logger) *groupTable {
	t := &groupTable{cfg: cfg, ccfg: ccfg, scfg: scfg, image: image, log: log, offsets: offsets, wake: make(chan struct{}, 1)}
	t.mu.groups = map[string]*group.Group{}
	t.mu.nextgen = map[string]*ngGroup{}
	return t
}

// Respond is the token to hand a group with a request whose answer it may
// hold back (JoinGroup, SyncGroup): the coordinator calls it with the
// response, after releasing its lock, from whichever request or timeout
// completes the phase.
type Respond func(kmsg.Response)

func deliver(replies []group.Reply) {
	for _, r := range replies {
		r.Token.(Respond)(r.Resp)
	}
}

// With runs fn on group id (created first when create is set and it does
// not exist) under the coordinator's lock, then delivers the replies fn
// returns (their tokens must be Respond values) and lets the timer loop see
// the group's new deadlines. It reports whether the group existed or was
// created; fn is not called when it did not. fn must not keep g, and must
// not call the Coordinator.
func (c *Coordinator) With(id string, create bool, fn func(g *group.Group) []group.Reply) bool {
	return c.groups.with(id, create, fn)
}

// ErrNoGroup: a commit with a generation to a group that does not exist
// (no members, no committed offsets). It is a group.ErrUnknownMember, the
// answer before OffsetCommit v9; from v9 Kafka answers GROUP_ID_NOT_FOUND.
var ErrNoGroup = fmt.Errorf("coordinator: no such group: %w", group.ErrUnknownMember)

// ValidateCommit checks an OffsetCommit's member against the group: nil
// when it may commit (a simple commit, generation -1 with no member id, to
// a group without members included), else an error of package group
// (group.ErrorCode maps it), ErrNoGroup among them.
//
// A consumer group (KIP-848) checks the member epoch instead (generation
// carries it); TxnOffsetCommit's checks are those of OffsetCommit v9+, as
// in Kafka, where a transactional commit skips only the version check.
//
// Transactional commits keep the exact-epoch rule (KIP-1251's relaxed one
// is OffsetCommit's here, ValidateCommitAt).
func (c *Coordinator) ValidateCommit(id, member string, instance *string, generation int32) error {
	if ok, err := c.groups.validateConsumerCommitExact(id, member, generation); ok {
		return err
	}
	_, err := c.ValidateCommitAt(id, member, instance, generation, 9)
	return err
}

// ValidateCommitAt is ValidateCommit for an OffsetCommit of version v,
// with KIP-1251's rule for a consumer group: the check it returns must
// pass every partition the commit writes (the zero check passes all).
func (c *Coordinator) ValidateCommitAt(id, member string, instance *string, generation int32, v int16) (consumer.CommitCheck, error) {
	if ok, check, err := c.groups.validateConsumerCommit(id, member, generation, v); ok {
		return check, err
	}
	var err error
	exists := c.groups.with(id, false, func(g *group.Group) []group.Reply {
		err = g.ValidateOffsetCommit(member, instance, generation)
		return nil
	})
	if !exists && generation >= 0 {
		// A group with committed offsets only is, to Kafka, an Empty
		// classic group that exists: its member is unknown.
		if len(c.offsets.groupOffsets(id)) > 0 {
			return consumer.CommitCheck{}, group.ErrUnknownMember
		}
		return consumer.CommitCheck{}, ErrNoGroup
	}
	return consumer.CommitCheck{}, err
}

func (t *groupTable) with(id string, create bool, fn func(g *group.Group) []group.Reply) bool {
	t.mu.Lock()
	exists, replies := t.withLocked(id, create, fn)
	t.mu.Unlock()
	deliver(replies)
	t.poke()
	return exists
}

// withLocked is with under the held lock: it returns the replies to
// deliver once the lock is released. REQUIRES: t.mu held.
func (t *groupTable) withLocked(id string, create bool, fn func(g *group.Group) []group.Reply) (bool, []group.Reply) {
	g := t.mu.groups[id]
	if ng := t.mu.nextgen[id]; g == nil && ng != nil {
		// A next-generation group holds the id: a classic member may take
		// over an empty consumer group only (see ErrOtherGroupType).
		if !create || ng.g.NumMembers() > 0 || ng.g.kind() != ConsumerGroupType {
			return false, nil
		}
		recs, err := ng.g.remove()
		if err == nil {
			delete(t.mu.nextgen, id)
			_, _ = t.persistLocked(id, recs)
		}
	}
	if g == nil && create && t.mu.nextgen[id] == nil {
		g = group.NewGroup(id, t.cfg)
		t.mu.groups[id] = g
	}
	var replies []group.Reply
	if g != nil {
		st, gen := g.State(), g.Generation()
		replies = fn(g)
		t.afterChangeLocked(id, g, st, gen)
	}
	return g != nil, replies
}

// WithClassic runs a classic-protocol request (JoinGroup, SyncGroup,
// Heartbeat, LeaveGroup) for group id under the coordinator's lock: on
// the classic group as With does (fn), or, when a KIP-848 consumer group
// with members holds the id, on that group's classic members (cfn, the
// consumer package's Classic* methods, KIP-848's mixed membership). Its
// records are appended to the offsets partition; wait, when not nil,
// blocks until they are committed (answer only then, as Kafka does) and
// must be called without holding anything. exists is false when there is
// no such group (fn and cfn did not run).
func (c *Coordinator) WithClassic(id string, create bool, fn func(g *group.Group) []group.Reply,
	cfn func(g *consumer.Group, img *consumer.Image, now int64) []consumer.Record) (exists bool, wait func() error, err error) {
	t := c.groups
	img := t.image()
	now := time.Now().UnixMilli()
	t.mu.Lock()
	var replies []group.Reply
	if ng := t.mu.nextgen[id]; ng != nil && t.mu.groups[id] == nil && ng.g.kind() == ConsumerGroupType && ng.g.NumMembers() > 0 {
		exists = true
		// A classic member subscribes by name: nothing is resolved for it.
		wait, err = t.stepLocked(id, ng, img, now, false, nil, func(g nextGen, img *consumer.Image, now int64) []recordbatch.KV {
			return kvs(cfn(g.(consumerGen).Group, img, now))
		}, &replies)
	} else {
		exists, replies = t.withLocked(id, create, fn)
	}
	t.mu.Unlock()
	deliver(replies)
	t.poke()
	return exists, wait, err
}

// poke tells run that a deadline may have moved earlier.
func (t *groupTable) poke() {
	select {
	case t.wake <- struct{}{}:
	default:
	}
}

// run applies the groups' timeouts until stop closes.
func (t *groupTable) run(stop <-chan struct{}) {
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		t.mu.Lock()
		next := t.nextNextGenDeadlineLocked()
		for _, g := range t.mu.groups {
			if d := g.NextDeadline(); d >= 0 && (next < 0 || d < next) {
				next = d
			}
		}
		t.mu.Unlock()
		wait := time.Hour
		if next >= 0 {
			wait = max(time.Until(time.UnixMilli(next)), time.Millisecond)
		}
		timer.Reset(wait)
		select {
		case <-stop:
			return
		case <-t.wake:
			if !timer.Stop() {
				<-timer.C
			}
			continue
		case <-timer.C:
		}
		now := time.Now().UnixMilli()
		var replies []group.Reply
		t.mu.Lock()
		for id, g := range t.mu.groups {
			if d := g.NextDeadline(); d >= 0 && d <= now {
				st, gen := g.State(), g.Generation()
				replies = append(replies, g.Tick(now)...)
				t.afterChangeLocked(id, g, st, gen)
			}
		}
		replies = append(replies, t.tickNextGenLocked(now)...)
		t.mu.Unlock()
		deliver(replies)
	}
}

// afterChangeLocked stores a group whose state or generation changed once it
// has settled (Stable or Empty), forgets a Dead one and stores its
// tombstone. REQUIRES: t.mu held.
func (t *groupTable) afterChangeLocked(id string, g *group.Group, state string, gen int32) {
	now := g.State()
	if now == state && g.Generation() == gen {
		return
	}
	switch now {
	case "Dead":
		delete(t.mu.groups, id)
		t.offsets.storeGroup(id, nil)
	case "Stable", "Empty":
		t.offsets.storeGroup(id, g.Snapshot(time.Now().UnixMilli()))
	}
}

// restore installs a group read back from the offsets topic.
func (t *groupTable) restore(id string, v *kmsg.GroupMetadataValue) {
	g := group.Restore(id, t.cfg, v, time.Now().UnixMilli())
	t.mu.Lock()
	t.mu.groups[id] = g
	t.mu.Unlock()
	t.log.Info().Str("group", id).Str("state", g.State()).Int32("generation", g.Generation()).
		Int("members", g.NumMembers()).Msg("restored group")
	t.poke()
}

// unload forgets the groups for which drop is true: this node no longer
// coordinates them. Their members rediscover the coordinator.
func (t *groupTable) unload(drop func(id string) bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for id := range t.mu.groups {
		if drop(id) {
			delete(t.mu.groups, id)
		}
	}
	for id := range t.mu.nextgen {
		if drop(id) {
			delete(t.mu.nextgen, id)
		}
	}
}

// each calls fn on every group under mu; fn must not keep g.
func (t *groupTable) each(fn func(id string, g *group.Group)) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for id, g := range t.mu.groups {
		fn(id, g)
	}
}

// members is the group's member count, of either protocol (0 for an
// unknown group).
func (t *groupTable) members(id string) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	if g := t.mu.groups[id]; g != nil {
		return g.NumMembers()
	}
	return t.nextGenMembersLocked(id)
}
