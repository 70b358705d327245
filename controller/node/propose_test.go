package node

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"
)

// links lets a test cut the connections one node dials to another: a
// cut link's open connections close and new dials fail until it heals.
// Raft messages each way travel on the sender's own connection, so
// cutting from→to silences from towards to and nothing else.
type links struct {
	mu    sync.Mutex
	cut   map[[2]string]bool // {from node id, to address}
	conns map[[2]string][]net.Conn
}

func newLinks() *links {
	return &links{cut: map[[2]string]bool{}, conns: map[[2]string][]net.Conn{}}
}

func (l *links) dialer(from uint64) func(ctx context.Context, addr string) (net.Conn, error) {
	return func(ctx context.Context, addr string) (net.Conn, error) {
		k := [2]string{fmt.Sprint(from), addr}
		l.mu.Lock()
		defer l.mu.Unlock()
		if l.cut[k] {
			return nil, errors.New("link cut by the test")
		}
		var d net.Dialer
		c, err := d.DialContext(ctx, "tcp", addr)
		if err == nil {
			l.conns[k] = append(l.conns[k], c)
		}
		return c, err
	}
}

// set cuts (or heals) the link from node from to the node at addr.
func (l *links) set(from uint64, addr string, cut bool) {
	k := [2]string{fmt.Sprint(from), addr}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.cut[k] = cut
	if cut {
		for _, c := range l.conns[k] {
			c.Close()
		}
		l.conns[k] = nil
	}
}

// others are the running voters other than n.
func (h *harness) others(n *Node) []*Node {
	var out []*Node
	for id, m := range h.nodes {
		if _, voter := h.voters[id]; voter && id != n.ID() {
			out = append(out, m)
		}
	}
	return out
}

// TestProposalOutlivesLeadership: a leader proposes, its followers save
// the entry, and the leader loses the leadership before it hears so. The
// next leader commits the entry; Propose on the old leader reports it
// committed, at its index, rather than failing: a caller that retried
// would make the change twice (a forwarded CreateTopics answered
// TOPIC_ALREADY_EXISTS for the client's own topic). A proposal no other
// member saved fails with ErrNotCommitted once its index applies with the
// next leader's entry: safe to retry.
func TestProposalOutlivesLeadership(t *testing.T) {
	for _, tc := range []struct {
		name      string
		followers bool // the followers save the entry before the leader is cut off
	}{{"committed by the next leader", true}, {"saved by nobody else", false}} {
		t.Run(tc.name, func(t *testing.T) {
			l := newLinks()
			h := newLinkedHarness(t, 3, 0, 0, l)
			old := h.waitLeader()
			fs := h.others(old)
			addr := h.voters[old.ID()]
			isolate := func(cut bool) {
				for _, f := range fs {
					l.set(f.ID(), addr, cut)               // acknowledgements to the leader
					l.set(old.ID(), h.voters[f.ID()], cut) // the leader's appends and heartbeats
				}
			}
			pre, err := old.store.LastIndex()
			if err != nil {
				t.Fatal(err)
			}
			if tc.followers {
				for _, f := range fs {
					l.set(f.ID(), addr, true)
				}
			} else {
				isolate(true)
			}
			type result struct {
				idx uint64
				err error
			}
			out := make(chan result, 1)
			go func() {
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				defer cancel()
				idx, err := old.Propose(ctx, register(42))
				out <- result{idx, err}
			}()
			var at uint64
			checkFor(t, 5*time.Second, func() error {
				last, err := old.store.LastIndex()
				if err != nil || last <= pre {
					return fmt.Errorf("the leader has not saved the proposal (last index %d, err %v)", last, err)
				}
				at = last
				return nil
			})
			if tc.followers {
				checkFor(t, 5*time.Second, func() error {
					for _, f := range fs {
						if last, err := f.store.LastIndex(); err != nil || last < at {
							return fmt.Errorf("node %d has not saved index %d (last %d, err %v)", f.ID(), at, last, err)
						}
					}
					return nil
				})
				isolate(true)
			}
			checkFor(t, 10*time.Second, func() error {
				for _, f := range fs {
					if f.IsLeader() {
						return nil
					}
				}
				return errors.New("no new leader among the followers")
			})
			select {
			case r := <-out:
				t.Fatalf("Propose returned before its index applied: %d, %v", r.idx, r.err)
			default:
			}
			isolate(false)
			r := <-out
			if tc.followers {
				if r.err != nil || r.idx != at {
					t.Fatalf("Propose = %d, %v; want index %d, committed by the next leader", r.idx, r.err, at)
				}
				h.waitAll(hasBroker(42, at))
				return
			}
			if !errors.Is(r.err, ErrNotCommitted) {
				t.Fatalf("Propose = %d, %v; want ErrNotCommitted", r.idx, r.err)
			}
			if _, ok := old.Image().Broker(42); ok {
				t.Fatal("a proposal reported not committed is in the image")
			}
		})
	}
}
