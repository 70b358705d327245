package compattests

import (
	"encoding/binary"
	"hash/crc32"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestBadInput feeds the broker malformed traffic over raw TCP; it must
// close or answer properly and keep serving everyone else.
func TestBadInput(t *testing.T) {
	b := startBroker(t, t.TempDir())
	// A well-behaved connection opened first must survive all of this.
	bystander := dialRaw(t, b.Addr)
	healthy := func(t *testing.T) {
		t.Helper()
		select {
		case <-b.done:
			t.Fatalf("broker process exited: %v", b.waitErr)
		default:
		}
		if err := probe(b.Addr); err != nil {
			t.Fatalf("broker unhealthy for a new kadm client: %v", err)
		}
		req := kmsg.NewPtrApiVersionsRequest()
		req.Version = 0
		resp := bystander.roundTrip(t, req).(*kmsg.ApiVersionsResponse)
		if resp.ErrorCode != 0 || len(resp.ApiKeys) == 0 {
			t.Fatalf("bystander connection: ApiVersions error %d, %d keys", resp.ErrorCode, len(resp.ApiKeys))
		}
	}
	healthy(t)

	t.Run("HugeSizePrefix", func(t *testing.T) {
		c := dialRaw(t, b.Addr)
		if _, err := c.Write([]byte{0x7f, 0xff, 0xff, 0xff}); err != nil {
			t.Fatalf("write: %v", err)
		}
		c.expectClosed(t, "size prefix 0x7fffffff", 10*time.Second)
		healthy(t)
	})

	t.Run("OtherBadSizePrefixes", func(t *testing.T) {
		for _, tc := range []struct {
			name string
			data []byte
		}{
			{"negative size", []byte{0xff, 0xff, 0xff, 0xff}},
			{"size 0", []byte{0, 0, 0, 0}},
			{"size 3, shorter than a header", []byte{0, 0, 0, 3, 0, 18, 0}},
			{"size just above socket.request.max.bytes", []byte{0x06, 0x40, 0x00, 0x01}},
		} {
			c := dialRaw(t, b.Addr)
			if _, err := c.Write(tc.data); err != nil {
				t.Fatalf("%s: write: %v", tc.name, err)
			}
			c.expectClosed(t, tc.name, 10*time.Second)
		}
		healthy(t)
	})

	t.Run("HTTP", func(t *testing.T) {
		c := dialRaw(t, b.Addr)
		if _, err := c.Write([]byte("GET / HTTP/1.1\r\n\r\n")); err != nil {
			t.Fatalf("write: %v", err)
		}
		c.expectClosed(t, "HTTP request", 10*time.Second)
		healthy(t)
	})

	t.Run("ApiVersionsUnsupportedVersion", func(t *testing.T) {
		c := dialRaw(t, b.Addr)
		// A v3-shaped (flexible) ApiVersions request claiming version 99.
		req := kmsg.NewPtrApiVersionsRequest()
		req.Version = 3
		req.ClientSoftwareName, req.ClientSoftwareVersion = "fjord-compat", "1.0"
		frame := c.frame(req)
		binary.BigEndian.PutUint16(frame[6:8], 99)
		if _, err := c.Write(frame); err != nil {
			t.Fatalf("write: %v", err)
		}
		buf, err := c.readFrame(10 * time.Second)
		if err != nil {
			t.Fatalf("no response to ApiVersions v99: %v", err)
		}
		resp := kmsg.NewPtrApiVersionsResponse()
		resp.Version = 0
		if err := parseResponse(buf, c.corr, resp, false); err != nil {
			t.Fatalf("parsing ApiVersions v99 response as v0: %v (frame %x)", err, buf)
		}
		if resp.ErrorCode != kerr.UnsupportedVersion.Code {
			t.Errorf("ApiVersions v99: error code %d, want 35 (UNSUPPORTED_VERSION)", resp.ErrorCode)
		}
		keys := map[int16]kmsg.ApiVersionsResponseApiKey{}
		for _, k := range resp.ApiKeys {
			keys[k.ApiKey] = k
		}
		if k, ok := keys[18]; !ok || k.MinVersion != 0 || k.MaxVersion != 5 {
			t.Errorf("ApiVersions v99 response lists ApiVersions as %+v (present %v), want 0-5", k, ok)
		}
		if _, ok := keys[0]; !ok {
			t.Errorf("ApiVersions v99 response does not list Produce: %+v", resp.ApiKeys)
		}
		// The connection stays usable: negotiate down as a client would.
		req0 := kmsg.NewPtrApiVersionsRequest()
		req0.Version = 0
		if r := c.roundTrip(t, req0).(*kmsg.ApiVersionsResponse); r.ErrorCode != 0 {
			t.Errorf("ApiVersions v0 after v99 on the same connection: error %d", r.ErrorCode)
		}
		healthy(t)
	})

	t.Run("ProduceCorruptCRC", func(t *testing.T) {
		const topic = "crc"
		createTopic(t, newAdmin(t, b.Addr), topic, 1, nil)
		c := dialRaw(t, b.Addr)
		latest := func() int64 {
			req := kmsg.NewPtrListOffsetsRequest()
			req.Version = 1
			req.ReplicaID = -1
			rt := kmsg.NewListOffsetsRequestTopic()
			rt.Topic = topic
			rp := kmsg.NewListOffsetsRequestTopicPartition()
			rp.Partition, rp.Timestamp = 0, -1
			rt.Partitions = append(rt.Partitions, rp)
			req.Topics = append(req.Topics, rt)
			resp := c.roundTrip(t, req).(*kmsg.ListOffsetsResponse)
			sp := resp.Topics[0].Partitions[0]
			if sp.ErrorCode != 0 {
				t.Fatalf("ListOffsets latest: error %d", sp.ErrorCode)
			}
			return sp.Offset
		}
		produce := func(version int16, batch []byte) kmsg.ProduceResponseTopicPartition {
			req := kmsg.NewPtrProduceRequest()
			req.Version = version
			req.Acks = -1
			req.TimeoutMillis = 5000
			rt := kmsg.NewProduceRequestTopic()
			rt.Topic = topic
			rp := kmsg.NewProduceRequestTopicPartition()
			rp.Partition, rp.Records = 0, batch
			rt.Partitions = append(rt.Partitions, rp)
			req.Topics = append(req.Topics, rt)
			resp := c.roundTrip(t, req).(*kmsg.ProduceResponse)
			if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
				t.Fatalf("produce v%d: response shape %+v", version, resp)
			}
			return resp.Topics[0].Partitions[0]
		}

		// The hand-built batch is accepted as is.
		for _, v := range []int16{3, 9} {
			before := latest()
			sp := produce(v, recordBatch(t, []byte("k"), []byte("valid value")))
			if sp.ErrorCode != 0 || sp.BaseOffset != before {
				t.Fatalf("valid batch, produce v%d: error %d base offset %d, want 0 and %d", v, sp.ErrorCode, sp.BaseOffset, before)
			}
			if after := latest(); after != before+1 {
				t.Fatalf("valid batch, produce v%d: latest %d -> %d", v, before, after)
			}
		}

		corruptions := []struct {
			name    string
			corrupt func(b []byte)
		}{
			{"crc field", func(b []byte) { b[17] ^= 0xff }},        // CRC is bytes 17-20
			{"value byte", func(b []byte) { b[len(b)-3] ^= 0x01 }}, // inside the record's value
			{"attributes", func(b []byte) { b[22] ^= 0x08 }},       // timestamp type bit, covered by the CRC
			{"record count", func(b []byte) { b[60] ^= 0x01 }},     // covered by the CRC
		}
		for _, v := range []int16{3, 9} {
			for _, cc := range corruptions {
				batch := recordBatch(t, []byte("k"), []byte("corrupted value"))
				cc.corrupt(batch)
				before := latest()
				sp := produce(v, batch)
				if sp.ErrorCode != kerr.CorruptMessage.Code {
					t.Errorf("produce v%d with corrupted %s: error %d (%v), want 2 (CORRUPT_MESSAGE)", v, cc.name, sp.ErrorCode, kerr.ErrorForCode(sp.ErrorCode))
				}
				if after := latest(); after != before {
					t.Errorf("produce v%d with corrupted %s: latest offset moved %d -> %d", v, cc.name, before, after)
				}
			}
		}
		// The connection and partition still work afterwards.
		before := latest()
		if sp := produce(9, recordBatch(t, nil, []byte("after"))); sp.ErrorCode != 0 || sp.BaseOffset != before {
			t.Errorf("valid produce after corrupted ones: error %d base %d, want 0 and %d", sp.ErrorCode, sp.BaseOffset, before)
		}
		healthy(t)
	})

	t.Run("TruncatedFrame", func(t *testing.T) {
		c := dialRaw(t, b.Addr)
		req := kmsg.NewPtrMetadataRequest()
		req.Version = 9
		frame := c.frame(req)
		binary.BigEndian.PutUint32(frame, 100) // claims 100 bytes
		if _, err := c.Write(frame[:14]); err != nil {
			t.Fatalf("write: %v", err)
		}
		c.Close()
		// And one cut inside the size prefix itself.
		c2 := dialRaw(t, b.Addr)
		c2.Write([]byte{0, 0})
		c2.Close()
		healthy(t)
	})
}

// recordBatch builds a valid magic-2 record batch of one uncompressed
// record by hand (base offset 0, no producer id), CRC-32C included.
func recordBatch(t testing.TB, key, value []byte) []byte {
	t.Helper()
	var rec []byte
	rec = append(rec, 0)              // attributes
	rec = binary.AppendVarint(rec, 0) // timestamp delta
	rec = binary.AppendVarint(rec, 0) // offset delta
	if key == nil {
		rec = binary.AppendVarint(rec, -1)
	} else {
		rec = binary.AppendVarint(rec, int64(len(key)))
		rec = append(rec, key...)
	}
	rec = binary.AppendVarint(rec, int64(len(value)))
	rec = append(rec, value...)
	rec = binary.AppendVarint(rec, 0) // headers
	records := binary.AppendVarint(nil, int64(len(rec)))
	records = append(records, rec...)

	now := time.Now().UnixMilli()
	b := make([]byte, 0, 61+len(records))
	b = binary.BigEndian.AppendUint64(b, 0)          // base offset
	b = binary.BigEndian.AppendUint32(b, 0)          // batch length, below
	b = binary.BigEndian.AppendUint32(b, 0xffffffff) // partition leader epoch -1
	b = append(b, 2)                                 // magic
	b = binary.BigEndian.AppendUint32(b, 0)          // crc, below
	b = binary.BigEndian.AppendUint16(b, 0)          // attributes
	b = binary.BigEndian.AppendUint32(b, 0)          // last offset delta
	b = binary.BigEndian.AppendUint64(b, uint64(now))
	b = binary.BigEndian.AppendUint64(b, uint64(now))
	b = binary.BigEndian.AppendUint64(b, 0xffffffffffffffff) // producer id -1
	b = binary.BigEndian.AppendUint16(b, 0xffff)             // producer epoch -1
	b = binary.BigEndian.AppendUint32(b, 0xffffffff)         // base sequence -1
	b = binary.BigEndian.AppendUint32(b, 1)                  // record count
	if len(b) != 61 {
		t.Fatalf("batch header is %d bytes", len(b))
	}
	b = append(b, records...)
	binary.BigEndian.PutUint32(b[8:], uint32(len(b)-12))
	binary.BigEndian.PutUint32(b[17:], crc32.Checksum(b[21:], crc32.MakeTable(crc32.Castagnoli)))
	// Sanity: kmsg parses it and agrees on the CRC.
	var rb kmsg.RecordBatch
	if err := rb.ReadFrom(b); err != nil || rb.NumRecords != 1 {
		t.Fatalf("hand-built batch does not parse: %v", err)
	}
	return b
}
