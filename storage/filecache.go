package storage

import (
	"container/list"
	"errors"
	"fmt"
	"os"
	"sync"
)

// FileCache bounds the descriptors the segment files of a node's logs
// hold, as pebble's table cache bounds its tables': every segment's .log
// file is a cachedFile, opened on demand, pinned while a reader or the
// writer uses it, and closed, least recently used first, when more than
// the capacity are open and unpinned. One cache is shared by every log of
// a node (Config.Files).
//
// An active segment's file stays pinned by its writer, so it counts
// against the capacity permanently; a sealed segment's file is open only
// while it is read or recently was. Pins may push the open count past the
// capacity for as long as they last (a reader never waits for a
// descriptor); the caller keeps the number of permanent pins well below
// the capacity (the broker refuses partitions beyond it).
//
// Invariants (under mu): open counts the handles whose f is set; a handle
// is in lru exactly when its f is set, refs is 0 and it is not retired; a
// dropped handle with refs 0 has no f.
type FileCache struct {
	mu       sync.Mutex
	capacity int // 0: unbounded
	open     int
	lru      list.List // *cachedFile, least recently used at the front
	opens    int64     // files opened, first opens and reopens after eviction
	evicts   int64
}

// NewFileCache returns a cache keeping at most capacity files open
// unpinned; 0 means no bound.
func NewFileCache(capacity int) *FileCache {
	return &FileCache{capacity: max(capacity, 0)}
}

// Capacity is the bound the cache was made with (0: none).
func (c *FileCache) Capacity() int { return c.capacity }

// FileCacheStats is a snapshot of a cache's counters.
type FileCacheStats struct {
	Open      int   // descriptors held now
	Opens     int64 // files opened so far (first opens and reopens)
	Evictions int64 // files closed to stay within the capacity
}

// Stats returns the cache's counters.
func (c *FileCache) Stats() FileCacheStats {
	c.mu.Lock()
	defer c.mu.Unlock()
	return FileCacheStats{Open: c.open, Opens: c.opens, Evictions: c.evicts}
}

// unboundedFiles serves the logs opened without a cache (tests, tools):
// nothing is evicted, as before there was one.
var unboundedFiles = NewFileCache(0)

// errFileRetired is an acquire of a segment file that was removed or
// replaced (retention, truncation, compaction, close) and is no longer
// open: the caller reloads the segment list (Log.Read does).
var errFileRetired = errors.New("segment file retired")

// cachedFile is one segment file in a FileCache. It is opened by path,
// always read-write, so a sealed segment that truncation makes active
// again can take writes. A retired handle is never reopened: its path may
// name another file by then (compaction renames the cleaned segment over
// it).
type cachedFile struct {
	c    *FileCache
	fs   FS
	path string

	// Under c.mu.
	f       File
	refs    int
	elem    *list.Element
	retired bool // never reopened, never evicted
	dropped bool // closed at the last release
}

func (c *FileCache) handle(fs FS, path string) *cachedFile {
	return &cachedFile{c: c, fs: fs, path: path}
}

// adopt makes a handle of a file just created, pinned once (the writer's).
func (c *FileCache) adopt(fs FS, path string, f File) *cachedFile {
	h := &cachedFile{c: c, fs: fs, path: path, f: f, refs: 1}
	c.mu.Lock()
	c.open++
	c.opens++
	victims := c.evictLocked()
	c.mu.Unlock()
	closeAll(victims)
	return h
}

// acquire returns the open file, opening it if needed, and pins it until
// the matching release. The open happens outside the cache's lock.
func (h *cachedFile) acquire() (File, error) {
	c := h.c
	c.mu.Lock()
	if f := h.pinLocked(); f != nil {
		c.mu.Unlock()
		return f, nil
	}
	if h.retired {
		c.mu.Unlock()
		return nil, fmt.Errorf("%s: %w", h.path, errFileRetired)
	}
	c.mu.Unlock()

	f, err := h.fs.OpenFile(h.path, os.O_RDWR, FileMode)
	if err != nil {
		// Removed while we opened it: the removal opened the file itself
		// first (segment.keepOpen), or retired it closed.
		c.mu.Lock()
		got, retired := h.pinLocked(), h.retired
		c.mu.Unlock()
		if got != nil {
			return got, nil
		}
		if retired {
			return nil, fmt.Errorf("%s: %w", h.path, errFileRetired)
		}
		return nil, err
	}
	c.mu.Lock()
	if got := h.pinLocked(); got != nil || h.retired {
		// Opened meanwhile by another reader, or retired: ours goes.
		c.mu.Unlock()
		f.Close()
		if got == nil {
			return nil, fmt.Errorf("%s: %w", h.path, errFileRetired)
		}
		return got, nil
	}
	h.f = f
	h.refs = 1
	c.open++
	c.opens++
	victims := c.evictLocked()
	c.mu.Unlock()
	closeAll(victims)
	return f, nil
}

// pinLocked pins an open file and returns it; nil if it is not open.
func (h *cachedFile) pinLocked() File {
	if h.f == nil {
		return nil
	}
	if h.elem != nil {
		h.c.lru.Remove(h.elem)
		h.elem = nil
	}
	h.refs++
	return h.f
}

// release unpins the file acquire returned. The last release of a
// dropped handle closes it; of a live one, makes the file the most
// recently used.
func (h *cachedFile) release() {
	c := h.c
	c.mu.Lock()
	if h.refs <= 0 {
		c.mu.Unlock()
		panic("storage: release of an unpinned segment file") // a bug in this package, never input
	}
	h.refs--
	var victims []File
	switch {
	case h.refs > 0:
	case h.dropped:
		victims = append(victims, h.f)
		h.f = nil
		c.open--
	case !h.retired:
		h.elem = c.lru.PushBack(h)
		victims = c.evictLocked()
	}
	c.mu.Unlock()
	closeAll(victims)
}

// retire stops h from being reopened or evicted: the file it has open
// (its segment was removed or replaced) serves the readers that still
// reach it until drop. Idempotent.
func (h *cachedFile) retire() {
	c := h.c
	c.mu.Lock()
	h.retired = true
	if h.elem != nil {
		c.lru.Remove(h.elem)
		h.elem = nil
	}
	c.mu.Unlock()
}

// drop retires h and closes its file once no one holds it. Idempotent.
func (h *cachedFile) drop() {
	h.retire()
	c := h.c
	c.mu.Lock()
	h.dropped = true
	var f File
	if h.refs == 0 && h.f != nil {
		f, h.f = h.f, nil
		c.open--
	}
	c.mu.Unlock()
	if f != nil {
		f.Close()
	}
}

// evictLocked takes the least recently used unpinned files out while more
// than the capacity are open, and returns them for the caller to close
// outside the lock.
func (c *FileCache) evictLocked() []File {
	var out []File
	for c.capacity > 0 && c.open > c.capacity && c.lru.Len() > 0 {
		h := c.lru.Remove(c.lru.Front()).(*cachedFile)
		h.elem = nil
		out = append(out, h.f)
		h.f = nil
		c.open--
		c.evicts++
	}
	return out
}

func closeAll(fs []File) {
	for _, f := range fs {
		f.Close()
	}
}
