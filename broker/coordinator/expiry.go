package coordinator

import "time"

// expiryLoop deletes committed offsets of groups without members once
// RetentionMs has passed since their commit (KIP-211: an active group's
// offsets never expire), looking every RetentionCheckMs until the
// coordinator's context ends.
func (c *Coordinator) expiryLoop() {
	t := time.NewTicker(time.Duration(c.cfg.RetentionCheckMs) * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-c.ctx.Done():
			return
		case <-t.C:
		}
		c.expire(time.Now().UnixMilli())
	}
}

// expire writes tombstones for the offsets that have expired at now.
func (c *Coordinator) expire(now int64) {
	for _, id := range c.offsets.groupsWithOffsets() {
		if !c.offsets.isLoaded(id) || c.groups.members(id) > 0 {
			continue
		}
		tombs := map[TopicPartition]*Committed{}
		for tp := range c.offsets.groupOffsets(id) {
			tombs[tp] = nil
		}
		// Decided again under the store's lock: a commit acknowledged
		// since the copy above, or still in flight, keeps its offset.
		stillExpired := func(_ TopicPartition, cur Committed, ok bool) bool {
			return ok && now-cur.CommitTimeMs > c.cfg.RetentionMs
		}
		c.offsets.commitIf(id, tombs, stillExpired, func(n int, err error) {
			if err != nil {
				c.log.Warn().Err(err).Str("group", id).Msg("expiring offsets")
				return
			}
			if n > 0 {
				c.log.Info().Str("group", id).Int("partitions", n).Msg("expired committed offsets")
			}
		})
	}
}
