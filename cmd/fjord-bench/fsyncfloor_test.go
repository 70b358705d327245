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

// The group floor completes every append once, through one of its
// files' fdatasyncs, and leaves nothing behind.
func TestFsyncFloorGroup(t *testing.T) {
	dir := t.TempDir()
	for _, copies := range []int{1, 3} {
		// Every record counts once, when the last of its copies is covered.
		f, err := fsyncFloorGroup(t.Context(), dir, 3, copies, 300, 100*time.Millisecond)
		if err != nil {
			t.Fatal(err)
		}
		if f.Samples != 30 || f.Logs != 3 || f.Copies != copies || f.Dir != dir || f.TargetRate != 300 || f.Written {
			t.Fatalf("got %+v, want 30 samples over 3 logs of %d copies in %s at 300/s, fallocated", f, copies, dir)
		}
		if !(f.P50Ms > 0 && f.P50Ms <= f.P99Ms && f.P99Ms <= f.P999Ms && f.P999Ms <= f.MaxMs) || f.AchievedRate <= 0 {
			t.Fatalf("percentiles out of order or missing: %+v", f)
		}
		if left, _ := filepath.Glob(filepath.Join(dir, "*")); len(left) != 0 {
			t.Fatalf("left behind: %v", left)
		}
	}
	if _, err := fsyncFloorGroup(t.Context(), dir, 0, 1, 300, 10*time.Millisecond); err == nil {
		t.Fatal("no logs: accepted")
	}
	if _, err := fsyncFloorGroup(t.Context(), dir, 2, 0, 300, 10*time.Millisecond); err == nil {
		t.Fatal("no copies: accepted")
	}
	if _, err := fsyncFloorGroup(t.Context(), filepath.Join(dir, "missing"), 2, 1, 300, 10*time.Millisecond); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a missing data dir: %v, want a not-exist error", err)
	}
}
