package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

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
CLUSTER_ID sets cluster.id) and --override flags. Keys use Kafka's property
names; an unknown key stops start-up.

Every supported key, its default and its meaning are listed in
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
	// noEffect marks keys accepted for compatibility with Kafka
	// configurations that Fjord does not use yet: set only checks the value.
	noEffect bool
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
		{name: "auto.leader.rebalance.enable", def: strconv.FormatBool(d.AutoLeaderRebalance), doc: "Move leadership back to each partition's preferred replica when it is live and in sync.",
			set: setBool(func(c *broker.Config) *bool { return &c.AutoLeaderRebalance })},
		{name: "leader.imbalance.check.interval.seconds", def: itoa(d.LeaderImbalanceCheckSecs), doc: "How often the active controller moves leadership back to preferred replicas.",
			set: setInt(func(c *broker.Config) *int64 { return &c.LeaderImbalanceCheckSecs })},
		{name: "fjord.partition.open.timeout.ms", def: itoa(d.PartitionOpenTimeoutMs), doc: "A replica that takes longer to open (log recovery) stays offline meanwhile and, if it was to lead, hands the leadership to another in-sync replica (Fjord only).",
			set: setInt(func(c *broker.Config) *int64 { return &c.PartitionOpenTimeoutMs })},

		// Accepted so that usual Kafka configurations start; no effect yet.
		{name: "inter.broker.listener.name", def: d.InterBrokerListenerName, doc: "Listener whose advertised address other brokers use to reach this one (replication); empty = the first client listener.",
			set: setString(func(c *broker.Config) *string { return &c.InterBrokerListenerName })},
		{name: "listener.security.protocol.map", noEffect: true, doc: "Security protocol of each listener name (NAME:PROTOCOL list).",
			set: checkAny},
		{name: "transaction.state.log.replication.factor", noEffect: true, doc: "Replication factor of the transaction state topic.",
			set: checkInt[int16]},
		{name: "transaction.state.log.min.isr", noEffect: true, doc: "min.insync.replicas of the transaction state topic.",
			set: checkInt[int32]},
		{name: "share.coordinator.state.topic.replication.factor", noEffect: true, doc: "Replication factor of the share group state topic.",
			set: checkInt[int16]},
		{name: "share.coordinator.state.topic.min.isr", noEffect: true, doc: "min.insync.replicas of the share group state topic.",
			set: checkInt[int32]},
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

func checkInt[T integer](_ *broker.Config, v string) error {
	_, err := parseInt[T](v)
	return err
}

func checkAny(*broker.Config, string) error { return nil }

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

// ---- sources ----

// setting is one key's value and where it came from, for error messages:
// "path:line", "env NAME" or "--override".
type setting struct {
	value, origin string
}

// envAliases are variables other images use for a key under another name.
var envAliases = map[string]string{
	"KAFKA_KRAFT_CLUSTER_ID": "cluster.id", // Bitnami
}

// ignoredEnv are KAFKA_ variables the official image uses for other purposes.
var ignoredEnv = map[string]bool{
	"KAFKA_HEAP_OPTS":            true,
	"KAFKA_OPTS":                 true,
	"KAFKA_JVM_PERFORMANCE_OPTS": true,
	"KAFKA_LOG4J_OPTS":           true,
	"KAFKA_LOG4J_ROOT_LOGLEVEL":  true,
	"KAFKA_LOG4J_LOGGERS":        true,
	"KAFKA_TOOLS_LOG4J_LOGLEVEL": true,
	"KAFKA_JMX_OPTS":             true,
	"KAFKA_JMX_PORT":             true,
	"KAFKA_GC_LOG_OPTS":          true,
	"KAFKA_DEBUG":                true,
	"KAFKA_VERSION":              true,
	"KAFKA_HOME":                 true,
}

// envToKey converts a KAFKA_ environment variable name to a property name
// as the official image does: drop KAFKA_, lower-case, then ___ -> '-',
// __ -> '_', _ -> '.'.
func envToKey(name string) string {
	if k, ok := envAliases[name]; ok {
		return k
	}
	// Bitnami's images put every property under KAFKA_CFG_, the same
	// convention otherwise; no Kafka key starts with "cfg.".
	s := strings.ToLower(strings.TrimPrefix(strings.TrimPrefix(name, "KAFKA_CFG_"), "KAFKA_"))
	s = strings.ReplaceAll(s, "___", "\x00")
	s = strings.ReplaceAll(s, "__", "\x01")
	s = strings.ReplaceAll(s, "_", ".")
	s = strings.ReplaceAll(s, "\x00", "-")
	return strings.ReplaceAll(s, "\x01", "_")
}

// overrideList collects repeated --override key=value flags.
type overrideList []string

func (o *overrideList) String() string { return strings.Join(*o, " ") }

func (o *overrideList) Set(s string) error {
	if k, _, ok := strings.Cut(s, "="); !ok || strings.TrimSpace(k) == "" {
		return errors.New("want key=value")
	}
	*o = append(*o, s)
	return nil
}

// parseArgs reads the command line.
func parseArgs(args []string) (configPath string, overrides []string, err error) {
	fs := flag.NewFlagSet("fjord", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&configPath, "config", "", "")
	var ov overrideList
	fs.Var(&ov, "override", "")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return "", nil, errHelp
		}
		return "", nil, err
	}
	if fs.NArg() > 0 {
		return "", nil, fmt.Errorf("unexpected argument %q (a properties file is given with --config PATH)", fs.Arg(0))
	}
	configSet := false
	fs.Visit(func(f *flag.Flag) { configSet = configSet || f.Name == "config" })
	if configSet && configPath == "" {
		return "", nil, errors.New("--config: empty path")
	}
	return configPath, ov, nil
}

// property is one key/value read from a properties file.
type property struct {
	key, value string
	line       int // where the (possibly continued) line starts
}

// parseProperties reads Java properties text: key=value, key: value or
// "key value"; # and ! comment lines; a line ending in an odd number of
// backslashes continues on the next (whose leading whitespace is dropped);
// backslash escapes (\t \n \r \f \uXXXX, or any character for itself).
// Keys and values are trimmed.
func parseProperties(text string) ([]property, error) {
	text = strings.TrimPrefix(text, "\ufeff")
	lines := strings.Split(text, "\n")
	var out []property
	for i := 0; i < len(lines); i++ {
		start := i + 1
		logical := strings.TrimLeft(strings.TrimSuffix(lines[i], "\r"), " \t\f")
		if logical == "" || logical[0] == '#' || logical[0] == '!' {
			continue
		}
		for continues(logical) && i+1 < len(lines) {
			i++
			logical = logical[:len(logical)-1] + strings.TrimLeft(strings.TrimSuffix(lines[i], "\r"), " \t\f")
		}
		if continues(logical) { // continuation at end of file
			logical = logical[:len(logical)-1]
		}
		// The key ends at the first unescaped '=', ':' or whitespace.
		k := 0
		for k < len(logical) {
			c := logical[k]
			if c == '\\' {
				k += 2
				continue
			}
			if c == '=' || c == ':' || c == ' ' || c == '\t' || c == '\f' {
				break
			}
			k++
		}
		k = min(k, len(logical))
		rawKey, rest := logical[:k], strings.TrimLeft(logical[k:], " \t\f")
		if rest != "" && (rest[0] == '=' || rest[0] == ':') {
			rest = strings.TrimLeft(rest[1:], " \t\f")
		}
		key, err := unescape(rawKey)
		if err != nil {
			return nil, fmt.Errorf("%d: %w", start, err)
		}
		value, err := unescape(rest)
		if err != nil {
			return nil, fmt.Errorf("%d: %w", start, err)
		}
		out = append(out, property{key: strings.TrimSpace(key), value: strings.TrimSpace(value), line: start})
	}
	return out, nil
}

// continues reports whether a line ends in an odd number of backslashes.
func continues(s string) bool {
	n := 0
	for n < len(s) && s[len(s)-1-n] == '\\' {
		n++
	}
	return n%2 == 1
}

func unescape(s string) (string, error) {
	if !strings.Contains(s, `\`) {
		return s, nil
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '\\' {
			b.WriteByte(c)
			continue
		}
		i++
		if i == len(s) {
			break
		}
		switch s[i] {
		case 't':
			b.WriteByte('\t')
		case 'n':
			b.WriteByte('\n')
		case 'r':
			b.WriteByte('\r')
		case 'f':
			b.WriteByte('\f')
		case 'u':
			if i+5 > len(s) {
				return "", fmt.Errorf("malformed \\uXXXX escape in %q", s)
			}
			r, err := strconv.ParseUint(s[i+1:i+5], 16, 16)
			if err != nil {
				return "", fmt.Errorf("malformed \\uXXXX escape in %q", s)
			}
			b.WriteRune(rune(r))
			i += 4
		default:
			r, size := utf8.DecodeRuneInString(s[i:])
			b.WriteRune(r)
			i += size - 1
		}
	}
	return b.String(), nil
}

// LoadConfig builds the node's configuration from, in rising priority: the
// defaults, a properties file (--config path), environment variables in the
// official Kafka container image's convention, and --override key=value flags.
func LoadConfig(args []string, environ []string) (broker.Config, error) {
	configPath, overrides, err := parseArgs(args)
	if err != nil {
		if errors.Is(err, errHelp) {
			return broker.Config{}, errHelp
		}
		return broker.Config{}, fmt.Errorf("config: %w", err)
	}

	settings := make(map[string]setting)
	var errs []error
	put := func(key, value, origin string) {
		if _, ok := keyIndex[key]; !ok {
			hint := "supported keys: docs/configuration.md"
			if near := nearestKey(key); near != "" {
				hint = fmt.Sprintf("did you mean %q? %s", near, hint)
			}
			errs = append(errs, fmt.Errorf("%s: unknown configuration key %q (%s)", origin, key, hint))
			return
		}
		settings[key] = setting{value: strings.TrimSpace(value), origin: origin}
	}

	// 1. Properties file.
	if configPath != "" {
		data, err := os.ReadFile(configPath)
		if err != nil {
			return broker.Config{}, fmt.Errorf("config: %w", err)
		}
		props, err := parseProperties(string(data))
		if err != nil {
			return broker.Config{}, fmt.Errorf("config: %s:%w", configPath, err)
		}
		for _, p := range props {
			put(p.key, p.value, fmt.Sprintf("%s:%d", configPath, p.line))
		}
	}

	// 2. Environment. CLUSTER_ID first so that KAFKA_CLUSTER_ID, if also
	// given, wins.
	for _, kv := range environ {
		if name, value, ok := strings.Cut(kv, "="); ok && name == "CLUSTER_ID" {
			put("cluster.id", value, "env CLUSTER_ID")
		}
	}
	for _, kv := range environ {
		name, value, ok := strings.Cut(kv, "=")
		if !ok || !strings.HasPrefix(name, "KAFKA_") || ignoredEnv[name] {
			continue
		}
		put(envToKey(name), value, "env "+name)
	}

	// 3. Flags.
	for _, o := range overrides {
		k, v, _ := strings.Cut(o, "=")
		put(strings.TrimSpace(k), v, "--override")
	}

	// node.id and broker.id name the same thing; Kafka refuses different values.
	if n, ok := settings["node.id"]; ok {
		if b, ok := settings["broker.id"]; ok {
			nv, err1 := parseInt[int32](n.value)
			bv, err2 := parseInt[int32](b.value)
			if err1 == nil && err2 == nil && nv != bv {
				errs = append(errs, fmt.Errorf("node.id %d (%s) and broker.id %d (%s) differ; set only node.id", nv, n.origin, bv, b.origin))
			}
		}
	}

	// Apply the final value of every key given, lowest prio first so that
	// e.g. log.retention.ms overrides .hours whichever source each came from.
	order := make([]int, len(configKeys))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return configKeys[a].prio - configKeys[b].prio })
	cfg := broker.DefaultConfig()
	for _, i := range order {
		k := configKeys[i]
		s, ok := settings[k.name]
		if !ok {
			continue
		}
		if err := k.set(&cfg, s.value); err != nil {
			errs = append(errs, fmt.Errorf("%s: %s: %w", s.origin, k.name, err))
		}
	}

	// As in the official image: listeners defaults to advertised.listeners
	// with every host replaced by 0.0.0.0.
	if adv, ok := settings["advertised.listeners"]; ok && adv.value != "" {
		if _, ok := settings["listeners"]; !ok {
			if ls, err := broker.ParseListeners(cfg.AdvertisedListeners); err == nil {
				parts := make([]string, len(ls))
				for i, l := range ls {
					parts[i] = l.Name + "://" + net.JoinHostPort("0.0.0.0", strconv.Itoa(int(l.Port)))
				}
				cfg.Listeners = strings.Join(parts, ",")
			} // else Validate reports advertised.listeners
		}
	}

	if len(errs) > 0 {
		return broker.Config{}, fmt.Errorf("config: %w", errors.Join(errs...))
	}
	if err := cfg.Validate(); err != nil {
		return broker.Config{}, fmt.Errorf("config: %w", err)
	}
	return cfg, nil
}

// nearestKey is the supported key closest to an unknown one, if it is
// close enough to be a typo (an edit distance of at most a fifth of its
// length, and at least one edit); "" otherwise.
func nearestKey(key string) string {
	best, bestD := "", max(len(key)/5, 1)+1
	for _, k := range slices.Sorted(maps.Keys(keyIndex)) { // sorted: ties go to the first
		if d := editDistance(key, k, bestD); d < bestD {
			best, bestD = k, d
		}
	}
	if bestD > max(len(key)/5, 1) {
		return ""
	}
	return best
}

// editDistance is the Levenshtein distance of a and b, or anything >=
// limit once it is known to reach limit.
func editDistance(a, b string, limit int) int {
	if d := len(a) - len(b); d >= limit || -d >= limit {
		return limit
	}
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		rowMin := cur[0]
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			rowMin = min(rowMin, cur[j])
		}
		if rowMin >= limit {
			return limit
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
