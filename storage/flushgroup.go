package storage

import (
	"cmp"
	"errors"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// FileSystemSyncer is what an FS implements when one call can make every
// file on a file system durable (Linux's syncfs). Flushing a thousand
// partitions' logs one fdatasync each costs a journal commit and a device
// cache flush per file; one syncfs costs one of each, so FlushGroup uses it
// for many logs at once.
type FileSystemSyncer interface {
	// SyncFileSystem makes every file on the file system holding f durable,
	// and reports any write-back error on it since the last call (on any
	// file): an error says nothing about which file, so the caller syncs
	// each of its own files again to find out. ErrNoSyncFS: not available.
	SyncFileSystem(f File) error
}

// ErrNoSyncFS means the file system offers no trustworthy syncfs.
var ErrNoSyncFS = errors.New("storage: syncfs not available")

// SyncFileSystem is FileSystemSyncer's, for any File with a descriptor.
//
// After syncfs has reported one error it is not used again by this
// process: the error it reports is the file system's, once per descriptor,
// so a later call through the same descriptor could succeed while a page
// of some log outside the group that saw the error is still lost. From
// then on every log syncs its own files, whose fdatasync reports their own
// errors.
func (osFS) SyncFileSystem(f File) error {
	fd, ok := f.(fder)
	if !ok || !syncfsReportsErrors() || syncfsFailed.Load() {
		return ErrNoSyncFS
	}
	for {
		err := unix.Syncfs(int(fd.Fd()))
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			syncfsFailed.Store(true)
		}
		return err
	}
}

// syncfsFailed: a syncfs reported an error; see osFS.SyncFileSystem.
var syncfsFailed atomic.Bool

// fder is a File backed by a descriptor (osFile, and wrappers of it).
type fder interface{ Fd() uintptr }

// syncfsOK: syncfs(2) reports write-back errors on this kernel (Linux 5.8
// and later; before, it returned 0 whatever happened, and a log must never
// publish data of unknown fate).
var syncfsOK = sync.OnceValue(func() bool {
	var u unix.Utsname
	if unix.Uname(&u) != nil {
		return false
	}
	return kernelAtLeast(unix.ByteSliceToString(u.Release[:]), 5, 8)
})

func syncfsReportsErrors() bool { return syncfsOK() }

// kernelAtLeast reports whether a kernel release ("6.18.44-foo") is at
// least major.minor.
func kernelAtLeast(release string, major, minor int) bool {
	parts := strings.SplitN(release, ".", 3)
	if len(parts) < 2 {
		return false
	}
	digits := func(v string) string { // "8-rc1" -> "8"
		if i := strings.IndexFunc(v, func(r rune) bool { return r < '0' || r > '9' }); i >= 0 {
			return v[:i]
		}
		return v
	}
	ma, err1 := strconv.Atoi(parts[0])
	mi, err2 := strconv.Atoi(digits(parts[1]))
	if err1 != nil || err2 != nil {
		return false
	}
	return ma > major || (ma == major && mi >= minor)
}

// FlushGroup is Flush for many logs at once: each log's batches appended
// before the call are durable when it returns, and errs[i] is logs[i]'s
// Flush error. When the logs' file system offers it (FileSystemSyncer),
// one syncfs per file system stands in for every log's fdatasyncs; if
// syncfs fails, or is not offered, each log syncs its own segments, so a
// failed write-back still fails exactly the logs it hit (fsyncgate).
//
// It holds every log's flushMu for the duration, taken in the order of the
// logs' directories, so two groups never wait on each other in a cycle and
// no single Flush publishes an end the group has not made durable.
func FlushGroup(logs []*Log) []error {
	errs := make([]error, len(logs))
	type member struct {
		l     *Log
		at    []int // indexes in logs (a log named twice)
		end   int64
		dirty []*segment
	}
	byDir := map[string]*member{}
	var ms []*member
	for i, l := range logs {
		if m := byDir[l.dir]; m != nil {
			m.at = append(m.at, i)
			continue
		}
		m := &member{l: l, at: []int{i}}
		byDir[l.dir] = m
		ms = append(ms, m)
	}
	slices.SortFunc(ms, func(a, b *member) int { return cmp.Compare(a.l.dir, b.l.dir) })
	fail := func(m *member, err error) {
		for _, i := range m.at {
			errs[i] = err
		}
	}
	var pending []*member
	for _, m := range ms {
		target := m.l.end.Load()
		if m.l.durable.Load() >= target {
			continue
		}
		m.l.flushMu.Lock()
		defer m.l.flushMu.Unlock()
		end, dirty, done, err := m.l.flushBegin(target)
		switch {
		case err != nil:
			fail(m, err)
		case !done:
			m.end, m.dirty = end, dirty
			pending = append(pending, m)
		}
	}
	if len(pending) == 0 {
		return errs
	}
	synced := false
	if fss, ok := pending[0].l.fs.(FileSystemSyncer); ok && len(pending) > 1 {
		logs := make([]*Log, len(pending))
		dirty := make([][]*segment, len(pending))
		for i, m := range pending {
			logs[i], dirty[i] = m.l, m.dirty
		}
		// Every log of the group waits on the one syncfs: each shows it
		// as its own sync in progress (SyncStalledFor).
		now := time.Now().UnixMilli()
		var marked []*Log
		for _, l := range logs {
			if l.syncSince.CompareAndSwap(0, now) {
				marked = append(marked, l)
			}
		}
		synced = syncFileSystems(fss, logs, dirty)
		for _, l := range marked {
			l.syncSince.Store(0)
		}
	}
	for _, m := range pending {
		if !synced {
			if err := m.l.syncSegments(m.dirty); err != nil {
				fail(m, err)
				continue
			}
		}
		m.l.durable.Store(m.end)
	}
	return errs
}

// syncFileSystems syncfs's once per file system the dirty segments
// (dirty[i], of logs[i]) are on, and reports whether every call succeeded
// (and there was something to sync through); false means: sync each file
// instead. A log's file system is looked up once (Log.device): an fstat
// per segment per group was 6 % of a node's CPU producing to 1,000
// partitions.
func syncFileSystems(fss FileSystemSyncer, logs []*Log, dirty [][]*segment) bool {
	seen := map[uint64]bool{}
	did := false
	for i, segs := range dirty {
		for _, s := range segs {
			if s.removed.Load() {
				continue
			}
			if dev, ok := logs[i].knownDevice(); ok && seen[dev] {
				did = true // that file system has been synced in this group
				continue
			}
			// A pin of its own, as syncSegments takes: the segment may
			// have been sealed, its file evicted, meanwhile.
			f, err := s.h.acquire()
			if err != nil {
				return false
			}
			dev, ok := logs[i].device(f)
			if ok && !seen[dev] {
				seen[dev] = true
				err = fss.SyncFileSystem(f)
			}
			s.h.release()
			if !ok || err != nil {
				return false
			}
			did = true
		}
	}
	return did
}

// knownDevice is the device of the log's file system, if device has found
// it.
func (l *Log) knownDevice() (uint64, bool) {
	d := l.dev.Load()
	return d &^ devKnown, d&devKnown != 0
}

// device is the device of the log's file system, from f (one of its
// segment files) the first time: a log's files all live in its directory.
func (l *Log) device(f File) (uint64, bool) {
	if dev, ok := l.knownDevice(); ok {
		return dev, true
	}
	dev, ok := deviceOf(f)
	if ok && dev&devKnown == 0 {
		l.dev.Store(dev | devKnown)
	}
	return dev, ok
}

// devKnown marks Log.dev as set.
const devKnown = 1 << 63

// deviceOf is the device (file system) a file is on.
func deviceOf(f File) (uint64, bool) {
	fd, ok := f.(fder)
	if !ok {
		return 0, false
	}
	var st unix.Stat_t
	if unix.Fstat(int(fd.Fd()), &st) != nil {
		return 0, false
	}
	return uint64(st.Dev), true
}
