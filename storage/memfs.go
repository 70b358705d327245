package storage

import (
	"errors"
	"io"
	iofs "io/fs"
	"math/rand/v2"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"
)

// MemFS is an FS in memory that can also show what a power loss would leave
// (CrashClone). Tests of this package and of its users run a Log on it, take
// crash images at chosen moments, and check what recovery makes of them.
// It is safe for concurrent use; one mutex serialises every call.
//
// # Crash model
//
// Every file and directory has a durable state, what a crash keeps for
// certain, and the changes made since, in order:
//
//   - A file's contents and size are durable as of its last Sync or
//     SyncData; writes, truncations and preallocations since are pending.
//   - A directory's entries are durable as of its last SyncDir; creations,
//     renames and removals of names in it since are pending. This is
//     POSIX's promise and no more: fsyncing a file does not make its new
//     name durable, and creating a directory is not durable until its
//     parent is synced. ext4 with data=ordered usually persists more (its
//     journal commits metadata in order, with the next fsync of anything),
//     so code correct here is correct there, not the other way round.
//   - A rename within one directory is one change: after a crash the file
//     has the old name or the new one, never both or neither. A rename
//     across directories is a removal in one and a creation in the other,
//     which may survive apart (storage never does that: even Log.Delete
//     renames the partition directory within its parent).
//
// CrashClone(nil) keeps only the durable state. CrashClone(rng) also keeps,
// independently for each file and each directory, a random prefix of its
// pending changes, and may tear the first write it drops, keeping a random
// prefix of its bytes: the kernel may have written back any part of the
// page cache before the power went, and a write in flight may be half on
// disk. Pending changes are kept in order within a file or directory; the
// kernel may also write back one file's pages out of order, which is not
// modelled: for an appended log that leaves garbage past the durable
// prefix, as a torn tail does, and FuzzRecovery covers arbitrary garbage
// there. Nothing durable is ever lost, and nothing is invented: every byte
// of a crash image was written at some point, or is a zero that extending
// the file (Truncate, Preallocate, a write past the end) put there.
//
// Invariants: for every file, applying pending to durable gives data; for
// every directory, applying pendingEntries to durableEntries gives entries.
// A node is reachable through entries or through open files only; a
// removed file stays readable and writable through the handles open on it,
// as on Unix.
//
// Costs: a sync copies the whole file, and pending changes keep a copy of
// every byte written since; fine for tests' small segments.
type MemFS struct {
	mu   sync.Mutex
	root *memNode
}

// NewMemFS returns an empty MemFS: its root directory "/" exists (durably);
// relative paths are taken from it.
func NewMemFS() *MemFS {
	return &MemFS{root: newMemDir(0o755)}
}

// memNode is a file or a directory of a MemFS. Guarded by MemFS.mu.
type memNode struct {
	isDir bool
	mode  os.FileMode

	// Files.
	data    []byte      // what reads see
	durable []byte      // data as of the last sync
	pending []memFileOp // changes since the last sync, oldest first

	// Directories.
	entries        map[string]*memNode // what lookups see
	durableEntries map[string]*memNode // entries as of the last SyncDir
	pendingEntries []memDirOp          // changes since the last SyncDir, oldest first
}

// memFileOp is one change to a file's contents: data written at off, or,
// when data is nil, the size set to off (truncation, preallocation).
type memFileOp struct {
	off  int64
	data []byte
}

// memDirOp is one change to a directory's entries: the name remove goes,
// then add, if not empty, names node. A rename within the directory is one
// op with both.
type memDirOp struct {
	remove, add string
	node        *memNode
}

func newMemDir(mode os.FileMode) *memNode {
	return &memNode{isDir: true, mode: mode | os.ModeDir, entries: map[string]*memNode{}, durableEntries: map[string]*memNode{}}
}

func (op memFileOp) apply(b []byte) []byte {
	if op.data == nil {
		return resize(b, op.off)
	}
	if end := op.off + int64(len(op.data)); end > int64(len(b)) {
		b = resize(b, end)
	}
	copy(b[op.off:], op.data)
	return b
}

// resize cuts b to n bytes or extends it with zeros.
func resize(b []byte, n int64) []byte {
	if n <= int64(len(b)) {
		return b[:n]
	}
	if n <= int64(cap(b)) {
		old := len(b)
		b = b[:n]
		clear(b[old:])
		return b
	}
	return append(b, make([]byte, n-int64(len(b)))...)
}

func (op memDirOp) apply(m map[string]*memNode) {
	if op.remove != "" {
		delete(m, op.remove)
	}
	if op.add != "" {
		m[op.add] = op.node
	}
}

// change applies op to the file and remembers it as pending.
// REQUIRES: fs.mu held.
func (n *memNode) change(op memFileOp) {
	if op.data != nil {
		op.data = slices.Clone(op.data)
	}
	n.data = op.apply(n.data)
	n.pending = append(n.pending, op)
}

// changeEntries applies op to the directory and remembers it as pending.
// REQUIRES: fs.mu held.
func (n *memNode) changeEntries(op memDirOp) {
	op.apply(n.entries)
	n.pendingEntries = append(n.pendingEntries, op)
}

func (n *memNode) sync() {
	n.durable = slices.Clone(n.data)
	n.pending = nil
}

// split cleans name into its parent's components and its last element.
// The root has no last element ("").
func split(name string) (parents []string, base string) {
	p := path.Clean("/" + filepath.ToSlash(name))
	if p == "/" {
		return nil, ""
	}
	parts := strings.Split(p[1:], "/")
	return parts[:len(parts)-1], parts[len(parts)-1]
}

// dirOf walks to the directory holding name's last element.
// REQUIRES: fs.mu held.
func (fs *MemFS) dirOf(op, name string) (*memNode, string, error) {
	parents, base := split(name)
	d := fs.root
	for _, p := range parents {
		next, ok := d.entries[p]
		if !ok {
			return nil, "", &os.PathError{Op: op, Path: name, Err: syscall.ENOENT}
		}
		if !next.isDir {
			return nil, "", &os.PathError{Op: op, Path: name, Err: syscall.ENOTDIR}
		}
		d = next
	}
	return d, base, nil
}

// lookup finds name's node.
// REQUIRES: fs.mu held.
func (fs *MemFS) lookup(op, name string) (*memNode, error) {
	d, base, err := fs.dirOf(op, name)
	if err != nil {
		return nil, err
	}
	if base == "" {
		return d, nil
	}
	n, ok := d.entries[base]
	if !ok {
		return nil, &os.PathError{Op: op, Path: name, Err: syscall.ENOENT}
	}
	return n, nil
}

// OpenFile opens a file as os.OpenFile does; directories cannot be opened.
func (fs *MemFS) OpenFile(name string, flag int, perm os.FileMode) (File, error) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	d, base, err := fs.dirOf("open", name)
	if err != nil {
		return nil, err
	}
	if base == "" {
		return nil, &os.PathError{Op: "open", Path: name, Err: syscall.EISDIR}
	}
	acc := flag & (os.O_RDONLY | os.O_WRONLY | os.O_RDWR)
	f := &memFile{fs: fs, name: name, read: acc != os.O_WRONLY, write: acc != os.O_RDONLY, append: flag&os.O_APPEND != 0}
	n, ok := d.entries[base]
	switch {
	case !ok && flag&os.O_CREATE == 0:
		return nil, &os.PathError{Op: "open", Path: name, Err: syscall.ENOENT}
	case !ok:
		n = &memNode{mode: perm & os.ModePerm}
		d.changeEntries(memDirOp{add: base, node: n})
	case flag&(os.O_CREATE|os.O_EXCL) == os.O_CREATE|os.O_EXCL:
		return nil, &os.PathError{Op: "open", Path: name, Err: syscall.EEXIST}
	case n.isDir:
		return nil, &os.PathError{Op: "open", Path: name, Err: syscall.EISDIR}
	}
	if flag&os.O_TRUNC != 0 && f.write && len(n.data) > 0 {
		n.change(memFileOp{off: 0})
	}
	f.n = n
	return f, nil
}

// Remove removes a file or an empty directory.
func (fs *MemFS) Remove(name string) error {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	d, base, err := fs.dirOf("remove", name)
	if err != nil {
		return err
	}
	n, ok := d.entries[base]
	switch {
	case base == "":
		return &os.PathError{Op: "remove", Path: name, Err: syscall.EBUSY}
	case !ok:
		return &os.PathError{Op: "remove", Path: name, Err: syscall.ENOENT}
	case n.isDir && len(n.entries) > 0:
		return &os.PathError{Op: "remove", Path: name, Err: syscall.ENOTEMPTY}
	}
	d.changeEntries(memDirOp{remove: base})
	return nil
}

// RemoveAll removes name and everything under it, each name from its own
// directory, deepest first, as os.RemoveAll does.
func (fs *MemFS) RemoveAll(name string) error {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	d, base, err := fs.dirOf("unlinkat", name)
	if err != nil {
		if os.IsNotExist(err) {
			return nil
		}
		return err
	}
	if base == "" {
		return &os.PathError{Op: "unlinkat", Path: name, Err: syscall.EBUSY}
	}
	n, ok := d.entries[base]
	if !ok {
		return nil
	}
	var empty func(*memNode)
	empty = func(dir *memNode) {
		for _, k := range sortedNames(dir.entries) {
			if c := dir.entries[k]; c.isDir {
				empty(c)
			}
			dir.changeEntries(memDirOp{remove: k})
		}
	}
	if n.isDir {
		empty(n)
	}
	d.changeEntries(memDirOp{remove: base})
	return nil
}

// Rename renames oldname to newname, replacing a file or an empty
// directory there.
func (fs *MemFS) Rename(oldname, newname string) error {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	lerr := func(err error) error { return &os.LinkError{Op: "rename", Old: oldname, New: newname, Err: err} }
	od, ob, err := fs.dirOf("rename", oldname)
	if err != nil {
		return lerr(syscall.ENOENT)
	}
	nd, nb, err := fs.dirOf("rename", newname)
	if err != nil {
		return lerr(syscall.ENOENT)
	}
	n, ok := od.entries[ob]
	if !ok || ob == "" || nb == "" {
		return lerr(syscall.ENOENT)
	}
	if n.isDir {
		// Not into itself: a directory must not become its own ancestor.
		oldParts, _ := split(oldname)
		newParts, _ := split(newname)
		if len(newParts) > len(oldParts) && slices.Equal(newParts[:len(oldParts)+1], append(oldParts, ob)) {
			return lerr(syscall.EINVAL)
		}
	}
	if t, ok := nd.entries[nb]; ok {
		switch {
		case t == n:
			return nil
		case t.isDir && !n.isDir:
			return lerr(syscall.EISDIR)
		case !t.isDir && n.isDir:
			return lerr(syscall.ENOTDIR)
		case t.isDir && len(t.entries) > 0:
			return lerr(syscall.ENOTEMPTY)
		}
	}
	if od == nd {
		od.changeEntries(memDirOp{remove: ob, add: nb, node: n})
		return nil
	}
	od.changeEntries(memDirOp{remove: ob})
	nd.changeEntries(memDirOp{add: nb, node: n})
	return nil
}

// MkdirAll creates dir and any missing parents.
func (fs *MemFS) MkdirAll(dir string, perm os.FileMode) error {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	parents, base := split(dir)
	d := fs.root
	for _, p := range append(parents, base) {
		if p == "" {
			break // the root
		}
		next, ok := d.entries[p]
		if !ok {
			next = newMemDir(perm & os.ModePerm)
			d.changeEntries(memDirOp{add: p, node: next})
		} else if !next.isDir {
			return &os.PathError{Op: "mkdir", Path: dir, Err: syscall.ENOTDIR}
		}
		d = next
	}
	return nil
}

// ReadDir lists dir's entries sorted by name.
func (fs *MemFS) ReadDir(dir string) ([]os.DirEntry, error) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	d, err := fs.lookup("open", dir)
	if err != nil {
		return nil, err
	}
	if !d.isDir {
		return nil, &os.PathError{Op: "readdirent", Path: dir, Err: syscall.ENOTDIR}
	}
	out := make([]os.DirEntry, 0, len(d.entries))
	for _, k := range sortedNames(d.entries) {
		out = append(out, iofs.FileInfoToDirEntry(d.entries[k].info(k)))
	}
	return out, nil
}

// Stat describes the file or directory name.
func (fs *MemFS) Stat(name string) (os.FileInfo, error) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	n, err := fs.lookup("stat", name)
	if err != nil {
		return nil, err
	}
	_, base := split(name)
	return n.info(base), nil
}

// SyncDir makes dir's entries durable.
func (fs *MemFS) SyncDir(dir string) error {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	d, err := fs.lookup("sync", dir)
	if err != nil {
		return err
	}
	if !d.isDir {
		return &os.PathError{Op: "sync", Path: dir, Err: syscall.ENOTDIR}
	}
	d.durableEntries = maps(d.entries)
	d.pendingEntries = nil
	return nil
}

// SyncFileSystem makes every file and directory of fs durable, as
// syncfs(2) does a file system's (FileSystemSyncer). f may be any file.
func (fs *MemFS) SyncFileSystem(File) error {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	var walk func(n *memNode)
	walk = func(n *memNode) {
		if !n.isDir {
			n.sync()
			return
		}
		n.durableEntries = maps(n.entries)
		n.pendingEntries = nil
		for _, c := range n.entries {
			walk(c)
		}
	}
	walk(fs.root)
	return nil
}

// CrashClone returns the file system a power loss at this moment would
// leave, as a new MemFS with everything in it durable; fs itself is
// unchanged and goes on. With rng nil only what was durable survives;
// otherwise some of what was not may too (see the crash model on MemFS).
// The same rng state gives the same image.
func (fs *MemFS) CrashClone(rng *rand.Rand) *MemFS {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	// Nodes are cloned once each: a file with two names (a rename across
	// directories of which both halves survived) keeps one identity.
	clones := map[*memNode]*memNode{}
	var clone func(n *memNode) *memNode
	clone = func(n *memNode) *memNode {
		if c, ok := clones[n]; ok {
			return c
		}
		if !n.isDir {
			b := slices.Clone(n.durable)
			k := prefixLen(rng, len(n.pending))
			for _, op := range n.pending[:k] {
				b = op.apply(b)
			}
			if rng != nil && k < len(n.pending) && n.pending[k].data != nil && rng.IntN(2) == 0 {
				op := n.pending[k] // torn: a prefix of its bytes reached the disk
				op.data = op.data[:rng.IntN(len(op.data)+1)]
				b = op.apply(b)
			}
			c := &memNode{mode: n.mode, data: b, durable: slices.Clone(b)}
			clones[n] = c
			return c
		}
		c := newMemDir(n.mode)
		clones[n] = c
		entries := maps(n.durableEntries)
		for _, op := range n.pendingEntries[:prefixLen(rng, len(n.pendingEntries))] {
			op.apply(entries)
		}
		for _, k := range sortedNames(entries) { // sorted: rng draws in a fixed order
			c.entries[k] = clone(entries[k])
		}
		c.durableEntries = maps(c.entries)
		return c
	}
	return &MemFS{root: clone(fs.root)}
}

// prefixLen is how many of n pending changes a crash keeps: none without
// rng, else any number from 0 to n.
func prefixLen(rng *rand.Rand, n int) int {
	if rng == nil || n == 0 {
		return 0
	}
	return rng.IntN(n + 1)
}

func maps(m map[string]*memNode) map[string]*memNode {
	out := make(map[string]*memNode, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

func sortedNames(m map[string]*memNode) []string {
	names := make([]string, 0, len(m))
	for k := range m {
		names = append(names, k)
	}
	slices.Sort(names)
	return names
}

// info describes n under the name base. REQUIRES: MemFS.mu held.
func (n *memNode) info(base string) os.FileInfo {
	return memInfo{name: base, size: int64(len(n.data)), mode: n.mode}
}

type memInfo struct {
	name string
	size int64
	mode os.FileMode
}

func (i memInfo) Name() string       { return i.name }
func (i memInfo) Size() int64        { return i.size }
func (i memInfo) Mode() os.FileMode  { return i.mode }
func (i memInfo) ModTime() time.Time { return time.Time{} }
func (i memInfo) IsDir() bool        { return i.mode.IsDir() }
func (i memInfo) Sys() any           { return nil }

// errWriteAtInAppendMode is os's error for the same misuse, which os does
// not export.
var errWriteAtInAppendMode = errors.New("storage: MemFS: invalid use of WriteAt on file opened with O_APPEND")

// memFile is an open file of a MemFS. Its fields are fixed at open except
// pos and closed, which change under MemFS.mu.
type memFile struct {
	fs                  *MemFS
	n                   *memNode
	name                string
	read, write, append bool
	pos                 int64 // where Write writes without append
	closed              bool
}

// check returns the error for an operation on f that needs it open, and
// readable or writable as asked. REQUIRES: MemFS.mu held.
func (f *memFile) check(op string, read, write bool) error {
	switch {
	case f.closed:
		return &os.PathError{Op: op, Path: f.name, Err: os.ErrClosed}
	case read && !f.read, write && !f.write:
		return &os.PathError{Op: op, Path: f.name, Err: syscall.EBADF}
	}
	return nil
}

func (f *memFile) ReadAt(p []byte, off int64) (int, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.check("read", true, false); err != nil {
		return 0, err
	}
	if off < 0 {
		return 0, &os.PathError{Op: "readat", Path: f.name, Err: syscall.EINVAL}
	}
	if off >= int64(len(f.n.data)) {
		return 0, io.EOF
	}
	n := copy(p, f.n.data[off:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

func (f *memFile) WriteAt(p []byte, off int64) (int, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.check("write", false, true); err != nil {
		return 0, err
	}
	if f.append {
		return 0, errWriteAtInAppendMode
	}
	if off < 0 {
		return 0, &os.PathError{Op: "writeat", Path: f.name, Err: syscall.EINVAL}
	}
	f.n.change(memFileOp{off: off, data: p})
	return len(p), nil
}

func (f *memFile) Write(p []byte) (int, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.check("write", false, true); err != nil {
		return 0, err
	}
	off := f.pos
	if f.append {
		off = int64(len(f.n.data))
	}
	f.n.change(memFileOp{off: off, data: p})
	f.pos = off + int64(len(p))
	return len(p), nil
}

func (f *memFile) Truncate(size int64) error {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.check("truncate", false, false); err != nil {
		return err
	}
	if !f.write || size < 0 { // ftruncate(2) on a read-only descriptor is EINVAL
		return &os.PathError{Op: "truncate", Path: f.name, Err: syscall.EINVAL}
	}
	f.n.change(memFileOp{off: size})
	return nil
}

func (f *memFile) Preallocate(off, n int64) error {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.check("fallocate", false, true); err != nil {
		return err
	}
	if off < 0 || n <= 0 {
		return &os.PathError{Op: "fallocate", Path: f.name, Err: syscall.EINVAL}
	}
	if end := off + n; end > int64(len(f.n.data)) {
		f.n.change(memFileOp{off: end})
	}
	return nil
}

func (f *memFile) Sync() error     { return f.syncData("sync") }
func (f *memFile) SyncData() error { return f.syncData("fdatasync") }

// syncData is both syncs: the model has no metadata that only Sync keeps.
func (f *memFile) syncData(op string) error {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.check(op, false, false); err != nil {
		return err
	}
	f.n.sync()
	return nil
}

func (f *memFile) Stat() (os.FileInfo, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.check("stat", false, false); err != nil {
		return nil, err
	}
	_, base := split(f.name)
	return f.n.info(base), nil
}

func (f *memFile) Close() error {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.check("close", false, false); err != nil {
		return err
	}
	f.closed = true
	return nil
}

var (
	_ FS   = (*MemFS)(nil)
	_ File = (*memFile)(nil)
	_ FS   = osFS{}
	_ File = osFile{}
)
