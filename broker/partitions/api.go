package partitions

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordlog/fjord/broker/acl"
	"github.com/fjordlog/fjord/broker/api"
	"github.com/fjordlog/fjord/broker/metrics"
	"github.com/fjordlog/fjord/broker/partitions/fetchsession"
	"github.com/fjordlog/fjord/broker/quota"
	"github.com/fjordlog/fjord/broker/replica"
	"github.com/fjordlog/fjord/broker/replicamgr"
	"github.com/fjordlog/fjord/broker/tier"
	"github.com/fjordlog/fjord/broker/txn"
	"github.com/fjordlog/fjord/storage"
)

// The data path's APIs: this package is their room. Each key is one file
// (NN_name.go, headed by its versions and behaviour) holding its entry,
// handler and rule; Entries gives the node's registry all of them, bound
// to the node through Host. What clients and followers do with partitions
// next (tiered storage's remote reads, share groups' ShareFetch) registers
// here too.

// Host is what the data path's APIs need of the node. The handlers ask for
// the replica manager and the metrics once per request (or per read of a
// long poll), never per partition: Host is an interface call away.
type Host interface {
	// Replicas is the node's replica manager: the topics and partitions
	// the handlers serve.
	Replicas() *replicamgr.Manager
	// Metrics are the node's series the handlers count.
	Metrics() *metrics.Metrics
	// ProduceQuota and FetchQuota are the client quotas'
	// (producer_byte_rate, consumer_byte_rate) wrappers of a request's
	// respond: they charge it, may cap a fetch's MaxBytes, and carry the
	// throttle time. A FetchQuota wrapper sees the handler's *PooledFetch.
	ProduceQuota(cc *api.Conn, req *kmsg.ProduceRequest, respond func(kmsg.Response)) func(kmsg.Response)
	FetchQuota(cc *api.Conn, req *kmsg.FetchRequest, respond func(kmsg.Response)) func(kmsg.Response)
	// VerifyTxnProduce checks with transactional id's coordinator the
	// partitions of req that would open its transaction (KIP-890 part 1;
	// from Produce v12 it adds them to the transaction, part 2), and
	// returns the refused ones with their Produce error codes. req's
	// topics are named (produceTopics fills in the names of v13's ids).
	VerifyTxnProduce(ctx context.Context, id string, req *kmsg.ProduceRequest) map[txn.TopicPartition]int16
	// LeaderThrottle is the leader side of the replication quotas, as a
	// follower's fetch reads them now.
	LeaderThrottle() LeaderThrottle
	// CleanupPolicyHas reports whether the topic's effective
	// cleanup.policy includes policy.
	CleanupPolicyHas(t *replicamgr.Topic, policy string) bool
	// FetchSessions is the node's KIP-227 fetch session cache.
	FetchSessions() *fetchsession.Cache
	// FetchAuthz is Fetch's authorization context for cc, nil when the
	// node has no authorizer: a session's partitions that an incremental
	// fetch does not name are authorized again each time.
	FetchAuthz(cc *api.Conn) *api.Authz
	// LogDirs is log.dirs as configured (comma-separated) and the
	// directory partitions are stored in, which stands for the first.
	LogDirs() (configured, inUse string)
	// TopicName resolves a request's topic: its name, or (topic-id
	// versions) the name of the id in the current image, "" when unknown.
	TopicName(name string, id [16]byte) string
	// ReadFailed hands a damaged log found by a read to the node.
	ReadFailed(p *replica.Partition, err error)
	// Code maps an error to its Kafka code (the node's one mapping).
	Code(err error) int16
	// Go runs fn on a goroutine the node tracks; false once it is closing.
	Go(fn func()) bool
	// Remote is tiered storage's copy of the partitions (broker/tier), nil
	// when the node has no remote store.
	Remote() RemoteLog
	Log() *zerolog.Logger
}

// RemoteLog is what Fetch and ListOffsets read of a tiered partition's
// copy in the remote store (KIP-405), from the node's image.
type RemoteLog interface {
	// Start is the partition's remote log start: the base of its oldest
	// copied segment, -1 when nothing is copied.
	Start(topicID [16]byte, partition int32) int64
	// CopiedEnd is the highest offset copied (COPY_FINISHED) and the
	// leader epoch it was written in; -1, -1 when nothing is copied.
	CopiedEnd(topicID [16]byte, partition int32) (offset int64, epoch int32)
	// Read returns whole batches from the copied segment holding offset
	// (at least the first, at most maxBytes otherwise); ok is false when
	// no copied segment holds it.
	Read(ctx context.Context, topic string, topicID [16]byte, partition int32, offset int64, maxBytes int) (data []byte, ok bool, err error)
	// Aborted returns the aborted transactions a read_committed read of
	// the copy from fetchOffset, whose records end before upperBound,
	// must report, from the .txnindex objects of the copied segments from
	// the one holding fetchOffset on (tier.Reader.Aborted). It stops where
	// the copied segments end: the caller adds its local log's
	// (storage.Log.AbortedTransactions), searched before this call so
	// that a local segment deleted meanwhile is already covered by a
	// copy. An error (the store failed, or a segment walked was deleted
	// meanwhile) means the records must not be served.
	Aborted(ctx context.Context, topic string, topicID [16]byte, partition int32, fetchOffset, upperBound int64) ([]storage.AbortedTxn, error)
	// Size is the bytes of the partition's copied segments (its remote
	// log size); 0 when nothing is copied.
	Size(topicID [16]byte, partition int32) int64
	// OffsetForTimestamp is the first copied record with a timestamp at
	// or after ts (tier.Reader.OffsetForTimestamp); ok false when none.
	OffsetForTimestamp(ctx context.Context, topic string, topicID [16]byte, partition int32, ts int64) (offset, recordTS int64, ok bool, err error)
	// Reads is the pool consumers' remote reads run on, off the fetch
	// path (remote_fetch.go); nil: they run on the fetch's goroutine.
	Reads() *tier.ReadPool
	// FetchMaxWait is remote.fetch.max.wait.ms: how long a fetch with no
	// other data waits for its remote reads.
	FetchMaxWait() time.Duration
}

// Entries are the data path's registrations, bound to h. Building them
// never calls h.
func Entries(h Host) []api.Entry {
	return []api.Entry{
		produceEntry(h), fetchEntry(h), listOffsetsEntry(h), deleteRecordsEntry(h),
		offsetForLeaderEpochEntry(h), alterReplicaLogDirsEntry(h), describeLogDirsEntry(h),
	}
}

// handler is a data path API's handler before it is bound to its host.
type handler func(h Host, cc *api.Conn, req kmsg.Request, respond func(kmsg.Response))

func bindTo(h Host, f handler) api.Handler {
	return func(cc *api.Conn, req kmsg.Request, respond func(kmsg.Response)) { f(h, cc, req, respond) }
}

// check is a rule's check that reads the node's state (a topic id's name)
// before it is bound to its host.
type check func(h Host, z *api.Authz, req kmsg.Request) (kmsg.Response, func(kmsg.Response))

func bindCheck(h Host, c check) api.Check {
	return func(z *api.Authz, req kmsg.Request) (kmsg.Response, func(kmsg.Response)) { return c(h, z, req) }
}

// requestTopic is the topic a request names, by id from the versions that
// name topics by id (byID: Produce v13+, Fetch v13+, KIP-516) and by name
// before; nil when the image has none. Resolved once per request topic, so
// a topic deleted and created again under the same name is never mixed up
// with the one the id named.
func requestTopic(m *replicamgr.Manager, byID bool, name string, id [16]byte) *replicamgr.Topic {
	if byID {
		return m.TopicByID(id)
	}
	return m.Topic(name)
}

// splitTopics is api.Split for the keys whose requests may name topics by
// id (byID): a topic id that names no topic is kept for the handler, which
// answers UNKNOWN_TOPIC_ID, as Kafka does before it authorizes anything —
// there is no name to authorize, and "" would be audited as a denial.
func splitTopics[T any](h Host, z *api.Authz, op acl.Operation, ts []T, byID bool, topic func(T) (string, [16]byte)) (keep, denied []T) {
	return api.Sift(ts, func(t T) (T, bool) {
		name := h.TopicName(topic(t))
		return t, (byID && name == "") || z.Ok(op, acl.ResourceTopic, name)
	})
}

// Failures of a produce that the node maps to Kafka error codes (its Code).
var (
	ErrNotEnoughReplicas = errors.New("broker: not enough in-sync replicas")
	ErrAcksAllRequired   = errors.New("broker: topic requires acks=all")
)

// ErrRemoteStorage wraps a failure to read a tiered partition's copy from
// the remote store (KAFKA_STORAGE_ERROR: retriable, and never records
// without their aborted transactions).
var ErrRemoteStorage = errors.New("partitions: remote storage")

// ErrMovedToTiered wraps storage.ErrOffsetOutOfRange for a follower's
// fetch below the leader's local log that the tiered copy holds:
// OFFSET_MOVED_TO_TIERED_STORAGE, KIP-405's signal to restart from the
// copy (movedToTiered).
var ErrMovedToTiered = errors.New("partitions: offset moved to tiered storage")

// ErrRemoteReadsFull: a consumer's remote read could not be queued
// (remote.log.reader.threads and .max.pending.tasks are taken); the
// partition is answered with Kafka's code for a refused reader task.
var ErrRemoteReadsFull = errors.New("partitions: remote reader pool full")

// errMessage is the optional error message some responses carry.
func errMessage(err error) *string {
	if err == nil {
		return nil
	}
	s := err.Error()
	return &s
}

// LeaderThrottle is the leader side of the replication throttles
// (KIP-73): a follower's fetch of a partition whose
// leader.replication.throttled.replicas lists "partition:<this broker>"
// (or is "*") is throttled. Read once per read of a fetch.
type LeaderThrottle struct {
	Quotas *quota.Replication // the node's token buckets and lists
	NodeID int32
	Rate   int64 // leader.replication.throttled.rate; 0 is no cap
}

// check decides, for a follower's fetch of partition of t led here,
// whether it is throttled and, if so, whether the leader's quota lets it
// have data now. It returns the rate to record the bytes sent at (0: not
// throttled).
func (lt *LeaderThrottle) check(t *replicamgr.Topic, partition, follower int32, v *replica.View, now time.Time) (rate int64, withhold bool) {
	listed := t != nil && lt.Quotas.Listed(t.Configs, quota.LeaderReplicas, partition, lt.NodeID)
	return lt.Quotas.Leader.Check(now, listed, slices.Contains(v.ISR, follower), lt.Rate)
}
