package quota

import "math"

// Kafka's quota measurement (KIP-13, KIP-219): a rate is Kafka's Rate over
// a SampledStat, Samples samples each WindowMs long. A value goes into the
// current sample, which is replaced by a fresh one once it is a window
// old; a sample older than all the windows together counts as empty. The
// measured rate is the sum of the samples over the elapsed time since the
// oldest sample began, never taken as less than Samples-1 whole windows,
// so a client's first burst is spread over ten seconds, not over the
// milliseconds it took.

// Kafka's defaults: quota.window.num=11, quota.window.size.seconds=1.
const (
	Samples  = 11
	WindowMs = 1000
)

// sample is one window: the values recorded from start on.
type sample struct {
	start int64 // ms
	value float64
}

// rate is one sensor's measurement. Not safe for concurrent use.
//
// Invariant: len(samples) <= Samples; current indexes the sample being
// filled when samples is non-empty.
type rate struct {
	samples []sample
	current int
}

// record adds v at now (v < 0 takes back an earlier record, as Kafka's
// unrecord does for a throttled fetch that sends nothing).
func (r *rate) record(v float64, now int64) {
	if len(r.samples) == 0 {
		r.samples = append(r.samples, sample{start: now})
		r.current = 0
	}
	if s := &r.samples[r.current]; now-s.start >= WindowMs {
		r.current = (r.current + 1) % Samples
		if r.current >= len(r.samples) {
			r.samples = append(r.samples, sample{start: now})
		} else {
			r.samples[r.current] = sample{start: now}
		}
	}
	r.samples[r.current].value += v
}

// purge empties the samples too old to count at now, restarting them at
// now as Kafka does.
func (r *rate) purge(now int64) {
	for i := range r.samples {
		if now-r.samples[i].start >= Samples*WindowMs {
			r.samples[i] = sample{start: now}
		}
	}
}

// measure returns the rate per second at now and the window it was taken
// over, in ms. It purges first, as Kafka's measure does.
func (r *rate) measure(now int64) (perSec float64, windowMs int64) {
	r.purge(now)
	total := 0.0
	oldest := now
	for _, s := range r.samples {
		total += s.value
		oldest = min(oldest, s.start)
	}
	elapsed := now - oldest
	if full := elapsed / WindowMs; full < Samples-1 {
		elapsed += (Samples - 1 - full) * WindowMs
	}
	windowMs = max(elapsed, 1)
	return total / (float64(windowMs) / 1000), windowMs
}

// idle reports whether every sample has expired at now: dropping the
// sensor then loses nothing.
func (r *rate) idle(now int64) bool {
	for _, s := range r.samples {
		if now-s.start < Samples*WindowMs && s.value != 0 {
			return false
		}
	}
	return true
}

// throttleMs is the delay that brings an observed rate back to the bound
// if nothing more is recorded: with O observed over a window W, waiting X
// gives O·W/(W+X) = T, so X = (O−T)/T·W (Kafka's QuotaUtils.throttleTime).
// Zero when the rate is within the bound.
func throttleMs(observed, bound float64, windowMs int64) int64 {
	if observed <= bound || bound <= 0 {
		return 0
	}
	x := (observed - bound) / bound * float64(windowMs)
	if x > math.MaxInt32 {
		return math.MaxInt32
	}
	return int64(math.Round(x))
}

// MaxInWindow is the most a client may take in one go without breaking
// its byte-rate bound: the bound over Samples-1 windows. Kafka caps a
// consumer fetch's max bytes by it, so one response cannot exceed the
// whole window.
func MaxInWindow(bound float64) float64 {
	return bound * (Samples - 1) * WindowMs / 1000
}
