package config

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Tiered storage (KIP-405, issue 29): the broker keys of Kafka's remote
// log manager and, under rsm.config.*, of Aiven's
// tiered-storage-for-apache-kafka plugin with its S3 backend, which is
// what a Kafka cluster moving to Fjord has configured. Fjord's own
// remote log manager reads them; it speaks S3 itself
// (storage/remote/s3), so the class names are accepted only when they
// name what Fjord does, and refused otherwise, rather than run without
// the plugin a configuration asked for.
//
// The remote log metadata manager's keys (remote.log.metadata.manager.*,
// rlmm.config.*) are accepted and ignored (catalogue/rules.go says why).
// Of Aiven's chunk cache (rsm.config.fetch.chunk.cache.*), the class,
// size and prefetch size are read (the read cache, broker/tier's
// ChunkCache); its other keys are accepted and ignored.

const (
	// AivenRSMClass is the one remote.log.storage.manager.class.name
	// accepted.
	AivenRSMClass = "io.aiven.kafka.tieredstorage.RemoteStorageManager"
	// AivenS3BackendClass is the one rsm.config.storage.backend.class
	// accepted.
	AivenS3BackendClass = "io.aiven.kafka.tieredstorage.storage.s3.S3Storage"
	// AivenMemoryChunkCache and AivenDiskChunkCache are the
	// rsm.config.fetch.chunk.cache.class values accepted: both are served
	// by Fjord's memory cache (the disk one's path is ignored).
	AivenMemoryChunkCache = "io.aiven.kafka.tieredstorage.fetch.cache.MemoryChunkCache"
	AivenDiskChunkCache   = "io.aiven.kafka.tieredstorage.fetch.cache.DiskChunkCache"
	// DefaultChunkSize is the read cache's chunk when rsm.config.chunk.size
	// is unset: 4 MiB, what Aiven's examples configure.
	DefaultChunkSize = 4 << 20
	// FollowRetention is the local.retention.* value (Kafka's -2) that
	// means: the same as retention.*.
	FollowRetention = -2
)

// RemoteStorage is the tiered-storage keys (keys_remote.go).
//
// Invariant (Validate): with Enable, ManagerClass is AivenRSMClass,
// S3.Backend is AivenS3BackendClass and S3.Bucket is set.
type RemoteStorage struct {
	Enable bool // remote.log.storage.system.enable
	// TaskIntervalMs is how often each leader's partitions are checked
	// for segments to upload and remote segments to expire
	// (remote.log.manager.task.interval.ms, >= 1).
	TaskIntervalMs int64
	// CopierThreads bounds concurrent segment uploads
	// (remote.log.manager.copier.thread.pool.size); -1 = Kafka's
	// remote.log.manager.thread.pool.size default, 10.
	CopierThreads int32
	// ReaderThreads bounds concurrent reads from the store
	// (remote.log.reader.threads, >= 1), and ReaderMaxPending the reads
	// queued behind them (remote.log.reader.max.pending.tasks, >= 1);
	// a fetch beyond both is answered with an error, as in Kafka.
	ReaderThreads    int32
	ReaderMaxPending int32
	// FetchMaxWaitMs bounds how long a fetch waits for remote data
	// (remote.fetch.max.wait.ms, >= 1).
	FetchMaxWaitMs int32
	// ManagerClass is remote.log.storage.manager.class.name: "" or
	// AivenRSMClass.
	ManagerClass string
	// LocalRetentionMs and LocalRetentionBytes are the broker defaults
	// of the topics' local.retention.* (log.local.retention.ms,
	// log.local.retention.bytes): how much of a tiered partition stays
	// on local disk once uploaded. FollowRetention (-2) = retention.*;
	// -1 = no limit.
	LocalRetentionMs    int64
	LocalRetentionBytes int64
	// ObjectChecksums records each copied object's length and CRC-32C
	// (other than the .log's) in its segment's metadata, for every read to
	// check (fjord.remote.log.object.checksums.enable). Off only during a
	// rolling upgrade from a release without them: older nodes cannot
	// read those records.
	ObjectChecksums bool
	// S3 is the rsm.config.* keys.
	S3 RemoteS3
}

// RemoteS3 is the rsm.config.* keys of Aiven's S3 backend that Fjord
// reads. SecretAccessKey is a password: never logged, never shown by
// DescribeConfigs (Sensitive).
type RemoteS3 struct {
	Backend         string // rsm.config.storage.backend.class: "" or AivenS3BackendClass
	Endpoint        string // rsm.config.storage.s3.endpoint.url; "" = AWS
	Bucket          string // rsm.config.storage.s3.bucket.name
	Region          string // rsm.config.storage.s3.region; "" = the SDK's, else us-east-1
	PathStyle       bool   // rsm.config.storage.s3.path.style.access.enabled
	AccessKeyID     string // rsm.config.storage.aws.access.key.id; "" = AWS environment and files
	SecretAccessKey string // rsm.config.storage.aws.secret.access.key
	KeyPrefix       string // rsm.config.key.prefix
	// ChunkSize is rsm.config.chunk.size: Fjord stores each segment as
	// one object and reads byte ranges of it; with the read cache on, the
	// ranges are chunks of this size (0 = DefaultChunkSize).
	ChunkSize int32
	// ChunkCacheClass is rsm.config.fetch.chunk.cache.class: "" (no read
	// cache) or one of the Aiven chunk caches, both served from memory.
	ChunkCacheClass string
	// ChunkCacheSize is rsm.config.fetch.chunk.cache.size: the read
	// cache's bound in bytes (needed, > 0, with ChunkCacheClass).
	ChunkCacheSize int64
	// ChunkCachePrefetch is rsm.config.fetch.chunk.cache.prefetch.max.size:
	// bytes read ahead of a chunk read; -1 = one chunk.
	ChunkCachePrefetch int64
}

// ReadCache is the read cache the rsm.config.* keys ask for: chunk size,
// bound in bytes (0: no cache) and chunks to read ahead.
func (s *RemoteS3) ReadCache() (chunk, bytes int64, prefetch int) {
	chunk = int64(s.ChunkSize)
	if chunk <= 0 {
		chunk = DefaultChunkSize
	}
	if s.ChunkCacheClass == "" || s.ChunkCacheSize <= 0 {
		return chunk, 0, 0
	}
	prefetch = 1
	if s.ChunkCachePrefetch >= 0 {
		prefetch = int((s.ChunkCachePrefetch + chunk - 1) / chunk)
	}
	return chunk, s.ChunkCacheSize, prefetch
}

// remoteSecretKeys are the tiered-storage keys holding secrets: outside
// Kafka's catalogue (rsm.config.* are the plugin's), so Sensitive names
// them here.
var remoteSecretKeys = map[string]bool{
	"rsm.config.storage.aws.secret.access.key": true,
}

func defaultRemoteStorage() RemoteStorage {
	return RemoteStorage{
		TaskIntervalMs:      30000,
		CopierThreads:       -1,
		ReaderThreads:       10,
		ReaderMaxPending:    100,
		S3:                  RemoteS3{ChunkCachePrefetch: -1},
		FetchMaxWaitMs:      500,
		LocalRetentionMs:    FollowRetention,
		LocalRetentionBytes: FollowRetention,
		ObjectChecksums:     true,
	}
}

// remoteKeys are the table rows of the tiered-storage keys. Read-only:
// the remote log manager is set up at start-up.
func remoteKeys(d *Config) []Key {
	r := func(c *Config) *RemoteStorage { return &c.Remote }
	s := func(c *Config) *RemoteS3 { return &c.Remote.S3 }
	itoa := func(n int64) string { return strconv.FormatInt(n, 10) }
	dr := d.Remote
	return []Key{
		{Name: "remote.log.storage.system.enable", Def: strconv.FormatBool(dr.Enable), Doc: "Tiered storage (KIP-405): upload sealed segments of the topics with remote.storage.enable=true to the S3 bucket of rsm.config.storage.s3.*, and serve reads of them from there. Needs remote.log.storage.manager.class.name, rsm.config.storage.backend.class and rsm.config.storage.s3.bucket.name. At start-up the bucket is checked: a bucket that does not exist or refuses the credentials stops the node; a store that cannot be reached is logged and retried. See docs/configuration.md (Tiered storage).",
			Set: setBool(func(c *Config) *bool { return &r(c).Enable })},
		{Name: "remote.log.storage.manager.class.name", Def: dr.ManagerClass, Doc: "Must be " + AivenRSMClass + " (Aiven's tiered-storage plugin, whose rsm.config.* keys Fjord reads and whose S3 layout it does not share: Fjord speaks S3 itself) or empty; any other class is refused.",
			Set: setOnly(AivenRSMClass, "remote storage manager", func(c *Config) *string { return &r(c).ManagerClass })},
		{Name: "remote.log.manager.task.interval.ms", Def: itoa(dr.TaskIntervalMs), Doc: "How often each partition this node leads is checked for segments to upload and remote segments to expire.",
			Set: setAtLeast(1, func(c *Config) *int64 { return &r(c).TaskIntervalMs })},
		{Name: "remote.log.manager.copier.thread.pool.size", Def: itoa(int64(dr.CopierThreads)), Doc: "Segment uploads running at once; -1 = 10 (Kafka's remote.log.manager.thread.pool.size default).",
			Set: setThreads(func(c *Config) *int32 { return &r(c).CopierThreads })},
		{Name: "remote.log.reader.threads", Def: itoa(int64(dr.ReaderThreads)), Doc: "Reads from the remote store running at once (consumers' fetches and ListOffsets by timestamp below the local log).",
			Set: setAtLeast(1, func(c *Config) *int32 { return &r(c).ReaderThreads })},
		{Name: "remote.log.reader.max.pending.tasks", Def: itoa(int64(dr.ReaderMaxPending)), Doc: "Remote reads queued behind remote.log.reader.threads; a fetch or ListOffsets beyond them gets an error, as in Kafka.",
			Set: setAtLeast(1, func(c *Config) *int32 { return &r(c).ReaderMaxPending })},
		{Name: "remote.fetch.max.wait.ms", Def: itoa(int64(dr.FetchMaxWaitMs)), Doc: "Longest a fetch waits for data read from the remote store.",
			Set: setAtLeast(1, func(c *Config) *int32 { return &r(c).FetchMaxWaitMs })},
		{Name: "log.local.retention.ms", Def: itoa(dr.LocalRetentionMs), Doc: "Default of the topics' local.retention.ms: how long an uploaded segment stays on local disk. -2 = log.retention.ms (retention.ms); -1 = no limit. Must not exceed retention.",
			Set: setAtLeast(FollowRetention, func(c *Config) *int64 { return &r(c).LocalRetentionMs })},
		{Name: "log.local.retention.bytes", Def: itoa(dr.LocalRetentionBytes), Doc: "Default of the topics' local.retention.bytes: how many bytes of a partition stay on local disk once uploaded. -2 = log.retention.bytes (retention.bytes); -1 = no limit.",
			Set: setAtLeast(FollowRetention, func(c *Config) *int64 { return &r(c).LocalRetentionBytes })},

		{Name: "fjord.remote.log.object.checksums.enable", Def: strconv.FormatBool(dr.ObjectChecksums), Doc: "Record the length and CRC-32C of each copied segment's objects other than its .log (indexes, producer snapshot, leader-epoch checkpoint, transaction index) in the segment's metadata, and check them on every read, so a damaged or deleted object is refused rather than served (a deleted .txnindex would otherwise read as no aborted transactions). Set false on the upgraded nodes during a rolling upgrade from a release without it, whose nodes cannot read such metadata records, and back to true once every node runs this release (docs/operations.md, Upgrading). Fjord only.",
			Set: setBool(func(c *Config) *bool { return &r(c).ObjectChecksums })},

		{Name: "rsm.config.storage.backend.class", Def: dr.S3.Backend, Doc: "Must be " + AivenS3BackendClass + " (S3 and S3-compatible stores) or empty; other backends are refused.",
			Set: setOnly(AivenS3BackendClass, "storage backend", func(c *Config) *string { return &s(c).Backend })},
		{Name: "rsm.config.storage.s3.endpoint.url", Def: dr.S3.Endpoint, Doc: "S3 endpoint, e.g. http://seaweedfs:8333; empty = AWS's endpoint for the region.",
			Set: setString(func(c *Config) *string { return &s(c).Endpoint })},
		{Name: "rsm.config.storage.s3.bucket.name", Def: dr.S3.Bucket, Doc: "Bucket the segments go to; it must exist (Fjord does not create it).",
			Set: setString(func(c *Config) *string { return &s(c).Bucket })},
		{Name: "rsm.config.storage.s3.region", Def: dr.S3.Region, Doc: "Region of the bucket; empty = AWS_REGION or ~/.aws/config, else us-east-1.",
			Set: setString(func(c *Config) *string { return &s(c).Region })},
		{Name: "rsm.config.storage.s3.path.style.access.enabled", Def: strconv.FormatBool(dr.S3.PathStyle), Doc: "Address the bucket as endpoint/bucket rather than bucket.endpoint: needed by most S3-compatible stores (SeaweedFS, MinIO).",
			Set: setBool(func(c *Config) *bool { return &s(c).PathStyle })},
		{Name: "rsm.config.storage.aws.access.key.id", Def: dr.S3.AccessKeyID, Doc: "Static S3 credentials, with rsm.config.storage.aws.secret.access.key; both empty = AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, ~/.aws/credentials, then instance roles.",
			Set: setString(func(c *Config) *string { return &s(c).AccessKeyID })},
		{Name: "rsm.config.storage.aws.secret.access.key", Def: dr.S3.SecretAccessKey, Doc: "Secret of rsm.config.storage.aws.access.key.id: a password, never logged nor shown by DescribeConfigs.",
			Set: setString(func(c *Config) *string { return &s(c).SecretAccessKey })},
		{Name: "rsm.config.key.prefix", Def: dr.S3.KeyPrefix, Doc: "Prefix of every object key Fjord writes, e.g. to share a bucket between clusters.",
			Set: setString(func(c *Config) *string { return &s(c).KeyPrefix })},
		{Name: "rsm.config.chunk.size", Doc: "Bytes of a remote segment read at once into the read cache (rsm.config.fetch.chunk.cache.*); unset = 4 MiB. Fjord stores each segment as one object and reads byte ranges of it, so this sets only the read size.",
			Set: setAtLeast(1, func(c *Config) *int32 { return &s(c).ChunkSize })},
		{Name: "rsm.config.fetch.chunk.cache.class", Def: dr.S3.ChunkCacheClass, Doc: "The read cache of remote segments: " + AivenMemoryChunkCache + " or " + AivenDiskChunkCache + " (both kept in memory here, bounded by rsm.config.fetch.chunk.cache.size); empty = none, each fetch reads the store.",
			Set: setOneOf([]string{AivenMemoryChunkCache, AivenDiskChunkCache}, "chunk cache", func(c *Config) *string { return &s(c).ChunkCacheClass })},
		{Name: "rsm.config.fetch.chunk.cache.size", Def: itoa(dr.S3.ChunkCacheSize), Doc: "Bytes the read cache holds (least recently used chunks go first); needed with rsm.config.fetch.chunk.cache.class.",
			Set: setAtLeast(0, func(c *Config) *int64 { return &s(c).ChunkCacheSize })},
		{Name: "rsm.config.fetch.chunk.cache.prefetch.max.size", Def: itoa(dr.S3.ChunkCachePrefetch), Doc: "Bytes read ahead, in chunks, after a chunk a consumer reads, so a consumer reading a segment in order finds the next chunk cached; -1 = one chunk (Aiven's default is 0: none).",
			Set: setAtLeast(-1, func(c *Config) *int64 { return &s(c).ChunkCachePrefetch })},
	}
}

// setOnly accepts "" or want, and refuses any other class naming what.
func setOnly(want, what string, field func(*Config) *string) func(*Config, string) error {
	return func(c *Config, v string) error {
		v = strings.TrimSpace(v)
		if v != "" && v != want {
			return fmt.Errorf("%q: Fjord implements tiered storage itself and accepts only %s here (its %s, whose settings it reads); another plugin cannot be loaded", v, want, what)
		}
		*field(c) = v
		return nil
	}
}

// setOneOf accepts "" or one of want, and refuses any other class naming
// what.
func setOneOf(want []string, what string, field func(*Config) *string) func(*Config, string) error {
	return func(c *Config, v string) error {
		v = strings.TrimSpace(v)
		if v != "" && !slices.Contains(want, v) {
			return fmt.Errorf("%q: the %s must be one of %s", v, what, strings.Join(want, ", "))
		}
		*field(c) = v
		return nil
	}
}

// setAtLeast parses an integer >= lo.
func setAtLeast[T integer](lo T, field func(*Config) *T) func(*Config, string) error {
	return func(c *Config, v string) error {
		n, err := parseInt[T](v)
		if err != nil {
			return err
		}
		if n < lo {
			return fmt.Errorf("%d: must be >= %d", n, lo)
		}
		*field(c) = n
		return nil
	}
}

// setThreads parses a pool size: -1 (the default) or >= 1.
func setThreads(field func(*Config) *int32) func(*Config, string) error {
	return func(c *Config, v string) error {
		n, err := parseInt[int32](v)
		if err != nil {
			return err
		}
		if n != -1 && n < 1 {
			return fmt.Errorf("%d: must be -1 or >= 1", n)
		}
		*field(c) = n
		return nil
	}
}

// validateRemote checks the tiered-storage keys against each other.
func (c *Config) validateRemote() error {
	r := &c.Remote
	if !r.Enable {
		return nil
	}
	var missing []string
	if r.ManagerClass == "" {
		missing = append(missing, "remote.log.storage.manager.class.name="+AivenRSMClass)
	}
	if r.S3.Backend == "" {
		missing = append(missing, "rsm.config.storage.backend.class="+AivenS3BackendClass)
	}
	if r.S3.Bucket == "" {
		missing = append(missing, "rsm.config.storage.s3.bucket.name")
	}
	if len(missing) > 0 {
		return fmt.Errorf("remote.log.storage.system.enable=true needs %s", strings.Join(missing, ", "))
	}
	if r.S3.ChunkCacheClass != "" && r.S3.ChunkCacheSize <= 0 {
		return errors.New("rsm.config.fetch.chunk.cache.class needs rsm.config.fetch.chunk.cache.size (bytes, > 0)")
	}
	if (r.S3.AccessKeyID == "") != (r.S3.SecretAccessKey == "") {
		return errors.New("rsm.config.storage.aws.access.key.id and rsm.config.storage.aws.secret.access.key: give both or neither (neither = the AWS environment variables and files)")
	}
	return nil
}

// CopierPoolSize is the number of concurrent uploads
// remote.log.manager.copier.thread.pool.size asks for (-1 = 10).
func (r *RemoteStorage) CopierPoolSize() int {
	if r.CopierThreads < 1 {
		return 10
	}
	return int(r.CopierThreads)
}

// Tiering is a topic's tiered-storage settings, resolved.
type Tiering struct {
	// Enabled: the broker's remote.log.storage.system.enable and the
	// topic's remote.storage.enable are both true.
	Enabled bool
	// LocalRetentionMs and LocalRetentionBytes are local.retention.*
	// with -2 resolved to retention.*: how much stays on local disk once
	// uploaded; -1 = no limit.
	LocalRetentionMs    int64
	LocalRetentionBytes int64
}

// TieringFor is a topic's tiered-storage settings under the running
// configuration c and the topic's overrides.
func TieringFor(c *Config, overrides map[string]string) Tiering {
	num := func(name string) int64 {
		v, _ := FindTopicKey(name).Effective(c, overrides)
		n, _ := strconv.ParseInt(v, 10, 64)
		return n
	}
	en, _ := FindTopicKey("remote.storage.enable").Effective(c, overrides)
	t := Tiering{
		Enabled:             c.Remote.Enable && strings.EqualFold(en, "true"),
		LocalRetentionMs:    num("local.retention.ms"),
		LocalRetentionBytes: num("local.retention.bytes"),
	}
	if t.LocalRetentionMs == FollowRetention {
		t.LocalRetentionMs = num("retention.ms")
	}
	if t.LocalRetentionBytes == FollowRetention {
		t.LocalRetentionBytes = num("retention.bytes")
	}
	return t
}
