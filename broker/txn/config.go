package txn

import (
	"errors"
	"fmt"
	"time"

	"github.com/fjordlog/fjord/protocol/lifecycle"
)

// Config holds the coordinator settings. Field names follow Kafka's broker
// properties where there is one. A zero field takes its default (see
// DefaultConfig); LegacyValues is a plain switch.
type Config struct {
	// MaxTimeoutMs is transaction.max.timeout.ms: an InitProducerId asking
	// for a longer transaction timeout gets INVALID_TRANSACTION_TIMEOUT.
	// Default 900000 (15 minutes). Range: >= 1.
	MaxTimeoutMs int32

	// IDExpirationMs is transactional.id.expiration.ms: an id in Empty,
	// CompleteCommit or CompleteAbort that has not been updated for this
	// long is removed (a tombstone is written). Default 604800000 (7 days).
	// Range: >= 1.
	IDExpirationMs int64

	// LegacyValues writes TxnMetadataValue version 0 (for a cluster whose
	// transaction.version feature is 0, as Kafka does) instead of version 1.
	// Version 0 cannot hold the previous and next producer ids or the
	// client's transaction version, so with it an EndTxn v5 retry that
	// spans a coordinator failover may be answered PRODUCER_FENCED.
	// Default false (version 1, Kafka 4.0's format at transaction.version
	// >= 1).
	LegacyValues bool

	// MarkerTimeoutMs bounds a marker sent and not reported (the broker's
	// request.timeout.ms for WriteTxnMarkers): past it, it counts as
	// failed and is sent again. Default 30000. Range: >= 1.
	MarkerTimeoutMs int64

	// MarkerBackoff spaces the retries of a partition's marker after it
	// failed. The coordinator never gives up on a marker; the backoff caps
	// the rate. Default 100 ms doubling to 5000 ms. Range: 1 ms <=
	// Initial <= Max (the table counts whole milliseconds).
	MarkerBackoff lifecycle.Backoff

	// WriteBackoff spaces the retries of the coordinator's own records
	// (a timeout abort, a Complete*, an expiration tombstone) after a write
	// failed, and of asks for producer ids. Default 100 ms doubling to
	// 5000 ms. Range as MarkerBackoff's.
	WriteBackoff lifecycle.Backoff
}

// retryIn is the wait in milliseconds after n failures in a row under b
// (n >= 1), the table's unit of time.
func retryIn(b lifecycle.Backoff, n int) int64 { return b.Delay(n).Milliseconds() }

// DefaultConfig returns Kafka's defaults (and Fjord's for the retries).
func DefaultConfig() Config {
	return Config{
		MaxTimeoutMs:    900000,
		IDExpirationMs:  7 * 24 * 3600 * 1000,
		MarkerTimeoutMs: 30000,
		MarkerBackoff:   lifecycle.Backoff{Initial: 100 * time.Millisecond, Max: 5 * time.Second},
		WriteBackoff:    lifecycle.Backoff{Initial: 100 * time.Millisecond, Max: 5 * time.Second},
	}
}

func (c Config) withDefaults() Config {
	d := DefaultConfig()
	if c.MaxTimeoutMs == 0 {
		c.MaxTimeoutMs = d.MaxTimeoutMs
	}
	if c.IDExpirationMs == 0 {
		c.IDExpirationMs = d.IDExpirationMs
	}
	if c.MarkerTimeoutMs == 0 {
		c.MarkerTimeoutMs = d.MarkerTimeoutMs
	}
	if c.MarkerBackoff == (lifecycle.Backoff{}) {
		c.MarkerBackoff = d.MarkerBackoff
	}
	if c.WriteBackoff == (lifecycle.Backoff{}) {
		c.WriteBackoff = d.WriteBackoff
	}
	return c
}

// Validate reports every setting that cannot work, after defaults. NewTable
// panics on a Config that fails it.
func (c Config) Validate() error {
	c = c.withDefaults()
	var errs []error
	if c.MaxTimeoutMs < 1 {
		errs = append(errs, fmt.Errorf("txn: transaction.max.timeout.ms %d: must be >= 1", c.MaxTimeoutMs))
	}
	if c.IDExpirationMs < 1 {
		errs = append(errs, fmt.Errorf("txn: transactional.id.expiration.ms %d: must be >= 1", c.IDExpirationMs))
	}
	if c.MarkerTimeoutMs < 1 {
		errs = append(errs, fmt.Errorf("txn: marker timeout %d ms: must be >= 1", c.MarkerTimeoutMs))
	}
	for _, b := range []struct {
		name string
		b    lifecycle.Backoff
	}{{"marker", c.MarkerBackoff}, {"write", c.WriteBackoff}} {
		if b.b.Initial < time.Millisecond || b.b.Max < b.b.Initial {
			errs = append(errs, fmt.Errorf("txn: %s backoff %v..%v: want 1ms <= initial <= max", b.name, b.b.Initial, b.b.Max))
		}
	}
	return errors.Join(errs...)
}
