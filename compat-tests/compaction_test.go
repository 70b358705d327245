package compattests

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Many updates to few keys on a compacted topic: after cleaning, a full read
// returns the latest value of every key, at the offset it was written at,
// far fewer records than were written, and no tombstoned key once the
// tombstone's retention has passed.
func TestCompaction(t *testing.T) {
	br := startBroker(t, t.TempDir(), "log.cleaner.backoff.ms=200")
	adm := newAdmin(t, br.Addr)
	cfg := func(s string) *string { return &s }
	createTopic(t, adm, "compacted", 1, map[string]*string{
		"cleanup.policy": cfg("compact"), "segment.bytes": cfg("1024"), "delete.retention.ms": cfg("100"),
	})
	cl := newClient(t, br.Addr, kgo.DefaultProduceTopic("compacted"), kgo.ProducerLinger(0))
	ctx := testCtx(t, time.Minute)
	const keys, rounds = 10, 200
	written := map[int64]string{} // offset → "key=value"
	latest := map[string]string{}
	for r := range rounds {
		for k := range keys {
			key, val := fmt.Sprintf("k%d", k), fmt.Sprintf("v%d", r)
			res := cl.ProduceSync(ctx, &kgo.Record{Key: []byte(key), Value: []byte(val)})
			if err := res.FirstErr(); err != nil {
				t.Fatal(err)
			}
			written[res[0].Record.Offset] = key + "=" + val
			latest[key] = val
		}
	}
	// Tombstone k0, then push it out of the active segment.
	if err := cl.ProduceSync(ctx, &kgo.Record{Key: []byte("k0")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	delete(latest, "k0")
	for i := range 40 {
		key := fmt.Sprintf("filler%d", i)
		res := cl.ProduceSync(ctx, &kgo.Record{Key: []byte(key), Value: []byte("x")})
		written[res[0].Record.Offset] = key + "=x"
		latest[key] = "x"
	}
	total := len(written) + 1

	readAll := func() (map[string]string, int, bool) {
		c := newClient(t, br.Addr, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"compacted": {0: kgo.NewOffset().AtStart()}}))
		defer c.Close()
		got, n, sawK0 := map[string]string{}, 0, false
		end := int64(total)
		rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		for {
			fs := c.PollFetches(rctx)
			if rctx.Err() != nil {
				t.Fatal("read timed out")
			}
			done := false
			fs.EachRecord(func(r *kgo.Record) {
				n++
				key := string(r.Key)
				if key == "k0" {
					sawK0 = true
				}
				if r.Value != nil {
					if w := written[r.Offset]; w != key+"="+string(r.Value) {
						t.Fatalf("offset %d holds %s=%s, was written as %q", r.Offset, key, r.Value, w)
					}
					got[key] = string(r.Value)
				} else {
					delete(got, key)
				}
				if r.Offset == end-1 {
					done = true
				}
			})
			if done {
				return got, n, sawK0
			}
		}
	}
	waitUntilB(t, 30*time.Second, func() bool {
		_, n, sawK0 := readAll()
		return n < total/4 && !sawK0
	})
	got, n, _ := readAll()
	for k, v := range latest {
		if got[k] != v {
			t.Fatalf("key %s: latest %q, read %q", k, v, got[k])
		}
	}
	if len(got) != len(latest) {
		t.Fatalf("read %d keys, want %d", len(got), len(latest))
	}
	t.Logf("compaction: %d records written, %d left", total, n)
}
