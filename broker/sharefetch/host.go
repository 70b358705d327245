package sharefetch

import (
	"fmt"
	"time"

	"github.com/rs/zerolog"

	"github.com/fjordlog/fjord/broker/sharestate"
	"github.com/fjordlog/fjord/group/sharepart"
)

// Host is what the Manager needs of the node: the data partitions it
// leads, the durable store of share-partition state, the share groups'
// settings, its goroutines and its logger. The broker implements it; the
// tests implement it in memory.
type Host interface {
	// Partition resolves a data partition this node serves as leader:
	// its Replica, or a Kafka error code and no Replica:
	// UNKNOWN_TOPIC_OR_PARTITION (no such topic id or partition),
	// NOT_LEADER_OR_FOLLOWER (another node leads it, or none does), or
	// whatever else the replica answers consumers (KAFKA_STORAGE_ERROR).
	// Called once per partition per request attempt and per load.
	Partition(topicID [16]byte, partition int32) (Replica, int16)
	// TopicName is the name of topic id in the node's metadata image, ""
	// when the image has no such topic.
	TopicName(id [16]byte) string
	// Persister is the durable store of share-partition state (the share
	// coordinator, local or over the network).
	Persister() sharestate.Persister
	// GroupConfig is share group group's settings now: the broker's
	// group.share.* values overridden by the group's own configs.
	GroupConfig(group string) GroupConfig
	// Code maps an error to its Kafka code (the node's one mapping);
	// errors of package group are mapped with group.ErrorCode here, so
	// Code sees the rest: the Persister's (sharestate.ErrNotAvailable
	// should be COORDINATOR_NOT_AVAILABLE, as Kafka answers when the share
	// coordinator cannot be reached) and the log's.
	Code(err error) int16
	// Go runs fn on a goroutine the node tracks; false once it is closing.
	Go(fn func()) bool
	Log() *zerolog.Logger
}

// Replica is one data partition as this node leads it. Its methods are
// safe to call from any goroutine and never block on the network.
type Replica interface {
	// LeaderEpoch is the leader epoch of this node's leadership of the
	// partition, and false once this node no longer leads it.
	LeaderEpoch() (int32, bool)
	// Offsets are the log start offset and the high watermark.
	Offsets() (logStart, hw int64)
	// LastStable is the last stable offset: the high watermark, or the
	// first offset of the oldest transaction not yet decided and
	// replicated when that is lower (what a read_committed Fetch reads
	// up to). It moves only when the high watermark does.
	LastStable() int64
	// Read returns whole record batches, the first one holding offset (or
	// the first after it), ending before the high watermark, or under
	// ReadCommitted before the last stable offset: at most maxBytes,
	// except that the first batch is returned whole even when larger
	// (KIP-74). Empty when offset is at or past that bound. Under
	// ReadCommitted it also returns the aborted transactions whose
	// batches the read may hold (those a read_committed Fetch returns);
	// under ReadUncommitted none. The caller owns the bytes. An offset
	// below the log start is an error (storage.ErrOffsetOutOfRange).
	Read(offset int64, maxBytes int, iso Isolation) ([]byte, []AbortedTxn, error)
	// ListOffset is ListOffsets' answer for timestamp: -1 the high
	// watermark, -2 the log start, otherwise the first offset below the
	// high watermark whose record's timestamp is at or after it (found
	// false when there is none).
	ListOffset(timestamp int64) (offset int64, found bool, err error)
	// Watch registers ch to be signalled (a send that never blocks) when
	// the high watermark or this node's leadership of the partition
	// changes. A registration may end with its first signal: callers
	// register again after each wake. Unwatch removes ch.
	Watch(ch chan struct{})
	Unwatch(ch chan struct{})
}

// GroupConfig is what one share group's settings decide here.
type GroupConfig struct {
	// Partition shapes the group's share-partitions (lock duration,
	// delivery limit, in-flight limit, snapshot cadence). A share-partition
	// keeps the settings it was loaded with until it is loaded again.
	Partition sharepart.Config
	// AutoOffsetReset (share.auto.offset.reset) is where a share-partition
	// with no stored state starts.
	AutoOffsetReset sharepart.AutoOffsetReset
	// Isolation (share.isolation.level) is which records the group is
	// handed. Unlike Partition, it is read on every ShareFetch, as Kafka
	// reads it for every share fetch.
	Isolation Isolation
}

// Isolation is share.isolation.level, with the protocol's values.
type Isolation int8

const (
	// ReadUncommitted (the default) hands out every data record below
	// the high watermark, those of open and aborted transactions too.
	ReadUncommitted Isolation = 0
	// ReadCommitted hands out only records below the last stable offset,
	// and archives, undelivered, those of aborted transactions.
	ReadCommitted Isolation = 1
)

// AbortedTxn is one aborted transaction of a partition's log, as the
// log's aborted transaction index holds it.
type AbortedTxn struct {
	ProducerID  int64
	FirstOffset int64 // its first batch
	LastOffset  int64 // its abort marker
}

// Config is the node-wide settings of share fetching. A zero field takes
// its default.
type Config struct {
	// MaxSessions (group.share.max.share.sessions) caps the share sessions
	// this node keeps. Default 2000. A ShareFetch that would open one more
	// waits its MaxWaitMs and is answered SHARE_SESSION_LIMIT_REACHED.
	MaxSessions int
	// MaxPartitions caps the share-partitions loaded here (Kafka has no
	// such bound). At the cap, the least recently used share-partition
	// that holds no locks and owes no write is unloaded to make room;
	// when none can be, the load is refused with LEADER_NOT_AVAILABLE,
	// which clients retry. Default 10000.
	MaxPartitions int
	// FetchMaxBytes (fetch.max.bytes) caps a ShareFetch's MaxBytes.
	// Default 55 MiB.
	FetchMaxBytes int32
	// PersisterTimeout bounds one Persister call. Default 30s.
	PersisterTimeout time.Duration
}

// DefaultConfig returns Kafka 4.2's defaults (and Fjord's for what Kafka
// does not have).
func DefaultConfig() Config {
	return Config{
		MaxSessions:      2000,
		MaxPartitions:    10000,
		FetchMaxBytes:    55 << 20,
		PersisterTimeout: 30 * time.Second,
	}
}

func (c Config) withDefaults() Config {
	d := DefaultConfig()
	if c.MaxSessions == 0 {
		c.MaxSessions = d.MaxSessions
	}
	if c.MaxPartitions == 0 {
		c.MaxPartitions = d.MaxPartitions
	}
	if c.FetchMaxBytes == 0 {
		c.FetchMaxBytes = d.FetchMaxBytes
	}
	if c.PersisterTimeout == 0 {
		c.PersisterTimeout = d.PersisterTimeout
	}
	return c
}

// Validate reports a setting that cannot work, after defaults.
func (c Config) Validate() error {
	c = c.withDefaults()
	switch {
	case c.MaxSessions < 1:
		return fmt.Errorf("sharefetch: group.share.max.share.sessions %d: must be >= 1", c.MaxSessions)
	case c.MaxPartitions < 1:
		return fmt.Errorf("sharefetch: share-partition cap %d: must be >= 1", c.MaxPartitions)
	case c.FetchMaxBytes < 1:
		return fmt.Errorf("sharefetch: fetch.max.bytes %d: must be >= 1", c.FetchMaxBytes)
	case c.PersisterTimeout < 0:
		return fmt.Errorf("sharefetch: persister timeout %v: must be >= 0", c.PersisterTimeout)
	}
	return nil
}
