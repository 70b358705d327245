package protocol

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sync"
)

// ErrFrameTooLarge is returned for a size prefix above the configured limit
// (socket.request.max.bytes). The connection must be closed: the rest of the
// stream cannot be framed.
var ErrFrameTooLarge = errors.New("protocol: frame larger than socket.request.max.bytes")

// ErrFrameSize is returned for a negative or too-small size prefix.
var ErrFrameSize = errors.New("protocol: invalid frame size")

// minRequestFrame is the smallest body a request frame can have: api key,
// version and correlation id.
const minRequestFrame = 8

// startBuf is the most buffer a frame gets before any of its body has
// arrived. Past it the buffer doubles, and only once at least one more byte
// is waiting: a peer announcing 100 MiB and sending 1 MiB holds about 1 MiB,
// never the announced size (KAFKA-4090: a TLS record header read as a size
// prefix). Growth past startBuf is what the shared request budget counts.
const startBuf = 64 << 10

// peeker is a buffered reader: readFrame waits on Peek for the next byte
// before it grows the buffer for it.
type peeker interface {
	Peek(n int) ([]byte, error)
}

// ReadFrame reads one size-prefixed frame from r. The returned slice is owned
// by the caller. max bounds the size prefix.
func ReadFrame(r io.Reader, max int32) ([]byte, error) {
	return readFrame(r, max, false, nil)
}

// framePool recycles large request frames whose handler said it kept no
// reference to them (Request.Recycle): mostly produce requests of several
// MiB, which would otherwise each cost a fresh zeroed allocation.
var framePool sync.Pool

const minPooledFrame = 64 << 10

func recycleFrame(b []byte) {
	if cap(b) >= minPooledFrame && cap(b) <= 128<<20 {
		b = b[:0]
		framePool.Put(&b)
	}
}

// readFrame reads one frame. g, when not nil, is asked for every byte the
// buffer grows past startBuf and may wait (backpressure on this connection);
// its error ends the read.
func readFrame(r io.Reader, max int32, pooled bool, g *grant) ([]byte, error) {
	var sz [4]byte
	if _, err := io.ReadFull(r, sz[:]); err != nil {
		return nil, err
	}
	n := int32(binary.BigEndian.Uint32(sz[:]))
	if n < minRequestFrame {
		return nil, fmt.Errorf("%w: %d bytes", ErrFrameSize, n)
	}
	if n > max {
		return nil, fmt.Errorf("%w: %d > %d", ErrFrameTooLarge, n, max)
	}
	buf := startFrameBuf(int(n), pooled)
	if _, err := io.ReadFull(r, buf); err != nil {
		return nil, truncated(err)
	}
	for len(buf) < int(n) {
		if p, ok := r.(peeker); ok {
			if _, err := p.Peek(1); err != nil {
				return nil, truncated(err)
			}
		}
		next := min(int(n), 2*len(buf))
		if err := g.grow(int64(next - len(buf))); err != nil {
			return nil, err
		}
		have := len(buf)
		if cap(buf) >= next {
			buf = buf[:next]
		} else {
			nb := make([]byte, next)
			copy(nb, buf)
			buf = nb
		}
		if _, err := io.ReadFull(r, buf[have:]); err != nil {
			return nil, truncated(err)
		}
	}
	return buf, nil
}

// startFrameBuf is the buffer a frame of n bytes starts in: startBuf bytes
// (or n if less), inside a recycled frame big enough for all n when pooled
// and the pool has one. A recycled frame is memory the process already
// holds, so growing inside it costs no allocation and no copy; the budget
// still counts the bytes as they arrive, and what a stalled frame pins
// beyond them is bounded by what the pool held (large frames handled
// since the last GC).
func startFrameBuf(n int, pooled bool) []byte {
	first := min(n, startBuf)
	if pooled && n >= minPooledFrame {
		if b, ok := framePool.Get().(*[]byte); ok {
			if cap(*b) >= n {
				return (*b)[:first]
			}
			framePool.Put(b)
		}
	}
	return make([]byte, first)
}

func truncated(err error) error {
	if err == nil || err == io.EOF {
		err = io.ErrUnexpectedEOF
	}
	return fmt.Errorf("protocol: truncated frame: %w", err)
}

// AppendFrameSize fills the 4-byte size prefix reserved at the start of buf.
func fillSize(buf []byte) {
	binary.BigEndian.PutUint32(buf, uint32(len(buf)-4))
}
