package coordinator

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/fjordlog/fjord/group/consumer"
	"github.com/fjordlog/fjord/storage/recordbatch"
)

// The consumer groups (KIP-848) this node coordinates, beside the classic
// ones in the same groupTable: one lock, one timer loop, one namespace of
// group ids. Membership is package group/consumer's state machine; this
// file supplies the clock, the topics image, and the durability of the
// records each step emits.
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

// ErrNotConsumerGroup: a ConsumerGroupHeartbeat for a classic group with
// members, or a JoinGroup for a consumer group with members. Kafka 4.x
// migrates such groups online (KIP-848's upgrade and downgrade); Fjord
// does not yet, so the other protocol is refused until the group is
// empty.
var ErrNotConsumerGroup = errors.New("coordinator: the group runs the other group protocol and has members")

// consumerGroup is one KIP-848 group with the topics image it last saw.
type consumerGroup struct {
	g   *consumer.Group
	img *consumer.Image // the image MetadataChanged last saw
}

// Consumer runs fn on consumer group id (created first when create is set
// and the id is free or names an empty classic group, which is
// converted) under the table's lock, after telling the group of any
// change to the topics image. The records the step emits are appended to
// the group's offsets partition; wait, when not nil, blocks until they
// are committed and must be called without holding anything. exists is
// false when there is no such consumer group (and fn did not run).
func (c *Coordinator) Consumer(id string, create bool, fn func(g *consumer.Group, img *consumer.Image, now int64) []consumer.Record) (exists bool, wait func() error, err error) {
	return c.groups.consumer(id, create, c.groups.image(), fn)
}

func (t *groupTable) consumer(id string, create bool, img *consumer.Image,
	fn func(g *consumer.Group, img *consumer.Image, now int64) []consumer.Record) (bool, func() error, error) {
	now := time.Now().UnixMilli()
	t.mu.Lock()
	defer t.poke()
	defer t.mu.Unlock()
	cg := t.mu.consumers[id]
	created := false
	if cg == nil {
		if cl := t.mu.groups[id]; cl != nil {
			if cl.NumMembers() > 0 {
				return false, nil, fmt.Errorf("group %s is not a consumer group: %w", id, ErrNotConsumerGroup)
			}
			if !create {
				return false, nil, nil
			}
			// An empty classic group becomes a consumer group (Kafka's
			// conversion of an empty group): its stored form goes.
			delete(t.mu.groups, id)
			t.offsets.storeGroup(id, nil)
		}
		if !create {
			return false, nil, nil
		}
		cg = &consumerGroup{g: consumer.New(id, t.ccfg)}
		t.mu.consumers[id] = cg
		created = true
	}
	var recs []consumer.Record
	if cg.img != img {
		recs = cg.g.MetadataChanged(now, img)
		cg.img = img
	}
	recs = append(recs, fn(cg.g, img, now)...)
	if cg.g.State() == "Dead" || created && cg.g.Epoch() == 0 {
		// Deleted, or created for a join that was refused.
		delete(t.mu.consumers, id)
	}
	wait, err := t.persistLocked(id, recs)
	return true, wait, err
}

// persistLocked appends a consumer group's records to its offsets
// partition. REQUIRES: t.mu held (so the log keeps the steps' order).
func (t *groupTable) persistLocked(id string, recs []consumer.Record) (func() error, error) {
	if len(recs) == 0 {
		return nil, nil
	}
	wait, err := t.offsets.appendRecords(id, recs)
	if err != nil {
		// The step stays applied in memory. If the leadership went, the
		// group is unloaded; if the disk failed, the partition is handed
		// on. Either way the next coordinator loads what was committed.
		t.log.Warn().Err(err).Str("group", id).Msg("storing consumer group records")
		return nil, err
	}
	return wait, nil
}

// tickConsumersLocked applies the consumer groups' deadlines at now and
// stores what changed. REQUIRES: t.mu held.
func (t *groupTable) tickConsumersLocked(now int64) {
	for id, cg := range t.mu.consumers {
		if d := cg.g.NextDeadline(); d < 0 || d > now {
			continue
		}
		var recs []consumer.Record
		if img := t.image(); cg.img != img {
			recs = cg.g.MetadataChanged(now, img)
			cg.img = img
		}
		recs = append(recs, cg.g.Tick(now, cg.img)...)
		if cg.g.State() == "Dead" {
			delete(t.mu.consumers, id)
		}
		// Nobody waits on a timeout's records; a failure is logged.
		_, _ = t.persistLocked(id, recs)
	}
}

// nextConsumerDeadlineLocked is the earliest deadline of any consumer
// group, -1 for none. REQUIRES: t.mu held.
func (t *groupTable) nextConsumerDeadlineLocked() int64 {
	next := int64(-1)
	for _, cg := range t.mu.consumers {
		if d := cg.g.NextDeadline(); d >= 0 && (next < 0 || d < next) {
			next = d
		}
	}
	return next
}

// restoreConsumer installs a consumer group read back from the offsets
// topic: recs are its records in log order.
func (t *groupTable) restoreConsumer(id string, recs []consumer.Record) {
	g := consumer.New(id, t.ccfg)
	for _, r := range recs {
		if err := g.Replay(r.Key, r.Value); err != nil {
			t.log.Warn().Err(err).Str("group", id).Msg("skipping an unreadable consumer group record")
		}
	}
	now := time.Now().UnixMilli()
	g.Loaded(now)
	if g.State() == "Dead" {
		return // deleted: its records are tombstones
	}
	t.mu.Lock()
	// The image the records were written under is unknown: the first
	// step compares the group with the image of now.
	t.mu.consumers[id] = &consumerGroup{g: g}
	t.mu.Unlock()
	t.log.Info().Str("group", id).Str("state", g.State()).Int32("epoch", g.Epoch()).
		Int("members", g.NumMembers()).Msg("restored consumer group")
	t.poke()
}

// appendRecords appends a consumer group's records to its offsets
// partition as its leader and returns a wait that blocks until they are
// committed like an acks=all produce (or the partition's error).
func (o *offsetStore) appendRecords(id string, recs []consumer.Record) (func() error, error) {
	pi := o.partitionFor(id)
	p, err := o.leader(pi)
	if err != nil {
		return nil, err
	}
	kvs := make([]recordbatch.KV, len(recs))
	for i, r := range recs {
		kvs[i] = recordbatch.KV{Key: r.Key, Value: r.Value}
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

// consumerMembers is the member count of consumer group id (0 if none).
// REQUIRES: t.mu held.
func (t *groupTable) consumerMembersLocked(id string) int {
	if cg := t.mu.consumers[id]; cg != nil {
		return cg.g.NumMembers()
	}
	return 0
}

// validateConsumerCommit checks an offset commit against consumer group
// id; ok is false when id is not a consumer group.
func (t *groupTable) validateConsumerCommit(id, member string, epoch int32, v int16) (ok bool, err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	cg := t.mu.consumers[id]
	if cg == nil {
		return false, nil
	}
	return true, cg.g.ValidateOffsetCommit(member, epoch, v)
}

// ValidateFetch checks an OffsetFetch v9+'s member against consumer
// group id (KIP-848: a member fetches with its epoch); nil for a classic
// group, an unknown one, or a request without a member.
func (c *Coordinator) ValidateFetch(id, member string, epoch int32) error {
	if member == "" && epoch < 0 {
		return nil
	}
	t := c.groups
	t.mu.Lock()
	defer t.mu.Unlock()
	if cg := t.mu.consumers[id]; cg != nil {
		return cg.g.ValidateOffsetFetch(member, epoch)
	}
	return nil
}

// eachConsumer calls fn on every consumer group under the table's lock;
// fn must not keep g.
func (t *groupTable) eachConsumer(fn func(id string, g *consumer.Group)) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for id, cg := range t.mu.consumers {
		fn(id, cg.g)
	}
}

// Group types (KIP-848), as ListGroups v5 and ConsumerGroupDescribe name
// them.
const (
	ClassicGroupType  = "classic"
	ConsumerGroupType = "consumer"
)

// takeConsumerRecords removes and returns the consumer groups' records of
// offsets partition pi that replay found, per group in log order.
func (o *offsetStore) takeConsumerRecords(pi int32) map[string][]consumer.Record {
	o.mu.Lock()
	defer o.mu.Unlock()
	out := map[string][]consumer.Record{}
	for id, recs := range o.mu.consumerRecs {
		if o.partitionFor(id) == pi {
			out[id] = recs
			delete(o.mu.consumerRecs, id)
		}
	}
	return out
}
