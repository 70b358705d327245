package compattests

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Group configs (KIP-848, KIP-932): the GROUP config resource (type 32),
// set with IncrementalAlterConfigs and AlterConfigs, read with
// DescribeConfigs, as kafka-configs.sh --entity-type groups and franz-go's
// share-group tests (setShareGroupConfigs) use it. kadm has no group-config
// calls, so the requests are kmsg's.

// groupAlter is one IncrementalAlterConfigs operation on a group key.
type groupAlter struct {
	op    kmsg.IncrementalAlterConfigOp
	key   string
	value *string
}

func gSet(k, v string) groupAlter {
	return groupAlter{kmsg.IncrementalAlterConfigOpSet, k, kmsg.StringPtr(v)}
}
func gDel(k string) groupAlter { return groupAlter{kmsg.IncrementalAlterConfigOpDelete, k, nil} }

// alterGroupConfigs sends IncrementalAlterConfigs for group through cl and
// returns the group's error code and message.
func alterGroupConfigs(t *testing.T, ctx context.Context, cl *kgo.Client, validateOnly bool, group string, ops ...groupAlter) (int16, string) {
	t.Helper()
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	req.ValidateOnly = validateOnly
	rr := kmsg.NewIncrementalAlterConfigsRequestResource()
	rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeGroupConfig, group
	for _, o := range ops {
		c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
		c.Name, c.Op, c.Value = o.key, o.op, o.value
		rr.Configs = append(rr.Configs, c)
	}
	req.Resources = append(req.Resources, rr)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatalf("IncrementalAlterConfigs %s: %v", group, err)
	}
	if len(resp.Resources) != 1 || resp.Resources[0].ResourceName != group || resp.Resources[0].ResourceType != kmsg.ConfigResourceTypeGroupConfig {
		t.Fatalf("IncrementalAlterConfigs %s: %+v", group, resp.Resources)
	}
	r := resp.Resources[0]
	msg := ""
	if r.ErrorMessage != nil {
		msg = *r.ErrorMessage
	}
	return r.ErrorCode, msg
}

// replaceGroupConfigs is the legacy AlterConfigs: group's overrides become
// exactly kvs.
func replaceGroupConfigs(t *testing.T, ctx context.Context, cl *kgo.Client, group string, kvs ...string) int16 {
	t.Helper()
	req := kmsg.NewPtrAlterConfigsRequest()
	rr := kmsg.NewAlterConfigsRequestResource()
	rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeGroupConfig, group
	for i := 0; i+1 < len(kvs); i += 2 {
		c := kmsg.NewAlterConfigsRequestResourceConfig()
		c.Name, c.Value = kvs[i], kmsg.StringPtr(kvs[i+1])
		rr.Configs = append(rr.Configs, c)
	}
	req.Resources = append(req.Resources, rr)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil || len(resp.Resources) != 1 {
		t.Fatalf("AlterConfigs %s: %v %+v", group, err, resp)
	}
	return resp.Resources[0].ErrorCode
}

// describeGroupConfigs describes group through cl (names nil: every key)
// with synonyms and documentation, and returns its entries by name, or
// its error code.
func describeGroupConfigs(t *testing.T, ctx context.Context, cl *kgo.Client, group string, names ...string) (map[string]kmsg.DescribeConfigsResponseResourceConfig, int16) {
	t.Helper()
	req := kmsg.NewPtrDescribeConfigsRequest()
	req.IncludeSynonyms, req.IncludeDocumentation = true, true
	rr := kmsg.NewDescribeConfigsRequestResource()
	rr.ResourceType, rr.ResourceName, rr.ConfigNames = kmsg.ConfigResourceTypeGroupConfig, group, names
	req.Resources = append(req.Resources, rr)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil || len(resp.Resources) != 1 {
		t.Fatalf("DescribeConfigs %s: %v %+v", group, err, resp)
	}
	r := resp.Resources[0]
	out := map[string]kmsg.DescribeConfigsResponseResourceConfig{}
	for _, c := range r.Configs {
		out[c.Name] = c
	}
	return out, r.ErrorCode
}

// groupValue is a described key's value and source ("" and -1 if absent).
func groupValue(cs map[string]kmsg.DescribeConfigsResponseResourceConfig, key string) (string, kmsg.ConfigSource) {
	c, ok := cs[key]
	if !ok || c.Value == nil {
		return "", -1
	}
	return *c.Value, c.Source
}

// wantGroupValue fails unless key is described with value and source.
func wantGroupValue(t *testing.T, cs map[string]kmsg.DescribeConfigsResponseResourceConfig, key, value string, src kmsg.ConfigSource) {
	t.Helper()
	if v, s := groupValue(cs, key); v != value || s != src {
		t.Errorf("%s = %q (source %v), want %q (source %v)", key, v, s, value, src)
	}
}

// TestGroupConfigs: group configs on one node (every key described with
// its default, overrides, validate_only, the refusals, DELETE, the legacy
// AlterConfigs, a restart), on three nodes (set through one, read at once
// on every node), and their ACLs (on the GROUP, not the cluster).
func TestGroupConfigs(t *testing.T) {
	t.Run("one node", func(t *testing.T) {
		ctx := testCtx(t, 60*time.Second)
		b := startBroker(t, t.TempDir())
		cl := newClient(t, b.Addr)

		// Before any override (and with no such group): every key
		// Fjord serves, at its default.
		cs, code := describeGroupConfigs(t, ctx, cl, "g")
		if code != 0 {
			t.Fatalf("describe: %v", kerr.ErrorForCode(code))
		}
		for key, def := range map[string]string{
			"consumer.session.timeout.ms": "45000", "consumer.heartbeat.interval.ms": "5000",
			"share.session.timeout.ms": "45000", "share.heartbeat.interval.ms": "5000",
			"share.record.lock.duration.ms": "30000", "share.delivery.count.limit": "5",
			"share.partition.max.record.locks": "2000", "share.auto.offset.reset": "latest",
			"share.isolation.level": "read_uncommitted",
		} {
			wantGroupValue(t, cs, key, def, kmsg.ConfigSourceDefaultConfig)
		}
		if len(cs) != 9 {
			t.Errorf("described %d keys, want 9: %v", len(cs), cs)
		}
		if c := cs["consumer.session.timeout.ms"]; c.ConfigType != kmsg.ConfigTypeInt || c.Documentation == nil || len(c.ConfigSynonyms) == 0 ||
			c.ConfigSynonyms[len(c.ConfigSynonyms)-1].Name != "group.consumer.session.timeout.ms" {
			t.Errorf("consumer.session.timeout.ms: %+v", c)
		}

		// franz-go's share tests set this; the answer comes once the change
		// is applied, so the next describe sees it.
		if code, msg := alterGroupConfigs(t, ctx, cl, false, "g", gSet("share.auto.offset.reset", "earliest"), gSet("share.isolation.level", "read_committed")); code != 0 {
			t.Fatalf("set: %v %s", kerr.ErrorForCode(code), msg)
		}
		cs, _ = describeGroupConfigs(t, ctx, cl, "g", "share.auto.offset.reset", "share.isolation.level")
		wantGroupValue(t, cs, "share.auto.offset.reset", "earliest", kmsg.ConfigSourceGroupConfig)
		wantGroupValue(t, cs, "share.isolation.level", "read_committed", kmsg.ConfigSourceGroupConfig)
		if len(cs) != 2 {
			t.Errorf("ConfigNames filter: %d keys", len(cs))
		}
		if syn := cs["share.auto.offset.reset"].ConfigSynonyms; len(syn) != 2 || syn[0].Source != kmsg.ConfigSourceGroupConfig || syn[1].Source != kmsg.ConfigSourceDefaultConfig || *syn[1].Value != "latest" {
			t.Errorf("synonyms: %+v", syn)
		}

		// validate_only checks and changes nothing.
		if code, msg := alterGroupConfigs(t, ctx, cl, true, "g", gSet("share.record.lock.duration.ms", "20000")); code != 0 {
			t.Fatalf("validate only: %v %s", kerr.ErrorForCode(code), msg)
		}
		if code, _ := alterGroupConfigs(t, ctx, cl, true, "g", gSet("share.record.lock.duration.ms", "999999")); code != kerr.InvalidConfig.Code {
			t.Errorf("validate only, out of bounds: %v", kerr.ErrorForCode(code))
		}
		cs, _ = describeGroupConfigs(t, ctx, cl, "g")
		wantGroupValue(t, cs, "share.record.lock.duration.ms", "30000", kmsg.ConfigSourceDefaultConfig)

		// Refusals, each leaving the group as it was.
		for _, c := range []struct {
			name string
			ops  []groupAlter
			code int16
			msg  string
		}{
			{"unknown key", []groupAlter{gSet("share.no.such.key", "1")}, kerr.InvalidConfig.Code, "unknown group config"},
			{"below the broker's minimum", []groupAlter{gSet("consumer.session.timeout.ms", "1000")}, kerr.InvalidConfig.Code, "group.consumer.min.session.timeout.ms"},
			{"above the broker's maximum", []groupAlter{gSet("share.heartbeat.interval.ms", "20000")}, kerr.InvalidConfig.Code, "group.share.max.heartbeat.interval.ms"},
			{"not an int", []groupAlter{gSet("share.delivery.count.limit", "lots")}, kerr.InvalidConfig.Code, "share.delivery.count.limit"},
			{"bad reset", []groupAlter{gSet("share.auto.offset.reset", "sometimes")}, kerr.InvalidConfig.Code, "by_duration"},
			{"streams", []groupAlter{gSet("streams.num.standby.replicas", "1")}, kerr.InvalidConfig.Code, "streams"},
			{"append to a non-list", []groupAlter{{kmsg.IncrementalAlterConfigOpAppend, "share.auto.offset.reset", kmsg.StringPtr("latest")}}, kerr.InvalidConfig.Code, ""},
			{"a good and a bad key together", []groupAlter{gSet("share.isolation.level", "read_uncommitted"), gSet("share.session.timeout.ms", "1")}, kerr.InvalidConfig.Code, ""},
		} {
			code, msg := alterGroupConfigs(t, ctx, cl, false, "g", c.ops...)
			if code != c.code || !strings.Contains(msg, c.msg) {
				t.Errorf("%s: %v %q, want %v containing %q", c.name, kerr.ErrorForCode(code), msg, kerr.ErrorForCode(c.code), c.msg)
			}
		}
		if code, _ := alterGroupConfigs(t, ctx, cl, false, "", gSet("share.auto.offset.reset", "earliest")); code != kerr.InvalidRequest.Code {
			t.Errorf("empty group id: %v", kerr.ErrorForCode(code))
		}
		if _, code := describeGroupConfigs(t, ctx, cl, ""); code != kerr.InvalidRequest.Code {
			t.Errorf("describe the empty group id: %v", kerr.ErrorForCode(code))
		}
		cs, _ = describeGroupConfigs(t, ctx, cl, "g")
		wantGroupValue(t, cs, "share.isolation.level", "read_committed", kmsg.ConfigSourceGroupConfig)

		// DELETE falls back to the default; a duration is accepted.
		if code, msg := alterGroupConfigs(t, ctx, cl, false, "g", gDel("share.isolation.level"), gSet("share.auto.offset.reset", "by_duration:PT1H")); code != 0 {
			t.Fatalf("delete: %v %s", kerr.ErrorForCode(code), msg)
		}
		cs, _ = describeGroupConfigs(t, ctx, cl, "g")
		wantGroupValue(t, cs, "share.isolation.level", "read_uncommitted", kmsg.ConfigSourceDefaultConfig)
		wantGroupValue(t, cs, "share.auto.offset.reset", "by_duration:PT1H", kmsg.ConfigSourceGroupConfig)

		// The legacy AlterConfigs replaces the group's whole set.
		if code := replaceGroupConfigs(t, ctx, cl, "g", "consumer.heartbeat.interval.ms", "6000"); code != 0 {
			t.Fatalf("AlterConfigs: %v", kerr.ErrorForCode(code))
		}
		cs, _ = describeGroupConfigs(t, ctx, cl, "g")
		wantGroupValue(t, cs, "consumer.heartbeat.interval.ms", "6000", kmsg.ConfigSourceGroupConfig)
		wantGroupValue(t, cs, "share.auto.offset.reset", "latest", kmsg.ConfigSourceDefaultConfig)
		if code := replaceGroupConfigs(t, ctx, cl, "g", "consumer.heartbeat.interval.ms", "60000"); code != kerr.InvalidConfig.Code {
			t.Errorf("AlterConfigs beyond the bound: %v", kerr.ErrorForCode(code))
		}

		// Stored in the metadata log: a restart keeps them.
		if code, msg := alterGroupConfigs(t, ctx, cl, false, "share-g", gSet("share.auto.offset.reset", "earliest")); code != 0 {
			t.Fatalf("set share-g: %v %s", kerr.ErrorForCode(code), msg)
		}
		b.Stop()
		b.Restart()
		cl = newClient(t, b.Addr)
		cs, _ = describeGroupConfigs(t, ctx, cl, "share-g")
		wantGroupValue(t, cs, "share.auto.offset.reset", "earliest", kmsg.ConfigSourceGroupConfig)
		cs, _ = describeGroupConfigs(t, ctx, cl, "g")
		wantGroupValue(t, cs, "consumer.heartbeat.interval.ms", "6000", kmsg.ConfigSourceGroupConfig)
	})

	t.Run("three nodes", func(t *testing.T) {
		ctx := testCtx(t, 90*time.Second)
		c := startCluster(t, 3)
		// Set through each node in turn; every node describes the change
		// at once, all together, without a retry: the answer came only
		// once every live broker had applied it.
		for i, via := range c.IDs() {
			value := []string{"earliest", "latest", "by_duration:P1D"}[i%3]
			if code, msg := alterGroupConfigs(t, ctx, c.Client(via), false, "share-g", gSet("share.auto.offset.reset", value)); code != 0 {
				t.Fatalf("set through node %d: %v %s", via, kerr.ErrorForCode(code), msg)
			}
			var wg sync.WaitGroup
			for _, id := range c.IDs() {
				wg.Add(1)
				go func() {
					defer wg.Done()
					cs, code := describeGroupConfigs(t, ctx, c.Client(id), "share-g", "share.auto.offset.reset")
					if v, src := groupValue(cs, "share.auto.offset.reset"); code != 0 || v != value || src != kmsg.ConfigSourceGroupConfig {
						t.Errorf("node %d right after the change through node %d: %q (source %v, error %v), want %q", id, via, v, src, kerr.ErrorForCode(code), value)
					}
				}()
			}
			wg.Wait()
		}
		// Refused through any node.
		if code, _ := alterGroupConfigs(t, ctx, c.Client(c.IDs()[len(c.IDs())-1]), false, "share-g", gSet("share.session.timeout.ms", "1")); code != kerr.InvalidConfig.Code {
			t.Errorf("out of bounds: %v", kerr.ErrorForCode(code))
		}
		// A node restarted finds the configs in the log.
		id := c.IDs()[1]
		c.Kill(id)
		c.Restart(id)
		c.Await(t, 30*time.Second, "the restarted node describes the group's config", func() (bool, string) {
			cs, code := describeGroupConfigs(t, ctx, c.Client(id), "share-g", "share.auto.offset.reset")
			v, _ := groupValue(cs, "share.auto.offset.reset")
			return code == 0 && v == "by_duration:P1D", v
		})
	})

	t.Run("acls", func(t *testing.T) {
		ctx := testCtx(t, 60*time.Second)
		b := startBroker(t, t.TempDir(), stdAuthorizer, "allow.everyone.if.no.acl.found=true")
		adm := newAdmin(t, b.Addr)
		cl := newClient(t, b.Addr)
		// Group configs need the operation on the GROUP: denying it on
		// the cluster changes nothing for them.
		createACLs(t, ctx, adm, newACLs().Deny(anon).Groups("secret").Operations(kadm.OpDescribeConfigs, kadm.OpAlterConfigs))
		createACLs(t, ctx, adm, newACLs().Deny(anon).Clusters().Operations(kadm.OpDescribeConfigs, kadm.OpAlterConfigs))
		if code, msg := alterGroupConfigs(t, ctx, cl, false, "open", gSet("share.auto.offset.reset", "earliest")); code != 0 {
			t.Errorf("alter an open group: %v %s", kerr.ErrorForCode(code), msg)
		}
		if cs, code := describeGroupConfigs(t, ctx, cl, "open"); code != 0 || len(cs) == 0 {
			t.Errorf("describe an open group: %v", kerr.ErrorForCode(code))
		}
		if code, _ := alterGroupConfigs(t, ctx, cl, false, "secret", gSet("share.auto.offset.reset", "earliest")); code != kerr.GroupAuthorizationFailed.Code {
			t.Errorf("alter a denied group: %v, want GROUP_AUTHORIZATION_FAILED", kerr.ErrorForCode(code))
		}
		if code := replaceGroupConfigs(t, ctx, cl, "secret", "share.auto.offset.reset", "earliest"); code != kerr.GroupAuthorizationFailed.Code {
			t.Errorf("AlterConfigs of a denied group: %v, want GROUP_AUTHORIZATION_FAILED", kerr.ErrorForCode(code))
		}
		if cs, code := describeGroupConfigs(t, ctx, cl, "secret"); code != kerr.GroupAuthorizationFailed.Code || len(cs) != 0 {
			t.Errorf("describe a denied group: %v, %d configs; want GROUP_AUTHORIZATION_FAILED", kerr.ErrorForCode(code), len(cs))
		}
	})
}
