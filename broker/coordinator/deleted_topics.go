package coordinator

// TopicsDeleted deletes the committed offsets of the named topics, which
// the metadata image no longer has, from every group whose offsets
// partition this node leads, as Kafka's coordinator does when topics are
// deleted (onPartitionsDeleted). Without it a topic created again under
// the same name would find a group's offsets of the old one: the group
// would resume the new topic at offsets that mean nothing there, and a
// consumer whose reset policy is "latest" would skip records.
//
// The tombstones are written in the background, unconditionally: a
// commit in flight for the old topic is ordered before them in the log.
// Offsets partitions that move to this node later are not swept (as in
// Kafka, the deletion is an event, not a state); nor is a commit made for
// a new topic of that name between its creation and this call, which the
// image drop normally precedes by far.
func (c *Coordinator) TopicsDeleted(names []string) {
	if len(names) == 0 {
		return
	}
	gone := make(map[string]bool, len(names))
	for _, n := range names {
		gone[n] = true
	}
	c.host.Go(func() {
		for _, id := range c.offsets.groupsWithOffsets() {
			if !c.offsets.isLoaded(id) {
				continue
			}
			tombs := map[TopicPartition]*Committed{}
			for tp := range c.offsets.groupOffsets(id) {
				if gone[tp.Topic] {
					tombs[tp] = nil
				}
			}
			if len(tombs) == 0 {
				continue
			}
			c.offsets.commitIf(id, tombs, nil, func(n int, err error) {
				if err != nil {
					c.log.Warn().Err(err).Str("group", id).Msg("deleting the committed offsets of deleted topics")
					return
				}
				c.log.Info().Str("group", id).Int("partitions", n).Msg("deleted the committed offsets of deleted topics")
			})
		}
	})
}
