package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"
)

// The fsync floor: what the disk under the broker's data directory takes
// for the operation fjord's acks=all path waits on, measured in the same
// run as the broker's produce→ack latency, so that kfake's p99, fjord's
// p99 and the disk's own fdatasync p99 can be read side by side. A
// broker that fsyncs before it acks cannot have a p99 below this floor
// (unless it coalesces several records into one fdatasync, which fjord's
// group flush does).

// floorWriteSize is the size of each append: one 1 KiB record batch with
// its headers is a little over 1 KiB, a few of them coalesced about 4 KiB.
const floorWriteSize = 4096

// floorMaxDuration bounds how long the floor is measured before each
// latency suite: a few seconds give thousands of samples at 3,500/s.
const floorMaxDuration = 5 * time.Second

// FsyncFloor is the latency of fdatasync after a floorWriteSize append to
// a preallocated file in the broker's data directory, paced at the rate
// of the latency suite, taken with nothing else writing (just before the
// suite).
//
// Two preallocations are measured, because they cost the disk different
// work per fdatasync. Fallocate (what fjord does to its segments) leaves
// the space unwritten: on ext4 and xfs the first write-back into each
// block converts its extent to written, and that conversion is metadata
// the fdatasync must write too (committed to the journal, where the file
// system has one). A file whose blocks were
// written (with zeros) beforehand takes data and a device cache flush
// only: the device's own floor.
type FsyncFloor struct {
	Dir          string  `json:"dir"`
	Written      bool    `json:"written"`          // preallocated by writing zeros; false: fallocate
	Logs         int     `json:"logs,omitempty"`   // the group floor's partitions (fsyncFloorGroup); 0: one file, one operation at a time
	Copies       int     `json:"copies,omitempty"` // the group floor's files a partition: its replication factor
	TargetRate   float64 `json:"target_rate"`      // appends+fdatasyncs/s asked for
	AchievedRate float64 `json:"achieved_rate"`    // done/s: below target when one fdatasync takes longer than 1/rate
	Samples      int     `json:"samples"`
	P50Ms        float64 `json:"p50_ms"`
	P99Ms        float64 `json:"p99_ms"`
	P999Ms       float64 `json:"p999_ms"`
	MaxMs        float64 `json:"max_ms"`
}

// fsyncFloor appends floorWriteSize bytes and fdatasyncs, rate times a
// second for dur, to a file preallocated in dir (written with zeros if
// written, else fallocated), one operation at a time: when an fdatasync
// takes longer than 1/rate the next starts at once and the achieved rate
// falls short. The file is removed afterwards.
func fsyncFloor(ctx context.Context, dir string, rate float64, dur time.Duration, written bool) (*FsyncFloor, error) {
	path := filepath.Join(dir, ".fjord-bench-fsync-floor")
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, fmt.Errorf("fsync floor: %w", err)
	}
	defer os.Remove(path)
	defer f.Close()
	total := int64(rate * dur.Seconds())
	// Preallocated, so the appends do not grow the file (its size is
	// fixed from the start).
	prealloc := preallocate
	if written {
		prealloc = writeZeros
	}
	if err := prealloc(f, total*floorWriteSize); err != nil {
		return nil, fmt.Errorf("fsync floor: preallocate %s: %w", path, err)
	}
	if err := f.Sync(); err != nil {
		return nil, fmt.Errorf("fsync floor: %w", err)
	}
	buf := make([]byte, floorWriteSize)
	for i := range buf {
		buf[i] = byte(i * 7)
	}
	lats := make([]time.Duration, 0, total)
	var off int64
	var opErr error
	done, window := pace(ctx, rate, dur, func(int64) {
		if opErr != nil {
			return
		}
		if _, err := f.WriteAt(buf, off); err != nil {
			opErr = err
			return
		}
		off += floorWriteSize
		t := time.Now()
		if err := fdatasync(f); err != nil {
			opErr = err
			return
		}
		lats = append(lats, time.Since(t))
	})
	if opErr != nil {
		return nil, fmt.Errorf("fsync floor: %w", opErr)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	fl := floorOf(dir, rate, done, window, lats)
	fl.Written = written
	return fl, nil
}

// floorOf is the distribution of lats (sorted here) for a floor taken in
// dir, done of them paced at rate over window.
func floorOf(dir string, rate float64, done int64, window time.Duration, lats []time.Duration) *FsyncFloor {
	slices.Sort(lats)
	return &FsyncFloor{
		Dir:          dir,
		TargetRate:   rate,
		AchievedRate: float64(done) / window.Seconds(),
		Samples:      len(lats),
		P50Ms:        ms(percentile(lats, 0.50)),
		P99Ms:        ms(percentile(lats, 0.99)),
		P999Ms:       ms(percentile(lats, 0.999)),
		MaxMs:        ms(percentile(lats, 1)),
	}
}

// writeZeros writes size zero bytes to f from offset 0, a MiB at a time.
func writeZeros(f *os.File, size int64) error {
	zeros := make([]byte, min(size, 1<<20))
	for off := int64(0); off < size; {
		n, err := f.WriteAt(zeros[:min(int64(len(zeros)), size-off)], off)
		if err != nil {
			return err
		}
		off += int64(n)
	}
	return nil
}
