package node

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"time"

	"github.com/fjordlog/fjord/protocol/lifecycle"
	"github.com/fjordlog/fjord/protocol/tcpopt"
	"go.etcd.io/raft/v3/raftpb"
)

// MaxFrameSize bounds one frame's body (a marshaled raftpb.Message), in
// bytes. A snapshot larger than this cannot be sent.
const MaxFrameSize = 64 << 20

const (
	peerQueueLen = 1024                   // messages queued per peer before dropping
	dialTimeout  = time.Second            // per dial attempt
	writeTimeout = 10 * time.Second       // per flush; a stuck peer is dropped
	backoffMin   = 20 * time.Millisecond  // first redial delay
	backoffMax   = 200 * time.Millisecond // redial delay cap
)

// Reaching a peer again after a partition heals: a connection black-holed
// meanwhile is closed by the kernel once its data stayed unacknowledged
// for tcpopt.UserTimeout (without that, the heal reaches it only at TCP's
// next backed-off retransmission, seconds to minutes later); the writer
// then redials, each dial bounded by dialTimeout and spaced by at most
// backoffMax, so a healed path carries messages again within about
// dialTimeout+backoffMax.

var errFrameTooLarge = errors.New("node: frame too large")

// Preamble opens every raft connection, before the first frame. Its first
// byte has the high bit set, which no Kafka request frame's length can
// have, so a listener shared with Kafka's protocol (the CONTROLLER
// listener) tells the two apart by the first byte; the rest guards against
// a stray client speaking something else.
var Preamble = [8]byte{0xFF, 'F', 'J', 'R', 'A', 'F', 'T', 1}

// IsPreamble reports whether b (at least one byte) can begin a raft
// connection rather than a Kafka one.
func IsPreamble(b []byte) bool { return len(b) > 0 && b[0] == Preamble[0] }

// writeFrame appends m as one frame to w.
func writeFrame(w *bufio.Writer, m *raftpb.Message) error {
	size := m.Size()
	if size > MaxFrameSize {
		return fmt.Errorf("%w: %d bytes", errFrameTooLarge, size)
	}
	b := make([]byte, 4+size)
	binary.BigEndian.PutUint32(b, uint32(size))
	if _, err := m.MarshalTo(b[4:]); err != nil {
		return err
	}
	_, err := w.Write(b)
	return err
}

// frameChunk is the first allocation for a frame's body; it doubles as
// bytes arrive.
const frameChunk = 64 << 10

// readFrame reads one frame from r. The body's buffer grows only as its
// bytes arrive, so a length prefix that lies (up to MaxFrameSize, from a
// peer not yet known to be one) costs at most frameChunk: holding n bytes
// of a frame takes sending about n/2 of them.
func readFrame(r *bufio.Reader) (raftpb.Message, error) {
	var hdr [4]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return raftpb.Message{}, err
	}
	size := int(binary.BigEndian.Uint32(hdr[:]))
	if size > MaxFrameSize {
		return raftpb.Message{}, fmt.Errorf("%w: %d bytes", errFrameTooLarge, size)
	}
	b := make([]byte, 0, min(size, frameChunk))
	for len(b) < size {
		if len(b) == cap(b) {
			b = slices.Grow(b, min(len(b), size-len(b)))
		}
		n, err := io.ReadFull(r, b[len(b):min(cap(b), size)])
		b = b[:len(b)+n]
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return raftpb.Message{}, err
		}
	}
	var m raftpb.Message
	if err := m.Unmarshal(b); err != nil {
		return raftpb.Message{}, fmt.Errorf("node: decode message: %w", err)
	}
	return m, nil
}

// send queues m for its peer; run calls it after Ready saved the state m
// reflects. A full queue or unknown peer drops m and reports it undelivered
// right away (run is the caller, so it may touch the member).
func (n *Node) send(m raftpb.Message) {
	if m.To == n.cfg.ID {
		return
	}
	p := n.peers[m.To]
	if p != nil {
		select {
		case p.queue <- m:
			return
		default:
		}
	}
	if m.Type == raftpb.MsgSnap {
		n.member.ReportSnapshot(m.To, false)
	}
	n.member.ReportUnreachable(m.To)
}

// report hands a delivery outcome to run.
func (n *Node) report(r report) {
	select {
	case n.reportc <- r:
	case <-n.ctx.Done():
	}
}

// peer is the outbound side of one peer: a bounded queue and the writer
// goroutine that owns the connection.
type peer struct {
	n     *Node
	id    uint64
	addr  string
	queue chan raftpb.Message
}

func newPeer(n *Node, id uint64, addr string) *peer {
	return &peer{n: n, id: id, addr: addr, queue: make(chan raftpb.Message, peerQueueLen)}
}

// dial opens a connection to the peer, through Config.Dial when set (a
// TLS controller listener), sends the preamble and runs
// Config.Authenticate when set (a SASL one), all within dialTimeout.
func (p *peer) dial() (net.Conn, error) {
	ctx, cancel := context.WithTimeout(p.n.ctx, dialTimeout)
	defer cancel()
	var c net.Conn
	var err error
	if p.n.cfg.Dial == nil {
		var d net.Dialer
		c, err = d.DialContext(ctx, "tcp", p.addr)
	} else {
		c, err = p.n.cfg.Dial(ctx, p.addr)
	}
	if err != nil {
		return nil, err
	}
	_ = tcpopt.SetUserTimeout(c, tcpopt.UserTimeout) // best effort: see backoffMax
	deadline, _ := ctx.Deadline()
	_ = c.SetDeadline(deadline)
	if _, err = c.Write(Preamble[:]); err == nil && p.n.cfg.Authenticate != nil {
		err = p.n.cfg.Authenticate(ctx, c)
	}
	if err != nil {
		c.Close()
		return nil, err
	}
	_ = c.SetDeadline(time.Time{})
	return c, nil
}

// isDialError reports whether err is the TCP dial's own failure (the
// peer is down or unreachable) rather than what came after connecting.
func isDialError(err error) bool {
	var op *net.OpError
	return errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) ||
		(errors.As(err, &op) && op.Op == "dial")
}

// run is the peer's writer goroutine. While the peer is down (a dial
// failed and the backoff has not passed) messages are dropped and
// reported, so raft slows down to probing instead of queueing.
func (p *peer) run() {
	var (
		conn      net.Conn
		w         *bufio.Writer
		dialFails int // dials failed in a row
		nextDial  time.Time
		// handshakeFailed is the last failure logged at Warn, "" when
		// none since the last connection.
		handshakeFailed string
	)
	log := p.n.log.With().Uint64("peer", p.id).Logger()
	closeConn := func() {
		if conn != nil {
			p.n.untrack(conn)
			conn, w = nil, nil
		}
	}
	defer closeConn()
	fail := func(m raftpb.Message) {
		snap := m.Type == raftpb.MsgSnap
		p.n.report(report{to: p.id, snapshot: snap})
	}
	for {
		var m raftpb.Message
		select {
		case m = <-p.queue:
		case <-p.n.ctx.Done():
			return
		}
		if conn == nil {
			if time.Now().Before(nextDial) {
				fail(m)
				continue
			}
			c, err := p.dial()
			if err != nil {
				dialFails++
				backoff := lifecycle.Backoff{Initial: backoffMin, Max: backoffMax}.Delay(dialFails)
				nextDial = time.Now().Add(backoff)
				if isDialError(err) || err.Error() == handshakeFailed {
					log.Debug().Err(err).Dur("backoff", backoff).Msg("dial peer")
				} else {
					// A handshake the peer's listener refuses (an untrusted
					// certificate) is a configuration error, not a peer
					// that is down: once per distinct error.
					handshakeFailed = err.Error()
					log.Warn().Err(err).Str("addr", p.addr).Msg("peer connection failed after connecting (TLS?); retrying")
				}
				fail(m)
				continue
			}
			if handshakeFailed != "" {
				handshakeFailed = ""
				log.Info().Str("addr", p.addr).Msg("peer connection works again")
			}
			if !p.n.track(c) {
				return
			}
			dialFails = 0
			conn, w = c, bufio.NewWriterSize(c, 64<<10)
		}
		err := writeFrame(w, &m)
		if errors.Is(err, errFrameTooLarge) {
			log.Warn().Err(err).Stringer("type", m.Type).Msg("message dropped")
			fail(m)
			continue
		}
		// Flush when the queue is empty (batching) and after a snapshot,
		// whose success is reported only once it is written.
		if err == nil && (len(p.queue) == 0 || m.Type == raftpb.MsgSnap) {
			_ = conn.SetWriteDeadline(time.Now().Add(writeTimeout))
			err = w.Flush()
		}
		if err != nil {
			log.Debug().Err(err).Msg("write to peer")
			closeConn()
			fail(m)
			continue
		}
		if m.Type == raftpb.MsgSnap {
			p.n.report(report{to: p.id, snapshot: true, ok: true})
		}
	}
}

// accept accepts inbound connections until the listener closes.
func (n *Node) accept() {
	for {
		c, err := n.ln.Accept()
		if err != nil {
			if n.ctx.Err() == nil && !errors.Is(err, net.ErrClosed) {
				n.log.Error().Err(err).Msg("accept stopped")
			}
			return
		}
		if !n.track(c) {
			return
		}
		// An inbound connection only reads, so nothing of its own is ever
		// unacknowledged; but its keepalive probes are, and the option
		// bounds them too: a connection whose dialer vanished behind a
		// partition (and redialed) is closed about 17 s after it went
		// quiet, not after TCP's default of minutes.
		_ = tcpopt.SetUserTimeout(c, tcpopt.UserTimeout)
		n.spawn(func() { n.readConn(c) })
	}
}

// firstFrameTimeout bounds the wait for an inbound connection's preamble
// and first frame. A dialer writes both at once (it dials because it has a
// message), so only a connection that is not a peer's waits that long.
const firstFrameTimeout = 10 * time.Second

// readConn decodes frames from one inbound connection and hands the
// messages to run. Any error closes the connection; the peer redials.
//
// A connection carries the messages of one sender, the peer that dialed
// it: the first frame's From fixes the sender, which must be a configured
// member other than this node, and a frame with another From closes the
// connection. Such a frame never reaches the member, so a stranger who got
// this far (past the listener's authentication, if any) changes no term
// by claiming to be nobody, or to be another member halfway through.
func (n *Node) readConn(c net.Conn) {
	defer n.untrack(c)
	remote := c.RemoteAddr().String()
	_ = c.SetReadDeadline(time.Now().Add(firstFrameTimeout))
	r := bufio.NewReaderSize(c, 64<<10)
	var pre [len(Preamble)]byte
	if _, err := io.ReadFull(r, pre[:]); err != nil || pre != Preamble {
		n.log.Warn().Str("remote", remote).Msg("inbound connection without the raft preamble closed")
		return
	}
	var sender uint64 // 0 until the first frame
	for {
		m, err := readFrame(r)
		if err != nil {
			if n.ctx.Err() == nil && !errors.Is(err, io.EOF) {
				n.log.Debug().Err(err).Str("remote", remote).Msg("inbound connection closed")
			}
			return
		}
		switch {
		case sender != 0 && m.From != sender:
			n.log.Info().Str("remote", remote).Uint64("sender", sender).Uint64("from", m.From).Stringer("type", m.Type).
				Msg("raft connection closed: a frame from another member than the connection's")
			return
		case sender == 0 && (n.peers[m.From] == nil):
			n.log.Info().Str("remote", remote).Uint64("from", m.From).Stringer("type", m.Type).
				Msg("raft connection closed: its first frame is not from another member of the quorum")
			return
		case sender == 0:
			sender = m.From
			_ = c.SetReadDeadline(time.Time{})
		}
		if m.To != n.cfg.ID {
			n.log.Warn().Uint64("to", m.To).Uint64("from", m.From).Msg("message for another node dropped")
			continue
		}
		select {
		case n.recvc <- m:
		case <-n.ctx.Done():
			return
		}
	}
}
