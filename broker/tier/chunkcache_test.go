package tier

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fjordlog/fjord/protocol/lifecycle"
	"github.com/fjordlog/fjord/storage/remote"
)

// countingStore counts Gets and can hold them until release is closed.
type countingStore struct {
	remote.Store
	gets    atomic.Int64
	release chan struct{} // nil: Gets go through
}

func (s *countingStore) Get(ctx context.Context, key string, off, n int64) (io.ReadCloser, error) {
	s.gets.Add(1)
	if s.release != nil {
		select {
		case <-s.release:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return s.Store.Get(ctx, key, off, n)
}

func putObject(t *testing.T, store remote.Store, key string, size int) []byte {
	t.Helper()
	data := make([]byte, size)
	for i := range data {
		data[i] = byte(rand.IntN(256))
	}
	if err := store.Put(context.Background(), key, bytes.NewReader(data), int64(size)); err != nil {
		t.Fatal(err)
	}
	return data
}

// Any range read through the cache is the object's bytes, whatever the
// chunk boundaries, and a slice handed out is the caller's to change.
func TestChunkCacheReadsRanges(t *testing.T) {
	store := &countingStore{Store: remote.NewMemStore()}
	want := putObject(t, store, "seg.log", 10_000)
	c := NewChunkCache(store, 1000, 1<<20, 0, context.Background(), goNow)
	ctx := context.Background()
	for i := 0; i < 500; i++ {
		off := int64(rand.IntN(10_000))
		n := int64(rand.IntN(3000))
		got, err := c.Read(ctx, "seg.log", 10_000, off, n)
		if err != nil {
			t.Fatal(err)
		}
		if end := min(off+n, 10_000); !bytes.Equal(got, want[off:end]) {
			t.Fatalf("read [%d, +%d): %d bytes, not the object's", off, n, len(got))
		}
		for j := range got {
			got[j] = 0 // the caller's: must not reach the cache
		}
	}
	if g := store.gets.Load(); g != 10 {
		t.Fatalf("%d Gets, want one per chunk (10)", g)
	}
	if m := c.Metrics(); m.Bytes != 10_000 || m.Misses != 10 {
		t.Fatalf("metrics %+v", m)
	}
	whole, err := c.Read(ctx, "seg.log", -1, 0, -1)
	if err != nil || !bytes.Equal(whole, want) {
		t.Fatalf("whole object: %v", err)
	}
	if _, err := c.Read(ctx, "seg.log", 10_000, 10_001, 5); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("read past the end: %v", err)
	}
}

// The cache never holds more than its bound: least recently used chunks
// go first, and a chunk read again after eviction is read again.
func TestChunkCacheBoundedLRU(t *testing.T) {
	store := &countingStore{Store: remote.NewMemStore()}
	putObject(t, store, "a", 8000)
	c := NewChunkCache(store, 1000, 3000, 0, context.Background(), goNow)
	ctx := context.Background()
	read := func(chunk int64) {
		t.Helper()
		if _, err := c.Read(ctx, "a", 8000, chunk*1000, 10); err != nil {
			t.Fatal(err)
		}
		if b := c.Metrics().Bytes; b > 3000 {
			t.Fatalf("cache holds %d bytes, bound 3000", b)
		}
	}
	read(0)
	read(1)
	read(2)
	read(0) // 0 is now the most recent: 1 goes next
	read(3)
	gets := store.gets.Load()
	read(0)
	read(2)
	read(3)
	if store.gets.Load() != gets {
		t.Fatalf("chunks 0, 2, 3 should be cached")
	}
	read(1)
	if store.gets.Load() != gets+1 {
		t.Fatalf("chunk 1 should have been evicted and read again")
	}
	if m := c.Metrics(); m.Evictions != 2 {
		t.Fatalf("metrics %+v, want 2 evictions", m)
	}
}

// Readers of one chunk at once share one Get.
func TestChunkCacheSingleFlight(t *testing.T) {
	store := &countingStore{Store: remote.NewMemStore(), release: make(chan struct{})}
	want := putObject(t, store, "a", 4000)
	c := NewChunkCache(store, 4000, 1<<20, 0, context.Background(), goNow)
	var wg sync.WaitGroup
	errs := make(chan error, 20)
	for i := 0; i < 20; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got, err := c.Read(context.Background(), "a", 4000, int64(i*100), 100)
			if err == nil && !bytes.Equal(got, want[i*100:i*100+100]) {
				err = fmt.Errorf("reader %d: wrong bytes", i)
			}
			errs <- err
		}()
	}
	time.Sleep(50 * time.Millisecond) // let the readers pile up on the Get
	close(store.release)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if g := store.gets.Load(); g != 1 {
		t.Fatalf("%d Gets for one chunk read by 20 readers at once, want 1", g)
	}
}

// Reading a chunk reads the next ones ahead, so a sequential reader
// finds them cached; a failed Get is not cached.
func TestChunkCacheReadAhead(t *testing.T) {
	mem := remote.NewMemStore()
	store := &countingStore{Store: mem}
	putObject(t, store, "a", 10_000)
	c := NewChunkCache(store, 1000, 1<<20, 2, context.Background(), goNow)
	ctx := context.Background()
	if _, err := c.Read(ctx, "a", 10_000, 0, 100); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return c.Metrics().Bytes == 3000 })
	misses := c.Metrics().Misses
	for off := int64(100); off < 10_000; off += 500 {
		if _, err := c.Read(ctx, "a", 10_000, off, 500); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Millisecond)
	}
	m := c.Metrics()
	if m.Prefetches < 8 {
		t.Fatalf("metrics %+v: want read-ahead of chunks 1..9", m)
	}
	if m.Misses != misses {
		t.Logf("metrics %+v: a read overtook its read-ahead (%d misses after the first read)", m, m.Misses-misses)
	}

	putObject(t, mem, "b", 1000)
	mem.SetFault(fmt.Errorf("%w: injected", remote.ErrUnavailable))
	if _, err := c.Read(ctx, "b", 1000, 0, 10); !errors.Is(err, remote.ErrUnavailable) {
		t.Fatalf("read with the store down: %v", err)
	}
	mem.SetFault(nil)
	if _, err := c.Read(ctx, "b", 1000, 0, 10); err != nil {
		t.Fatalf("read after the store is back: %v (a failure must not be cached)", err)
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met in 5s")
		}
		time.Sleep(time.Millisecond)
	}
}

// Forget drops an object's chunks (a damaged read is not kept): the next
// read gets the store's bytes again.
func TestChunkCacheForget(t *testing.T) {
	store := &countingStore{Store: remote.NewMemStore()}
	putObject(t, store, "a", 3000)
	putObject(t, store, "b", 1000)
	c := NewChunkCache(store, 1000, 1<<20, 0, context.Background(), goNow)
	ctx := context.Background()
	for _, o := range []string{"a", "b"} {
		if _, err := c.Read(ctx, o, -1, 0, -1); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.Read(ctx, "a", 3000, 0, 3000); err != nil {
		t.Fatal(err)
	}
	c.Forget("a")
	if m := c.Metrics(); m.Bytes != 1000 {
		t.Fatalf("after Forget(a): %d bytes cached, want b's 1000", m.Bytes)
	}
	gets := store.gets.Load()
	if _, err := c.Read(ctx, "a", 3000, 1500, 10); err != nil {
		t.Fatal(err)
	}
	if store.gets.Load() != gets+1 {
		t.Fatal("a forgotten chunk must be read from the store again")
	}
}

// slowStore holds every Get past an object's first bytes until its
// context ends, and counts the Gets under way and any started after the
// node closed.
type slowStore struct {
	remote.Store
	inFlight, afterClose atomic.Int64
	closed               atomic.Bool
}

func (s *slowStore) Get(ctx context.Context, key string, off, n int64) (io.ReadCloser, error) {
	if off == 0 {
		return s.Store.Get(ctx, key, off, n)
	}
	if s.closed.Load() {
		s.afterClose.Add(1)
	}
	s.inFlight.Add(1)
	defer s.inFlight.Add(-1)
	<-ctx.Done()
	return nil, ctx.Err()
}

// Shutting the node down ends the cache's Gets, read-ahead and a
// reader's own, and waits for the read-ahead: once it returns nothing
// of the cache is touching the store, and nothing starts after.
func TestChunkCacheReadAheadEndsAtShutdown(t *testing.T) {
	store := &slowStore{Store: remote.NewMemStore()}
	putObject(t, store, "a", 10_000)
	var node lifecycle.Group
	c := NewChunkCache(store, 1000, 1<<20, 4, node.Context(), node.Go)
	ctx := context.Background()
	if _, err := c.Read(ctx, "a", 10_000, 0, 100); err != nil {
		t.Fatal(err)
	}
	// A reader of the node's (as the remote reader pool runs them) held
	// on chunk 8, beyond the read-ahead of chunks 1..4.
	readErr := make(chan error, 1)
	node.Go(func() {
		_, err := c.Read(ctx, "a", 10_000, 8000, 100)
		readErr <- err
	})
	waitFor(t, func() bool { return store.inFlight.Load() == 5 })

	stopped := make(chan struct{})
	go func() {
		node.Stop()
		close(stopped)
	}()
	waitFor(t, func() bool {
		select {
		case <-stopped:
			return true
		default:
			return false
		}
	})
	store.closed.Store(true)
	if n := store.inFlight.Load(); n != 0 {
		t.Fatalf("%d Gets of the cache still under way after the node stopped", n)
	}
	if err := <-readErr; !errors.Is(err, context.Canceled) {
		t.Fatalf("the reader's Get at shutdown: %v, want it cancelled", err)
	}
	prefetches := c.Metrics().Prefetches
	if _, err := c.Read(ctx, "a", 10_000, 0, 100); err != nil {
		t.Fatal(err)
	}
	if n := store.afterClose.Load(); n != 0 || c.Metrics().Prefetches != prefetches {
		t.Fatalf("after the node stopped: %d Gets, %d read-aheads started", n, c.Metrics().Prefetches-prefetches)
	}
}
