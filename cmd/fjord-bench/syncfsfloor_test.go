package main

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"testing"
)

func TestSyncfsFloor(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("syncfs is Linux's")
	}
	dir := t.TempDir()
	f, err := syncfsFloor(t.Context(), dir, 5, 1104, 3)
	if err != nil {
		t.Fatal(err)
	}
	if f.Files != 5 || f.BytesPerFile != 1104 || f.Rounds != 3 || f.Dir != dir || !(f.P50Ms > 0 && f.P50Ms <= f.MaxMs) {
		t.Fatalf("got %+v, want 3 rounds over 5 files of 1104 B in %s, p50 ≤ max", f, dir)
	}
	if left, _ := filepath.Glob(filepath.Join(dir, "*")); len(left) != 0 {
		t.Fatalf("left behind: %v", left)
	}
	if _, err := syncfsFloor(t.Context(), dir, 0, 1, 1); err == nil {
		t.Fatal("no files: accepted")
	}
	if _, err := syncfsFloor(t.Context(), filepath.Join(dir, "missing"), 2, 1, 1); !os.IsNotExist(errors.Unwrap(err)) {
		t.Fatalf("a missing data dir: %v, want a not-exist error", err)
	}
}
