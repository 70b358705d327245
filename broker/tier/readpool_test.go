package tier

import (
	"context"
	"errors"
	"testing"
	"time"
)

func goNow(fn func()) bool { go fn(); return true }

// A read's result is taken once, by the first poll after it finishes;
// polls before share the read under way; reads beyond threads + pending
// are refused.
func TestReadPool(t *testing.T) {
	p := NewReadPool(1, 1, time.Minute, context.Background(), goNow)
	release := make(chan struct{})
	calls := 0
	read := func(data string) func(context.Context) ReadResult {
		return func(ctx context.Context) ReadResult {
			calls++ // one thread: no two reads at once
			<-release
			return ReadResult{Data: []byte(data), OK: true}
		}
	}
	k1, k2, k3 := ReadKey{Offset: 1}, ReadKey{Offset: 2}, ReadKey{Offset: 3}
	_, done, wait1, err := p.Poll(k1, read("one"))
	if err != nil || done || wait1 == nil {
		t.Fatalf("first poll: done %t wait %v err %v", done, wait1, err)
	}
	if _, done, w, err := p.Poll(k1, read("again")); err != nil || done || w != wait1 {
		t.Fatalf("second poll of the same key must share the read: done %t err %v", done, err)
	}
	if _, _, _, err := p.Poll(k2, read("two")); err != nil {
		t.Fatalf("a queued read: %v", err)
	}
	if _, _, _, err := p.Poll(k3, read("three")); !errors.Is(err, ErrReadPoolFull) {
		t.Fatalf("a third read with one thread and one pending: %v, want ErrReadPoolFull", err)
	}
	close(release)
	<-wait1
	res, done, _, err := p.Poll(k1, read("not again"))
	if err != nil || !done || string(res.Data) != "one" {
		t.Fatalf("result: %q done %t err %v", res.Data, done, err)
	}
	if _, done, _, _ := p.Poll(k1, read("one more")); done {
		t.Fatal("a result must be taken once")
	}
	deadline := time.Now().Add(5 * time.Second)
	for p.Pending() > 0 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if p.Pending() != 0 {
		t.Fatalf("%d reads pending", p.Pending())
	}
	if calls != 3 {
		t.Fatalf("%d reads, want 3 (one, two, one more)", calls)
	}
}

// Results nobody takes are dropped after resultTTL, so the pool holds
// nothing for a consumer that went away.
func TestReadPoolExpires(t *testing.T) {
	p := NewReadPool(2, 2, time.Minute, context.Background(), goNow)
	p.resultTTL = 10 * time.Millisecond
	_, _, wait, _ := p.Poll(ReadKey{Offset: 1}, func(context.Context) ReadResult { return ReadResult{Data: make([]byte, 100)} })
	<-wait
	time.Sleep(20 * time.Millisecond)
	p.Poll(ReadKey{Offset: 9}, func(context.Context) ReadResult { return ReadResult{} })
	p.mu.Lock()
	_, kept := p.mu.tasks[ReadKey{Offset: 1}]
	p.mu.Unlock()
	if kept {
		t.Fatal("an expired result is still held")
	}
}

// Do's lookups share the reads' budget: a lookup takes a place a read
// would have, one beyond the bound is refused, and one that waits past
// the timeout for a thread is told so rather than run.
func TestReadPoolDo(t *testing.T) {
	p := NewReadPool(1, 1, 200*time.Millisecond, context.Background(), goNow)
	release := make(chan struct{})
	ran := make(chan error, 3)
	reading := make(chan struct{})
	_, _, wait, err := p.Poll(ReadKey{Offset: 1}, func(context.Context) ReadResult { close(reading); <-release; return ReadResult{} })
	if err != nil {
		t.Fatal(err)
	}
	<-reading // the one thread is taken
	if err := p.Do(func(ctx context.Context, err error) { ran <- err }); err != nil {
		t.Fatalf("a lookup queued behind one read: %v", err)
	}
	if err := p.Do(func(context.Context, error) { t.Error("a refused lookup ran") }); !errors.Is(err, ErrReadPoolFull) {
		t.Fatalf("a lookup beyond threads + pending: %v, want ErrReadPoolFull", err)
	}
	if err := <-ran; err == nil || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a lookup with no thread within the timeout: %v, want the deadline", err)
	}
	close(release)
	<-wait
	for p.Pending() > 0 {
		time.Sleep(time.Millisecond)
	}
	if err := p.Do(func(ctx context.Context, err error) {
		if err == nil && ctx.Err() != nil {
			err = ctx.Err()
		}
		ran <- err
	}); err != nil {
		t.Fatal(err)
	}
	if err := <-ran; err != nil {
		t.Fatalf("a lookup on a free pool: %v", err)
	}
}
