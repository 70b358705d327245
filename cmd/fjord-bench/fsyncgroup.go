package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"
)

// The group floor: the disk under a broker's own pattern, with no broker.
// The one-at-a-time floor (fsyncFloor) never writes while an fdatasync
// runs and never has more than one outstanding, so it shows what one
// fdatasync costs but not what a record waits for at a given rate. A
// broker that fsyncs before it acks appends as records arrive, to one log
// per partition, while earlier appends are being synced; each log's next
// fdatasync covers everything appended meanwhile (a group commit, as
// fjord's per-log flush does). A record then waits for the rest of the
// fdatasync in progress and the whole next one, and the fdatasyncs of
// several logs share the file system's journal and the device. What that
// takes, on this disk at this rate, is the floor no broker of this design
// gets under: the same appends, nothing but the disk in between.

// groupFloorWriteSize is one append: a 1 KiB record in its own batch (the
// 61-byte batch header, the record's framing and key), as a produce at
// linger 0 writes it.
const groupFloorWriteSize = latencyRecordSize + 80

// fsyncFloorGroup appends groupFloorWriteSize bytes rate times a second
// for dur, round robin over logs partitions, each a file fallocated in dir
// (copies files a partition, for a replication factor: every record is
// appended to each copy, one after the other, as its leader and followers
// would on one shared disk). Each file has one flusher that fdatasyncs
// whenever appends are waiting and covers every append made before its
// fdatasync began. A record's latency runs from just before its first
// write to the end of the last fdatasync that covered one of its copies:
// acks=all waits for every in-sync replica's. The files are removed
// afterwards.
func fsyncFloorGroup(ctx context.Context, dir string, logs, copies int, rate float64, dur time.Duration) (*FsyncFloor, error) {
	if logs < 1 || copies < 1 {
		return nil, fmt.Errorf("group floor: %d logs of %d copies", logs, copies)
	}
	total := int64(rate * dur.Seconds())
	type record struct {
		start time.Time
		left  atomic.Int32 // copies not yet covered by an fdatasync
	}
	type log struct {
		f       *os.File
		off     int64
		mu      sync.Mutex
		pending []*record // appended and not yet covered by an fdatasync
		kick    chan struct{}
	}
	ls := make([]*log, logs*copies)
	for i := range ls {
		path := filepath.Join(dir, fmt.Sprintf(".fjord-bench-group-floor-%d", i))
		f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR|os.O_TRUNC, 0o644)
		if err != nil {
			return nil, fmt.Errorf("group floor: %w", err)
		}
		defer os.Remove(path)
		defer f.Close()
		if err := preallocate(f, (total/int64(logs)+1)*groupFloorWriteSize); err != nil {
			return nil, fmt.Errorf("group floor: preallocate %s: %w", path, err)
		}
		if err := f.Sync(); err != nil {
			return nil, fmt.Errorf("group floor: %w", err)
		}
		ls[i] = &log{f: f, kick: make(chan struct{}, 1)}
	}
	var (
		latMu sync.Mutex
		lats  = make([]time.Duration, 0, total)
		opErr error
		wg    sync.WaitGroup
	)
	fail := func(err error) {
		latMu.Lock()
		if opErr == nil {
			opErr = err
		}
		latMu.Unlock()
	}
	for _, l := range ls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			flush := func() {
				l.mu.Lock()
				covered := l.pending
				l.pending = nil
				l.mu.Unlock()
				if len(covered) == 0 {
					return
				}
				if err := fdatasync(l.f); err != nil {
					fail(err)
					return
				}
				end := time.Now()
				latMu.Lock()
				for _, r := range covered {
					if r.left.Add(-1) == 0 {
						lats = append(lats, end.Sub(r.start))
					}
				}
				latMu.Unlock()
			}
			for range l.kick {
				flush()
			}
			flush() // what was appended after the last kick was taken
		}()
	}
	buf := make([]byte, groupFloorWriteSize)
	for i := range buf {
		buf[i] = byte(i * 11)
	}
	done, window := pace(ctx, rate, dur, func(i int64) {
		r := &record{start: time.Now()}
		r.left.Store(int32(copies))
		for c := range copies {
			l := ls[c*logs+int(i%int64(logs))]
			// Only this goroutine writes; the flusher reads the file's
			// pages under fdatasync, as a broker's flush does beside its
			// appends.
			if _, err := l.f.WriteAt(buf, l.off); err != nil {
				fail(err)
				return
			}
			l.off += groupFloorWriteSize
			l.mu.Lock()
			l.pending = append(l.pending, r)
			l.mu.Unlock()
			select {
			case l.kick <- struct{}{}:
			default:
			}
		}
	})
	for _, l := range ls {
		close(l.kick)
	}
	wg.Wait()
	if opErr != nil {
		return nil, fmt.Errorf("group floor: %w", opErr)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	f := floorOf(dir, rate, done, window, lats)
	f.Logs, f.Copies = logs, copies
	return f, nil
}
