package main

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// The 1,000-partition floor in a closed loop: the records/s the disk alone
// allows when a producer keeps a fixed number of records unacknowledged,
// as franz-go does (MaxBufferedRecords, 10,000 by default: Produce blocks
// once that many are buffered or in flight), and a broker makes them
// durable the way fjord's group flush does (one syncfs of the file system
// at a time, each covering every append made before it began).
//
// Two goroutines and the disk, no broker, no network, no client CPU:
//   - the writer takes every free slot of the window at once (a request),
//     spreads those records round robin over the files and appends each
//     file's share with one write (a partition's batch);
//   - the syncer, whenever something was written since its last syncfs
//     began, calls syncfs again; when it returns, every record written
//     before it began is acknowledged and its slot is free.
//
// The writer refills the whole window before the syncer starts again, so
// each syncfs covers every record outstanding, the most the window allows
// (as franz-go's buffer bounds what one flush can find). A broker whose
// requests arrive in pieces covers fewer a syncfs; the figure bounds what
// any broker that fsyncs before it acks reaches at that window, that many
// partitions, on this disk.

// windowFloorRecords is the window: franz-go's default MaxBufferedRecords.
const windowFloorRecords = 10_000

// windowFloorDur is how long -all measures the closed loop, and
// windowFloorCapacity what it fallocates a file: enough for 300,000
// records/s of 1,104 B over 1,000 files for the run and its warm-up. (Four
// times that, 8 GiB over the 1,000 files, made the disk's syncfs calls
// take seconds on 2026-12-07's machine: the floor would measure the
// allocation, not the appends.)
const (
	windowFloorDur      = 5 * time.Second
	windowFloorCapacity = 2 << 20
)

// windowFloorWarmup is left out of the measurement: the first syncfs
// calls cover the files' creation.
const windowFloorWarmup = time.Second

// WindowFloor is a closed-loop run of the disk alone.
type WindowFloor struct {
	Dir           string  `json:"dir"`
	Files         int     `json:"files"`
	Window        int     `json:"window"`
	RecordBytes   int     `json:"record_bytes"`
	Seconds       float64 `json:"seconds"` // measured, after the warm-up
	RecordsPerSec float64 `json:"records_per_sec"`
	Syncs         int     `json:"syncs"`
	SyncMeanMs    float64 `json:"sync_mean_ms"`
	// RecordsPerSync is how many records one syncfs acknowledged, mean.
	RecordsPerSync float64 `json:"records_per_sync"`
}

// windowFloor runs the closed loop for dur after windowFloorWarmup, over
// files files in a new directory under dir, each fallocated to
// capacity bytes (a write that would pass it ends the run early, so a
// file never grows). The files are removed afterwards.
func windowFloor(ctx context.Context, dir string, files, window, recordBytes int, capacity int64, dur time.Duration) (*WindowFloor, error) {
	if files < 1 || window < 1 || recordBytes < 1 || capacity < int64(recordBytes) || dur <= 0 {
		return nil, fmt.Errorf("window floor: %d files, window %d, %d B records, %d B a file, %v", files, window, recordBytes, capacity, dur)
	}
	fs, cleanup, err := fallocatedFiles(dir, ".fjord-bench-window-floor-", files, capacity)
	if err != nil {
		return nil, fmt.Errorf("window floor: %w", err)
	}
	defer cleanup()
	if err := syncfs(fs[0]); err != nil {
		return nil, fmt.Errorf("window floor: %w", err)
	}

	var (
		mu      sync.Mutex
		cond    = sync.NewCond(&mu)
		written int64 // records appended
		acked   int64 // records a finished syncfs covered
		stop    bool
		failed  error
		ended   = make(chan struct{}) // closed with stop set
	)
	fail := func(err error) {
		mu.Lock()
		if failed == nil {
			failed = err
		}
		if !stop {
			stop = true
			close(ended)
		}
		cond.Broadcast()
		mu.Unlock()
	}
	type syncRec struct {
		at    time.Time
		took  time.Duration
		acked int64
	}
	var syncs []syncRec
	var wg sync.WaitGroup
	wg.Go(func() { // the writer
		offs := make([]int64, files)
		counts := make([]int, files)
		buf := make([]byte, (window/files+1)*recordBytes)
		for i := range buf {
			buf[i] = byte(i * 7)
		}
		next := 0 // the file the next record goes to
		for {
			mu.Lock()
			for !stop && written-acked >= int64(window) {
				cond.Wait()
			}
			if stop {
				mu.Unlock()
				return
			}
			free := int(int64(window) - (written - acked))
			mu.Unlock()
			clear(counts)
			for range free {
				counts[next]++
				next = (next + 1) % files
			}
			for i, n := range counts {
				if n == 0 {
					continue
				}
				b := buf[:n*recordBytes]
				if offs[i]+int64(len(b)) > capacity {
					fail(nil) // full: end the run here
					return
				}
				if _, err := fs[i].WriteAt(b, offs[i]); err != nil {
					fail(fmt.Errorf("window floor: %w", err))
					return
				}
				offs[i] += int64(len(b))
			}
			mu.Lock()
			written += int64(free)
			cond.Broadcast()
			mu.Unlock()
		}
	})
	wg.Go(func() { // the syncer
		var last int64 // written when the last syncfs began
		for {
			mu.Lock()
			for !stop && written == last {
				cond.Wait()
			}
			if stop {
				mu.Unlock()
				return
			}
			covers := written
			mu.Unlock()
			t := time.Now()
			if err := syncfs(fs[0]); err != nil {
				fail(fmt.Errorf("window floor: %w", err))
				return
			}
			took := time.Since(t)
			mu.Lock()
			acked, last = covers, covers
			syncs = append(syncs, syncRec{at: t.Add(took), took: took, acked: covers})
			cond.Broadcast()
			mu.Unlock()
		}
	})
	start := time.Now()
	timer := time.NewTimer(windowFloorWarmup + dur)
	select {
	case <-timer.C:
	case <-ended: // the files are full, or a write or syncfs failed
	case <-ctx.Done():
	}
	timer.Stop()
	fail(nil)
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if failed != nil {
		return nil, failed
	}
	// The syncs that ended after the warm-up: records/s from the last one
	// before it to the last one of all.
	from := start.Add(windowFloorWarmup)
	var first *syncRec
	var n int
	var sum time.Duration
	for i := range syncs {
		s := &syncs[i]
		if s.at.Before(from) {
			first = s
			continue
		}
		n++
		sum += s.took
	}
	if first == nil || n == 0 {
		return nil, fmt.Errorf("window floor: %d syncfs calls, none after the %v warm-up (the disk took longer)", len(syncs), windowFloorWarmup)
	}
	end := syncs[len(syncs)-1]
	secs := end.at.Sub(first.at).Seconds()
	records := end.acked - first.acked
	return &WindowFloor{Dir: dir, Files: files, Window: window, RecordBytes: recordBytes, Seconds: secs,
		RecordsPerSec: float64(records) / secs, Syncs: n, SyncMeanMs: ms(sum / time.Duration(n)),
		RecordsPerSync: float64(records) / float64(n)}, nil
}
