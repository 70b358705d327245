package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/fjordlog/fjord/broker/config"
)

// writeProps writes a properties file into a temp dir and returns its path.
func writeProps(t *testing.T, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "server.properties")
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestDefaultsOnly(t *testing.T) {
	cfg, err := LoadConfig(nil, []string{"PATH=/bin", "HOME=/root"})
	if err != nil {
		t.Fatal(err)
	}
	want := config.Default()
	want.ConsoleAddr = config.DevConsoleAddr // a zero-config run
	if !reflect.DeepEqual(cfg, want) {
		t.Fatalf("got %+v\nwant %+v", cfg, want)
	}
}

// The console is on in a zero-config run only: any configuration source
// leaves it off unless fjord.console.listener is given.
func TestConsoleOnlyInZeroConfig(t *testing.T) {
	props := writeProps(t, "log.dirs=/tmp/x\n")
	for _, c := range []struct {
		name string
		args []string
		env  []string
		want string
	}{
		{"nothing", nil, []string{"HOME=/root", "FJORD_LOG_LEVEL=debug"}, config.DevConsoleAddr},
		{"a config file", []string{"--config", props}, nil, ""},
		{"an override", []string{"--override", "num.partitions=3"}, nil, ""},
		{"KAFKA_ environment", nil, []string{"KAFKA_NUM_PARTITIONS=3"}, ""},
		{"an image's defaults", nil, []string{"FJORD_DEFAULT_LOG_DIRS=/var/lib/fjord"}, ""},
		{"CLUSTER_ID", nil, []string{"CLUSTER_ID=abc"}, ""},
		{"asked for", []string{"--config", props, "--override", "fjord.console.listener=127.0.0.1:0"}, nil, "127.0.0.1:0"},
	} {
		cfg, err := LoadConfig(c.args, c.env)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if cfg.ConsoleAddr != c.want {
			t.Errorf("%s: fjord.console.listener %q, want %q", c.name, cfg.ConsoleAddr, c.want)
		}
	}
}

func TestSourcesAndPriority(t *testing.T) {
	file := writeProps(t, strings.Join([]string{
		"num.partitions=2",
		"log.segment.bytes=2048",
		"log.cleanup.policy=compact",
		"auto.create.topics.enable=false",
	}, "\n"))
	tests := []struct {
		name  string
		args  []string
		env   []string
		check func(config.Config) bool
	}{
		{"file", []string{"--config", file}, nil,
			func(c config.Config) bool {
				return c.NumPartitions == 2 && c.SegmentBytes == 2048 && c.CleanupPolicy == "compact" && !c.AutoCreateTopics
			}},
		{"file with =", []string{"--config=" + file}, nil,
			func(c config.Config) bool { return c.NumPartitions == 2 }},
		{"env", nil, []string{"KAFKA_NUM_PARTITIONS=3"},
			func(c config.Config) bool { return c.NumPartitions == 3 }},
		{"env beats file", []string{"--config", file}, []string{"KAFKA_NUM_PARTITIONS=3"},
			func(c config.Config) bool { return c.NumPartitions == 3 && c.SegmentBytes == 2048 }},
		{"override beats env and file", []string{"--config", file, "--override", "num.partitions=4"}, []string{"KAFKA_NUM_PARTITIONS=3"},
			func(c config.Config) bool { return c.NumPartitions == 4 && c.SegmentBytes == 2048 }},
		{"override with =", []string{"--override=num.partitions=5"}, nil,
			func(c config.Config) bool { return c.NumPartitions == 5 }},
		{"repeated overrides, last wins", []string{"--override", "num.partitions=5", "--override", "num.partitions=6", "--override", "log.segment.bytes=4096"}, nil,
			func(c config.Config) bool { return c.NumPartitions == 6 && c.SegmentBytes == 4096 }},
		{"override value may contain =", []string{"--override", "cluster.id=a=b"}, nil,
			func(c config.Config) bool { return c.ClusterID == "a=b" }},
		{"CLUSTER_ID", nil, []string{"CLUSTER_ID=abc"},
			func(c config.Config) bool { return c.ClusterID == "abc" }},
		{"KAFKA_CLUSTER_ID beats CLUSTER_ID whatever the order", nil, []string{"KAFKA_CLUSTER_ID=k", "CLUSTER_ID=abc"},
			func(c config.Config) bool { return c.ClusterID == "k" }},
		{"env values trimmed, bools case-insensitive", nil, []string{"KAFKA_NUM_PARTITIONS= 7 ", "KAFKA_DELETE_TOPIC_ENABLE=FALSE"},
			func(c config.Config) bool { return c.NumPartitions == 7 && !c.DeleteTopicEnable }},
		{"ignored image variables", nil, []string{"KAFKA_HEAP_OPTS=-Xmx1G", "KAFKA_OPTS=x", "KAFKA_JMX_PORT=9999", "KAFKA_VERSION=4.0.0", "KAFKA_HOME=/opt/kafka", "KAFKA_LOG4J_LOGGERS=a=b", "KAFKA_DEBUG=y"},
			func(c config.Config) bool { return reflect.DeepEqual(c, config.Default()) }},
		{"non-KAFKA variables ignored", nil, []string{"NUM_PARTITIONS=9", "kafka_num_partitions=9", "MY_KAFKA_X=1"},
			func(c config.Config) bool { return c.NumPartitions == 1 }},
		{"broker.id alias", nil, []string{"KAFKA_BROKER_ID=7"},
			func(c config.Config) bool { return c.NodeID == 7 }},
		{"broker.id equal to node.id", []string{"--override", "node.id=7"}, []string{"KAFKA_BROKER_ID=7"},
			func(c config.Config) bool { return c.NodeID == 7 }},
		{"log.dir alias", nil, []string{"KAFKA_LOG_DIR=/data"},
			func(c config.Config) bool { return c.LogDirs == "/data" }},
		{"log.dirs beats log.dir whatever the source", []string{"--override", "log.dir=/x"}, []string{"KAFKA_LOG_DIRS=/data"},
			func(c config.Config) bool { return c.LogDirs == "/data" }},
		{"log.roll.hours", nil, []string{"KAFKA_LOG_ROLL_HOURS=2"},
			func(c config.Config) bool { return c.SegmentMs == 2*3600000 }},
		{"log.roll.ms beats log.roll.hours", []string{"--override", "log.roll.hours=2"}, []string{"KAFKA_LOG_ROLL_MS=5000"},
			func(c config.Config) bool { return c.SegmentMs == 5000 }},
		{"process.roles normalised", nil, []string{"KAFKA_PROCESS_ROLES=broker, controller"},
			func(c config.Config) bool { return c.ProcessRoles == "broker,controller" }},
		{"metrics listener", []string{"--override", "fjord.metrics.listener=:9100"}, nil,
			func(c config.Config) bool { return c.MetricsAddr == ":9100" }},
		{"every int width", nil, []string{"KAFKA_DEFAULT_REPLICATION_FACTOR=3", "KAFKA_MESSAGE_MAX_BYTES=2000000", "KAFKA_LOG_RETENTION_BYTES=1099511627776"},
			func(c config.Config) bool {
				return c.DefaultReplication == 3 && c.MessageMaxBytes == 2000000 && c.RetentionBytes == 1<<40
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := LoadConfig(tt.args, tt.env)
			if err != nil {
				t.Fatal(err)
			}
			if !tt.check(cfg) {
				t.Fatalf("unexpected config %+v", cfg)
			}
		})
	}
}

// TestTypicalKafkaCompose is the environment block of the Apache Kafka
// image's single-node example: it must start.
func TestTypicalKafkaCompose(t *testing.T) {
	env := []string{
		"KAFKA_NODE_ID=1",
		"KAFKA_PROCESS_ROLES=broker,controller",
		"KAFKA_LISTENERS=PLAINTEXT://localhost:9092,CONTROLLER://localhost:9093",
		"KAFKA_ADVERTISED_LISTENERS=PLAINTEXT://localhost:9092",
		"KAFKA_CONTROLLER_LISTENER_NAMES=CONTROLLER",
		"KAFKA_LISTENER_SECURITY_PROTOCOL_MAP=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
		"KAFKA_CONTROLLER_QUORUM_VOTERS=1@localhost:9093",
		"KAFKA_INTER_BROKER_LISTENER_NAME=PLAINTEXT",
		"KAFKA_OFFSETS_TOPIC_REPLICATION_FACTOR=1",
		"KAFKA_TRANSACTION_STATE_LOG_REPLICATION_FACTOR=1",
		"KAFKA_TRANSACTION_STATE_LOG_MIN_ISR=1",
		"KAFKA_SHARE_COORDINATOR_STATE_TOPIC_REPLICATION_FACTOR=1",
		"KAFKA_SHARE_COORDINATOR_STATE_TOPIC_MIN_ISR=1",
		"KAFKA_GROUP_INITIAL_REBALANCE_DELAY_MS=0",
		"KAFKA_NUM_PARTITIONS=3",
		"KAFKA_LOG_DIRS=/tmp/kraft-combined-logs",
		"CLUSTER_ID=4L6g3nShT-eMCtK--X86sw",
		"KAFKA_HEAP_OPTS=-Xmx512M",
	}
	cfg, err := LoadConfig(nil, env)
	if err != nil {
		t.Fatal(err)
	}
	want := config.Default()
	want.Listeners = "PLAINTEXT://localhost:9092,CONTROLLER://localhost:9093"
	want.AdvertisedListeners = "PLAINTEXT://localhost:9092"
	want.GroupInitialRebalanceMs = 0
	want.NumPartitions = 3
	want.LogDirs = "/tmp/kraft-combined-logs"
	want.ClusterID = "4L6g3nShT-eMCtK--X86sw"
	want.ControllerQuorumVoters = "1@localhost:9093"
	want.OffsetsTopicReplication = 1
	want.InterBrokerListenerName = "PLAINTEXT"
	want.ListenerSecurityProtocolMap = "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT"
	want.TxnTopicReplication, want.TxnTopicMinISR = 1, 1
	want.ShareStateReplication, want.ShareStateMinISR = 1, 1
	if !reflect.DeepEqual(cfg, want) {
		t.Fatalf("got %+v\nwant %+v", cfg, want)
	}
}

func TestEnvToKey(t *testing.T) {
	for env, key := range map[string]string{
		"KAFKA_LOG_RETENTION_MS":                                          "log.retention.ms",
		"KAFKA_ADVERTISED_LISTENERS":                                      "advertised.listeners",
		"KAFKA_FJORD_METRICS_LISTENER":                                    "fjord.metrics.listener",
		"KAFKA_CONFLUENT_SUPPORT__CUSTOMER_ID":                            "confluent.support_customer.id",
		"KAFKA_LISTENER_NAME_SASL_SCRAM___SHA___256_SASL_JAAS_CONFIG":     "listener.name.sasl.scram-sha-256.sasl.jaas.config",
		"KAFKA_A___B__C_D":                                                "a-b_c.d",
		"KAFKA_Log_Retention_Ms":                                          "log.retention.ms",
		"KAFKA_SHARE_COORDINATOR_STATE_TOPIC_REPLICATION_FACTOR":          "share.coordinator.state.topic.replication.factor",
		"KAFKA_TRANSACTION_STATE_LOG_MIN_ISR":                             "transaction.state.log.min.isr",
		"KAFKA_LISTENER_NAME_CONTROLLER_SSL_KEYSTORE_LOCATION":            "listener.name.controller.ssl.keystore.location",
		"KAFKA_OFFSETS_TOPIC_REPLICATION_FACTOR":                          "offsets.topic.replication.factor",
		"KAFKA_LOG_FLUSH_INTERVAL_MESSAGES":                               "log.flush.interval.messages",
		"KAFKA_GROUP_INITIAL_REBALANCE_DELAY_MS":                          "group.initial.rebalance.delay.ms",
		"KAFKA_LOG_MESSAGE_TIMESTAMP_TYPE":                                "log.message.timestamp.type",
		"KAFKA_AUTO_CREATE_TOPICS_ENABLE":                                 "auto.create.topics.enable",
		"KAFKA_LISTENER_SECURITY_PROTOCOL_MAP":                            "listener.security.protocol.map",
		"KAFKA_CONTROLLER_QUORUM_VOTERS":                                  "controller.quorum.voters",
		"KAFKA_INTER_BROKER_LISTENER_NAME":                                "inter.broker.listener.name",
		"KAFKA_LOG_RETENTION_CHECK_INTERVAL_MS":                           "log.retention.check.interval.ms",
		"KAFKA_SOCKET_REQUEST_MAX_BYTES":                                  "socket.request.max.bytes",
		"KAFKA_CONNECTIONS_MAX_IDLE_MS":                                   "connections.max.idle.ms",
		"KAFKA_OFFSETS_TOPIC_NUM_PARTITIONS":                              "offsets.topic.num.partitions",
		"KAFKA_LOG_INDEX_INTERVAL_BYTES":                                  "log.index.interval.bytes",
		"KAFKA_DEFAULT_REPLICATION_FACTOR":                                "default.replication.factor",
		"KAFKA_MIN_INSYNC_REPLICAS":                                       "min.insync.replicas",
		"KAFKA_NUM_IO_THREADS":                                            "num.io.threads",
		"KAFKA_PROCESS_ROLES":                                             "process.roles",
		"KAFKA_CLUSTER_ID":                                                "cluster.id",
		"KAFKA_LOG_CLEANUP_POLICY":                                        "log.cleanup.policy",
		"KAFKA_DELETE_TOPIC_ENABLE":                                       "delete.topic.enable",
		"KAFKA_MESSAGE_MAX_BYTES":                                         "message.max.bytes",
		"KAFKA_LOG_SEGMENT_BYTES":                                         "log.segment.bytes",
		"KAFKA_NODE_ID":                                                   "node.id",
		"KAFKA_BROKER_ID":                                                 "broker.id",
		"KAFKA_LOG_DIRS":                                                  "log.dirs",
		"KAFKA_LOG_DIR":                                                   "log.dir",
		"KAFKA_LOG_ROLL_MS":                                               "log.roll.ms",
		"KAFKA_LOG_ROLL_HOURS":                                            "log.roll.hours",
		"KAFKA_LOG_RETENTION_MINUTES":                                     "log.retention.minutes",
		"KAFKA_LOG_RETENTION_HOURS":                                       "log.retention.hours",
		"KAFKA_LOG_RETENTION_BYTES":                                       "log.retention.bytes",
		"KAFKA_LOG_FLUSH_INTERVAL_MS":                                     "log.flush.interval.ms",
		"KAFKA_CONTROLLER_LISTENER_NAMES":                                 "controller.listener.names",
		"KAFKA_TRANSACTION_STATE_LOG_REPLICATION_FACTOR":                  "transaction.state.log.replication.factor",
		"KAFKA_SHARE_COORDINATOR_STATE_TOPIC_MIN_ISR":                     "share.coordinator.state.topic.min.isr",
		"KAFKA_NUM_PARTITIONS":                                            "num.partitions",
		"KAFKA_LISTENERS":                                                 "listeners",
		"KAFKA_LISTENER_NAME_INTERNAL_SASL_ENABLED_MECHANISMS":            "listener.name.internal.sasl.enabled.mechanisms",
		"KAFKA_LISTENER_NAME_EXTERNAL_SCRAM___SHA___512_SASL_JAAS_CONFIG": "listener.name.external.scram-sha-512.sasl.jaas.config",
	} {
		if got := envToKey(env); got != key {
			t.Errorf("envToKey(%s) = %q, want %q", env, got, key)
		}
	}
}

// TestEveryKeyHasAnEnvName checks that every key in the table can be set
// from the environment: the variable built by the inverse conversion must
// convert back to the key.
func TestEveryKeyHasAnEnvName(t *testing.T) {
	for _, k := range configKeys {
		env := "KAFKA_" + strings.ToUpper(strings.NewReplacer("-", "___", "_", "__", ".", "_").Replace(k.Name))
		if got := envToKey(env); got != k.Name {
			t.Errorf("%s -> %s -> %s", k.Name, env, got)
		}
		environ := []string{env + "=" + sampleValue(k)}
		if k.Name == "controller.quorum.voters" || k.Name == "controller.quorum.bootstrap.servers" { // needs its listener
			environ = append(environ, "KAFKA_LISTENERS=PLAINTEXT://localhost:9092,CONTROLLER://localhost:9093")
		}
		if k.Name == "password.encoder.old.secret" { // rotates from the old secret to a new one
			environ = append(environ, "KAFKA_PASSWORD_ENCODER_SECRET=new")
		}
		if _, err := LoadConfig(nil, environ); err != nil {
			t.Errorf("%s: %v", env, err)
		}
	}
}

// sampleValue is a valid value for key k.
func sampleValue(k config.Key) string {
	switch k.Name { // defaults that are the zero value
	case "allow.everyone.if.no.acl.found", "fjord.metrics.pprof.enable":
		return "true"
	case "fjord.log.open.files.max":
		return "4096"
	}
	if k.Def != "" {
		return k.Def
	}
	switch k.Name {
	case "advertised.listeners":
		return "PLAINTEXT://example.com:9092"
	case "fjord.metrics.listener", "fjord.console.listener":
		return "127.0.0.1:9100"
	case "fjord.console.allowed.hosts":
		return "console.example.com,ops.example.com:8092"
	case "controller.quorum.voters":
		return "1@localhost:9093"
	case "broker.rack":
		return "rack-a"
	case "inter.broker.listener.name":
		return "PLAINTEXT"
	case "listener.security.protocol.map":
		return "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT"
	case "controller.quorum.bootstrap.servers":
		return "localhost:9093"
	case "max.connections.per.ip.overrides":
		return "127.0.0.1:5"
	case "authorizer.class.name":
		return config.StandardAuthorizerClass
	case "remote.log.storage.manager.class.name":
		return config.AivenRSMClass
	case "rsm.config.fetch.chunk.cache.class":
		return config.AivenMemoryChunkCache
	case "rsm.config.storage.backend.class":
		return config.AivenS3BackendClass
	case "rsm.config.chunk.size":
		return "4194304"
	case "super.users":
		return "User:admin;User:ops"
	}
	return "1"
}

func TestListenersDerivation(t *testing.T) {
	tests := []struct {
		name string
		args []string
		env  []string
		want string
	}{
		{"derived from env", nil,
			[]string{"KAFKA_ADVERTISED_LISTENERS=PLAINTEXT://kafka.example.com:9092,INTERNAL://10.1.2.3:19092", "KAFKA_LISTENER_SECURITY_PROTOCOL_MAP=PLAINTEXT:PLAINTEXT,INTERNAL:PLAINTEXT"},
			"PLAINTEXT://0.0.0.0:9092,INTERNAL://0.0.0.0:19092"},
		{"derived from file", []string{"--config", writeProps(t, "advertised.listeners=EXTERNAL://[2001:db8::1]:9094\nlistener.security.protocol.map=EXTERNAL:PLAINTEXT\n")}, nil,
			"EXTERNAL://0.0.0.0:9094"},
		{"listeners set in a lower source still counts", []string{"--config", writeProps(t, "listeners=PLAINTEXT://127.0.0.1:9999\n")},
			[]string{"KAFKA_ADVERTISED_LISTENERS=PLAINTEXT://kafka:9092"},
			"PLAINTEXT://127.0.0.1:9999"},
		{"listeners set in a higher source", []string{"--override", "listeners=PLAINTEXT://:9092"},
			[]string{"KAFKA_ADVERTISED_LISTENERS=PLAINTEXT://kafka:9092"},
			"PLAINTEXT://:9092"},
		{"no advertised listeners: default", nil, nil, config.Default().Listeners},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := LoadConfig(tt.args, tt.env)
			if err != nil {
				t.Fatal(err)
			}
			if cfg.Listeners != tt.want {
				t.Fatalf("listeners = %q, want %q", cfg.Listeners, tt.want)
			}
		})
	}
}

func TestRetentionPriority(t *testing.T) {
	const h, m = 3600000, 60000
	tests := []struct {
		name string
		file string
		env  []string
		args []string
		want int64
	}{
		{"default", "", nil, nil, 168 * h},
		{"hours", "log.retention.hours=2", nil, nil, 2 * h},
		{"minutes", "log.retention.minutes=5", nil, nil, 5 * m},
		{"minutes beat hours in the same file", "log.retention.minutes=5\nlog.retention.hours=2", nil, nil, 5 * m},
		{"ms in file beats hours in env", "log.retention.ms=1234", []string{"KAFKA_LOG_RETENTION_HOURS=2"}, nil, 1234},
		{"ms in file beats minutes in override", "log.retention.ms=1234", nil, []string{"--override", "log.retention.minutes=5"}, 1234},
		{"minutes in file beat hours in override", "log.retention.minutes=5", nil, []string{"--override", "log.retention.hours=2"}, 5 * m},
		{"ms in override beats all", "log.retention.hours=2\nlog.retention.minutes=5", []string{"KAFKA_LOG_RETENTION_MS=99"}, []string{"--override", "log.retention.ms=77"}, 77},
		{"negative hours keep forever", "log.retention.hours=-1", nil, nil, -1},
		{"negative ms keep forever", "log.retention.ms=-5", nil, nil, -1},
		{"KAFKA_LOG_RETENTION_MS", "", []string{"KAFKA_LOG_RETENTION_MS=60000"}, nil, 60000},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := tt.args
			if tt.file != "" {
				args = append([]string{"--config", writeProps(t, tt.file)}, args...)
			}
			cfg, err := LoadConfig(args, tt.env)
			if err != nil {
				t.Fatal(err)
			}
			if cfg.RetentionMs != tt.want {
				t.Fatalf("RetentionMs = %d, want %d", cfg.RetentionMs, tt.want)
			}
		})
	}
}

func TestPropertiesSyntax(t *testing.T) {
	text := strings.Join([]string{
		"# a comment",
		"! another comment",
		"   # indented comment",
		"",
		"   ",
		"node.id=3",
		"  log.dirs : /var/lib/fjord  ",
		"num.partitions 4",
		"cluster.id\t=\tabc  ",
		"log.cleanup.policy = delete,\\",
		"      compact",
		"advertised.listeners=PLAINTEXT://a.example.com:9092,\\",
		"   \\",
		"   INTERNAL://b.example.com:19092",
		"# comment ending in a backslash does not continue \\",
		"log.segment.bytes=2048\r",
		"log.message.timestamp.type=Log\\",
		"AppendTime",
		"fjord.metrics.listener=\\u003a9100",
		"process.roles=broker,controller",
		"num.partitions=5",
		"log.roll.ms=\\",
	}, "\n")
	props, err := parseProperties(text)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	lines := map[string]int{}
	for _, p := range props {
		got[p.key] = p.value
		lines[p.key] = p.line
	}
	want := map[string]string{
		"node.id":                    "3",
		"log.dirs":                   "/var/lib/fjord",
		"num.partitions":             "5",
		"cluster.id":                 "abc",
		"log.cleanup.policy":         "delete,compact",
		"advertised.listeners":       "PLAINTEXT://a.example.com:9092,INTERNAL://b.example.com:19092",
		"log.segment.bytes":          "2048",
		"log.message.timestamp.type": "LogAppendTime",
		"fjord.metrics.listener":     ":9100",
		"process.roles":              "broker,controller",
		"log.roll.ms":                "",
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got  %q\nwant %q", got, want)
	}
	if lines["advertised.listeners"] != 12 || lines["log.segment.bytes"] != 16 || lines["num.partitions"] != 21 {
		t.Errorf("line numbers: %v", lines)
	}

	// Through LoadConfig (without the empty log.roll.ms).
	// Its INTERNAL listener needs a protocol.
	cfg, err := LoadConfig([]string{"--config", writeProps(t, strings.TrimSuffix(text, "log.roll.ms=\\"))},
		[]string{"KAFKA_LISTENER_SECURITY_PROTOCOL_MAP=PLAINTEXT:PLAINTEXT,INTERNAL:PLAINTEXT"})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.NodeID != 3 || cfg.CleanupPolicy != "delete,compact" || cfg.MessageTimestampType != "LogAppendTime" ||
		cfg.AdvertisedListeners != want["advertised.listeners"] || cfg.MetricsAddr != ":9100" {
		t.Fatalf("config %+v", cfg)
	}
}

func TestPropertiesEscapes(t *testing.T) {
	props, err := parseProperties("a\\=b=c\\\\d\\te\ncolon\\:key:v\nsp\\ key v\n")
	if err != nil {
		t.Fatal(err)
	}
	want := []property{
		{key: "a=b", value: "c\\d\te", line: 1},
		{key: "colon:key", value: "v", line: 2},
		{key: "sp key", value: "v", line: 3},
	}
	if !reflect.DeepEqual(props, want) {
		t.Fatalf("got %+v\nwant %+v", props, want)
	}
	if _, err := parseProperties("\n\nk=\\u12\n"); err == nil || !strings.HasPrefix(err.Error(), "3: ") {
		t.Fatalf("malformed \\u: err = %v", err)
	}
}

func TestErrors(t *testing.T) {
	file := writeProps(t, "node.id=1\n\n# comment\nlog.segmant.bytes=1024\n")
	badFile := writeProps(t, "node.id=1\nlog.segment.bytes=abc\n")
	tests := []struct {
		name string
		args []string
		env  []string
		want []string // substrings of the error
	}{
		{"unknown key in file", []string{"--config", file}, nil,
			[]string{"config: ", file + ":4: ", `unknown configuration key "log.segmant.bytes"`}},
		{"unknown key in env", nil, []string{"KAFKA_LOG_SEGMANT_BYTES=1024"},
			[]string{"env KAFKA_LOG_SEGMANT_BYTES: ", `"log.segmant.bytes"`}},
		{"unknown key in env with ___", nil, []string{"KAFKA_LISTENER_NAME_X_SCRAM___SHA___256_SASL_JAAS_CONFIGS=x"},
			[]string{"env KAFKA_LISTENER_NAME_X_SCRAM___SHA___256_SASL_JAAS_CONFIGS: ", `"listener.name.x.scram-sha-256.sasl.jaas.configs"`}},
		{"a key of Kafka's with a bad value", nil, []string{"KAFKA_NUM_NETWORK_THREADS=many"},
			[]string{`env KAFKA_NUM_NETWORK_THREADS: num.network.threads: "many" is not an integer`}},
		{"another authorizer refused", nil, []string{"KAFKA_AUTHORIZER_CLASS_NAME=com.example.OpaAuthorizer"},
			[]string{"env KAFKA_AUTHORIZER_CLASS_NAME: authorizer.class.name", "is not available"}},
		{"unclean election refused", []string{"--override", "unclean.leader.election.enable=true"}, nil,
			[]string{"--override: unclean.leader.election.enable: Fjord never elects a leader outside the ISR"}},
		{"SASL_SSL listener without mechanisms", nil, []string{"KAFKA_LISTENERS=SASL_SSL://127.0.0.1:9092"},
			[]string{"listener SASL_SSL: SASL mechanism GSSAPI is not supported"}},
		{"security.inter.broker.protocol=SSL refused", nil, []string{"KAFKA_SECURITY_INTER_BROKER_PROTOCOL=SSL"},
			[]string{"set inter.broker.listener.name to a listener mapped to SSL"}},
		{"bad protocol map", nil, []string{"KAFKA_LISTENER_SECURITY_PROTOCOL_MAP=PLAINTEXT"},
			[]string{"env KAFKA_LISTENER_SECURITY_PROTOCOL_MAP: listener.security.protocol.map: "}},
		{"removed Kafka key", nil, []string{"KAFKA_ADVERTISED_HOST_NAME=kafka"},
			[]string{"advertised.host.name=kafka: removed in Kafka 3.0"}},
		{"dynamic quorum refused", nil, []string{"KAFKA_CONTROLLER_QUORUM_BOOTSTRAP_SERVERS=a:9093,b:9093", "KAFKA_LISTENERS=PLAINTEXT://:9092,CONTROLLER://:9093"},
			[]string{"dynamic quorums (KIP-853) are not built"}},
		{"bootstrap server that is not this node", nil, []string{"KAFKA_CONTROLLER_QUORUM_BOOTSTRAP_SERVERS=a:9094", "KAFKA_LISTENERS=PLAINTEXT://:9092,CONTROLLER://:9093"},
			[]string{"dynamic quorums (KIP-853) are not built"}},
		{"bad log4j level", nil, []string{"KAFKA_LOG4J_ROOT_LOGLEVEL=LOUD"},
			[]string{`env KAFKA_LOG4J_ROOT_LOGLEVEL: "LOUD" is not a log4j level`}},
		{"unknown key in override", []string{"--override", "log.segmant.bytes=1024"}, nil,
			[]string{"--override: ", `"log.segmant.bytes"`}},
		{"every unknown key is reported", []string{"--config", file, "--override", "foo=1"}, []string{"KAFKA_BAR=2"},
			[]string{file + ":4", "env KAFKA_BAR", "--override: unknown configuration key \"foo\""}},
		{"bad int in file", []string{"--config", badFile}, nil,
			[]string{badFile + ":2: ", `log.segment.bytes: "abc" is not an integer`}},
		{"bad int in env", nil, []string{"KAFKA_NUM_PARTITIONS=three"},
			[]string{"env KAFKA_NUM_PARTITIONS: ", `num.partitions: "three" is not an integer`}},
		{"out of range", nil, []string{"KAFKA_DEFAULT_REPLICATION_FACTOR=40000"},
			[]string{`default.replication.factor: "40000" is out of range for a 16-bit integer`}},
		{"bad bool", []string{"--override", "auto.create.topics.enable=yes"}, nil,
			[]string{`--override: auto.create.topics.enable: "yes" is not a boolean`}},
		{"bad hours", nil, []string{"KAFKA_LOG_RETENTION_HOURS=1.5"},
			[]string{`log.retention.hours: "1.5" is not an integer`}},
		{"bad int of an unsupported key", nil, []string{"KAFKA_SHARE_COORDINATOR_STATE_TOPIC_MIN_ISR=x"},
			[]string{`share.coordinator.state.topic.min.isr: "x" is not an integer`}},
		{"bad process.roles", nil, []string{"KAFKA_PROCESS_ROLES=broker,zookeeper"},
			[]string{`process.roles: `, `"zookeeper" is not one of broker, controller`}},
		{"bad cleanup policy", nil, []string{"KAFKA_LOG_CLEANUP_POLICY=remove"},
			[]string{`log.cleanup.policy: `}},
		{"bad metrics listener", nil, []string{"KAFKA_FJORD_METRICS_LISTENER=9100"},
			[]string{`fjord.metrics.listener: "9100" is not host:port`}},
		{"node.id and broker.id differ", []string{"--override", "node.id=1"}, []string{"KAFKA_BROKER_ID=2"},
			[]string{"node.id 1 (--override) and broker.id 2 (env KAFKA_BROKER_ID) differ"}},
		{"validate: num.partitions", nil, []string{"KAFKA_NUM_PARTITIONS=0"},
			[]string{"config: num.partitions 0: must be >= 1"}},
		{"validate: timestamp type", nil, []string{"KAFKA_LOG_MESSAGE_TIMESTAMP_TYPE=Now"},
			[]string{"config: log.message.timestamp.type"}},
		{"validate: bad listeners", []string{"--override", "listeners=localhost:9092"}, nil,
			[]string{"config: listeners: "}},
		{"validate: bad advertised listeners", nil, []string{"KAFKA_ADVERTISED_LISTENERS=kafka:9092"},
			[]string{"config: advertised.listeners: "}},
		{"validate: empty log.dirs", nil, []string{"KAFKA_LOG_DIRS="},
			[]string{"config: log.dirs: must not be empty"}},
		{"missing file", []string{"--config", filepath.Join(t.TempDir(), "nope.properties")}, nil,
			[]string{"config: ", "nope.properties"}},
		{"empty --config", []string{"--config="}, nil,
			[]string{"--config: empty path"}},
		{"unknown flag", []string{"--verbose"}, nil,
			[]string{"config: ", "verbose"}},
		{"positional argument", []string{"server.properties"}, nil,
			[]string{`unexpected argument "server.properties"`}},
		{"override without =", []string{"--override", "num.partitions"}, nil,
			[]string{"want key=value"}},
		{"override missing value", []string{"--override"}, nil,
			[]string{"override"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := LoadConfig(tt.args, tt.env)
			if err == nil {
				t.Fatal("no error")
			}
			if !strings.HasPrefix(err.Error(), "config: ") {
				t.Errorf("error %q lacks the config: prefix", err)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}
}

func TestHelp(t *testing.T) {
	for _, arg := range []string{"-h", "--help", "-help"} {
		if _, err := LoadConfig([]string{arg}, nil); !errors.Is(err, errHelp) {
			t.Errorf("%s: err = %v, want errHelp", arg, err)
		}
	}
	u := usage()
	for _, w := range []string{"--config", "--override", "--help", "docs/configuration.md"} {
		if !strings.Contains(u, w) {
			t.Errorf("usage does not mention %s", w)
		}
	}
}

// TestTableDefaultsMatchDefaultConfig checks that applying every key's
// documented default gives config.Default() back, so the table cannot
// advertise a default the broker does not use.
func TestTableDefaultsMatchDefaultConfig(t *testing.T) {
	cfg := config.Default()
	zero := config.Config{}
	for _, k := range configKeys {
		if k.Def == "" {
			continue
		}
		if err := k.Set(&cfg, k.Def); err != nil {
			t.Errorf("%s: default %q does not parse: %v", k.Name, k.Def, err)
		}
		if err := k.Set(&zero, k.Def); err != nil {
			t.Errorf("%s: %v", k.Name, err)
		}
	}
	if !reflect.DeepEqual(cfg, config.Default()) {
		t.Errorf("applying the table's defaults changes the config: %+v", cfg)
	}
	// Every field but those whose default is the zero value must be
	// reached by some key's default.
	want := config.Default()
	if !reflect.DeepEqual(zero, want) {
		t.Errorf("the table's defaults do not cover every field:\n got %+v\nwant %+v", zero, want)
	}
}

// TestEveryFieldHasAKey checks every config.Config field is written by at
// least one key, so a new field cannot be forgotten here.
func TestEveryFieldHasAKey(t *testing.T) {
	typ := reflect.TypeFor[config.Config]()
	for i := range typ.NumField() {
		f := typ.Field(i)
		if f.Name == "Static" { // the record of the keys given, not a setting
			continue
		}
		found := false
		for _, k := range configKeys {
			var c config.Config
			if err := k.Set(&c, sampleValue(k)); err != nil {
				t.Fatalf("%s: %v", k.Name, err)
			}
			if !reflect.ValueOf(c).Field(i).IsZero() {
				found = true
				break
			}
		}
		if !found {
			t.Errorf("no configuration key sets config.Config.%s", f.Name)
		}
	}
}

// A typo names the key it probably meant; a key far from every real one
// gets no guess.
func TestUnknownKeySuggestion(t *testing.T) {
	_, err := LoadConfig([]string{"--override", "log.retention.hour=1"}, nil)
	if err == nil || !strings.Contains(err.Error(), `did you mean "log.retention.hours"`) {
		t.Fatalf("log.retention.hour: %v", err)
	}
	_, err = LoadConfig(nil, []string{"KAFKA_NUM_PARTITON=3"})
	if err == nil || !strings.Contains(err.Error(), `did you mean "num.partitions"`) {
		t.Fatalf("KAFKA_NUM_PARTITON: %v", err)
	}
	_, err = LoadConfig([]string{"--override", "fjord.no.such.setting.at.all=1"}, nil)
	if err == nil || strings.Contains(err.Error(), "did you mean") {
		t.Fatalf("fjord.no.such.setting.at.all: %v", err)
	}
	// A typo of a Kafka key Fjord ignores is still a typo.
	_, err = LoadConfig(nil, []string{"KAFKA_NUM_NETWORK_THREAD=3"})
	if err == nil || !strings.Contains(err.Error(), `did you mean "num.network.threads"`) {
		t.Fatalf("KAFKA_NUM_NETWORK_THREAD: %v", err)
	}
}

// Bitnami's images name properties KAFKA_CFG_<KEY> and the cluster id
// KAFKA_KRAFT_CLUSTER_ID.
func TestBitnamiEnvironment(t *testing.T) {
	cfg, err := LoadConfig(nil, []string{"KAFKA_CFG_NUM_PARTITIONS=4", "KAFKA_CFG_LOG_RETENTION_MS=60000",
		"KAFKA_KRAFT_CLUSTER_ID=abcdefghijklmnopqrstuv"})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.NumPartitions != 4 || cfg.RetentionMs != 60000 || cfg.ClusterID != "abcdefghijklmnopqrstuv" {
		t.Fatalf("num.partitions %d, log.retention.ms %d, cluster.id %q", cfg.NumPartitions, cfg.RetentionMs, cfg.ClusterID)
	}
}

// A SASL_PLAINTEXT listener starts only with mechanisms and users Fjord
// can serve; the per-listener JAAS key and the JAAS file of KAFKA_OPTS
// are both read.
func TestSASLListenerConfig(t *testing.T) {
	base := []string{"KAFKA_LISTENERS=SASL_PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093", "KAFKA_LISTENER_SECURITY_PROTOCOL_MAP=SASL_PLAINTEXT:SASL_PLAINTEXT,CONTROLLER:PLAINTEXT"}
	jaas := filepath.Join(t.TempDir(), "jaas.conf")
	if err := os.WriteFile(jaas, []byte("KafkaServer { org.apache.kafka.common.security.plain.PlainLoginModule required user_a=\"b\"; };"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		env  []string
		want string // "" = starts
	}{
		{nil, "SASL mechanism GSSAPI is not supported"},
		{[]string{"KAFKA_SASL_ENABLED_MECHANISMS=PLAIN"}, "no JAAS configuration for PLAIN"},
		{[]string{"KAFKA_SASL_ENABLED_MECHANISMS=PLAIN", "KAFKA_OPTS=-Djava.security.auth.login.config=" + jaas}, ""},
		{[]string{"KAFKA_SASL_ENABLED_MECHANISMS=PLAIN", `KAFKA_LISTENER_NAME_SASL__PLAINTEXT_PLAIN_SASL_JAAS_CONFIG=org.apache.kafka.common.security.plain.PlainLoginModule required user_a="b";`}, ""},
		{[]string{"KAFKA_SASL_ENABLED_MECHANISMS=PLAIN", `KAFKA_SASL_JAAS_CONFIG=org.apache.kafka.common.security.plain.PlainLoginModule required password="p";`}, "gives PLAIN no users"},
		{[]string{"KAFKA_SASL_ENABLED_MECHANISMS=SCRAM-SHA-512"}, ""},
	} {
		l, err := loadConfig(nil, append(slices.Clone(base), c.env...))
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%q: %v", c.env, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%q: error %v, want %q", c.env, err, c.want)
		case c.want == "" && strings.Contains(fmt.Sprint(l.cfg.Static), "PlainLoginModule"):
			t.Errorf("%q: the JAAS config is a static config DescribeConfigs would show", c.env)
		}
	}
}
