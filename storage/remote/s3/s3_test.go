package s3_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/fjordlog/fjord/storage/remote"
	"github.com/fjordlog/fjord/storage/remote/s3"
	"github.com/fjordlog/fjord/storage/remote/s3/weedtest"
)

// newStore starts weed mini with a bucket and returns a Store on it.
func newStore(t *testing.T, mutate func(*s3.Config)) (*weedtest.Server, *s3.Store, s3.Config) {
	t.Helper()
	w := weedtest.Start(t)
	w.CreateBucket(t, "fjord")
	cfg := s3.Config{
		Endpoint: w.Endpoint, Region: w.Region, Bucket: "fjord", PathStyle: true,
		AccessKeyID: w.AccessKey, SecretAccessKey: w.SecretKey,
	}
	if mutate != nil {
		mutate(&cfg)
	}
	st, err := s3.New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	return w, st, cfg
}

func read(t *testing.T, st remote.Store, key string, off, n int64) string {
	t.Helper()
	rc, err := st.Get(context.Background(), key, off, n)
	if err != nil {
		t.Fatalf("get %s [%d,+%d): %v", key, off, n, err)
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		t.Fatalf("read %s: %v", key, err)
	}
	return string(b)
}

// onlyReader hides every method but Read, as a network stream would.
type onlyReader struct{ r io.Reader }

func (o onlyReader) Read(p []byte) (int, error) { return o.r.Read(p) }

// failingReader gives n bytes, then fails.
type failingReader struct{ n int }

func (f *failingReader) Read(p []byte) (int, error) {
	if f.n == 0 {
		return 0, errors.New("disk read failed")
	}
	k := min(len(p), f.n)
	for i := range p[:k] {
		p[i] = 'x'
	}
	f.n -= k
	return k, nil
}

// TestStore runs the remote.Store contract against SeaweedFS.
func TestStore(t *testing.T) {
	ctx := context.Background()
	w, st, cfg := newStore(t, func(c *s3.Config) { c.KeyPrefix = "cluster-a/" })
	if err := st.CheckBucket(ctx); err != nil {
		t.Fatalf("CheckBucket: %v", err)
	}
	if err := st.Put(ctx, "t/0/00000000000000000000.log", strings.NewReader("hello world"), 11); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		off, n int64
		want   string
	}{{0, -1, "hello world"}, {6, 5, "world"}, {6, -1, "world"}, {6, 100, "world"}, {0, 1, "h"}, {11, -1, ""}, {11, 3, ""}, {3, 0, ""}} {
		if got := read(t, st, "t/0/00000000000000000000.log", c.off, c.n); got != c.want {
			t.Errorf("get at %d, %d bytes = %q, want %q", c.off, c.n, got, c.want)
		}
	}
	if _, err := st.Get(ctx, "t/0/00000000000000000000.log", 12, 1); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("get past the end: %v, want io.ErrUnexpectedEOF", err)
	}

	// The prefix is the store's: the raw bucket holds it, List hides it.
	raw, err := s3.New(ctx, s3.Config{Endpoint: cfg.Endpoint, Region: cfg.Region, Bucket: cfg.Bucket, PathStyle: true, AccessKeyID: w.AccessKey, SecretAccessKey: w.SecretKey})
	if err != nil {
		t.Fatal(err)
	}
	if got := read(t, raw, "cluster-a/t/0/00000000000000000000.log", 0, 5); got != "hello" {
		t.Errorf("raw key = %q", got)
	}

	// A stream that is not seekable goes up unsigned, in one PUT.
	if err := st.Put(ctx, "t/0/00000000000000000011.log", onlyReader{strings.NewReader("second")}, 6); err != nil {
		t.Fatalf("put of a stream: %v", err)
	}
	if err := st.Put(ctx, "t/1/00000000000000000000.log", bytes.NewReader(nil), 0); err != nil {
		t.Fatalf("put of an empty object: %v", err)
	}
	if got := read(t, st, "t/1/00000000000000000000.log", 0, -1); got != "" {
		t.Errorf("empty object = %q", got)
	}
	objs, err := st.List(ctx, "t/0/")
	if err != nil {
		t.Fatal(err)
	}
	if len(objs) != 2 || objs[0].Key != "t/0/00000000000000000000.log" || objs[0].Size != 11 ||
		objs[1].Key != "t/0/00000000000000000011.log" || objs[1].Size != 6 || objs[0].Modified.IsZero() {
		t.Errorf("list t/0/ = %+v", objs)
	}

	// Atomic replace: a Put replaces the whole object; a Put that fails
	// (short body, a body that fails mid-way, a longer body) leaves the
	// object as it was.
	key := "t/0/00000000000000000000.log"
	if err := st.Put(ctx, key, strings.NewReader("HELLO WORLD!"), 12); err != nil {
		t.Fatal(err)
	}
	if got := read(t, st, key, 0, -1); got != "HELLO WORLD!" {
		t.Fatalf("after replace: %q", got)
	}
	if err := st.Put(ctx, key, strings.NewReader("short"), 12); err == nil {
		t.Error("put of a short seekable body succeeded")
	}
	if err := st.Put(ctx, key, &failingReader{n: 6}, 12); err == nil {
		t.Error("put of a body that fails mid-way succeeded")
	}
	if err := st.Put(ctx, key, onlyReader{strings.NewReader("short")}, 12); err == nil {
		t.Error("put of a short stream succeeded")
	}
	if err := st.Put(ctx, key, onlyReader{strings.NewReader("far too long a body")}, 12); err == nil {
		t.Error("put of a long stream succeeded")
	}
	if got := read(t, st, key, 0, -1); got != "HELLO WORLD!" {
		t.Fatalf("after failed puts: %q, want the object as it was", got)
	}

	// Missing keys.
	if _, err := st.Get(ctx, "t/9/nope.log", 0, -1); !errors.Is(err, remote.ErrNotFound) {
		t.Errorf("get of a missing key: %v, want ErrNotFound", err)
	}
	if _, err := st.Get(ctx, "t/9/nope.log", 0, 0); !errors.Is(err, remote.ErrNotFound) {
		t.Errorf("empty get of a missing key: %v, want ErrNotFound", err)
	}
	if err := st.Delete(ctx, key); err != nil {
		t.Fatal(err)
	}
	if err := st.Delete(ctx, key); err != nil {
		t.Errorf("delete of a missing key: %v", err)
	}
	if _, err := st.Get(ctx, key, 0, -1); !errors.Is(err, remote.ErrNotFound) {
		t.Errorf("get after delete: %v", err)
	}
	if objs, err := st.List(ctx, "t/"); err != nil || len(objs) != 2 {
		t.Errorf("list after delete = %+v, %v", objs, err)
	}
}

// TestMissingBucket: every call on a bucket that does not exist says so.
func TestMissingBucket(t *testing.T) {
	ctx := context.Background()
	_, st, _ := newStore(t, func(c *s3.Config) { c.Bucket = "no-such-bucket" })
	err := st.CheckBucket(ctx)
	if !errors.Is(err, remote.ErrNoBucket) || !strings.Contains(err.Error(), "no-such-bucket") {
		t.Errorf("CheckBucket: %v, want ErrNoBucket naming the bucket", err)
	}
	if err := st.Put(ctx, "k", strings.NewReader("x"), 1); !errors.Is(err, remote.ErrNoBucket) {
		t.Errorf("put: %v, want ErrNoBucket", err)
	}
	if _, err := st.Get(ctx, "k", 0, -1); !errors.Is(err, remote.ErrNoBucket) {
		t.Errorf("get: %v, want ErrNoBucket", err)
	}
	if _, err := st.List(ctx, ""); !errors.Is(err, remote.ErrNoBucket) {
		t.Errorf("list: %v, want ErrNoBucket", err)
	}
}

// TestWrongCredentials: weed mini with an identity refuses a wrong secret
// and an unknown key id.
func TestWrongCredentials(t *testing.T) {
	ctx := context.Background()
	w, good, cfg := newStore(t, nil)
	if err := good.Put(ctx, "k", strings.NewReader("x"), 1); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ name, id, secret string }{
		{"wrong secret", w.AccessKey, "not-the-secret"},
		{"unknown key id", "AKIDUNKNOWN", w.SecretKey},
	} {
		bad := cfg
		bad.AccessKeyID, bad.SecretAccessKey = c.id, c.secret
		st, err := s3.New(ctx, bad)
		if err != nil {
			t.Fatal(err)
		}
		if err := st.CheckBucket(ctx); !errors.Is(err, remote.ErrAccessDenied) {
			t.Errorf("%s: CheckBucket: %v, want ErrAccessDenied", c.name, err)
		}
		if _, err := st.Get(ctx, "k", 0, -1); !errors.Is(err, remote.ErrAccessDenied) {
			t.Errorf("%s: get: %v, want ErrAccessDenied", c.name, err)
		}
		if err := st.Put(ctx, "k", strings.NewReader("y"), 1); !errors.Is(err, remote.ErrAccessDenied) {
			t.Errorf("%s: put: %v, want ErrAccessDenied", c.name, err)
		}
	}
	if got := read(t, good, "k", 0, -1); got != "x" {
		t.Errorf("object after refused puts = %q", got)
	}
}

// TestStoreStopped: with the store gone, calls fail as unavailable after
// the SDK's bounded retries, not hang.
func TestStoreStopped(t *testing.T) {
	ctx := context.Background()
	w, st, _ := newStore(t, nil)
	if err := st.Put(ctx, "k", strings.NewReader("x"), 1); err != nil {
		t.Fatal(err)
	}
	w.Stop()
	if !w.Stopped() {
		t.Fatal("weed is still running")
	}
	done := make(chan error, 1)
	began := time.Now()
	go func() {
		_, err := st.Get(ctx, "k", 0, -1)
		done <- err
	}()
	select {
	case err := <-done:
		if !errors.Is(err, remote.ErrUnavailable) {
			t.Errorf("get from a stopped store: %v, want ErrUnavailable", err)
		}
		t.Logf("get from a stopped store failed after %v: %v", time.Since(began).Round(time.Millisecond), err)
	case <-time.After(2 * time.Minute):
		t.Fatal("get from a stopped store has not returned after 2 minutes: the retries are not bounded")
	}
	if err := st.CheckBucket(ctx); !errors.Is(err, remote.ErrUnavailable) {
		t.Errorf("CheckBucket on a stopped store: %v, want ErrUnavailable", err)
	}
}

// TestNewRefusesHalfCredentials needs no store.
func TestNewRefusesHalfCredentials(t *testing.T) {
	if _, err := s3.New(context.Background(), s3.Config{Bucket: "b", AccessKeyID: "id"}); err == nil {
		t.Error("New with a key id and no secret succeeded")
	}
	if _, err := s3.New(context.Background(), s3.Config{}); err == nil {
		t.Error("New without a bucket succeeded")
	}
}
