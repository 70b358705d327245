package storage

import (
	"fmt"
	"os"
	"path/filepath"
)

// SyncAtStart makes one syncfs of the file system holding root, the data
// directory, through one of root's regular files. Call it as a process
// starts, before it opens any log in root.
//
// A kill -9 keeps the page cache: what the dead process wrote and never
// synced reads back as if it were on the disk, and a power cut later can
// still take it. That is every kind of write, not only records: a
// partition directory created a moment before a kill, whose name is not
// yet durable in its parent, takes its synced segments with it when the
// name goes (two kills in a row can leave one). One syncfs makes all of
// it durable. It reports no write-back error that another process has
// already been told of, so it replaces no log's own sync: an unclean Open
// still fdatasyncs its active segment, which reports its file's own
// errors, and then has little left to write.
//
// It reports whether it synced: not when root holds no directory (no log
// to cover). ErrNoSyncFS: there is no trustworthy syncfs here.
func SyncAtStart(fs FS, root string) (bool, error) {
	fs = fsOrOS(fs)
	fss, ok := fs.(FileSystemSyncer)
	if !ok {
		return false, ErrNoSyncFS
	}
	ents, err := fs.ReadDir(root)
	if err != nil {
		return false, err
	}
	dirs := false
	var through string // a regular file to syncfs through
	for _, e := range ents {
		switch {
		case e.IsDir():
			dirs = true
		case e.Type().IsRegular() && through == "":
			through = filepath.Join(root, e.Name())
		}
	}
	if !dirs {
		return false, nil
	}
	if through == "" {
		return false, fmt.Errorf("%s holds no file to call syncfs through", root)
	}
	f, err := fs.OpenFile(through, os.O_RDONLY, 0)
	if err != nil {
		return false, err
	}
	defer f.Close()
	if err := fss.SyncFileSystem(f); err != nil {
		return false, err
	}
	return true, nil
}
