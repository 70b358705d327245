package main

import (
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"

	"github.com/fjordlog/fjord/broker"
)

// errHelp is returned by LoadConfig when -h or --help was given; main prints
// usage() and exits successfully.
var errHelp = errors.New("help requested")

// usage describes the command line.
func usage() string {
	return `Usage: fjord [--config PATH] [--override key=value]...
       fjord health [--brokers N] [--wait] [--timeout 60s] [--bootstrap host:port]

fjord health exits 0 when the node serves (its listener answers and lists
it as a live broker): a container healthcheck. It reads the node's
configuration the same way (flags below, KAFKA_* environment).

Flags:
  --config PATH          read a Java properties file (server.properties style)
  --override key=value   set one configuration key; repeatable
  -h, --help             print this help

Configuration comes from, in rising priority: the built-in defaults, the
--config file, KAFKA_* environment variables (the official Kafka container
image's convention: KAFKA_LOG_RETENTION_MS=60000 sets log.retention.ms;
CLUSTER_ID sets cluster.id; Confluent's and Bitnami's KAFKA_CFG_* work too)
and --override flags. Keys use Kafka's property names. A Kafka key Fjord
has no use for is ignored with a warning; a key Kafka does not have stops
start-up.

Every key, Fjord's and Kafka's, and what Fjord does with it, is listed in
docs/configuration.md.
`
}

// configKey is one supported property.
type configKey struct {
	name string
	// def is the default rendered from broker.DefaultConfig(); "" means
	// unset (the key has no value unless a source gives one).
	def string
	doc string
	// set parses a (trimmed) value into the config. Errors omit the key
	// name; the caller adds it.
	set func(c *broker.Config, v string) error
	// prio orders keys that write the same field: when several are given,
	// the highest prio is applied last and wins (log.retention.ms over
	// .minutes over .hours), whatever source each came from.
	prio int
}

// configKeys is the table of every supported key, in documentation order.
var configKeys = newConfigKeys()

// keyIndex maps a key name to its position in configKeys.
var keyIndex = func() map[string]int {
	m := make(map[string]int, len(configKeys))
	for i, k := range configKeys {
		if _, dup := m[k.name]; dup {
			panic("duplicate config key " + k.name)
		}
		m[k.name] = i
	}
	return m
}()

const (
	msPerMinute = 60 * 1000
	msPerHour   = 60 * msPerMinute
)

func newConfigKeys() []configKey {
	d := broker.DefaultConfig()
	itoa := func(n int64) string { return strconv.FormatInt(n, 10) }
	hours := func(ms int64) string {
		if ms > 0 && ms%msPerHour == 0 {
			return itoa(ms / msPerHour)
		}
		return ""
	}
	return []configKey{
		// Node identity and network.
		{name: "node.id", def: itoa(int64(d.NodeID)), doc: "Id of this node.",
			set: setInt(func(c *broker.Config) *int32 { return &c.NodeID })},
		{name: "broker.id", prio: -1, doc: "Alias of node.id; if both are given they must be equal.",
			set: setInt(func(c *broker.Config) *int32 { return &c.NodeID })},
		{name: "process.roles", def: d.ProcessRoles, doc: "Roles of this node: broker, controller or both (comma separated).",
			set: setProcessRoles},
		{name: "cluster.id", def: d.ClusterID, doc: "Cluster id reported to clients (the CLUSTER_ID environment variable also sets it).",
			set: setString(func(c *broker.Config) *string { return &c.ClusterID })},
		{name: "listeners", def: d.Listeners, doc: "Comma separated NAME://host:port addresses where the node accepts Kafka clients.",
			set: setString(func(c *broker.Config) *string { return &c.Listeners })},
		{name: "advertised.listeners", def: d.AdvertisedListeners, doc: "Addresses Metadata responses tell clients to dial; empty means the listeners (wildcard host as 127.0.0.1). If set while listeners is not, listeners becomes these with every host replaced by 0.0.0.0.",
			set: setString(func(c *broker.Config) *string { return &c.AdvertisedListeners })},
		{name: "socket.request.max.bytes", def: itoa(int64(d.SocketRequestMaxBytes)), doc: "Largest request frame accepted.",
			set: setInt(func(c *broker.Config) *int32 { return &c.SocketRequestMaxBytes })},
		{name: "num.io.threads", def: itoa(int64(d.NumIOThreads)), doc: "Requests processed in parallel per connection.",
			set: setInt(func(c *broker.Config) *int32 { return &c.NumIOThreads })},
		{name: "connections.max.idle.ms", def: itoa(d.ConnectionsMaxIdleMs), doc: "Idle connections are closed after this many milliseconds.",
			set: setInt(func(c *broker.Config) *int64 { return &c.ConnectionsMaxIdleMs })},
		{name: "fjord.metrics.listener", def: d.MetricsAddr, doc: "host:port serving Prometheus /metrics; empty turns it off (Fjord only).",
			set: setHostPort(func(c *broker.Config) *string { return &c.MetricsAddr })},

		// Storage.
		{name: "log.dirs", def: d.LogDirs, doc: "Data directories, comma separated; only the first is used for now.",
			set: setString(func(c *broker.Config) *string { return &c.LogDirs })},
		{name: "log.dir", prio: -1, doc: "Single data directory, used when log.dirs is not set.",
			set: setString(func(c *broker.Config) *string { return &c.LogDirs })},
		{name: "log.segment.bytes", def: itoa(d.SegmentBytes), doc: "Size at which a partition's active segment is rolled.",
			set: setInt(func(c *broker.Config) *int64 { return &c.SegmentBytes })},
		{name: "log.roll.ms", def: itoa(d.SegmentMs), doc: "Age in milliseconds at which the active segment is rolled.",
			set: setInt(func(c *broker.Config) *int64 { return &c.SegmentMs })},
		{name: "log.roll.hours", prio: -1, def: hours(d.SegmentMs), doc: "log.roll.ms in hours, used when log.roll.ms is not set.",
			set: setScaled(msPerHour, false, func(c *broker.Config) *int64 { return &c.SegmentMs })},
		{name: "log.retention.ms", def: itoa(d.RetentionMs), doc: "Segments older than this are deleted; -1 keeps them forever. Wins over .minutes and .hours.",
			set: setRetention(1)},
		{name: "log.retention.minutes", prio: -1, doc: "log.retention.ms in minutes, used when log.retention.ms is not set; wins over .hours.",
			set: setRetention(msPerMinute)},
		{name: "log.retention.hours", prio: -2, def: hours(d.RetentionMs), doc: "log.retention.ms in hours, used when neither log.retention.ms nor .minutes is set.",
			set: setRetention(msPerHour)},
		{name: "log.retention.bytes", def: itoa(d.RetentionBytes), doc: "Partition size above which the oldest segments are deleted; -1 means no limit.",
			set: setInt(func(c *broker.Config) *int64 { return &c.RetentionBytes })},
		{name: "log.retention.check.interval.ms", def: itoa(d.RetentionCheckInterval), doc: "How often retention is enforced, in milliseconds.",
			set: setInt(func(c *broker.Config) *int64 { return &c.RetentionCheckInterval })},
		{name: "log.index.interval.bytes", def: itoa(int64(d.IndexIntervalBytes)), doc: "Bytes of records between two offset index entries.",
			set: setInt(func(c *broker.Config) *int32 { return &c.IndexIntervalBytes })},
		{name: "log.flush.interval.messages", def: itoa(d.FlushMessages), doc: "Records appended between fsyncs; 1 fsyncs before every acknowledgement.",
			set: setInt(func(c *broker.Config) *int64 { return &c.FlushMessages })},
		{name: "log.flush.interval.ms", def: itoa(d.FlushMs), doc: "Longest time unsynced records may wait when log.flush.interval.messages > 1.",
			set: setInt(func(c *broker.Config) *int64 { return &c.FlushMs })},
		{name: "log.message.timestamp.type", def: d.MessageTimestampType, doc: "CreateTime keeps the producer's timestamps; LogAppendTime stamps records with the broker's clock.",
			set: setString(func(c *broker.Config) *string { return &c.MessageTimestampType })},
		{name: "log.cleanup.policy", def: d.CleanupPolicy, doc: "Default cleanup policy for topics: delete and/or compact (comma separated).",
			set: setCleanupPolicy},
		{name: "message.max.bytes", def: itoa(int64(d.MessageMaxBytes)), doc: "Largest record batch accepted.",
			set: setInt(func(c *broker.Config) *int32 { return &c.MessageMaxBytes })},

		// Topics.
		{name: "num.partitions", def: itoa(int64(d.NumPartitions)), doc: "Partitions of an auto-created topic or one created without a count.",
			set: setInt(func(c *broker.Config) *int32 { return &c.NumPartitions })},
		{name: "default.replication.factor", def: itoa(int64(d.DefaultReplication)), doc: "Replication factor of topics created without one.",
			set: setInt(func(c *broker.Config) *int16 { return &c.DefaultReplication })},
		{name: "min.insync.replicas", def: itoa(int64(d.MinInsyncReplicas)), doc: "Replicas that must have a write for acks=all to succeed.",
			set: setInt(func(c *broker.Config) *int32 { return &c.MinInsyncReplicas })},
		{name: "auto.create.topics.enable", def: strconv.FormatBool(d.AutoCreateTopics), doc: "Create a topic when a client first produces to or fetches metadata for it.",
			set: setBool(func(c *broker.Config) *bool { return &c.AutoCreateTopics })},
		{name: "delete.topic.enable", def: strconv.FormatBool(d.DeleteTopicEnable), doc: "Allow DeleteTopics requests.",
			set: setBool(func(c *broker.Config) *bool { return &c.DeleteTopicEnable })},

		// Consumer groups.
		{name: "group.initial.rebalance.delay.ms", def: itoa(d.GroupInitialRebalanceMs), doc: "How long a new group waits for more members before its first rebalance.",
			set: setInt(func(c *broker.Config) *int64 { return &c.GroupInitialRebalanceMs })},
		{name: "group.min.session.timeout.ms", def: itoa(int64(d.GroupMinSessionMs)), doc: "Shortest session timeout a group member may ask for.",
			set: setInt(func(c *broker.Config) *int32 { return &c.GroupMinSessionMs })},
		{name: "group.max.session.timeout.ms", def: itoa(int64(d.GroupMaxSessionMs)), doc: "Longest session timeout a group member may ask for.",
			set: setInt(func(c *broker.Config) *int32 { return &c.GroupMaxSessionMs })},
		{name: "offsets.retention.minutes", def: itoa(d.OffsetsRetentionMinutes), doc: "Committed offsets of a group without members expire this long after its last commit.",
			set: setInt(func(c *broker.Config) *int64 { return &c.OffsetsRetentionMinutes })},
		{name: "offsets.retention.check.interval.ms", def: itoa(d.OffsetsRetentionCheckMs), doc: "How often expired offsets are looked for.",
			set: setInt(func(c *broker.Config) *int64 { return &c.OffsetsRetentionCheckMs })},
		{name: "producer.id.expiration.ms", def: itoa(d.ProducerIDExpirationMs), doc: "Idempotent-producer state idle this long is dropped.",
			set: setInt(func(c *broker.Config) *int64 { return &c.ProducerIDExpirationMs })},
		{name: "log.cleaner.backoff.ms", def: itoa(d.CleanerBackoffMs), doc: "Pause between log compaction passes.",
			set: setInt(func(c *broker.Config) *int64 { return &c.CleanerBackoffMs })},
		{name: "offsets.topic.num.partitions", def: itoa(int64(d.OffsetsTopicPartitions)), doc: "Partitions of the committed offsets topic.",
			set: setInt(func(c *broker.Config) *int32 { return &c.OffsetsTopicPartitions })},
		{name: "offsets.topic.replication.factor", def: itoa(int64(d.OffsetsTopicReplication)), doc: "Replication factor of the committed offsets topic, capped at the number of controller.quorum.voters (1 for a single node); the topic is created once that many brokers are live.",
			set: setInt(func(c *broker.Config) *int16 { return &c.OffsetsTopicReplication })},

		// Transactions.
		{name: "transaction.state.log.num.partitions", def: itoa(int64(d.TxnTopicPartitions)), doc: "Partitions of the transaction state topic (__transaction_state); a transactional id lives on one of them.",
			set: setInt(func(c *broker.Config) *int32 { return &c.TxnTopicPartitions })},
		{name: "transaction.state.log.replication.factor", def: itoa(int64(d.TxnTopicReplication)), doc: "Replication factor of the transaction state topic, capped at the number of controller.quorum.voters (1 for a single node).",
			set: setInt(func(c *broker.Config) *int16 { return &c.TxnTopicReplication })},
		{name: "transaction.state.log.min.isr", def: itoa(int64(d.TxnTopicMinISR)), doc: "min.insync.replicas of the transaction state topic, capped at its replication factor.",
			set: setInt(func(c *broker.Config) *int32 { return &c.TxnTopicMinISR })},
		{name: "transaction.state.log.segment.bytes", def: itoa(int64(d.TxnTopicSegmentBytes)), doc: "Segment size of the transaction state topic.",
			set: setInt(func(c *broker.Config) *int32 { return &c.TxnTopicSegmentBytes })},
		{name: "transaction.max.timeout.ms", def: itoa(int64(d.TxnMaxTimeoutMs)), doc: "Longest transaction.timeout.ms a producer may ask for (INVALID_TRANSACTION_TIMEOUT above it).",
			set: setInt(func(c *broker.Config) *int32 { return &c.TxnMaxTimeoutMs })},
		{name: "transactional.id.expiration.ms", def: itoa(d.TxnIDExpirationMs), doc: "A transactional id with no transaction for this long is forgotten.",
			set: setInt(func(c *broker.Config) *int64 { return &c.TxnIDExpirationMs })},

		// The metadata quorum.
		{name: "controller.quorum.voters", def: d.ControllerQuorumVoters, doc: "Voters of the KRaft metadata quorum as id@host:port (their CONTROLLER listeners), comma separated; empty = this node alone.",
			set: setString(func(c *broker.Config) *string { return &c.ControllerQuorumVoters })},
		{name: "controller.listener.names", def: d.ControllerListenerNames, doc: "Names of the listeners that carry the metadata quorum and broker-to-controller requests.",
			set: setString(func(c *broker.Config) *string { return &c.ControllerListenerNames })},
		{name: "broker.session.timeout.ms", def: itoa(d.BrokerSessionTimeoutMs), doc: "A broker whose heartbeats stop for this long is fenced and loses its leaderships.",
			set: setInt(func(c *broker.Config) *int64 { return &c.BrokerSessionTimeoutMs })},
		{name: "broker.heartbeat.interval.ms", def: itoa(d.BrokerHeartbeatIntervalMs), doc: "Interval between a broker's heartbeats to the active controller.",
			set: setInt(func(c *broker.Config) *int64 { return &c.BrokerHeartbeatIntervalMs })},
		{name: "broker.rack", def: d.BrokerRack, doc: "Rack of this broker; placement spreads replicas across racks.",
			set: setString(func(c *broker.Config) *string { return &c.BrokerRack })},

		{name: "replica.lag.time.max.ms", def: itoa(d.ReplicaLagTimeMaxMs), doc: "A follower that has not caught up with its leader's log end for this long leaves the ISR.",
			set: setInt(func(c *broker.Config) *int64 { return &c.ReplicaLagTimeMaxMs })},
		{name: "leader.replication.throttled.rate", def: "", doc: "Unset: no cap (Kafka's default, Long.MAX_VALUE). Bytes per second a leader sends, in all, to out-of-sync followers of the replicas its topics list in leader.replication.throttled.replicas (a partition move's copying); a dynamic broker config overrides it.",
			set: setRate(func(c *broker.Config) *int64 { return &c.LeaderReplicationThrottledRate })},
		{name: "follower.replication.throttled.rate", def: "", doc: "Unset: no cap (Kafka's default, Long.MAX_VALUE). Bytes per second an out-of-sync follower fetches, in all, for the replicas its topics list in follower.replication.throttled.replicas; a dynamic broker config overrides it.",
			set: setRate(func(c *broker.Config) *int64 { return &c.FollowerReplicationThrottledRate })},
		{name: "auto.leader.rebalance.enable", def: strconv.FormatBool(d.AutoLeaderRebalance), doc: "Move leadership back to each partition's preferred replica when it is live and in sync.",
			set: setBool(func(c *broker.Config) *bool { return &c.AutoLeaderRebalance })},
		{name: "leader.imbalance.check.interval.seconds", def: itoa(d.LeaderImbalanceCheckSecs), doc: "How often the active controller moves leadership back to preferred replicas.",
			set: setInt(func(c *broker.Config) *int64 { return &c.LeaderImbalanceCheckSecs })},
		{name: "fjord.partition.open.timeout.ms", def: itoa(d.PartitionOpenTimeoutMs), doc: "A replica that takes longer to open (log recovery) stays offline meanwhile and, if it was to lead, hands the leadership to another in-sync replica (Fjord only).",
			set: setInt(func(c *broker.Config) *int64 { return &c.PartitionOpenTimeoutMs })},

		{name: "inter.broker.listener.name", def: d.InterBrokerListenerName, doc: "Listener whose advertised address other brokers use to reach this one (replication); empty = the first client listener.",
			set: setString(func(c *broker.Config) *string { return &c.InterBrokerListenerName })},
		{name: "listener.security.protocol.map", doc: "Security protocol of each listener name (NAME:PROTOCOL list). Fjord serves PLAINTEXT only: a listener mapped to (or named) SSL, SASL_PLAINTEXT or SASL_SSL stops start-up; a name the map leaves out is PLAINTEXT.",
			set: checkAny},
		{name: "controller.quorum.bootstrap.servers", doc: "KIP-853's quorum bootstrap. Without controller.quorum.voters, only one server naming this controller's own listener is accepted (a quorum of one, as Bitnami's single-node files give); anything else stops start-up: list the voters in controller.quorum.voters.",
			set: checkAny},
		{name: "log.cleaner.enable", def: strconv.FormatBool(d.CleanerEnable), doc: "Run log compaction for topics with cleanup.policy=compact (the committed offsets topic included).",
			set: setBool(func(c *broker.Config) *bool { return &c.CleanerEnable })},
		{name: "unclean.leader.election.enable", def: "false", doc: "Fjord never elects a leader outside the ISR (that loses acknowledged records): false is accepted, true stops start-up.",
			set: refuseTrue("Fjord never elects a leader outside the ISR, which would lose acknowledged records")},
	}
}

// ---- value parsers ----

type integer interface{ int16 | int32 | int64 }

func parseInt[T integer](v string) (T, error) {
	var zero T
	bits := 64
	switch any(zero).(type) {
	case int16:
		bits = 16
	case int32:
		bits = 32
	}
	n, err := strconv.ParseInt(v, 10, bits)
	if err != nil {
		if errors.Is(err, strconv.ErrRange) {
			return 0, fmt.Errorf("%q is out of range for a %d-bit integer", v, bits)
		}
		return 0, fmt.Errorf("%q is not an integer", v)
	}
	return T(n), nil
}

func setInt[T integer](field func(*broker.Config) *T) func(*broker.Config, string) error {
	return func(c *broker.Config, v string) error {
		n, err := parseInt[T](v)
		if err != nil {
			return err
		}
		*field(c) = n
		return nil
	}
}

// setRate parses a replication throttle rate in bytes per second (>= 1).
func setRate(field func(*broker.Config) *int64) func(*broker.Config, string) error {
	return func(c *broker.Config, v string) error {
		n, err := parseInt[int64](v)
		if err != nil {
			return err
		}
		if n < 1 {
			return fmt.Errorf("%d bytes/s: must be >= 1", n)
		}
		*field(c) = n
		return nil
	}
}

func checkAny(*broker.Config, string) error { return nil }

// refuseTrue accepts a boolean key that Fjord fixes at false.
func refuseTrue(why string) func(*broker.Config, string) error {
	return func(c *broker.Config, v string) error {
		var b bool
		if err := setBool(func(*broker.Config) *bool { return &b })(c, v); err != nil {
			return err
		}
		if b {
			return errors.New(why)
		}
		return nil
	}
}

// setScaled parses an int (Kafka's type for the .hours and .minutes keys)
// and stores it multiplied by scale; with negForever every negative value
// becomes -1.
func setScaled(scale int64, negForever bool, field func(*broker.Config) *int64) func(*broker.Config, string) error {
	return func(c *broker.Config, v string) error {
		var n int64
		var err error
		if scale == 1 {
			n, err = parseInt[int64](v)
		} else {
			var n32 int32
			n32, err = parseInt[int32](v)
			n = int64(n32) * scale
		}
		if err != nil {
			return err
		}
		if negForever && n < 0 {
			n = -1
		}
		*field(c) = n
		return nil
	}
}

// setRetention handles log.retention.{ms,minutes,hours}: as in Kafka, any
// negative value means keep forever.
func setRetention(scale int64) func(*broker.Config, string) error {
	return setScaled(scale, true, func(c *broker.Config) *int64 { return &c.RetentionMs })
}

func setBool(field func(*broker.Config) *bool) func(*broker.Config, string) error {
	return func(c *broker.Config, v string) error {
		switch {
		case strings.EqualFold(v, "true"):
			*field(c) = true
		case strings.EqualFold(v, "false"):
			*field(c) = false
		default:
			return fmt.Errorf("%q is not a boolean (want true or false)", v)
		}
		return nil
	}
}

func setString(field func(*broker.Config) *string) func(*broker.Config, string) error {
	return func(c *broker.Config, v string) error {
		*field(c) = v
		return nil
	}
}

func setHostPort(field func(*broker.Config) *string) func(*broker.Config, string) error {
	return func(c *broker.Config, v string) error {
		if v != "" {
			if _, _, err := net.SplitHostPort(v); err != nil {
				return fmt.Errorf("%q is not host:port", v)
			}
		}
		*field(c) = v
		return nil
	}
}

// parseList splits a comma separated list, checking every item is allowed.
func parseList(v string, allowed ...string) (string, error) {
	var items []string
	for item := range strings.SplitSeq(v, ",") {
		item = strings.TrimSpace(item)
		if !slices.Contains(allowed, item) {
			return "", fmt.Errorf("%q: %q is not one of %s", v, item, strings.Join(allowed, ", "))
		}
		items = append(items, item)
	}
	return strings.Join(items, ","), nil
}

func setProcessRoles(c *broker.Config, v string) error {
	s, err := parseList(v, "broker", "controller")
	if err != nil {
		return err
	}
	c.ProcessRoles = s
	return nil
}

func setCleanupPolicy(c *broker.Config, v string) error {
	s, err := parseList(v, "delete", "compact")
	if err != nil {
		return err
	}
	c.CleanupPolicy = s
	return nil
}
