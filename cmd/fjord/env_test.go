package main

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

func withHostname(t *testing.T, name string) {
	t.Helper()
	old := hostname
	hostname = func() (string, error) { return name, nil }
	t.Cleanup(func() { hostname = old })
}

func mustLoad(t *testing.T, args, env []string) loaded {
	t.Helper()
	l, err := loadConfig(args, env)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func containsSub[T any](list []T, sub string) bool {
	return slices.ContainsFunc(list, func(s T) bool { return strings.Contains(fmt.Sprint(s), sub) })
}

// The broker service of Confluent's cp-all-in-one (cp-server 8.2.0), with
// the Confluent-only keys that used to stop start-up.
func TestConfluentServerCompose(t *testing.T) {
	env := []string{
		"KAFKA_NODE_ID=1",
		"KAFKA_LISTENER_SECURITY_PROTOCOL_MAP=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,PLAINTEXT_HOST:PLAINTEXT",
		"KAFKA_ADVERTISED_LISTENERS=PLAINTEXT://broker:29092,PLAINTEXT_HOST://localhost:9092",
		"KAFKA_OFFSETS_TOPIC_REPLICATION_FACTOR=1",
		"KAFKA_GROUP_INITIAL_REBALANCE_DELAY_MS=0",
		"KAFKA_CONFLUENT_LICENSE_TOPIC_REPLICATION_FACTOR=1",
		"KAFKA_CONFLUENT_BALANCER_TOPIC_REPLICATION_FACTOR=1",
		"KAFKA_TRANSACTION_STATE_LOG_MIN_ISR=1",
		"KAFKA_TRANSACTION_STATE_LOG_REPLICATION_FACTOR=1",
		"KAFKA_JMX_PORT=9101",
		"KAFKA_JMX_HOSTNAME=localhost",
		"KAFKA_CONFLUENT_SCHEMA_REGISTRY_URL=http://schema-registry:8081",
		"KAFKA_METRIC_REPORTERS=io.confluent.telemetry.reporter.TelemetryReporter",
		"CONFLUENT_METRICS_REPORTER_BOOTSTRAP_SERVERS=broker:29092",
		"CONFLUENT_METRICS_REPORTER_TOPIC_REPLICAS=1",
		"KAFKA_PROCESS_ROLES=broker,controller",
		"KAFKA_CONTROLLER_QUORUM_VOTERS=1@broker:29093",
		"KAFKA_LISTENERS=PLAINTEXT://broker:29092,CONTROLLER://broker:29093,PLAINTEXT_HOST://0.0.0.0:9092",
		"KAFKA_INTER_BROKER_LISTENER_NAME=PLAINTEXT",
		"KAFKA_CONTROLLER_LISTENER_NAMES=CONTROLLER",
		"KAFKA_LOG_DIRS=/tmp/kraft-combined-logs",
		"CONFLUENT_METRICS_ENABLE=true",
		"CONFLUENT_SUPPORT_CUSTOMER_ID=anonymous",
		"CLUSTER_ID=MkU3OEVBNTcwNTJENDM2Qk",
		"KAFKA_CONFLUENT_TELEMETRY_EXPORTER_C3PLUSPLUS_TYPE=http",
		"KAFKA_CONFLUENT_SUPPORT_METRICS_ENABLE=false",
		"KAFKA_LOG_CLEANER_ENABLE=true",
		"KAFKA_SOCKET_SEND_BUFFER_BYTES=102400",
		"KAFKA_NUM_NETWORK_THREADS=3",
		"KAFKA_ZOOKEEPER_CONNECT=zookeeper:2181",
		"KAFKA_HEAP_OPTS=-Xmx1G -Xms1G",
		"KAFKA_LOG4J_ROOT_LOGLEVEL=WARN",
		"KAFKA_LOG4J_LOGGERS=kafka.controller=INFO",
	}
	l := mustLoad(t, nil, env)
	if l.cfg.NodeID != 1 || l.cfg.LogDirs != "/tmp/kraft-combined-logs" || l.cfg.ClusterID != "MkU3OEVBNTcwNTJENDM2Qk" || !l.cfg.CleanerEnable {
		t.Fatalf("config %+v", l.cfg)
	}
	if l.logLevel != "warn" {
		t.Errorf("log level %q, want warn from KAFKA_LOG4J_ROOT_LOGLEVEL", l.logLevel)
	}
	for _, want := range []string{"KAFKA_JMX_PORT", "KAFKA_JMX_HOSTNAME", "KAFKA_HEAP_OPTS", "KAFKA_LOG4J_LOGGERS",
		"confluent.license.topic.replication.factor", "confluent.support.metrics.enable", "metric.reporters",
		"socket.send.buffer.bytes", "num.network.threads", "KAFKA_ZOOKEEPER_CONNECT"} {
		if !slices.Contains(l.ignored, want) {
			t.Errorf("ignored %v lacks %s", l.ignored, want)
		}
	}
	if l.cfg.TxnTopicMinISR != 1 || l.cfg.TxnTopicReplication != 1 {
		t.Errorf("transaction.state.log.*: %d / %d, want 1 / 1", l.cfg.TxnTopicReplication, l.cfg.TxnTopicMinISR)
	}
	if containsSub(l.ignored, "CONFLUENT_METRICS") || containsSub(l.warnings, "CONFLUENT_METRICS") {
		t.Errorf("CONFLUENT_ variables are not Fjord's business: %v %v", l.ignored, l.warnings)
	}
}

// Bitnami's documented single-node KRaft file: KAFKA_CFG_ wins over the
// image's own defaults, an empty advertised host is the host name, and the
// data goes where Bitnami's volume is mounted.
func TestBitnamiCompose(t *testing.T) {
	withHostname(t, "c0ffee123456")
	env := []string{
		"FJORD_DEFAULT_LISTENERS=PLAINTEXT://0.0.0.0:9092", // Fjord's image
		"FJORD_DEFAULT_LOG_DIRS=/var/lib/fjord",
		"KAFKA_CFG_NODE_ID=0",
		"KAFKA_CFG_PROCESS_ROLES=controller,broker",
		"KAFKA_CFG_LISTENERS=PLAINTEXT://:9092,CONTROLLER://:9093",
		"KAFKA_CFG_ADVERTISED_LISTENERS=PLAINTEXT://:9092",
		"KAFKA_CFG_LISTENER_SECURITY_PROTOCOL_MAP=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
		"KAFKA_CFG_CONTROLLER_LISTENER_NAMES=CONTROLLER",
		"KAFKA_CFG_INTER_BROKER_LISTENER_NAME=PLAINTEXT",
		"ALLOW_PLAINTEXT_LISTENER=yes",
		"BITNAMI_DEBUG=true",
	}
	for _, voters := range []string{"", "KAFKA_CFG_CONTROLLER_QUORUM_VOTERS=0@kafka:9093", "KAFKA_CFG_CONTROLLER_QUORUM_BOOTSTRAP_SERVERS=kafka:9093"} {
		t.Run(voters, func(t *testing.T) {
			e := slices.Clone(env)
			if voters != "" {
				e = append(e, voters)
			}
			l := mustLoad(t, nil, e)
			c := l.cfg
			if c.NodeID != 0 || c.Listeners != "PLAINTEXT://:9092,CONTROLLER://:9093" || c.AdvertisedListeners != "PLAINTEXT://c0ffee123456:9092" {
				t.Fatalf("node %d listeners %q advertised %q", c.NodeID, c.Listeners, c.AdvertisedListeners)
			}
			if c.LogDirs != "/bitnami/kafka/data" {
				t.Errorf("log.dirs %q, want Bitnami's /bitnami/kafka/data", c.LogDirs)
			}
			if l.logLevel != "debug" {
				t.Errorf("BITNAMI_DEBUG: level %q", l.logLevel)
			}
		})
	}
	// A user's log.dirs beats Bitnami's default, KAFKA_CFG_ beats KAFKA_.
	l := mustLoad(t, nil, append(slices.Clone(env), "KAFKA_CFG_LOG_DIRS=/data", "KAFKA_NUM_PARTITIONS=2", "KAFKA_CFG_NUM_PARTITIONS=5"))
	if l.cfg.LogDirs != "/data" || l.cfg.NumPartitions != 5 {
		t.Errorf("log.dirs %q num.partitions %d", l.cfg.LogDirs, l.cfg.NumPartitions)
	}
	// Bitnami's image variables are not keys.
	l = mustLoad(t, nil, append(slices.Clone(env), "KAFKA_ENABLE_KRAFT=yes", "KAFKA_KRAFT_CLUSTER_ID=abcdefghijklmnopqrstuv",
		"KAFKA_CLIENT_USERS=user", "KAFKA_CLIENT_PASSWORDS=secret", "KAFKA_MOUNTED_CONF_DIR=/bitnami/kafka/config", "KAFKA_ZOOKEEPER_PROTOCOL=PLAINTEXT"))
	if l.cfg.ClusterID != "abcdefghijklmnopqrstuv" {
		t.Errorf("cluster.id %q", l.cfg.ClusterID)
	}
	if !containsSub(l.warnings, "KAFKA_CLIENT_USERS") || !containsSub(l.warnings, "KAFKA_CLIENT_PASSWORDS") {
		t.Errorf("warnings %q", l.warnings)
	}
	if containsSub(l.warnings, "secret") || containsSub(l.ignored, "secret") {
		t.Errorf("a password reached the log: %q %q", l.warnings, l.ignored)
	}
	if !slices.Contains(l.ignored, "KAFKA_MOUNTED_CONF_DIR") || !slices.Contains(l.ignored, "KAFKA_ZOOKEEPER_PROTOCOL") {
		t.Errorf("ignored %q", l.ignored)
	}
}

// The image's FJORD_DEFAULT_ variables sit below every source, so an
// advertised listener alone still derives the listeners (it used to be
// shadowed by the image's KAFKA_LISTENERS).
func TestImageDefaults(t *testing.T) {
	img := []string{"FJORD_DEFAULT_LISTENERS=PLAINTEXT://0.0.0.0:9092", "FJORD_DEFAULT_LOG_DIRS=/var/lib/fjord"}
	l := mustLoad(t, nil, img)
	if l.cfg.Listeners != "PLAINTEXT://0.0.0.0:9092" || l.cfg.LogDirs != "/var/lib/fjord" {
		t.Fatalf("listeners %q log.dirs %q", l.cfg.Listeners, l.cfg.LogDirs)
	}
	l = mustLoad(t, nil, append(slices.Clone(img), "KAFKA_ADVERTISED_LISTENERS=PLAINTEXT://localhost:9092,INTERNAL://fjord:19092",
		"KAFKA_LISTENER_SECURITY_PROTOCOL_MAP=PLAINTEXT:PLAINTEXT,INTERNAL:PLAINTEXT"))
	if l.cfg.Listeners != "PLAINTEXT://0.0.0.0:9092,INTERNAL://0.0.0.0:19092" {
		t.Errorf("derived listeners %q", l.cfg.Listeners)
	}
	l = mustLoad(t, []string{"--override", "log.dirs=/x"}, img)
	if l.cfg.LogDirs != "/x" {
		t.Errorf("log.dirs %q", l.cfg.LogDirs)
	}
}

func TestKafkaOpts(t *testing.T) {
	l := mustLoad(t, nil, []string{`KAFKA_OPTS=-Djava.security.auth.login.config=/etc/kafka/jaas.conf -Xms256m "-Dfoo=a b" -javaagent:/jmx.jar=7071:/c.yml`})
	if l.cfg.SASL.JAASFile != "/etc/kafka/jaas.conf" {
		t.Errorf("JAAS file %q: want the one KAFKA_OPTS names", l.cfg.SASL.JAASFile)
	}
	for _, w := range []string{"KAFKA_OPTS -Xms256m", "KAFKA_OPTS -Dfoo=a b", "KAFKA_OPTS -javaagent:/jmx.jar=7071:/c.yml"} {
		if !slices.Contains(l.ignored, w) {
			t.Errorf("ignored %q lacks %q", l.ignored, w)
		}
	}
}

func TestKubernetesServiceLinks(t *testing.T) {
	l := mustLoad(t, nil, []string{"KAFKA_PORT=tcp://10.0.0.7:9092", "KAFKA_SERVICE_HOST=10.0.0.7", "KAFKA_SERVICE_PORT=9092",
		"KAFKA_SERVICE_PORT_BROKER=9092", "KAFKA_PORT_9092_TCP=tcp://10.0.0.7:9092", "KAFKA_PORT_9092_TCP_ADDR=10.0.0.7"})
	if len(l.ignored) != 6 {
		t.Errorf("ignored %q", l.ignored)
	}
	// KAFKA_PORT with a number is Kafka's removed `port` key: refused.
	if _, err := loadConfig(nil, []string{"KAFKA_PORT=9092"}); err == nil || !strings.Contains(err.Error(), "removed in Kafka 3.0") {
		t.Errorf("KAFKA_PORT=9092: %v", err)
	}
}

// A refused value can be taken back by a higher source.
func TestHigherSourceClearsARefusal(t *testing.T) {
	file := writeProps(t, "authorizer.class.name=com.example.OpaAuthorizer\n")
	if _, err := loadConfig([]string{"--config", file}, nil); err == nil {
		t.Fatal("authorizer in the file: no error")
	}
	mustLoad(t, []string{"--config", file, "--override", "authorizer.class.name="}, nil)
}

func TestLog4jLevels(t *testing.T) {
	for in, want := range map[string]string{"TRACE": "trace", "debug": "debug", "INFO": "info", "WARN": "warn", "ERROR": "error", "FATAL": "fatal", "OFF": "disabled"} {
		l := mustLoad(t, nil, []string{"KAFKA_LOG4J_ROOT_LOGLEVEL=" + in, "BITNAMI_DEBUG=true"})
		if l.logLevel != want {
			t.Errorf("%s: %q, want %q", in, l.logLevel, want)
		}
	}
}

// apache/kafka's isolated example gives its controller-only nodes
// KAFKA_INTER_BROKER_LISTENER_NAME, which they have no listener for.
func TestApacheIsolatedController(t *testing.T) {
	l := mustLoad(t, nil, []string{
		"KAFKA_NODE_ID=1",
		"KAFKA_PROCESS_ROLES=controller",
		"KAFKA_CONTROLLER_QUORUM_VOTERS=1@controller-1:9093,2@controller-2:9093,3@controller-3:9093",
		"KAFKA_INTER_BROKER_LISTENER_NAME=PLAINTEXT",
		"KAFKA_CONTROLLER_LISTENER_NAMES=CONTROLLER",
		"KAFKA_LISTENERS=CONTROLLER://:9093",
		"CLUSTER_ID=4L6g3nShT-eMCtK--X86sw",
		"KAFKA_OFFSETS_TOPIC_REPLICATION_FACTOR=1",
		"KAFKA_GROUP_INITIAL_REBALANCE_DELAY_MS=0",
		"KAFKA_TRANSACTION_STATE_LOG_MIN_ISR=1",
		"KAFKA_TRANSACTION_STATE_LOG_REPLICATION_FACTOR=1",
		"KAFKA_LOG_DIRS=/tmp/kraft-combined-logs",
	})
	if l.cfg.ProcessRoles != "controller" || l.cfg.InterBrokerListenerName != "PLAINTEXT" {
		t.Fatalf("%+v", l.cfg)
	}
	// A broker still needs the listener it names.
	if _, err := loadConfig(nil, []string{"KAFKA_INTER_BROKER_LISTENER_NAME=INTERNAL"}); err == nil {
		t.Error("a broker without its inter-broker listener started")
	}
}
