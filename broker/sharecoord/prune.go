package sharecoord

import (
	"context"
	"time"

	"github.com/fjordlog/fjord/group/sharepart"
)

// Pruning. The state topic is not compacted (an update is a delta on the
// snapshot before it), so the coordinator deletes what no key needs any
// more, as Kafka's share coordinator does: every Config.PruneIntervalMs,
// for each state partition it leads and has loaded, it moves the log start
// offset up to the oldest record a live key still needs (its latest
// committed snapshot; the high watermark when no key is live), through the
// replica's DeleteRecords, which the followers follow. Only committed
// records count (table.commit): a snapshot a failover may still cut must
// not let the records before it go.
//
// A key that stays quiet keeps its old snapshot, and with it every record
// after it, forever; so every Config.ColdPartitionSnapshotIntervalMs the
// keys whose latest snapshot is that old get a copy at the log's end
// (table.coldSnapshots), unless the whole partition is quiet.

// prune runs one round of pruning over the led state partitions.
func (c *Coordinator) prune() {
	for _, pt := range c.loadedParts() {
		pt.mu.Lock()
		if pt.statusLocked() != nil {
			pt.mu.Unlock()
			continue
		}
		bound := pt.mu.tbl.pruneBound(pt.p.HW())
		last := pt.mu.pruned
		pt.mu.Unlock()
		if bound <= last {
			continue
		}
		if _, _, err := pt.p.DeleteRecords(bound); err != nil {
			c.log.Warn().Err(err).Int32("partition", pt.idx).Int64("offset", bound).Msg("pruning share-group state")
			continue
		}
		pt.mu.Lock()
		pt.mu.pruned = max(pt.mu.pruned, bound)
		pt.mu.Unlock()
		c.log.Debug().Int32("partition", pt.idx).Int64("log_start", bound).Msg("pruned share-group state")
	}
}

// snapshotCold writes the cold snapshots of every led state partition.
func (c *Coordinator) snapshotCold() {
	interval := c.cfg.ColdPartitionSnapshotIntervalMs
	for _, pt := range c.loadedParts() {
		err := c.run(c.ctx, pt, func(t *table, now int64) ([]sharepart.Record, error) {
			return t.coldSnapshots(now, interval), nil
		})
		if err != nil && c.ctx.Err() == nil {
			c.log.Warn().Err(err).Int32("partition", pt.idx).Msg("writing cold share-group state snapshots")
		}
	}
}

// TopicsDeleted deletes, in the background, the state of every
// share-partition of the deleted topics (their ids) on the state
// partitions this node leads (Kafka's share coordinator does so when
// its metadata image drops a topic). The broker calls it with the topics
// a new image no longer has.
func (c *Coordinator) TopicsDeleted(ids [][16]byte) {
	if len(ids) == 0 {
		return
	}
	set := make(map[[16]byte]bool, len(ids))
	for _, id := range ids {
		set[id] = true
	}
	parts := c.loadedParts()
	c.host.Go(func() {
		for _, pt := range parts {
			ctx, cancel := context.WithTimeout(c.ctx, time.Duration(c.cfg.WriteTimeoutMs)*time.Millisecond)
			err := c.run(ctx, pt, func(t *table, _ int64) ([]sharepart.Record, error) {
				return t.topicsDeleted(set), nil
			})
			cancel()
			if err != nil && c.ctx.Err() == nil {
				c.log.Warn().Err(err).Int32("partition", pt.idx).Msg("deleting the share-group state of deleted topics")
			}
		}
	})
}
