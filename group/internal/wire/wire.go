// Package wire is the part of Kafka's binary protocol encoding that the
// group packages' coordinator records use (group/consumer and group/share
// on __consumer_offsets, group/sharepart on __share_group_state), written
// once so that the three agree byte for byte with Kafka and with each
// other:
//
//	INT8/16/32/64  big-endian, two's complement
//	UUID           16 bytes
//	STRING         int16 length, bytes (keys only; never null here)
//	COMPACT_STRING uvarint length+1, bytes; 0 is null (nullable fields only)
//	COMPACT_ARRAY  uvarint count+1, elements; 0 is null
//	tagged fields  uvarint count, then per field uvarint tag (ascending),
//	               uvarint size, size bytes
//
// A record's key is its int16 type followed by STRINGs and fixed-width
// fields (Key); its value is an int16 version followed by the fields in
// the flexible encoding, each struct ending with its tagged fields (Value).
// Which fields a record has is the caller's business.
//
// Reader errors are sticky and carry no package prefix: the caller wraps
// the first one with what it was decoding (record type, group), and with
// its own sentinel where it has one.
package wire

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"maps"
	"slices"
)

// Writer appends encoded values to B, the encoding so far.
type Writer struct{ B []byte }

// Key returns a record key: typ, then each of strs as a STRING (KeyString).
func Key(typ int16, strs ...string) []byte {
	n := 2
	for _, s := range strs {
		n += 2 + len(s)
	}
	w := Writer{B: make([]byte, 0, n)}
	w.Int16(typ)
	for _, s := range strs {
		w.KeyString(s)
	}
	return w.B
}

// Value starts a record value: its int16 version.
func Value(version int16) *Writer {
	w := &Writer{B: make([]byte, 0, 64)}
	w.Int16(version)
	return w
}

// Int8 to UUID write the fixed-width types; CompactArrayLen starts a
// COMPACT_ARRAY of n elements.
func (w *Writer) Int8(v int8)           { w.B = append(w.B, byte(v)) }
func (w *Writer) Int16(v int16)         { w.B = binary.BigEndian.AppendUint16(w.B, uint16(v)) }
func (w *Writer) Int32(v int32)         { w.B = binary.BigEndian.AppendUint32(w.B, uint32(v)) }
func (w *Writer) Int64(v int64)         { w.B = binary.BigEndian.AppendUint64(w.B, uint64(v)) }
func (w *Writer) Uvarint(v uint64)      { w.B = binary.AppendUvarint(w.B, v) }
func (w *Writer) UUID(id [16]byte)      { w.B = append(w.B, id[:]...) }
func (w *Writer) CompactArrayLen(n int) { w.Uvarint(uint64(n) + 1) }

// NoTags ends a flexible struct that has no tagged field set.
func (w *Writer) NoTags() { w.Uvarint(0) }

// KeyString writes a STRING (keys use no other string type).
func (w *Writer) KeyString(s string) {
	w.Int16(int16(len(s)))
	w.B = append(w.B, s...)
}

// CompactString writes a COMPACT_STRING.
func (w *Writer) CompactString(s string) {
	w.Uvarint(uint64(len(s)) + 1)
	w.B = append(w.B, s...)
}

// CompactNullableString writes a COMPACT_NULLABLE_STRING: nil is null.
func (w *Writer) CompactNullableString(s *string) {
	if s == nil {
		w.Uvarint(0)
		return
	}
	w.CompactString(*s)
}

// CompactStrings writes a COMPACT_ARRAY of COMPACT_STRING.
func (w *Writer) CompactStrings(ss []string) {
	w.CompactArrayLen(len(ss))
	for _, s := range ss {
		w.CompactString(s)
	}
}

// CompactInt32s writes a COMPACT_ARRAY of INT32.
func (w *Writer) CompactInt32s(vs []int32) {
	w.CompactArrayLen(len(vs))
	for _, v := range vs {
		w.Int32(v)
	}
}

// TopicPartitions writes Kafka's TopicPartitions array ({TopicId UUID,
// Partitions []int32, no tags}) with the topics sorted by id, so that equal
// maps encode equally. The partition lists are written as they are.
func (w *Writer) TopicPartitions(m map[[16]byte][]int32) {
	ids := slices.Collect(maps.Keys(m))
	slices.SortFunc(ids, func(a, b [16]byte) int { return bytes.Compare(a[:], b[:]) })
	w.CompactArrayLen(len(ids))
	for _, id := range ids {
		w.UUID(id)
		w.CompactInt32s(m[id])
		w.NoTags()
	}
}

// Reader decodes b. The first error sticks: every later read returns a
// zero value and reads nothing, so decoders read a whole record straight
// through and check Err (or Done) once.
type Reader struct {
	b   []byte
	err error
}

// NewReader returns a Reader of b; it does not copy b, and the []byte
// results of Bytes alias it.
func NewReader(b []byte) *Reader { return &Reader{b: b} }

// Err is the first error, nil if none.
func (r *Reader) Err() error { return r.err }

// Len is the number of bytes not yet read.
func (r *Reader) Len() int { return len(r.b) }

// Failf records an error unless one is already recorded.
func (r *Reader) Failf(format string, args ...any) {
	if r.err == nil {
		r.err = fmt.Errorf(format, args...)
	}
}

// Done fails on unread bytes (a record longer than its schema is not one
// we understand) and returns Err.
func (r *Reader) Done() error {
	if r.err == nil && len(r.b) > 0 {
		r.Failf("%d trailing bytes", len(r.b))
	}
	return r.err
}

// Bytes reads n bytes; nil after an error.
func (r *Reader) Bytes(n int) []byte {
	if r.err != nil {
		return nil
	}
	if n < 0 || n > len(r.b) {
		r.Failf("truncated: need %d bytes, have %d", n, len(r.b))
		return nil
	}
	v := r.b[:n]
	r.b = r.b[n:]
	return v
}

// Int8 to UUID read the fixed-width types.
func (r *Reader) Int8() int8 {
	if b := r.Bytes(1); b != nil {
		return int8(b[0])
	}
	return 0
}

func (r *Reader) Int16() int16 {
	if b := r.Bytes(2); b != nil {
		return int16(binary.BigEndian.Uint16(b))
	}
	return 0
}

func (r *Reader) Int32() int32 {
	if b := r.Bytes(4); b != nil {
		return int32(binary.BigEndian.Uint32(b))
	}
	return 0
}

func (r *Reader) Int64() int64 {
	if b := r.Bytes(8); b != nil {
		return int64(binary.BigEndian.Uint64(b))
	}
	return 0
}

func (r *Reader) Uvarint() uint64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.b)
	switch {
	case n == 0:
		r.Failf("truncated: unsigned varint")
		return 0
	case n < 0:
		r.Failf("unsigned varint over 64 bits")
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *Reader) UUID() (id [16]byte) {
	copy(id[:], r.Bytes(16))
	return id
}

// KeyString reads a STRING; null fails (keys hold no nulls). It is not
// named String, which would make a Reader a fmt.Stringer that reads.
func (r *Reader) KeyString() string {
	n := r.Int16()
	if n < 0 {
		r.Failf("null string in a key")
		return ""
	}
	return string(r.Bytes(int(n)))
}

// CompactLength reads a COMPACT_STRING's length or a COMPACT_ARRAY's
// count: -1 for null. A count larger than the bytes left fails (every
// element takes at least one byte), so callers may allocate by it.
func (r *Reader) CompactLength() int {
	v := r.Uvarint()
	if v > uint64(len(r.b))+1 {
		r.Failf("compact length %d exceeds the %d bytes left", v, len(r.b))
		return -1
	}
	return int(v) - 1
}

// CompactString reads a COMPACT_STRING; null fails.
func (r *Reader) CompactString() string {
	s := r.CompactNullableString()
	if s == nil {
		r.Failf("null where a string is required")
		return ""
	}
	return *s
}

// CompactNullableString reads a COMPACT_NULLABLE_STRING: nil for null.
func (r *Reader) CompactNullableString() *string {
	n := r.CompactLength()
	if n < 0 {
		return nil
	}
	s := string(r.Bytes(n))
	return &s
}

// CompactStrings reads a COMPACT_ARRAY of COMPACT_STRING; null fails.
func (r *Reader) CompactStrings() []string {
	ss, null := r.compactStrings()
	if null {
		r.Failf("null string array")
	}
	return ss
}

// CompactNullableStrings is CompactStrings with null read as nil.
func (r *Reader) CompactNullableStrings() []string {
	ss, _ := r.compactStrings()
	return ss
}

func (r *Reader) compactStrings() (ss []string, null bool) {
	n := r.CompactLength()
	if n < 0 {
		return nil, r.err == nil
	}
	ss = make([]string, 0, n)
	for range n {
		ss = append(ss, r.CompactString())
	}
	return ss, false
}

// CompactInt32s reads a COMPACT_ARRAY of INT32; null fails.
func (r *Reader) CompactInt32s() []int32 {
	vs, null := r.compactInt32s()
	if null {
		r.Failf("null int32 array")
	}
	return vs
}

// CompactNullableInt32s is CompactInt32s with null read as nil.
func (r *Reader) CompactNullableInt32s() []int32 {
	vs, _ := r.compactInt32s()
	return vs
}

func (r *Reader) compactInt32s() (vs []int32, null bool) {
	n := r.CompactLength()
	if n < 0 {
		return nil, r.err == nil
	}
	vs = make([]int32, 0, n)
	for range n {
		vs = append(vs, r.Int32())
	}
	return vs, false
}

// Array reads a COMPACT_ARRAY, calling elem to read each element; a null
// array fails with "null <what>". It stops at the first error.
func (r *Reader) Array(what string, elem func()) {
	n := r.CompactLength()
	if n < 0 {
		r.Failf("null %s", what)
		return
	}
	for i := 0; i < n && r.err == nil; i++ {
		elem()
	}
}

// Tags reads a tagged-field section, handing each field to f (which may
// be nil) unless an error came first; unknown tags are the caller's to
// skip, as Kafka does. It stops at the first error.
func (r *Reader) Tags(f func(tag uint64, data []byte)) {
	for n := r.Uvarint(); n > 0 && r.err == nil; n-- {
		tag := r.Uvarint()
		size := r.Uvarint()
		if r.err == nil && size > uint64(len(r.b)) {
			r.Failf("truncated: tagged field %d of %d bytes, %d left", tag, size, len(r.b))
		}
		data := r.Bytes(int(min(size, uint64(len(r.b)))))
		if r.err == nil && f != nil {
			f(tag, data)
		}
	}
}

// TopicPartitions reads what Writer.TopicPartitions writes. A topic listed
// twice has its partitions concatenated; the lists are as read, for the
// caller to normalize. A null array, of topics or of partitions, fails.
func (r *Reader) TopicPartitions() map[[16]byte][]int32 {
	raw := map[[16]byte][]int32{}
	r.Array("topic partitions", func() {
		id := r.UUID()
		raw[id] = append(raw[id], r.CompactInt32s()...)
		r.Tags(nil)
	})
	return raw
}
