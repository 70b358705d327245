package tier

import (
	"container/list"
	"context"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fjordlog/fjord/storage/remote"
)

// ChunkCache is the read cache of remote segments (Aiven's
// rsm.config.fetch.chunk.cache.*): objects are read from the store in
// chunks of ChunkSize bytes, kept in memory least recently used first
// out, so a consumer reading a cold segment pays one Get per chunk
// rather than several per fetch. Reading chunk i of an object starts
// reads of the next Prefetch chunks in the background (read-ahead), so a
// consumer reading in order finds them cached; concurrent reads of one
// chunk share one Get (single flight). An object whose size is not known
// (a segment's .index) is cached whole as one entry.
//
// Memory: the cached chunks (<= maxBytes), plus the chunks being read:
// one per reader (the node's remote reader pool bounds them) and at most
// maxPrefetching read-ahead ones.
//
// Shutdown: read-ahead runs on goroutines the node tracks (goFn), and
// every Get the cache starts, a reader's included, is cancelled with
// base, so once the node has cancelled base and waited for its
// goroutines no Get of the cache is left touching the store.
//
// Invariants: bytes <= maxBytes (an entry larger than maxBytes is served
// and not kept); every element of lru is in entries and the other way
// round; a key is in at most one of entries and loading. Cached bytes are
// never handed out: every Read returns a fresh slice, which its caller
// may pool and reuse. mu is a leaf, never held across a Get.
type ChunkCache struct {
	store     remote.Store
	chunkSize int64
	maxBytes  int64
	prefetch  int
	base      context.Context   // cancelled when the node stops
	goFn      func(func()) bool // runs a tracked goroutine; false: the node is closing

	mu struct {
		sync.Mutex
		entries map[chunkKey]*list.Element // of *chunkEntry
		lru     list.List                  // front: most recently used
		bytes   int64
		loading map[chunkKey]*chunkLoad
		// prefetching counts read-ahead loads in flight: at most
		// maxPrefetching, so read-ahead cannot queue unbounded Gets.
		prefetching int
	}
	hits, misses, prefetches, evictions atomic.Uint64
}

// maxPrefetching bounds the read-ahead Gets in flight per cache.
const maxPrefetching = 8

// prefetchTimeout bounds one read-ahead Get (nobody waits for it).
const prefetchTimeout = 30 * time.Second

// chunkKey names a cached chunk: index -1 is a whole object.
type chunkKey struct {
	object string
	index  int64
}

type chunkEntry struct {
	key  chunkKey
	data []byte
}

// chunkLoad is a Get in flight; done closes once data or err is set.
type chunkLoad struct {
	done chan struct{}
	data []byte
	err  error
}

// CacheMetrics are a ChunkCache's counters and size.
type CacheMetrics struct {
	Hits, Misses, Prefetches, Evictions uint64
	Bytes                               int64
}

// NewChunkCache returns a cache over store of at most maxBytes in chunks
// of chunkSize, reading prefetch chunks ahead. base is cancelled when the
// node stops, and cancels every Get of the cache; goFn runs a read-ahead
// on a goroutine the node waits for at shutdown, false when it is
// closing (the read-ahead is then skipped).
func NewChunkCache(store remote.Store, chunkSize, maxBytes int64, prefetch int, base context.Context, goFn func(func()) bool) *ChunkCache {
	c := &ChunkCache{store: store, chunkSize: max(chunkSize, 1), maxBytes: maxBytes, prefetch: max(prefetch, 0), base: base, goFn: goFn}
	c.mu.entries = make(map[chunkKey]*list.Element)
	c.mu.loading = make(map[chunkKey]*chunkLoad)
	return c
}

// Metrics returns the counters and the bytes held.
func (c *ChunkCache) Metrics() CacheMetrics {
	c.mu.Lock()
	b := c.mu.bytes
	c.mu.Unlock()
	return CacheMetrics{Hits: c.hits.Load(), Misses: c.misses.Load(), Prefetches: c.prefetches.Load(), Evictions: c.evictions.Load(), Bytes: b}
}

// Read returns n bytes of object from off (fewer at its end), the object
// being size bytes long; n < 0 (or size < 0) reads the whole object,
// cached as one entry. The slice is the caller's.
func (c *ChunkCache) Read(ctx context.Context, object string, size, off, n int64) ([]byte, error) {
	if n < 0 || size < 0 {
		data, err := c.chunk(ctx, chunkKey{object, -1}, 0, -1)
		if err != nil {
			return nil, err
		}
		if off > int64(len(data)) {
			return nil, fmt.Errorf("tier: %s: offset %d past its end %d: %w", object, off, len(data), io.ErrUnexpectedEOF)
		}
		return append([]byte(nil), data[off:]...), nil
	}
	if off >= size || n == 0 {
		if off > size {
			return nil, fmt.Errorf("tier: %s: offset %d past its end %d: %w", object, off, size, io.ErrUnexpectedEOF)
		}
		return []byte{}, nil
	}
	end := min(off+n, size)
	out := make([]byte, 0, end-off)
	first, last := off/c.chunkSize, (end-1)/c.chunkSize
	for i := first; i <= last; i++ {
		cstart := i * c.chunkSize
		data, err := c.chunk(ctx, chunkKey{object, i}, cstart, min(c.chunkSize, size-cstart))
		if err != nil {
			return nil, err
		}
		lo, hi := max(off, cstart)-cstart, min(end, cstart+int64(len(data)))-cstart
		if lo > hi || int64(len(data)) < min(c.chunkSize, size-cstart) {
			return nil, fmt.Errorf("tier: %s: chunk %d is %d bytes, want %d: %w", object, i, len(data), min(c.chunkSize, size-cstart), io.ErrUnexpectedEOF)
		}
		out = append(out, data[lo:hi]...)
	}
	c.readAhead(object, size, last)
	return out, nil
}

// chunk returns key's bytes, from the cache, a load in flight, or a Get
// of n bytes at off. The slice is shared: read only.
func (c *ChunkCache) chunk(ctx context.Context, key chunkKey, off, n int64) ([]byte, error) {
	c.mu.Lock()
	if el, ok := c.mu.entries[key]; ok {
		c.mu.lru.MoveToFront(el)
		c.mu.Unlock()
		c.hits.Add(1)
		return el.Value.(*chunkEntry).data, nil
	}
	ld, ok := c.mu.loading[key]
	if !ok {
		ld = &chunkLoad{done: make(chan struct{})}
		c.mu.loading[key] = ld
	}
	c.mu.Unlock()
	if ok { // another reader's Get (or read-ahead) is under way
		c.hits.Add(1)
		select {
		case <-ld.done:
			return ld.data, ld.err
		case <-ctx.Done():
			return nil, fmt.Errorf("tier: waiting for %s chunk %d: %w", key.object, key.index, context.Cause(ctx))
		}
	}
	c.misses.Add(1)
	// The Get is the loader's own, not cancelled by this reader leaving:
	// other readers may be waiting on it. It is bounded all the same, and
	// ends when the node stops.
	lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), prefetchTimeout)
	defer cancel()
	defer context.AfterFunc(c.base, cancel)()
	c.load(lctx, key, ld, off, n)
	return ld.data, ld.err
}

// load runs ld's Get and publishes its result.
func (c *ChunkCache) load(ctx context.Context, key chunkKey, ld *chunkLoad, off, n int64) {
	ld.data, ld.err = getAll(ctx, c.store, key.object, off, n)
	c.mu.Lock()
	delete(c.mu.loading, key)
	if ld.err == nil {
		c.insertLocked(key, ld.data)
	}
	c.mu.Unlock()
	close(ld.done)
}

// insertLocked caches data under key, evicting the least recently used
// entries down to maxBytes.
func (c *ChunkCache) insertLocked(key chunkKey, data []byte) {
	if int64(len(data)) > c.maxBytes {
		return
	}
	c.mu.entries[key] = c.mu.lru.PushFront(&chunkEntry{key: key, data: data})
	c.mu.bytes += int64(len(data))
	for c.mu.bytes > c.maxBytes {
		el := c.mu.lru.Back()
		e := el.Value.(*chunkEntry)
		c.mu.lru.Remove(el)
		delete(c.mu.entries, e.key)
		c.mu.bytes -= int64(len(e.data))
		c.evictions.Add(1)
	}
}

// Forget drops every cached chunk of object (one found damaged). A load
// under way is left to finish: its result is as good as a new read's.
func (c *ChunkCache) Forget(object string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for el := c.mu.lru.Front(); el != nil; {
		next := el.Next()
		if e := el.Value.(*chunkEntry); e.key.object == object {
			c.mu.lru.Remove(el)
			delete(c.mu.entries, e.key)
			c.mu.bytes -= int64(len(e.data))
		}
		el = next
	}
}

// readAhead starts Gets of the prefetch chunks after last that are
// neither cached nor loading, within maxPrefetching.
func (c *ChunkCache) readAhead(object string, size, last int64) {
	for i := last + 1; i <= last+int64(c.prefetch) && i*c.chunkSize < size; i++ {
		key := chunkKey{object, i}
		c.mu.Lock()
		_, cached := c.mu.entries[key]
		_, loading := c.mu.loading[key]
		if cached || loading || c.mu.prefetching >= maxPrefetching {
			c.mu.Unlock()
			continue
		}
		ld := &chunkLoad{done: make(chan struct{})}
		c.mu.loading[key] = ld
		c.mu.prefetching++
		c.mu.Unlock()
		off := i * c.chunkSize
		started := c.goFn(func() {
			ctx, cancel := context.WithTimeout(c.base, prefetchTimeout)
			defer cancel()
			c.load(ctx, key, ld, off, min(c.chunkSize, size-off))
			c.mu.Lock()
			c.mu.prefetching--
			c.mu.Unlock()
		})
		if !started { // the node is closing: undo, and read no further ahead
			c.mu.Lock()
			delete(c.mu.loading, key)
			c.mu.prefetching--
			c.mu.Unlock()
			ld.err = fmt.Errorf("tier: read-ahead of %s chunk %d: %w", object, i, context.Canceled)
			close(ld.done)
			return
		}
		c.prefetches.Add(1)
	}
}

// getAll reads n bytes of key at off (n < 0: to the end).
func getAll(ctx context.Context, store remote.Store, key string, off, n int64) ([]byte, error) {
	rc, err := store.Get(ctx, key, off, n)
	if err != nil {
		return nil, fmt.Errorf("tier: get %s: %w", key, err)
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		return nil, fmt.Errorf("tier: get %s: %w", key, err)
	}
	return b, nil
}
