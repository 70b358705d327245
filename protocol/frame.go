package protocol

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
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

// readChunk bounds how much buffer a frame may claim before its bytes arrive.
// A peer announcing 100 MiB and sending nothing gets 64 KiB of memory, not 100
// MiB (KAFKA-4090: a TLS record header read as a size prefix).
const readChunk = 64 << 10

// ReadFrame reads one size-prefixed frame from r. The returned slice is owned
// by the caller. max bounds the size prefix.
func ReadFrame(r io.Reader, max int32) ([]byte, error) {
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
	if n <= readChunk {
		buf := make([]byte, n)
		if _, err := io.ReadFull(r, buf); err != nil {
			return nil, truncated(err)
		}
		return buf, nil
	}
	// Large frames grow with the bytes that actually arrive.
	var b bytes.Buffer
	b.Grow(readChunk)
	got, err := io.CopyN(&b, r, int64(n))
	if err != nil || got != int64(n) {
		return nil, truncated(err)
	}
	return b.Bytes(), nil
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
