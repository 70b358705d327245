package broker

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/fjordlog/fjord/broker/config/catalogue"
	"github.com/fjordlog/fjord/broker/quota"
	"github.com/fjordlog/fjord/broker/replica"
	"github.com/fjordlog/fjord/storage"
)

// topicConfigDef is one supported topic-level config: its Kafka name, the
// broker property it defaults to, and how to check a value.
type topicConfigDef struct {
	name      string
	brokerKey string
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

// topicConfigDefs lists every topic config Fjord accepts, sorted by name.
var topicConfigDefs = []topicConfigDef{
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
	{"max.message.bytes", "message.max.bytes", func(c *Config) string { return itoa(c.MessageMaxBytes) }, isInt(64)},
	{"message.timestamp.type", "log.message.timestamp.type", func(c *Config) string { return c.MessageTimestampType }, oneOf("CreateTime", "LogAppendTime")},
	{"min.insync.replicas", "min.insync.replicas", func(c *Config) string { return itoa(c.MinInsyncReplicas) }, isInt(1)},
	{"retention.bytes", "log.retention.bytes", func(c *Config) string { return itoa(c.RetentionBytes) }, isInt(-1)},
	{"retention.ms", "log.retention.ms", func(c *Config) string { return itoa(c.RetentionMs) }, isInt(-1)},
	{"segment.bytes", "log.segment.bytes", func(c *Config) string { return itoa(c.SegmentBytes) }, isInt(1024)},
	{"segment.ms", "log.roll.ms", func(c *Config) string { return itoa(c.SegmentMs) }, isInt(1)},
	{"unclean.leader.election.enable", "unclean.leader.election.enable", func(*Config) string { return "false" }, oneOf("false")},
}

func findTopicConfig(name string) *topicConfigDef {
	i := sort.Search(len(topicConfigDefs), func(i int) bool { return topicConfigDefs[i].name >= name })
	if i < len(topicConfigDefs) && topicConfigDefs[i].name == name {
		return &topicConfigDefs[i]
	}
	return nil
}

// validateTopicConfigs checks overrides given at creation. A Kafka topic
// key Fjord does not implement is accepted (and kept with the topic) when
// ignoring it is safe, and refused with INVALID_CONFIG otherwise; a key
// that is not Kafka's is refused.
func validateTopicConfigs(m map[string]string) error {
	for k, v := range m {
		d := findTopicConfig(k)
		if d == nil {
			verdict, known := catalogue.Classify(catalogue.Topic, k, v)
			switch {
			case !known:
				return fmt.Errorf("%w: unknown topic config %q", errInvalidConfig, k)
			case verdict.Class == catalogue.Refused:
				return fmt.Errorf("%w: %s=%s: %s", errInvalidConfig, k, v, verdict.Why)
			}
			if key, ok := catalogue.Lookup(catalogue.Topic, k); ok {
				if err := catalogue.CheckValue(key, v); err != nil {
					return fmt.Errorf("%w: %s: %v", errInvalidConfig, k, err)
				}
			}
			continue
		}
		if err := d.check(v); err != nil {
			return fmt.Errorf("%w: %s: %v", errInvalidConfig, k, err)
		}
	}
	return nil
}

// unsupportedTopicConfigs names the overrides that Fjord accepts without
// acting on them, with why, for a warning.
func unsupportedTopicConfigs(m map[string]string) []string {
	var out []string
	for k, v := range m {
		if findTopicConfig(k) != nil {
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
	out := make([][2]string, len(topicConfigDefs))
	for i, d := range topicConfigDefs {
		out[i] = [2]string{d.name, d.brokerKey}
	}
	return out
}

// effectiveValue is a config's value for a topic and whether it is an override.
func effectiveValue(c *Config, overrides map[string]string, d *topicConfigDef) (string, bool) {
	if v, ok := overrides[d.name]; ok {
		return v, true
	}
	return d.def(c), false
}

// settingsFor is a topic's effective configuration, parsed for its
// replicas.
func settingsFor(c *Config, overrides map[string]string) replica.Settings {
	get := func(name string) string {
		v, _ := effectiveValue(c, overrides, findTopicConfig(name))
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
