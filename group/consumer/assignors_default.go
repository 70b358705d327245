package consumer

import "github.com/fjordlog/fjord/group/assign"

// defaultAssignors is Kafka's group.consumer.assignors default.
// TODO(consumer): uniform and range once branch assign lands.
func defaultAssignors() []assign.Assignor { return nil }
