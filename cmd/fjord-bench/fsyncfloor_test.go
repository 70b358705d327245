package main

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// The floor takes one sample per append, at most rate × duration of them,
// for either preallocation, and leaves no file behind in the data
// directory.
func TestFsyncFloor(t *testing.T) {
	dir := t.TempDir()
	for _, written := range []bool{false, true} {
		f, err := fsyncFloor(t.Context(), dir, 200, 100*time.Millisecond, written)
		if err != nil {
			t.Fatal(err)
		}
		if f.Samples != 20 || f.Dir != dir || f.TargetRate != 200 || f.Written != written {
			t.Fatalf("got %+v, want 20 samples in %s at 200/s, written %v", f, dir, written)
		}
		if !(f.P50Ms > 0 && f.P50Ms <= f.P99Ms && f.P99Ms <= f.P999Ms && f.P999Ms <= f.MaxMs) || f.AchievedRate <= 0 {
			t.Fatalf("percentiles out of order or missing: %+v", f)
		}
		if left, _ := filepath.Glob(filepath.Join(dir, "*")); len(left) != 0 {
			t.Fatalf("left behind: %v", left)
		}
	}
	if _, err := fsyncFloor(t.Context(), filepath.Join(dir, "missing"), 200, 10*time.Millisecond, false); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a missing data dir: %v, want a not-exist error", err)
	}
}
