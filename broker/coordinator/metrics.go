package coordinator

// Members is group's member count, 0 for a group unknown here (pending
// member ids not counted), for kafka_consumergroup_members.
func (c *Coordinator) Members(group string) int { return c.groups.members(group) }
