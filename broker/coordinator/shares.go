package coordinator

import (
	"github.com/fjordlog/fjord/group/consumer"
	"github.com/fjordlog/fjord/group/share"
	"github.com/fjordlog/fjord/group/topics"
	"github.com/fjordlog/fjord/storage/recordbatch"
)

// Share runs fn on KIP-932 share group id (created first when create is
// set and the id is free: a share group never takes over another type's
// id, as in Kafka) under the table's lock; see withNextGen for the rest.
// err is ErrOtherGroupType when a group of another type holds id.
func (c *Coordinator) Share(id string, create bool, fn func(g *share.Group, img *share.Image, now int64) []share.Record) (exists bool, wait func() error, err error) {
	// Share groups subscribe by name only (checked by the heartbeat's
	// rule): nothing is resolved for a member.
	return c.groups.withNextGen(id, ShareGroupType, create, consumer.AllTopics,
		func() nextGen { return shareGen{share.New(id, c.groups.scfg)} },
		func(g nextGen, img *topics.Image, now int64) []recordbatch.KV {
			return kvs(fn(g.(shareGen).Group, img, now))
		})
}
