package config

import (
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/fjordlog/fjord/controller"
)

// Kafka's rules between a tiered topic's configs (LogConfig's
// validateTopicLogConfigValues and validateTurningOffRemoteStorageWithDelete,
// Kafka 3.9), with Kafka's messages, so a script written against Kafka
// reads the same refusal. They are judged on the topic's effective
// configs (its overrides over the running broker defaults) whenever a
// topic is created or its configs change; Check (one key at a time)
// cannot see them.

// Kafka's refusals, word for word.
const (
	msgTieringDisabled = "Tiered Storage functionality is disabled in the broker. Topic cannot be configured with remote log storage."
	msgTieredCompacted = "Remote log storage is unsupported for the compacted topics"
	msgTieringTurnOff  = "It is invalid to disable remote storage without deleting remote data. " +
		"If you want to keep the remote data and turn to read only, please set `remote.storage.enable=true,remote.log.copy.disable=true`. " +
		"If you want to disable remote storage and delete all remote data, please set `remote.storage.enable=false,remote.log.delete.on.disable=true`."
)

// CheckTieredTopic judges a topic's overrides next (old: before the
// change; nil at creation) under the running configuration c. It returns
// nil when the topic is not tiered after the change and was not before.
//
// Turning remote.storage.enable from true to false is refused outright:
// Kafka 3.9 allows it only with remote.log.delete.on.disable=true (or
// keeps the data read-only with remote.log.copy.disable=true), neither of
// which Fjord implements, and without them the copied records would
// silently stop being readable. The message is Kafka's, with what Fjord
// lacks said after it.
func CheckTieredTopic(c *Config, old, next map[string]string) error {
	get := func(m map[string]string, name string) string {
		v, _ := FindTopicKey(name).Effective(c, m)
		return strings.TrimSpace(v)
	}
	tiered := func(m map[string]string) bool { return strings.EqualFold(get(m, "remote.storage.enable"), "true") }
	if old != nil && tiered(old) && !tiered(next) {
		return controller.ConfigError(kerr.InvalidConfig, "%s Fjord implements neither remote.log.copy.disable nor remote.log.delete.on.disable yet, so remote.storage.enable stays true (delete the topic to remove its remote data)", msgTieringTurnOff)
	}
	if !tiered(next) {
		return nil
	}
	// A topic already tiered on a node that no longer has the system
	// enabled is kept as it is (Kafka's broker refuses to start then);
	// only turning it on is refused, so other changes to such a topic
	// still go through.
	if !c.Remote.Enable && (old == nil || !tiered(old)) {
		return controller.ConfigError(kerr.InvalidConfig, "%s", msgTieringDisabled)
	}
	if strings.Contains(strings.ToLower(get(next, "cleanup.policy")), "compact") {
		return controller.ConfigError(kerr.InvalidConfig, "%s", msgTieredCompacted)
	}
	for _, k := range [][2]string{{"local.retention.bytes", "retention.bytes"}, {"local.retention.ms", "retention.ms"}} {
		local, _ := strconv.ParseInt(get(next, k[0]), 10, 64)
		total, _ := strconv.ParseInt(get(next, k[1]), 10, 64)
		if total <= -1 || local == FollowRetention {
			continue
		}
		switch {
		case local == -1:
			return controller.ConfigError(kerr.InvalidConfig, "Invalid value %d for configuration %s: Value must not be -1 as %s value is set as %d.", local, k[0], k[1], total)
		case local > total:
			return controller.ConfigError(kerr.InvalidConfig, "Invalid value %d for configuration %s: Value must not be more than %s property value: %d", local, k[0], k[1], total)
		}
	}
	return nil
}
