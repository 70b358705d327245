package raftlog

import (
	"io"
	"os"

	"github.com/cockroachdb/pebble/vfs"
)

// The modes of what the raft log creates: the same as storage.FileMode and
// storage.DirMode (the partition logs'), kept here so the metadata quorum
// does not depend on the partition log's package.
const (
	fileMode os.FileMode = 0o600
	dirMode  os.FileMode = 0o700
)

// privateFS is the operating system's file system as pebble sees it, with
// what pebble creates private to the broker's user: directories
// dirMode (0700), files fileMode (0600). The raft log is
// the metadata log, which holds SCRAM keys, ACLs and dynamic passwords.
//
// pebble v1.1.5 creates files 0666 (less the umask) and directories 0755
// and takes no mode option, so Create and ReuseForWrite narrow the mode
// right after the file is made (Lock makes its file first). In between no other user can open it:
// the directory it is in was created 0700 (MkdirAll below), unless an
// older release made it, which the broker warns about at start-up. A
// directory or file that already exists keeps its mode, as everywhere
// under log.dirs.
//
// Only for the real file system: tests that give pebble an in-memory one
// (open's opts.FS) do without it.
type privateFS struct{ vfs.FS }

func (p privateFS) Create(name string) (vfs.File, error) {
	f, err := p.FS.Create(name)
	if err != nil {
		return f, err
	}
	return f, private(f, name)
}

func (p privateFS) ReuseForWrite(oldname, newname string) (vfs.File, error) {
	f, err := p.FS.ReuseForWrite(oldname, newname)
	if err != nil {
		return f, err
	}
	// A recycled WAL file gets new entries: as private as a new one.
	return f, private(f, newname)
}

// Lock makes the (empty) lock file with the private mode before pebble
// opens it, so that every file of the log is FileMode.
func (p privateFS) Lock(name string) (io.Closer, error) {
	f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE, fileMode)
	if err != nil {
		return nil, err
	}
	if err := f.Close(); err != nil {
		return nil, err
	}
	return p.FS.Lock(name)
}

func (p privateFS) MkdirAll(dir string, _ os.FileMode) error {
	return p.FS.MkdirAll(dir, dirMode)
}

// private narrows the mode of the file f just opened at name; on failure
// it closes f.
func private(f vfs.File, name string) error {
	if err := os.Chmod(name, fileMode); err != nil {
		f.Close()
		return err
	}
	return nil
}
