package sharepart

import (
	"errors"
	"fmt"
	"math"
)

// Config holds the settings that shape one share-partition. Field names
// follow Kafka's properties. A zero field takes its default (DefaultConfig).
//
// Kafka bounds the broker properties more tightly than this package needs
// (group.share.delivery.count.limit to [2, 10],
// group.share.partition.max.record.locks to [100, 10000],
// group.share.record.lock.duration.ms to [1000, 3600000]); checking those is
// the broker's job, so tests here can use small limits.
type Config struct {
	// RecordLockDurationMs (group.share.record.lock.duration.ms, or the
	// group's share.record.lock.duration.ms) is how long an acquired record
	// stays locked to its member before it is released for redelivery.
	// Default 30000. Range: >= 1.
	RecordLockDurationMs int32

	// DeliveryCountLimit (group.share.delivery.count.limit) is how many
	// times a record may be delivered. A record whose lock ends (release,
	// expiry, its member leaving) after that many deliveries is archived
	// instead of made available again. Default 5. Range: [1, 32766].
	DeliveryCountLimit int16

	// PartitionMaxRecordLocks (group.share.partition.max.record.locks) caps
	// the in-flight window: a fetch adds new records only while
	// EndOffset-StartOffset is below it, and never so many that more than
	// this many records would be acquired. Default 2000. Range: >= 1.
	PartitionMaxRecordLocks int32

	// SnapshotUpdateRecordsPerSnapshot
	// (share.coordinator.snapshot.update.records.per.snapshot) is how many
	// ShareUpdate records are written between two ShareSnapshot records; it
	// bounds what Restore has to replay. Default 500. Range: >= 1 (Kafka
	// allows 0, meaning every write is a snapshot).
	SnapshotUpdateRecordsPerSnapshot int32
}

// DefaultConfig returns Kafka 4.2's defaults.
func DefaultConfig() Config {
	return Config{
		RecordLockDurationMs:             30000,
		DeliveryCountLimit:               5,
		PartitionMaxRecordLocks:          2000,
		SnapshotUpdateRecordsPerSnapshot: 500,
	}
}

func (c Config) withDefaults() Config {
	d := DefaultConfig()
	if c.RecordLockDurationMs == 0 {
		c.RecordLockDurationMs = d.RecordLockDurationMs
	}
	if c.DeliveryCountLimit == 0 {
		c.DeliveryCountLimit = d.DeliveryCountLimit
	}
	if c.PartitionMaxRecordLocks == 0 {
		c.PartitionMaxRecordLocks = d.PartitionMaxRecordLocks
	}
	if c.SnapshotUpdateRecordsPerSnapshot == 0 {
		c.SnapshotUpdateRecordsPerSnapshot = d.SnapshotUpdateRecordsPerSnapshot
	}
	return c
}

// Validate reports every setting that cannot work, after defaults are
// applied. New and Restore panic on a Config that fails it.
func (c Config) Validate() error {
	c = c.withDefaults()
	var errs []error
	if c.RecordLockDurationMs < 1 {
		errs = append(errs, fmt.Errorf("sharepart: group.share.record.lock.duration.ms %d: must be >= 1", c.RecordLockDurationMs))
	}
	// The limit must leave room for one more delivery count so that the
	// count of a record acquired at the limit still fits in an int16.
	if c.DeliveryCountLimit < 1 || c.DeliveryCountLimit == math.MaxInt16 {
		errs = append(errs, fmt.Errorf("sharepart: group.share.delivery.count.limit %d: must be in [1, %d]", c.DeliveryCountLimit, math.MaxInt16-1))
	}
	if c.PartitionMaxRecordLocks < 1 {
		errs = append(errs, fmt.Errorf("sharepart: group.share.partition.max.record.locks %d: must be >= 1", c.PartitionMaxRecordLocks))
	}
	if c.SnapshotUpdateRecordsPerSnapshot < 1 {
		errs = append(errs, fmt.Errorf("sharepart: share.coordinator.snapshot.update.records.per.snapshot %d: must be >= 1", c.SnapshotUpdateRecordsPerSnapshot))
	}
	return errors.Join(errs...)
}

// throttleLimit is the delivery count from which Kafka 4.2 hands a record
// out in ever smaller batches: half the delivery limit rounded up, at
// least 2.
func (c Config) throttleLimit() int16 {
	return max(2, (c.DeliveryCountLimit+1)/2)
}
