package sharecoord

import (
	"errors"
	"fmt"
	"strconv"

	"github.com/rs/zerolog"
)

// Topic is Kafka's internal topic of share-partition state.
const Topic = "__share_group_state"

// Config is the share coordinator's configuration; the broker fills it from
// its own (Kafka's property names are given). DefaultConfig has Kafka 4.2's
// defaults.
type Config struct {
	// StatePartitions (share.coordinator.state.topic.num.partitions) is
	// the partition count the state topic is created with. It must not
	// change once the topic exists: placement hashes over it. Range: >= 1.
	StatePartitions int32
	// StateReplication (share.coordinator.state.topic.replication.factor)
	// is its replication factor, capped by the broker at the number of
	// voters, as for the offsets topic. Range: >= 1.
	StateReplication int16
	// StateMinISR (share.coordinator.state.topic.min.isr) is its
	// min.insync.replicas, capped at the replication factor. Range: >= 1.
	StateMinISR int16
	// SegmentBytes (share.coordinator.state.topic.segment.bytes).
	// Range: >= 1.
	SegmentBytes int32
	// SnapshotUpdateRecordsPerSnapshot
	// (share.coordinator.snapshot.update.records.per.snapshot) is how many
	// ShareUpdate records a key gets between two ShareSnapshot records;
	// it bounds what a load replays per key. 0 makes every write a
	// snapshot. Range: [0, 500], as Kafka's.
	SnapshotUpdateRecordsPerSnapshot int32
	// WriteTimeoutMs (share.coordinator.write.timeout.ms) bounds how long
	// a write waits for the state partition's in-sync replicas before it
	// is answered COORDINATOR_NOT_AVAILABLE (the caller retries).
	// Range: >= 1.
	WriteTimeoutMs int32
	// PruneIntervalMs (share.coordinator.state.topic.prune.interval.ms) is
	// how often each led state partition's log start is moved up to the
	// oldest record any live key still needs. Range: >= 1.
	PruneIntervalMs int64
	// ColdPartitionSnapshotIntervalMs
	// (share.coordinator.cold.partition.snapshot.interval.ms) is how often
	// keys whose last snapshot is older than this get a fresh one, so
	// that a quiet key does not hold the prune back forever. Range: >= 1.
	ColdPartitionSnapshotIntervalMs int64
	Logger                          zerolog.Logger
}

// DefaultConfig returns Kafka 4.2's defaults and a disabled logger.
func DefaultConfig() Config {
	return Config{
		StatePartitions:                  50,
		StateReplication:                 3,
		StateMinISR:                      2,
		SegmentBytes:                     100 << 20,
		SnapshotUpdateRecordsPerSnapshot: 500,
		WriteTimeoutMs:                   5000,
		PruneIntervalMs:                  300_000,
		ColdPartitionSnapshotIntervalMs:  300_000,
		Logger:                           zerolog.Nop(),
	}
}

// Validate reports every setting that cannot work.
func (c Config) Validate() error {
	var errs []error
	check := func(ok bool, name string, v any, want string) {
		if !ok {
			errs = append(errs, fmt.Errorf("sharecoord: %s %v: must be %s", name, v, want))
		}
	}
	check(c.StatePartitions >= 1, "share.coordinator.state.topic.num.partitions", c.StatePartitions, ">= 1")
	check(c.StateReplication >= 1, "share.coordinator.state.topic.replication.factor", c.StateReplication, ">= 1")
	check(c.StateMinISR >= 1, "share.coordinator.state.topic.min.isr", c.StateMinISR, ">= 1")
	check(c.SegmentBytes >= 1, "share.coordinator.state.topic.segment.bytes", c.SegmentBytes, ">= 1")
	check(c.SnapshotUpdateRecordsPerSnapshot >= 0 && c.SnapshotUpdateRecordsPerSnapshot <= 500,
		"share.coordinator.snapshot.update.records.per.snapshot", c.SnapshotUpdateRecordsPerSnapshot, "in [0, 500]")
	check(c.WriteTimeoutMs >= 1, "share.coordinator.write.timeout.ms", c.WriteTimeoutMs, ">= 1")
	check(c.PruneIntervalMs >= 1, "share.coordinator.state.topic.prune.interval.ms", c.PruneIntervalMs, ">= 1")
	check(c.ColdPartitionSnapshotIntervalMs >= 1, "share.coordinator.cold.partition.snapshot.interval.ms",
		c.ColdPartitionSnapshotIntervalMs, ">= 1")
	return errors.Join(errs...)
}

// TopicConfigs are the state topic's configs, for the broker to create it
// with (as Kafka's ShareCoordinatorService.shareGroupStateTopicConfigs).
//
// Not compacted: a ShareUpdate is a delta on the snapshot before it, so
// keeping only each key's latest record would lose state. Records are
// deleted instead by moving the log start (the prune, see prune.go), never
// by time (retention.ms=-1) or size.
func TopicConfigs(c Config) map[string]string {
	return map[string]string{
		"cleanup.policy":      "delete",
		"retention.ms":        "-1",
		"retention.bytes":     "-1",
		"compression.type":    "producer",
		"segment.bytes":       strconv.Itoa(int(c.SegmentBytes)),
		"min.insync.replicas": strconv.Itoa(int(c.StateMinISR)),
	}
}
