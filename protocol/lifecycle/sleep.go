package lifecycle

import (
	"context"
	"time"
)

// Sleep pauses for d, or less if ctx ends first. It reports whether the
// whole pause passed: false means ctx ended (the caller's loop should
// stop). A d <= 0 does not pause; it reports whether ctx is still live.
func Sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
