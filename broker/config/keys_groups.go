package config

import (
	"fmt"
	"slices"
)

// The broker keys behind group configs (groups.go): for each group key the
// broker key that is its default, and the two that bound what a group may
// set. A group's consumer.session.timeout.ms, say, defaults to
// group.consumer.session.timeout.ms and must lie within
// [group.consumer.min.session.timeout.ms, group.consumer.max.session.timeout.ms].
// Kafka's names and defaults (Kafka 4.2; the delivery-count and record-lock
// bounds are Kafka 4.3's, KIP-1240, which made those two group keys). All
// are read-only, as in Kafka.
//
// Unlike Kafka, Fjord does not require a broker default to lie within its
// own bounds: the bounds judge group overrides only. Fjord's
// group.consumer.session.timeout.ms came before its bounds, and short
// sessions (tests, small clusters) are set with it alone.

// ShareGroupConfig is the share-group (KIP-932) broker keys that group
// configs default to and are bounded by. Every field is in [1, 2^31).
//
// Invariant (Validate): each Min* <= its Max*; HeartbeatMs < SessionMs.
type ShareGroupConfig struct {
	SessionMs    int32 // group.share.session.timeout.ms
	MinSessionMs int32 // group.share.min.session.timeout.ms
	MaxSessionMs int32 // group.share.max.session.timeout.ms

	HeartbeatMs    int32 // group.share.heartbeat.interval.ms
	MinHeartbeatMs int32 // group.share.min.heartbeat.interval.ms
	MaxHeartbeatMs int32 // group.share.max.heartbeat.interval.ms

	RecordLockMs    int32 // group.share.record.lock.duration.ms, [1000, 3600000]
	MinRecordLockMs int32 // group.share.min.record.lock.duration.ms, [1000, 30000]
	MaxRecordLockMs int32 // group.share.max.record.lock.duration.ms, [30000, 3600000]

	DeliveryCountLimit    int32 // group.share.delivery.count.limit, [2, 10]
	MinDeliveryCountLimit int32 // group.share.min.delivery.count.limit, [2, 5]
	MaxDeliveryCountLimit int32 // group.share.max.delivery.count.limit, [5, 25]

	PartitionMaxRecordLocks    int32 // group.share.partition.max.record.locks, [100, 10000]
	MinPartitionMaxRecordLocks int32 // group.share.min.partition.max.record.locks, [100, 10000]
	MaxPartitionMaxRecordLocks int32 // group.share.max.partition.max.record.locks, [100, 10000]
}

// defaultShareGroups is Kafka's defaults.
func defaultShareGroups() ShareGroupConfig {
	return ShareGroupConfig{
		SessionMs: 45000, MinSessionMs: 45000, MaxSessionMs: 60000,
		HeartbeatMs: 5000, MinHeartbeatMs: 5000, MaxHeartbeatMs: 15000,
		RecordLockMs: 30000, MinRecordLockMs: 15000, MaxRecordLockMs: 60000,
		DeliveryCountLimit: 5, MinDeliveryCountLimit: 2, MaxDeliveryCountLimit: 10,
		PartitionMaxRecordLocks: 2000, MinPartitionMaxRecordLocks: 100, MaxPartitionMaxRecordLocks: 4000,
	}
}

// groupBrokerKeys are the key table's rows of these keys, in documentation
// order; d is the default config.
func groupBrokerKeys(d *Config) []Key {
	row := func(name, doc string, field func(*Config) *int32) Key {
		return Key{Name: name, Def: itoa(*field(d)), Doc: doc, Set: setInt(field)}
	}
	sh := func(f func(s *ShareGroupConfig) *int32) func(*Config) *int32 {
		return func(c *Config) *int32 { return f(&c.ShareGroups) }
	}
	const bound = "Bounds a group's %s (IncrementalAlterConfigs on the group refuses a value %s it)."
	lower := func(groupKey string) string { return fmt.Sprintf(bound, groupKey, "below") }
	upper := func(groupKey string) string { return fmt.Sprintf(bound, groupKey, "above") }
	shareDefault := func(groupKey, what string) string {
		return "Share groups (KIP-932): " + what + " The default of a group's " + groupKey + "."
	}
	return []Key{
		row("group.consumer.min.session.timeout.ms", lower("consumer.session.timeout.ms"), func(c *Config) *int32 { return &c.ConsumerMinSessionMs }),
		row("group.consumer.max.session.timeout.ms", upper("consumer.session.timeout.ms"), func(c *Config) *int32 { return &c.ConsumerMaxSessionMs }),
		row("group.consumer.min.heartbeat.interval.ms", lower("consumer.heartbeat.interval.ms"), func(c *Config) *int32 { return &c.ConsumerMinHeartbeatMs }),
		row("group.consumer.max.heartbeat.interval.ms", upper("consumer.heartbeat.interval.ms"), func(c *Config) *int32 { return &c.ConsumerMaxHeartbeatMs }),

		row("group.share.session.timeout.ms", shareDefault("share.session.timeout.ms", "a member that does not heartbeat for this long is removed."), sh(func(s *ShareGroupConfig) *int32 { return &s.SessionMs })),
		row("group.share.min.session.timeout.ms", lower("share.session.timeout.ms"), sh(func(s *ShareGroupConfig) *int32 { return &s.MinSessionMs })),
		row("group.share.max.session.timeout.ms", upper("share.session.timeout.ms"), sh(func(s *ShareGroupConfig) *int32 { return &s.MaxSessionMs })),
		row("group.share.heartbeat.interval.ms", shareDefault("share.heartbeat.interval.ms", "how often members heartbeat."), sh(func(s *ShareGroupConfig) *int32 { return &s.HeartbeatMs })),
		row("group.share.min.heartbeat.interval.ms", lower("share.heartbeat.interval.ms"), sh(func(s *ShareGroupConfig) *int32 { return &s.MinHeartbeatMs })),
		row("group.share.max.heartbeat.interval.ms", upper("share.heartbeat.interval.ms"), sh(func(s *ShareGroupConfig) *int32 { return &s.MaxHeartbeatMs })),
		row("group.share.record.lock.duration.ms", shareDefault("share.record.lock.duration.ms", "how long a delivered record stays locked to its consumer."), sh(func(s *ShareGroupConfig) *int32 { return &s.RecordLockMs })),
		row("group.share.min.record.lock.duration.ms", lower("share.record.lock.duration.ms"), sh(func(s *ShareGroupConfig) *int32 { return &s.MinRecordLockMs })),
		row("group.share.max.record.lock.duration.ms", upper("share.record.lock.duration.ms"), sh(func(s *ShareGroupConfig) *int32 { return &s.MaxRecordLockMs })),
		row("group.share.delivery.count.limit", shareDefault("share.delivery.count.limit", "how many times a record is delivered before it is archived."), sh(func(s *ShareGroupConfig) *int32 { return &s.DeliveryCountLimit })),
		row("group.share.min.delivery.count.limit", lower("share.delivery.count.limit"), sh(func(s *ShareGroupConfig) *int32 { return &s.MinDeliveryCountLimit })),
		row("group.share.max.delivery.count.limit", upper("share.delivery.count.limit"), sh(func(s *ShareGroupConfig) *int32 { return &s.MaxDeliveryCountLimit })),
		row("group.share.partition.max.record.locks", shareDefault("share.partition.max.record.locks", "the most records of one partition in flight to the group."), sh(func(s *ShareGroupConfig) *int32 { return &s.PartitionMaxRecordLocks })),
		row("group.share.min.partition.max.record.locks", lower("share.partition.max.record.locks"), sh(func(s *ShareGroupConfig) *int32 { return &s.MinPartitionMaxRecordLocks })),
		row("group.share.max.partition.max.record.locks", upper("share.partition.max.record.locks"), sh(func(s *ShareGroupConfig) *int32 { return &s.MaxPartitionMaxRecordLocks })),
	}
}

// withGroupBrokerKeys places the rows after group.consumer.assignors, with
// the other group keys.
func withGroupBrokerKeys(keys []Key, d *Config) []Key {
	i := slices.IndexFunc(keys, func(k Key) bool { return k.Name == "group.consumer.assignors" })
	return slices.Insert(keys, i+1, groupBrokerKeys(d)...)
}

// validateGroupKeys checks Kafka's ranges of these keys and that each pair
// of bounds is ordered.
func (c *Config) validateGroupKeys() []error {
	var errs []error
	inRange := func(name string, v, lo, hi int32) {
		if v < lo || v > hi {
			errs = append(errs, fmt.Errorf("%s %d: must be in [%d, %d]", name, v, lo, hi))
		}
	}
	ordered := func(minName string, lo int32, maxName string, hi int32) {
		if lo > hi {
			errs = append(errs, fmt.Errorf("%s %d / %s %d: need min <= max", minName, lo, maxName, hi))
		}
	}
	const big = 1<<31 - 1
	s := &c.ShareGroups
	for _, k := range []struct {
		name string
		v    int32
	}{
		{"group.consumer.min.session.timeout.ms", c.ConsumerMinSessionMs},
		{"group.consumer.max.session.timeout.ms", c.ConsumerMaxSessionMs},
		{"group.consumer.min.heartbeat.interval.ms", c.ConsumerMinHeartbeatMs},
		{"group.consumer.max.heartbeat.interval.ms", c.ConsumerMaxHeartbeatMs},
		{"group.share.session.timeout.ms", s.SessionMs},
		{"group.share.min.session.timeout.ms", s.MinSessionMs},
		{"group.share.max.session.timeout.ms", s.MaxSessionMs},
		{"group.share.heartbeat.interval.ms", s.HeartbeatMs},
		{"group.share.min.heartbeat.interval.ms", s.MinHeartbeatMs},
		{"group.share.max.heartbeat.interval.ms", s.MaxHeartbeatMs},
	} {
		inRange(k.name, k.v, 1, big)
	}
	inRange("group.share.record.lock.duration.ms", s.RecordLockMs, 1000, 3600000)
	inRange("group.share.min.record.lock.duration.ms", s.MinRecordLockMs, 1000, 30000)
	inRange("group.share.max.record.lock.duration.ms", s.MaxRecordLockMs, 30000, 3600000)
	inRange("group.share.delivery.count.limit", s.DeliveryCountLimit, 2, 10)
	inRange("group.share.min.delivery.count.limit", s.MinDeliveryCountLimit, 2, 5)
	inRange("group.share.max.delivery.count.limit", s.MaxDeliveryCountLimit, 5, 25)
	inRange("group.share.partition.max.record.locks", s.PartitionMaxRecordLocks, 100, 10000)
	inRange("group.share.min.partition.max.record.locks", s.MinPartitionMaxRecordLocks, 100, 10000)
	inRange("group.share.max.partition.max.record.locks", s.MaxPartitionMaxRecordLocks, 100, 10000)
	ordered("group.consumer.min.session.timeout.ms", c.ConsumerMinSessionMs, "group.consumer.max.session.timeout.ms", c.ConsumerMaxSessionMs)
	ordered("group.consumer.min.heartbeat.interval.ms", c.ConsumerMinHeartbeatMs, "group.consumer.max.heartbeat.interval.ms", c.ConsumerMaxHeartbeatMs)
	ordered("group.share.min.session.timeout.ms", s.MinSessionMs, "group.share.max.session.timeout.ms", s.MaxSessionMs)
	ordered("group.share.min.heartbeat.interval.ms", s.MinHeartbeatMs, "group.share.max.heartbeat.interval.ms", s.MaxHeartbeatMs)
	ordered("group.share.min.record.lock.duration.ms", s.MinRecordLockMs, "group.share.max.record.lock.duration.ms", s.MaxRecordLockMs)
	ordered("group.share.min.delivery.count.limit", s.MinDeliveryCountLimit, "group.share.max.delivery.count.limit", s.MaxDeliveryCountLimit)
	ordered("group.share.min.partition.max.record.locks", s.MinPartitionMaxRecordLocks, "group.share.max.partition.max.record.locks", s.MaxPartitionMaxRecordLocks)
	if s.HeartbeatMs >= s.SessionMs {
		errs = append(errs, fmt.Errorf("group.share.heartbeat.interval.ms %d / group.share.session.timeout.ms %d: need heartbeat < session", s.HeartbeatMs, s.SessionMs))
	}
	return errs
}
