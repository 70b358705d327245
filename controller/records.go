package controller

import (
	"fmt"
	"strconv"
)

// RecordType tags the body of a Record. Values are part of the log format:
// never reuse or renumber one.
type RecordType uint8

const (
	TypeRegisterBroker     RecordType = 1
	TypeFenceBroker        RecordType = 2
	TypeUnfenceBroker      RecordType = 3
	TypeUnregisterBroker   RecordType = 4
	TypeCreateTopic        RecordType = 5
	TypeCreatePartition    RecordType = 6
	TypeChangePartition    RecordType = 7
	TypeDeleteTopic        RecordType = 8
	TypeSetConfig          RecordType = 9
	TypeProducerIDs        RecordType = 10
	TypeBatch              RecordType = 11
	TypeClientQuota        RecordType = 12 // quota.go
	TypeChangeReplicas     RecordType = 13 // reassign.go
	TypeACL                RecordType = 15 // acl.go
	TypeScramCredential    RecordType = 14 // scram.go
	TypeRemoteSegment      RecordType = 16 // remote.go
	TypeRemoteSegmentState RecordType = 17 // remote.go
)

// String names the type for logs and test output.
func (t RecordType) String() string {
	switch t {
	case TypeRegisterBroker:
		return "RegisterBroker"
	case TypeFenceBroker:
		return "FenceBroker"
	case TypeUnfenceBroker:
		return "UnfenceBroker"
	case TypeUnregisterBroker:
		return "UnregisterBroker"
	case TypeCreateTopic:
		return "CreateTopic"
	case TypeCreatePartition:
		return "CreatePartition"
	case TypeChangePartition:
		return "ChangePartition"
	case TypeDeleteTopic:
		return "DeleteTopic"
	case TypeSetConfig:
		return "SetConfig"
	case TypeProducerIDs:
		return "ProducerIDs"
	case TypeBatch:
		return "Batch"
	case TypeClientQuota:
		return "ClientQuota"
	case TypeChangeReplicas:
		return "ChangeReplicas"
	case TypeACL:
		return "ACL"
	case TypeScramCredential:
		return "ScramCredential"
	case TypeRemoteSegment:
		return "RemoteSegment"
	case TypeRemoteSegmentState:
		return "RemoteSegmentState"
	}
	return "RecordType(" + strconv.Itoa(int(t)) + ")"
}

// Record is the envelope of every metadata record: a type tag (derived from
// Body) and the version of the body's schema.
//
// Version is what Decode read; Encode writes the lowest version of the
// body's type that holds the body (every type is at version 1, but a
// RemoteSegment with object checksums is at version 2). When a body's
// schema changes, its version is bumped, Decode keeps a decoder for every
// older version, and Apply sees only the current Go struct.
type Record struct {
	Version uint8
	Body    Body
}

// Body is one of the record structs below (values, not pointers). Bodies are
// immutable once proposed: nobody modifies a slice or map reachable from one.
type Body interface {
	Type() RecordType
}

// NewRecord wraps b in an envelope at the version Encode writes it at.
func NewRecord(b Body) Record { return Record{Version: bodyVersion(b), Body: b} }

// Type is the tag of r's body, 0 for an empty record.
func (r Record) Type() RecordType {
	if r.Body == nil {
		return 0
	}
	return r.Body.Type()
}

// String renders r compactly and deterministically, for logs and tests.
func (r Record) String() string {
	if r.Body == nil {
		return "<empty>"
	}
	return fmt.Sprintf("%s%+v", r.Type(), r.Body)
}

// Endpoint is one listener of a broker.
type Endpoint struct {
	Name string // listener name, e.g. "PLAINTEXT"
	Host string
	Port int32
}

// RegisterBroker registers a broker, or re-registers it after a restart (a
// new Incarnation). Applying it replaces any earlier registration of the id;
// the broker starts fenced, and its broker epoch becomes the record's log
// index.
type RegisterBroker struct {
	ID          int32
	Incarnation [16]byte // random per process start; equal on a retried registration
	Endpoints   []Endpoint
	Rack        string // "" = no rack
	// Epoch is 0 when proposed, because the log index is not yet known.
	// If non-zero, Apply checks that it equals the index.
	Epoch int64
}

// FenceBroker fences the broker: it may lead and be in an ISR no longer.
// Epoch is the broker epoch being fenced; a different current epoch means the
// record is stale and does not apply.
type FenceBroker struct {
	ID    int32
	Epoch int64
}

// UnfenceBroker lets the broker (at broker epoch Epoch) lead and join ISRs.
type UnfenceBroker struct {
	ID    int32
	Epoch int64
}

// UnregisterBroker removes a broker's registration (it stays in replica
// lists until they are reassigned).
type UnregisterBroker struct {
	ID int32
}

// CreateTopic creates an empty topic; CreatePartition records follow it.
type CreateTopic struct {
	Name    string
	ID      [16]byte // never zero
	Configs map[string]string
}

// CreatePartition adds partition Partition (which must be the topic's
// next, so partitions are always [0, n)) to the topic.
//
// Invariant: Replicas non-empty and distinct; ISR a non-empty subset of
// Replicas; Leader in ISR, or -1.
type CreatePartition struct {
	TopicID        [16]byte
	Partition      int32
	Replicas       []int32
	ISR            []int32
	Leader         int32
	LeaderEpoch    int32
	PartitionEpoch int32
}

// ChangePartition changes the ISR and/or the leader of a partition. Applying
// it always bumps PartitionEpoch, and bumps LeaderEpoch when Leader is set to
// a different value than the current leader.
type ChangePartition struct {
	TopicID   [16]byte
	Partition int32
	ISR       *[]int32 // nil = unchanged
	Leader    *int32   // nil = unchanged; -1 = no leader
}

// ChangeReplicas starts, re-targets, completes or cancels a partition
// reassignment (KIP-455): it gives the partition's whole replication state
// but the epochs. Applying it always bumps PartitionEpoch, and bumps
// LeaderEpoch when Leader differs from the current leader.
//
// A separate type rather than a version 2 of ChangePartition: replica sets
// change rarely and together, and a whole-state record is easier to check
// than optional fields; a node running older code rejects the type, which
// is right for a cluster-internal log (it could not act on it anyway).
//
// Invariant: the result satisfies Partition's invariants (Apply checks).
type ChangeReplicas struct {
	TopicID   [16]byte
	Partition int32
	Replicas  []int32
	Adding    []int32 // nil when no reassignment is in progress
	Removing  []int32
	ISR       []int32
	Leader    int32 // -1: no leader
}

// DeleteTopic deletes a topic, its partitions and its configs.
type DeleteTopic struct {
	ID [16]byte
}

// ResourceType says what a SetConfig applies to. The values are Kafka's
// ConfigResource types.
type ResourceType uint8

const (
	ResourceTopic  ResourceType = 2
	ResourceBroker ResourceType = 4
	// ResourceGroup holds a group's dynamic configs (KIP-848, KIP-932:
	// consumer.session.timeout.ms, share.auto.offset.reset, ...). Kafka's
	// ConfigResource type GROUP, kmsg's ConfigResourceTypeGroupConfig.
	ResourceGroup ResourceType = 32
)

// ConfigResource names a config holder: a topic by name, a broker by its id
// in decimal, or, with Type ResourceBroker and Name "", the cluster-wide
// broker default, or a group by its id (never "").
//
// A group's configs do not depend on the group existing: as in Kafka, they
// may be set before its first member joins, and they outlive the group
// (DeleteGroups leaves them; a group of the same id created later finds
// them).
//
// The type is explicit (the issue sketched a bare string) because "1" is a
// valid topic name as well as a broker id.
type ConfigResource struct {
	Type ResourceType
	Name string
}

// TopicResource, BrokerResource, ClusterResource and GroupResource build
// ConfigResources.
func TopicResource(name string) ConfigResource { return ConfigResource{ResourceTopic, name} }
func BrokerResource(id int32) ConfigResource {
	return ConfigResource{ResourceBroker, strconv.Itoa(int(id))}
}
func ClusterResource() ConfigResource           { return ConfigResource{ResourceBroker, ""} }
func GroupResource(group string) ConfigResource { return ConfigResource{ResourceGroup, group} }

// SetConfig sets (Value non-nil) or deletes (Value nil) one config key.
type SetConfig struct {
	Resource ConfigResource
	Key      string
	Value    *string
}

// ProducerIDs hands the block [First, First+Count) of producer ids to Broker.
// Invariant: First is the image's NextProducerID, Count > 0.
type ProducerIDs struct {
	Broker int32
	First  int64
	Count  int64
}

// Batch is several records in one log entry, applied all or nothing: Apply
// applies them in order, all at the entry's index, and if any of them does
// not apply, none does. It is how a decision that yields several records
// (a CreateTopic and its CreatePartitions) commits atomically.
//
// Invariant: Records is non-empty, holds no Batch, and holds at most one
// RegisterBroker (a broker's epoch is the index of its registration, so two
// registrations in one entry would share an epoch). Encode panics on an
// empty or nested batch; Decode rejects one; Apply rejects all three.
type Batch struct {
	Records []Record
}

// NewBatch makes one record of recs, to propose as one entry: recs[0] itself
// when there is a single record, otherwise a Batch of them. Batches in recs
// are flattened into it (applying a batch of batches would mean the same
// thing), so the result never nests. recs must not be empty (after
// flattening); it is not retained.
func NewBatch(recs []Record) Record {
	flat := make([]Record, 0, len(recs))
	for _, r := range recs {
		if b, ok := r.Body.(Batch); ok {
			flat = append(flat, b.Records...)
		} else {
			flat = append(flat, r)
		}
	}
	switch len(flat) {
	case 0:
		panic("controller: NewBatch of no records")
	case 1:
		return flat[0]
	}
	return NewRecord(Batch{Records: flat})
}

func (RegisterBroker) Type() RecordType   { return TypeRegisterBroker }
func (FenceBroker) Type() RecordType      { return TypeFenceBroker }
func (UnfenceBroker) Type() RecordType    { return TypeUnfenceBroker }
func (UnregisterBroker) Type() RecordType { return TypeUnregisterBroker }
func (CreateTopic) Type() RecordType      { return TypeCreateTopic }
func (CreatePartition) Type() RecordType  { return TypeCreatePartition }
func (ChangePartition) Type() RecordType  { return TypeChangePartition }
func (DeleteTopic) Type() RecordType      { return TypeDeleteTopic }
func (SetConfig) Type() RecordType        { return TypeSetConfig }
func (ProducerIDs) Type() RecordType      { return TypeProducerIDs }
func (Batch) Type() RecordType            { return TypeBatch }
func (ChangeReplicas) Type() RecordType   { return TypeChangeReplicas }

// String shows the pointers of a ChangePartition by value.
func (c ChangePartition) String() string {
	s := fmt.Sprintf("{TopicID:%x Partition:%d", c.TopicID[:4], c.Partition)
	if c.ISR != nil {
		s += fmt.Sprintf(" ISR:%v", *c.ISR)
	}
	if c.Leader != nil {
		s += fmt.Sprintf(" Leader:%d", *c.Leader)
	}
	return s + "}"
}

// String shows the value of a SetConfig by value.
func (c SetConfig) String() string {
	v := "<delete>"
	if c.Value != nil {
		v = strconv.Quote(*c.Value)
	}
	return fmt.Sprintf("{Resource:%d/%q Key:%q Value:%s}", c.Resource.Type, c.Resource.Name, c.Key, v)
}
