package coordinator

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/fjordlog/fjord/group"
	"github.com/fjordlog/fjord/group/consumer"
	"github.com/fjordlog/fjord/group/share"
	"github.com/fjordlog/fjord/group/topics"
	"github.com/fjordlog/fjord/storage/recordbatch"
)

// The next-generation groups this node coordinates, beside the classic
// ones in the same groupTable: KIP-848 consumer groups (package
// group/consumer) and KIP-932 share groups (group/share). One lock, one
// timer loop, one namespace of group ids. The state machines are pure;
// this file supplies the clock, the topics image, and the durability of
// the records each step emits.
//
// Durability: a heartbeat is answered only once the records its step
// emitted are committed on the offsets partition (durable on every
// in-sync replica), as Kafka's coordinator answers only once its write is
// committed. A member therefore never acts on an epoch or an assignment
// that a coordinator failover could take back. The records are appended
// under the table's lock, so the log holds them in the order the steps
// ran; the in-memory group may run ahead of what is committed only while
// this node leads the partition (a later commit carries the earlier
// records with it, and losing the leadership unloads the group).

// Group types (KIP-848), as ListGroups v5 and the describe APIs name
// them.
const (
	ClassicGroupType  = "classic"
	ConsumerGroupType = "consumer"
	ShareGroupType    = "share"
)

// ErrOtherGroupType: a request of one group protocol for a group id that
// a group of another type holds: a share group, or a classic group with
// members that a consumer-group request may not convert (not a join, or
// the migration policy refuses; an empty group converts, and a join
// upgrades a classic group of consumers online, KIP-848).
var ErrOtherGroupType = errors.New("coordinator: the group id is held by a group of another type")

// nextGen is what the table needs of a next-generation group of either
// kind, its records as the offsets partition's KVs.
type nextGen interface {
	kind() string
	Timeouts() (sessionMs, heartbeatMs int32)
	SetTimeouts(sessionMs, heartbeatMs int32)
	// metadataChanged brings the group to img; may is the DESCRIBE of
	// the member whose heartbeat brings it, nil when none does (see
	// consumer.Group.MetadataChanged).
	metadataChanged(now int64, img *topics.Image, may func(string) bool) []recordbatch.KV
	tick(now int64, img *topics.Image) []recordbatch.KV
	remove() ([]recordbatch.KV, error)
	NextDeadline() int64
	State() string
	Epoch() int32
	NumMembers() int
}

type consumerGen struct{ *consumer.Group }

func (consumerGen) kind() string { return ConsumerGroupType }
func (c consumerGen) metadataChanged(now int64, img *topics.Image, may func(string) bool) []recordbatch.KV {
	return kvs(c.MetadataChanged(now, img, may))
}
func (c consumerGen) tick(now int64, img *topics.Image) []recordbatch.KV {
	return kvs(c.Tick(now, img))
}
func (c consumerGen) remove() ([]recordbatch.KV, error) { r, err := c.Delete(); return kvs(r), err }

type shareGen struct{ *share.Group }

func (shareGen) kind() string { return ShareGroupType }
func (s shareGen) metadataChanged(now int64, img *topics.Image, _ func(string) bool) []recordbatch.KV {
	return kvs(s.MetadataChanged(now, img))
}
func (s shareGen) tick(now int64, img *topics.Image) []recordbatch.KV { return kvs(s.Tick(now, img)) }
func (s shareGen) remove() ([]recordbatch.KV, error)                  { r, err := s.Delete(); return kvs(r), err }

// record is the shape both packages' Record types share.
type record interface {
	~struct{ Key, Value []byte }
}

func kvs[R record](rs []R) []recordbatch.KV {
	out := make([]recordbatch.KV, len(rs))
	for i, r := range rs {
		s := struct{ Key, Value []byte }(r)
		out[i] = recordbatch.KV{Key: s.Key, Value: s.Value}
	}
	return out
}

// ngGroup is one next-generation group with the topics image it last saw.
type ngGroup struct {
	g nextGen
	// img is the image a heartbeat last brought the group to. A change
	// seen by no heartbeat (a timeout, a describe) is applied without
	// moving img, so that the next heartbeat applies it again with its
	// member's visibility: a consumer group's regular expressions are
	// resolved only for a member (consumer.Visibility).
	img *topics.Image
}

// withNextGen runs step on the next-generation group id of kind (made
// by newG when create is set and the id is free, or names an empty
// classic group that kind may convert) under the table's lock, after
// telling the group of any change to the topics image. A consumer-group
// join (create) to a classic group with members upgrades it first
// (upgradeLocked). The records the step emits are appended to the group's
// offsets partition; wait, when not nil, blocks until they are committed
// and must be called without holding anything. exists is false when
// there is no such group (and step did not run). may is the DESCRIBE of
// the heartbeating member's principal (func(string) bool { return true }
// without an authorizer), nil when the step is not a member's heartbeat.
func (t *groupTable) withNextGen(id, kind string, create bool, may func(string) bool, newG func() nextGen,
	step func(g nextGen, img *topics.Image, now int64) []recordbatch.KV) (exists bool, wait func() error, err error) {
	img := t.image()
	now := time.Now().UnixMilli()
	var replies []group.Reply
	defer func() { deliver(replies) }() // after the unlock
	t.mu.Lock()
	defer t.poke()
	defer t.mu.Unlock()
	ng := t.mu.nextgen[id]
	if ng != nil && ng.g.kind() != kind {
		return false, nil, fmt.Errorf("group %s is a %s group: %w", id, ng.g.kind(), ErrOtherGroupType)
	}
	created := false
	if ng == nil {
		if cl := t.mu.groups[id]; cl != nil {
			if kind != ConsumerGroupType || cl.NumMembers() > 0 && !create {
				return false, nil, fmt.Errorf("group %s is a classic group: %w", id, ErrOtherGroupType)
			}
			if !create {
				return false, nil, nil
			}
			if cl.NumMembers() > 0 {
				return t.upgradeLocked(id, cl, img, now, step, &replies)
			}
			// An empty classic group becomes a consumer group (Kafka's
			// conversion of an empty group): its stored form goes.
			delete(t.mu.groups, id)
			t.offsets.storeGroup(id, nil)
		}
		if !create {
			return false, nil, nil
		}
		ng = &ngGroup{g: newG()}
		t.mu.nextgen[id] = ng
		created = true
	}
	wait, err = t.stepLocked(id, ng, img, now, created, may, step, &replies)
	return true, wait, err
}

// stepLocked runs step on next-generation group ng (id) and persists its
// records: the group config's timeouts first, then any change of the
// topics image (seen for the member whose DESCRIBE may is, nil for none:
// see ngGroup.img), then the step. A group that ends Dead (or was created
// for a join that failed) is dropped; one that became a classic group
// (an online downgrade) is replaced by it, its rebalance's replies added
// to replies. REQUIRES: t.mu held.
func (t *groupTable) stepLocked(id string, ng *ngGroup, img *topics.Image, now int64, created bool, may func(string) bool,
	step func(g nextGen, img *topics.Image, now int64) []recordbatch.KV, replies *[]group.Reply) (func() error, error) {
	t.applyTimeoutsLocked(id, ng)
	var recs []recordbatch.KV
	epoch, members := ng.g.Epoch(), ng.g.NumMembers()
	if ng.img != img {
		recs = ng.g.metadataChanged(now, img, may)
		if may != nil {
			ng.img = img
		}
		t.logEpochMove(id, ng.g, epoch, members, "subscribed topics changed")
		epoch = ng.g.Epoch()
	}
	recs = append(recs, step(ng.g, img, now)...)
	t.logEpochMove(id, ng.g, epoch, members, "heartbeat")
	if ng.g.State() == "Dead" || created && ng.g.Epoch() == 0 {
		// Deleted, downgraded, or created for a join that was refused.
		delete(t.mu.nextgen, id)
		*replies = append(*replies, t.maybeDowngradedLocked(id, ng, now)...)
	}
	return t.persistLocked(id, recs)
}

// applyTimeoutsLocked gives ng its group config's session timeout and
// heartbeat interval, read at each step so that a change applies from
// the members' next heartbeats. REQUIRES: t.mu held.
func (t *groupTable) applyTimeoutsLocked(id string, ng *ngGroup) {
	if t.timeouts == nil {
		return
	}
	if s, hb := t.timeouts(ng.g.kind(), id); s > 0 {
		if cs, chb := ng.g.Timeouts(); cs != s || chb != hb {
			ng.g.SetTimeouts(s, hb)
		}
	}
}

// upgradeLocked converts classic group cl, which has members, into a
// consumer group and runs the joining step on it (KIP-848's online
// upgrade, consumer.Upgrade). If the policy or the group refuses, err
// says why; if the join itself fails (its step emits nothing: a
// successful join always writes its member), the classic group stays and
// the step's error response stands. Otherwise the classic group's parked
// requests are answered REBALANCE_IN_PROGRESS (into replies), the
// consumer group takes the id, and the conversion's records are appended
// before the join's. REQUIRES: t.mu held.
func (t *groupTable) upgradeLocked(id string, cl *group.Group, img *topics.Image, now int64,
	step func(g nextGen, img *topics.Image, now int64) []recordbatch.KV, replies *[]group.Reply) (bool, func() error, error) {
	cg, conv, err := consumer.Upgrade(id, t.ccfg, now, img, cl.Migration())
	if err != nil {
		t.log.Info().Str("group", id).Err(err).Msg("classic group not upgraded to a consumer group")
		return false, nil, err
	}
	ng := &ngGroup{g: consumerGen{cg}, img: img}
	t.applyTimeoutsLocked(id, ng)
	recs := step(ng.g, img, now)
	if len(recs) == 0 {
		return true, nil, nil
	}
	*replies = append(*replies, cl.Abandon()...)
	delete(t.mu.groups, id)
	t.mu.nextgen[id] = ng
	t.log.Info().Str("group", id).Int32("generation", cl.Generation()).Int("members", cl.NumMembers()).
		Int32("epoch", cg.Epoch()).Msg("classic group upgraded to a consumer group")
	wait, err := t.persistLocked(id, append(kvs(conv), recs...))
	return true, wait, err
}

// maybeDowngradedLocked installs the classic group a consumer group that
// just ended became (KIP-848's online downgrade): restored from the
// GroupMetadataValue the conversion wrote, then rebalanced unless a
// static member's replacement made it, as Kafka does. It returns the rebalance's replies. REQUIRES: t.mu held.
func (t *groupTable) maybeDowngradedLocked(id string, ng *ngGroup, now int64) []group.Reply {
	cg, ok := ng.g.(consumerGen)
	if !ok {
		return nil
	}
	v, rebalance := cg.Downgraded()
	if v == nil {
		return nil
	}
	cl := group.Restore(id, t.cfg, v, now)
	t.mu.groups[id] = cl
	t.log.Info().Str("group", id).Int32("generation", cl.Generation()).Int("members", cl.NumMembers()).
		Bool("rebalance", rebalance).Msg("consumer group downgraded to a classic group")
	if !rebalance {
		return nil
	}
	return cl.Rebalance(now)
}

// persistLocked appends a next-generation group's records to its offsets
// partition. REQUIRES: t.mu held (so the log keeps the steps' order).
func (t *groupTable) persistLocked(id string, recs []recordbatch.KV) (func() error, error) {
	if len(recs) == 0 {
		return nil, nil
	}
	wait, err := t.offsets.appendRecords(id, recs)
	if err != nil {
		// The step stays applied in memory. If the leadership went, the
		// group is unloaded; if the disk failed, the partition is handed
		// on. Either way the next coordinator loads what was committed.
		t.log.Warn().Err(err).Str("group", id).Msg("storing group records")
		return nil, err
	}
	return wait, nil
}

// tickNextGenLocked applies the next-generation groups' deadlines at now
// and stores what changed. It returns the replies of the classic groups
// that downgrades made. REQUIRES: t.mu held.
func (t *groupTable) tickNextGenLocked(now int64) (replies []group.Reply) {
	for id, ng := range t.mu.nextgen {
		if d := ng.g.NextDeadline(); d < 0 || d > now {
			continue
		}
		var recs []recordbatch.KV
		img := t.image()
		if ng.img != img {
			recs = ng.g.metadataChanged(now, img, nil)
		}
		epoch, members := ng.g.Epoch(), ng.g.NumMembers()
		recs = append(recs, ng.g.tick(now, img)...)
		t.logEpochMove(id, ng.g, epoch, members, "session or rebalance timeout")
		if ng.g.State() == "Dead" {
			delete(t.mu.nextgen, id)
			replies = append(replies, t.maybeDowngradedLocked(id, ng, now)...)
		}
		// Nobody waits on a timeout's records; a failure is logged.
		_, _ = t.persistLocked(id, recs)
	}
	return replies
}

// logEpochMove logs a group epoch that moved (a member joined, left,
// was fenced, or the subscribed topics changed): once per change, not
// once per heartbeat, so an operator can tell a rebalance's cause.
func (t *groupTable) logEpochMove(id string, g nextGen, epoch int32, members int, cause string) {
	if g.Epoch() == epoch {
		return
	}
	t.log.Info().Str("group", id).Str("type", g.kind()).Str("cause", cause).
		Int32("epoch_was", epoch).Int32("epoch", g.Epoch()).
		Int("members_were", members).Int("members", g.NumMembers()).Msg("group epoch moved")
}

// nextNextGenDeadlineLocked is the earliest deadline of any
// next-generation group, -1 for none. REQUIRES: t.mu held.
func (t *groupTable) nextNextGenDeadlineLocked() int64 {
	next := int64(-1)
	for _, ng := range t.mu.nextgen {
		if d := ng.g.NextDeadline(); d >= 0 && (next < 0 || d < next) {
			next = d
		}
	}
	return next
}

// nextGenKey names a next-generation group's records while a partition
// loads.
type nextGenKey struct{ kind, id string }

// nextGenOfKey is the kind and group of an offsets-topic key that holds
// a next-generation group's record.
func nextGenOfKey(key []byte) (nextGenKey, bool) {
	if id, ok := consumer.GroupOfKey(key); ok {
		return nextGenKey{ConsumerGroupType, id}, true
	}
	if id, ok := share.GroupOfKey(key); ok {
		return nextGenKey{ShareGroupType, id}, true
	}
	return nextGenKey{}, false
}

// restoreNextGen installs a next-generation group read back from the
// offsets topic: recs are its records in log order.
func (t *groupTable) restoreNextGen(k nextGenKey, recs []recordbatch.KV) {
	var g nextGen
	var replay func(key, value []byte) error
	var loaded func(now int64)
	switch k.kind {
	case ConsumerGroupType:
		cg := consumer.New(k.id, t.ccfg)
		g, replay, loaded = consumerGen{cg}, cg.Replay, cg.Loaded
	default:
		sg := share.New(k.id, t.scfg)
		g, replay, loaded = shareGen{sg}, sg.Replay, sg.Loaded
	}
	for _, r := range recs {
		if err := replay(r.Key, r.Value); err != nil {
			t.log.Warn().Err(err).Str("group", k.id).Str("type", k.kind).Msg("skipping an unreadable group record")
		}
	}
	loaded(time.Now().UnixMilli())
	if g.State() == "Dead" {
		return // deleted: its records are tombstones
	}
	t.mu.Lock()
	if other := t.mu.nextgen[k.id]; other != nil {
		// Two kinds under one id in one log: the later one was created
		// after the earlier was deleted, so it is the live one only if
		// the earlier is Dead, which it is not. Keep the first restored
		// and say so; members of the other rejoin.
		t.mu.Unlock()
		t.log.Warn().Str("group", k.id).Str("type", k.kind).Str("kept", other.g.kind()).Msg("a group id with records of two group types")
		return
	}
	// The image the records were written under is unknown: the first
	// step compares the group with the image of now.
	t.mu.nextgen[k.id] = &ngGroup{g: g}
	t.mu.Unlock()
	t.log.Info().Str("group", k.id).Str("type", k.kind).Str("state", g.State()).Int32("epoch", g.Epoch()).
		Int("members", g.NumMembers()).Msg("restored group")
	t.poke()
}

// appendRecords appends a group's records to its offsets partition as
// its leader and returns a wait that blocks until they are committed
// like an acks=all produce (or the partition's error).
func (o *offsetStore) appendRecords(id string, kvs []recordbatch.KV) (func() error, error) {
	pi := o.partitionFor(id)
	p, err := o.leader(pi)
	if err != nil {
		return nil, err
	}
	now := time.Now().UnixMilli()
	batch := recordbatch.Build(kvs, now)
	info, err := recordbatch.Validate(batch, 0)
	if err != nil {
		return nil, fmt.Errorf("group %s: records: %w", id, err)
	}
	o.mu.Lock()
	res, v, err := p.AppendAsLeader(batch, info, now)
	o.mu.Unlock()
	if err != nil {
		return nil, fmt.Errorf("group %s: append: %w", id, err)
	}
	return func() error {
		if err := p.Flush(); err != nil {
			return err
		}
		expire := time.NewTimer(commitTimeout)
		defer expire.Stop()
		return p.WaitCommitted(context.Background(), res.LastOffset+1, v.LeaderEpoch, expire.C)
	}, nil
}

// takeNextGenRecords removes and returns the next-generation groups'
// records of offsets partition pi that replay found, per group in log
// order.
func (o *offsetStore) takeNextGenRecords(pi int32) map[nextGenKey][]recordbatch.KV {
	o.mu.Lock()
	defer o.mu.Unlock()
	out := map[nextGenKey][]recordbatch.KV{}
	for k, recs := range o.mu.nextGenRecs {
		if o.partitionFor(k.id) == pi {
			out[k] = recs
			delete(o.mu.nextGenRecs, k)
		}
	}
	return out
}

// nextGenMembersLocked is the member count of next-generation group id
// (0 if none). REQUIRES: t.mu held.
func (t *groupTable) nextGenMembersLocked(id string) int {
	if ng := t.mu.nextgen[id]; ng != nil {
		return ng.g.NumMembers()
	}
	return 0
}

// eachNextGen calls fn on every next-generation group under the table's
// lock; fn must not keep g.
func (t *groupTable) eachNextGen(fn func(id string, g nextGen)) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for id, ng := range t.mu.nextgen {
		fn(id, ng.g)
	}
}

// GroupType is the type of the group id names here: ClassicGroupType,
// ConsumerGroupType, ShareGroupType, or "" for none (a classic group
// with committed offsets only counts as none: it has no state here).
func (c *Coordinator) GroupType(id string) string {
	t := c.groups
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.mu.groups[id] != nil {
		return ClassicGroupType
	}
	if ng := t.mu.nextgen[id]; ng != nil {
		return ng.g.kind()
	}
	return ""
}

// DeleteNextGen deletes next-generation group id, of either kind, if it
// has no members (group.ErrNonEmptyGroup otherwise); wait, when not nil,
// blocks until its tombstones are committed. existed is false when id is
// no such group.
func (c *Coordinator) DeleteNextGen(id string) (existed bool, wait func() error, err error) {
	t := c.groups
	t.mu.Lock()
	defer t.mu.Unlock()
	ng := t.mu.nextgen[id]
	if ng == nil {
		return false, nil, nil
	}
	recs, err := ng.g.remove()
	if err != nil {
		return true, nil, err
	}
	delete(t.mu.nextgen, id)
	wait, err = t.persistLocked(id, recs)
	return true, wait, err
}
