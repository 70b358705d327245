package config

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/fjordlog/fjord/broker/config/catalogue"
	"github.com/fjordlog/fjord/broker/quota"
	"github.com/fjordlog/fjord/broker/replica"
	"github.com/fjordlog/fjord/storage"
)

// ErrInvalidConfig marks a topic config that CreateTopics refuses with
// INVALID_CONFIG (the broker's errorCode). Its text is the one clients
// have always been sent, kept as it was when it lived in the broker.
var ErrInvalidConfig = errors.New("broker: invalid config")

// TopicKey is one supported topic-level config: its Kafka name, the
// broker property it defaults to, and how to check a value.
type TopicKey struct {
	Name string
	// BrokerKey is the broker key whose running value is the topic's
	// default; "" for a key with a fixed default.
	BrokerKey string
	def       func(c *Config) string
	check     func(v string) error
}

func isInt(min int64) func(string) error {
	return func(v string) error {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < min {
			return fmt.Errorf("%q is not an integer >= %d", v, min)
		}
		return nil
	}
}

func oneOf(vals ...string) func(string) error {
	return func(v string) error {
		for _, ok := range vals {
			if v == ok {
				return nil
			}
		}
		return fmt.Errorf("%q is not one of %v", v, vals)
	}
}

func itoa[T ~int16 | ~int32 | ~int64](n T) string { return strconv.FormatInt(int64(n), 10) }

// topicKeys lists every topic config Fjord accepts, sorted by name.
var topicKeys = []TopicKey{
	{"cleanup.policy", "log.cleanup.policy", func(c *Config) string { return c.CleanupPolicy }, oneOf("delete", "compact", "compact,delete", "delete,compact")},
	{"compression.type", "compression.type", func(*Config) string { return "producer" }, oneOf("producer")},
	{"delete.retention.ms", "log.cleaner.delete.retention.ms", func(*Config) string { return "86400000" }, isInt(0)},
	{"fjord.produce.acks.all.required", "", func(*Config) string { return "false" }, oneOf("true", "false")},
	{"fjord.transactional.writes.required", "", func(*Config) string { return "false" }, oneOf("true", "false")},
	{"flush.messages", "log.flush.interval.messages", func(c *Config) string { return itoa(c.FlushMessages) }, isInt(1)},
	{"flush.ms", "log.flush.interval.ms", func(c *Config) string { return itoa(c.FlushMs) }, isInt(1)},
	{"follower.replication.throttled.replicas", "", func(*Config) string { return "" }, quota.CheckList},
	{"index.interval.bytes", "log.index.interval.bytes", func(c *Config) string { return itoa(c.IndexIntervalBytes) }, isInt(0)},
	{"leader.replication.throttled.replicas", "", func(*Config) string { return "" }, quota.CheckList},
	{"local.retention.bytes", "log.local.retention.bytes", func(c *Config) string { return itoa(c.Remote.LocalRetentionBytes) }, isInt(FollowRetention)},
	{"local.retention.ms", "log.local.retention.ms", func(c *Config) string { return itoa(c.Remote.LocalRetentionMs) }, isInt(FollowRetention)},
	{"max.message.bytes", "message.max.bytes", func(c *Config) string { return itoa(c.MessageMaxBytes) }, isInt(64)},
	{"message.timestamp.type", "log.message.timestamp.type", func(c *Config) string { return c.MessageTimestampType }, oneOf("CreateTime", "LogAppendTime")},
	{"min.insync.replicas", "min.insync.replicas", func(c *Config) string { return itoa(c.MinInsyncReplicas) }, isInt(1)},
	{"remote.storage.enable", "", func(*Config) string { return "false" }, oneOf("true", "false")},
	{"retention.bytes", "log.retention.bytes", func(c *Config) string { return itoa(c.RetentionBytes) }, isInt(-1)},
	{"retention.ms", "log.retention.ms", func(c *Config) string { return itoa(c.RetentionMs) }, isInt(-1)},
	{"segment.bytes", "log.segment.bytes", func(c *Config) string { return itoa(c.SegmentBytes) }, isInt(1024)},
	{"segment.ms", "log.roll.ms", func(c *Config) string { return itoa(c.SegmentMs) }, isInt(1)},
	{"unclean.leader.election.enable", "unclean.leader.election.enable", func(*Config) string { return "false" }, oneOf("false")},
}

// TopicKeys returns every topic config Fjord implements, sorted by name.
// The caller owns the slice.
func TopicKeys() []TopicKey { return slices.Clone(topicKeys) }

// FindTopicKey is the topic config named name, nil when Fjord does not
// implement it. The result is shared: read-only.
func FindTopicKey(name string) *TopicKey {
	i := sort.Search(len(topicKeys), func(i int) bool { return topicKeys[i].Name >= name })
	if i < len(topicKeys) && topicKeys[i].Name == name {
		return &topicKeys[i]
	}
	return nil
}

// ValidateTopicConfigs checks overrides given at creation. A Kafka topic
// key Fjord does not implement is accepted (and kept with the topic) when
// ignoring it is safe, and refused with INVALID_CONFIG otherwise; a key
// that is not Kafka's is refused.
func ValidateTopicConfigs(m map[string]string) error {
	for k, v := range m {
		d := FindTopicKey(k)
		if d == nil {
			verdict, known := catalogue.Classify(catalogue.Topic, k, v)
			switch {
			case !known:
				return fmt.Errorf("%w: unknown topic config %q", ErrInvalidConfig, k)
			case verdict.Class == catalogue.Refused:
				return fmt.Errorf("%w: %s=%s: %s", ErrInvalidConfig, k, v, verdict.Why)
			}
			if key, ok := catalogue.Lookup(catalogue.Topic, k); ok {
				if err := catalogue.CheckValue(key, v); err != nil {
					return fmt.Errorf("%w: %s: %v", ErrInvalidConfig, k, err)
				}
			}
			continue
		}
		if err := d.check(v); err != nil {
			return fmt.Errorf("%w: %s: %v", ErrInvalidConfig, k, err)
		}
	}
	return nil
}

// UnsupportedTopicConfigs names the overrides that Fjord accepts without
// acting on them, with why, for a warning.
func UnsupportedTopicConfigs(m map[string]string) []string {
	var out []string
	for k, v := range m {
		if FindTopicKey(k) != nil {
			continue
		}
		if verdict, ok := catalogue.Classify(catalogue.Topic, k, v); ok && verdict.Class == catalogue.Unsupported {
			out = append(out, k+": "+verdict.Why)
		}
	}
	sort.Strings(out)
	return out
}

// TopicConfigNames lists the topic configs Fjord implements, sorted, each
// with the broker key it defaults to.
func TopicConfigNames() [][2]string {
	out := make([][2]string, len(topicKeys))
	for i, d := range topicKeys {
		out[i] = [2]string{d.Name, d.BrokerKey}
	}
	return out
}

// Effective is the key's value for a topic with the given overrides under
// the running broker configuration c, and whether it is an override.
func (k *TopicKey) Effective(c *Config, overrides map[string]string) (string, bool) {
	if v, ok := overrides[k.Name]; ok {
		return v, true
	}
	return k.def(c), false
}

// SettingsFor is a topic's effective configuration, parsed for its
// replicas.
func SettingsFor(c *Config, overrides map[string]string) replica.Settings {
	get := func(name string) string {
		v, _ := FindTopicKey(name).Effective(c, overrides)
		return v
	}
	num := func(name string) int64 {
		n, _ := strconv.ParseInt(get(name), 10, 64)
		return n
	}
	return replica.Settings{
		Storage: storage.Config{
			SegmentBytes:         num("segment.bytes"),
			SegmentMs:            num("segment.ms"),
			IndexIntervalBytes:   int32(num("index.interval.bytes")),
			RetentionMs:          num("retention.ms"),
			RetentionBytes:       num("retention.bytes"),
			LogAppendTime:        get("message.timestamp.type") == "LogAppendTime",
			Compacted:            strings.Contains(get("cleanup.policy"), "compact"),
			FileDeleteDelay:      time.Minute,
			ProducerExpirationMs: c.ProducerIDExpirationMs,
			Tier: storage.TierRetention{
				Enabled:             get("remote.storage.enable") == "true",
				LocalRetentionMs:    num("local.retention.ms"),
				LocalRetentionBytes: num("local.retention.bytes"),
			},
		},
		FlushMessages:     num("flush.messages"),
		FlushMs:           num("flush.ms"),
		MaxBatchBytes:     int(num("max.message.bytes")),
		MinISR:            int32(num("min.insync.replicas")),
		DeleteRetentionMs: num("delete.retention.ms"),
		TxnRequired:       get("fjord.transactional.writes.required") == "true",
		AcksAllRequired:   get("fjord.produce.acks.all.required") == "true",
	}
}
