package share

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// Kafka's binary encoding, as much of it as the share group records need:
// keys use the classic (non-flexible) form, values the flexible one
// (compact strings and arrays, tagged fields). See doc.go for the layouts.

type writer struct{ b []byte }

func (w *writer) int8(v int8)   { w.b = append(w.b, byte(v)) }
func (w *writer) int16(v int16) { w.b = binary.BigEndian.AppendUint16(w.b, uint16(v)) }
func (w *writer) int32(v int32) { w.b = binary.BigEndian.AppendUint32(w.b, uint32(v)) }
func (w *writer) int64(v int64) { w.b = binary.BigEndian.AppendUint64(w.b, uint64(v)) }
func (w *writer) uvarint(v uint64) {
	w.b = binary.AppendUvarint(w.b, v)
}
func (w *writer) uuid(id TopicID) { w.b = append(w.b, id[:]...) }

// string is a classic STRING: int16 length, bytes (keys only).
func (w *writer) string(s string) {
	w.int16(int16(len(s)))
	w.b = append(w.b, s...)
}

// compactString is COMPACT_STRING: uvarint length+1, bytes.
func (w *writer) compactString(s string) {
	w.uvarint(uint64(len(s)) + 1)
	w.b = append(w.b, s...)
}

// compactNullableString is COMPACT_NULLABLE_STRING: 0 for null.
func (w *writer) compactNullableString(s *string) {
	if s == nil {
		w.uvarint(0)
		return
	}
	w.compactString(*s)
}

// compactArrayLen starts a COMPACT_ARRAY of n elements.
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

// noTags ends a flexible struct that has no tagged fields set.
func (w *writer) noTags() { w.uvarint(0) }

// reader decodes; the first error sticks and every later read returns zero
// values, so decoders read straight through and check err once.
type reader struct {
	b   []byte
	err error
}

var errShort = errors.New("share: record truncated")

func (r *reader) fail(format string, args ...any) {
	if r.err == nil {
		r.err = fmt.Errorf("share: "+format, args...)
	}
}

func (r *reader) take(n int) []byte {
	if r.err != nil {
		return nil
	}
	if n < 0 || len(r.b) < n {
		r.err = errShort
		return nil
	}
	v := r.b[:n]
	r.b = r.b[n:]
	return v
}

func (r *reader) int8() int8 {
	b := r.take(1)
	if b == nil {
		return 0
	}
	return int8(b[0])
}

func (r *reader) int16() int16 {
	b := r.take(2)
	if b == nil {
		return 0
	}
	return int16(binary.BigEndian.Uint16(b))
}

func (r *reader) int32() int32 {
	b := r.take(4)
	if b == nil {
		return 0
	}
	return int32(binary.BigEndian.Uint32(b))
}

func (r *reader) int64() int64 {
	b := r.take(8)
	if b == nil {
		return 0
	}
	return int64(binary.BigEndian.Uint64(b))
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

func (r *reader) uuid() TopicID {
	var id TopicID
	copy(id[:], r.take(16))
	return id
}

func (r *reader) string() string {
	n := r.int16()
	if n < 0 {
		r.fail("null string in a key")
		return ""
	}
	return string(r.take(int(n)))
}

// length reads a compact length (uvarint n+1); -1 means null.
func (r *reader) length() int {
	v := r.uvarint()
	if v > uint64(len(r.b))+1 { // every element is at least one byte
		r.fail("compact length %d exceeds the %d bytes left", v, len(r.b))
		return -1
	}
	return int(v) - 1
}

func (r *reader) compactString() string {
	n := r.length()
	if n < 0 {
		if r.err == nil {
			r.fail("null where a string is required")
		}
		return ""
	}
	return string(r.take(n))
}

func (r *reader) compactNullableString() *string {
	n := r.length()
	if n < 0 {
		return nil
	}
	s := string(r.take(n))
	return &s
}

func (r *reader) compactStrings() []string {
	n := r.length()
	if n < 0 {
		if r.err == nil {
			r.fail("null string array")
		}
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
		if r.err == nil {
			r.fail("null int32 array")
		}
		return nil
	}
	vs := make([]int32, 0, n)
	for range n {
		vs = append(vs, r.int32())
	}
	return vs
}

// tags skips a flexible struct's tagged fields: none of the share group
// records define one, so all are unknown and skipped.
func (r *reader) tags() {
	n := r.uvarint()
	for range n {
		r.uvarint() // tag
		size := r.uvarint()
		if size > uint64(len(r.b)) {
			r.err = errShort
			return
		}
		r.take(int(size))
	}
}

// done reports trailing bytes as an error: a record longer than its schema
// is not one we understand.
func (r *reader) done() error {
	if r.err == nil && len(r.b) > 0 {
		r.fail("%d trailing bytes", len(r.b))
	}
	return r.err
}
