package consumer

import "github.com/fjordlog/fjord/group/assign"

// defaultAssignors is Kafka's group.consumer.assignors default: uniform
// first (the default), then range.
func defaultAssignors() []assign.Assignor {
	return []assign.Assignor{assign.Uniform(), assign.Range()}
}
