package compattests

// `fjord broker describe-config|alter-config` (kafka-configs.sh
// --entity-type brokers), the real binary against a real node, checked
// through kadm's DescribeConfigs.

import (
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestCLIBrokerConfig(t *testing.T) {
	b := startBroker(t, t.TempDir())
	addr := b.Addr
	adm := newAdmin(t, addr)
	const key = "log.retention.ms"
	// What kadm sees for broker 1's key: its value and source.
	effective := func() (string, kmsg.ConfigSource) {
		rcs, err := adm.DescribeBrokerConfigs(testCtx(t, 10*time.Second), 1)
		if err != nil {
			t.Fatal(err)
		}
		for _, rc := range rcs {
			for _, c := range rc.Configs {
				if c.Key == key {
					return c.MaybeValue(), c.Source
				}
			}
		}
		return "", kmsg.ConfigSourceUnknown
	}
	type row struct {
		Name     string  `json:"name"`
		Value    *string `json:"value"`
		Source   string  `json:"source"`
		Synonyms []struct {
			Name   string `json:"name"`
			Value  string `json:"value"`
			Source string `json:"source"`
		} `json:"synonyms"`
	}
	describe := func(args ...string) map[string]row {
		var rows []row
		cliJSON(t, addr, &rows, append([]string{"broker", "describe-config"}, args...)...)
		m := map[string]row{}
		for _, r := range rows {
			m[r.Name] = r
		}
		return m
	}
	_, src0 := effective()
	if src0 == kmsg.ConfigSourceDynamicBrokerConfig || src0 == kmsg.ConfigSourceDynamicDefaultBrokerConfig {
		t.Fatalf("%s dynamic before any change: %v", key, src0)
	}
	if r, ok := describe("--entity-name", "1")[key]; ok {
		t.Fatalf("describe without --all lists %s before it is set: %+v", key, r)
	}
	if r := describe("--entity-name", "1", "--all")[key]; r.Value == nil || r.Source != src0.String() {
		t.Fatalf("describe --all: %+v, want source %v", r, src0)
	}

	// Cluster-wide.
	cliOK(t, addr, "", "broker", "alter-config", "--entity-default", "--add-config", key+"=3600000,log.retention.bytes=1073741824")
	if v, src := effective(); v != "3600000" || src != kmsg.ConfigSourceDynamicDefaultBrokerConfig {
		t.Fatalf("after --entity-default: %s=%s from %v", key, v, src)
	}
	if r := describe("--entity-default")[key]; r.Value == nil || *r.Value != "3600000" || r.Source != "DYNAMIC_DEFAULT_BROKER_CONFIG" {
		t.Fatalf("describe --entity-default: %+v", r)
	}
	if r := describe("--entity-name", "1")[key]; r.Value == nil || *r.Value != "3600000" || r.Source != "DYNAMIC_DEFAULT_BROKER_CONFIG" {
		t.Fatalf("describe broker 1 after the default: %+v", r)
	}

	// Per broker, over the default.
	cliOK(t, addr, "", "broker", "alter-config", "--entity-name", "1", "--add-config", key+"=7200000")
	if v, src := effective(); v != "7200000" || src != kmsg.ConfigSourceDynamicBrokerConfig {
		t.Fatalf("after --entity-name 1: %s=%s from %v", key, v, src)
	}
	r := describe("--entity-name", "1")[key]
	if r.Value == nil || *r.Value != "7200000" || r.Source != "DYNAMIC_BROKER_CONFIG" ||
		len(r.Synonyms) < 2 || r.Synonyms[1].Source != "DYNAMIC_DEFAULT_BROKER_CONFIG" || r.Synonyms[1].Value != "3600000" {
		t.Fatalf("describe broker 1 after its own value: %+v", r)
	}
	if out := cliOK(t, addr, "", "broker", "describe-config", "--entity-name", "1"); !strings.Contains(out, "7200000") || !strings.Contains(out, "DYNAMIC_BROKER_CONFIG") {
		t.Fatalf("describe table: %s", out)
	} else {
		t.Logf("describe-config --entity-name 1:\n%s", out)
	}

	// Deleted per broker: the default again; deleted as default: gone.
	cliOK(t, addr, "", "broker", "alter-config", "--entity-name", "1", "--delete-config", key)
	if v, src := effective(); v != "3600000" || src != kmsg.ConfigSourceDynamicDefaultBrokerConfig {
		t.Fatalf("after deleting broker 1's: %s=%s from %v", key, v, src)
	}
	cliOK(t, addr, "", "broker", "alter-config", "--entity-default", "--delete-config", key+",log.retention.bytes")
	if _, src := effective(); src != src0 {
		t.Fatalf("after deleting the default: source %v, want %v", src, src0)
	}
	if m := describe("--entity-default"); len(m) != 0 {
		t.Fatalf("cluster-wide defaults left: %+v", m)
	}

	// Refusals and usage errors.
	if errs := cliCode(t, 1, addr, "broker", "alter-config", "--entity-default", "--add-config", "no.such.key=1"); !strings.Contains(errs, "INVALID_CONFIG") {
		t.Fatalf("unknown key: %s", errs)
	}
	cliCode(t, 1, addr, "broker", "describe-config", "--entity-name", "7")
	cliCode(t, 2, addr, "broker", "alter-config", "--entity-default")
	cliCode(t, 2, addr, "broker", "alter-config", "--add-config", key+"=1")
	cliCode(t, 2, addr, "broker", "alter-config", "--entity-default", "--entity-name", "1", "--add-config", key+"=1")
	cliCode(t, 2, addr, "broker", "alter-config", "--entity-name", "one", "--add-config", key+"=1")
	cliCode(t, 2, addr, "broker", "alter-config", "--entity-default", "--add-config", key)
	cliCode(t, 2, addr, "broker", "frobnicate")
}
