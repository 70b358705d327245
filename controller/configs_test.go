package controller

import (
	"maps"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
)

// testPolicy knows three keys: retention.ms (an integer), cleanup.policy (a
// list defaulting to "delete") and segment.bytes, which it treats as
// read-only for brokers; "unsafe" is refused as a policy violation.
var testPolicy = ConfigPolicy{
	Check: func(res ConfigResource, key, value string) error {
		switch key {
		case "retention.ms":
			for _, c := range value {
				if c < '0' || c > '9' {
					return ConfigError(kerr.InvalidConfig, "%s: %q is not an integer", key, value)
				}
			}
			return nil
		case "cleanup.policy":
			return nil
		case "segment.bytes":
			if res.Type == ResourceBroker {
				return ConfigError(kerr.InvalidConfig, "%s is read-only", key)
			}
			return nil
		case "unsafe":
			return ConfigError(kerr.PolicyViolation, "no")
		}
		return ConfigError(kerr.InvalidConfig, "unknown config %q", key)
	},
	List: func(_ ConfigResource, key string) (bool, string) {
		return key == "cleanup.policy", "delete"
	},
}

func set(k, v string) ConfigAlteration { return ConfigAlteration{Key: k, Op: OpSet, Value: &v} }
func del(k string) ConfigAlteration    { return ConfigAlteration{Key: k, Op: OpDelete} }
func appendOp(k, v string) ConfigAlteration {
	return ConfigAlteration{Key: k, Op: OpAppend, Value: &v}
}
func subtract(k, v string) ConfigAlteration {
	return ConfigAlteration{Key: k, Op: OpSubtract, Value: &v}
}

// alter decides one change and applies its records, returning the error
// code.
func (c *cluster) alterConfig(ch ConfigChange) int16 {
	c.t.Helper()
	r := AlterConfigs(c.img, []ConfigChange{ch}, testPolicy)[0]
	if r.ErrorCode == 0 {
		if len(r.Records) > 0 {
			c.apply(NewBatch(r.Records))
		}
	} else if len(r.Records) != 0 {
		c.t.Fatalf("an error (%d) came with records", r.ErrorCode)
	}
	return r.ErrorCode
}

func TestAlterConfigsTopic(t *testing.T) {
	c := newCluster(t)
	c.brokers("")
	c.create("t", 1, 1)
	res := TopicResource("t")
	configs := func() map[string]string { return c.img.Topic("t").Configs }
	want := func(w map[string]string) {
		t.Helper()
		if !maps.Equal(configs(), w) {
			t.Fatalf("configs %v, want %v", configs(), w)
		}
	}

	if code := c.alterConfig(ConfigChange{Resource: res, Ops: []ConfigAlteration{set("retention.ms", "1000")}}); code != 0 {
		t.Fatalf("set: %d", code)
	}
	want(map[string]string{"retention.ms": "1000"})

	// APPEND starts from the default when the topic has no value, and
	// does not repeat an item; SUBTRACT removes one.
	c.alterConfig(ConfigChange{Resource: res, Ops: []ConfigAlteration{appendOp("cleanup.policy", "compact")}})
	want(map[string]string{"retention.ms": "1000", "cleanup.policy": "delete,compact"})
	c.alterConfig(ConfigChange{Resource: res, Ops: []ConfigAlteration{appendOp("cleanup.policy", "compact")}})
	want(map[string]string{"retention.ms": "1000", "cleanup.policy": "delete,compact"})
	c.alterConfig(ConfigChange{Resource: res, Ops: []ConfigAlteration{subtract("cleanup.policy", "delete")}})
	want(map[string]string{"retention.ms": "1000", "cleanup.policy": "compact"})

	// A failing op leaves everything as it was, even the valid ops of
	// the same resource.
	if code := c.alterConfig(ConfigChange{Resource: res, Ops: []ConfigAlteration{del("retention.ms"), set("retention.ms2", "x")}}); code != kerr.InvalidConfig.Code {
		t.Fatalf("unknown key: code %d", code)
	}
	if code := c.alterConfig(ConfigChange{Resource: res, Ops: []ConfigAlteration{set("retention.ms", "soon")}}); code != kerr.InvalidConfig.Code {
		t.Fatalf("bad value: code %d", code)
	}
	if code := c.alterConfig(ConfigChange{Resource: res, Ops: []ConfigAlteration{set("unsafe", "1")}}); code != kerr.PolicyViolation.Code {
		t.Fatalf("unsafe: code %d", code)
	}
	if code := c.alterConfig(ConfigChange{Resource: res, Ops: []ConfigAlteration{appendOp("retention.ms", "1")}}); code != kerr.InvalidConfig.Code {
		t.Fatalf("append to a non-list: code %d", code)
	}
	if code := c.alterConfig(ConfigChange{Resource: res, Ops: []ConfigAlteration{set("retention.ms", "1"), del("retention.ms")}}); code != kerr.InvalidRequest.Code {
		t.Fatalf("a key twice: code %d", code)
	}
	want(map[string]string{"retention.ms": "1000", "cleanup.policy": "compact"})

	// Deleting a key that is not set is no change at all.
	if r := AlterConfigs(c.img, []ConfigChange{{Resource: res, Ops: []ConfigAlteration{del("segment.bytes")}}}, testPolicy)[0]; r.ErrorCode != 0 || len(r.Records) != 0 {
		t.Fatalf("delete of an unset key: %+v", r)
	}

	// The legacy AlterConfigs replaces the whole set.
	c.alterConfig(ConfigChange{Resource: res, Replace: true, Ops: []ConfigAlteration{set("segment.bytes", "2048")}})
	want(map[string]string{"segment.bytes": "2048"})
	c.alterConfig(ConfigChange{Resource: res, Replace: true})
	want(nil)

	if code := c.alterConfig(ConfigChange{Resource: TopicResource("nope"), Ops: []ConfigAlteration{set("retention.ms", "1")}}); code != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("unknown topic: code %d", code)
	}
	if code := c.alterConfig(ConfigChange{Resource: TopicResource("a/b"), Ops: []ConfigAlteration{set("retention.ms", "1")}}); code != kerr.InvalidTopicException.Code {
		t.Fatalf("invalid topic name: code %d", code)
	}
}

func TestAlterConfigsBroker(t *testing.T) {
	c := newCluster(t)
	c.brokers("", "")
	if code := c.alterConfig(ConfigChange{Resource: ClusterResource(), Ops: []ConfigAlteration{set("retention.ms", "5")}}); code != 0 {
		t.Fatalf("cluster default: %d", code)
	}
	if code := c.alterConfig(ConfigChange{Resource: BrokerResource(2), Ops: []ConfigAlteration{set("retention.ms", "7")}}); code != 0 {
		t.Fatalf("broker 2: %d", code)
	}
	got := c.img.BrokerConfigs()
	if got[""]["retention.ms"] != "5" || got["2"]["retention.ms"] != "7" || got["1"] != nil {
		t.Fatalf("broker configs %v", got)
	}
	if code := c.alterConfig(ConfigChange{Resource: BrokerResource(1), Ops: []ConfigAlteration{set("segment.bytes", "1")}}); code != kerr.InvalidConfig.Code {
		t.Fatalf("read-only: code %d", code)
	}
	if code := c.alterConfig(ConfigChange{Resource: ConfigResource{ResourceBroker, "01"}, Ops: []ConfigAlteration{set("retention.ms", "1")}}); code != kerr.InvalidRequest.Code {
		t.Fatalf("not an id: code %d", code)
	}
	// A resource named twice is refused both times, and nothing applies.
	rs := AlterConfigs(c.img, []ConfigChange{
		{Resource: BrokerResource(1), Ops: []ConfigAlteration{set("retention.ms", "1")}},
		{Resource: BrokerResource(1), Ops: []ConfigAlteration{set("retention.ms", "2")}},
		{Resource: BrokerResource(2), Ops: []ConfigAlteration{del("retention.ms")}},
	}, testPolicy)
	if rs[0].ErrorCode != kerr.InvalidRequest.Code || rs[1].ErrorCode != kerr.InvalidRequest.Code || rs[2].ErrorCode != 0 || len(rs[2].Records) != 1 {
		t.Fatalf("duplicate resources: %+v", rs)
	}
	c.apply(rs[2].Records...)
	if got := c.img.BrokerConfigs(); got["2"] != nil {
		t.Fatalf("broker 2 after delete: %v", got["2"])
	}
}

// TestAlterConfigsGroup: a group resource needs an id but not a group;
// its changes are judged key by key (Check) and then as a whole
// (CheckResource, which sees every key the group would store); APPEND is
// refused on its non-list keys.
func TestAlterConfigsGroup(t *testing.T) {
	c := newCluster(t)
	res := GroupResource("g")
	policy := testPolicy
	var judged []map[string]string
	policy.CheckResource = func(r ConfigResource, _, configs map[string]string) error {
		if r != res {
			t.Fatalf("CheckResource of %v", r)
		}
		judged = append(judged, maps.Clone(configs))
		if configs["retention.ms"] == "13" {
			return ConfigError(kerr.InvalidConfig, "unlucky")
		}
		return nil
	}
	alter := func(ch ConfigChange) int16 {
		t.Helper()
		r := AlterConfigs(c.img, []ConfigChange{ch}, policy)[0]
		if r.ErrorCode == 0 && len(r.Records) > 0 {
			c.apply(NewBatch(r.Records))
		}
		return r.ErrorCode
	}
	want := func(w map[string]string) {
		t.Helper()
		if got := c.img.GroupConfigs("g"); !maps.Equal(got, w) {
			t.Fatalf("g's configs %v, want %v", got, w)
		}
	}

	if code := alter(ConfigChange{Resource: res, Ops: []ConfigAlteration{set("retention.ms", "1000"), set("cleanup.policy", "delete")}}); code != 0 {
		t.Fatalf("set: %d", code)
	}
	want(map[string]string{"retention.ms": "1000", "cleanup.policy": "delete"})
	if code := alter(ConfigChange{Resource: res, Ops: []ConfigAlteration{del("cleanup.policy")}}); code != 0 {
		t.Fatalf("delete: %d", code)
	}
	want(map[string]string{"retention.ms": "1000"})
	// The whole-resource rule sees the result of every op, deletes included.
	if len(judged) != 2 || !maps.Equal(judged[1], map[string]string{"retention.ms": "1000"}) {
		t.Fatalf("CheckResource saw %v", judged)
	}
	if code := alter(ConfigChange{Resource: res, Ops: []ConfigAlteration{set("retention.ms", "13")}}); code != kerr.InvalidConfig.Code {
		t.Fatalf("refused by CheckResource: %d", code)
	}
	if code := alter(ConfigChange{Resource: res, Ops: []ConfigAlteration{set("retention.ms", "soon")}}); code != kerr.InvalidConfig.Code {
		t.Fatalf("refused by Check: %d", code)
	}
	want(map[string]string{"retention.ms": "1000"})
	// No change, no judgement.
	n := len(judged)
	if code := alter(ConfigChange{Resource: res, Ops: []ConfigAlteration{set("retention.ms", "1000")}}); code != 0 || len(judged) != n {
		t.Fatalf("a no-op: code %d, judged %d times", code, len(judged)-n)
	}
	if code := alter(ConfigChange{Resource: res, Ops: []ConfigAlteration{appendOp("retention.ms", "1")}}); code != kerr.InvalidConfig.Code {
		t.Fatalf("append to a non-list: %d", code)
	}
	if code := alter(ConfigChange{Resource: GroupResource(""), Ops: []ConfigAlteration{set("retention.ms", "1")}}); code != kerr.InvalidRequest.Code {
		t.Fatalf("empty group id: %d", code)
	}
	// The legacy AlterConfigs replaces the whole set.
	if code := alter(ConfigChange{Resource: res, Replace: true}); code != 0 {
		t.Fatalf("replace: %d", code)
	}
	want(nil)
	if got := c.img.ConfiguredGroups(); len(got) != 0 {
		t.Fatalf("configured groups %v", got)
	}
}
