package lifecycle

import (
	"context"
	"testing"
	"testing/synctest"
	"time"
)

func TestSleepWholePause(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		if !Sleep(t.Context(), 3*time.Second) {
			t.Error("Sleep reported false with a live context")
		}
		if got := time.Since(start); got != 3*time.Second {
			t.Errorf("slept %v, want 3s", got)
		}
	})
}

func TestSleepEndsWithContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		start := time.Now()
		time.AfterFunc(time.Second, cancel)
		if Sleep(ctx, time.Hour) {
			t.Error("Sleep reported true though its context ended")
		}
		if got := time.Since(start); got != time.Second {
			t.Errorf("Sleep returned after %v, want 1s (at the cancel)", got)
		}
		start = time.Now()
		if Sleep(ctx, time.Hour) || time.Since(start) != 0 {
			t.Error("Sleep on an ended context paused or reported true")
		}
		if Sleep(ctx, 0) {
			t.Error("Sleep(0) on an ended context reported true")
		}
		if !Sleep(t.Context(), -time.Second) || time.Since(start) != 0 {
			t.Error("Sleep(<0) on a live context paused or reported false")
		}
	})
}
