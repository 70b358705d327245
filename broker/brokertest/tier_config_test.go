package brokertest

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/fjordlog/fjord/broker/config"
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

// TestTierConfigCompactByDefault: a topic that leaves cleanup.policy unset
// on a cluster whose log.cleanup.policy is compact is compacted, so Kafka
// refuses remote.storage.enable=true on it, at creation and by an alter;
// cleanup.policy=delete on the topic itself makes it acceptable.
func TestTierConfigCompactByDefault(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := Start(Options{Nodes: 1, Dir: t.TempDir(), RemoteStore: remote.NewMemStore(),
		Configure: func(_ int32, c *config.Config) { c.CleanupPolicy = "compact" }})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	adm := kadm.NewClient(producer(t, c, "x"))
	const msg = "Remote log storage is unsupported for the compacted topics"
	on := kadm.StringPtr("true")

	res, err := adm.CreateTopic(ctx, 1, 1, map[string]*string{"remote.storage.enable": on}, "by-default")
	if !errors.Is(res.Err, kerr.InvalidConfig) || res.ErrMessage != msg {
		t.Errorf("tiered topic compacted by the broker's default: %v %v %q; want INVALID_CONFIG %q", err, res.Err, res.ErrMessage, msg)
	}
	res, err = adm.CreateTopic(ctx, 1, 1, map[string]*string{"remote.storage.enable": on, "cleanup.policy": kadm.StringPtr("delete")}, "deleting")
	if err != nil || res.Err != nil {
		t.Errorf("tiered topic with cleanup.policy=delete: %v %v %q", err, res.Err, res.ErrMessage)
	}

	if res, err := adm.CreateTopic(ctx, 1, 1, nil, "plain"); err != nil || res.Err != nil {
		t.Fatalf("create plain: %v %v", err, res.Err)
	}
	for _, alter := range []struct {
		name string
		do   func() (kadm.AlterConfigsResponses, error)
	}{
		{"incremental", func() (kadm.AlterConfigsResponses, error) {
			return adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Name: "remote.storage.enable", Value: on}}, "plain")
		}},
		{"legacy", func() (kadm.AlterConfigsResponses, error) {
			return adm.AlterTopicConfigsState(ctx, []kadm.AlterConfig{{Name: "remote.storage.enable", Value: on}}, "plain")
		}},
	} {
		rs, err := alter.do()
		if err != nil || len(rs) != 1 {
			t.Fatalf("%s alter: %v %v", alter.name, rs, err)
		}
		if !errors.Is(rs[0].Err, kerr.InvalidConfig) || rs[0].ErrMessage != msg {
			t.Errorf("%s alter turning tiering on, compacted by the broker's default: %v %q; want INVALID_CONFIG %q", alter.name, rs[0].Err, rs[0].ErrMessage, msg)
		}
	}
	rs, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Name: "remote.storage.enable", Value: on}, {Name: "cleanup.policy", Value: kadm.StringPtr("delete")}}, "plain")
	if err != nil || len(rs) != 1 || rs[0].Err != nil {
		t.Errorf("alter turning tiering on with cleanup.policy=delete: %v %v", rs, err)
	}

	// The effective default is the running one: a dynamic cluster-wide
	// log.cleanup.policy=delete outranks the static compact, once the
	// controller has applied it.
	if rs, err := adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{{Name: "log.cleanup.policy", Value: kadm.StringPtr("delete")}}); err != nil || rs[0].Err != nil {
		t.Fatalf("set the cluster default log.cleanup.policy=delete: %v %v", rs, err)
	}
	for {
		res, err := adm.CreateTopic(ctx, 1, 1, map[string]*string{"remote.storage.enable": on}, "dynamic-delete")
		if err == nil && res.Err == nil {
			break
		}
		if !errors.Is(res.Err, kerr.InvalidConfig) || ctx.Err() != nil {
			t.Fatalf("tiered topic under a dynamic default log.cleanup.policy=delete: %v %v %q", err, res.Err, res.ErrMessage)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
