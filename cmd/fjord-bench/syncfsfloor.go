package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"
)

// The 1,000-partition floor: what the disk alone takes to make one produce
// request's appends to many partitions durable, the way fjord's group
// flush does it (one syncfs of the file system), measured in the same run
// in fjord's data directory. fjord's own group flush of such a request
// (p1000_flush_ms) can be read against it, and the records one syncfs
// covers over its time bound what a broker that makes each request
// durable before acking it gets at that request shape.

// syncfsFloorBatches is how many one-record batches each partition gets
// per request in the floor: fjord's requests carried about four a
// partition at 1,000 partitions on 2026-12-07 (69,508 records/s × 57.9 ms
// a request / 1,000 partitions).
const syncfsFloorBatches = 4

// syncfsFloorRounds is how many requests the floor times.
const syncfsFloorRounds = 20

// SyncfsFloor is the time of one syncfs after bytesPerFile were appended
// to each of Files fallocated files, over Rounds rounds.
type SyncfsFloor struct {
	Dir          string  `json:"dir"`
	Files        int     `json:"files"`
	BytesPerFile int     `json:"bytes_per_file"`
	Rounds       int     `json:"rounds"`
	P50Ms        float64 `json:"p50_ms"`
	MaxMs        float64 `json:"max_ms"`
}

// syncfsFloor creates files files in dir, fallocated as fjord's segments
// are, and rounds times appends bytesPerFile to each and syncfs's the file
// system once, timing the syncfs. The files are removed afterwards.
func syncfsFloor(ctx context.Context, dir string, files, bytesPerFile, rounds int) (*SyncfsFloor, error) {
	if files < 1 || bytesPerFile < 1 || rounds < 1 {
		return nil, fmt.Errorf("syncfs floor: %d files, %d bytes, %d rounds", files, bytesPerFile, rounds)
	}
	fs, cleanup, err := fallocatedFiles(dir, ".fjord-bench-syncfs-floor-", files, int64(rounds*bytesPerFile))
	if err != nil {
		return nil, fmt.Errorf("syncfs floor: %w", err)
	}
	defer cleanup()
	// The files' creation and preallocation are not what a request pays.
	if err := syncfs(fs[0]); err != nil {
		return nil, fmt.Errorf("syncfs floor: %w", err)
	}
	buf := make([]byte, bytesPerFile)
	for i := range buf {
		buf[i] = byte(i * 5)
	}
	took := make([]time.Duration, 0, rounds)
	for r := range rounds {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		for _, f := range fs {
			if _, err := f.WriteAt(buf, int64(r*bytesPerFile)); err != nil {
				return nil, fmt.Errorf("syncfs floor: %w", err)
			}
		}
		t := time.Now()
		if err := syncfs(fs[0]); err != nil {
			return nil, fmt.Errorf("syncfs floor: %w", err)
		}
		took = append(took, time.Since(t))
	}
	slices.Sort(took)
	return &SyncfsFloor{Dir: dir, Files: files, BytesPerFile: bytesPerFile, Rounds: rounds,
		P50Ms: ms(percentile(took, 0.5)), MaxMs: ms(percentile(took, 1))}, nil
}

// fallocatedFiles creates n files in a new directory under dir (its name
// starting with prefix), each preallocated to size bytes as fjord's
// segments are. cleanup closes and removes them all, the directory too.
func fallocatedFiles(dir, prefix string, n int, size int64) (files []*os.File, cleanup func(), err error) {
	sub, err := os.MkdirTemp(dir, prefix)
	if err != nil {
		return nil, nil, err
	}
	cleanup = func() {
		for _, f := range files {
			f.Close()
		}
		os.RemoveAll(sub)
	}
	files = make([]*os.File, 0, n)
	for i := range n {
		f, err := os.Create(filepath.Join(sub, fmt.Sprintf("%04d", i)))
		if err != nil {
			cleanup()
			return nil, nil, err
		}
		files = append(files, f)
		if err := preallocate(f, size); err != nil {
			cleanup()
			return nil, nil, fmt.Errorf("preallocate: %w", err)
		}
	}
	return files, cleanup, nil
}
