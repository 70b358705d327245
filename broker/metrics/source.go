package metrics

import (
	"github.com/fjordlog/fjord/controller"
	"github.com/fjordlog/fjord/storage"
)

// Source is what the collectors read of their node, at scrape time and
// (TopicName) when a fetch is counted. The broker implements it from its
// published state: the topics map, the replicas' views and atomics, the
// coordinator's tables and the metadata image. Every method returns
// values or a snapshot built at the call; none holds a lock of the node
// once it returns, and none blocks on another goroutine.
type Source interface {
	// Topics returns the topics of the image the node's replicas were
	// last matched to, by name, each with this node's replicas of it, in
	// no order (an empty or nil slice where it holds none). The caller
	// owns the map and the slices; the Replicas, ISR and Removing slices
	// of each Partition are the replica's published view, shared and
	// read-only.
	Topics() map[string][]Partition
	// UnderReplicated is how many partitions this node leads whose ISR
	// is smaller than their replica set, as of the ISR loop's last pass.
	UnderReplicated() int64
	// FileCache returns the counters of the node's log file cache.
	FileCache() storage.FileCacheStats
	// IndexCache returns the figures of the node's cache of sealed
	// segments' indexes.
	IndexCache() storage.IndexCacheStats
	// Groups returns the groups this node coordinates with their
	// offsets loaded, in no order; nil when it runs no coordinator. The
	// caller owns the slice and what it holds.
	Groups() []Group
	// Controller returns the metadata image and true when this node is
	// the active controller (img may still be nil before its first
	// image), else nil and false. The image is immutable.
	Controller() (img *controller.Image, active bool)
	// BrokerAddress is the host:port clients reach broker bs at, as
	// Metadata answers it on this node's first client listener.
	BrokerAddress(img *controller.Image, bs controller.BrokerState) string
	// TopicName resolves a topic id of the image (Fetch v13 and later
	// name topics by id only); false when the image has no such topic.
	// It is called on the fetch path, so it must be a map lookup.
	TopicName(id [16]byte) (string, bool)
}

// Partition is one of this node's partition replicas as a scrape reads
// it: its published view, and its log's figures when the log is open.
type Partition struct {
	Index int32
	// Leads: the replica is the leader (leading or resigning), so it
	// exports the partition's series.
	Leads  bool
	Leader int32 // the leader's broker id; -1 for none
	// Replicas, ISR and Removing are the view's (Removing: the replicas
	// a move takes away). Shared and read-only.
	Replicas, ISR, Removing []int32
	// HasLog: the log is open. The figures below are 0 otherwise.
	HasLog bool
	HW     int64 // the high watermark
	// LogStart and LogEnd are the log's first offset and its end (next
	// offset to write), so [LogStart, LogEnd) is stored here.
	LogStart, LogEnd int64
	LogBytes         int64 // bytes in the log's segments
	// Storage is the state of the disk under the replica: "" when fine,
	// else StorageFull, StorageFailed or StorageStalled.
	Storage string
}

// The replica storage states (replica.StorageState's values).
const (
	StorageFull    = "full"
	StorageFailed  = "failed"
	StorageStalled = "stalled"
)

// Group is a consumer group this node coordinates.
type Group struct {
	ID      string
	Members int
	// Offsets are its committed offsets, by partition; a negative offset
	// (none committed) is skipped.
	Offsets []GroupOffset
}

// GroupOffset is a group's committed offset for one partition.
type GroupOffset struct {
	TopicPartition
	Offset int64
}

// TopicPartition names a partition.
type TopicPartition struct {
	Topic     string
	Partition int32
}
