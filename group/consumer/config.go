package consumer

import (
	"errors"
	"fmt"
	"math"

	"github.com/fjordlog/fjord/group/assign"
)

// Config holds the coordinator settings of consumer groups. Field names
// follow Kafka's broker properties. Unlike the classic group's Config, a
// zero field is not replaced by its default: start from DefaultConfig.
type Config struct {
	// SessionTimeoutMs (group.consumer.session.timeout.ms): a member that
	// sends no successful heartbeat for this long is removed. Range: >= 1.
	SessionTimeoutMs int32
	// HeartbeatIntervalMs (group.consumer.heartbeat.interval.ms) is sent to
	// members in every successful response. Range: [1, SessionTimeoutMs).
	HeartbeatIntervalMs int32
	// MaxSize (group.consumer.max.size): a heartbeat from a new member of a
	// group with this many members gets GROUP_MAX_SIZE_REACHED. Range: >= 1.
	MaxSize int32
	// Assignors (group.consumer.assignors) are the server assignors members
	// may name; the first is the default. Non-empty, distinct non-empty
	// names.
	Assignors []assign.Assignor

	// MemberIDNonce goes into the member ids this package generates for
	// ConsumerGroupHeartbeat v0 joins (v1 clients bring their own), so that
	// ids of different incarnations of a group never collide. The broker
	// sets something unique per process; tests leave it empty. Not a Kafka
	// property: Kafka draws a random UUID.
	MemberIDNonce string
}

// DefaultConfig returns Kafka's defaults.
func DefaultConfig() Config {
	return Config{
		SessionTimeoutMs:    45000,
		HeartbeatIntervalMs: 5000,
		MaxSize:             math.MaxInt32,
		Assignors:           defaultAssignors(),
	}
}

// Validate reports every setting that cannot work. The broker calls it at
// startup; New panics on a Config that fails it.
func (c Config) Validate() error {
	var errs []error
	if c.SessionTimeoutMs < 1 {
		errs = append(errs, fmt.Errorf("consumer: group.consumer.session.timeout.ms %d: must be >= 1", c.SessionTimeoutMs))
	}
	if c.HeartbeatIntervalMs < 1 || c.HeartbeatIntervalMs >= c.SessionTimeoutMs {
		errs = append(errs, fmt.Errorf("consumer: group.consumer.heartbeat.interval.ms %d: must be >= 1 and < group.consumer.session.timeout.ms %d",
			c.HeartbeatIntervalMs, c.SessionTimeoutMs))
	}
	if c.MaxSize < 1 {
		errs = append(errs, fmt.Errorf("consumer: group.consumer.max.size %d: must be >= 1", c.MaxSize))
	}
	if len(c.Assignors) == 0 {
		errs = append(errs, errors.New("consumer: group.consumer.assignors: must name at least one assignor"))
	}
	seen := map[string]bool{}
	for i, a := range c.Assignors {
		switch {
		case a == nil || a.Name() == "":
			errs = append(errs, fmt.Errorf("consumer: group.consumer.assignors[%d]: no name", i))
		case seen[a.Name()]:
			errs = append(errs, fmt.Errorf("consumer: group.consumer.assignors: %q listed twice", a.Name()))
		default:
			seen[a.Name()] = true
		}
	}
	return errors.Join(errs...)
}

// assignor returns the configured assignor with that name.
func (c Config) assignor(name string) (assign.Assignor, bool) {
	for _, a := range c.Assignors {
		if a.Name() == name {
			return a, true
		}
	}
	return nil, false
}

// assignorNames lists the configured names in order, for messages.
func (c Config) assignorNames() []string {
	names := make([]string, len(c.Assignors))
	for i, a := range c.Assignors {
		names[i] = a.Name()
	}
	return names
}
