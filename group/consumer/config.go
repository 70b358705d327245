package consumer

import (
	"errors"
	"fmt"
	"math"
	"strings"

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

	// MigrationPolicy (group.consumer.migration.policy) says which online
	// conversions between a classic group and a consumer group may happen
	// (convert.go). Kafka 4.x's default: MigrationBidirectional.
	MigrationPolicy MigrationPolicy
	// ClassicMinSessionTimeoutMs and ClassicMaxSessionTimeoutMs
	// (group.min.session.timeout.ms, group.max.session.timeout.ms) bound
	// the session timeout of a classic member's JoinGroup, as for a
	// classic group. Range: 1 <= Min <= Max.
	ClassicMinSessionTimeoutMs, ClassicMaxSessionTimeoutMs int32
	// ClassicMaxSize (group.max.size; 0: no limit) is the classic groups'
	// limit: a downgrade that would exceed it does not happen. Range: >= 0.
	ClassicMaxSize int32

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
		MigrationPolicy:     MigrationBidirectional,

		ClassicMinSessionTimeoutMs: 6000,
		ClassicMaxSessionTimeoutMs: 1800000,
	}
}

// MigrationPolicy is a value of group.consumer.migration.policy.
type MigrationPolicy string

// Kafka's values (ConsumerGroupMigrationPolicy), matched without regard
// to case by ParseMigrationPolicy.
const (
	MigrationBidirectional MigrationPolicy = "bidirectional" // upgrade and downgrade
	MigrationUpgrade       MigrationPolicy = "upgrade"       // classic to consumer only
	MigrationDowngrade     MigrationPolicy = "downgrade"     // consumer to classic only
	MigrationDisabled      MigrationPolicy = "disabled"      // neither
)

// ParseMigrationPolicy reads a policy, case-insensitively as Kafka's
// validator does.
func ParseMigrationPolicy(s string) (MigrationPolicy, error) {
	p := MigrationPolicy(strings.ToLower(strings.TrimSpace(s)))
	switch p {
	case MigrationBidirectional, MigrationUpgrade, MigrationDowngrade, MigrationDisabled:
		return p, nil
	}
	return "", fmt.Errorf("consumer: group.consumer.migration.policy %q: must be one of bidirectional, upgrade, downgrade, disabled", s)
}

// Upgrade reports whether a classic group may become a consumer group.
func (p MigrationPolicy) Upgrade() bool { return p == MigrationBidirectional || p == MigrationUpgrade }

// Downgrade reports whether a consumer group may become a classic group.
func (p MigrationPolicy) Downgrade() bool {
	return p == MigrationBidirectional || p == MigrationDowngrade
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
	if _, err := ParseMigrationPolicy(string(c.MigrationPolicy)); err != nil {
		errs = append(errs, err)
	}
	if c.ClassicMinSessionTimeoutMs < 1 || c.ClassicMaxSessionTimeoutMs < c.ClassicMinSessionTimeoutMs {
		errs = append(errs, fmt.Errorf("consumer: classic session timeout bounds [%d, %d]: need 1 <= min <= max",
			c.ClassicMinSessionTimeoutMs, c.ClassicMaxSessionTimeoutMs))
	}
	if c.ClassicMaxSize < 0 {
		errs = append(errs, fmt.Errorf("consumer: group.max.size %d: must be >= 0", c.ClassicMaxSize))
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
