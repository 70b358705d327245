package recordbatch

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math"
	"math/rand"
	"strings"
	"testing"

	"github.com/fjordlog/fjord/storage/recordbatch/batchtest"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// recordsOf decodes every record of a batch with EachRecord, the code
// under test.
func recordsOf(t testing.TB, b []byte) []Record {
	t.Helper()
	info, err := ParseHeader(b)
	if err != nil {
		t.Fatal(err)
	}
	var out []Record
	if err := EachRecord(b, info, func(r Record) bool {
		out = append(out, Record{TimestampDelta: r.TimestampDelta, OffsetDelta: r.OffsetDelta, Key: bytes.Clone(r.Key), Value: bytes.Clone(r.Value)})
		return true
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

func wantErrIs(t testing.TB, err, target error) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Fatalf("error %v, want errors.Is %v", err, target)
	}
}

// TestBuildBatchMatchesKmsg cross-checks the hand-written batch encoder
// against franz-go: every header field, the CRC, the re-encoding, and each
// record, for every codec.
func TestBuildBatchMatchesKmsg(t *testing.T) {
	for _, c := range batchtest.Codecs {
		t.Run(c.Name, func(t *testing.T) {
			o := batchtest.Opts{
				N: 7, ValueSize: 100, Codec: c.Codec, Xerial: c.Xerial,
				Idempotent: true, PID: 4242, Epoch: 3, Seq: 17,
				BaseTS: 1_700_000_000_000, TSDeltas: []int64{0, 5, 3, 9, 9, 2, 1},
				LeaderEpoch: -1, Attrs: attrTransactional,
			}
			b := batchtest.Build(t, o)
			rb, recs := batchtest.Decode(t, b)
			if int(rb.Length) != len(b)-12 || rb.Magic != 2 || rb.PartitionLeaderEpoch != -1 {
				t.Fatalf("framing: length %d (batch %d) magic %d epoch %d", rb.Length, len(b), rb.Magic, rb.PartitionLeaderEpoch)
			}
			if uint32(rb.CRC) != crc32.Checksum(b[21:], crc32.MakeTable(crc32.Castagnoli)) {
				t.Fatalf("crc %08x does not cover bytes [21:]", uint32(rb.CRC))
			}
			if rb.Attributes != int16(c.Codec)|attrTransactional || rb.LastOffsetDelta != 6 || rb.NumRecords != 7 ||
				rb.FirstTimestamp != o.BaseTS || rb.MaxTimestamp != o.BaseTS+9 ||
				rb.ProducerID != 4242 || rb.ProducerEpoch != 3 || rb.FirstSequence != 17 {
				t.Fatalf("header mismatch: %+v", rb)
			}
			if re := rb.AppendTo(nil); !bytes.Equal(re, b) {
				t.Fatalf("kmsg re-encoding differs")
			}
			want := o.Recs()
			if len(recs) != len(want) {
				t.Fatalf("kmsg found %d records, want %d", len(recs), len(want))
			}
			for i, r := range recs {
				w := want[i]
				if r.TimestampDelta64 != w.TSDelta || r.OffsetDelta != w.OffsetDelta || !bytes.Equal(r.Key, w.Key) || !bytes.Equal(r.Value, w.Value) || len(r.Headers) != len(w.Headers) {
					t.Fatalf("record %d: kmsg %+v, built %+v", i, r, w)
				}
				for j, h := range r.Headers {
					if h.Key != string(w.Headers[j][0]) || !bytes.Equal(h.Value, w.Headers[j][1]) {
						t.Fatalf("record %d header %d mismatch", i, j)
					}
				}
			}
			// And the package under test agrees with both.
			info, err := Validate(b, 0)
			if err != nil {
				t.Fatalf("Validate: %v", err)
			}
			got := recordsOf(t, b)
			for i, r := range got {
				if r.TimestampDelta != want[i].TSDelta || r.OffsetDelta != want[i].OffsetDelta || !bytes.Equal(r.Key, want[i].Key) || !bytes.Equal(r.Value, want[i].Value) {
					t.Fatalf("EachRecord record %d = %+v, want %+v", i, r, want[i])
				}
			}
			if !info.Transactional || info.Control || info.LogAppendTimed {
				t.Fatalf("flags: %+v", info)
			}
		})
	}
}

// TestValidateBatchFranzBuilt validates batches that franz-go alone encoded
// and compressed (kmsg records and batch, kgo's compressors).
func TestValidateBatchFranzBuilt(t *testing.T) {
	codecs := []struct {
		name string
		c    kgo.CompressionCodec
		ok   bool
	}{
		{"none", kgo.NoCompression(), true},
		{"gzip", kgo.GzipCompression(), true},
		{"snappy", kgo.SnappyCompression(), true},
		{"lz4", kgo.Lz4Compression(), true},
		{"zstd", kgo.ZstdCompression(), true},
	}
	for _, c := range codecs {
		t.Run(c.name, func(t *testing.T) {
			var raw []byte
			for i := range 20 {
				r := kmsg.Record{TimestampDelta64: int64(i * 2), OffsetDelta: int32(i), Key: []byte{byte(i)}, Value: bytes.Repeat([]byte{'v'}, 50+i),
					Headers: []kmsg.Header{{Key: "trace", Value: []byte("abc")}}}
				body := r.AppendTo(nil)[1:] // AppendTo wrote Length 0 as one varint byte
				r.Length = int32(len(body))
				raw = append(raw, r.AppendTo(nil)...)
			}
			comp, err := kgo.DefaultCompressor(c.c)
			if err != nil {
				t.Fatal(err)
			}
			body, codec := raw, kgo.CodecNone
			if comp != nil {
				body, codec = comp.Compress(new(bytes.Buffer), raw)
				body = bytes.Clone(body)
			}
			rb := kmsg.RecordBatch{
				PartitionLeaderEpoch: -1, Magic: 2, Attributes: int16(codec), LastOffsetDelta: 19,
				FirstTimestamp: 5000, MaxTimestamp: 5038, ProducerID: 9, ProducerEpoch: 1, FirstSequence: 100,
				NumRecords: 20, Records: body,
			}
			rb.Length = int32(HeaderLen - 12 + len(body))
			b := rb.AppendTo(nil)
			batchtest.FixCRC(b)
			info, err := Validate(b, 0)
			if err != nil {
				t.Fatalf("Validate(franz-go %s batch): %v", c.name, err)
			}
			if info.Records != 20 || info.LastDelta != 19 || info.ProducerID != 9 || info.BaseSequence != 100 || int(info.Codec) != int(codec) {
				t.Fatalf("info %+v", info)
			}
			recs := recordsOf(t, b)
			if len(recs) != 20 || recs[19].TimestampDelta != 38 || len(recs[19].Value) != 69 {
				t.Fatalf("records: %d, last %+v", len(recs), recs[len(recs)-1])
			}
		})
	}
}

func TestValidateBatchAcceptsEachCodec(t *testing.T) {
	for _, c := range batchtest.Codecs {
		for _, n := range []int{1, 3, 200} {
			t.Run(fmt.Sprintf("%s/%d", c.Name, n), func(t *testing.T) {
				o := batchtest.Opts{N: n, ValueSize: 40, Codec: c.Codec, Xerial: c.Xerial, Idempotent: true, PID: 1, Epoch: 0, Seq: 5}
				b := batchtest.Build(t, o)
				info, err := Validate(b, len(b))
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				if info.Bytes != len(b) || info.Codec != c.Codec || info.Records != int32(n) || info.LastDelta != int32(n-1) ||
					info.BaseTimestamp != 1000 || info.MaxTimestamp != 1000+int64(n-1) || info.ProducerID != 1 || info.BaseSequence != 5 ||
					info.LastSequence() != int32(5+n-1) || !info.Idempotent() {
					t.Fatalf("info %+v", info)
				}
				recs := recordsOf(t, b)
				if len(recs) != n {
					t.Fatalf("%d records, want %d", len(recs), n)
				}
				for i, r := range recs {
					if r.OffsetDelta != int32(i) || r.TimestampDelta != int64(i) || string(r.Key) != fmt.Sprintf("key-%d", i) {
						t.Fatalf("record %d: %+v", i, r)
					}
				}
			})
		}
	}
}

func TestValidateBatchNullKeyAndValue(t *testing.T) {
	b := batchtest.Build(t, batchtest.Opts{Records: []batchtest.Record{{Key: nil, Value: nil}, {OffsetDelta: 1, Key: []byte{}, Value: []byte("x")}}})
	if _, err := Validate(b, 0); err != nil {
		t.Fatal(err)
	}
	recs := recordsOf(t, b)
	if recs[0].Key != nil || recs[0].Value != nil || recs[1].Key == nil || len(recs[1].Key) != 0 {
		t.Fatalf("null/empty distinction lost: %+v", recs)
	}
}

func TestValidateBatchControlAndNonIdempotent(t *testing.T) {
	b := batchtest.Build(t, batchtest.Opts{Attrs: attrControl | attrTransactional, Idempotent: true, PID: 3, Epoch: 1, Seq: -1,
		Records: []batchtest.Record{batchtest.MarkerRecord(true, 4)}})
	info, err := Validate(b, 0)
	if err != nil {
		t.Fatal(err)
	}
	if !info.Control || !info.Transactional {
		t.Fatalf("flags %+v", info)
	}
	info, err = Validate(batchtest.Build(t, batchtest.Opts{N: 2}), 0)
	if err != nil {
		t.Fatal(err)
	}
	if info.Idempotent() || info.ProducerID != -1 || info.LastSequence() != -1 {
		t.Fatalf("non-idempotent batch: %+v", info)
	}
}

func TestLastSequenceWraps(t *testing.T) {
	for _, c := range []struct {
		base, delta, want int32
	}{
		{0, 0, 0},
		{10, 4, 14},
		{math.MaxInt32, 0, math.MaxInt32},
		{math.MaxInt32, 1, 0},
		{math.MaxInt32 - 1, 2, 0},
		{math.MaxInt32 - 1, 5, 3},
		{-1, 3, -1},
	} {
		if got := (Info{BaseSequence: c.base, LastDelta: c.delta}).LastSequence(); got != c.want {
			t.Errorf("LastSequence(base %d, delta %d) = %d, want %d", c.base, c.delta, got, c.want)
		}
	}
}

// withBody builds a batch of o's records around body instead of their
// encoding, fixing length and CRC, so only the record-level damage is
// under test.
func withBody(t testing.TB, o batchtest.Opts, body []byte) []byte {
	t.Helper()
	return batchtest.BuildBody(t, o, o.Recs(), body)
}

func TestValidateBatchRejects(t *testing.T) {
	good := func() []byte { return batchtest.Build(t, batchtest.Opts{N: 3}) }
	rec := func(r batchtest.Record) []byte { return batchtest.EncodeRecord(r) }
	three := batchtest.Opts{N: 3}
	threeRaw := batchtest.EncodeRecords(three.Recs())
	rng := rand.New(rand.NewSource(1))
	garbage := make([]byte, 300)
	rng.Read(garbage)

	type tc struct {
		name  string
		batch func() []byte
		max   int
		want  error
	}
	cases := []tc{
		{"empty", func() []byte { return nil }, 0, ErrCorrupt},
		{"short header", func() []byte { return good()[:60] }, 0, ErrCorrupt},
		{"bad crc field", func() []byte { b := good(); b[17] ^= 1; return b }, 0, ErrCorrupt},
		{"body byte flipped", func() []byte { b := good(); b[len(b)-2] ^= 0x40; return b }, 0, ErrCorrupt},
		{"attributes flipped", func() []byte { b := good(); b[22] ^= 0x10; return b }, 0, ErrCorrupt},
		{"producer id flipped", func() []byte { b := good(); b[45] ^= 1; return b }, 0, ErrCorrupt},
		{"length too large", func() []byte {
			b := good()
			binary.BigEndian.PutUint32(b[8:], uint32(len(b)-12+1))
			return b
		}, 0, ErrCorrupt},
		{"length too small", func() []byte {
			b := good()
			binary.BigEndian.PutUint32(b[8:], uint32(len(b)-12-1))
			return b
		}, 0, ErrCorrupt},
		{"trailing byte", func() []byte { return append(good(), 0) }, 0, ErrCorrupt},
		{"truncated", func() []byte { b := good(); return b[:len(b)-1] }, 0, ErrCorrupt},
		{"length below header", func() []byte { b := good(); binary.BigEndian.PutUint32(b[8:], 48); return b }, 0, ErrCorrupt},
		{"negative length", func() []byte { b := good(); binary.BigEndian.PutUint32(b[8:], 0xFFFFFFF0); return b }, 0, ErrCorrupt},
		{"min int length", func() []byte { b := good(); binary.BigEndian.PutUint32(b[8:], 0x80000000); return b }, 0, ErrCorrupt},
		{"magic 0", func() []byte { b := good(); b[16] = 0; return b }, 0, ErrUnsupportedMagic},
		{"magic 1", func() []byte { b := good(); b[16] = 1; return b }, 0, ErrUnsupportedMagic},
		{"magic 3", func() []byte { b := good(); b[16] = 3; return b }, 0, ErrUnsupportedMagic},
		{"magic -1", func() []byte { b := good(); b[16] = 0xFF; return b }, 0, ErrUnsupportedMagic},
		{"codec 5", func() []byte { return withBody(t, batchtest.Opts{N: 3, Codec: 5}, threeRaw) }, 0, ErrCorrupt},
		{"codec 6", func() []byte { return withBody(t, batchtest.Opts{N: 3, Codec: 6}, threeRaw) }, 0, ErrCorrupt},
		{"codec 7", func() []byte { return withBody(t, batchtest.Opts{N: 3, Codec: 7}, threeRaw) }, 0, ErrCorrupt},
		{"count one more", func() []byte {
			return batchtest.Build(t, batchtest.Opts{N: 3, Count: batchtest.I32(4), LastDelta: batchtest.I32(3)})
		}, 0, ErrCorrupt},
		{"count one more, delta unchanged", func() []byte { return batchtest.Build(t, batchtest.Opts{N: 3, Count: batchtest.I32(4)}) }, 0, ErrCorrupt},
		{"count one fewer", func() []byte { return batchtest.Build(t, batchtest.Opts{N: 3, Count: batchtest.I32(2)}) }, 0, ErrCorrupt},
		{"count far more", func() []byte {
			return batchtest.Build(t, batchtest.Opts{N: 3, Count: batchtest.I32(1 << 30), LastDelta: batchtest.I32(1<<30 - 1)})
		}, 0, ErrCorrupt},
		{"count zero", func() []byte { return batchtest.Build(t, batchtest.Opts{N: 3, Count: batchtest.I32(0)}) }, 0, ErrCorrupt},
		{"count negative", func() []byte { return batchtest.Build(t, batchtest.Opts{N: 3, Count: batchtest.I32(-1)}) }, 0, ErrCorrupt},
		{"no records, count 0", func() []byte { return withBody(t, batchtest.Opts{Count: batchtest.I32(0)}, nil) }, 0, ErrCorrupt},
		{"compressed count fewer", func() []byte {
			return batchtest.Build(t, batchtest.Opts{N: 5, Codec: CodecZstd, Count: batchtest.I32(4)})
		}, 0, ErrCorrupt},
		{"compressed count more", func() []byte {
			return batchtest.Build(t, batchtest.Opts{N: 5, Codec: CodecLZ4, Count: batchtest.I32(6), LastDelta: batchtest.I32(5)})
		}, 0, ErrCorrupt},
		{"last delta negative", func() []byte { return batchtest.Build(t, batchtest.Opts{N: 1, LastDelta: batchtest.I32(-1)}) }, 0, ErrCorrupt},
		{"last delta below count", func() []byte { return batchtest.Build(t, batchtest.Opts{N: 3, LastDelta: batchtest.I32(1)}) }, 0, ErrCorrupt},
		{"record offset delta negative", func() []byte {
			return withBody(t, three, append(rec(batchtest.Record{OffsetDelta: -1}), threeRaw[len(rec(three.Recs()[0])):]...))
		}, 0, ErrCorrupt},
		{"record offset delta past last", func() []byte {
			recs := three.Recs()
			recs[2].OffsetDelta = 3
			return withBody(t, three, batchtest.EncodeRecords(recs))
		}, 0, ErrCorrupt},
		{"truncated records", func() []byte { return withBody(t, three, threeRaw[:len(threeRaw)-3]) }, 0, ErrCorrupt},
		{"truncated record length varint", func() []byte { return withBody(t, three, append(bytes.Clone(threeRaw), 0x80)) }, 0, ErrCorrupt},
		{"negative record length", func() []byte {
			return withBody(t, three, append(binary.AppendVarint(nil, -5), threeRaw...))
		}, 0, ErrCorrupt},
		{"record length overruns", func() []byte {
			r := rec(three.Recs()[0])
			b := append(binary.AppendVarint(nil, int64(len(threeRaw)+10)), r[1:]...)
			return withBody(t, three, b)
		}, 0, ErrCorrupt},
		{"negative key length", func() []byte {
			body := []byte{0, 0, 0}
			body = binary.AppendVarint(body, -2)
			body = append(body, 0, 0)
			return withBody(t, batchtest.Opts{}, append(binary.AppendVarint(nil, int64(len(body))), body...))
		}, 0, ErrCorrupt},
		{"key length overruns", func() []byte {
			body := []byte{0, 0, 0}
			body = binary.AppendVarint(body, 100)
			body = append(body, 1, 2, 3)
			return withBody(t, batchtest.Opts{}, append(binary.AppendVarint(nil, int64(len(body))), body...))
		}, 0, ErrCorrupt},
		{"negative value length", func() []byte {
			body := []byte{0, 0, 0}
			body = binary.AppendVarint(body, -1)
			body = binary.AppendVarint(body, -7)
			body = append(body, 0)
			return withBody(t, batchtest.Opts{}, append(binary.AppendVarint(nil, int64(len(body))), body...))
		}, 0, ErrCorrupt},
		{"negative header count", func() []byte {
			body := []byte{0, 0, 0}
			body = binary.AppendVarint(body, -1)
			body = binary.AppendVarint(body, -1)
			body = binary.AppendVarint(body, -3)
			return withBody(t, batchtest.Opts{}, append(binary.AppendVarint(nil, int64(len(body))), body...))
		}, 0, ErrCorrupt},
		{"huge header count", func() []byte {
			body := []byte{0, 0, 0}
			body = binary.AppendVarint(body, -1)
			body = binary.AppendVarint(body, -1)
			body = binary.AppendVarint(body, 1<<40)
			return withBody(t, batchtest.Opts{}, append(binary.AppendVarint(nil, int64(len(body))), body...))
		}, 0, ErrCorrupt},
		{"missing header value", func() []byte {
			body := []byte{0, 0, 0}
			body = binary.AppendVarint(body, -1)
			body = binary.AppendVarint(body, -1)
			body = binary.AppendVarint(body, 1)
			body = batchtest.AppendVarBytes(body, []byte("k"))
			return withBody(t, batchtest.Opts{}, append(binary.AppendVarint(nil, int64(len(body))), body...))
		}, 0, ErrCorrupt},
		{"record trailing bytes", func() []byte {
			r := rec(batchtest.Record{Value: []byte("v")})
			body := append(binary.AppendVarint(nil, int64(len(r)-1+2)), append(r[1:], 0, 0)...)
			return withBody(t, batchtest.Opts{}, body)
		}, 0, ErrCorrupt},
		{"empty record", func() []byte { return withBody(t, batchtest.Opts{}, []byte{0}) }, 0, ErrCorrupt},
		{"oversized", func() []byte { return batchtest.Build(t, batchtest.Opts{N: 10, ValueSize: 100}) }, 500, ErrTooLarge},
		{"oversized by one", func() []byte { return good() }, len(good()) - 1, ErrTooLarge},
	}
	for _, c := range batchtest.Codecs[1:] {
		c := c
		cases = append(cases,
			tc{c.Name + " garbage", func() []byte {
				return withBody(t, batchtest.Opts{N: 3, Codec: c.Codec}, garbage)
			}, 0, ErrCorrupt},
			tc{c.Name + " empty body", func() []byte {
				return withBody(t, batchtest.Opts{N: 3, Codec: c.Codec}, nil)
			}, 0, ErrCorrupt},
			tc{c.Name + " truncated stream", func() []byte {
				full := batchtest.Compress(t, c.Codec, c.Xerial, 0, batchtest.EncodeRecords(batchtest.Opts{N: 30, ValueSize: 50}.Recs()))
				return withBody(t, batchtest.Opts{N: 30, ValueSize: 50, Codec: c.Codec}, full[:len(full)*2/3])
			}, 0, ErrCorrupt},
			tc{c.Name + " uncompressed body", func() []byte {
				return withBody(t, batchtest.Opts{N: 3, Codec: c.Codec}, threeRaw)
			}, 0, ErrCorrupt},
		)
	}
	cases = append(cases,
		tc{"xerial short header", func() []byte {
			return withBody(t, batchtest.Opts{N: 3, Codec: CodecSnappy}, append(bytes.Clone(batchtest.XerialMagic), 0, 0, 0, 1))
		}, 0, ErrCorrupt},
		tc{"xerial short block length", func() []byte {
			x := batchtest.Compress(t, CodecSnappy, true, 0, threeRaw)
			return withBody(t, batchtest.Opts{N: 3, Codec: CodecSnappy}, append(x, 0, 0))
		}, 0, ErrCorrupt},
		tc{"xerial block overruns", func() []byte {
			x := batchtest.Compress(t, CodecSnappy, true, 1<<20, threeRaw)
			binary.BigEndian.PutUint32(x[16:], uint32(len(x)))
			return withBody(t, batchtest.Opts{N: 3, Codec: CodecSnappy}, x)
		}, 0, ErrCorrupt},
		tc{"xerial block length negative", func() []byte {
			x := batchtest.Compress(t, CodecSnappy, true, 1<<20, threeRaw)
			binary.BigEndian.PutUint32(x[16:], 0xFFFFFFFF)
			return withBody(t, batchtest.Opts{N: 3, Codec: CodecSnappy}, x)
		}, 0, ErrCorrupt},
		tc{"snappy claims huge length", func() []byte {
			return withBody(t, batchtest.Opts{N: 3, Codec: CodecSnappy}, binary.AppendUvarint(nil, 1<<40))
		}, 0, ErrCorrupt},
	)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b := c.batch()
			var err error
			func() {
				defer func() {
					if r := recover(); r != nil {
						t.Fatalf("Validate panicked: %v", r)
					}
				}()
				_, err = Validate(b, c.max)
			}()
			if err == nil {
				t.Fatalf("Validate accepted a bad batch")
			}
			wantErrIs(t, err, c.want)
			for _, other := range []error{ErrCorrupt, ErrTooLarge, ErrUnsupportedMagic} {
				if other != c.want && errors.Is(err, other) {
					t.Fatalf("error %v also classifies as %v", err, other)
				}
			}
		})
	}
}

func TestValidateBatchMaxBytes(t *testing.T) {
	b := batchtest.Build(t, batchtest.Opts{N: 4})
	for _, max := range []int{0, -1, len(b), len(b) + 1, 1 << 30} {
		if _, err := Validate(b, max); err != nil {
			t.Errorf("maxBytes %d: %v", max, err)
		}
	}
	_, err := Validate(b, len(b)-1)
	wantErrIs(t, err, ErrTooLarge)
}

// TestValidateBatchLastDeltaMatchesCount: a produced batch's lastOffsetDelta
// must be recordCount-1. Kafka rejects anything else from clients
// (LogValidator: "Inconsistent batch offset range ... and count of records");
// accepting a larger delta lets one record consume many offsets and skews the
// idempotent sequence bookkeeping (LastSequence uses LastDelta).
func TestValidateBatchLastDeltaMatchesCount(t *testing.T) {
	b := batchtest.Build(t, batchtest.Opts{N: 1, LastDelta: batchtest.I32(1000), Idempotent: true, PID: 1, Seq: 0})
	info, err := Validate(b, 0)
	if err == nil {
		t.Fatalf("regression: Validate accepts a produced batch with 1 record and lastOffsetDelta 1000 (info.LastSequence()=%d); Kafka rejects lastOffsetDelta != recordCount-1", info.LastSequence())
	}
	wantErrIs(t, err, ErrCorrupt)
}

func TestValidateBatchDecompressionBomb(t *testing.T) {
	if testing.Short() {
		t.Skip("compresses 260 MiB")
	}
	raw := make([]byte, maxDecompressed+(4<<20))
	for _, c := range []batchtest.Codec{{Name: "zstd", Codec: CodecZstd}} {
		t.Run(c.Name, func(t *testing.T) {
			b := withBody(t, batchtest.Opts{N: 1, Codec: c.Codec}, batchtest.Compress(t, c.Codec, false, 0, raw))
			_, err := Validate(b, 0)
			wantErrIs(t, err, ErrCorrupt)
		})
	}
}

func TestEachRecordStopsEarly(t *testing.T) {
	for _, c := range batchtest.Codecs {
		b := batchtest.Build(t, batchtest.Opts{N: 10, Codec: c.Codec, Xerial: c.Xerial})
		info, err := Validate(b, 0)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		if err := EachRecord(b, info, func(Record) bool { n++; return n < 4 }); err != nil || n != 4 {
			t.Fatalf("%s: stopped after %d records, err %v", c.Name, n, err)
		}
	}
}

func TestParseHeaderNeverReadsPastHeader(t *testing.T) {
	b := batchtest.Build(t, batchtest.Opts{N: 50, ValueSize: 100})
	info, err := ParseHeader(b[:HeaderLen])
	if err != nil {
		t.Fatal(err)
	}
	if info.Bytes != len(b) {
		t.Fatalf("Bytes %d, want %d", info.Bytes, len(b))
	}
	for n := range HeaderLen {
		if _, err := ParseHeader(b[:n]); err == nil {
			t.Fatalf("ParseHeader accepted %d bytes", n)
		}
	}
}

func TestStampBatch(t *testing.T) {
	for _, c := range batchtest.Codecs {
		b := batchtest.Build(t, batchtest.Opts{N: 3, Codec: c.Codec, Xerial: c.Xerial})
		orig := bytes.Clone(b)
		Stamp(b, 123456789, 42, -1)
		if BaseOffset(b) != 123456789 || LastOffset(b) != 123456791 || int32(binary.BigEndian.Uint32(b[12:])) != 42 {
			t.Fatalf("stamp: base %d last %d", BaseOffset(b), LastOffset(b))
		}
		if !bytes.Equal(b[16:], orig[16:]) {
			t.Fatalf("Stamp without LogAppendTime changed CRC-covered bytes")
		}
		if err := CheckCRC(b); err != nil {
			t.Fatal(err)
		}
		Stamp(b, 5, 1, 99999)
		info, err := Validate(b, 0)
		if err != nil {
			t.Fatalf("after LogAppendTime stamp: %v", err)
		}
		if !info.LogAppendTimed || info.MaxTimestamp != 99999 || info.Codec != c.Codec || info.BaseTimestamp != 1000 {
			t.Fatalf("after LogAppendTime stamp: %+v", info)
		}
	}
}

// TestValidateBatchExtraRecordWithBadOffsetDelta: a body holding one record
// more than recordCount must be rejected, whatever that record's fields. The
// header here says 3 records (lastOffsetDelta 2); the body has those 3 plus a
// 4th with offsetDelta 99.
func TestValidateBatchExtraRecordWithBadOffsetDelta(t *testing.T) {
	for _, delta := range []int32{99, -1, 3} {
		for _, c := range batchtest.Codecs {
			o := batchtest.Opts{N: 3, Codec: c.Codec, Xerial: c.Xerial}
			recs := append(o.Recs(), batchtest.Record{OffsetDelta: delta, Value: []byte("smuggled")})
			b := batchtest.BuildBody(t, o, o.Recs(), batchtest.Compress(t, c.Codec, c.Xerial, 0, batchtest.EncodeRecords(recs)))
			if _, err := Validate(b, 0); err == nil {
				// Both the offset-delta check and the count check are defeated:
				// batch.go:145 assigns EachRecord's nil result to err,
				// overwriting the error the callback stored at batch.go:147,
				// and the callback stopped before counting the 4th record, so
				// n == info.Records.
				t.Fatalf("regression: Validate accepts a %s batch with recordCount 3 whose body has a 4th record (offsetDelta %d): the callback's offset-delta error is overwritten by `err = EachRecord(...)` (batch.go:145/147)", c.Name, delta)
			} else {
				wantErrIs(t, err, ErrCorrupt)
			}
		}
	}
}

// TestDecompressLimit: every codec stops at the limit (the same code path as
// the 256 MiB bomb guard, at a size a test can afford).
func TestDecompressLimit(t *testing.T) {
	raw := bytes.Repeat([]byte("0123456789abcdef"), 1<<16) // 1 MiB
	for _, c := range batchtest.Codecs[1:] {
		t.Run(c.Name, func(t *testing.T) {
			comp := batchtest.Compress(t, c.Codec, c.Xerial, 64<<10, raw)
			if out, err := decompress(c.Codec, comp, len(raw)); err != nil || !bytes.Equal(out, raw) {
				t.Fatalf("at the limit: %d bytes, %v", len(out), err)
			}
			if _, err := decompress(c.Codec, comp, len(raw)-1); !errors.Is(err, errTooBig) {
				t.Fatalf("one byte over the limit: %v", err)
			}
		})
	}
	// A raw snappy block announcing more than the limit is refused before
	// anything is allocated.
	b := withBody(t, batchtest.Opts{Codec: CodecSnappy}, append(binary.AppendUvarint(nil, maxDecompressed+1), 0, 0, 0))
	if _, err := Validate(b, 0); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), errTooBig.Error()) {
		t.Fatalf("snappy block over maxDecompressed: %v", err)
	}
}

func TestBuildBatchValidates(t *testing.T) {
	b := Build([]KV{{Key: []byte("k1"), Value: []byte("v1")}, {Key: []byte("k2")}}, 1234)
	info, err := Validate(b, 0)
	if err != nil {
		t.Fatal(err)
	}
	var got []KV
	EachRecord(b, info, func(r Record) bool {
		got = append(got, KV{r.Key, r.Value})
		return true
	})
	if len(got) != 2 || string(got[0].Value) != "v1" || got[1].Value != nil || info.MaxTimestamp != 1234 || info.Idempotent() {
		t.Fatalf("got %+v %+v", got, info)
	}
}
