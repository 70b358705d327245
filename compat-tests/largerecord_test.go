package compattests

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestLargeRecord: a 900 KiB record round-trips although the consumer asks
// for at most 100 KiB per partition (and, separately, per fetch): the broker
// must still return the first whole batch (KIP-74).
func TestLargeRecord(t *testing.T) {
	b := startBroker(t, t.TempDir())
	const topic = "large"
	createTopic(t, newAdmin(t, b.Addr), topic, 1, nil)

	big := make([]byte, 900*1024)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range big {
		big[i] = byte(rng.Uint32())
	}
	values := [][]byte{[]byte("small before"), big, []byte("small after"), big[:200*1024]}

	cl := newClient(t, b.Addr, kgo.DefaultProduceTopic(topic), kgo.ProducerBatchCompression(kgo.NoCompression()))
	ctx := testCtx(t, time.Minute)
	for i, v := range values {
		r, err := cl.ProduceSync(ctx, &kgo.Record{Value: v}).First()
		if err != nil {
			t.Fatalf("produce record %d (%d bytes): %v", i, len(v), err)
		}
		if r.Offset != int64(i) {
			t.Fatalf("record %d at offset %d", i, r.Offset)
		}
	}

	t.Run("AboveMessageMaxBytes", func(t *testing.T) {
		// message.max.bytes defaults to 1048588; the client's own limit is
		// raised so the broker is the one to refuse.
		cl := newClient(t, b.Addr, kgo.DefaultProduceTopic(topic), kgo.ProducerBatchCompression(kgo.NoCompression()),
			kgo.ProducerBatchMaxBytes(4<<20), kgo.RecordRetries(1))
		huge := make([]byte, 1100*1024)
		_, err := cl.ProduceSync(ctx, &kgo.Record{Value: huge}).First()
		if !errors.Is(err, kerr.MessageTooLarge) {
			t.Errorf("producing a 1100 KiB record: %v, want MESSAGE_TOO_LARGE", err)
		}
		if ends := endOffsets(t, newAdmin(t, b.Addr), topic); ends[0] != int64(len(values)) {
			t.Errorf("end offset %d after a refused record, want %d", ends[0], len(values))
		}
	})

	for _, tc := range []struct {
		name string
		opts []kgo.Opt
	}{
		{"PartitionLimit100KiB", []kgo.Opt{kgo.FetchMaxPartitionBytes(100 * 1024)}},
		{"PartitionAndFetchLimit100KiB", []kgo.Opt{kgo.FetchMaxPartitionBytes(100 * 1024), kgo.FetchMaxBytes(100 * 1024)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			recs := consumeAll(t, b.Addr, topic, len(values), 30*time.Second, tc.opts...)
			if len(recs) != len(values) {
				t.Fatalf("read %d records, want %d", len(recs), len(values))
			}
			for i, r := range recs {
				if r.Offset != int64(i) || !bytes.Equal(r.Value, values[i]) {
					t.Errorf("record %d: offset %d, %d bytes (equal %v), want %d bytes", i, r.Offset, len(r.Value), bytes.Equal(r.Value, values[i]), len(values[i]))
				}
			}
		})
	}
}
