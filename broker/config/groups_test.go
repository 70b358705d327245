package config

import (
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordlog/fjord/controller"
)

// alterGroup decides one IncrementalAlterConfigs-like change of group g
// with the policy of a node running live, applies it to img and returns
// the new image, the error code and message.
func alterGroup(t *testing.T, img *controller.Image, live *Config, g string, ops ...controller.ConfigAlteration) (*controller.Image, int16, string) {
	t.Helper()
	r := controller.AlterConfigs(img, []controller.ConfigChange{{Resource: controller.GroupResource(g), Ops: ops}}, Policy(func() *Config { return live }))[0]
	if r.ErrorCode != 0 || len(r.Records) == 0 {
		return img, r.ErrorCode, r.Message
	}
	next, err := img.Apply(img.Version()+1, controller.NewBatch(r.Records))
	if err != nil {
		t.Fatalf("apply %v: %v", r.Records, err)
	}
	return next, 0, ""
}

func setOp(k, v string) controller.ConfigAlteration {
	return controller.ConfigAlteration{Key: k, Op: controller.OpSet, Value: &v}
}
func delOp(k string) controller.ConfigAlteration {
	return controller.ConfigAlteration{Key: k, Op: controller.OpDelete}
}

// TestGroupConfigPolicy: what the active controller accepts for a group,
// key by key and as a whole, with Kafka's error codes and a message naming
// the key (and the bound).
func TestGroupConfigPolicy(t *testing.T) {
	live := Default()
	cases := []struct {
		name string
		ops  []controller.ConfigAlteration
		code int16
		msg  string // a part of the message
	}{
		{"share keys", []controller.ConfigAlteration{setOp("share.auto.offset.reset", "earliest"), setOp("share.isolation.level", "read_committed"),
			setOp("share.record.lock.duration.ms", "15000"), setOp("share.delivery.count.limit", "10"), setOp("share.partition.max.record.locks", "100")}, 0, ""},
		{"consumer keys at their bounds", []controller.ConfigAlteration{setOp("consumer.session.timeout.ms", "60000"), setOp("consumer.heartbeat.interval.ms", "15000")}, 0, ""},
		{"by_duration", []controller.ConfigAlteration{setOp("share.auto.offset.reset", "by_duration:P1DT2H")}, 0, ""},
		{"unknown key", []controller.ConfigAlteration{setOp("share.fetch.max", "1")}, kerr.InvalidConfig.Code, "unknown group config name: share.fetch.max"},
		{"a Kafka 4.3 key Fjord does not serve", []controller.ConfigAlteration{setOp("share.renew.acknowledge.enable", "true")}, kerr.InvalidConfig.Code, "unknown group config name"},
		{"a topic key", []controller.ConfigAlteration{setOp("retention.ms", "1")}, kerr.InvalidConfig.Code, "unknown group config name"},
		{"streams", []controller.ConfigAlteration{setOp("streams.num.standby.replicas", "1")}, kerr.InvalidConfig.Code, "no streams groups"},
		{"not an int", []controller.ConfigAlteration{setOp("consumer.session.timeout.ms", "soon")}, kerr.InvalidConfig.Code, "consumer.session.timeout.ms"},
		{"beyond 32 bits", []controller.ConfigAlteration{setOp("share.session.timeout.ms", "3000000000")}, kerr.InvalidConfig.Code, "32-bit"},
		{"below Kafka's fixed minimum", []controller.ConfigAlteration{setOp("share.record.lock.duration.ms", "999")}, kerr.InvalidConfig.Code, ">= 1000"},
		{"below the broker bound", []controller.ConfigAlteration{setOp("consumer.session.timeout.ms", "44999")}, kerr.InvalidConfig.Code,
			"consumer.session.timeout.ms 44999: must be greater than or equal to group.consumer.min.session.timeout.ms (45000)"},
		{"above the broker bound", []controller.ConfigAlteration{setOp("share.delivery.count.limit", "11")}, kerr.InvalidConfig.Code,
			"group.share.max.delivery.count.limit (10)"},
		{"share session and heartbeat at their bounds", []controller.ConfigAlteration{setOp("share.session.timeout.ms", "45000"), setOp("share.heartbeat.interval.ms", "15000")}, 0, ""},
		{"bad reset", []controller.ConfigAlteration{setOp("share.auto.offset.reset", "none")}, kerr.InvalidConfig.Code, "by_duration:<PnDTnHnMn.nS>"},
		{"negative duration", []controller.ConfigAlteration{setOp("share.auto.offset.reset", "by_duration:-PT1H")}, kerr.InvalidConfig.Code, "negative"},
		{"isolation level is exact", []controller.ConfigAlteration{setOp("share.isolation.level", "READ_COMMITTED")}, kerr.InvalidConfig.Code, "read_committed"},
		{"append", []controller.ConfigAlteration{{Key: "share.auto.offset.reset", Op: controller.OpAppend, Value: strp("x")}}, kerr.InvalidConfig.Code, "list"},
	}
	for _, tc := range cases {
		_, code, msg := alterGroup(t, &controller.Image{}, &live, "g", tc.ops...)
		if code != tc.code || !strings.Contains(msg, tc.msg) {
			t.Errorf("%s: code %d %q; want %d containing %q", tc.name, code, msg, tc.code, tc.msg)
		}
	}

	// The session must exceed the heartbeat as the group will run: an
	// override against the other's default, and a delete that leaves an
	// override against the default.
	live.ConsumerSessionMs, live.ConsumerHeartbeatMs = 6000, 250 // as compat tests run
	live.ConsumerMinHeartbeatMs = 100
	img := &controller.Image{}
	if _, code, msg := alterGroup(t, img, &live, "g", setOp("consumer.heartbeat.interval.ms", "6000")); code != kerr.InvalidConfig.Code ||
		msg != "consumer.session.timeout.ms (6000) must be greater than consumer.heartbeat.interval.ms (6000)" {
		t.Errorf("heartbeat = default session: %d %q", code, msg)
	}
	img, code, msg := alterGroup(t, img, &live, "g", setOp("consumer.session.timeout.ms", "50000"), setOp("consumer.heartbeat.interval.ms", "10000"))
	if code != 0 {
		t.Fatalf("session 50000 heartbeat 10000: %d %q", code, msg)
	}
	if _, code, msg := alterGroup(t, img, &live, "g", delOp("consumer.session.timeout.ms")); code != kerr.InvalidConfig.Code || !strings.Contains(msg, "(6000) must be greater") {
		t.Errorf("deleting the session override under a heartbeat override above the default: %d %q", code, msg)
	}
	// The broker's own out-of-bounds default (session 6000 < min 45000)
	// does not stop other keys from changing.
	if _, code, msg := alterGroup(t, img, &live, "g", setOp("share.auto.offset.reset", "earliest")); code != 0 {
		t.Errorf("an unrelated key: %d %q", code, msg)
	}
}

// TestGroupValue: the effective value is the override, else the broker
// default; an override outside this node's bounds is capped into them;
// refused and unknown keys have none.
func TestGroupValue(t *testing.T) {
	live := Default()
	live.ShareGroups.RecordLockMs = 20000
	img := imageWith(t,
		controller.SetConfig{Resource: controller.GroupResource("g"), Key: "share.auto.offset.reset", Value: strp(" earliest ")},
		controller.SetConfig{Resource: controller.GroupResource("g"), Key: "consumer.session.timeout.ms", Value: strp("90000")}, // stored under wider bounds
		controller.SetConfig{Resource: controller.GroupResource("g"), Key: "share.delivery.count.limit", Value: strp("many")},   // no longer parses
		controller.SetConfig{Resource: controller.GroupResource("g"), Key: "share.isolation.level", Value: strp("read_committed")},
	)
	for _, c := range []struct{ group, key, want string }{
		{"g", "share.auto.offset.reset", "earliest"},
		{"g", "consumer.session.timeout.ms", "60000"},
		{"g", "share.delivery.count.limit", "5"},
		{"g", "share.record.lock.duration.ms", "20000"},
		{"other", "share.auto.offset.reset", "latest"},
		{"other", "share.isolation.level", "read_uncommitted"},
	} {
		if v, ok := GroupValue(&live, img, c.group, c.key); !ok || v != c.want {
			t.Errorf("%s %s: %q %v, want %q", c.group, c.key, v, ok, c.want)
		}
	}
	for _, key := range []string{"streams.session.timeout.ms", "retention.ms"} {
		if _, ok := GroupValue(&live, img, "g", key); ok {
			t.Errorf("%s has a value", key)
		}
	}
	got := GroupSettingsOf(&live, img, "g")
	want := GroupSettings{
		ConsumerSessionTimeoutMs: 60000, ConsumerHeartbeatIntervalMs: 5000,
		ShareSessionTimeoutMs: 45000, ShareHeartbeatIntervalMs: 5000, ShareRecordLockDurationMs: 20000,
		ShareDeliveryCountLimit: 5, SharePartitionMaxRecordLocks: 2000,
		ShareAutoOffsetReset: ShareOffsetReset{Strategy: "earliest"}, ShareIsolationLevel: 1,
	}
	if got != want {
		t.Errorf("settings\n%+v\nwant\n%+v", got, want)
	}
	if got := GroupSettingsOf(&live, nil, "g"); got.ShareAutoOffsetReset.Strategy != "latest" || got.ConsumerSessionTimeoutMs != 45000 {
		t.Errorf("without an image: %+v", got)
	}
}

func TestParseShareOffsetReset(t *testing.T) {
	ok := map[string]ShareOffsetReset{
		"latest":                         {Strategy: "latest"},
		" Earliest ":                     {Strategy: "earliest"},
		"by_duration:PT1H":               {Strategy: "by_duration", Duration: time.Hour},
		"BY_DURATION:pt15m":              {Strategy: "by_duration", Duration: 15 * time.Minute},
		"by_duration:P1DT2H3M4.5S":       {Strategy: "by_duration", Duration: 26*time.Hour + 3*time.Minute + 4500*time.Millisecond},
		"by_duration:P2D":                {Strategy: "by_duration", Duration: 48 * time.Hour},
		"by_duration:PT0S":               {Strategy: "by_duration"},
		"by_duration:PT1H-30M":           {Strategy: "by_duration", Duration: 30 * time.Minute},
		"by_duration:-PT-1H":             {Strategy: "by_duration", Duration: time.Hour},
		"by_duration:PT0,000000001S":     {Strategy: "by_duration", Duration: 1},
		"by_duration:+PT10S":             {Strategy: "by_duration", Duration: 10 * time.Second},
		"by_duration:P106751DT23H47M16S": {Strategy: "by_duration", Duration: 106751*24*time.Hour + 23*time.Hour + 47*time.Minute + 16*time.Second},
	}
	for in, want := range ok {
		got, err := ParseShareOffsetReset(in)
		if err != nil || got != want {
			t.Errorf("%q: %+v, %v; want %+v", in, got, err, want)
		}
	}
	for _, in := range []string{
		"", "none", "by_duration", "by_duration:", "by_duration:P", "by_duration:PT", "by_duration:1H", "by_duration:PT1.5H",
		"by_duration:-PT1S", "by_duration:PT-1.5S", "by_duration:P1W", "by_duration:P1Y", "by_duration:P999999999999D", "earliest,latest",
	} {
		if got, err := ParseShareOffsetReset(in); err == nil {
			t.Errorf("%q accepted: %+v", in, got)
		}
	}
}

// TestDescribeGroupConfigs: every served key, the override as
// GROUP_CONFIG, a default with its broker key's source and synonyms, other
// stored keys, and the ConfigNames filter.
func TestDescribeGroupConfigs(t *testing.T) {
	static := Default()
	static.NodeID = 1
	static.ConsumerSessionMs = 50000
	static.Static = map[string]string{"group.consumer.session.timeout.ms": "50000"}
	img := imageWith(t,
		controller.SetConfig{Resource: controller.GroupResource("g"), Key: "share.auto.offset.reset", Value: strp("earliest")},
		controller.SetConfig{Resource: controller.GroupResource("g"), Key: "share.session.timeout.ms", Value: strp("50000")},
		controller.SetConfig{Resource: controller.GroupResource("g"), Key: "x.from.a.newer.fjord", Value: strp("1")},
	)
	d := describer{ls: LayersOf(&static, img), live: &static, synonyms: true}
	got := map[string]kmsg.DescribeConfigsResponseResourceConfig{}
	var names []string
	for _, c := range d.group(img.GroupConfigs("g")) {
		got[c.Name] = c
		names = append(names, c.Name)
	}
	want := []string{"consumer.heartbeat.interval.ms", "consumer.session.timeout.ms", "share.auto.offset.reset", "share.delivery.count.limit",
		"share.heartbeat.interval.ms", "share.isolation.level", "share.partition.max.record.locks", "share.record.lock.duration.ms",
		"share.session.timeout.ms", "x.from.a.newer.fjord"}
	if strings.Join(names, " ") != strings.Join(want, " ") {
		t.Fatalf("names %v\nwant  %v", names, want)
	}
	check := func(name, value string, src kmsg.ConfigSource, typ kmsg.ConfigType, syns ...kmsg.ConfigSource) {
		t.Helper()
		c := got[name]
		if c.Value == nil || *c.Value != value || c.Source != src || c.ConfigType != typ || c.ReadOnly || c.IsSensitive {
			t.Errorf("%s: %+v", name, c)
		}
		var gotSyns []kmsg.ConfigSource
		for _, s := range c.ConfigSynonyms {
			gotSyns = append(gotSyns, s.Source)
		}
		if len(gotSyns) != len(syns) {
			t.Errorf("%s: synonyms %+v, want sources %v", name, c.ConfigSynonyms, syns)
			return
		}
		for i := range syns {
			if gotSyns[i] != syns[i] {
				t.Errorf("%s: synonyms %+v, want sources %v", name, c.ConfigSynonyms, syns)
			}
		}
	}
	const (
		grp  = kmsg.ConfigSourceGroupConfig
		stat = kmsg.ConfigSourceStaticBrokerConfig
		def  = kmsg.ConfigSourceDefaultConfig
	)
	check("share.auto.offset.reset", "earliest", grp, kmsg.ConfigTypeString, grp, def)
	check("share.isolation.level", "read_uncommitted", def, kmsg.ConfigTypeString, def)
	check("share.session.timeout.ms", "50000", grp, kmsg.ConfigTypeInt, grp, def)
	check("consumer.session.timeout.ms", "50000", stat, kmsg.ConfigTypeInt, stat, def)
	check("consumer.heartbeat.interval.ms", "5000", def, kmsg.ConfigTypeInt, def)
	check("x.from.a.newer.fjord", "1", grp, kmsg.ConfigTypeUnknown, grp)
	if c := got["consumer.session.timeout.ms"]; *c.ConfigSynonyms[0].Value != "50000" || c.ConfigSynonyms[0].Name != "group.consumer.session.timeout.ms" ||
		*c.ConfigSynonyms[1].Value != "45000" {
		t.Errorf("consumer.session.timeout.ms synonyms: %+v", c.ConfigSynonyms)
	}
	if !got["share.isolation.level"].IsDefault || got["share.auto.offset.reset"].IsDefault {
		t.Error("IsDefault")
	}

	d.want = []string{"share.auto.offset.reset", "streams.session.timeout.ms"}
	if cs := d.group(img.GroupConfigs("g")); len(cs) != 1 || cs[0].Name != "share.auto.offset.reset" {
		t.Errorf("filtered: %+v", cs)
	}
}

// TestGroupBrokerKeys: the group.* bounds are broker keys with Kafka's
// defaults, and Validate orders each pair.
func TestGroupBrokerKeys(t *testing.T) {
	for name, def := range map[string]string{
		"group.consumer.min.session.timeout.ms": "45000", "group.consumer.max.heartbeat.interval.ms": "15000",
		"group.share.record.lock.duration.ms": "30000", "group.share.max.partition.max.record.locks": "4000",
	} {
		if k, ok := LookupKey(name); !ok || k.Def != def || k.Dynamic {
			t.Errorf("%s: %+v %v", name, k, ok)
		}
	}
	c := Default()
	if err := c.Validate(); err != nil && strings.Contains(err.Error(), "group.") {
		t.Fatalf("defaults: %v", err)
	}
	c.ConsumerMinSessionMs = 70000
	c.ShareGroups.DeliveryCountLimit = 11
	err := c.Validate()
	for _, want := range []string{"group.consumer.min.session.timeout.ms 70000 / group.consumer.max.session.timeout.ms 60000", "group.share.delivery.count.limit 11"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("want %q in %v", want, err)
		}
	}
}

// group.consumer.migration.policy: Kafka 4.x's default, its four values
// in any case, anything else refused.
func TestMigrationPolicyKey(t *testing.T) {
	k, ok := LookupKey("group.consumer.migration.policy")
	if !ok || k.Def != "bidirectional" || k.Dynamic {
		t.Fatalf("key: %+v %v", k, ok)
	}
	for v, want := range map[string]string{"bidirectional": "bidirectional", "UPGRADE": "upgrade", " Downgrade ": "downgrade", "disabled": "disabled"} {
		c := Default()
		if err := k.Set(&c, v); err != nil || c.ConsumerMigrationPolicy != want {
			t.Errorf("%q: %q, %v", v, c.ConsumerMigrationPolicy, err)
		}
	}
	c := Default()
	if err := k.Set(&c, "both"); err == nil || c.ConsumerMigrationPolicy != "bidirectional" {
		t.Errorf("both: accepted (%q)", c.ConsumerMigrationPolicy)
	}
}
