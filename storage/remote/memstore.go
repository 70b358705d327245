package remote

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"sort"
	"strings"
	"sync"
	"time"
)

// MemStore is a Store in memory, for tests of the code above the store.
// It can be made to fail (SetFault) or to damage an object (Corrupt), so
// a test shows what its caller does with a store that is down, refuses
// its credentials, or returns bad bytes.
//
// Invariant: objects holds only complete Puts; a Put whose body fails or
// is short stores nothing.
type MemStore struct {
	mu      sync.Mutex
	objects map[string]memObject
	fault   error // returned by every call while set
	now     func() time.Time
}

type memObject struct {
	data     []byte
	modified time.Time
}

// NewMemStore returns an empty MemStore.
func NewMemStore() *MemStore {
	return &MemStore{objects: make(map[string]memObject), now: time.Now}
}

// SetFault makes every call fail with err until SetFault(nil).
func (m *MemStore) SetFault(err error) {
	m.mu.Lock()
	m.fault = err
	m.mu.Unlock()
}

// Corrupt flips one byte of key's object at off; it reports whether the
// object exists and is long enough.
func (m *MemStore) Corrupt(key string, off int64) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	o, ok := m.objects[key]
	if !ok || off < 0 || off >= int64(len(o.data)) {
		return false
	}
	data := bytes.Clone(o.data)
	data[off] ^= 0xff
	m.objects[key] = memObject{data: data, modified: o.modified}
	return true
}

// Len returns the number of objects stored.
func (m *MemStore) Len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.objects)
}

func (m *MemStore) Put(ctx context.Context, key string, body io.Reader, size int64) error {
	if err := m.check(ctx); err != nil {
		return err
	}
	data, err := io.ReadAll(io.LimitReader(body, size+1))
	if err != nil {
		return fmt.Errorf("put %s: %w", key, err)
	}
	if int64(len(data)) != size {
		return fmt.Errorf("put %s: body has %d bytes, want %d", key, len(data), size)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.fault != nil {
		return fmt.Errorf("put %s: %w", key, m.fault)
	}
	m.objects[key] = memObject{data: data, modified: m.now()}
	return nil
}

func (m *MemStore) Get(ctx context.Context, key string, off, n int64) (io.ReadCloser, error) {
	if err := m.check(ctx); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	o, ok := m.objects[key]
	if !ok {
		return nil, fmt.Errorf("get %s: %w", key, ErrNotFound)
	}
	if off < 0 || off > int64(len(o.data)) {
		return nil, fmt.Errorf("get %s at %d of %d bytes: %w", key, off, len(o.data), io.ErrUnexpectedEOF)
	}
	end := int64(len(o.data))
	if n >= 0 && off+n < end {
		end = off + n
	}
	// o.data is never written in place (Corrupt copies), so the slice is
	// safe to hand out after the lock is released.
	return io.NopCloser(bytes.NewReader(o.data[off:end])), nil
}

func (m *MemStore) Delete(ctx context.Context, key string) error {
	if err := m.check(ctx); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.objects, key)
	return nil
}

func (m *MemStore) List(ctx context.Context, prefix string) ([]Object, error) {
	if err := m.check(ctx); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []Object
	for k, o := range m.objects {
		if strings.HasPrefix(k, prefix) {
			out = append(out, Object{Key: k, Size: int64(len(o.data)), Modified: o.modified})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out, nil
}

func (m *MemStore) check(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.fault
}

var _ Store = (*MemStore)(nil)
