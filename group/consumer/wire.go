package consumer

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// Kafka's binary encoding, the subset the records use. Keys are not
// flexible (int16-length strings); values are flexible (uvarint-length
// compact strings and arrays, tagged fields).

var errShort = errors.New("consumer: record truncated")

type writer struct{ b []byte }

func (w *writer) int8(v int8)   { w.b = append(w.b, byte(v)) }
func (w *writer) int16(v int16) { w.b = binary.BigEndian.AppendUint16(w.b, uint16(v)) }
func (w *writer) int32(v int32) { w.b = binary.BigEndian.AppendUint32(w.b, uint32(v)) }
func (w *writer) int64(v int64) { w.b = binary.BigEndian.AppendUint64(w.b, uint64(v)) }
func (w *writer) uvarint(v uint64) {
	w.b = binary.AppendUvarint(w.b, v)
}
func (w *writer) uuid(id TopicID) { w.b = append(w.b, id[:]...) }

// string is a non-flexible STRING: int16 length, bytes.
func (w *writer) string(s string) {
	w.int16(int16(len(s)))
	w.b = append(w.b, s...)
}

// compactString is a COMPACT_STRING: uvarint length+1, bytes.
func (w *writer) compactString(s string) {
	w.uvarint(uint64(len(s)) + 1)
	w.b = append(w.b, s...)
}

// compactNullableString is a COMPACT_NULLABLE_STRING: 0 for null.
func (w *writer) compactNullableString(s *string) {
	if s == nil {
		w.uvarint(0)
		return
	}
	w.compactString(*s)
}

func (w *writer) compactArrayLen(n int) { w.uvarint(uint64(n) + 1) }

func (w *writer) compactStrings(ss []string) {
	w.compactArrayLen(len(ss))
	for _, s := range ss {
		w.compactString(s)
	}
}

func (w *writer) compactInt32s(vs []int32) {
	w.compactArrayLen(len(vs))
	for _, v := range vs {
		w.int32(v)
	}
}

// noTags writes an empty tagged-field section.
func (w *writer) noTags() { w.uvarint(0) }

type reader struct {
	b   []byte
	err error
}

func (r *reader) take(n int) []byte {
	if r.err != nil {
		return nil
	}
	if n < 0 || n > len(r.b) {
		r.err = errShort
		return nil
	}
	v := r.b[:n]
	r.b = r.b[n:]
	return v
}

func (r *reader) int8() int8 {
	if b := r.take(1); b != nil {
		return int8(b[0])
	}
	return 0
}

func (r *reader) int16() int16 {
	if b := r.take(2); b != nil {
		return int16(binary.BigEndian.Uint16(b))
	}
	return 0
}

func (r *reader) int32() int32 {
	if b := r.take(4); b != nil {
		return int32(binary.BigEndian.Uint32(b))
	}
	return 0
}

func (r *reader) int64() int64 {
	if b := r.take(8); b != nil {
		return int64(binary.BigEndian.Uint64(b))
	}
	return 0
}

func (r *reader) uvarint() uint64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.err = errShort
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *reader) uuid() (id TopicID) {
	copy(id[:], r.take(16))
	return id
}

func (r *reader) string() string {
	n := r.int16()
	if n < 0 {
		r.fail("null key string")
		return ""
	}
	return string(r.take(int(n)))
}

// length reads a compact length: -1 for null.
func (r *reader) length() int {
	n := r.uvarint()
	if n > uint64(len(r.b))+1 {
		// Each element takes at least one byte: a longer length is
		// corruption, and would make us allocate blindly.
		r.err = errShort
		return -1
	}
	return int(n) - 1
}

func (r *reader) compactNullableString() *string {
	n := r.length()
	if n < 0 {
		return nil
	}
	s := string(r.take(n))
	return &s
}

func (r *reader) compactString() string {
	s := r.compactNullableString()
	if s == nil {
		r.fail("null string")
		return ""
	}
	return *s
}

func (r *reader) compactStrings() []string {
	n := r.length()
	if n < 0 {
		return nil
	}
	ss := make([]string, 0, n)
	for range n {
		ss = append(ss, r.compactString())
	}
	return ss
}

func (r *reader) compactInt32s() []int32 {
	n := r.length()
	if n < 0 {
		return nil
	}
	vs := make([]int32, 0, n)
	for range n {
		vs = append(vs, r.int32())
	}
	return vs
}

// tags reads a tagged-field section, handing each field's bytes to f
// (which may be nil); unknown tags are skipped, as Kafka does.
func (r *reader) tags(f func(tag uint64, data []byte)) {
	n := r.uvarint()
	for range n {
		tag := r.uvarint()
		size := r.uvarint()
		data := r.take(int(min(size, uint64(len(r.b)+1))))
		if r.err == nil && f != nil {
			f(tag, data)
		}
	}
}

func (r *reader) fail(format string, args ...any) {
	if r.err == nil {
		r.err = fmt.Errorf("consumer: malformed record: "+format, args...)
	}
}

// done fails on trailing bytes.
func (r *reader) done() error {
	if r.err == nil && len(r.b) > 0 {
		r.err = fmt.Errorf("consumer: malformed record: %d trailing bytes", len(r.b))
	}
	return r.err
}
