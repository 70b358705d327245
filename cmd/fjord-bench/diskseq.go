package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// The disk's sequential bandwidth with a sync per write: the issue's
// other bound on produce throughput. A broker that fsyncs what it
// acknowledges cannot take records faster than the disk writes and syncs
// them, so the produce target is met at 1× kfake or at 0.9 of this,
// whichever is lower. It is measured in the same run, in the broker's
// data directory, as `dd bs=1M oflag=dsync` would: each 1 MiB write
// appended to a growing file and fdatasynced before the next.

// diskSeqChunk is the size of each write; diskSeqTotal how much is
// written per measurement (about a second on an SSD-backed virtual disk).
const (
	diskSeqChunk = 1 << 20
	diskSeqTotal = 512 << 20
)

// DiskSeq is one measurement of the sequential bandwidth.
type DiskSeq struct {
	Dir     string  `json:"dir"`
	Bytes   int64   `json:"bytes"`
	Chunk   int     `json:"chunk"`
	Seconds float64 `json:"seconds"`
	MBps    float64 `json:"mb_per_s"` // 10^6 bytes a second
}

// diskSeqWrite writes total bytes to a new file in dir, chunk bytes at a
// time, each followed by an fdatasync, and removes the file.
func diskSeqWrite(ctx context.Context, dir string, total int64, chunk int) (*DiskSeq, error) {
	if total <= 0 || chunk <= 0 {
		return nil, fmt.Errorf("disk bandwidth: total %d and chunk %d must be positive", total, chunk)
	}
	path := filepath.Join(dir, ".fjord-bench-seq-write")
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, fmt.Errorf("disk bandwidth: %w", err)
	}
	defer os.Remove(path)
	defer f.Close()
	buf := make([]byte, chunk)
	for i := range buf {
		buf[i] = byte(i * 13)
	}
	start := time.Now()
	var written int64
	for written < total {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		n, err := f.Write(buf[:min(int64(chunk), total-written)])
		if err != nil {
			return nil, fmt.Errorf("disk bandwidth: write %s: %w", path, err)
		}
		written += int64(n)
		if err := fdatasync(f); err != nil {
			return nil, fmt.Errorf("disk bandwidth: fdatasync %s: %w", path, err)
		}
	}
	el := time.Since(start)
	return &DiskSeq{Dir: dir, Bytes: written, Chunk: chunk, Seconds: el.Seconds(), MBps: float64(written) / el.Seconds() / 1e6}, nil
}
