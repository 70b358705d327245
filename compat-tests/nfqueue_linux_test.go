package compattests

// A packet delayer for the network fault tests: an NFQUEUE reader that
// holds each queued packet for a random while before accepting it, in
// place of netem's delay, which this kernel lacks. It speaks
// nfnetlink_queue directly over a netlink socket (no library for it is
// available to this module): bind the queue, ask for packet metadata
// only, and answer each packet id with NF_ACCEPT once its time comes.
//
// The socket is made inside the host's namespace (a thread that entered
// it, as netNS.DialContext does) and belongs to that namespace from then
// on, so the reader and the timers use it from any goroutine.

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// nfqDelayQueue is the queue number the delay rules feed.
const nfqDelayQueue = 7

// nfnetlink_queue's constants (linux/netfilter/nfnetlink_queue.h).
const (
	nfnlSubsysQueue    = 3
	nfqnlMsgPacket     = 0
	nfqnlMsgVerdict    = 1
	nfqnlMsgConfig     = 2
	nfqaCfgCmd         = 1
	nfqaCfgParams      = 2
	nfqaCfgQueueMaxlen = 3
	nfqnlCfgCmdBind    = 1
	nfqnlCopyMeta      = 1
	nfqaPacketHdr      = 1
	nfqaVerdictHdr     = 2
	nfAccept           = 1
)

// nfqDelay is one host's delayer. Every packet read gets a timer that
// accepts it; Stop waits for them all.
type nfqDelay struct {
	fd       int
	queue    uint16
	min, max time.Duration

	stop     atomic.Bool
	readDone chan struct{}
	pending  sync.WaitGroup // timers not yet fired
	released atomic.Int64
	failed   atomic.Int64 // verdicts the kernel refused (the packet is lost)
	readErr  atomic.Pointer[error]
	sendMu   sync.Mutex // one verdict on the socket at a time
}

// startNFQDelay binds queue in ns's namespace and starts delaying what
// it receives by a uniformly drawn min..max.
func startNFQDelay(ns *netNS, queue uint16, min, max time.Duration) (*nfqDelay, error) {
	type result struct {
		fd  int
		err error
	}
	done := make(chan result, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends in the namespace
		if err := unix.Setns(int(ns.fd.Fd()), unix.CLONE_NEWNET); err != nil {
			done <- result{err: fmt.Errorf("setns %s: %w", ns.Name(), err)}
			return
		}
		fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_NETFILTER)
		done <- result{fd, err}
	}()
	r := <-done
	if r.err != nil {
		return nil, fmt.Errorf("nfqueue socket: %w", r.err)
	}
	d := &nfqDelay{fd: r.fd, queue: queue, min: min, max: max, readDone: make(chan struct{})}
	if err := d.setup(); err != nil {
		unix.Close(d.fd)
		return nil, err
	}
	go d.read()
	return d, nil
}

func (d *nfqDelay) setup() error {
	if err := unix.Bind(d.fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return fmt.Errorf("nfqueue bind: %w", err)
	}
	// Room for a burst held for up to max, and a read timeout so the
	// reader notices Stop.
	_ = unix.SetsockoptInt(d.fd, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, 16<<20)
	tv := unix.NsecToTimeval((200 * time.Millisecond).Nanoseconds())
	if err := unix.SetsockoptTimeval(d.fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
		return fmt.Errorf("nfqueue SO_RCVTIMEO: %w", err)
	}
	cmd := []byte{nfqnlCfgCmdBind, 0, 0, 0} // command, pad, pf (unused since Linux 3.8)
	if err := d.request(nfqnlMsgConfig, nlAttr(nfqaCfgCmd, cmd)); err != nil {
		return fmt.Errorf("nfqueue bind queue %d: %w", d.queue, err)
	}
	params := make([]byte, 5)
	binary.BigEndian.PutUint32(params, 0) // copy range: no payload
	params[4] = nfqnlCopyMeta
	maxlen := binary.BigEndian.AppendUint32(nil, 1<<16)
	if err := d.request(nfqnlMsgConfig, append(nlAttr(nfqaCfgParams, params), nlAttr(nfqaCfgQueueMaxlen, maxlen)...)); err != nil {
		return fmt.Errorf("nfqueue params: %w", err)
	}
	return nil
}

// nlAttr is one netlink attribute, padded to 4 bytes.
func nlAttr(typ uint16, payload []byte) []byte {
	n := 4 + len(payload)
	b := make([]byte, (n+3)&^3)
	binary.NativeEndian.PutUint16(b, uint16(n))
	binary.NativeEndian.PutUint16(b[2:], typ)
	copy(b[4:], payload)
	return b
}

// message is a netlink message of the queue subsystem with attrs.
func (d *nfqDelay) message(typ uint8, flags uint16, attrs []byte) []byte {
	b := make([]byte, 16+4, 16+4+len(attrs))
	b = append(b, attrs...)
	binary.NativeEndian.PutUint32(b, uint32(len(b)))
	binary.NativeEndian.PutUint16(b[4:], nfnlSubsysQueue<<8|uint16(typ))
	binary.NativeEndian.PutUint16(b[6:], flags)
	// nfgenmsg: family AF_UNSPEC, version 0, res_id = queue (big-endian).
	binary.BigEndian.PutUint16(b[18:], d.queue)
	return b
}

// request sends a config message asking for an ack and reads the ack.
func (d *nfqDelay) request(typ uint8, attrs []byte) error {
	if err := unix.Sendto(d.fd, d.message(typ, unix.NLM_F_REQUEST|unix.NLM_F_ACK, attrs), 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return err
	}
	buf := make([]byte, 4096)
	n, _, err := unix.Recvfrom(d.fd, buf, 0)
	if err != nil {
		return fmt.Errorf("reading the ack: %w", err)
	}
	if n < 20 || binary.NativeEndian.Uint16(buf[4:]) != unix.NLMSG_ERROR {
		return fmt.Errorf("unexpected answer (%d bytes, type %d)", n, binary.NativeEndian.Uint16(buf[4:]))
	}
	if code := int32(binary.NativeEndian.Uint32(buf[16:])); code != 0 {
		return unix.Errno(-code)
	}
	return nil
}

// read takes packets off the queue and schedules their verdicts.
func (d *nfqDelay) read() {
	defer close(d.readDone)
	buf := make([]byte, 1<<20)
	for {
		n, _, err := unix.Recvfrom(d.fd, buf, 0)
		if err != nil {
			if errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EINTR) {
				// A quiet read timeout: after Stop, everything queued
				// before the rule went has been read.
				if d.stop.Load() {
					return
				}
				continue
			}
			if errors.Is(err, unix.ENOBUFS) {
				// Packets were queued whose messages were lost: they wait
				// for a verdict that never comes (TCP resends them).
				d.failed.Add(1)
				continue
			}
			d.readErr.Store(&err)
			return
		}
		for b := buf[:n]; len(b) >= 16; {
			l := int(binary.NativeEndian.Uint32(b))
			if l < 16 || l > len(b) {
				break
			}
			typ := binary.NativeEndian.Uint16(b[4:])
			if typ == nfnlSubsysQueue<<8|nfqnlMsgPacket {
				if id, ok := packetID(b[16+4 : l]); ok {
					d.hold(id)
				}
			}
			b = b[min(len(b), (l+3)&^3):]
		}
	}
}

// packetID finds the packet id in a packet message's attributes.
func packetID(attrs []byte) (uint32, bool) {
	for len(attrs) >= 4 {
		l := int(binary.NativeEndian.Uint16(attrs))
		typ := binary.NativeEndian.Uint16(attrs[2:]) & 0x3fff
		if l < 4 || l > len(attrs) {
			return 0, false
		}
		if typ == nfqaPacketHdr && l >= 8 {
			return binary.BigEndian.Uint32(attrs[4:]), true
		}
		attrs = attrs[min(len(attrs), (l+3)&^3):]
	}
	return 0, false
}

// hold accepts packet id after a random delay.
func (d *nfqDelay) hold(id uint32) {
	delay := d.min
	if d.max > d.min {
		delay += rand.N(d.max - d.min)
	}
	d.pending.Add(1)
	time.AfterFunc(delay, func() {
		defer d.pending.Done()
		v := make([]byte, 8)
		binary.BigEndian.PutUint32(v, nfAccept)
		binary.BigEndian.PutUint32(v[4:], id)
		d.sendMu.Lock()
		err := unix.Sendto(d.fd, d.message(nfqnlMsgVerdict, unix.NLM_F_REQUEST, nlAttr(nfqaVerdictHdr, v)), 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK})
		d.sendMu.Unlock()
		if err != nil {
			d.failed.Add(1)
			return
		}
		d.released.Add(1)
	})
}

// Stop stops reading, releases every packet held (on its own schedule)
// and closes the socket, which unbinds the queue. The rule feeding the
// queue must be gone first, or what it queues after is dropped.
func (d *nfqDelay) Stop() {
	d.stop.Store(true)
	<-d.readDone
	d.pending.Wait()
	unix.Close(d.fd)
}

// Stats are the packets released and those lost to a failed verdict or
// an overflowing socket.
func (d *nfqDelay) Stats() (released, failed int64) {
	return d.released.Load(), d.failed.Load()
}

// Err is the error that stopped the reader early, if any.
func (d *nfqDelay) Err() error {
	if p := d.readErr.Load(); p != nil {
		return *p
	}
	return nil
}
