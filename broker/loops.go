package broker

import (
	"strings"
	"time"

	"github.com/fjordlog/fjord/broker/config"
	"github.com/fjordlog/fjord/broker/replicamgr"
)

// upkeep is what the replica manager's upkeep loops (retention, relaxed
// flushing, compaction) read of the broker.
func (b *Broker) upkeep() replicamgr.Upkeep {
	return replicamgr.Upkeep{
		Stop:           b.stop,
		RetentionCheck: time.Duration(b.cfg.RetentionCheckInterval) * time.Millisecond,
		Policy: func(t *replicamgr.Topic) string {
			v, _ := config.FindTopicKey("cleanup.policy").Effective(b.live(), t.Configs)
			return v
		},
		CleanerBackoff: func() time.Duration { return time.Duration(b.live().CleanerBackoffMs) * time.Millisecond },
	}
}

// policyHas reports whether the topic's effective cleanup.policy (its
// override, else log.cleanup.policy) includes p.
func (b *Broker) policyHas(t *replicamgr.Topic, p string) bool {
	v, _ := config.FindTopicKey("cleanup.policy").Effective(b.live(), t.Configs)
	return strings.Contains(v, p)
}
