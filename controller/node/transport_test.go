package node

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"runtime"
	"testing"
	"time"

	"go.etcd.io/raft/v3/raftpb"

	"github.com/fjordlog/fjord/protocol/tcpopt"
)

// dialRaw opens a raft connection to addr by hand, preamble sent.
func dialRaw(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if _, err := c.Write(Preamble[:]); err != nil {
		t.Fatal(err)
	}
	return c
}

// sendRaw writes m as one frame.
func sendRaw(t *testing.T, c net.Conn, m raftpb.Message) {
	t.Helper()
	w := bufio.NewWriter(c)
	if err := writeFrame(w, &m); err != nil {
		t.Fatal(err)
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
}

// closedByPeer reports whether the node closed c within 10 s (raft
// connections carry nothing back, so any read ends in the close).
func closedByPeer(t *testing.T, c net.Conn) bool {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	_, err := c.Read(make([]byte, 1))
	var ne net.Error
	return err != nil && !(errors.As(err, &ne) && ne.Timeout())
}

// state is what a refused message must not change.
type state struct{ term, leader uint64 }

func stateOf(n *Node) state { return state{n.Term(), n.Leader()} }

// settle proves the quorum still commits after the hostile frames (every
// node applies a new entry) and that no node's term or leader moved.
func (h *harness) settle(t *testing.T, before map[uint64]state, leader *Node, id int32) {
	t.Helper()
	idx := propose(t, leader, register(id))
	h.waitAll(hasBroker(id, idx))
	for nid, n := range h.nodes {
		if got := stateOf(n); got != before[nid] {
			t.Fatalf("node %d: term/leader %+v, was %+v", nid, got, before[nid])
		}
	}
}

func snapshotStates(h *harness) map[uint64]state {
	out := map[uint64]state{}
	for id, n := range h.nodes {
		out[id] = stateOf(n)
	}
	return out
}

// TestInboundSenderChecks: a raft connection whose first frame comes from
// a node id outside the quorum, or whose later frame comes from another
// member than its first, is closed before raft sees the frame: a heartbeat
// with a far higher term changes no node's term or leader, and the quorum
// keeps committing. A heartbeat from the real leader whose commit index is
// past the follower's log (etcd raft panics on it) is refused by the
// member and the follower lives on.
func TestInboundSenderChecks(t *testing.T) {
	h := newHarness(t, 3, 0, 0)
	leader := h.waitLeader()
	var follower *Node
	for _, n := range h.nodes {
		if n != leader {
			follower = n
		}
	}
	other := uint64(6) - leader.ID() - follower.ID() // the third voter
	before := snapshotStates(h)
	term := before[follower.ID()].term
	addr := follower.Addr().String()

	t.Run("not a member", func(t *testing.T) {
		c := dialRaw(t, addr)
		sendRaw(t, c, raftpb.Message{Type: raftpb.MsgHeartbeat, From: 99, To: follower.ID(), Term: term + 100})
		if !closedByPeer(t, c) {
			t.Fatal("connection from a non-member left open")
		}
		h.settle(t, before, leader, 50)
	})
	t.Run("itself", func(t *testing.T) {
		c := dialRaw(t, addr)
		sendRaw(t, c, raftpb.Message{Type: raftpb.MsgVote, From: follower.ID(), To: follower.ID(), Term: term + 100})
		if !closedByPeer(t, c) {
			t.Fatal("connection claiming the node's own id left open")
		}
		h.settle(t, before, leader, 51)
	})
	t.Run("second sender", func(t *testing.T) {
		c := dialRaw(t, addr)
		// A frame as the leader sends it (commit 0: nothing to commit),
		// then one as the third voter.
		sendRaw(t, c, raftpb.Message{Type: raftpb.MsgHeartbeat, From: leader.ID(), To: follower.ID(), Term: term})
		sendRaw(t, c, raftpb.Message{Type: raftpb.MsgHeartbeat, From: other, To: follower.ID(), Term: term + 100})
		if !closedByPeer(t, c) {
			t.Fatal("connection with a second sender left open")
		}
		h.settle(t, before, leader, 52)
	})
	t.Run("commit past the log", func(t *testing.T) {
		c := dialRaw(t, addr)
		sendRaw(t, c, raftpb.Message{Type: raftpb.MsgHeartbeat, From: leader.ID(), To: follower.ID(), Term: term, Commit: 1000000})
		sendRaw(t, c, raftpb.Message{Type: raftpb.MsgHeartbeat, From: leader.ID(), To: follower.ID(), Term: term + 100, Commit: 1000000})
		h.settle(t, before, leader, 53)
		if closed := func() bool {
			_ = c.SetReadDeadline(time.Now().Add(10 * time.Millisecond))
			_, err := c.Read(make([]byte, 1))
			var ne net.Error
			return !(errors.As(err, &ne) && ne.Timeout())
		}(); closed {
			t.Fatal("a well-formed connection from the leader was closed: the member's refusal is per message")
		}
	})
	t.Run("frame too large", func(t *testing.T) {
		c := dialRaw(t, addr)
		var hdr [4]byte
		binary.BigEndian.PutUint32(hdr[:], 0xFFFFFFF0)
		if _, err := c.Write(hdr[:]); err != nil {
			t.Fatal(err)
		}
		if !closedByPeer(t, c) {
			t.Fatal("connection with an oversized frame left open")
		}
	})
}

// TestReadFrameAllocatesWhatArrives: a length prefix just under
// MaxFrameSize followed by a few bytes costs about one frameChunk, not
// the length.
func TestReadFrameAllocatesWhatArrives(t *testing.T) {
	var in bytes.Buffer
	var hdr [4]byte
	binary.BigEndian.PutUint32(hdr[:], MaxFrameSize-1)
	in.Write(hdr[:])
	in.Write(make([]byte, 1000))
	r := bufio.NewReader(&in)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err := readFrame(r)
	runtime.ReadMemStats(&after)
	if !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("truncated frame: %v", err)
	}
	if got := after.TotalAlloc - before.TotalAlloc; got > 4*frameChunk {
		t.Fatalf("reading a frame that claims %d bytes and carries 1000 allocated %d bytes", MaxFrameSize-1, got)
	}

	// A frame that does arrive whole, across several growths, decodes.
	m := raftpb.Message{Type: raftpb.MsgSnap, To: 2, From: 1, Term: 3,
		Snapshot: &raftpb.Snapshot{Data: bytes.Repeat([]byte("fjord"), 100_000), Metadata: raftpb.SnapshotMetadata{Index: 9, Term: 3}}}
	in.Reset()
	w := bufio.NewWriter(&in)
	if err := writeFrame(w, &m); err != nil {
		t.Fatal(err)
	}
	_ = w.Flush()
	got, err := readFrame(bufio.NewReader(&in))
	if err != nil || !bytes.Equal(got.Snapshot.Data, m.Snapshot.Data) || got.Snapshot.Metadata.Index != 9 {
		t.Fatalf("round trip of a %d-byte frame: %v", m.Size(), err)
	}
}

// TestPeerConnectionsBoundUnackedData: every raft connection, dialed or
// accepted, carries TCP_USER_TIMEOUT, so one black-holed by a partition is
// closed and redialed rather than resumed at TCP's backed-off
// retransmission after the heal (a voter learned its leader 5-40 s after
// a heal that way; compat-tests' TestNetworkFaults shows it end to end).
func TestPeerConnectionsBoundUnackedData(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("TCP_USER_TIMEOUT is Linux's")
	}
	h := newHarness(t, 3, 0, 0)
	h.waitLeader()
	peers := map[string]bool{}
	for _, addr := range h.voters {
		peers[addr] = true
	}
	checkFor(t, 5*time.Second, func() error {
		outbound := 0
		for id, n := range h.nodes {
			n.mu.Lock()
			var conns []net.Conn
			for c := range n.mu.conns {
				conns = append(conns, c)
			}
			n.mu.Unlock()
			for _, c := range conns {
				// Accepted connections carry it too: it bounds their
				// keepalive probes.
				if peers[c.RemoteAddr().String()] {
					outbound++
				}
				if d, err := tcpopt.UserTimeoutOf(c); err != nil || d != tcpopt.UserTimeout {
					return fmt.Errorf("node %d's connection to %s: TCP_USER_TIMEOUT %v (%v), want %v", id, c.RemoteAddr(), d, err, tcpopt.UserTimeout)
				}
			}
		}
		if outbound < 4 { // the leader's two, and each follower's answers
			return fmt.Errorf("%d outbound peer connections, want at least 4", outbound)
		}
		return nil
	})
}
