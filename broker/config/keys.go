package config

import (
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"

	"github.com/fjordlog/fjord/broker/console"
)

// Key is one broker property Fjord implements: its Kafka name, how a
// value is parsed into a Config, and whether it may change at run time.
// The table (Keys) is the one place that knows how each key maps onto
// Config: cmd/fjord applies it to start-up sources, and the broker applies it
// to the dynamic configs of the metadata image.
type Key struct {
	Name string
	// Def is the default rendered from Default(); "" means unset
	// (the key has no value unless a source gives one).
	Def string
	Doc string
	// Set parses a (trimmed) value into the config. Errors omit the key
	// name; the caller adds it.
	Set func(c *Config, v string) error
	// Prio orders keys that write the same field: when several are given,
	// the highest prio is applied last and wins (log.retention.ms over
	// .minutes over .hours), whatever source each came from.
	Prio int
	// Of is the key whose field this one writes too (its synonym with the
	// highest Prio), "" when it is that key itself.
	Of string
	// Dynamic keys may be changed at run time by AlterConfigs, per broker
	// or cluster-wide (Kafka's dynamic broker configs that Fjord acts on);
	// the others are read-only.
	Dynamic bool
}

// configKeys is the table of every supported key, in documentation order.
var configKeys = newConfigKeys()

// keyIndex maps a key name to its position in configKeys.
var keyIndex = func() map[string]int {
	m := make(map[string]int, len(configKeys))
	for i, k := range configKeys {
		if _, dup := m[k.Name]; dup {
			panic("duplicate config key " + k.Name)
		}
		m[k.Name] = i
	}
	return m
}()

// Keys returns the table of every broker key Fjord implements, in
// documentation order. The caller owns the slice.
func Keys() []Key { return slices.Clone(configKeys) }

// LookupKey finds a key of the table by name.
func LookupKey(name string) (Key, bool) {
	i, ok := keyIndex[name]
	if !ok {
		return Key{}, false
	}
	return configKeys[i], true
}

// applyKeys sets the given keys into c in Prio order (lowest first, so a
// key wins over its lower-priority synonyms). Keys outside the table are
// an error; the first error is returned, after applying the rest.
func applyKeys(c *Config, kv map[string]string) error {
	names := make([]string, 0, len(kv))
	for k := range kv {
		names = append(names, k)
	}
	slices.SortStableFunc(names, func(a, b string) int {
		ka, kb := keyIndex[a], keyIndex[b]
		if d := configKeys[ka].Prio - configKeys[kb].Prio; d != 0 {
			return d
		}
		return ka - kb
	})
	var first error
	for _, name := range names {
		i, ok := keyIndex[name]
		if !ok {
			if first == nil {
				first = fmt.Errorf("%s: not a broker key Fjord implements", name)
			}
			continue
		}
		if err := configKeys[i].Set(c, kv[name]); err != nil && first == nil {
			first = fmt.Errorf("%s: %w", name, err)
		}
	}
	return first
}

const (
	msPerMinute = 60 * 1000
	msPerHour   = 60 * msPerMinute
)

func newConfigKeys() []Key {
	d := Default()
	itoa := func(n int64) string { return strconv.FormatInt(n, 10) }
	hours := func(ms int64) string {
		if ms > 0 && ms%msPerHour == 0 {
			return itoa(ms / msPerHour)
		}
		return ""
	}
	keys := []Key{
		// Node identity and network.
		{Name: "node.id", Def: itoa(int64(d.NodeID)), Doc: "Id of this node.",
			Set: setInt(func(c *Config) *int32 { return &c.NodeID })},
		{Name: "broker.id", Of: "node.id", Prio: -1, Doc: "Alias of node.id; if both are given they must be equal.",
			Set: setInt(func(c *Config) *int32 { return &c.NodeID })},
		{Name: "process.roles", Def: d.ProcessRoles, Doc: "Roles of this node: broker, controller or both (comma separated).",
			Set: setProcessRoles},
		{Name: "cluster.id", Def: d.ClusterID, Doc: "Cluster id reported to clients (the CLUSTER_ID environment variable also sets it).",
			Set: setString(func(c *Config) *string { return &c.ClusterID })},
		{Name: "listeners", Def: d.Listeners, Doc: "Comma separated NAME://host:port addresses where the node accepts Kafka clients.",
			Set: setString(func(c *Config) *string { return &c.Listeners })},
		{Name: "advertised.listeners", Def: d.AdvertisedListeners, Doc: "Addresses Metadata responses tell clients to dial; empty means the listeners (wildcard host as 127.0.0.1). If set while listeners is not, listeners becomes these with every host replaced by 0.0.0.0.",
			Set: setString(func(c *Config) *string { return &c.AdvertisedListeners })},
		{Name: "socket.request.max.bytes", Def: itoa(int64(d.SocketRequestMaxBytes)), Doc: "Largest request frame accepted.",
			Set: setInt(func(c *Config) *int32 { return &c.SocketRequestMaxBytes })},
		{Name: "num.io.threads", Def: itoa(int64(d.NumIOThreads)), Doc: "Requests processed in parallel per connection.",
			Set: setInt(func(c *Config) *int32 { return &c.NumIOThreads })},
		{Name: "connections.max.idle.ms", Def: itoa(d.ConnectionsMaxIdleMs), Doc: "Idle connections are closed after this many milliseconds.",
			Set: setInt(func(c *Config) *int64 { return &c.ConnectionsMaxIdleMs })},
		{Name: "max.connections", Dynamic: true, Def: itoa(int64(d.MaxConnections)), Doc: "Most client connections open at once, over all client listeners; a new connection over it is closed. The CONTROLLER listener's Kafka half has the same bound, counted apart (its raft connections are not counted).",
			Set: setNonNegative(func(c *Config) *int32 { return &c.MaxConnections })},
		{Name: "max.connections.per.ip", Dynamic: true, Def: itoa(int64(d.MaxConnectionsPerIP)), Doc: "Most client connections open at once from one IP address; a new connection over it is closed. The CONTROLLER listener's Kafka half has the same bound, counted apart.",
			Set: setNonNegative(func(c *Config) *int32 { return &c.MaxConnectionsPerIP })},
		{Name: "max.connections.per.ip.overrides", Dynamic: true, Def: d.MaxConnectionsPerIPOverride, Doc: "Per-IP exceptions to max.connections.per.ip, as ip:count,ip:count. IP addresses only (Kafka also takes host names).",
			Set: setConnOverrides},
		{Name: "queued.max.request.bytes", Def: itoa(d.QueuedMaxRequestBytes), Doc: "Request bytes being read or waiting for their handler, over all client connections; reading stops while it is spent. One connection holds at most a quarter of it, except the oldest request being read, which may pass it (up to socket.request.max.bytes). -1 or 0: no bound (Kafka's default is -1; Fjord's bounds it).",
			Set: setInt(func(c *Config) *int64 { return &c.QueuedMaxRequestBytes })},
		{Name: "max.incremental.fetch.session.cache.slots", Def: itoa(int64(d.FetchSessionSlots)), Doc: "Most incremental fetch sessions (KIP-227) the broker keeps at once; a client that gets none sends full fetches. Followers' sessions are kept before consumers', bigger ones before smaller ones, and one unused for two minutes may be evicted. A session holds at most 50,000 partitions and all sessions 1,000,000 (about 300 bytes each). 0: no sessions.",
			Set: setNonNegative(func(c *Config) *int32 { return &c.FetchSessionSlots })},
		{Name: "connection.failed.authentication.delay.ms", Def: itoa(int64(d.FailedAuthDelayMs)), Doc: "How long a connection whose authentication failed is held, unread, before it is closed (SASL listeners).",
			Set: setNonNegative(func(c *Config) *int32 { return &c.FailedAuthDelayMs })},
		{Name: "fjord.metrics.listener", Def: d.MetricsAddr, Doc: "host:port serving Prometheus /metrics; empty turns it off (Fjord only).",
			Set: setHostPort(func(c *Config) *string { return &c.MetricsAddr })},
		{Name: "fjord.metrics.pprof.enable", Def: strconv.FormatBool(d.MetricsPprof), Doc: "Also serve Go's profiles (/debug/pprof) on fjord.metrics.listener, to whoever reaches it; otherwise /debug/pprof answers 404 (Fjord only).",
			Set: setBool(func(c *Config) *bool { return &c.MetricsPprof })},
		{Name: "fjord.console.listener", Def: d.ConsoleAddr, Doc: "host:port serving the read-only web console (cluster, topics, records, consumer groups with their rebalance timeline, clients; docs/operations.md); empty turns it off. It shows record contents to whoever reaches it: bind it to a trusted address. Off by default; a zero-config run (`fjord` with no --config, --override or KAFKA_*/FJORD_DEFAULT_* environment) serves it on " + DevConsoleAddr + " (Fjord only).",
			Set: setHostPort(func(c *Config) *string { return &c.ConsoleAddr })},
		{Name: "fjord.console.allowed.hosts", Def: d.ConsoleAllowedHosts, Doc: "Host header values the web console answers besides its own address (its bound and configured host with its port; on a loopback or wildcard bind also localhost, 127.0.0.1 and [::1] with its port), comma separated: host:port for that port, a bare host for any port, * for any Host. Any other Host is refused with 421, which stops a web page from reading the console through DNS rebinding. A console bound to every address (0.0.0.0, [::]) with this empty answers any Host, with a warning at start-up (Fjord only).",
			Set: setAllowedHosts},

		// Storage.
		{Name: "log.dirs", Def: d.LogDirs, Doc: "Data directories, comma separated; only the first is used for now.",
			Set: setString(func(c *Config) *string { return &c.LogDirs })},
		{Name: "log.dir", Of: "log.dirs", Prio: -1, Doc: "Single data directory, used when log.dirs is not set.",
			Set: setString(func(c *Config) *string { return &c.LogDirs })},
		{Name: "log.segment.bytes", Dynamic: true, Def: itoa(d.SegmentBytes), Doc: "Size at which a partition's active segment is rolled.",
			Set: setInt(func(c *Config) *int64 { return &c.SegmentBytes })},
		{Name: "log.roll.ms", Dynamic: true, Def: itoa(d.SegmentMs), Doc: "Age in milliseconds at which the active segment is rolled.",
			Set: setInt(func(c *Config) *int64 { return &c.SegmentMs })},
		{Name: "log.roll.hours", Dynamic: true, Of: "log.roll.ms", Prio: -1, Def: hours(d.SegmentMs), Doc: "log.roll.ms in hours, used when log.roll.ms is not set.",
			Set: setScaled(msPerHour, false, func(c *Config) *int64 { return &c.SegmentMs })},
		{Name: "log.retention.ms", Dynamic: true, Def: itoa(d.RetentionMs), Doc: "Segments older than this are deleted; -1 keeps them forever. Wins over .minutes and .hours.",
			Set: setRetention(1)},
		{Name: "log.retention.minutes", Dynamic: true, Of: "log.retention.ms", Prio: -1, Doc: "log.retention.ms in minutes, used when log.retention.ms is not set; wins over .hours.",
			Set: setRetention(msPerMinute)},
		{Name: "log.retention.hours", Dynamic: true, Of: "log.retention.ms", Prio: -2, Def: hours(d.RetentionMs), Doc: "log.retention.ms in hours, used when neither log.retention.ms nor .minutes is set.",
			Set: setRetention(msPerHour)},
		{Name: "log.retention.bytes", Dynamic: true, Def: itoa(d.RetentionBytes), Doc: "Partition size above which the oldest segments are deleted; -1 means no limit.",
			Set: setInt(func(c *Config) *int64 { return &c.RetentionBytes })},
		{Name: "log.retention.check.interval.ms", Def: itoa(d.RetentionCheckInterval), Doc: "How often retention is enforced, in milliseconds.",
			Set: setInt(func(c *Config) *int64 { return &c.RetentionCheckInterval })},
		{Name: "log.index.interval.bytes", Dynamic: true, Def: itoa(int64(d.IndexIntervalBytes)), Doc: "Bytes of records between two offset index entries.",
			Set: setInt(func(c *Config) *int32 { return &c.IndexIntervalBytes })},
		{Name: "log.flush.interval.messages", Dynamic: true, Def: itoa(d.FlushMessages), Doc: "Records appended between fsyncs; 1 fsyncs before every acknowledgement.",
			Set: setInt(func(c *Config) *int64 { return &c.FlushMessages })},
		{Name: "log.flush.interval.ms", Dynamic: true, Def: itoa(d.FlushMs), Doc: "Longest time unsynced records may wait when log.flush.interval.messages > 1.",
			Set: setInt(func(c *Config) *int64 { return &c.FlushMs })},
		{Name: "log.message.timestamp.type", Dynamic: true, Def: d.MessageTimestampType, Doc: "CreateTime keeps the producer's timestamps; LogAppendTime stamps records with the broker's clock.",
			Set: setString(func(c *Config) *string { return &c.MessageTimestampType })},
		{Name: "log.cleanup.policy", Dynamic: true, Def: d.CleanupPolicy, Doc: "Default cleanup policy for topics: delete and/or compact (comma separated).",
			Set: setCleanupPolicy},
		{Name: "message.max.bytes", Dynamic: true, Def: itoa(int64(d.MessageMaxBytes)), Doc: "Largest record batch accepted.",
			Set: setInt(func(c *Config) *int32 { return &c.MessageMaxBytes })},

		// Topics.
		{Name: "num.partitions", Dynamic: true, Def: itoa(int64(d.NumPartitions)), Doc: "Partitions of an auto-created topic or one created without a count.",
			Set: setInt(func(c *Config) *int32 { return &c.NumPartitions })},
		{Name: "default.replication.factor", Def: itoa(int64(d.DefaultReplication)), Doc: "Replication factor of topics created without one.",
			Set: setInt(func(c *Config) *int16 { return &c.DefaultReplication })},
		{Name: "min.insync.replicas", Dynamic: true, Def: itoa(int64(d.MinInsyncReplicas)), Doc: "Replicas that must have a write for acks=all to succeed.",
			Set: setInt(func(c *Config) *int32 { return &c.MinInsyncReplicas })},
		{Name: "auto.create.topics.enable", Def: strconv.FormatBool(d.AutoCreateTopics), Doc: "Create a topic when a client first produces to or fetches metadata for it.",
			Set: setBool(func(c *Config) *bool { return &c.AutoCreateTopics })},
		{Name: "delete.topic.enable", Def: strconv.FormatBool(d.DeleteTopicEnable), Doc: "Allow DeleteTopics requests.",
			Set: setBool(func(c *Config) *bool { return &c.DeleteTopicEnable })},

		// Consumer groups.
		{Name: "group.initial.rebalance.delay.ms", Def: itoa(d.GroupInitialRebalanceMs), Doc: "How long a new group waits for more members before its first rebalance.",
			Set: setInt(func(c *Config) *int64 { return &c.GroupInitialRebalanceMs })},
		{Name: "group.min.session.timeout.ms", Def: itoa(int64(d.GroupMinSessionMs)), Doc: "Shortest session timeout a group member may ask for.",
			Set: setInt(func(c *Config) *int32 { return &c.GroupMinSessionMs })},
		{Name: "group.max.session.timeout.ms", Def: itoa(int64(d.GroupMaxSessionMs)), Doc: "Longest session timeout a group member may ask for.",
			Set: setInt(func(c *Config) *int32 { return &c.GroupMaxSessionMs })},
		{Name: "group.consumer.session.timeout.ms", Def: itoa(int64(d.ConsumerSessionMs)), Doc: "KIP-848 consumer groups: a member that does not heartbeat for this long is removed.",
			Set: setInt(func(c *Config) *int32 { return &c.ConsumerSessionMs })},
		{Name: "group.consumer.heartbeat.interval.ms", Def: itoa(int64(d.ConsumerHeartbeatMs)), Doc: "KIP-848 consumer groups: how often members heartbeat (told to them in every response).",
			Set: setInt(func(c *Config) *int32 { return &c.ConsumerHeartbeatMs })},
		{Name: "group.consumer.max.size", Def: itoa(int64(d.ConsumerMaxSize)), Doc: "KIP-848 consumer groups: the most members a group may have (GROUP_MAX_SIZE_REACHED beyond).",
			Set: setInt(func(c *Config) *int32 { return &c.ConsumerMaxSize })},
		{Name: "group.consumer.assignors", Def: strings.Join(d.ConsumerAssignors, ","), Doc: "KIP-848 consumer groups: the server-side assignors members may name, the first the default (uniform, range; Kafka's class names are accepted).",
			Set: setAssignors},
		{Name: "group.consumer.migration.policy", Def: d.ConsumerMigrationPolicy, Doc: "Online conversion of a group with members between the classic and the KIP-848 consumer protocol (KIP-848): bidirectional, upgrade (a consumer-protocol member joining a classic group converts it), downgrade (the last consumer-protocol member leaving converts it back) or disabled; case-insensitive.",
			Set: setMigrationPolicy},
		{Name: "offsets.retention.minutes", Def: itoa(d.OffsetsRetentionMinutes), Doc: "Committed offsets of a group without members expire this long after its last commit.",
			Set: setInt(func(c *Config) *int64 { return &c.OffsetsRetentionMinutes })},
		{Name: "offsets.retention.check.interval.ms", Def: itoa(d.OffsetsRetentionCheckMs), Doc: "How often expired offsets are looked for.",
			Set: setInt(func(c *Config) *int64 { return &c.OffsetsRetentionCheckMs })},
		{Name: "producer.id.expiration.ms", Dynamic: true, Def: itoa(d.ProducerIDExpirationMs), Doc: "Idempotent-producer state idle this long is dropped.",
			Set: setInt(func(c *Config) *int64 { return &c.ProducerIDExpirationMs })},
		{Name: "log.cleaner.backoff.ms", Dynamic: true, Def: itoa(d.CleanerBackoffMs), Doc: "Pause between log compaction passes.",
			Set: setInt(func(c *Config) *int64 { return &c.CleanerBackoffMs })},
		{Name: "offsets.topic.num.partitions", Def: itoa(int64(d.OffsetsTopicPartitions)), Doc: "Partitions of the committed offsets topic.",
			Set: setInt(func(c *Config) *int32 { return &c.OffsetsTopicPartitions })},
		{Name: "offsets.topic.replication.factor", Def: itoa(int64(d.OffsetsTopicReplication)), Doc: "Replication factor of the committed offsets topic, capped at the number of controller.quorum.voters (1 for a single node); the topic is created once that many brokers are live.",
			Set: setInt(func(c *Config) *int16 { return &c.OffsetsTopicReplication })},

		// Transactions.
		{Name: "transaction.state.log.num.partitions", Def: itoa(int64(d.TxnTopicPartitions)), Doc: "Partitions of the transaction state topic (__transaction_state); a transactional id lives on one of them.",
			Set: setInt(func(c *Config) *int32 { return &c.TxnTopicPartitions })},
		{Name: "share.coordinator.state.topic.num.partitions", Def: itoa(int64(d.ShareStatePartitions)), Doc: "Partitions of the share-group state topic (__share_group_state); a share-partition's state lives on one of them.",
			Set: setInt(func(c *Config) *int32 { return &c.ShareStatePartitions })},
		{Name: "share.coordinator.state.topic.replication.factor", Def: itoa(int64(d.ShareStateReplication)), Doc: "Replication factor of the share-group state topic, capped at the number of controller.quorum.voters (1 for a single node).",
			Set: setInt(func(c *Config) *int16 { return &c.ShareStateReplication })},
		{Name: "share.coordinator.state.topic.min.isr", Def: itoa(int64(d.ShareStateMinISR)), Doc: "min.insync.replicas of the share-group state topic, capped at its replication factor.",
			Set: setInt(func(c *Config) *int16 { return &c.ShareStateMinISR })},
		{Name: "transaction.state.log.replication.factor", Def: itoa(int64(d.TxnTopicReplication)), Doc: "Replication factor of the transaction state topic, capped at the number of controller.quorum.voters (1 for a single node).",
			Set: setInt(func(c *Config) *int16 { return &c.TxnTopicReplication })},
		{Name: "transaction.state.log.min.isr", Def: itoa(int64(d.TxnTopicMinISR)), Doc: "min.insync.replicas of the transaction state topic, capped at its replication factor.",
			Set: setInt(func(c *Config) *int32 { return &c.TxnTopicMinISR })},
		{Name: "transaction.state.log.segment.bytes", Def: itoa(int64(d.TxnTopicSegmentBytes)), Doc: "Segment size of the transaction state topic.",
			Set: setInt(func(c *Config) *int32 { return &c.TxnTopicSegmentBytes })},
		{Name: "transaction.max.timeout.ms", Def: itoa(int64(d.TxnMaxTimeoutMs)), Doc: "Longest transaction.timeout.ms a producer may ask for (INVALID_TRANSACTION_TIMEOUT above it).",
			Set: setInt(func(c *Config) *int32 { return &c.TxnMaxTimeoutMs })},
		{Name: "transactional.id.expiration.ms", Def: itoa(d.TxnIDExpirationMs), Doc: "A transactional id with no transaction for this long is forgotten.",
			Set: setInt(func(c *Config) *int64 { return &c.TxnIDExpirationMs })},

		// The metadata quorum.
		{Name: "controller.quorum.voters", Def: d.ControllerQuorumVoters, Doc: "Voters of the KRaft metadata quorum as id@host:port (their CONTROLLER listeners), comma separated; empty = this node alone.",
			Set: setString(func(c *Config) *string { return &c.ControllerQuorumVoters })},
		{Name: "controller.listener.names", Def: d.ControllerListenerNames, Doc: "Names of the listeners that carry the metadata quorum and broker-to-controller requests.",
			Set: setString(func(c *Config) *string { return &c.ControllerListenerNames })},
		{Name: "broker.session.timeout.ms", Def: itoa(d.BrokerSessionTimeoutMs), Doc: "A broker whose heartbeats stop for this long is fenced and loses its leaderships.",
			Set: setInt(func(c *Config) *int64 { return &c.BrokerSessionTimeoutMs })},
		{Name: "broker.heartbeat.interval.ms", Def: itoa(d.BrokerHeartbeatIntervalMs), Doc: "Interval between a broker's heartbeats to the active controller.",
			Set: setInt(func(c *Config) *int64 { return &c.BrokerHeartbeatIntervalMs })},
		{Name: "broker.rack", Def: d.BrokerRack, Doc: "Rack of this broker; placement spreads replicas across racks.",
			Set: setString(func(c *Config) *string { return &c.BrokerRack })},

		{Name: "replica.lag.time.max.ms", Def: itoa(d.ReplicaLagTimeMaxMs), Doc: "A follower that has not caught up with its leader's log end for this long leaves the ISR.",
			Set: setInt(func(c *Config) *int64 { return &c.ReplicaLagTimeMaxMs })},
		{Name: "leader.replication.throttled.rate", Dynamic: true, Doc: "Unset: no cap (Kafka's default, Long.MAX_VALUE). Bytes per second a leader sends, in all, to out-of-sync followers of the replicas its topics list in leader.replication.throttled.replicas (a partition move's copying).",
			Set: setRate(func(c *Config) *int64 { return &c.LeaderReplicationThrottledRate })},
		{Name: "follower.replication.throttled.rate", Dynamic: true, Doc: "Unset: no cap (Kafka's default, Long.MAX_VALUE). Bytes per second an out-of-sync follower fetches, in all, for the replicas its topics list in follower.replication.throttled.replicas.",
			Set: setRate(func(c *Config) *int64 { return &c.FollowerReplicationThrottledRate })},
		{Name: "auto.leader.rebalance.enable", Def: strconv.FormatBool(d.AutoLeaderRebalance), Doc: "Move leadership back to each partition's preferred replica when it is live and in sync.",
			Set: setBool(func(c *Config) *bool { return &c.AutoLeaderRebalance })},
		{Name: "fjord.controller.fast.fencing.enable", Def: strconv.FormatBool(d.FastFencing), Doc: "The active controller holds an idle connection to each broker's listeners and fences a broker at once when they all refuse connections (its process is gone), instead of after broker.session.timeout.ms; a frozen or unreachable broker is still left to its session (Fjord only).",
			Set: setBool(func(c *Config) *bool { return &c.FastFencing })},
		{Name: "leader.imbalance.check.interval.seconds", Def: itoa(d.LeaderImbalanceCheckSecs), Doc: "How often the active controller moves leadership back to preferred replicas.",
			Set: setInt(func(c *Config) *int64 { return &c.LeaderImbalanceCheckSecs })},
		{Name: "fjord.partition.open.timeout.ms", Def: itoa(d.PartitionOpenTimeoutMs), Doc: "A replica that takes longer to open (log recovery) stays offline meanwhile and, if it was to lead, hands the leadership to another in-sync replica (Fjord only).",
			Set: setInt(func(c *Config) *int64 { return &c.PartitionOpenTimeoutMs })},
		{Name: "fjord.log.flush.stall.max.ms", Def: itoa(d.LogFlushStallMaxMs), Doc: "A leader whose own fsync of a partition's log has run this long (a stalled disk) resigns that partition's leadership to another in-sync replica, so acks=all producers go on at the new leader instead of timing out; it leads again only by a later election. 0 never resigns for a stall. See docs/operations.md (Fjord only).",
			Set: setInt(func(c *Config) *int64 { return &c.LogFlushStallMaxMs })},
		{Name: "fjord.log.open.files.max", Def: itoa(d.LogOpenFilesMax), Doc: "Descriptors the node's log files may hold, shared by all its partitions: each open replica keeps one for its active segment; sealed segments' files are opened on demand and closed, least recently used first, beyond this. 0 = the process's RLIMIT_NOFILE less 1024 kept for connections (never more than that). A CreateTopics or CreatePartitions that would place more replicas on the node than this less a sixteenth (kept for sealed segments) is refused with POLICY_VIOLATION (Fjord only).",
			Set: setInt(func(c *Config) *int64 { return &c.LogOpenFilesMax })},
		{Name: "fjord.log.index.cache.bytes", Def: itoa(d.LogIndexCacheBytes), Doc: "Memory the node may hold of sealed segments' offset and time indexes, shared by all its partitions, least recently used out first; an index not held is read from its .index and .timeindex files when a fetch or ListOffsets needs it. The active segment's indexes are always held (about 6 MiB per GiB of segment). 0 = hold none (Fjord only).",
			Set: setInt(func(c *Config) *int64 { return &c.LogIndexCacheBytes })},

		{Name: "inter.broker.listener.name", Def: d.InterBrokerListenerName, Doc: "Listener whose advertised address other brokers use to reach this one (replication); empty = the first client listener.",
			Set: setString(func(c *Config) *string { return &c.InterBrokerListenerName })},
		{Name: "listener.security.protocol.map", Doc: "Security protocol of each listener name (NAME:PROTOCOL list): PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL (docs/security.md). The CONTROLLER listener may be any of them: TLS and SASL then cover raft's connections between voters and brokers' requests to the controllers alike. Names are compared in upper case, as in Kafka. Not given: Kafka's default, PLAINTEXT, SSL, SASL_PLAINTEXT and SASL_SSL named after themselves, plus the controller.listener.names as PLAINTEXT when no listener is named SSL or SASL_*. A listener, advertised listener, inter-broker or (on a broker-only node) controller listener name it gives no protocol stops start-up.",
			Set: setString(func(c *Config) *string { return &c.ListenerSecurityProtocolMap })},
		{Name: "fjord.ssl.reload.check.interval.ms", Def: itoa(d.SSLReloadCheckMs), Doc: "How often a TLS listener's keystore and truststore files are checked (size and modification time); a changed store is loaded for new connections, a store that fails to load keeps the previous one (Fjord only).",
			Set: setInt(func(c *Config) *int64 { return &c.SSLReloadCheckMs })},
		{Name: "sasl.enabled.mechanisms", Def: d.SASL.EnabledMechanisms, Doc: "SASL mechanisms a SASL_PLAINTEXT or SASL_SSL listener offers, in preference order (listener.name.<l>.sasl.enabled.mechanisms overrides it per listener). Fjord serves PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 and OAUTHBEARER (unsecured tokens, or tokens signed by a JWKS: sasl.oauthbearer.jwks.endpoint.url); a SASL listener whose list holds another mechanism (Kafka's default GSSAPI included) stops start-up. PLAIN's users are the user_<name>=\"<password>\" options of the PlainLoginModule in listener.name.<l>.plain.sasl.jaas.config, else sasl.jaas.config, else the KafkaServer section of the JAAS file KAFKA_OPTS names (-Djava.security.auth.login.config=); see docs/security.md.",
			Set: setString(func(c *Config) *string { return &c.SASL.EnabledMechanisms })},
		{Name: "connections.max.reauth.ms", Def: "0", Doc: "Lifetime of a SASL session (KIP-368): SaslAuthenticate v1+ tells the client, which re-authenticates on the same connection before it ends; a connection whose session ended without it is closed at its next request. 0 = sessions do not expire. listener.name.<l>.<mechanism>.connections.max.reauth.ms overrides it; an OAUTHBEARER session ends no later than its token.",
			Set: setInt(func(c *Config) *int64 { return &c.SASL.ReauthMs })},
		{Name: "sasl.mechanism.inter.broker.protocol", Def: d.SASL.InterBrokerMechanism, Doc: "SASL mechanism brokers use to authenticate to each other when the inter-broker listener is SASL_PLAINTEXT or SASL_SSL (PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512), with the username and password options of the listener's login module for it.",
			Set: setString(func(c *Config) *string { return &c.SASL.InterBrokerMechanism })},
		{Name: "sasl.mechanism.controller.protocol", Def: d.SASL.ControllerMechanism, Doc: "SASL mechanism brokers and controllers use to authenticate to the controllers when the CONTROLLER listener is SASL_PLAINTEXT or SASL_SSL (PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512), with the username and password options of that listener's login module for it; raft's connections between voters authenticate with it too (docs/security.md).",
			Set: setString(func(c *Config) *string { return &c.SASL.ControllerMechanism })},
		{Name: "controller.quorum.bootstrap.servers", Doc: "KIP-853's quorum bootstrap. Without controller.quorum.voters, only one server naming this controller's own listener is accepted (a quorum of one, as Bitnami's single-node files give); anything else stops start-up: list the voters in controller.quorum.voters.",
			Set: checkAny},
		{Name: "log.cleaner.enable", Def: strconv.FormatBool(d.CleanerEnable), Doc: "Run log compaction for topics with cleanup.policy=compact (the committed offsets topic included).",
			Set: setBool(func(c *Config) *bool { return &c.CleanerEnable })},
		{Name: "unclean.leader.election.enable", Dynamic: true, Def: "false", Doc: "Fjord never elects a leader outside the ISR (that loses acknowledged records): false is accepted, true stops start-up.",
			Set: refuseTrue("Fjord never elects a leader outside the ISR, which would lose acknowledged records")},

		// Authorization (keys_authz.go, broker/authz.go, docs/security.md).
		{Name: "authorizer.class.name", Doc: "Unset: no authorizer (every client may do everything). " + StandardAuthorizerClass + " turns on Kafka's ACLs (" + LegacyAuthorizerClass + " is accepted as its alias, with a warning); any other class stops start-up.",
			Set: setAuthorizerClass},
		{Name: "super.users", Dynamic: true, Doc: "Principals allowed everything when the authorizer is on, semicolon separated (User:admin;User:ops). Dynamic for the whole cluster only (IncrementalAlterConfigs on the cluster default broker resource; a value there replaces the static one on every node, without a restart); a per-broker value is refused, so nodes never disagree on who is a super user.",
			Set: setSuperUsers},
		{Name: "allow.everyone.if.no.acl.found", Def: strconv.FormatBool(d.AllowEveryoneIfNoACL), Doc: "With the authorizer on, a resource that no ACL names is open to everyone (true) or to super users only (false).",
			Set: setBool(func(c *Config) *bool { return &c.AllowEveryoneIfNoACL })},
		{Name: "fjord.audit.log.file", Def: d.AuditLogFile, Doc: "Where the audit log (one JSON line per denied request and per mutating admin request) is appended: a file path, empty for stderr (lines marked \"audit\":true), or off (Fjord only).",
			Set: setString(func(c *Config) *string { return &c.AuditLogFile })},
	}
	keys = withGroupBrokerKeys(keys, &d)
	return append(append(append(append(keys, sslKeys()...), oauthKeys()...), passwordEncoderKeys()...), remoteKeys(&d)...)
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

func setInt[T integer](field func(*Config) *T) func(*Config, string) error {
	return func(c *Config, v string) error {
		n, err := parseInt[T](v)
		if err != nil {
			return err
		}
		*field(c) = n
		return nil
	}
}

// setRate parses a replication throttle rate in bytes per second (>= 1).
func setRate(field func(*Config) *int64) func(*Config, string) error {
	return func(c *Config, v string) error {
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

func checkAny(*Config, string) error { return nil }

// refuseTrue accepts a boolean key that Fjord fixes at false.
func refuseTrue(why string) func(*Config, string) error {
	return func(c *Config, v string) error {
		var b bool
		if err := setBool(func(*Config) *bool { return &b })(c, v); err != nil {
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
func setScaled(scale int64, negForever bool, field func(*Config) *int64) func(*Config, string) error {
	return func(c *Config, v string) error {
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
func setRetention(scale int64) func(*Config, string) error {
	return setScaled(scale, true, func(c *Config) *int64 { return &c.RetentionMs })
}

func setBool(field func(*Config) *bool) func(*Config, string) error {
	return func(c *Config, v string) error {
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

func setString(field func(*Config) *string) func(*Config, string) error {
	return func(c *Config, v string) error {
		*field(c) = v
		return nil
	}
}

func setHostPort(field func(*Config) *string) func(*Config, string) error {
	return func(c *Config, v string) error {
		if v != "" {
			if _, _, err := net.SplitHostPort(v); err != nil {
				return fmt.Errorf("%q is not host:port", v)
			}
		}
		*field(c) = v
		return nil
	}
}

func setAllowedHosts(c *Config, v string) error {
	hosts, err := console.ParseAllowedHosts(v)
	if err != nil {
		return err
	}
	c.ConsoleAllowedHosts = strings.Join(hosts, ",")
	return nil
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

func setProcessRoles(c *Config, v string) error {
	s, err := parseList(v, "broker", "controller")
	if err != nil {
		return err
	}
	c.ProcessRoles = s
	return nil
}

func setCleanupPolicy(c *Config, v string) error {
	s, err := parseList(v, "delete", "compact")
	if err != nil {
		return err
	}
	c.CleanupPolicy = s
	return nil
}

// setMigrationPolicy parses group.consumer.migration.policy, without
// regard to case as Kafka's validator.
func setMigrationPolicy(c *Config, v string) error {
	p := strings.ToLower(strings.TrimSpace(v))
	switch p {
	case "bidirectional", "upgrade", "downgrade", "disabled":
		c.ConsumerMigrationPolicy = p
		return nil
	}
	return fmt.Errorf("%q: must be one of bidirectional, upgrade, downgrade, disabled", v)
}

// assignorClasses maps Kafka's class names for its server-side assignors
// to their names, so a Kafka config naming the classes carries over.
var assignorClasses = map[string]string{
	"org.apache.kafka.coordinator.group.assignor.UniformAssignor": "uniform",
	"org.apache.kafka.coordinator.group.assignor.RangeAssignor":   "range",
}

// setAssignors parses group.consumer.assignors: a non-empty list of
// uniform and range, by name or Kafka's class name, without repeats.
func setAssignors(c *Config, v string) error {
	var names []string
	for item := range strings.SplitSeq(v, ",") {
		item = strings.TrimSpace(item)
		if n, ok := assignorClasses[item]; ok {
			item = n
		}
		if item != "uniform" && item != "range" {
			return fmt.Errorf("%q: %q is not a server-side assignor Fjord has (uniform, range)", v, item)
		}
		if slices.Contains(names, item) {
			return fmt.Errorf("%q: %q is listed twice", v, item)
		}
		names = append(names, item)
	}
	c.ConsumerAssignors = names
	return nil
}
