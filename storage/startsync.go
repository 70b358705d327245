package storage

import (
	"os"
	"path/filepath"
	"sync"
	"syscall"
)

// StartSync is one syncfs of a data directory's file system, made as a
// process starts and before it opens any log there.
//
// A kill -9 keeps the page cache: what the dead process wrote and never
// synced reads back as if it were on the disk, and a power cut later can
// still take it. That is every kind of write, not only records: a
// partition directory created a moment before the kill, whose name is not
// yet durable in its parent, takes its synced segments with it when the
// name goes. One syncfs makes all of it durable at once, so an unclean
// Open of a log it covers need not sync its active segment, which cost a
// device cache flush per partition at every restart after a crash.
//
// It covers each log directory that was in the data directory when it
// was made, once, and only on the file system it synced: a log this
// process opens a second time may hold writes of its own since.
//
// Invariant: dirs holds only directories listed before the syncfs
// returned success, not yet claimed.
type StartSync struct {
	dev   uint64
	devOK bool // dev is known (deviceOf)

	mu   sync.Mutex
	dirs map[string]bool
}

// SyncAtStart syncs the file system of root, the data directory, through
// one of its files, and returns what the sync covers. It returns nil
// without syncing when root holds no log directory (nothing to cover), and
// nil with an error when the sync could not be made or failed (logs then
// sync their own files, as they did before). Call it before the first
// Open of a log in root.
func SyncAtStart(fs FS, root string) (*StartSync, error) {
	fs = fsOrOS(fs)
	fss, ok := fs.(FileSystemSyncer)
	if !ok {
		return nil, ErrNoSyncFS
	}
	ents, err := fs.ReadDir(root)
	if err != nil {
		return nil, err
	}
	s := &StartSync{dirs: map[string]bool{}}
	var through string // a regular file to syncfs through
	for _, e := range ents {
		switch {
		case e.IsDir():
			s.dirs[filepath.Join(root, e.Name())] = true
		case e.Type().IsRegular() && through == "":
			through = filepath.Join(root, e.Name())
		}
	}
	if len(s.dirs) == 0 {
		return nil, nil
	}
	if through == "" {
		return nil, ErrNoSyncFS // no file of root's own: nothing to sync through
	}
	f, err := fs.OpenFile(through, os.O_RDONLY, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	s.dev, s.devOK = deviceOf(f)
	if err := fss.SyncFileSystem(f); err != nil {
		return nil, err
	}
	return s, nil
}

// claim reports whether the sync covers the log in dir: dir was there at
// the sync, on its file system, and this is the first claim. Every Open
// claims, clean or not, so that a later unclean Open of the same
// directory, after this process has written to it, is never covered.
// Safe on a nil StartSync (false).
func (s *StartSync) claim(fs FS, dir string) bool {
	if s == nil {
		return false
	}
	dir = filepath.Clean(dir)
	s.mu.Lock()
	listed := s.dirs[dir]
	delete(s.dirs, dir)
	s.mu.Unlock()
	if !listed {
		return false
	}
	fi, err := fs.Stat(dir)
	if err != nil {
		return false
	}
	dev, ok := deviceOfInfo(fi)
	return ok == s.devOK && dev == s.dev // not another file system mounted inside
}

// deviceOfInfo is the device (file system) of what fi describes.
func deviceOfInfo(fi os.FileInfo) (uint64, bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, false
	}
	return uint64(st.Dev), true
}
