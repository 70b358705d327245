package remote

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
)

func TestMemStore(t *testing.T) {
	ctx := context.Background()
	m := NewMemStore()
	if err := m.Put(ctx, "a/1", strings.NewReader("hello world"), 11); err != nil {
		t.Fatal(err)
	}
	if err := m.Put(ctx, "a/2", strings.NewReader("short"), 9); err == nil || m.Len() != 1 {
		t.Fatalf("short body: err %v, %d objects; want an error and nothing stored", err, m.Len())
	}
	read := func(off, n int64) string {
		t.Helper()
		rc, err := m.Get(ctx, "a/1", off, n)
		if err != nil {
			t.Fatal(err)
		}
		defer rc.Close()
		b, _ := io.ReadAll(rc)
		return string(b)
	}
	if got := read(6, 5); got != "world" {
		t.Fatalf("ranged get = %q", got)
	}
	if got := read(6, -1); got != "world" {
		t.Fatalf("get to end = %q", got)
	}
	if got := read(6, 100); got != "world" {
		t.Fatalf("get past end = %q", got)
	}
	if _, err := m.Get(ctx, "a/1", 12, 1); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("get beyond the end: %v", err)
	}
	if _, err := m.Get(ctx, "nope", 0, -1); !errors.Is(err, ErrNotFound) || Kind(err) != "not_found" {
		t.Fatalf("missing key: %v", err)
	}
	if !m.Corrupt("a/1", 0) || read(0, 1) == "h" {
		t.Fatal("Corrupt did not change the byte")
	}
	m.SetFault(fmt.Errorf("dial: %w", ErrUnavailable))
	if err := m.Delete(ctx, "a/1"); Kind(err) != "unavailable" {
		t.Fatalf("faulted delete: %v", err)
	}
	m.SetFault(nil)
	objs, err := m.List(ctx, "a/")
	if err != nil || len(objs) != 1 || objs[0].Key != "a/1" || objs[0].Size != 11 {
		t.Fatalf("list = %v, %v", objs, err)
	}
	if err := m.Delete(ctx, "a/1"); err != nil || m.Len() != 0 {
		t.Fatalf("delete: %v, %d left", err, m.Len())
	}
	if err := m.Delete(ctx, "a/1"); err != nil {
		t.Fatalf("delete of a missing key: %v", err)
	}
}
