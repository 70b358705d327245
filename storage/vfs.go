package storage

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// FS is the file system a Log keeps its files on: the real one (OSFS) in
// production, an in-memory one (MemFS) in tests, which can also show what a
// power loss would leave. It is exactly as big as storage needs; every file
// operation of the package goes through it.
//
// Paths are slash-separated and joined by the caller (filepath.Join);
// errors are *os.PathError or *os.LinkError as the os package returns them,
// so errors.Is(err, os.ErrNotExist) classifies them the same way for every
// implementation.
//
// Durability is the caller's business and spelled out: a write is durable
// once File.Sync or File.SyncData returns, a creation, rename or removal
// once SyncDir of the directory holding the name returns (POSIX promises no
// more, and MemFS's crash image grants no more).
//
// Alternatives rejected: pebble's vfs.FS (v1.1.5, which the module already
// depends on, and which the house style names) has no Truncate on its
// File, which recovery (torn tails), rolls (preallocated tails) and
// follower truncation all need, and it opens files by purpose (Create,
// OpenReadWrite) rather than with the O_APPEND the index files rely on;
// wrapping it would have meant a second interface anyway. Its strict
// MemFS also has no torn writes.
type FS interface {
	// OpenFile is os.OpenFile. flag combines os.O_RDONLY, O_WRONLY or O_RDWR
	// with O_CREATE, O_EXCL, O_TRUNC and O_APPEND; perm applies to a file it
	// creates. The file is not a directory.
	OpenFile(name string, flag int, perm os.FileMode) (File, error)
	// Remove removes a file or an empty directory.
	Remove(name string) error
	// RemoveAll removes name and everything under it; a missing name is
	// not an error.
	RemoveAll(name string) error
	// Rename renames (moves) oldname to newname, replacing a file there.
	Rename(oldname, newname string) error
	// MkdirAll creates dir and any missing parents.
	MkdirAll(dir string, perm os.FileMode) error
	// ReadDir lists dir's entries sorted by name.
	ReadDir(dir string) ([]os.DirEntry, error)
	// Stat describes the file or directory name.
	Stat(name string) (os.FileInfo, error)
	// SyncDir makes the entries of directory dir durable: every creation,
	// rename and removal of a name in it so far.
	SyncDir(dir string) error
}

// File is an open file of an FS. It may be used from several goroutines at
// once as an *os.File may: ReadAt concurrently with WriteAt and Write.
// ReadAt, WriteAt and Write keep no reference to the slices they are given.
type File interface {
	io.ReaderAt
	io.WriterAt // not on a file opened with os.O_APPEND, as with *os.File
	io.Writer   // at the end of the file under os.O_APPEND, else at the file's position
	io.Closer
	Stat() (os.FileInfo, error)
	// Truncate sets the file's size, cutting or extending it with zeros.
	Truncate(size int64) error
	// Sync makes the file's contents and metadata durable (fsync).
	Sync() error
	// SyncData makes the file's contents durable, with the metadata needed
	// to read them back, such as its size, but not e.g. its times
	// (fdatasync): cheaper than Sync, and all a log needs.
	SyncData() error
	// Preallocate reserves space for [off, off+n) and extends the file to
	// off+n if it is shorter, the new bytes reading as zeros (fallocate
	// mode 0). An error means the file system cannot (or would not): the
	// file is then as before, and the caller grows it by writing.
	Preallocate(off, n int64) error
}

// Modes of what Fjord creates under log.dirs: private to the user the
// broker runs as. The directories hold the cluster's records and, in the
// metadata log, SCRAM keys, ACLs and dynamic passwords; Kafka leaves the
// modes to the umask (0644 and 0755 with the usual 022). A directory that
// already exists keeps its mode (MkdirAll does not change it): the broker
// warns at start-up about a group- or world-readable log.dirs instead of
// changing an operator's choice silently.
const (
	FileMode os.FileMode = 0o600
	DirMode  os.FileMode = 0o700
)

// OSFS is the operating system's file system: every call is the os
// package's, or the unix system call it stands for, and nothing more.
var OSFS FS = osFS{}

type osFS struct{}

func (osFS) OpenFile(name string, flag int, perm os.FileMode) (File, error) {
	f, err := os.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return osFile{f}, nil
}

func (osFS) Remove(name string) error                    { return os.Remove(name) }
func (osFS) RemoveAll(name string) error                 { return os.RemoveAll(name) }
func (osFS) Rename(oldname, newname string) error        { return os.Rename(oldname, newname) }
func (osFS) MkdirAll(dir string, perm os.FileMode) error { return os.MkdirAll(dir, perm) }
func (osFS) ReadDir(dir string) ([]os.DirEntry, error)   { return os.ReadDir(dir) }
func (osFS) Stat(name string) (os.FileInfo, error)       { return os.Stat(name) }

func (osFS) SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// osFile is an *os.File with the two calls os does not offer. A value, not
// a pointer: it is one word, so the interface holds it without allocating.
type osFile struct{ *os.File }

func (f osFile) SyncData() error {
	for {
		err := unix.Fdatasync(int(f.Fd()))
		if err != unix.EINTR {
			if err != nil {
				return &os.PathError{Op: "fdatasync", Path: f.Name(), Err: err}
			}
			return nil
		}
	}
}

func (f osFile) Preallocate(off, n int64) error {
	if err := unix.Fallocate(int(f.Fd()), 0, off, n); err != nil {
		return &os.PathError{Op: "fallocate", Path: f.Name(), Err: err}
	}
	return nil
}

// fsOrOS is the FS a nil Config.FS stands for.
func fsOrOS(fs FS) FS {
	if fs == nil {
		return OSFS
	}
	return fs
}

// OrOS is fs, or OSFS when fs is nil: for the users of the package that
// take an optional FS as Config.FS does.
func OrOS(fs FS) FS { return fsOrOS(fs) }

// ReadFile is os.ReadFile on fs (nil is OSFS), for small files read whole.
func ReadFile(fs FS, name string) ([]byte, error) { return readFile(fsOrOS(fs), name) }

// MkdirAllDurable is MkdirAll on fs (nil is OSFS) that also makes each
// directory it creates durable in its parent (see mkdirAllDurable).
func MkdirAllDurable(fs FS, dir string) error { return mkdirAllDurable(fsOrOS(fs), dir) }

// readFile is os.ReadFile on fs.
func readFile(fs FS, name string) ([]byte, error) {
	f, err := fs.OpenFile(name, os.O_RDONLY, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	// The files read whole are small (indexes, snapshots, the epoch
	// checkpoint) and not written while they are read, so the size Stat
	// gives is the size to read; a shorter file just ends early.
	b := make([]byte, st.Size())
	n, err := f.ReadAt(b, 0)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	return b[:n], nil
}

// WriteFileSync replaces path atomically with data, durably: a temporary
// file is written and fsynced, renamed over path, and the directory fsynced.
// It works on the operating system's file system; WriteFileSyncFS takes
// another.
func WriteFileSync(path string, data []byte) error {
	return WriteFileSyncFS(OSFS, path, data)
}

// WriteFileSyncFS is WriteFileSync on fs.
func WriteFileSyncFS(fs FS, path string, data []byte) error {
	if err := renameSynced(fs, path, data); err != nil {
		return err
	}
	return fs.SyncDir(filepath.Dir(path))
}

// renameSynced is WriteFileSyncFS but for the directory's sync, for a
// caller that syncs the directory once for several names.
func renameSynced(fs FS, path string, data []byte) error {
	tmp := path + ".tmp"
	f, err := fs.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, FileMode)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return fs.Rename(tmp, path)
}

// writeWhole replaces the contents of name with data in place (no
// temporary file: for derived files a torn write is detected and rebuilt,
// such as indexes), fdatasynced when sync is set.
func writeWhole(fs FS, name string, data []byte, sync bool) error {
	f, err := fs.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, FileMode)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if sync {
		if err := f.SyncData(); err != nil {
			f.Close()
			return err
		}
	}
	return f.Close()
}

// mkdirAllDurable is MkdirAll that also makes each directory it creates
// durable in its parent. SyncDir of a directory says nothing about the
// directory's own name in its parent (POSIX; ext4's journal usually
// commits it with the next fsync anyway, other file systems need not), so
// a partition created and written, fsynced and acknowledged could vanish
// whole in a power loss without this. Directories that exist cost one
// Stat.
func mkdirAllDurable(fs FS, dir string) error {
	dir = filepath.Clean(dir)
	var created []string
	for d := dir; ; d = filepath.Dir(d) {
		if _, err := fs.Stat(d); err == nil {
			break
		} else if !errors.Is(err, os.ErrNotExist) {
			return err
		}
		created = append(created, d)
		if parent := filepath.Dir(d); parent == d {
			break
		}
	}
	if len(created) == 0 {
		return nil
	}
	if err := fs.MkdirAll(dir, DirMode); err != nil {
		return err
	}
	// Outermost first: each name is durable before anything below it needs
	// it to be.
	for i := len(created) - 1; i >= 0; i-- {
		if err := fs.SyncDir(filepath.Dir(created[i])); err != nil {
			return fmt.Errorf("sync directory %s: %w", filepath.Dir(created[i]), err)
		}
	}
	return nil
}
