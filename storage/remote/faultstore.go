package remote

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"
)

// FaultStore wraps a Store for tests of the code above it (here and in
// other packages): switches make every call fail as a store that cannot be
// reached (Down) or that refuses the credentials (Deny), delay every call
// (Slow), or hold Puts until released (HoldPuts: a node stopped mid-upload),
// and Corrupt damages a stored object. It counts the calls that reached
// it, so a test sees how often its caller retried.
//
// Invariant: the switches are read and written under mu only; a held Put
// waits on hold (closed by release) or its context, never under mu.
type FaultStore struct {
	inner Store
	mu    sync.Mutex
	down  bool
	deny  bool
	slow  time.Duration
	hold  chan struct{} // non-nil: Puts whose key contains holdKey wait
	held  chan string   // a held Put's key, sent when it starts to wait
	key   string
	calls int
}

// NewFaultStore wraps inner with every switch off.
func NewFaultStore(inner Store) *FaultStore { return &FaultStore{inner: inner} }

// Down makes every call fail with ErrUnavailable while on.
func (f *FaultStore) Down(on bool) { f.mu.Lock(); f.down = on; f.mu.Unlock() }

// Deny makes every call fail with ErrAccessDenied while on (revoked keys).
func (f *FaultStore) Deny(on bool) { f.mu.Lock(); f.deny = on; f.mu.Unlock() }

// Slow delays every call by d (0: none); a call whose context ends first
// fails with its error.
func (f *FaultStore) Slow(d time.Duration) { f.mu.Lock(); f.slow = d; f.mu.Unlock() }

// Calls is how many calls reached the store (failed ones included).
func (f *FaultStore) Calls() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls
}

// HoldPuts makes each Put whose key contains substr wait, before storing
// anything, until release is called or its context ends; held receives
// each such Put's key as it starts to wait (buffered; further sends are
// dropped when full). Calling release more than once is harmless.
func (f *FaultStore) HoldPuts(substr string) (held <-chan string, release func()) {
	f.mu.Lock()
	defer f.mu.Unlock()
	hold, ch := make(chan struct{}), make(chan string, 16)
	f.hold, f.held, f.key = hold, ch, substr
	var once sync.Once
	return ch, func() {
		once.Do(func() {
			f.mu.Lock()
			if f.hold == hold {
				f.hold, f.held = nil, nil
			}
			f.mu.Unlock()
			close(hold)
		})
	}
}

// Corrupt flips the byte at off of key's object, read and put back
// through the wrapped store; it reports whether the object was long
// enough.
func (f *FaultStore) Corrupt(ctx context.Context, key string, off int64) (bool, error) {
	rc, err := f.inner.Get(ctx, key, 0, -1)
	if err != nil {
		return false, err
	}
	data, err := io.ReadAll(rc)
	rc.Close()
	if err != nil || off < 0 || off >= int64(len(data)) {
		return false, err
	}
	data[off] ^= 0xff
	return true, f.inner.Put(ctx, key, bytes.NewReader(data), int64(len(data)))
}

// enter counts a call, applies the delay and returns the fault to fail
// it with, if any.
func (f *FaultStore) enter(ctx context.Context, op, key string) error {
	f.mu.Lock()
	f.calls++
	slow, down, deny := f.slow, f.down, f.deny
	f.mu.Unlock()
	if slow > 0 {
		t := time.NewTimer(slow)
		defer t.Stop()
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s %s: %w", op, key, ctx.Err())
		case <-t.C:
		}
	}
	switch {
	case deny:
		return fmt.Errorf("%s %s: injected: %w", op, key, ErrAccessDenied)
	case down:
		return fmt.Errorf("%s %s: injected: %w", op, key, ErrUnavailable)
	}
	return ctx.Err()
}

func (f *FaultStore) Put(ctx context.Context, key string, body io.Reader, size int64) error {
	if err := f.enter(ctx, "put", key); err != nil {
		return err
	}
	f.mu.Lock()
	hold, held := f.hold, f.held
	match := hold != nil && strings.Contains(key, f.key)
	f.mu.Unlock()
	if match {
		select {
		case held <- key:
		default:
		}
		select {
		case <-hold:
		case <-ctx.Done():
			return fmt.Errorf("put %s: held, then %w", key, ctx.Err())
		}
	}
	return f.inner.Put(ctx, key, body, size)
}

func (f *FaultStore) Get(ctx context.Context, key string, off, n int64) (io.ReadCloser, error) {
	if err := f.enter(ctx, "get", key); err != nil {
		return nil, err
	}
	return f.inner.Get(ctx, key, off, n)
}

func (f *FaultStore) Delete(ctx context.Context, key string) error {
	if err := f.enter(ctx, "delete", key); err != nil {
		return err
	}
	return f.inner.Delete(ctx, key)
}

func (f *FaultStore) List(ctx context.Context, prefix string) ([]Object, error) {
	if err := f.enter(ctx, "list", prefix); err != nil {
		return nil, err
	}
	return f.inner.List(ctx, prefix)
}

var _ Store = (*FaultStore)(nil)
