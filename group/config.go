package group

import (
	"errors"
	"fmt"
)

// Config holds the coordinator settings that shape membership. Field names
// follow Kafka's broker properties. A zero field takes its default (see
// DefaultConfig), except InitialRebalanceDelayMs, where zero means no delay,
// and MemberIDNonce.
type Config struct {
	// MinSessionTimeoutMs and MaxSessionTimeoutMs bound the session timeout
	// a member may ask for (group.min.session.timeout.ms,
	// group.max.session.timeout.ms); outside [Min, Max] a JoinGroup gets
	// INVALID_SESSION_TIMEOUT. Defaults 6000 and 1800000.
	// Invariant (after defaults): 1 <= Min <= Max.
	MinSessionTimeoutMs, MaxSessionTimeoutMs int32

	// InitialRebalanceDelayMs (group.initial.rebalance.delay.ms) delays the
	// end of the first join phase of an Empty group so that members starting
	// together land in one generation; each new member arriving during the
	// delay extends it by the same amount, up to the rebalance timeout, as
	// Kafka does. 0 means no delay. Range: >= 0.
	InitialRebalanceDelayMs int32

	// MaxRebalanceAttempts is the ceiling on rebalance storms: a member whose
	// joins have forced this many rebalances since the group was last Stable
	// is removed when it tries to force another (its JoinGroup gets
	// UNKNOWN_MEMBER_ID). A join "forces" a rebalance when it moves the group
	// into PreparingRebalance. Default 10. Range: >= 1.
	MaxRebalanceAttempts int

	// MaxSize (group.max.size) caps members plus outstanding pending member
	// ids; a new member beyond it gets GROUP_MAX_SIZE_REACHED. 0 means no
	// limit. Range: >= 0.
	MaxSize int32

	// MemberIDNonce is put into every generated member id so that ids from
	// different incarnations of a group (broker restarts, coordinator moves)
	// never collide: an old client must not be mistaken for a new member that
	// happens to get the same counter value. The broker sets something unique
	// per process, such as its start time in hex; tests leave it empty.
	MemberIDNonce string
}

// DefaultConfig returns Kafka's defaults.
func DefaultConfig() Config {
	return Config{
		MinSessionTimeoutMs:     6000,
		MaxSessionTimeoutMs:     1800000,
		InitialRebalanceDelayMs: 3000,
		MaxRebalanceAttempts:    10,
	}
}

// withDefaults fills the zero fields that have a default.
func (c Config) withDefaults() Config {
	d := DefaultConfig()
	if c.MinSessionTimeoutMs == 0 {
		c.MinSessionTimeoutMs = d.MinSessionTimeoutMs
	}
	if c.MaxSessionTimeoutMs == 0 {
		c.MaxSessionTimeoutMs = d.MaxSessionTimeoutMs
	}
	if c.MaxRebalanceAttempts == 0 {
		c.MaxRebalanceAttempts = d.MaxRebalanceAttempts
	}
	return c
}

// Validate reports every setting that cannot work, after defaults are
// applied. The broker calls it at startup; NewGroup panics on a Config that
// fails it.
func (c Config) Validate() error {
	c = c.withDefaults()
	var errs []error
	if c.MinSessionTimeoutMs < 1 {
		errs = append(errs, fmt.Errorf("group: group.min.session.timeout.ms %d: must be >= 1", c.MinSessionTimeoutMs))
	}
	if c.MaxSessionTimeoutMs < c.MinSessionTimeoutMs {
		errs = append(errs, fmt.Errorf("group: group.max.session.timeout.ms %d: must be >= group.min.session.timeout.ms %d",
			c.MaxSessionTimeoutMs, c.MinSessionTimeoutMs))
	}
	if c.InitialRebalanceDelayMs < 0 {
		errs = append(errs, fmt.Errorf("group: group.initial.rebalance.delay.ms %d: must be >= 0", c.InitialRebalanceDelayMs))
	}
	if c.MaxRebalanceAttempts < 1 {
		errs = append(errs, fmt.Errorf("group: max rebalance attempts %d: must be >= 1", c.MaxRebalanceAttempts))
	}
	if c.MaxSize < 0 {
		errs = append(errs, fmt.Errorf("group: group.max.size %d: must be >= 0", c.MaxSize))
	}
	return errors.Join(errs...)
}
