package active

import (
	"github.com/fjordlog/fjord/controller"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// IncrementalChanges is controller.IncrementalChanges: the broker judges a
// forwarded IncrementalAlterConfigs with it before the controller does.
func IncrementalChanges(req *kmsg.IncrementalAlterConfigsRequest) []controller.ConfigChange {
	return controller.IncrementalChanges(req)
}

// LegacyChanges is controller.LegacyChanges, for the broker's AlterConfigs.
func LegacyChanges(req *kmsg.AlterConfigsRequest) []controller.ConfigChange {
	return controller.LegacyChanges(req)
}
