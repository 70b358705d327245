package catalogue

import (
	"sort"
	"strings"
)

// rule classifies a family of keys. A rule matches by exact name or by
// prefix (a name ending in "."); exact names win, then the longest prefix.
type rule struct {
	class Class
	why   string
	// asFjord, when set, reports that a value asks for what Fjord does
	// anyway: the key is then Ignored whatever its class.
	asFjord func(v string) bool
	// refuse, when set, turns an unsafe value into a refusal and says why;
	// refuseWhen says which values, for the documentation.
	refuse     func(v string) string
	refuseWhen string
}

func (r rule) verdict(v string) Verdict {
	v = strings.TrimSpace(v)
	if r.refuse != nil {
		if why := r.refuse(v); why != "" {
			return Verdict{Refused, why}
		}
	}
	if r.asFjord != nil && r.asFjord(v) {
		return Verdict{Ignored, "the value is what Fjord does"}
	}
	return Verdict{r.class, r.why}
}

func equalFold(want string) func(string) bool {
	return func(v string) bool { return strings.EqualFold(v, want) }
}

func empty(v string) bool { return v == "" }

// sameSet: a comma separated list holding exactly these items, in any
// order and case.
func sameSet(items ...string) func(string) bool {
	return func(v string) bool {
		got := map[string]bool{}
		for it := range strings.SplitSeq(v, ",") {
			got[strings.ToLower(strings.TrimSpace(it))] = true
		}
		if len(got) != len(items) {
			return false
		}
		for _, it := range items {
			if !got[it] {
				return false
			}
		}
		return true
	}
}

// Reasons shared by several families.
const (
	whyZooKeeper  = "ZooKeeper: Fjord keeps its metadata in its own KRaft quorum"
	whyJVM        = "sizes Kafka's JVM threads, buffers or files; Fjord sizes its own"
	whyMetrics    = "Kafka's metric reporters; Fjord serves Prometheus metrics itself (fjord.metrics.listener)"
	whyFormat     = "message-format versioning and down-conversion: Fjord keeps and serves record batches (v2) as written"
	whyJSSE       = "tunes Java's TLS implementation (JSSE); Fjord uses Go's TLS with the ssl.* keys it documents"
	whySecurity   = "a security setting Fjord does not implement (docs/security.md lists the ones it reads)"
	whySASLKey    = "a SASL setting Fjord does not act on: docs/security.md lists the SASL keys it reads"
	whyShareKey   = "a share-group setting Fjord does not act on (it reads share.coordinator.state.topic.num.partitions, .replication.factor and .min.isr, and the group.share.* keys docs/configuration.md lists)"
	why848Key     = "a KIP-848 setting Fjord does not act on (it reads group.consumer.session.timeout.ms, group.consumer.heartbeat.interval.ms, group.consumer.max.size, group.consumer.assignors, group.consumer.migration.policy and the min/max bounds of group configs)"
	whyTiered     = "a tiered-storage setting Fjord does not act on (docs/configuration.md, Tiered storage, lists the ones it reads)"
	whyRLMM       = "Fjord keeps the remote segments' metadata itself: the remote log metadata manager's settings have no meaning"
	whyChunkCache = "Fjord reads the class, size and prefetch.max.size of the chunk cache (its read cache, kept in memory); the rest of the disk cache's keys have no meaning there"
	whyQuota      = "client and replication quotas are not enforced yet"
	whyConfluent  = "tunes Confluent Platform's own components"
	whyNotYet     = "Fjord does not implement it yet; its own behaviour applies"
	whyRaftTuning = "tunes Kafka's raft implementation; Fjord's quorum uses its own timing"
)

var (
	ignored     = rule{class: Ignored}
	unsupported = rule{class: Unsupported, why: whyNotYet}
)

func with(r rule, why string) rule { r.why = why; return r }

// brokerExact and brokerPrefix classify broker keys; anything not matched
// is unsupported (a real Kafka key Fjord does not act on).
var brokerExact = map[string]rule{
	// ZooKeeper-era keys.
	"broker.id.generation.enable": with(ignored, whyZooKeeper),
	"reserved.broker.max.id":      with(ignored, whyZooKeeper),
	"control.plane.listener.name": with(ignored, "a ZooKeeper-era controller listener; Fjord uses controller.listener.names"),
	"zookeeper.connect":           with(ignored, whyZooKeeper),

	// Threads, buffers and files of Kafka's JVM process.
	"background.threads":                            with(ignored, whyJVM),
	"num.network.threads":                           with(ignored, whyJVM),
	"num.recovery.threads.per.data.dir":             with(ignored, whyJVM),
	"num.replica.fetchers":                          with(ignored, whyJVM),
	"num.replica.alter.log.dirs.threads":            with(ignored, whyJVM),
	"log.cleaner.threads":                           with(ignored, whyJVM),
	"log.cleaner.io.buffer.size":                    with(ignored, whyJVM),
	"log.cleaner.io.buffer.load.factor":             with(ignored, whyJVM),
	"log.cleaner.dedupe.buffer.size":                with(ignored, whyJVM),
	"log.cleaner.io.max.bytes.per.second":           with(ignored, whyJVM),
	"log.index.size.max.bytes":                      with(ignored, whyJVM),
	"log.preallocate":                               with(ignored, whyJVM),
	"log.flush.scheduler.interval.ms":               with(ignored, whyJVM),
	"log.flush.offset.checkpoint.interval.ms":       with(ignored, whyJVM),
	"log.flush.start.offset.checkpoint.interval.ms": with(ignored, "Fjord writes a partition's log start offset (log-start-offset) durably each time DeleteRecords moves it, with no periodic checkpoint"),
	"log.segment.delete.delay.ms":                   with(ignored, whyJVM),
	"queued.max.requests":                           with(ignored, whyJVM),
	"socket.send.buffer.bytes":                      with(ignored, whyJVM),
	"socket.receive.buffer.bytes":                   with(ignored, whyJVM),
	"socket.listen.backlog.size":                    with(ignored, whyJVM),
	"replica.socket.receive.buffer.bytes":           with(ignored, whyJVM),
	"replica.socket.timeout.ms":                     with(ignored, whyJVM),
	"offsets.load.buffer.size":                      with(ignored, whyJVM),
	"replica.high.watermark.checkpoint.interval.ms": with(ignored, "Fjord derives the high watermark from fsynced offsets, with no checkpoint file"),

	// Metrics.
	"metric.reporters":                    with(ignored, whyMetrics),
	"metrics.num.samples":                 with(ignored, whyMetrics),
	"metrics.recording.level":             with(ignored, whyMetrics),
	"metrics.sample.window.ms":            with(ignored, whyMetrics),
	"kafka.metrics.reporters":             with(ignored, whyMetrics),
	"kafka.metrics.polling.interval.secs": with(ignored, whyMetrics),
	"auto.include.jmx.reporter":           with(ignored, whyMetrics),

	// Format versions.
	"inter.broker.protocol.version":     with(ignored, whyFormat),
	"log.message.format.version":        with(ignored, whyFormat),
	"log.message.downconversion.enable": with(ignored, whyFormat),

	// Security.
	// authorizer.class.name, super.users and allow.everyone.if.no.acl.found
	// are broker keys Fjord implements (broker/keys.go, broker/authz.go).
	"security.inter.broker.protocol": {class: Unsupported, why: whySecurity, asFjord: func(v string) bool {
		return strings.EqualFold(v, "PLAINTEXT") || strings.EqualFold(v, "SASL_PLAINTEXT")
	}, refuseWhen: "anything but PLAINTEXT or SASL_PLAINTEXT",
		refuse: func(v string) string {
			if v == "" || strings.EqualFold(v, "PLAINTEXT") || strings.EqualFold(v, "SASL_PLAINTEXT") {
				return ""
			}
			if strings.EqualFold(v, "SSL") {
				return "Fjord picks the inter-broker listener by name only: set inter.broker.listener.name to a listener mapped to SSL"
			}
			return "Fjord picks the inter-broker listener by name only: set inter.broker.listener.name to a listener mapped to " + strings.ToUpper(v)
		}},
	"ssl.engine.factory.class": {class: Unsupported, why: whyJSSE, asFjord: empty, refuseWhen: "any class name",
		refuse: func(v string) string {
			if v == "" {
				return ""
			}
			return "a custom SSL engine factory is Java code; Fjord uses Go's TLS with the ssl.* keys it documents"
		}},
	"ssl.protocol":              with(ignored, "Go negotiates the highest version of ssl.enabled.protocols"),
	"principal.builder.class":   with(unsupported, whySecurity),
	"connections.max.reauth.ms": with(unsupported, "re-authentication (KIP-368) is not built: SASL sessions do not expire"),

	// Storage behaviour Fjord has in other terms.
	"compression.type":                      {class: Unsupported, why: "Fjord keeps batches as the producer compressed them", asFjord: equalFold("producer")},
	"metadata.log.dir":                      with(unsupported, "the metadata log is kept under the first of log.dirs"),
	"client.quota.callback.class":           with(unsupported, whyQuota),
	"group.coordinator.rebalance.protocols": {class: Unsupported, why: "Fjord serves the classic and consumer (KIP-848) protocols, not streams or share groups yet", asFjord: sameSet("classic", "consumer")},
	"group.share.enable":                    {class: Unsupported, why: "share groups are always served (share.version 1) and cannot be turned off", asFjord: equalFold("true")},
	"group.coordinator.new.enable":          {class: Unsupported, why: "Fjord's coordinator is the new one (KIP-848) and cannot be turned off", asFjord: equalFold("true")},
	"eligible.leader.replicas.enable":       {class: Unsupported, why: "KIP-966's eligible leader replicas are not built", asFjord: equalFold("false")},

	// Compaction.
	"log.cleaner.min.compaction.lag.ms": {class: Unsupported, why: whyNotYet, asFjord: equalFold("0"), refuseWhen: "above 0", refuse: refuseLag},
	"log.cleaner.delete.retention.ms":   with(unsupported, "the broker-wide default is fixed at one day; set delete.retention.ms per topic"),
	"compression.gzip.level":            with(ignored, whyRecompress),
	"compression.lz4.level":             with(ignored, whyRecompress),
	"compression.zstd.level":            with(ignored, whyRecompress),

	// Fjord does these in its own way.
	"controlled.shutdown.enable":              {class: Unsupported, why: "Fjord always shuts down in a controlled way on SIGTERM", asFjord: equalFold("true")},
	"controlled.shutdown.max.retries":         with(ignored, "Fjord's controlled shutdown has its own bound"),
	"controlled.shutdown.retry.backoff.ms":    with(ignored, "Fjord's controlled shutdown has its own bound"),
	"leader.imbalance.per.broker.percentage":  with(unsupported, "Fjord moves every partition not led by its preferred replica at each check"),
	"offsets.commit.required.acks":            with(ignored, "Fjord writes committed offsets with acks=all to the offsets topic's ISR"),
	"offsets.topic.compression.codec":         with(ignored, whyRecompress),
	"replica.selector.class":                  with(unsupported, "consumers fetch from leaders only (KIP-392 is not built)"),
	"telemetry.max.bytes":                     with(ignored, "KIP-714 client telemetry is not collected"),
	"unstable.api.versions.enable":            with(ignored, "Fjord advertises only the API versions it serves"),
	"unstable.feature.versions.enable":        with(ignored, "Fjord advertises only the API versions it serves"),
	"group.coordinator.threads":               with(ignored, whyJVM),
	"group.coordinator.append.linger.ms":      with(ignored, whyJVM),
	"controller.socket.timeout.ms":            with(ignored, whyClients),
	"request.timeout.ms":                      with(ignored, whyClients),
	"socket.connection.setup.timeout.ms":      with(ignored, whyClients),
	"socket.connection.setup.timeout.max.ms":  with(ignored, whyClients),
	"max.connection.creation.rate":            with(unsupported, whyLimits),
	"log.message.timestamp.after.max.ms":      with(unsupported, whyTimestamps),
	"log.message.timestamp.before.max.ms":     with(unsupported, whyTimestamps),
	"log.message.timestamp.difference.max.ms": with(unsupported, whyTimestamps),
}

const (
	whyRecompress = "Fjord never recompresses: batches are kept as the producer compressed them"
	whyClients    = "timeouts of Kafka's inter-broker clients; Fjord's have their own"
	whyLimits     = "the broker-wide connection creation rate is not enforced yet (the per-ip connection_creation_rate quota is)"
	whyTimestamps = "record timestamps are not checked against the broker's clock yet"
)

func refuseLag(v string) string {
	if v == "" || v == "0" {
		return ""
	}
	return "Fjord's cleaner does not hold records back for a minimum compaction lag, so it could compact records away sooner than asked"
}

var brokerPrefix = map[string]rule{
	"zookeeper.":                  with(ignored, whyZooKeeper),
	"metrics.":                    with(ignored, whyMetrics),
	"ssl.":                        with(ignored, whyJSSE),
	"sasl.":                       with(unsupported, whySASLKey),
	"security.":                   with(unsupported, whySecurity),
	"delegation.token.":           with(unsupported, whySecurity),
	"transaction.":                with(unsupported, "tunes Kafka's transaction coordinator; Fjord's has its own intervals"),
	"share.":                      with(unsupported, whyShareKey),
	"group.share.":                with(unsupported, whyShareKey),
	"group.consumer.":             with(unsupported, why848Key),
	"remote.log.":                 with(unsupported, whyTiered),
	"remote.log.metadata.":        with(ignored, whyRLMM),
	"log.local.retention.":        with(unsupported, whyTiered),
	"quota.":                      with(unsupported, whyQuota),
	"replication.quota.":          with(unsupported, whyQuota),
	"alter.log.dirs.replication.": with(unsupported, whyQuota),
	"controller.quorum.":          with(unsupported, whyRaftTuning),
	"metadata.log.":               with(unsupported, "the metadata log's segments and snapshots are managed by Fjord's quorum"),
	"metadata.max.":               with(unsupported, "the metadata log's segments and snapshots are managed by Fjord's quorum"),
	"replica.fetch.":              with(ignored, "sizes Kafka's replica fetchers; Fjord's fetchers size their own requests"),
}

// topicExact and topicPrefix classify topic keys the same way.
var topicExact = map[string]rule{
	"message.downconversion.enable":       with(ignored, whyFormat),
	"message.format.version":              with(ignored, whyFormat),
	"preallocate":                         with(ignored, whyJVM),
	"file.delete.delay.ms":                with(ignored, whyJVM),
	"segment.index.bytes":                 with(ignored, whyJVM),
	"remote.storage.enable":               {class: Unsupported, why: whyTiered, asFjord: equalFold("false")},
	"min.compaction.lag.ms":               {class: Unsupported, why: whyNotYet, asFjord: equalFold("0"), refuseWhen: "above 0", refuse: refuseLag},
	"compression.gzip.level":              with(ignored, whyRecompress),
	"compression.lz4.level":               with(ignored, whyRecompress),
	"compression.zstd.level":              with(ignored, whyRecompress),
	"message.timestamp.after.max.ms":      with(unsupported, whyTimestamps),
	"message.timestamp.before.max.ms":     with(unsupported, whyTimestamps),
	"message.timestamp.difference.max.ms": with(unsupported, whyTimestamps),
}

var topicPrefix = map[string]rule{
	"local.retention.": with(unsupported, whyTiered),
}

// vendorPrefix names namespaces outside Kafka's list that real
// configurations carry; legacy lists keys Kafka itself removed.
var vendorPrefix = map[string]rule{
	"confluent.": with(ignored, whyConfluent),
	// Kafka's own open-ended families, read by Kafka but not rows of its
	// ConfigDef (see kafka_keys.tsv's header).
	"config.providers":              with(unsupported, "config providers are not built: a ${provider:...} value is taken literally"),
	"metrics.context.":              with(ignored, whyMetrics),
	"metrics.jmx.":                  with(ignored, whyMetrics),
	"rsm.config.":                   with(unsupported, whyTiered),
	"rsm.config.fetch.chunk.cache.": with(ignored, whyChunkCache),
	"rsm.config.compression.":       with(ignored, "Fjord uploads segments as they are on disk, their batches compressed as the producers sent them"),
	"rsm.config.encryption.enabled": {class: Ignored, why: "Fjord does not encrypt segments itself (use the bucket's server-side encryption)", refuseWhen: "true", refuse: refuseEncryption},
	"rlmm.config.":                  with(ignored, whyRLMM),
	"authorizer.zookeeper.":         with(ignored, whyZooKeeper),
}

var legacy = map[string]rule{
	"port":                 {class: Refused, refuse: removedIn30, refuseWhen: "always", why: removedIn30("")},
	"host.name":            {class: Refused, refuse: removedIn30, refuseWhen: "always", why: removedIn30("")},
	"advertised.host.name": {class: Refused, refuse: removedIn30, refuseWhen: "always", why: removedIn30("")},
	"advertised.port":      {class: Refused, refuse: removedIn30, refuseWhen: "always", why: removedIn30("")},
}

func refuseEncryption(v string) string {
	if strings.EqualFold(v, "true") {
		return "Fjord does not encrypt segments client-side: use the bucket's server-side encryption, and leave this false"
	}
	return ""
}

func removedIn30(string) string {
	return "removed in Kafka 3.0: set listeners and advertised.listeners instead"
}

// vendorRule matches the keys that are not Kafka's but are known.
func vendorRule(s Scope, name string) (rule, bool) {
	if r, ok := matchPrefix(vendorPrefix, name); ok && (s == Broker || strings.HasPrefix(name, "confluent.")) {
		return r, true
	}
	if s == Broker {
		if r, ok := legacy[name]; ok {
			return r, true
		}
	}
	return rule{}, false
}

// ruleFor classifies a Kafka key; base is its name in Kafka's list (name
// without a per-listener prefix).
func ruleFor(s Scope, base, name string) rule {
	exact, prefix := brokerExact, brokerPrefix
	if s == Topic {
		exact, prefix = topicExact, topicPrefix
	}
	if r, ok := exact[base]; ok {
		return r
	}
	if r, ok := matchPrefix(prefix, base); ok {
		return r
	}
	if s == Broker && strings.HasSuffix(base, ".throttled.rate") {
		return with(unsupported, whyQuota)
	}
	if s == Broker && base != name && strings.HasPrefix(name, "listener.name.") {
		return with(unsupported, "a per-listener setting of a key Fjord does not implement")
	}
	return unsupported
}

func matchPrefix(m map[string]rule, name string) (rule, bool) {
	best, found := "", false
	for p := range m {
		if strings.HasPrefix(name, p) && len(p) > len(best) {
			best, found = p, true
		}
	}
	return m[best], found
}

// Rule describes, for the documentation, what Fjord does with a key it
// does not implement: its class and why, and (RefuseWhen non-empty) which
// values are refused instead and why.
type Rule struct {
	Class      Class
	Why        string
	RefuseWhen string
	RefuseWhy  string
}

// Describe is the rule of a Kafka key (by its name in Kafka's list) or of a
// vendor namespace prefix such as "confluent.".
func Describe(s Scope, name string) Rule {
	r, ok := vendorRule(s, name)
	if !ok {
		r = ruleFor(s, name, name)
	}
	d := Rule{Class: r.class, Why: r.why, RefuseWhen: r.refuseWhen}
	if r.refuse != nil {
		d.RefuseWhy = r.refuse("\x00 a value that is refused")
	}
	return d
}

// VendorPrefixes lists the namespaces outside Kafka's list that Fjord
// accepts, and LegacyKeys the removed Kafka keys it names, both sorted.
func VendorPrefixes() []string { return sortedKeys(vendorPrefix) }

func LegacyKeys() []string { return sortedKeys(legacy) }

func sortedKeys(m map[string]rule) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
