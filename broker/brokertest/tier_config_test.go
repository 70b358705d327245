package brokertest

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/fjordlog/fjord/storage/remote"
)

// TestTierConfigRules: Kafka 3.9's rules for tiered topics through kadm,
// answered INVALID_CONFIG with Kafka's messages: remote.storage.enable on
// a node without remote.log.storage.system.enable, on a compacted topic,
// local.retention.* above retention.* (at creation and by an alter), and
// turning a tiered topic's remote.storage.enable off.
func TestTierConfigRules(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	start := func(store remote.Store) *kadm.Client {
		c, err := Start(Options{Nodes: 1, Dir: t.TempDir(), RemoteStore: store})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return kadm.NewClient(producer(t, c, "x"))
	}
	type cfg = map[string]*string
	create := func(adm *kadm.Client, topic string, configs cfg, want string) {
		t.Helper()
		// kadm returns the topic's error as err too.
		res, err := adm.CreateTopic(ctx, 1, 1, configs, topic)
		if err != nil && res.Err == nil {
			t.Fatal(err)
		}
		switch {
		case want == "" && res.Err != nil:
			t.Errorf("create %s: %v %s", topic, res.Err, res.ErrMessage)
		case want != "" && (!errors.Is(res.Err, kerr.InvalidConfig) || !strings.Contains(res.ErrMessage, want)):
			t.Errorf("create %s: %v %q; want INVALID_CONFIG %q", topic, res.Err, res.ErrMessage, want)
		}
	}
	alter := func(adm *kadm.Client, topic string, want string, cs ...kadm.AlterConfig) {
		t.Helper()
		rs, err := adm.AlterTopicConfigs(ctx, cs, topic)
		if err != nil || len(rs) != 1 {
			t.Fatal(err)
		}
		switch {
		case want == "" && rs[0].Err != nil:
			t.Errorf("alter %s %v: %v %s", topic, cs, rs[0].Err, rs[0].ErrMessage)
		case want != "" && (!errors.Is(rs[0].Err, kerr.InvalidConfig) || !strings.Contains(rs[0].ErrMessage, want)):
			t.Errorf("alter %s %v: %v %q; want INVALID_CONFIG %q", topic, cs, rs[0].Err, rs[0].ErrMessage, want)
		}
	}
	set := func(k, v string) kadm.AlterConfig { return kadm.AlterConfig{Name: k, Value: kadm.StringPtr(v)} }
	on := kadm.StringPtr("true")

	plain := start(nil)
	create(plain, "t", cfg{"remote.storage.enable": on}, "Tiered Storage functionality is disabled in the broker. Topic cannot be configured with remote log storage.")
	create(plain, "u", cfg{"retention.ms": kadm.StringPtr("60000")}, "")
	alter(plain, "u", "Tiered Storage functionality is disabled in the broker.", set("remote.storage.enable", "true"))

	adm := start(remote.NewMemStore())
	create(adm, "c", cfg{"remote.storage.enable": on, "cleanup.policy": kadm.StringPtr("compact")}, "Remote log storage is unsupported for the compacted topics")
	create(adm, "b", cfg{"remote.storage.enable": on, "retention.bytes": kadm.StringPtr("1000"), "local.retention.bytes": kadm.StringPtr("2000")},
		"Invalid value 2000 for configuration local.retention.bytes: Value must not be more than retention.bytes property value: 1000")
	create(adm, "m", cfg{"remote.storage.enable": on, "retention.ms": kadm.StringPtr("60000"), "local.retention.ms": kadm.StringPtr("-1")},
		"Invalid value -1 for configuration local.retention.ms: Value must not be -1 as retention.ms value is set as 60000.")
	create(adm, "tiered", cfg{"remote.storage.enable": on, "retention.bytes": kadm.StringPtr("10000"), "local.retention.bytes": kadm.StringPtr("2000")}, "")
	alter(adm, "tiered", "Value must not be more than retention.bytes property value: 1000", set("retention.bytes", "1000"))
	alter(adm, "tiered", "Remote log storage is unsupported for the compacted topics", set("cleanup.policy", "compact"))
	alter(adm, "tiered", "It is invalid to disable remote storage without deleting remote data.", set("remote.storage.enable", "false"))
	alter(adm, "tiered", "", set("retention.bytes", "3000"))
	create(adm, "later", nil, "")
	alter(adm, "later", "", set("remote.storage.enable", "true"))
}
