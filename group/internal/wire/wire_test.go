package wire

import (
	"encoding/hex"
	"reflect"
	"strings"
	"testing"
)

func TestRoundTrip(t *testing.T) {
	s := "s"
	w := Writer{B: Key(5, "g", "m")}
	w.Int8(-1)
	w.Int64(-2)
	w.UUID([16]byte{1})
	w.CompactNullableString(nil)
	w.CompactNullableString(&s)
	w.CompactStrings([]string{"a", ""})
	w.TopicPartitions(map[[16]byte][]int32{{2}: {3}, {1}: {1, 0}})
	w.NoTags()
	const want = "0005 0001 67 0001 6d ff fffffffffffffffe 01000000000000000000000000000000" +
		"00 02 73 03 02 61 01" +
		"03 01000000000000000000000000000000 03 00000001 00000000 00 02000000000000000000000000000000 02 00000003 00" +
		"00"
	if got := hex.EncodeToString(w.B); got != strings.ReplaceAll(want, " ", "") {
		t.Fatalf("got  %s\nwant %s", got, strings.ReplaceAll(want, " ", ""))
	}

	r := NewReader(w.B)
	if r.Int16() != 5 || r.KeyString() != "g" || r.KeyString() != "m" || r.Int8() != -1 || r.Int64() != -2 ||
		r.UUID() != [16]byte{1} || r.CompactNullableString() != nil || *r.CompactNullableString() != "s" ||
		!reflect.DeepEqual(r.CompactStrings(), []string{"a", ""}) ||
		!reflect.DeepEqual(r.TopicPartitions(), map[[16]byte][]int32{{2}: {3}, {1}: {1, 0}}) {
		t.Fatalf("decoded differently: %v", r.Err())
	}
	r.Tags(nil)
	if err := r.Done(); err != nil {
		t.Fatal(err)
	}
}

func TestReaderErrors(t *testing.T) {
	for _, c := range []struct {
		name, in string
		read     func(r *Reader)
		want     string
	}{
		{"truncated", "00", func(r *Reader) { r.Int32() }, "truncated: need 4 bytes, have 1"},
		{"sticky", "00", func(r *Reader) { r.Int32(); r.Int8(); r.Failf("later") }, "truncated: need 4 bytes, have 1"},
		{"trailing", "0000", func(r *Reader) { r.Int8() }, "1 trailing bytes"},
		{"null key string", "ffff", func(r *Reader) { r.KeyString() }, "null string in a key"},
		{"null string", "00", func(r *Reader) { r.CompactString() }, "null where a string is required"},
		{"null strings", "00", func(r *Reader) { r.CompactStrings() }, "null string array"},
		{"null int32s", "00", func(r *Reader) { r.CompactInt32s() }, "null int32 array"},
		{"null array", "00", func(r *Reader) { r.Array("things", func() {}) }, "null things"},
		{"overlong", "05 00", func(r *Reader) { r.CompactLength() }, "compact length 5 exceeds the 1 bytes left"},
		{"varint", "ff", func(r *Reader) { r.Uvarint() }, "truncated: unsigned varint"},
		{"tag size", "01 00 05 00", func(r *Reader) { r.Tags(nil) }, "truncated: tagged field 0 of 5 bytes, 1 left"},
		// A count of 2^63 tagged fields ends at the first failed read
		// instead of looping on.
		{"tag count", "80808080808080808001", func(r *Reader) { r.Tags(nil) }, "truncated: unsigned varint"},
	} {
		b, _ := hex.DecodeString(strings.ReplaceAll(c.in, " ", ""))
		r := NewReader(b)
		c.read(r)
		if err := r.Done(); err == nil || err.Error() != c.want {
			t.Errorf("%s: got %v, want %s", c.name, err, c.want)
		}
	}

	// The nullable forms read null as nil without failing.
	r := NewReader([]byte{0, 0})
	if r.CompactNullableStrings() != nil || r.CompactNullableInt32s() != nil || r.Done() != nil {
		t.Fatalf("nullable arrays: %v", r.Err())
	}
	// Tags hands known fields over and skips the rest.
	r = NewReader([]byte{2, 0, 1, 7, 3, 0})
	var got []uint64
	r.Tags(func(tag uint64, data []byte) { got = append(got, tag, uint64(len(data))) })
	if r.Done() != nil || !reflect.DeepEqual(got, []uint64{0, 1, 3, 0}) {
		t.Fatalf("tags %v: %v", got, r.Err())
	}
}
