package storage

import (
	"container/list"
	"fmt"
	"sync"

	"github.com/rs/zerolog"

	"github.com/fjordlog/fjord/storage/recordbatch"
)

// IndexCache holds sealed segments' offset and time indexes in memory, up
// to a budget of bytes shared by every log of a node, least recently used
// out first. A sealed segment's indexes are in its .index and .timeindex
// files, written durably at its roll (or checked at Open); a lookup that
// misses the cache reads them back.
//
// Why: the sparse indexes cost about 6 MiB of memory per GiB of log (an
// entry per 4 KiB of batches), and every sealed segment's used to stay in
// memory for as long as the log lived, so a broker's memory grew with the
// data it kept rather than with what its clients read: 10 TB of retained
// audit log held 60 GB of indexes. Kafka maps its index files and loads
// them lazily (KAFKA-7283); the cache is the same idea with a bound the
// operator sets (fjord.log.index.cache.bytes).
//
// Index files are an accelerator, never the truth: a segment whose files
// cannot be read or do not hold together gets an empty index (cached, so
// it is tried once), and its lookups scan batch headers from the
// segment's start: slower, never wrong.
//
// Invariant: used is the sum of the bytes of the entries in m, and after
// every insertion used <= budget unless the newest entry alone exceeds it
// (an index larger than the budget is still served, then is the first
// out).
type IndexCache struct {
	budget int64
	loads  chan struct{} // bounds concurrent file loads (their descriptors)

	mu        sync.Mutex
	used      int64
	lru       list.List // of *indexEntry, most recent at the front
	m         map[*segment]*list.Element
	hits      int64
	misses    int64
	evictions int64
	failed    int64
}

// indexEntry is one sealed segment's indexes in the cache.
type indexEntry struct {
	s     *segment
	offs  []offsetEntry
	times []timeEntry
	bytes int64
}

// IndexCacheStats are an IndexCache's figures for metrics.
type IndexCacheStats struct {
	Bytes, Budget int64 // held, and the bound
	Entries       int   // segments whose indexes are held
	Hits, Misses  int64 // lookups of sealed segments' indexes
	Evictions     int64 // entries dropped for the budget
	Unreadable    int64 // loads that found no usable index files
}

// loadConcurrency bounds the index files read at once: each load holds
// two descriptors outside the file cache's budget, briefly.
const loadConcurrency = 4

// DefaultIndexCacheBytes is fjord.log.index.cache.bytes' default: the
// indexes of about 20 GiB of sealed segments.
const DefaultIndexCacheBytes = 128 << 20

// NewIndexCache returns a cache holding at most budget bytes of indexes;
// 0 keeps none (every lookup of a sealed segment reads its files).
func NewIndexCache(budget int64) *IndexCache {
	c := &IndexCache{budget: max(budget, 0), loads: make(chan struct{}, loadConcurrency)}
	c.m = map[*segment]*list.Element{}
	return c
}

// sharedIndexes serves the logs opened without a cache of their own
// (tools, tests): one per process, like unboundedFiles.
var sharedIndexes = NewIndexCache(DefaultIndexCacheBytes)

// Stats returns the cache's current figures.
func (c *IndexCache) Stats() IndexCacheStats {
	c.mu.Lock()
	defer c.mu.Unlock()
	return IndexCacheStats{Bytes: c.used, Budget: c.budget, Entries: len(c.m), Hits: c.hits, Misses: c.misses,
		Evictions: c.evictions, Unreadable: c.failed}
}

// indexBytes is what offs and times take in memory.
func indexBytes(offs []offsetEntry, times []timeEntry) int64 {
	return int64(cap(offs))*8 + int64(cap(times))*16
}

// get returns the indexes of s in its published state st, from the cache
// or its files, which must agree with st (entries inside st.size, the
// time index ending at st.maxTS). The slices are shared and never
// modified. log takes the warning when the files are unusable.
func (c *IndexCache) get(s *segment, st *segState, log *zerolog.Logger) ([]offsetEntry, []timeEntry) {
	c.mu.Lock()
	if el, ok := c.m[s]; ok {
		c.lru.MoveToFront(el)
		c.hits++
		e := el.Value.(*indexEntry)
		c.mu.Unlock()
		return e.offs, e.times
	}
	c.misses++
	gen := s.ixGen
	c.mu.Unlock()

	c.loads <- struct{}{}
	offs, times, err := s.loadIndexes(st.size, st.maxTS)
	<-c.loads

	c.mu.Lock()
	if s.ixGen != gen || s.ixRetired || s.removed.Load() || !s.pub.Load().onDisk {
		// The writer changed the files since they were read (a truncation,
		// a roll after it), or the segment went (retention, compaction,
		// close): what was read is this read's alone, and a failure to
		// read is not news. The caller's read retries on the current
		// state where it must.
		c.mu.Unlock()
		if err != nil {
			return nil, nil
		}
		return offs, times
	}
	warn := err != nil && !s.ixWarned
	if err != nil {
		offs, times = nil, nil
		c.failed++
		s.ixWarned = true
	}
	// The empty index of unusable files is cached too, so they are read
	// once (within the budget), and the warning written once.
	c.insertLocked(s, offs, times)
	c.mu.Unlock()
	if warn {
		log.Warn().Err(err).Int64("segment", s.base).
			Msg("sealed segment's index files are unusable: its reads scan batch headers from the segment's start until the next restart rebuilds them")
	}
	return offs, times
}

// install caches the indexes the writer just wrote to s's files (at its
// roll), over anything a load read before.
func (c *IndexCache) install(s *segment, offs []offsetEntry, times []timeEntry) {
	c.mu.Lock()
	defer c.mu.Unlock()
	s.ixGen++
	c.insertLocked(s, offs, times)
}

// insertLocked caches s's indexes, evicting least recently used entries
// past the budget. REQUIRES: c.mu held.
func (c *IndexCache) insertLocked(s *segment, offs []offsetEntry, times []timeEntry) {
	c.removeLocked(s)
	if c.budget == 0 {
		return
	}
	e := &indexEntry{s: s, offs: offs, times: times, bytes: indexBytes(offs, times)}
	c.m[s] = c.lru.PushFront(e)
	c.used += e.bytes
	for c.used > c.budget && c.lru.Len() > 1 {
		old := c.lru.Back()
		c.removeLocked(old.Value.(*indexEntry).s)
		c.evictions++
	}
}

// removeLocked forgets s's entry, if any. REQUIRES: c.mu held.
func (c *IndexCache) removeLocked(s *segment) {
	if el, ok := c.m[s]; ok {
		c.used -= el.Value.(*indexEntry).bytes
		c.lru.Remove(el)
		delete(c.m, s)
	}
}

// drop forgets s's indexes: the writer takes them back (a truncation
// into s), so its files are about to change.
func (c *IndexCache) drop(s *segment) {
	c.mu.Lock()
	defer c.mu.Unlock()
	s.ixGen++
	c.removeLocked(s)
}

// retire forgets s's indexes for good: its files are gone or replaced
// (retention, truncation, compaction, the log closed). A load under way
// keeps what it read to itself.
func (c *IndexCache) retire(s *segment) {
	c.mu.Lock()
	defer c.mu.Unlock()
	s.ixGen++
	s.ixRetired = true
	c.removeLocked(s)
}

// loadIndexes reads the sealed segment's index files and checks them
// against the segment as published (size bytes, largest timestamp maxTS):
// well-formed entries inside it (loadIndexFiles), the last offset entry
// naming the batch at its position (one header read), and the time
// index's last entry holding the segment's largest timestamp, as the
// files written at a roll do.
func (s *segment) loadIndexes(size, maxTS int64) ([]offsetEntry, []timeEntry, error) {
	dir := s.dir()
	offs, times, err := loadIndexFiles(s.fs, segmentPath(dir, s.base, ".index"), segmentPath(dir, s.base, ".timeindex"), size)
	if err != nil {
		return nil, nil, err
	}
	if n := len(offs); n > 0 {
		last := offs[n-1]
		hdr, err := s.readAt(int64(last.pos), recordbatch.HeaderLen)
		if err != nil {
			return nil, nil, err
		}
		if len(hdr) < recordbatch.HeaderLen {
			return nil, nil, fmt.Errorf("offset index entry %d at %d: past the segment's end", n-1, last.pos)
		}
		if got := recordbatch.LastOffset(hdr); got != s.base+int64(last.rel) {
			return nil, nil, fmt.Errorf("offset index entry %d names offset %d at %d, where the batch ends at %d",
				n-1, s.base+int64(last.rel), last.pos, got)
		}
	}
	switch n := len(times); {
	case n == 0 && maxTS >= 0:
		return nil, nil, fmt.Errorf("time index empty, the segment's largest timestamp %d", maxTS)
	case n > 0 && (times[n-1].ts != maxTS || times[n-1].rel < 0):
		return nil, nil, fmt.Errorf("time index ends at timestamp %d (offset %d), the segment's largest is %d",
			times[n-1].ts, s.base+int64(times[n-1].rel), maxTS)
	}
	return offs, times, nil
}
