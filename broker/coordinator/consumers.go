package coordinator

import (
	"github.com/fjordlog/fjord/group/consumer"
	"github.com/fjordlog/fjord/group/topics"
	"github.com/fjordlog/fjord/storage/recordbatch"
)

// Consumer runs fn on KIP-848 consumer group id (created first when
// create is set and the id is free or names an empty classic group,
// which is converted) under the table's lock; see withNextGen for the
// rest. err is ErrOtherGroupType when a group of another type holds id.
// may is the heartbeating member's DESCRIBE on topics (consumer.AllTopics
// without an authorizer), nil when fn is not a member's heartbeat.
func (c *Coordinator) Consumer(id string, create bool, may consumer.Visibility, fn func(g *consumer.Group, img *consumer.Image, now int64) []consumer.Record) (exists bool, wait func() error, err error) {
	return c.groups.withNextGen(id, ConsumerGroupType, create, may,
		func() nextGen { return consumerGen{consumer.New(id, c.groups.ccfg)} },
		func(g nextGen, img *topics.Image, now int64) []recordbatch.KV {
			return kvs(fn(g.(consumerGen).Group, img, now))
		})
}

// validateConsumerCommit checks an OffsetCommit against consumer group
// id with KIP-1251's rule; ok is false when id is not a consumer group.
func (t *groupTable) validateConsumerCommit(id, member string, epoch int32, v int16) (ok bool, check consumer.CommitCheck, err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	ng := t.mu.nextgen[id]
	if ng == nil {
		return false, check, nil
	}
	cg, isConsumer := ng.g.(consumerGen)
	if !isConsumer {
		return true, check, ErrOtherGroupType
	}
	check, err = cg.CheckOffsetCommit(member, epoch, v)
	return true, check, err
}

// validateConsumerCommitExact is validateConsumerCommit with the epoch
// rule before KIP-1251 (the member's epoch exactly), for TxnOffsetCommit.
func (t *groupTable) validateConsumerCommitExact(id, member string, epoch int32) (ok bool, err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	ng := t.mu.nextgen[id]
	if ng == nil {
		return false, nil
	}
	cg, isConsumer := ng.g.(consumerGen)
	if !isConsumer {
		return true, ErrOtherGroupType
	}
	return true, cg.ValidateOffsetCommit(member, epoch, 9)
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
	if ng := t.mu.nextgen[id]; ng != nil {
		if cg, ok := ng.g.(consumerGen); ok {
			return cg.ValidateOffsetFetch(member, epoch)
		}
	}
	return nil
}
