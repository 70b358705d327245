package config

import (
	"strings"
	"testing"
)

// TestCheckTieredTopic: Kafka 3.9's rules between a tiered topic's
// configs, with Kafka's messages, on effective values (the broker's
// defaults fill what the topic does not set).
func TestCheckTieredTopic(t *testing.T) {
	on := Default()
	on.Remote.Enable = true
	off := Default()
	compactByDefault := on
	compactByDefault.CleanupPolicy = "compact"
	m := func(kv ...string) map[string]string {
		out := map[string]string{}
		for i := 0; i < len(kv); i += 2 {
			out[kv[i]] = kv[i+1]
		}
		return out
	}
	for _, tc := range []struct {
		name      string
		c         *Config
		old, next map[string]string
		want      string // "" accepted, else a part of the message
	}{
		{"untiered, tiering off", &off, nil, m("retention.ms", "1000"), ""},
		{"tiered, tiering off", &off, nil, m("remote.storage.enable", "true"), "Tiered Storage functionality is disabled in the broker. Topic cannot be configured with remote log storage."},
		{"turned on by an alter, tiering off", &off, m(), m("remote.storage.enable", "true"), "Tiered Storage functionality is disabled"},
		{"already tiered, tiering off, another key changes", &off, m("remote.storage.enable", "true"), m("remote.storage.enable", "true", "retention.ms", "5000"), ""},
		{"tiered", &on, nil, m("remote.storage.enable", "true", "local.retention.bytes", "1024"), ""},
		{"tiered compacted", &on, nil, m("remote.storage.enable", "true", "cleanup.policy", "compact,delete"), "Remote log storage is unsupported for the compacted topics"},
		{"tiered, compact by the broker's default", &compactByDefault, nil, m("remote.storage.enable", "true"), "unsupported for the compacted topics"},
		{"tiered, compacted by an alter", &on, m("remote.storage.enable", "true"), m("remote.storage.enable", "true", "cleanup.policy", "compact"), "compacted"},
		{"local bytes above total", &on, nil, m("remote.storage.enable", "true", "retention.bytes", "1000", "local.retention.bytes", "2000"),
			"Invalid value 2000 for configuration local.retention.bytes: Value must not be more than retention.bytes property value: 1000"},
		{"local bytes unbounded, total bounded", &on, nil, m("remote.storage.enable", "true", "retention.bytes", "1000", "local.retention.bytes", "-1"),
			"Invalid value -1 for configuration local.retention.bytes: Value must not be -1 as retention.bytes value is set as 1000."},
		{"local ms above total", &on, nil, m("remote.storage.enable", "true", "retention.ms", "60000", "local.retention.ms", "60001"),
			"Invalid value 60001 for configuration local.retention.ms: Value must not be more than retention.ms property value: 60000"},
		{"local ms following total", &on, nil, m("remote.storage.enable", "true", "retention.ms", "60000", "local.retention.ms", "-2"), ""},
		{"local equal to total", &on, nil, m("remote.storage.enable", "true", "retention.bytes", "1000", "local.retention.bytes", "1000"), ""},
		{"total unbounded", &on, nil, m("remote.storage.enable", "true", "retention.bytes", "-1", "local.retention.bytes", "99999"), ""},
		{"untiered, local above total", &on, nil, m("retention.bytes", "1000", "local.retention.bytes", "2000"), ""},
		{"turned off", &on, m("remote.storage.enable", "true"), m("remote.storage.enable", "false"), "It is invalid to disable remote storage without deleting remote data."},
		{"turned off by deleting the key", &on, m("remote.storage.enable", "true"), m(), "remote.log.delete.on.disable=true"},
		{"untiered stays untiered", &on, m("remote.storage.enable", "false"), m("retention.ms", "1"), ""},
	} {
		err := CheckTieredTopic(tc.c, tc.old, tc.next)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: refused: %v", tc.name, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
}
