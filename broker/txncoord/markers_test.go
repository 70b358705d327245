package txncoord

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordlog/fjord/broker/txn"
	"github.com/fjordlog/fjord/protocol/lifecycle"
)

// Markers: once Prepare* is committed, the decision goes to every
// partition's leader, one WriteTxnMarkers per leader (this node's own
// included); a partition whose topic is gone needs none; Complete* is
// written only when every partition is acknowledged.
func TestMarkersGroupedByLeader(t *testing.T) {
	for _, commit := range []bool{true, false} {
		t.Run(fmt.Sprintf("commit=%v", commit), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				r := newRig(t, rigConfig{})
				for _, l := range []struct {
					topic  string
					p      int32
					leader int32
				}{{"t", 0, 2}, {"t", 1, 2}, {"u", 0, 3}, {"v", 0, 1}, {"x", 0, 2}} {
					r.host.setLeader(l.topic, l.p, l.leader)
				}
				release := make(chan struct{})
				r.host.setMarkers(func(ctx context.Context, node int32, req *kmsg.WriteTxnMarkersRequest) (*kmsg.WriteTxnMarkersResponse, error) {
					if node == 3 {
						select {
						case <-release:
						case <-ctx.Done():
							return nil, ctx.Err()
						}
					}
					return ackMarkers(ctx, node, req)
				})
				pid, epoch := r.ongoing("a", tp("t", 0), tp("t", 1), tp("u", 0), tp("v", 0), tp("x", 0))
				r.host.dropTopic("x") // deleted while the transaction ran
				end := r.end("a", pid, epoch, commit)
				r.settle()
				if a := end.one(t); a.Code != 0 {
					t.Fatalf("end: %s", codeName(a.Code))
				}

				calls := r.host.markerCalls()
				got := map[int32]string{}
				for _, c := range calls {
					if len(c.req.Markers) != 1 {
						t.Fatalf("node %d: %d markers", c.node, len(c.req.Markers))
					}
					m := c.req.Markers[0]
					if m.ProducerID != pid || m.ProducerEpoch != epoch || m.Committed != commit || m.CoordinatorEpoch != 1 || m.TransactionVersion != 0 {
						t.Fatalf("node %d: marker %+v", c.node, m)
					}
					got[c.node] += strings.Join(markerParts(c.req), " ")
				}
				want := map[int32]string{1: "v-0", 2: "t-0 t-1", 3: "u-0"}
				if len(calls) != 3 || fmt.Sprint(got) != fmt.Sprint(want) {
					t.Fatalf("requests %v (%d), want %v", got, len(calls), want)
				}
				prepare, complete := "PrepareAbort", "CompleteAbort"
				if commit {
					prepare, complete = "PrepareCommit", "CompleteCommit"
				}
				// Node 3 has not answered: the transaction stays decided,
				// waiting for u-0 alone.
				d := r.c.Describe("a")
				if d.State != prepare || len(d.Topics) != 1 || d.Topics[0].Topic != "u" {
					t.Fatalf("before the last marker: %s %+v", d.State, d.Topics)
				}
				if s := states(r.records(0), "a"); s[len(s)-1] != prepare {
					t.Fatalf("records before the last marker: %v", s)
				}
				close(release)
				r.settle()
				if s := states(r.records(0), "a"); !slices.Equal(s, []string{"Empty", "Ongoing", prepare, complete}) {
					t.Fatalf("records %v", s)
				}
				if s := r.state("a"); s != complete {
					t.Fatalf("state %s", s)
				}
				if n := len(r.host.markerCalls()); n != 3 {
					t.Fatalf("%d marker requests in all, want 3", n)
				}
			})
		})
	}
}

// A marker that fails is sent again after MarkerBackoff, doubling up to
// its cap, for as long as it fails; each attempt is bounded (markerTimeout
// for a leader that does not answer). The retries write no log lines.
func TestMarkerRetried(t *testing.T) {
	const fails = 5
	backoff := lifecycle.Backoff{Initial: 100 * time.Millisecond, Max: 400 * time.Millisecond}
	for _, tt := range []struct {
		name string
		fail markerHandler
		took time.Duration // per failed attempt
	}{{
		name: "broker down",
		fail: func(context.Context, int32, *kmsg.WriteTxnMarkersRequest) (*kmsg.WriteTxnMarkersResponse, error) {
			return nil, errors.New("dial tcp 10.0.0.2:9092: connect: connection refused")
		},
	}, {
		name: "not leader",
		fail: func(_ context.Context, _ int32, req *kmsg.WriteTxnMarkersRequest) (*kmsg.WriteTxnMarkersResponse, error) {
			return markersAnswer(req, func(string, int32) int16 { return kerr.NotLeaderForPartition.Code }), nil
		},
	}, {
		name: "partition not answered",
		fail: func(context.Context, int32, *kmsg.WriteTxnMarkersRequest) (*kmsg.WriteTxnMarkersResponse, error) {
			return kmsg.NewPtrWriteTxnMarkersResponse(), nil
		},
	}, {
		name: "no answer",
		fail: func(ctx context.Context, _ int32, _ *kmsg.WriteTxnMarkersRequest) (*kmsg.WriteTxnMarkersResponse, error) {
			<-ctx.Done()
			return nil, ctx.Err()
		},
		took: markerTimeout,
	}} {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				cfg := txn.DefaultConfig()
				cfg.MarkerBackoff = backoff
				cfg.MarkerTimeoutMs = 10 * markerTimeout.Milliseconds() // the request's own bound ends each attempt
				r := newRig(t, rigConfig{txn: cfg})
				r.host.setLeader("t", 0, 2)
				var mu sync.Mutex
				n := 0
				r.host.setMarkers(func(ctx context.Context, node int32, req *kmsg.WriteTxnMarkersRequest) (*kmsg.WriteTxnMarkersResponse, error) {
					mu.Lock()
					n++
					failing := n <= fails
					mu.Unlock()
					if failing {
						return tt.fail(ctx, node, req)
					}
					return ackMarkers(ctx, node, req)
				})
				pid, epoch := r.ongoing("a", tp("t", 0))
				lines := r.log.count()
				end := r.end("a", pid, epoch, true)
				r.settle()
				end.one(t)
				time.Sleep(fails * (tt.took + backoff.Max))
				r.settle()

				calls := r.host.markerCalls()
				if len(calls) != fails+1 {
					t.Fatalf("%d requests, want %d", len(calls), fails+1)
				}
				for i := 1; i < len(calls); i++ {
					wait := min(backoff.Initial<<(i-1), backoff.Max)
					if gap := calls[i].at.Sub(calls[i-1].at); gap != tt.took+wait {
						t.Fatalf("attempt %d came %v after the one before, want %v", i+1, gap, tt.took+wait)
					}
					if calls[i].node != 2 || !slices.Equal(markerParts(calls[i].req), []string{"t-0"}) {
						t.Fatalf("attempt %d: node %d %v", i+1, calls[i].node, markerParts(calls[i].req))
					}
				}
				if s := r.state("a"); s != "CompleteCommit" {
					t.Fatalf("state %s", s)
				}
				if l := r.log.since(lines); len(l) != 0 {
					t.Fatalf("%d failed attempts logged %d lines: %q", fails, len(l), l)
				}
			})
		})
	}
}

// A marker in flight for MarkerTimeoutMs without an answer counts as
// failed and is sent again, while the first request still hangs; the
// first one's failure, when it comes, changes nothing.
func TestMarkerTimeoutResends(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := txn.DefaultConfig()
		cfg.MarkerTimeoutMs = 5000
		cfg.MarkerBackoff = lifecycle.Backoff{Initial: 100 * time.Millisecond, Max: 100 * time.Millisecond}
		r := newRig(t, rigConfig{txn: cfg})
		r.host.setLeader("t", 0, 2)
		var mu sync.Mutex
		first := true
		r.host.setMarkers(func(ctx context.Context, node int32, req *kmsg.WriteTxnMarkersRequest) (*kmsg.WriteTxnMarkersResponse, error) {
			mu.Lock()
			hang := first
			first = false
			mu.Unlock()
			if hang {
				<-ctx.Done()
				return nil, ctx.Err()
			}
			return ackMarkers(ctx, node, req)
		})
		pid, epoch := r.ongoing("a", tp("t", 0))
		r.end("a", pid, epoch, true)
		r.settle()
		time.Sleep(2 * markerTimeout)
		r.settle()
		calls := r.host.markerCalls()
		if len(calls) != 2 {
			t.Fatalf("%d requests, want 2", len(calls))
		}
		if gap := calls[1].at.Sub(calls[0].at); gap != 5100*time.Millisecond {
			t.Fatalf("sent again after %v, want the marker timeout and one backoff", gap)
		}
		if s := states(r.records(0), "a"); !slices.Equal(s, []string{"Empty", "Ongoing", "PrepareCommit", "CompleteCommit"}) {
			t.Fatalf("records %v", s)
		}
	})
}

// A marker that failed goes, when sent again, to the partition's leader of
// then: a leader change in the metadata re-routes it. Partitions already
// acknowledged are not sent again; one whose topic is deleted meanwhile
// needs no marker.
func TestMarkerRerouted(t *testing.T) {
	type step struct {
		node  int32
		parts string
	}
	down := errors.New("connection refused")
	for _, tt := range []struct {
		name    string
		leaders map[txn.TopicPartition]int32
		// answer is node's answer; it may change the leaders through h.
		answer func(h *fakeHost, node int32, req *kmsg.WriteTxnMarkersRequest) (*kmsg.WriteTxnMarkersResponse, error)
		// at runs at 250 ms, when set.
		at   func(h *fakeHost)
		want []step
	}{{
		name:    "not leader, moved",
		leaders: map[txn.TopicPartition]int32{tp("t", 0): 2},
		answer: func(h *fakeHost, node int32, req *kmsg.WriteTxnMarkersRequest) (*kmsg.WriteTxnMarkersResponse, error) {
			if node == 2 {
				h.setLeader("t", 0, 3)
				return markersAnswer(req, func(string, int32) int16 { return kerr.NotLeaderForPartition.Code }), nil
			}
			return markersAnswer(req, func(string, int32) int16 { return 0 }), nil
		},
		want: []step{{2, "t-0"}, {3, "t-0"}},
	}, {
		name:    "broker down, moved",
		leaders: map[txn.TopicPartition]int32{tp("t", 0): 2},
		answer: func(h *fakeHost, node int32, req *kmsg.WriteTxnMarkersRequest) (*kmsg.WriteTxnMarkersResponse, error) {
			if node == 2 {
				h.setLeader("t", 0, 3)
				return nil, down
			}
			return markersAnswer(req, func(string, int32) int16 { return 0 }), nil
		},
		want: []step{{2, "t-0"}, {3, "t-0"}},
	}, {
		name:    "partly moved",
		leaders: map[txn.TopicPartition]int32{tp("t", 0): 2, tp("t", 1): 2},
		answer: func(h *fakeHost, node int32, req *kmsg.WriteTxnMarkersRequest) (*kmsg.WriteTxnMarkersResponse, error) {
			if node == 2 {
				h.setLeader("t", 1, 3)
			}
			return markersAnswer(req, func(_ string, p int32) int16 {
				if node == 2 && p == 1 {
					return kerr.NotLeaderForPartition.Code
				}
				return 0
			}), nil
		},
		want: []step{{2, "t-0 t-1"}, {3, "t-1"}},
	}, {
		name:    "no leader yet",
		leaders: map[txn.TopicPartition]int32{tp("t", 0): -1},
		answer: func(_ *fakeHost, _ int32, req *kmsg.WriteTxnMarkersRequest) (*kmsg.WriteTxnMarkersResponse, error) {
			return markersAnswer(req, func(string, int32) int16 { return 0 }), nil
		},
		at:   func(h *fakeHost) { h.setLeader("t", 0, 2) },
		want: []step{{2, "t-0"}},
	}, {
		name:    "topic deleted",
		leaders: map[txn.TopicPartition]int32{tp("t", 0): 2, tp("u", 0): 3},
		answer: func(h *fakeHost, node int32, req *kmsg.WriteTxnMarkersRequest) (*kmsg.WriteTxnMarkersResponse, error) {
			if node == 2 {
				h.dropTopic("t")
				return nil, down
			}
			return markersAnswer(req, func(string, int32) int16 { return 0 }), nil
		},
		want: []step{{2, "t-0"}, {3, "u-0"}},
	}} {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				r := newRig(t, rigConfig{})
				var tps []txn.TopicPartition
				for p, l := range tt.leaders {
					r.host.setLeader(p.Topic, p.Partition, l)
					tps = append(tps, p)
				}
				r.host.setMarkers(func(_ context.Context, node int32, req *kmsg.WriteTxnMarkersRequest) (*kmsg.WriteTxnMarkersResponse, error) {
					return tt.answer(r.host, node, req)
				})
				pid, epoch := r.ongoing("a", tps...)
				start := time.Now()
				r.end("a", pid, epoch, true)
				r.settle()
				if tt.at != nil {
					time.Sleep(start.Add(250 * time.Millisecond).Sub(time.Now()))
					tt.at(r.host)
				}
				time.Sleep(10 * time.Second)
				r.settle()
				var got []step
				for _, c := range r.host.markerCalls() {
					got = append(got, step{c.node, strings.Join(markerParts(c.req), " ")})
				}
				// The order of requests to different leaders sent at once is
				// not defined.
				slices.SortStableFunc(got, func(a, b step) int { return cmp.Compare(a.node, b.node) })
				if fmt.Sprint(got) != fmt.Sprint(tt.want) {
					t.Fatalf("requests %v, want %v", got, tt.want)
				}
				if s := r.state("a"); s != "CompleteCommit" {
					t.Fatalf("state %s", s)
				}
			})
		})
	}
}
