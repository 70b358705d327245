package config

import (
	"errors"
	"fmt"
	"math"
	"net"
	"slices"
	"strconv"
	"strings"

	"github.com/fjordlog/fjord/broker/console"
	"github.com/fjordlog/fjord/broker/pwenc"
	"github.com/fjordlog/fjord/broker/sasl"
	"github.com/fjordlog/fjord/storage"
)

// Config is everything a node needs to run. Field names follow Kafka's own
// property names (listed beside each field); cmd/fjord maps properties,
// environment variables and flags onto it. The zero value is not valid: start
// from Default.
type Config struct {
	NodeID int32 // node.id

	// Listeners is where the node accepts Kafka clients: "PLAINTEXT://host:port"
	// entries, comma separated (listeners).
	Listeners string
	// AdvertisedListeners is what Metadata tells clients to dial
	// (advertised.listeners). Empty means: the listeners, with a wildcard host
	// replaced by 127.0.0.1 and a zero port replaced by the bound port.
	AdvertisedListeners string
	ClusterID           string // cluster.id (or CLUSTER_ID in the container convention)

	LogDirs string // log.dirs; only the first directory is used for now

	NumPartitions           int32  // num.partitions
	DefaultReplication      int16  // default.replication.factor
	AutoCreateTopics        bool   // auto.create.topics.enable
	DeleteTopicEnable       bool   // delete.topic.enable
	MessageMaxBytes         int32  // message.max.bytes: largest record batch accepted
	SocketRequestMaxBytes   int32  // socket.request.max.bytes: largest request frame
	SegmentBytes            int64  // log.segment.bytes
	SegmentMs               int64  // log.roll.ms (log.roll.hours is derived)
	RetentionMs             int64  // log.retention.ms; -1 keeps forever
	RetentionBytes          int64  // log.retention.bytes; -1 means no size limit
	RetentionCheckInterval  int64  // log.retention.check.interval.ms
	IndexIntervalBytes      int32  // log.index.interval.bytes
	FlushMessages           int64  // log.flush.interval.messages: 1 = fsync before every ack
	FlushMs                 int64  // log.flush.interval.ms: bound on unsynced age when FlushMessages > 1
	MessageTimestampType    string // log.message.timestamp.type: CreateTime or LogAppendTime
	CleanupPolicy           string // log.cleanup.policy
	MinInsyncReplicas       int32  // min.insync.replicas
	NumIOThreads            int32  // num.io.threads: in-flight requests per connection
	ConnectionsMaxIdleMs    int64  // connections.max.idle.ms
	GroupInitialRebalanceMs int64  // group.initial.rebalance.delay.ms (accepted; used by group coordinator)
	OffsetsTopicPartitions  int32  // offsets.topic.num.partitions
	GroupMinSessionMs       int32  // group.min.session.timeout.ms
	GroupMaxSessionMs       int32  // group.max.session.timeout.ms
	// KIP-848 consumer groups: group.consumer.session.timeout.ms,
	// group.consumer.heartbeat.interval.ms, group.consumer.max.size, and
	// group.consumer.assignors (names, the first the default).
	ConsumerSessionMs   int32
	ConsumerHeartbeatMs int32
	ConsumerMaxSize     int32
	ConsumerAssignors   []string
	// ConsumerMigrationPolicy (group.consumer.migration.policy): which
	// online conversions between classic and consumer groups happen:
	// bidirectional, upgrade, downgrade or disabled (lower case).
	ConsumerMigrationPolicy string
	// The bounds of a group's consumer.session.timeout.ms and
	// consumer.heartbeat.interval.ms: group.consumer.min/max.session.timeout.ms,
	// group.consumer.min/max.heartbeat.interval.ms (keys_groups.go).
	ConsumerMinSessionMs   int32
	ConsumerMaxSessionMs   int32
	ConsumerMinHeartbeatMs int32
	ConsumerMaxHeartbeatMs int32
	// ShareGroups is the group.share.* keys that share groups' group
	// configs default to and are bounded by (keys_groups.go).
	ShareGroups             ShareGroupConfig
	OffsetsRetentionMinutes int64 // offsets.retention.minutes: committed offsets of an empty group expire after this
	OffsetsRetentionCheckMs int64 // offsets.retention.check.interval.ms
	CleanerBackoffMs        int64 // log.cleaner.backoff.ms: pause between compaction passes
	// CleanerEnable is log.cleaner.enable: false stops compaction of every
	// topic, __consumer_offsets included, as in Kafka.
	CleanerEnable           bool
	ProducerIDExpirationMs  int64 // producer.id.expiration.ms: idempotent-producer state idle this long is dropped
	OffsetsTopicReplication int16 // offsets.topic.replication.factor
	// The transaction coordinator's topic and limits (Kafka's names).
	TxnTopicPartitions  int32 // transaction.state.log.num.partitions
	TxnTopicReplication int16 // transaction.state.log.replication.factor
	TxnTopicMinISR      int32 // transaction.state.log.min.isr
	// KIP-932's share-group state topic, __share_group_state:
	// share.coordinator.state.topic.num.partitions, .replication.factor
	// and .min.isr.
	ShareStatePartitions  int32
	ShareStateReplication int16
	ShareStateMinISR      int16
	TxnTopicSegmentBytes  int32  // transaction.state.log.segment.bytes
	TxnMaxTimeoutMs       int32  // transaction.max.timeout.ms: the longest transaction.timeout.ms a producer may ask for
	TxnIDExpirationMs     int64  // transactional.id.expiration.ms: an idle transactional id is forgotten after this
	ProcessRoles          string // process.roles
	// ControllerQuorumVoters lists the metadata quorum's voters as
	// "id@host:port" (controller.quorum.voters). Empty means a quorum of
	// one: this node, which must have the controller role.
	ControllerQuorumVoters    string
	ControllerListenerNames   string // controller.listener.names
	BrokerSessionTimeoutMs    int64  // broker.session.timeout.ms: a broker silent this long is fenced
	BrokerHeartbeatIntervalMs int64  // broker.heartbeat.interval.ms
	BrokerRack                string // broker.rack
	// PartitionOpenTimeoutMs bounds how long applying a metadata change
	// waits for new replicas to open (fjord.partition.open.timeout.ms).
	PartitionOpenTimeoutMs int64
	// LogFlushStallMaxMs (fjord.log.flush.stall.max.ms): a leader whose
	// own fsync of a partition has run this long resigns that partition's
	// leadership to another in-sync replica; 0 never resigns for a stall.
	LogFlushStallMaxMs int64
	// LogOpenFilesMax is the capacity of the node's cache of open log
	// files (fjord.log.open.files.max); 0 derives it from RLIMIT_NOFILE
	// (broker/replicamgr/fdbudget.go).
	LogOpenFilesMax int64
	// LogIndexCacheBytes bounds the memory of sealed segments' indexes
	// held for lookups (fjord.log.index.cache.bytes, storage.IndexCache).
	LogIndexCacheBytes int64
	// ReplicaLagTimeMaxMs: a follower not caught up for this long leaves
	// the ISR (replica.lag.time.max.ms).
	ReplicaLagTimeMaxMs int64
	// LeaderReplicationThrottledRate and FollowerReplicationThrottledRate
	// cap, in bytes per second, the replication of throttled replicas
	// (leader.replication.throttled.rate, follower.replication.throttled.rate;
	// broker/throttle.go). 0 means Kafka's default, Long.MAX_VALUE: no cap. A
	// dynamic broker config in the metadata image overrides them.
	LeaderReplicationThrottledRate   int64
	FollowerReplicationThrottledRate int64
	// InterBrokerListenerName names the listener followers fetch through
	// (inter.broker.listener.name), compared in upper case as Kafka does;
	// "" = the first client listener.
	InterBrokerListenerName string
	// AutoLeaderRebalance moves leadership back to preferred replicas
	// every LeaderImbalanceCheckSecs (auto.leader.rebalance.enable,
	// leader.imbalance.check.interval.seconds).
	AutoLeaderRebalance      bool
	LeaderImbalanceCheckSecs int64
	// FastFencing: the active controller fences a broker whose listeners
	// refuse connections at once (fjord.controller.fast.fencing.enable).
	FastFencing bool
	MetricsAddr string // fjord.metrics.listener: host:port for /metrics, empty = off
	// MetricsPprof also serves Go's /debug/pprof on the metrics listener
	// (fjord.metrics.pprof.enable).
	MetricsPprof bool
	ConsoleAddr  string // fjord.console.listener: host:port for the web console, empty = off
	// ConsoleAllowedHosts is fjord.console.allowed.hosts: Host header
	// values the console answers besides its own address (comma
	// separated host or host:port, or *; console.Hosts).
	ConsoleAllowedHosts string
	// Client connection and request-memory limits (broker/limits.go):
	// max.connections, max.connections.per.ip and its overrides (dynamic),
	// queued.max.request.bytes, connection.failed.authentication.delay.ms.
	MaxConnections              int32
	MaxConnectionsPerIP         int32
	MaxConnectionsPerIPOverride string
	QueuedMaxRequestBytes       int64
	FailedAuthDelayMs           int32
	// FetchSessionSlots is max.incremental.fetch.session.cache.slots: the
	// most KIP-227 fetch sessions the node caches (0: none, every fetch
	// is full). broker/partitions/fetchsession.
	FetchSessionSlots int32

	// AuthorizerClass is authorizer.class.name: "" = no authorizer (every
	// client may do everything, and the ACL APIs answer
	// SECURITY_DISABLED), else StandardAuthorizerClass or its legacy
	// alias (keys_authz.go).
	AuthorizerClass string
	// SuperUsers is super.users: principals, semicolon separated, that
	// every authorization allows.
	SuperUsers string
	// AllowEveryoneIfNoACL is allow.everyone.if.no.acl.found.
	AllowEveryoneIfNoACL bool
	// AuditLogFile is fjord.audit.log.file: where the audit stream goes
	// (broker/audit.go); "" = stderr, "off" = nowhere.
	AuditLogFile string

	// ListenerSecurityProtocolMap is listener.security.protocol.map
	// (NAME:PROTOCOL,...); "" = not given, Kafka's default (protocolMap).
	// Every listener name must have a protocol (ListenerProtocol).
	ListenerSecurityProtocolMap string
	// SSL holds the ssl.* keys given (tlsconf.Keys) and their
	// listener.name.<name>.ssl.* overrides, by full key. Read-only: a
	// setter copies it before writing.
	SSL map[string]string
	// SSLReloadCheckMs is how often a TLS listener's store files are
	// checked for changes (fjord.ssl.reload.check.interval.ms).
	SSLReloadCheckMs int64
	// SASL holds the SASL keys; its per-listener ones and sasl.jaas.config
	// (which hold passwords) are never reported by DescribeConfigs.
	SASL sasl.Settings
	// PasswordEncoder is the password.encoder.* keys: how password-type
	// dynamic configs are encrypted before they are stored (passwords.go).
	PasswordEncoder pwenc.Settings
	// Remote is the tiered-storage keys (KIP-405): remote.log.*,
	// log.local.retention.* and Aiven's rsm.config.* (keys_remote.go).
	Remote RemoteStorage

	// Static holds the keys of the broker key table (Keys) that the
	// node's sources gave, with their values: DescribeConfigs reports them
	// as STATIC_BROKER_CONFIG (the rest as DEFAULT_CONFIG), and a static
	// key outranks a dynamic lower-priority synonym. Read-only.
	Static map[string]string
}

// DevConsoleAddr is where a zero-config run (no configuration source at
// all: a developer's `fjord`) serves the web console; any configuration
// leaves it off unless fjord.console.listener is set.
const DevConsoleAddr = "127.0.0.1:8092"

// Default is a single combined node on 127.0.0.1:9092 that keeps its
// data in ./fjord-data and fsyncs before acknowledging.
func Default() Config {
	return Config{
		NodeID:                    1,
		Listeners:                 "PLAINTEXT://127.0.0.1:9092",
		SASL:                      sasl.Settings{EnabledMechanisms: "GSSAPI", InterBrokerMechanism: "GSSAPI", ControllerMechanism: "GSSAPI"},
		ClusterID:                 "",
		LogDirs:                   "./fjord-data",
		NumPartitions:             1,
		DefaultReplication:        1,
		AutoCreateTopics:          true,
		DeleteTopicEnable:         true,
		MessageMaxBytes:           1048588,
		SocketRequestMaxBytes:     104857600,
		SegmentBytes:              1 << 30,
		SegmentMs:                 7 * 24 * 3600 * 1000,
		RetentionMs:               7 * 24 * 3600 * 1000,
		RetentionBytes:            -1,
		RetentionCheckInterval:    300000,
		IndexIntervalBytes:        4096,
		FlushMessages:             1,
		FlushMs:                   1000,
		MessageTimestampType:      "CreateTime",
		CleanupPolicy:             "delete",
		MinInsyncReplicas:         1,
		NumIOThreads:              8,
		ConnectionsMaxIdleMs:      600000,
		MaxConnections:            math.MaxInt32,
		MaxConnectionsPerIP:       math.MaxInt32,
		QueuedMaxRequestBytes:     64 << 20,
		Remote:                    defaultRemoteStorage(),
		FailedAuthDelayMs:         100,
		FetchSessionSlots:         1000,
		GroupInitialRebalanceMs:   3000,
		OffsetsTopicPartitions:    50,
		GroupMinSessionMs:         6000,
		GroupMaxSessionMs:         1800000,
		ConsumerSessionMs:         45000,
		ConsumerHeartbeatMs:       5000,
		ConsumerMaxSize:           math.MaxInt32,
		ConsumerAssignors:         []string{"uniform", "range"},
		ConsumerMigrationPolicy:   "bidirectional",
		ConsumerMinSessionMs:      45000,
		ConsumerMaxSessionMs:      60000,
		ConsumerMinHeartbeatMs:    5000,
		ConsumerMaxHeartbeatMs:    15000,
		ShareGroups:               defaultShareGroups(),
		OffsetsRetentionMinutes:   10080,
		OffsetsRetentionCheckMs:   600000,
		CleanerBackoffMs:          15000,
		CleanerEnable:             true,
		ProducerIDExpirationMs:    86400000,
		OffsetsTopicReplication:   3,
		TxnTopicPartitions:        50,
		TxnTopicReplication:       3,
		TxnTopicMinISR:            2,
		ShareStatePartitions:      50,
		ShareStateReplication:     3,
		ShareStateMinISR:          2,
		TxnTopicSegmentBytes:      104857600,
		TxnMaxTimeoutMs:           900000,
		TxnIDExpirationMs:         604800000,
		ProcessRoles:              "broker,controller",
		ControllerListenerNames:   "CONTROLLER",
		BrokerSessionTimeoutMs:    9000,
		BrokerHeartbeatIntervalMs: 2000,
		PartitionOpenTimeoutMs:    120000,
		LogFlushStallMaxMs:        5000,
		LogIndexCacheBytes:        storage.DefaultIndexCacheBytes,
		ReplicaLagTimeMaxMs:       30000,
		AutoLeaderRebalance:       true,
		FastFencing:               true,
		LeaderImbalanceCheckSecs:  300,
		SSLReloadCheckMs:          10000,
		PasswordEncoder:           pwenc.DefaultSettings(),
	}
}

// Validate reports the first setting that cannot work.
func (c *Config) Validate() error {
	if _, err := sasl.ParseScramBootstrap(c.SASL.ScramBootstrap); err != nil {
		return fmt.Errorf("fjord.sasl.scram.bootstrap: %w", err)
	}
	var errs []error
	if c.NodeID < 0 {
		errs = append(errs, fmt.Errorf("node.id %d: must be >= 0", c.NodeID))
	}
	if _, err := ParseListeners(c.Listeners); err != nil {
		errs = append(errs, fmt.Errorf("listeners: %w", err))
	}
	if c.AdvertisedListeners != "" {
		if _, err := ParseListeners(c.AdvertisedListeners); err != nil {
			errs = append(errs, fmt.Errorf("advertised.listeners: %w", err))
		}
	}
	if _, err := console.ParseAllowedHosts(c.ConsoleAllowedHosts); err != nil {
		errs = append(errs, fmt.Errorf("%s: %w", console.AllowedHostsKey, err))
	}
	if c.LogDirs == "" {
		errs = append(errs, errors.New("log.dirs: must not be empty"))
	}
	if c.NumPartitions < 1 {
		errs = append(errs, fmt.Errorf("num.partitions %d: must be >= 1", c.NumPartitions))
	}
	if c.MinInsyncReplicas < 1 {
		errs = append(errs, fmt.Errorf("min.insync.replicas %d: must be >= 1", c.MinInsyncReplicas))
	}
	if c.MessageMaxBytes < 64 {
		errs = append(errs, fmt.Errorf("message.max.bytes %d: too small", c.MessageMaxBytes))
	}
	if c.SocketRequestMaxBytes < 1024 {
		errs = append(errs, fmt.Errorf("socket.request.max.bytes %d: too small", c.SocketRequestMaxBytes))
	}
	if c.MaxConnectionsPerIP == 0 && c.MaxConnectionsPerIPOverride == "" {
		errs = append(errs, errors.New("max.connections.per.ip 0 refuses every client: give max.connections.per.ip.overrides with it (as Kafka requires)"))
	}
	if c.SegmentBytes < 1024 {
		errs = append(errs, fmt.Errorf("log.segment.bytes %d: must be >= 1024", c.SegmentBytes))
	}
	if c.SegmentMs < 1 {
		errs = append(errs, fmt.Errorf("log.roll.ms %d: must be >= 1", c.SegmentMs))
	}
	if c.IndexIntervalBytes < 0 {
		errs = append(errs, fmt.Errorf("log.index.interval.bytes %d: must be >= 0", c.IndexIntervalBytes))
	}
	if c.FlushMessages < 1 {
		errs = append(errs, fmt.Errorf("log.flush.interval.messages %d: must be >= 1", c.FlushMessages))
	}
	if c.MessageTimestampType != "CreateTime" && c.MessageTimestampType != "LogAppendTime" {
		errs = append(errs, fmt.Errorf("log.message.timestamp.type %q: must be CreateTime or LogAppendTime", c.MessageTimestampType))
	}
	if c.ConsumerHeartbeatMs < 1 || c.ConsumerSessionMs <= c.ConsumerHeartbeatMs {
		errs = append(errs, fmt.Errorf("group.consumer.heartbeat.interval.ms %d / group.consumer.session.timeout.ms %d: need 1 <= heartbeat < session",
			c.ConsumerHeartbeatMs, c.ConsumerSessionMs))
	}
	if c.ConsumerMaxSize < 1 {
		errs = append(errs, fmt.Errorf("group.consumer.max.size %d: must be >= 1", c.ConsumerMaxSize))
	}
	if c.GroupMinSessionMs < 1 || c.GroupMaxSessionMs < c.GroupMinSessionMs {
		errs = append(errs, fmt.Errorf("group.min.session.timeout.ms %d / group.max.session.timeout.ms %d: need 1 <= min <= max", c.GroupMinSessionMs, c.GroupMaxSessionMs))
	}
	if c.CleanerBackoffMs < 1 || c.OffsetsRetentionCheckMs < 1 || c.OffsetsRetentionMinutes < 1 || c.ProducerIDExpirationMs < 1 {
		errs = append(errs, errors.New("log.cleaner.backoff.ms, offsets.retention.minutes, offsets.retention.check.interval.ms and producer.id.expiration.ms must be >= 1"))
	}
	if c.ShareStatePartitions < 1 || c.ShareStateReplication < 1 || c.ShareStateMinISR < 1 {
		errs = append(errs, fmt.Errorf("share.coordinator.state.topic.num.partitions %d, .replication.factor %d, .min.isr %d: each must be >= 1",
			c.ShareStatePartitions, c.ShareStateReplication, c.ShareStateMinISR))
	}
	if c.TxnTopicPartitions < 1 || c.TxnTopicReplication < 1 || c.TxnTopicMinISR < 1 || c.TxnTopicSegmentBytes < 1024 ||
		c.TxnMaxTimeoutMs < 1 || c.TxnIDExpirationMs < 1 {
		errs = append(errs, errors.New("transaction.state.log.* and transaction limits: partitions, replication factor, min.isr, transaction.max.timeout.ms and transactional.id.expiration.ms must be >= 1, segment bytes >= 1024"))
	}
	if c.LeaderImbalanceCheckSecs < 1 {
		errs = append(errs, fmt.Errorf("leader.imbalance.check.interval.seconds %d: must be >= 1", c.LeaderImbalanceCheckSecs))
	}
	if c.LeaderReplicationThrottledRate < 0 || c.FollowerReplicationThrottledRate < 0 {
		errs = append(errs, fmt.Errorf("leader.replication.throttled.rate %d, follower.replication.throttled.rate %d: must be >= 1",
			c.LeaderReplicationThrottledRate, c.FollowerReplicationThrottledRate))
	}
	if c.ReplicaLagTimeMaxMs < 1 {
		errs = append(errs, fmt.Errorf("replica.lag.time.max.ms %d: must be >= 1", c.ReplicaLagTimeMaxMs))
	}
	if c.LogIndexCacheBytes < 0 {
		errs = append(errs, fmt.Errorf("fjord.log.index.cache.bytes %d: must be >= 0", c.LogIndexCacheBytes))
	}
	if c.LogOpenFilesMax < 0 {
		errs = append(errs, fmt.Errorf("fjord.log.open.files.max %d: must be >= 0", c.LogOpenFilesMax))
	}
	if c.LogFlushStallMaxMs < 0 {
		errs = append(errs, fmt.Errorf("fjord.log.flush.stall.max.ms %d: must be >= 0", c.LogFlushStallMaxMs))
	}
	if c.PartitionOpenTimeoutMs < 1 {
		errs = append(errs, fmt.Errorf("fjord.partition.open.timeout.ms %d: must be >= 1", c.PartitionOpenTimeoutMs))
	}
	if c.SSLReloadCheckMs < 1 {
		errs = append(errs, fmt.Errorf("fjord.ssl.reload.check.interval.ms %d: must be >= 1", c.SSLReloadCheckMs))
	}
	if err := c.PasswordEncoder.Validate(); err != nil {
		errs = append(errs, err)
	}
	if err := c.validateQuorum(); err != nil {
		errs = append(errs, err)
	}
	if err := c.checkListenerNames(); err != nil {
		errs = append(errs, err)
	}
	if c.NumIOThreads < 1 {
		errs = append(errs, fmt.Errorf("num.io.threads %d: must be >= 1", c.NumIOThreads))
	}
	if err := c.validateRemote(); err != nil {
		errs = append(errs, err)
	}
	errs = append(errs, c.validateGroupKeys()...)
	return errors.Join(errs...)
}

// Voter is one entry of controller.quorum.voters.
type Voter struct {
	ID   int32
	Addr string // host:port of its controller listener
}

// ParseVoters parses "id@host:port,..." (controller.quorum.voters).
func ParseVoters(s string) ([]Voter, error) {
	var out []Voter
	seen := map[int32]bool{}
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		id, addr, ok := strings.Cut(part, "@")
		n, err := strconv.ParseInt(id, 10, 32)
		if !ok || err != nil || n < 0 {
			return nil, fmt.Errorf("%q: want id@host:port with id >= 0", part)
		}
		if _, _, err := net.SplitHostPort(addr); err != nil {
			return nil, fmt.Errorf("%q: %w", part, err)
		}
		if seen[int32(n)] {
			return nil, fmt.Errorf("voter id %d given twice", n)
		}
		seen[int32(n)] = true
		out = append(out, Voter{ID: int32(n), Addr: addr})
	}
	return out, nil
}

// HasRole reports whether process.roles includes role.
func (c *Config) HasRole(role string) bool {
	for _, r := range strings.Split(c.ProcessRoles, ",") {
		if strings.TrimSpace(r) == role {
			return true
		}
	}
	return false
}

// IsControllerListener reports whether name, a parsed (upper-case)
// listener name, is one of controller.listener.names, compared as written
// as Kafka does (listeners.go).
func (c *Config) IsControllerListener(name string) bool {
	for _, n := range strings.Split(c.ControllerListenerNames, ",") {
		if strings.TrimSpace(n) == name {
			return true
		}
	}
	return false
}

// validateQuorum checks the KRaft settings against each other.
func (c *Config) validateQuorum() error {
	if !c.HasRole("broker") && !c.HasRole("controller") {
		return fmt.Errorf("process.roles %q: want broker, controller or both", c.ProcessRoles)
	}
	if c.BrokerSessionTimeoutMs < 1 || c.BrokerHeartbeatIntervalMs < 1 || c.BrokerHeartbeatIntervalMs >= c.BrokerSessionTimeoutMs {
		return fmt.Errorf("broker.heartbeat.interval.ms %d / broker.session.timeout.ms %d: need 1 <= interval < timeout",
			c.BrokerHeartbeatIntervalMs, c.BrokerSessionTimeoutMs)
	}
	voters, err := ParseVoters(c.ControllerQuorumVoters)
	if err != nil {
		return fmt.Errorf("controller.quorum.voters: %w", err)
	}
	isVoter := slices.ContainsFunc(voters, func(v Voter) bool { return v.ID == c.NodeID })
	switch {
	case len(voters) == 0 && !c.HasRole("controller"):
		return errors.New("controller.quorum.voters is empty, so this node is a quorum of one, which needs process.roles to include controller")
	case len(voters) > 0 && c.HasRole("controller") && !isVoter:
		return fmt.Errorf("node.id %d has the controller role but is not in controller.quorum.voters %q", c.NodeID, c.ControllerQuorumVoters)
	case isVoter && !c.HasRole("controller"):
		return fmt.Errorf("node.id %d is in controller.quorum.voters but process.roles %q lacks controller", c.NodeID, c.ProcessRoles)
	}
	ls, err := ParseListeners(c.Listeners)
	if err != nil {
		return nil // reported by Validate
	}
	if len(voters) > 0 && c.HasRole("controller") && !slices.ContainsFunc(ls, func(l Listener) bool { return c.IsControllerListener(l.Name) }) {
		return fmt.Errorf("listeners %q has no listener named in controller.listener.names %q", c.Listeners, c.ControllerListenerNames)
	}
	// A controller-only node carries no inter-broker traffic: Kafka's own
	// examples give its controllers inter.broker.listener.name anyway.
	if n := NormaliseListenerName(c.InterBrokerListenerName); n != "" && c.HasRole("broker") && (c.IsControllerListener(n) || !slices.ContainsFunc(ls, func(l Listener) bool { return l.Name == n })) {
		return fmt.Errorf("inter.broker.listener.name %q: not a client listener of %q", n, c.Listeners)
	}
	if c.HasRole("broker") && !slices.ContainsFunc(ls, func(l Listener) bool { return !c.IsControllerListener(l.Name) }) {
		return fmt.Errorf("listeners %q: the broker role needs a listener not named in controller.listener.names", c.Listeners)
	}
	return nil
}

// Listener is one parsed "NAME://host:port" entry.
type Listener struct {
	// Name is upper-cased (NormaliseListenerName), as Kafka's endpoints
	// are: it is the name registrations, Metadata's endpoint choice and
	// the logs carry.
	Name string
	Host string
	Port int32
	// Protocol is PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL
	// (Config.ListenerProtocol); ParseListeners leaves it empty.
	Protocol string
}

// ParseListeners parses a comma separated listener list. Names are
// upper-cased, and two entries with one name are refused, as Kafka does.
func ParseListeners(s string) ([]Listener, error) {
	var out []Listener
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		name, addr, ok := strings.Cut(part, "://")
		name = NormaliseListenerName(name)
		if !ok || name == "" {
			return nil, fmt.Errorf("%q: want NAME://host:port", part)
		}
		if slices.ContainsFunc(out, func(l Listener) bool { return l.Name == name }) {
			return nil, fmt.Errorf("%q: listener %s is named twice (names are compared in upper case)", part, name)
		}
		host, port, err := net.SplitHostPort(addr)
		if err != nil {
			return nil, fmt.Errorf("%q: %w", part, err)
		}
		p, err := strconv.ParseInt(port, 10, 32)
		if err != nil || p < 0 || p > 65535 {
			return nil, fmt.Errorf("%q: bad port", part)
		}
		out = append(out, Listener{Name: name, Host: host, Port: int32(p)})
	}
	if len(out) == 0 {
		return nil, errors.New("no listener given")
	}
	return out, nil
}
