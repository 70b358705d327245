package tier

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"

	"github.com/fjordlog/fjord/controller"
	"github.com/fjordlog/fjord/storage/recordbatch"
)

// TestVerifyBatches: what a remote read refuses before serving a byte: a
// CRC mismatch, a base offset (outside the CRC) out of order or outside
// the segment, an object shorter than asked, a first batch without the
// offset; whole good batches pass, a cut last one is left to wholeBatches.
func TestVerifyBatches(t *testing.T) {
	var segData []byte
	for i := int64(0); i < 3; i++ {
		b := recordbatch.Build([]recordbatch.KV{{Value: []byte("a")}, {Value: []byte("b")}}, 1000)
		recordbatch.Stamp(b, 100+2*i, 1, -1)
		segData = append(segData, b...)
	}
	seg := controller.RemoteSegmentMeta{RemoteSegment: controller.RemoteSegment{BaseOffset: 100, EndOffset: 105, SizeBytes: int64(len(segData))}}
	batchLen := len(segData) / 3
	ok := func(data []byte, want, offset int64) error { return verifyBatches(seg, 0, data, want, offset) }
	if err := ok(segData, int64(len(segData)), 101); err != nil {
		t.Fatalf("good segment: %v", err)
	}
	if err := ok(segData[:len(segData)-5], int64(len(segData)-5), 100); err != nil {
		t.Fatalf("a read cut inside its last batch: %v", err)
	}
	for name, c := range map[string]struct {
		mutate func(b []byte)
		want   int64
		offset int64
	}{
		"crc":              {func(b []byte) { b[batchLen+70] ^= 1 }, 0, 100},
		"base backwards":   {func(b []byte) { binary.BigEndian.PutUint64(b[2*batchLen:], 99) }, 0, 100},
		"past the segment": {func(b []byte) { binary.BigEndian.PutUint64(b[2*batchLen:], 200) }, 0, 100},
		"short object":     {func([]byte) {}, int64(len(segData) + 1), 100},
		"offset not first": {func([]byte) {}, 0, 103},
		"bad length":       {func(b []byte) { binary.BigEndian.PutUint32(b[8:], 1) }, 0, 100},
	} {
		b := bytes.Clone(segData)
		c.mutate(b)
		want := c.want
		if want == 0 {
			want = int64(len(b))
		}
		if err := ok(b, want, c.offset); !errors.Is(err, ErrDamaged) {
			t.Errorf("%s: %v, want ErrDamaged", name, err)
		}
	}
}
