package main

import (
	"errors"
	"io/fs"
	"path/filepath"
	"runtime"
	"testing"
	"time"
)

func TestWindowFloor(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("syncfs is Linux's")
	}
	dir := t.TempDir()
	f, err := windowFloor(t.Context(), dir, 5, 50, 100, 16<<20, 300*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if f.Files != 5 || f.Window != 50 || f.RecordBytes != 100 || f.Dir != dir {
		t.Fatalf("got %+v, want 5 files, window 50, 100 B records in %s", f, dir)
	}
	if !(f.RecordsPerSec > 0 && f.Syncs > 0 && f.SyncMeanMs > 0 && f.Seconds > 0) {
		t.Fatalf("got %+v, want records acknowledged by timed syncs", f)
	}
	// One syncfs covers at most the window.
	if f.RecordsPerSync > float64(f.Window) {
		t.Fatalf("%.1f records a syncfs, more than the window of %d", f.RecordsPerSync, f.Window)
	}
	if left, _ := filepath.Glob(filepath.Join(dir, "*")); len(left) != 0 {
		t.Fatalf("left behind: %v", left)
	}
	if _, err := windowFloor(t.Context(), dir, 0, 1, 1, 1, time.Second); err == nil {
		t.Fatal("no files: accepted")
	}
	if _, err := windowFloor(t.Context(), filepath.Join(dir, "missing"), 2, 10, 10, 100, time.Second); err == nil || !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("a missing data dir: %v, want a not-exist error", err)
	}
}

// TestWindowFloorFull: files too small for the run end it early, without
// growing them; a run that ended in its warm-up reports why it has no
// figure instead of one.
func TestWindowFloorFull(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("syncfs is Linux's")
	}
	dir := t.TempDir()
	start := time.Now()
	_, err := windowFloor(t.Context(), dir, 2, 4, 100, 400, 5*time.Second)
	if d := time.Since(start); d > 3*time.Second {
		t.Fatalf("full files did not end the run: %v", d)
	}
	if err == nil {
		t.Fatal("a run that ended in its warm-up reported a figure")
	}
}
