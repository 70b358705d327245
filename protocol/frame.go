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

// firstRead bounds how much buffer a frame may claim before its bytes
// arrive. A peer announcing 100 MiB and sending nothing holds 1 MiB, not 100
// MiB (KAFKA-4090: a TLS record header read as a size prefix). Once the first
// MiB has arrived, the rest is read into a buffer of the exact size, so a
// large produce request costs one extra copy of its first MiB and no
// repeated growth.
const firstRead = 1 << 20

// ReadFrame reads one size-prefixed frame from r. The returned slice is owned
// by the caller. max bounds the size prefix.
func ReadFrame(r io.Reader, max int32) ([]byte, error) {
	return readFrame(r, max, false)
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

func readFrame(r io.Reader, max int32, pooled bool) ([]byte, error) {
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
	if pooled && n >= minPooledFrame {
		// Memory already held by the process: no allocation to guard.
		if b, ok := framePool.Get().(*[]byte); ok {
			if cap(*b) >= int(n) {
				buf := (*b)[:n]
				if _, err := io.ReadFull(r, buf); err != nil {
					return nil, truncated(err)
				}
				return buf, nil
			}
			framePool.Put(b)
		}
	}
	first := make([]byte, min(int(n), firstRead))
	if _, err := io.ReadFull(r, first); err != nil {
		return nil, truncated(err)
	}
	if int(n) == len(first) {
		return first, nil
	}
	buf := make([]byte, n)
	copy(buf, first)
	if _, err := io.ReadFull(r, buf[len(first):]); err != nil {
		return nil, truncated(err)
	}
	return buf, nil
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
