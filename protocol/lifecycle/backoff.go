package lifecycle

import "time"

// Backoff is a retry schedule: the wait after the first failure is
// Initial, and it doubles after each further failure in a row until it
// reaches Max. It holds no state: the caller counts failures (and resets
// its count to 0 on a success), so pure cores that take `now` use it as
// well as loops that sleep.
//
// A Max below Initial reads as Max = Initial (the wait never shrinks
// below Initial); a zero Initial means no wait at all. No caller has
// jitter: the retries it spaces go to one peer each, not a crowd.
type Backoff struct {
	Initial, Max time.Duration
}

// Delay is the wait after n failures in a row (n >= 1; n < 1 reads as 1):
// Initial·2^(n-1), at most max(Max, Initial).
func (b Backoff) Delay(n int) time.Duration {
	d := b.Initial
	if d <= 0 {
		return 0
	}
	for ; n > 1 && d < b.Max; n-- {
		if d > b.Max/2 { // the next doubling passes Max (and could overflow)
			return b.Max
		}
		d *= 2
	}
	return min(d, max(b.Max, b.Initial))
}
