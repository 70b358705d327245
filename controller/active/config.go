package active

import (
	"errors"
	"fmt"
	"time"

	"github.com/rs/zerolog"
)

// Config is what the active controller decides with. It is a plain struct
// the broker fills from its own configuration (the Kafka property each field
// comes from is named); this package reads no flags or files.
type Config struct {
	// BrokerSessionTimeout is how long a broker may go without a heartbeat
	// before it is fenced (broker.session.timeout.ms). > 0.
	BrokerSessionTimeout time.Duration
	// NumPartitions and DefaultReplication are what a CreateTopics asking
	// for -1 gets (num.partitions, default.replication.factor). >= 1.
	NumPartitions      int32
	DefaultReplication int16
	// DeleteTopicEnable allows DeleteTopics (delete.topic.enable); false
	// answers TOPIC_DELETION_DISABLED.
	DeleteTopicEnable bool
	// AutoLeaderRebalance moves leaderships back to preferred replicas
	// every LeaderImbalanceCheckInterval (auto.leader.rebalance.enable,
	// leader.imbalance.check.interval.seconds; the interval is > 0 when
	// rebalancing is on).
	AutoLeaderRebalance          bool
	LeaderImbalanceCheckInterval time.Duration
	// ValidateTopicConfig checks one topic config given at creation; an
	// error makes the topic INVALID_CONFIG. nil accepts every config.
	ValidateTopicConfig func(name, value string) error
	// Logger gets role changes and decisions (Info), fencing (Warn).
	Logger zerolog.Logger
}

func (c *Config) validate() error {
	var errs []error
	if c.BrokerSessionTimeout <= 0 {
		errs = append(errs, fmt.Errorf("active: BrokerSessionTimeout %v: must be > 0", c.BrokerSessionTimeout))
	}
	if c.NumPartitions < 1 {
		errs = append(errs, fmt.Errorf("active: NumPartitions %d: must be >= 1", c.NumPartitions))
	}
	if c.DefaultReplication < 1 {
		errs = append(errs, fmt.Errorf("active: DefaultReplication %d: must be >= 1", c.DefaultReplication))
	}
	if c.AutoLeaderRebalance && c.LeaderImbalanceCheckInterval <= 0 {
		errs = append(errs, fmt.Errorf("active: LeaderImbalanceCheckInterval %v: must be > 0", c.LeaderImbalanceCheckInterval))
	}
	return errors.Join(errs...)
}
