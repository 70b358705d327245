package config

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/fjordlog/fjord/controller"
)

// Group configs (KIP-848, KIP-932): per-group dynamic configs, resource
// type GROUP (32), set with IncrementalAlterConfigs or AlterConfigs
// (kafka-configs.sh --entity-type groups) and read with DescribeConfigs.
// They are stored in the metadata log as SetConfig records on
// controller.GroupResource, so every node has them and they survive
// restarts; a group's configs do not depend on the group existing (Kafka
// lets them be set before the first member joins, and DeleteGroups leaves
// them).
//
// A key's effective value for a group is its override, else the broker
// default: the running value of the group.* broker key of the same name
// (consumer.session.timeout.ms defaults to
// group.consumer.session.timeout.ms), or Kafka's fixed default for the two
// keys that have no broker key (share.auto.offset.reset,
// share.isolation.level). GroupValue and GroupSettingsOf are that layering,
// for the coordinators to read a group's settings through: the group
// coordinator at every heartbeat (session and heartbeat overrides apply
// from the members' next heartbeats), the share-partition leaders when
// they load a share-partition.
//
// Checks, as Kafka's GroupConfig.validate (its controller judges the
// resource's whole resulting set of overrides):
//   - an unknown key, a value that does not parse as the key's type or lies
//     outside Kafka's fixed range, or an override outside the bounds the
//     active controller's broker keys set (group.consumer.min.session.timeout.ms
//     and so on; keys_groups.go): INVALID_CONFIG, naming the key and the
//     bound;
//   - a session timeout not above the heartbeat interval of the same group
//     type, each taken as the group will run with it (override, else
//     default): INVALID_CONFIG.
//
// Kafka 4.2's keys are consumer.{session.timeout,heartbeat.interval}.ms,
// share.{session.timeout,heartbeat.interval,record.lock.duration}.ms,
// share.auto.offset.reset, share.isolation.level and four streams.* keys.
// Fjord also takes share.delivery.count.limit and
// share.partition.max.record.locks, which Kafka 4.3 added (KIP-1240), for
// its share groups. It refuses the streams.* keys with INVALID_CONFIG and
// a message: Fjord serves no streams groups (KIP-1071), so a stored value
// would promise what nothing acts on. Kafka 4.3's other additions
// (share.renew.acknowledge.enable, the *.assignment.interval.ms keys) are
// unknown keys here, as in Kafka 4.2.

// GroupKey is one of Kafka's group configs.
type GroupKey struct {
	Name string
	// Type is Kafka's ConfigDef type: "int" or "string".
	Type string
	// BrokerKey is the broker key whose running value is the default; ""
	// for a key with a fixed default (Def).
	BrokerKey string
	// Def is the fixed default of a key without a BrokerKey.
	Def string
	Doc string
	// Refused says why Fjord refuses the key; "" for a key it serves.
	Refused string

	// min is Kafka's fixed lower bound of an int key.
	min int32
	// bounds are the broker keys that bound an int key's override, with
	// their values in a config; nil for a key without bounds.
	bounds func(c *Config) (lo, hi int32)
	loKey  string
	hiKey  string
	// def is the running default (BrokerKey's value) in c.
	def func(c *Config) string
	// check judges a string key's (trimmed) value.
	check func(v string) error
}

// BoundKeys names the broker keys that bound an override, "" for a key
// without bounds.
func (k *GroupKey) BoundKeys() (lo, hi string) { return k.loKey, k.hiKey }

// Default is the key's default in the running configuration live.
func (k *GroupKey) Default(live *Config) string {
	if k.def != nil {
		return k.def(live)
	}
	return k.Def
}

const whyStreams = "Fjord serves no streams groups (KIP-1071), so it does not store their configs"

// groupKeys is Kafka's GroupConfig, sorted by name.
var groupKeys = func() []GroupKey {
	intKey := func(name, brokerKey string, min int32, field func(c *Config) int32, loKey, hiKey string, lo, hi func(c *Config) int32, doc string) GroupKey {
		return GroupKey{
			Name: name, Type: "int", BrokerKey: brokerKey, Doc: doc, min: min,
			def:    func(c *Config) string { return itoa(field(c)) },
			bounds: func(c *Config) (int32, int32) { return lo(c), hi(c) }, loKey: loKey, hiKey: hiKey,
		}
	}
	share := func(f func(s *ShareGroupConfig) int32) func(*Config) int32 {
		return func(c *Config) int32 { return f(&c.ShareGroups) }
	}
	streams := func(name string) GroupKey {
		return GroupKey{Name: name, Type: "int", Refused: whyStreams, Doc: "Streams groups (KIP-1071); refused by Fjord."}
	}
	ks := []GroupKey{
		intKey("consumer.session.timeout.ms", "group.consumer.session.timeout.ms", 1,
			func(c *Config) int32 { return c.ConsumerSessionMs },
			"group.consumer.min.session.timeout.ms", "group.consumer.max.session.timeout.ms",
			func(c *Config) int32 { return c.ConsumerMinSessionMs }, func(c *Config) int32 { return c.ConsumerMaxSessionMs },
			"The timeout to detect client failures when using the consumer group protocol."),
		intKey("consumer.heartbeat.interval.ms", "group.consumer.heartbeat.interval.ms", 1,
			func(c *Config) int32 { return c.ConsumerHeartbeatMs },
			"group.consumer.min.heartbeat.interval.ms", "group.consumer.max.heartbeat.interval.ms",
			func(c *Config) int32 { return c.ConsumerMinHeartbeatMs }, func(c *Config) int32 { return c.ConsumerMaxHeartbeatMs },
			"The heartbeat interval given to the members of a consumer group."),
		intKey("share.session.timeout.ms", "group.share.session.timeout.ms", 1,
			share(func(s *ShareGroupConfig) int32 { return s.SessionMs }),
			"group.share.min.session.timeout.ms", "group.share.max.session.timeout.ms",
			share(func(s *ShareGroupConfig) int32 { return s.MinSessionMs }), share(func(s *ShareGroupConfig) int32 { return s.MaxSessionMs }),
			"The timeout to detect client failures when using the share group protocol."),
		intKey("share.heartbeat.interval.ms", "group.share.heartbeat.interval.ms", 1,
			share(func(s *ShareGroupConfig) int32 { return s.HeartbeatMs }),
			"group.share.min.heartbeat.interval.ms", "group.share.max.heartbeat.interval.ms",
			share(func(s *ShareGroupConfig) int32 { return s.MinHeartbeatMs }), share(func(s *ShareGroupConfig) int32 { return s.MaxHeartbeatMs }),
			"The heartbeat interval given to the members of a share group."),
		intKey("share.record.lock.duration.ms", "group.share.record.lock.duration.ms", 1000,
			share(func(s *ShareGroupConfig) int32 { return s.RecordLockMs }),
			"group.share.min.record.lock.duration.ms", "group.share.max.record.lock.duration.ms",
			share(func(s *ShareGroupConfig) int32 { return s.MinRecordLockMs }), share(func(s *ShareGroupConfig) int32 { return s.MaxRecordLockMs }),
			"The record acquisition lock duration in milliseconds for share groups."),
		intKey("share.delivery.count.limit", "group.share.delivery.count.limit", 2,
			share(func(s *ShareGroupConfig) int32 { return s.DeliveryCountLimit }),
			"group.share.min.delivery.count.limit", "group.share.max.delivery.count.limit",
			share(func(s *ShareGroupConfig) int32 { return s.MinDeliveryCountLimit }), share(func(s *ShareGroupConfig) int32 { return s.MaxDeliveryCountLimit }),
			"The maximum number of delivery attempts for a record delivered to a share group (Kafka 4.3, KIP-1240)."),
		intKey("share.partition.max.record.locks", "group.share.partition.max.record.locks", 100,
			share(func(s *ShareGroupConfig) int32 { return s.PartitionMaxRecordLocks }),
			"group.share.min.partition.max.record.locks", "group.share.max.partition.max.record.locks",
			share(func(s *ShareGroupConfig) int32 { return s.MinPartitionMaxRecordLocks }), share(func(s *ShareGroupConfig) int32 { return s.MaxPartitionMaxRecordLocks }),
			"Share-group record lock limit per share-partition (Kafka 4.3, KIP-1240)."),
		{Name: "share.auto.offset.reset", Type: "string", Def: "latest",
			Doc:   "The strategy to initialize the share-partition start offset: earliest, latest, or by_duration:<ISO-8601 duration> (PnDTnHnMn.nS, not negative): the first record at or after now minus the duration.",
			check: func(v string) error { _, err := ParseShareOffsetReset(v); return err }},
		{Name: "share.isolation.level", Type: "string", Def: "read_uncommitted",
			Doc:   "Controls how to read records written transactionally: read_committed delivers only committed transactional records, read_uncommitted every record.",
			check: func(v string) error { _, err := ParseShareIsolationLevel(v); return err }},
		streams("streams.heartbeat.interval.ms"),
		streams("streams.initial.rebalance.delay.ms"),
		streams("streams.num.standby.replicas"),
		streams("streams.session.timeout.ms"),
	}
	slices.SortFunc(ks, func(a, b GroupKey) int { return cmp.Compare(a.Name, b.Name) })
	return ks
}()

// GroupKeys returns Kafka's group configs, the refused ones too, sorted by
// name. The caller owns the slice.
func GroupKeys() []GroupKey { return slices.Clone(groupKeys) }

// FindGroupKey finds a group config by name, nil if Kafka has none so
// named.
func FindGroupKey(name string) *GroupKey {
	i, ok := slices.BinarySearchFunc(groupKeys, name, func(k GroupKey, n string) int { return cmp.Compare(k.Name, n) })
	if !ok {
		return nil
	}
	return &groupKeys[i]
}

// checkGroupKey judges one value of a group key on its own: the key must
// be one Fjord serves, and the value must parse as its type within Kafka's
// fixed range. The broker's bounds are checkGroupConfigs'.
func checkGroupKey(key, value string) error {
	k := FindGroupKey(key)
	switch {
	case k == nil:
		return controller.ConfigError(kerr.InvalidConfig, "unknown group config name: %s", key)
	case k.Refused != "":
		return controller.ConfigError(kerr.InvalidConfig, "%s: %s", key, k.Refused)
	}
	if err := k.parse(value); err != nil {
		return controller.ConfigError(kerr.InvalidConfig, "%s: %v", key, err)
	}
	return nil
}

// parse checks v against the key's type and fixed range.
func (k *GroupKey) parse(v string) error {
	v = strings.TrimSpace(v)
	if k.check != nil {
		return k.check(v)
	}
	n, err := strconv.ParseInt(v, 10, 32)
	switch {
	case errors.Is(err, strconv.ErrRange):
		return fmt.Errorf("%q is out of range for a 32-bit integer", v)
	case err != nil:
		return fmt.Errorf("%q is not an integer", v)
	case n < int64(k.min):
		return fmt.Errorf("%d: must be >= %d", n, k.min)
	}
	return nil
}

// intValue is an int key's value; ok is false when v does not parse.
func intValue(v string) (int32, bool) {
	n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 32)
	return int32(n), err == nil
}

// checkGroupConfigs judges a group's whole resulting set of overrides
// against live, the active controller's running configuration: every
// int override within its broker bounds, and each group type's session
// timeout above its heartbeat interval (override, else default).
func checkGroupConfigs(live *Config, overrides map[string]string) error {
	for _, name := range slices.Sorted(maps.Keys(overrides)) {
		k := FindGroupKey(name)
		if k == nil || k.bounds == nil {
			continue
		}
		n, ok := intValue(overrides[name])
		if !ok {
			continue // Check refused it already, or it predates a change of type
		}
		lo, hi := k.bounds(live)
		if n < lo {
			return controller.ConfigError(kerr.InvalidConfig, "%s %d: must be greater than or equal to %s (%d)", name, n, k.loKey, lo)
		}
		if n > hi {
			return controller.ConfigError(kerr.InvalidConfig, "%s %d: must be less than or equal to %s (%d)", name, n, k.hiKey, hi)
		}
	}
	for _, pair := range [][2]string{
		{"consumer.session.timeout.ms", "consumer.heartbeat.interval.ms"},
		{"share.session.timeout.ms", "share.heartbeat.interval.ms"},
	} {
		_, setS := overrides[pair[0]]
		_, setH := overrides[pair[1]]
		if !setS && !setH {
			continue // the broker's own pair, checked at start-up
		}
		s, _ := intValue(effective(live, overrides, pair[0]))
		h, _ := intValue(effective(live, overrides, pair[1]))
		if s <= h {
			return controller.ConfigError(kerr.InvalidConfig, "%s (%d) must be greater than %s (%d)", pair[0], s, pair[1], h)
		}
	}
	return nil
}

// effective is key's value given a group's overrides: the override, else
// the default in live. The key must be in the table.
func effective(live *Config, overrides map[string]string, key string) string {
	if v, ok := overrides[key]; ok {
		return strings.TrimSpace(v)
	}
	return FindGroupKey(key).Default(live)
}

// GroupValue is the value group runs with for key on a node whose running
// configuration is live and whose image is img (nil: no overrides): the
// group's override, else the broker default. An int override outside this
// node's bounds (stored under another controller's wider bounds, or before
// a restart narrowed them) is capped into them, as Kafka's
// GroupConfig.evaluate does; an override that no longer parses falls back
// to the default. ok is false for a key Fjord does not serve.
func GroupValue(live *Config, img *controller.Image, group, key string) (v string, ok bool) {
	k := FindGroupKey(key)
	if k == nil || k.Refused != "" {
		return "", false
	}
	var stored string
	var has bool
	if img != nil {
		stored, has = img.GroupConfig(group, key)
	}
	if !has || k.parse(stored) != nil {
		return k.Default(live), true
	}
	if k.bounds == nil {
		return strings.TrimSpace(stored), true
	}
	n, _ := intValue(stored)
	lo, hi := k.bounds(live)
	return itoa(min(max(n, lo), hi)), true
}

// GroupSettings is what a group runs with: each field GroupValue of its
// key, parsed.
type GroupSettings struct {
	ConsumerSessionTimeoutMs     int32 // consumer.session.timeout.ms
	ConsumerHeartbeatIntervalMs  int32 // consumer.heartbeat.interval.ms
	ShareSessionTimeoutMs        int32 // share.session.timeout.ms
	ShareHeartbeatIntervalMs     int32 // share.heartbeat.interval.ms
	ShareRecordLockDurationMs    int32 // share.record.lock.duration.ms
	ShareDeliveryCountLimit      int32 // share.delivery.count.limit
	SharePartitionMaxRecordLocks int32 // share.partition.max.record.locks
	ShareAutoOffsetReset         ShareOffsetReset
	// ShareIsolationLevel is share.isolation.level as the protocol's
	// IsolationLevel: 0 read_uncommitted, 1 read_committed.
	ShareIsolationLevel int8
}

// GroupSettingsOf is group's settings on a node whose running
// configuration is live and whose image is img (nil: the defaults).
func GroupSettingsOf(live *Config, img *controller.Image, group string) GroupSettings {
	num := func(key string) int32 {
		v, _ := GroupValue(live, img, group, key)
		n, _ := intValue(v)
		return n
	}
	reset, _ := GroupValue(live, img, group, "share.auto.offset.reset")
	iso, _ := GroupValue(live, img, group, "share.isolation.level")
	s := GroupSettings{
		ConsumerSessionTimeoutMs:     num("consumer.session.timeout.ms"),
		ConsumerHeartbeatIntervalMs:  num("consumer.heartbeat.interval.ms"),
		ShareSessionTimeoutMs:        num("share.session.timeout.ms"),
		ShareHeartbeatIntervalMs:     num("share.heartbeat.interval.ms"),
		ShareRecordLockDurationMs:    num("share.record.lock.duration.ms"),
		ShareDeliveryCountLimit:      num("share.delivery.count.limit"),
		SharePartitionMaxRecordLocks: num("share.partition.max.record.locks"),
	}
	s.ShareAutoOffsetReset, _ = ParseShareOffsetReset(reset)
	s.ShareIsolationLevel, _ = ParseShareIsolationLevel(iso)
	return s
}

// ShareOffsetReset is a parsed share.auto.offset.reset: where a share
// partition's start offset goes when the group first reads it.
type ShareOffsetReset struct {
	// Strategy is "latest", "earliest" or "by_duration".
	Strategy string
	// Duration is by_duration's look-back: the start is the first record
	// whose timestamp is at or after now minus Duration. Zero otherwise.
	// Invariant: >= 0.
	Duration time.Duration
}

// ParseShareOffsetReset parses share.auto.offset.reset as Kafka does:
// "latest", "earliest" (any case) or "by_duration:" and an ISO-8601
// duration (java.time.Duration's PnDTnHnMn.nS, any case) that is not
// negative.
func ParseShareOffsetReset(v string) (ShareOffsetReset, error) {
	v = strings.TrimSpace(v)
	lower := strings.ToLower(v)
	switch {
	case lower == "latest", lower == "earliest":
		return ShareOffsetReset{Strategy: lower}, nil
	case strings.HasPrefix(lower, "by_duration:"):
		d, err := parseISODuration(v[len("by_duration:"):])
		if err != nil {
			return ShareOffsetReset{}, fmt.Errorf("%q: %v", v, err)
		}
		return ShareOffsetReset{Strategy: "by_duration", Duration: d}, nil
	}
	return ShareOffsetReset{}, fmt.Errorf("%q: the value must be either 'earliest', 'latest' or of the format 'by_duration:<PnDTnHnMn.nS>'", v)
}

// isoDuration is java.time.Duration.parse's grammar: an optional sign, P,
// days, then after T hours, minutes and seconds with up to nine decimals,
// each part optionally signed.
var isoDuration = regexp.MustCompile(`(?i)^([-+]?)P(?:([-+]?[0-9]+)D)?(T(?:([-+]?[0-9]+)H)?(?:([-+]?[0-9]+)M)?(?:([-+]?[0-9]+)(?:[.,]([0-9]{0,9}))?S)?)?$`)

// parseISODuration parses an ISO-8601 duration as java.time.Duration does
// and refuses a negative one (Kafka's rule for by_duration). A duration
// beyond what time.Duration holds (about 292 years) is refused too.
func parseISODuration(s string) (time.Duration, error) {
	m := isoDuration.FindStringSubmatch(s)
	if m == nil || (m[2] == "" && m[3] == "") || (m[3] != "" && m[4] == "" && m[5] == "" && m[6] == "") {
		return 0, fmt.Errorf("%q is not an ISO-8601 duration (PnDTnHnMn.nS)", s)
	}
	const limit = math.MaxInt64
	// The sum in floating point judges the sign and the range (exactness
	// beyond 2^53 ns, 104 days, is not needed for that); exactISODuration
	// then sums in integers, which no part can overflow.
	var total float64
	tooBig := false
	part := func(digits string, unit time.Duration) {
		if digits == "" {
			return
		}
		n, _ := strconv.ParseFloat(digits, 64)
		ns := n * float64(unit)
		tooBig = tooBig || math.Abs(ns) >= limit
		total += ns
	}
	part(m[2], 24*time.Hour)
	part(m[4], time.Hour)
	part(m[5], time.Minute)
	part(m[6], time.Second)
	if m[7] != "" {
		frac, _ := strconv.ParseFloat("0."+m[7], 64)
		if strings.HasPrefix(m[6], "-") {
			frac = -frac
		}
		total += frac * float64(time.Second)
	}
	if m[1] == "-" {
		total = -total
	}
	switch {
	case total < 0:
		return 0, fmt.Errorf("%q: a negative duration is not allowed", s)
	case total >= limit, tooBig:
		return 0, fmt.Errorf("%q is longer than Fjord can hold (about 292 years)", s)
	}
	return exactISODuration(m), nil
}

// exactISODuration sums the matched parts in integer nanoseconds, once
// parseISODuration has checked the total is in range.
func exactISODuration(m []string) time.Duration {
	num := func(s string) time.Duration { n, _ := strconv.ParseInt(s, 10, 64); return time.Duration(n) }
	d := num(m[2])*24*time.Hour + num(m[4])*time.Hour + num(m[5])*time.Minute + num(m[6])*time.Second
	if m[7] != "" {
		ns := num((m[7] + "000000000")[:9])
		if strings.HasPrefix(m[6], "-") {
			ns = -ns
		}
		d += ns
	}
	if m[1] == "-" {
		d = -d
	}
	return d
}

// ParseShareIsolationLevel parses share.isolation.level, exactly
// read_uncommitted (0) or read_committed (1) as Kafka's ValidString.
func ParseShareIsolationLevel(v string) (int8, error) {
	switch strings.TrimSpace(v) {
	case "read_uncommitted":
		return 0, nil
	case "read_committed":
		return 1, nil
	}
	return 0, fmt.Errorf("%q is not one of [read_committed, read_uncommitted]", v)
}
