package storage

import (
	"os"
	"strings"
	"sync"
	"syscall"
	"time"
)

// ErrorFS is an FS that fails chosen operations on chosen paths, as
// pebble's errorfs does: a disk that answers EIO for one file, fills up
// (ENOSPC), or fails a directory sync, so tests can check that each such
// failure is reported, refuses what it must, and loses nothing that was
// acknowledged. It wraps another FS (MemFS in the crash tests, whose
// CrashClone then shows what a power loss right after the failure would
// leave).
//
// A fault with a Delay stalls the calls it fires on instead of failing
// them: each waits Delay, outside ErrorFS's lock, and then runs (an fsync
// that hangs for seconds, the gray failure a stall check must notice).
//
// Invariant: a fault matches a call by operation and by path substring;
// the first After matching calls pass, the next Times fire (all of them
// when Times is 0). Faults are checked in the order they were added; the
// first that fails the call decides its error, and every delaying fault
// that fires on it adds its Delay.
type ErrorFS struct {
	FS
	mu     sync.Mutex
	faults []*faultState
	failed int
}

// Op is an operation ErrorFS can fail.
type Op string

const (
	OpOpen     Op = "open"     // OpenFile
	OpWrite    Op = "write"    // a file's Write and WriteAt
	OpSync     Op = "sync"     // a file's Sync and SyncData
	OpTruncate Op = "truncate" // a file's Truncate
	OpAlloc    Op = "alloc"    // a file's Preallocate
	OpRename   Op = "rename"   // Rename, matched on the old name
	OpRemove   Op = "remove"   // Remove and RemoveAll
	OpMkdir    Op = "mkdir"    // MkdirAll
	OpSyncDir  Op = "syncdir"  // SyncDir
)

// Fault is one rule of an ErrorFS.
type Fault struct {
	Op Op
	// Path is a substring of the path the call names; "" matches every
	// path.
	Path string
	// Err is the error returned, wrapped in an *os.PathError; nil is
	// syscall.EIO.
	Err error
	// After is how many matching calls pass before the first fails.
	After int
	// Times is how many matching calls fail after those; 0 is all.
	Times int
	// Delay, when not 0, makes the fault stall the calls it fires on by
	// Delay, then let them run, instead of failing them (Err is unused).
	Delay time.Duration
}

type faultState struct {
	Fault
	seen, fired int
}

// NewErrorFS wraps fs with faults.
func NewErrorFS(fs FS, faults ...Fault) *ErrorFS {
	e := &ErrorFS{FS: fsOrOS(fs)}
	for _, f := range faults {
		e.Add(f)
	}
	return e
}

// Add adds a fault; calls from now on meet it.
func (e *ErrorFS) Add(f Fault) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.faults = append(e.faults, &faultState{Fault: f})
}

// Clear removes every fault: calls from now on pass (a disk that room
// was made on, or that was replaced). Calls already stalling finish their
// Delay.
func (e *ErrorFS) Clear() {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.faults = nil
}

// Failed is how many calls ErrorFS has failed.
func (e *ErrorFS) Failed() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.failed
}

// check is the error for op on path, nil when no fault fails it; it
// first waits out the delays of the stalling faults that fire on it.
func (e *ErrorFS) check(op Op, path string) error {
	delay, err := e.match(op, path)
	if delay > 0 {
		time.Sleep(delay)
	}
	return err
}

func (e *ErrorFS) match(op Op, path string) (time.Duration, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	var delay time.Duration
	for _, f := range e.faults {
		if f.Op != op || !strings.Contains(path, f.Path) {
			continue
		}
		f.seen++
		if f.seen <= f.After || (f.Times > 0 && f.fired >= f.Times) {
			continue
		}
		f.fired++
		if f.Delay > 0 {
			delay += f.Delay
			continue
		}
		e.failed++
		err := f.Err
		if err == nil {
			err = syscall.EIO
		}
		return delay, &os.PathError{Op: "errorfs " + string(op), Path: path, Err: err}
	}
	return delay, nil
}

func (e *ErrorFS) OpenFile(name string, flag int, perm os.FileMode) (File, error) {
	if err := e.check(OpOpen, name); err != nil {
		return nil, err
	}
	f, err := e.FS.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return errorFile{File: f, fs: e, name: name}, nil
}

func (e *ErrorFS) Remove(name string) error {
	if err := e.check(OpRemove, name); err != nil {
		return err
	}
	return e.FS.Remove(name)
}

func (e *ErrorFS) RemoveAll(name string) error {
	if err := e.check(OpRemove, name); err != nil {
		return err
	}
	return e.FS.RemoveAll(name)
}

func (e *ErrorFS) Rename(oldname, newname string) error {
	if err := e.check(OpRename, oldname); err != nil {
		return err
	}
	return e.FS.Rename(oldname, newname)
}

func (e *ErrorFS) MkdirAll(dir string, perm os.FileMode) error {
	if err := e.check(OpMkdir, dir); err != nil {
		return err
	}
	return e.FS.MkdirAll(dir, perm)
}

func (e *ErrorFS) SyncDir(dir string) error {
	if err := e.check(OpSyncDir, dir); err != nil {
		return err
	}
	return e.FS.SyncDir(dir)
}

// errorFile is a file of an ErrorFS: its writes, syncs, truncations and
// allocations meet the faults.
type errorFile struct {
	File
	fs   *ErrorFS
	name string
}

func (f errorFile) Write(p []byte) (int, error) {
	if err := f.fs.check(OpWrite, f.name); err != nil {
		return 0, err
	}
	return f.File.Write(p)
}

func (f errorFile) WriteAt(p []byte, off int64) (int, error) {
	if err := f.fs.check(OpWrite, f.name); err != nil {
		return 0, err
	}
	return f.File.WriteAt(p, off)
}

func (f errorFile) Sync() error {
	if err := f.fs.check(OpSync, f.name); err != nil {
		return err
	}
	return f.File.Sync()
}

func (f errorFile) SyncData() error {
	if err := f.fs.check(OpSync, f.name); err != nil {
		return err
	}
	return f.File.SyncData()
}

func (f errorFile) Truncate(size int64) error {
	if err := f.fs.check(OpTruncate, f.name); err != nil {
		return err
	}
	return f.File.Truncate(size)
}

func (f errorFile) Preallocate(off, n int64) error {
	if err := f.fs.check(OpAlloc, f.name); err != nil {
		return err
	}
	return f.File.Preallocate(off, n)
}
