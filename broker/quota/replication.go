package quota

import (
	"math"
	"sync"
	"time"
)

// Replication throttles (Kafka's replication quotas, KIP-73) keep a
// partition move from starving the brokers' other traffic. A leader sends
// the followers of its listed partitions that are out of the ISR at most
// leader.replication.throttled.rate bytes per second, summed over all of
// them; a follower out of the ISR fetches its listed partitions at most
// follower.replication.throttled.rate bytes per second. A replica in the
// ISR is never throttled: holding it back would hold back the high
// watermark, and so every acks=all producer.
//
// Each side's quota is a token bucket holding at most one second of
// bytes: what is sent beyond the rate waits until time pays it back. A
// response may overshoot by one fetch (the bucket goes negative and the
// debt is paid before the next one), which is how Kafka's quota behaves
// too. A rate of 0 or Long.MAX_VALUE is no cap.

// Bucket is a token bucket of bytes. Not safe for concurrent use
// (Throttle guards one).
//
// Invariant: avail <= rate once filled (one second of bytes at most);
// last is zero until the first fill.
type Bucket struct {
	rate  int64     // bytes/s the bucket was last filled at
	avail float64   // bytes that may go now; negative: debt
	last  time.Time // when avail was last brought up to date
}

// uncapped reports whether rate puts no cap on replication.
func uncapped(rate int64) bool { return rate <= 0 || rate == math.MaxInt64 }

// Exceeded reports whether the quota at rate (bytes/s) is spent at now.
func (b *Bucket) Exceeded(now time.Time, rate int64) bool {
	if uncapped(rate) {
		return false
	}
	b.refill(now, rate)
	return b.avail <= 0
}

// Record counts n bytes sent (or fetched) at now under the quota at rate.
func (b *Bucket) Record(now time.Time, rate int64, n int) {
	if uncapped(rate) || n <= 0 {
		return
	}
	b.refill(now, rate)
	b.avail -= float64(n)
}

func (b *Bucket) refill(now time.Time, rate int64) {
	if b.last.IsZero() || rate != b.rate {
		// A new rate starts with a full second of it (and forgives debt
		// run up at another rate).
		b.rate, b.avail, b.last = rate, float64(rate), now
		return
	}
	if el := now.Sub(b.last).Seconds(); el > 0 {
		b.avail = min(b.avail+el*float64(rate), float64(rate))
	}
	b.last = now
}

// Throttle is one side's replication quota, shared by the fetches of all
// its throttled partitions: a Bucket under a leaf mutex.
type Throttle struct {
	mu struct {
		sync.Mutex
		b Bucket
	}
}

// Check decides a fetch for a replica under this throttle at now: it is
// throttled when its partition is listed for it, it is out of the ISR and
// rate caps replication. It returns the rate to Record the bytes at (0:
// not throttled) and, when throttled, whether the quota is spent, so the
// fetch gets no data now.
func (t *Throttle) Check(now time.Time, listed, inISR bool, rate int64) (recordAt int64, withhold bool) {
	if !listed || inISR || uncapped(rate) {
		return 0, false
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return rate, t.mu.b.Exceeded(now, rate)
}

// Record counts n bytes of a throttled fetch at the rate Check returned.
func (t *Throttle) Record(now time.Time, rate int64, n int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.mu.b.Record(now, rate, n)
}

// Replication is a broker's two replication throttles and the
// throttled-replica lists it has parsed.
type Replication struct {
	Leader, Follower Throttle
	Lists
}
