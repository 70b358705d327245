package catalogue

import (
	"strings"
	"testing"
)

// Every name a rule mentions must be one of Kafka's keys, and every prefix
// must match some: a misspelt rule would silently classify nothing.
func TestRulesNameRealKeys(t *testing.T) {
	for scope, exact := range map[Scope]map[string]rule{Broker: brokerExact, Topic: topicExact} {
		for name := range exact {
			if _, ok := find(scope, name); !ok {
				t.Errorf("%s rule for %q: not a Kafka %s key", scope, name, scope)
			}
		}
	}
	for scope, prefixes := range map[Scope]map[string]rule{Broker: brokerPrefix, Topic: topicPrefix} {
		for p := range prefixes {
			found := false
			for _, k := range Keys(scope) {
				found = found || strings.HasPrefix(k.Name, p)
			}
			if !found {
				t.Errorf("%s prefix rule %q matches no Kafka key", scope, p)
			}
		}
	}
	for name := range legacy {
		if _, ok := find(Broker, name); ok {
			t.Errorf("legacy key %q is still one of Kafka's keys", name)
		}
	}
}

func TestKeysLoaded(t *testing.T) {
	if n := len(Keys(Broker)); n < 250 {
		t.Errorf("%d broker keys: the catalogue looks cut short", n)
	}
	if n := len(Keys(Topic)); n < 30 {
		t.Errorf("%d topic keys: the catalogue looks cut short", n)
	}
	for _, k := range append(Keys(Broker), Keys(Topic)...) {
		switch k.Type {
		case "boolean", "string", "int", "short", "long", "double", "list", "class", "password":
		default:
			t.Errorf("%s %s: type %q", k.Scope, k.Name, k.Type)
		}
	}
}

// The keys real compose files carry, as the issue that asked for the
// catalogue listed them, and what happens to each.
func TestClassifyComposeKeys(t *testing.T) {
	for _, tt := range []struct {
		scope       Scope
		name, value string
		want        Class
	}{
		{Broker, "confluent.support.metrics.enable", "false", Ignored},
		{Broker, "confluent.license.topic.replication.factor", "1", Ignored},
		{Broker, "confluent.balancer.topic.replication.factor", "1", Ignored},
		{Broker, "confluent.telemetry.exporter.c3plusplus.type", "http", Ignored},
		{Broker, "metric.reporters", "io.confluent.metrics.reporter.ConfluentMetricsReporter", Ignored},
		{Broker, "socket.send.buffer.bytes", "102400", Ignored},
		{Broker, "num.network.threads", "3", Ignored},
		{Broker, "zookeeper.connect", "zookeeper:2181", Ignored},
		{Broker, "zookeeper.session.timeout.ms", "18000", Ignored},
		{Broker, "transaction.abort.timed.out.transaction.cleanup.interval.ms", "10000", Unsupported},
		{Broker, "share.coordinator.state.topic.replication.factor", "1", Unsupported},
		{Broker, "sasl.enabled.mechanisms", "PLAIN", Unsupported},
		{Broker, "listener.name.sasl_ssl.scram-sha-256.sasl.jaas.config", "x", Unsupported},
		{Broker, "listener.name.controller.ssl.keymanager.algorithm", "SunX509", Ignored},
		{Broker, "ssl.keymanager.algorithm", "SunX509", Ignored},
		{Broker, "ssl.engine.factory.class", "com.example.Engine", Refused},
		{Broker, "security.inter.broker.protocol", "SSL", Refused},
		{Broker, "security.inter.broker.protocol", "PLAINTEXT", Ignored},
		{Broker, "security.inter.broker.protocol", "SASL_SSL", Refused},
		{Broker, "compression.type", "producer", Ignored},
		{Broker, "compression.type", "zstd", Unsupported},
		{Broker, "leader.replication.throttled.rate", "1000", Unsupported},
		{Broker, "advertised.host.name", "kafka", Refused},
		{Topic, "min.compaction.lag.ms", "0", Ignored},
		{Topic, "min.compaction.lag.ms", "60000", Refused},
		{Broker, "log.cleaner.min.compaction.lag.ms", "60000", Refused},
		{Broker, "replica.fetch.max.bytes", "10485760", Ignored},
		{Broker, "controlled.shutdown.enable", "true", Ignored},
		{Topic, "preallocate", "true", Ignored},
		{Topic, "max.compaction.lag.ms", "1000", Unsupported},
		{Topic, "confluent.placement.constraints", "{}", Ignored},
	} {
		v, ok := Classify(tt.scope, tt.name, tt.value)
		if !ok || v.Class != tt.want {
			t.Errorf("%s %s=%q: %v %q (known %v), want %v", tt.scope, tt.name, tt.value, v.Class, v.Why, ok, tt.want)
		}
		if ok && v.Why == "" {
			t.Errorf("%s %s=%q: no reason given", tt.scope, tt.name, tt.value)
		}
	}
	for _, name := range []string{"log.retention.hour", "zookeeper.conect", "listener.name.x", "cfg.node.id", "confluent"} {
		if v, ok := Classify(Broker, name, "1"); ok {
			t.Errorf("%s: classified %v, want unknown", name, v)
		}
	}
}

func TestCheckValue(t *testing.T) {
	for _, tt := range []struct {
		typ, v string
		ok     bool
	}{
		{"int", "3", true}, {"int", "3.5", false}, {"int", "99999999999", false},
		{"long", "99999999999", true}, {"short", "40000", false},
		{"boolean", "TRUE", true}, {"boolean", "yes", false},
		{"double", "0.5", true}, {"double", "half", false},
		{"list", "a,b", true}, {"string", "", true}, {"class", "x.Y", true},
	} {
		err := CheckValue(Key{Type: tt.typ}, tt.v)
		if (err == nil) != tt.ok {
			t.Errorf("%s %q: err %v, want ok=%v", tt.typ, tt.v, err, tt.ok)
		}
	}
}

func TestParseTSVRefusesBadFiles(t *testing.T) {
	for _, text := range []string{
		"broker\tx\tint\t1\tno\t3.9\n",                                               // no header
		"scope\tname\ttype\tdefault\tinternal\tversions\nbroker\tx\tint\n",           // short row
		"scope\tname\ttype\tdefault\tinternal\tversions\nnode\tx\tint\t1\tno\t3.9\n", // bad scope
		"scope\tname\ttype\tdefault\tinternal\tversions\nbroker\tx\tint\t1\tno\t3.9\nbroker\tx\tint\t1\tno\t4.0\n",
	} {
		if _, err := parseTSV(text); err == nil {
			t.Errorf("parseTSV(%q): no error", text)
		}
	}
}
