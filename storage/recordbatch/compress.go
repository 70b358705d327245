package recordbatch

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
)

// Fjord stores batches as they were sent; it decompresses only to validate
// records and to find a record by timestamp.

var errTooBig = errors.New("decompressed batch exceeds limit")

// xerialMagic starts snappy data framed the way the Java client (and
// librdkafka, for compatibility) frames it: the magic, two int32 versions,
// then int32-length-prefixed raw snappy blocks.
var xerialMagic = []byte{0x82, 'S', 'N', 'A', 'P', 'P', 'Y', 0}

var zstdDecoders = sync.Pool{New: func() any {
	d, _ := zstd.NewReader(nil, zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxMemory(maxDecompressed))
	return d
}}

func decompress(codec int8, src []byte, limit int) ([]byte, error) {
	switch codec {
	case CodecGzip:
		r, err := gzip.NewReader(bytes.NewReader(src))
		if err != nil {
			return nil, fmt.Errorf("gzip: %w", err)
		}
		return readLimited(r, limit)
	case CodecSnappy:
		if bytes.HasPrefix(src, xerialMagic) {
			return unxerial(src[len(xerialMagic):], limit)
		}
		return snappyBlock(src, limit)
	case CodecLZ4:
		return readLimited(lz4.NewReader(bytes.NewReader(src)), limit)
	case CodecZstd:
		d := zstdDecoders.Get().(*zstd.Decoder)
		defer zstdDecoders.Put(d)
		if err := d.Reset(bytes.NewReader(src)); err != nil {
			return nil, fmt.Errorf("zstd: %w", err)
		}
		return readLimited(d, limit)
	}
	return nil, fmt.Errorf("unknown codec %d", codec)
}

func readLimited(r io.Reader, limit int) ([]byte, error) {
	out, err := io.ReadAll(io.LimitReader(r, int64(limit)+1))
	if err != nil {
		return nil, err
	}
	if len(out) > limit {
		return nil, errTooBig
	}
	return out, nil
}

func snappyBlock(src []byte, limit int) ([]byte, error) {
	n, err := s2.DecodedLen(src)
	if err != nil {
		return nil, fmt.Errorf("snappy: %w", err)
	}
	if n > limit {
		return nil, errTooBig
	}
	out, err := s2.Decode(nil, src)
	if err != nil {
		return nil, fmt.Errorf("snappy: %w", err)
	}
	return out, nil
}

func unxerial(src []byte, limit int) ([]byte, error) {
	if len(src) < 8 {
		return nil, errors.New("snappy: short xerial header")
	}
	src = src[8:] // version, compatible version
	var out []byte
	for len(src) > 0 {
		if len(src) < 4 {
			return nil, errors.New("snappy: short xerial block length")
		}
		n := int(binary.BigEndian.Uint32(src))
		src = src[4:]
		if n < 0 || n > len(src) {
			return nil, errors.New("snappy: xerial block overruns")
		}
		block, err := snappyBlock(src[:n], limit-len(out))
		if err != nil {
			return nil, err
		}
		out = append(out, block...)
		src = src[n:]
	}
	return out, nil
}

var zstdEncoders = sync.Pool{New: func() any {
	e, _ := zstd.NewWriter(nil, zstd.WithEncoderConcurrency(1))
	return e
}}

// compress encodes src with a batch codec. AppendRewritten uses it to keep a
// rewritten batch in the codec it was produced with.
func compress(codec int8, src []byte) ([]byte, error) {
	var buf bytes.Buffer
	switch codec {
	case CodecNone:
		return src, nil
	case CodecGzip:
		w := gzip.NewWriter(&buf)
		if _, err := w.Write(src); err != nil {
			return nil, err
		}
		if err := w.Close(); err != nil {
			return nil, err
		}
	case CodecSnappy:
		// Raw snappy, as franz-go writes it; every client reads it.
		return s2.EncodeSnappy(nil, src), nil
	case CodecLZ4:
		w := lz4.NewWriter(&buf)
		if _, err := w.Write(src); err != nil {
			return nil, err
		}
		if err := w.Close(); err != nil {
			return nil, err
		}
	case CodecZstd:
		e := zstdEncoders.Get().(*zstd.Encoder)
		defer zstdEncoders.Put(e)
		return e.EncodeAll(src, nil), nil
	default:
		return nil, fmt.Errorf("unknown codec %d", codec)
	}
	return buf.Bytes(), nil
}
