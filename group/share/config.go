package share

import (
	"errors"
	"fmt"

	"github.com/fjordlog/fjord/group/assign"
)

// Config holds the coordinator settings of share groups. Field names follow
// Kafka's broker properties. As with group/consumer, a zero field is not
// replaced by its default: start from DefaultConfig.
type Config struct {
	// SessionTimeoutMs (group.share.session.timeout.ms): a member that
	// sends no successful heartbeat for this long is removed. Kafka's
	// default 45000. Range: >= 1.
	SessionTimeoutMs int32
	// HeartbeatIntervalMs (group.share.heartbeat.interval.ms) is sent to
	// members in every successful heartbeat response. Kafka's default 5000.
	// Range: [1, SessionTimeoutMs).
	HeartbeatIntervalMs int32
	// MaxSize (group.share.max.size): a heartbeat from a new member of a
	// group with this many members gets GROUP_MAX_SIZE_REACHED. Kafka's
	// default 200, range [1, 1000]; here any value >= 1.
	MaxSize int32
	// Assignor (group.share.assignors, which in Kafka must list exactly
	// one) computes target assignments; Kafka's only built-in one is
	// "simple" (assign.Simple). Its name is what ShareGroupDescribe reports.
	Assignor assign.Assignor
}

// DefaultConfig returns Kafka 4.2's defaults.
func DefaultConfig() Config {
	return Config{
		SessionTimeoutMs:    45000,
		HeartbeatIntervalMs: 5000,
		MaxSize:             200,
		Assignor:            assign.Simple(),
	}
}

// Validate reports every setting that cannot work. The broker calls it at
// startup; New panics on a Config that fails it.
func (c Config) Validate() error {
	var errs []error
	if c.SessionTimeoutMs < 1 {
		errs = append(errs, fmt.Errorf("share: group.share.session.timeout.ms %d: must be >= 1", c.SessionTimeoutMs))
	}
	if c.HeartbeatIntervalMs < 1 || c.HeartbeatIntervalMs >= c.SessionTimeoutMs {
		errs = append(errs, fmt.Errorf("share: group.share.heartbeat.interval.ms %d: must be >= 1 and < group.share.session.timeout.ms %d",
			c.HeartbeatIntervalMs, c.SessionTimeoutMs))
	}
	if c.MaxSize < 1 {
		errs = append(errs, fmt.Errorf("share: group.share.max.size %d: must be >= 1", c.MaxSize))
	}
	if c.Assignor == nil || c.Assignor.Name() == "" {
		errs = append(errs, errors.New("share: group.share.assignors: an assignor with a name is required"))
	}
	return errors.Join(errs...)
}
