package console

import (
	"time"

	"github.com/fjordlog/fjord/group"
	"github.com/fjordlog/fjord/protocol"
)

// Source is what the console reads of its node. Every method returns
// copies the console owns, built from the node's published state (the
// metadata image, the replicas' views, the coordinator's tables) without
// holding the node's locks across anything slow; Tail alone reads a log.
type Source interface {
	// Identity is the cluster id and this node's id, for every page.
	Identity() (clusterID string, nodeID int32)
	// Cluster lists at most MaxPartitionsListed under-replicated and
	// offline partitions each, with their counts.
	Cluster() Cluster
	// Topics lists at most limit topics of the metadata image by name,
	// internal ones only when internal is set, with how many match and how
	// many internal ones were left out.
	Topics(limit int, internal bool) (list []TopicSummary, total, hidden int)
	// Topic is one topic with its configs; false when it does not exist.
	Topic(name string) (Topic, bool)
	// Tail reads the last records of this node's replica of a partition,
	// within the limits given.
	Tail(topic string, partition int32, lim TailLimits) (Tail, error)
	// Groups lists at most limit of the groups this node coordinates, by
	// id, and how many it coordinates.
	Groups(limit int) ([]GroupSummary, int)
	// Group describes one; false when this node does not know it.
	Group(id string) (Group, bool)
	// Clients returns at most limit of the open client connections, and
	// how many are open.
	Clients(limit int) ([]protocol.ClientInfo, int)
}

// Cluster is the cluster as this node's metadata image has it.
type Cluster struct {
	ClusterID string
	NodeID    int32  // the node serving the console
	Roles     string // its process.roles
	// Controller is the active controller (the metadata quorum's leader)
	// as this node knows it; -1 when unknown.
	Controller      int32
	MetadataVersion uint64 // the image's version (its last log index)
	Brokers         []Broker
	Voters          []Voter
	Topics          int
	Partitions      int
	// UnderReplicated and Offline are the first MaxPartitionsListed of
	// UnderReplicatedCount and OfflineCount.
	UnderReplicated      []PartitionRef
	Offline              []PartitionRef
	UnderReplicatedCount int
	OfflineCount         int
	// SickDisk lists this node's replicas whose disk is in trouble (at
	// most MaxPartitionsListed), SickDiskCount how many there are.
	SickDisk      []DiskProblem
	SickDiskCount int
	// Remote is this node's tiered-storage uploads; nil when the node
	// has no remote store.
	Remote *RemoteHealth
}

// RemoteHealth is a node's remote log manager as an operator needs it
// (broker/tier.Health): whether uploads fail and why, and what waits.
type RemoteHealth struct {
	// Failing is the latest failure's kind while any partition's uploads
	// fail ("unavailable", "access_denied", "no_bucket", ...); "" when
	// they work. LastError is its text.
	Failing           string
	FailingPartitions int
	LastError         string
	// Waiting partitions have PendingSegments (PendingBytes) sealed
	// segments not yet copied, the oldest waiting OldestPending.
	Waiting         int
	PendingSegments int
	PendingBytes    int64
	OldestPending   time.Duration
}

// DiskProblem is a local replica whose disk is full, failed or stalled
// (replica.StorageState).
type DiskProblem struct {
	Topic     string
	Partition int32
	State     string
}

// Broker is a registered broker.
type Broker struct {
	ID        int32
	Endpoints []string // "NAME host:port"
	Rack      string
	Fenced    bool
	Epoch     int64
}

// Voter is a member of the metadata quorum (controller.quorum.voters).
type Voter struct {
	ID   int32
	Addr string
}

// PartitionRef names a partition with its replication state.
type PartitionRef struct {
	Topic     string
	Partition int32
	Leader    int32
	Replicas  []int32
	ISR       []int32
}

// TopicSummary is a topic in the list, its partitions counted.
type TopicSummary struct {
	Name            string
	Internal        bool
	Partitions      int
	RF              int // replicas per partition (a move's leaving ones not counted)
	UnderReplicated int
	Offline         int
	Local           int   // partitions with a replica on this node
	Bytes           int64 // in those replicas
}

// Topic is a topic with its partitions.
type Topic struct {
	Name       string
	ID         string
	Internal   bool
	Partitions []Partition
	Configs    []Config // topic-level overrides, by name
}

// Config is one config override.
type Config struct {
	Name, Value string
	Sensitive   bool // the value is not shown
}

// Partition is one partition: its replication state from the image and,
// when this node holds a replica, the replica's offsets and size.
type Partition struct {
	Index       int32
	Leader      int32
	LeaderEpoch int32
	Replicas    []int32
	ISR         []int32
	Adding      []int32
	Removing    []int32
	// Local: this node holds a replica, and the fields below are its.
	Local      bool
	LocalLeads bool
	LogStart   int64
	HighWater  int64
	LogEnd     int64
	Bytes      int64
	// Storage is the local replica's disk state ("" when fine: full,
	// failed or stalled otherwise), whether its log is open or not.
	Storage string
	// Remote: a tiered partition with copied segments (from the image, on
	// every node): the offsets [RemoteStart, RemoteEnd] and RemoteBytes
	// are in the remote store.
	Remote      bool
	RemoteStart int64
	RemoteEnd   int64
	RemoteBytes int64
}

// UnderReplicated reports whether the ISR is smaller than the replica set
// (those a move removes not counted). (NodeSource's underReplicated is the
// same test on its image's partitions.)
func (p Partition) UnderReplicated() bool {
	return len(p.ISR) < len(p.Replicas)-len(p.Removing)
}

// TailLimits bound what one tail reads and returns.
type TailLimits struct {
	Records    int // records returned, the newest
	ValueBytes int // bytes kept of each key, value and header value
	ReadBytes  int // log bytes read in all
}

// Tail is the end of one partition's log, up to its high watermark.
type Tail struct {
	Topic     string
	Partition int32
	LogStart  int64
	HighWater int64
	Leader    int32
	Local     bool // false: this node holds no replica; Records is empty
	Records   []Record
	// Short: the read budget ran out before Records were found.
	Short bool
	// Remote: offsets [RemoteStart, RemoteEnd], RemoteBytes of them, are
	// in the remote store (tiered storage; from the image).
	Remote      bool
	RemoteStart int64
	RemoteEnd   int64
	RemoteBytes int64
}

// Record is one record, its bytes clipped to TailLimits.ValueBytes.
type Record struct {
	Offset    int64
	Timestamp time.Time
	Key       Bytes
	Value     Bytes
	Headers   []Header
}

// Header is a record header.
type Header struct {
	Key   string
	Value Bytes
}

// Bytes is a clipped byte string: Data holds at most the limit's bytes of
// Len; Null is a null key or value.
type Bytes struct {
	Data []byte
	Len  int
	Null bool
}

// Clip returns b as a Bytes clipped to n bytes (copied).
func Clip(b []byte, n int) Bytes {
	if b == nil {
		return Bytes{Null: true}
	}
	return Bytes{Data: append([]byte(nil), b[:min(len(b), n)]...), Len: len(b)}
}

// GroupSummary is one group in the list.
type GroupSummary struct {
	ID, State, ProtocolType string
	Members                 int
	Generation              int32
	Lag                     int64 // summed over the partitions whose lag is known (GroupOffset)
	LagKnown                bool
}

// Group is one group in detail.
type Group struct {
	ID, State, ProtocolType, Protocol string
	Generation                        int32
	Leader                            string
	Members                           []Member
	Offsets                           []GroupOffset
	Timeline                          []group.Rebalance // oldest first
}

// Member is a group member.
type Member struct {
	ID, InstanceID, ClientID, Host string
	// Assigned are its partitions by topic, decoded from the consumer
	// protocol's assignment (nil when the group is not Stable or the
	// protocol is not the consumer's).
	Assigned map[string][]int32
}

// GroupOffset is one partition of the group's lag (package lag): every
// partition of the topics its members subscribe to or are assigned, and
// every partition it committed to, whether committed or not.
type GroupOffset struct {
	Topic     string
	Partition int32
	Committed int64 // -1: no commit (the lag is then every record the log holds)
	HighWater int64
	Lag       int64
	LagKnown  bool   // this node holds a replica of the partition
	Member    string // the member assigned the partition, "" when none
}
