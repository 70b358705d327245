package remote

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"
)

// TestFaultStore: each switch fails, delays or holds calls as it says,
// and the store works again once it is off.
func TestFaultStore(t *testing.T) {
	ctx := context.Background()
	f := NewFaultStore(NewMemStore())
	put := func(key, v string) error { return f.Put(ctx, key, strings.NewReader(v), int64(len(v))) }
	if err := put("a", "hello"); err != nil {
		t.Fatal(err)
	}
	f.Down(true)
	if err := put("b", "x"); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("down: %v", err)
	}
	f.Down(false)
	f.Deny(true)
	if _, err := f.Get(ctx, "a", 0, -1); Kind(err) != "access_denied" {
		t.Fatalf("denied: %v", err)
	}
	f.Deny(false)
	if objs, err := f.List(ctx, ""); err != nil || len(objs) != 1 {
		t.Fatalf("after the faults: %v %v", objs, err)
	}
	if ok, err := f.Corrupt(ctx, "a", 0); !ok || err != nil {
		t.Fatalf("corrupt: %v %v", ok, err)
	}
	rc, err := f.Get(ctx, "a", 0, -1)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(rc)
	if string(b) == "hello" || string(b[1:]) != "ello" {
		t.Fatalf("corrupted object reads %q", b)
	}
	f.Slow(50 * time.Millisecond)
	short, cancel := context.WithTimeout(ctx, 10*time.Millisecond)
	defer cancel()
	if err := f.Delete(short, "a"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("slow delete past its deadline: %v", err)
	}
	f.Slow(0)

	held, release := f.HoldPuts(".log")
	done := make(chan error, 1)
	go func() { done <- put("seg.log", "data") }()
	if k := <-held; k != "seg.log" {
		t.Fatalf("held %q", k)
	}
	if err := put("seg.index", "i"); err != nil {
		t.Fatalf("a put not held: %v", err)
	}
	select {
	case err := <-done:
		t.Fatalf("held put returned %v before release", err)
	case <-time.After(50 * time.Millisecond):
	}
	release()
	release()
	if err := <-done; err != nil {
		t.Fatalf("released put: %v", err)
	}
	_, release = f.HoldPuts("")
	defer release()
	cctx, ccancel := context.WithCancel(ctx)
	go func() { time.Sleep(20 * time.Millisecond); ccancel() }()
	if err := f.Put(cctx, "k", strings.NewReader("v"), 1); !errors.Is(err, context.Canceled) {
		t.Fatalf("held put, cancelled: %v", err)
	}
	if f.Calls() < 9 {
		t.Fatalf("counted %d calls", f.Calls())
	}
}
