package compattests

import (
	"fmt"
	"testing"
	"time"

	"github.com/IBM/sarama"
)

const saramaMessages = 1000

// TestSarama: an idempotent SyncProducer (acks=all) sends keyed messages and
// partition consumers read them back in order, once with sarama's default
// protocol version and once with V0_11_0_0 (older API versions).
func TestSarama(t *testing.T) {
	for _, tc := range []struct {
		name    string
		version *sarama.KafkaVersion // nil: sarama's default
	}{
		{"DefaultVersion", nil},
		{"V0_11_0_0", &sarama.V0_11_0_0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := startBroker(t, t.TempDir())
			const topic = "sarama"
			const partitions = 3
			createTopic(t, newAdmin(t, b.Addr), topic, partitions, nil)

			cfg := sarama.NewConfig()
			if tc.version != nil {
				cfg.Version = *tc.version
			}
			t.Logf("sarama protocol version %s", cfg.Version)
			cfg.ClientID = "fjord-compat-tests"
			cfg.Producer.RequiredAcks = sarama.WaitForAll
			cfg.Producer.Idempotent = true
			cfg.Producer.Return.Successes = true
			cfg.Producer.Return.Errors = true
			cfg.Producer.Retry.Max = 5
			cfg.Net.MaxOpenRequests = 1
			cfg.Consumer.Return.Errors = true
			cfg.Metadata.Retry.Backoff = 50 * time.Millisecond

			prod, err := sarama.NewSyncProducer([]string{b.Addr}, cfg)
			if err != nil {
				t.Fatalf("NewSyncProducer: %v", err)
			}
			closed := false
			defer func() {
				if !closed {
					prod.Close()
				}
			}()

			type sent struct {
				key, value string
				offset     int64
			}
			perPart := map[int32][]sent{}
			for i := 0; i < saramaMessages; i++ {
				key := fmt.Sprintf("key-%02d", i%37)
				val := fmt.Sprintf("%s|%04d", key, i)
				p, off, err := prod.SendMessage(&sarama.ProducerMessage{
					Topic: topic, Key: sarama.StringEncoder(key), Value: sarama.StringEncoder(val),
				})
				if err != nil {
					t.Fatalf("SendMessage %d: %v", i, err)
				}
				perPart[p] = append(perPart[p], sent{key, val, off})
			}
			closed = true
			if err := prod.Close(); err != nil {
				t.Errorf("producer close: %v", err)
			}
			if len(perPart) < 2 {
				t.Errorf("keys landed on %d partitions, want them spread", len(perPart))
			}
			for p, msgs := range perPart {
				for i, m := range msgs {
					if m.offset != int64(i) {
						t.Fatalf("partition %d: message %d acked at offset %d, want %d", p, i, m.offset, i)
					}
				}
			}

			cons, err := sarama.NewConsumer([]string{b.Addr}, cfg)
			if err != nil {
				t.Fatalf("NewConsumer: %v", err)
			}
			defer cons.Close()
			for p := int32(0); p < partitions; p++ {
				want := perPart[p]
				if len(want) == 0 {
					continue
				}
				pc, err := cons.ConsumePartition(topic, p, sarama.OffsetOldest)
				if err != nil {
					t.Fatalf("ConsumePartition %d: %v", p, err)
				}
				timeout := time.After(30 * time.Second)
				got := 0
			read:
				for got < len(want) {
					select {
					case m := <-pc.Messages():
						w := want[got]
						if m.Offset != w.offset || string(m.Key) != w.key || string(m.Value) != w.value {
							t.Errorf("partition %d message %d: offset %d key %q value %q, want offset %d key %q value %q",
								p, got, m.Offset, m.Key, m.Value, w.offset, w.key, w.value)
							break read
						}
						got++
					case cerr := <-pc.Errors():
						t.Errorf("partition %d consumer error: %v", p, cerr)
						break read
					case <-timeout:
						t.Errorf("partition %d: read %d of %d messages in 30s", p, got, len(want))
						break read
					}
				}
				if err := pc.Close(); err != nil {
					t.Errorf("partition consumer %d close: %v", p, err)
				}
			}
		})
	}
}

// TestSaramaCodecs: sarama's producer with each compression codec, read
// back by a sarama partition consumer (default protocol version).
func TestSaramaCodecs(t *testing.T) {
	b := startBroker(t, t.TempDir())
	adm := newAdmin(t, b.Addr)
	for _, codec := range []sarama.CompressionCodec{sarama.CompressionGZIP, sarama.CompressionSnappy, sarama.CompressionLZ4, sarama.CompressionZSTD} {
		t.Run(codec.String(), func(t *testing.T) {
			topic := "sarama-" + codec.String()
			createTopic(t, adm, topic, 1, nil)
			cfg := sarama.NewConfig()
			cfg.Producer.RequiredAcks = sarama.WaitForAll
			cfg.Producer.Idempotent = true
			cfg.Net.MaxOpenRequests = 1
			cfg.Producer.Return.Successes = true
			cfg.Producer.Compression = codec
			cfg.Producer.Flush.Messages = 50 // several records per compressed batch
			cfg.Producer.Flush.Frequency = 5 * time.Millisecond
			cfg.Consumer.Return.Errors = true
			prod, err := sarama.NewSyncProducer([]string{b.Addr}, cfg)
			if err != nil {
				t.Fatalf("NewSyncProducer: %v", err)
			}
			var msgs []*sarama.ProducerMessage
			for i := 0; i < 300; i++ {
				msgs = append(msgs, &sarama.ProducerMessage{Topic: topic, Key: sarama.StringEncoder(fmt.Sprintf("k%d", i%5)),
					Value: sarama.StringEncoder(fmt.Sprintf("%s value %04d %s", codec, i, "compressible compressible compressible"))})
			}
			if err := prod.SendMessages(msgs); err != nil {
				t.Fatalf("SendMessages: %v", err)
			}
			prod.Close()
			for i, m := range msgs {
				if m.Partition != 0 || m.Offset != int64(i) {
					t.Fatalf("message %d acked at %d/%d", i, m.Partition, m.Offset)
				}
			}
			checkStoredCodec(t, batchCodecs(t, b.Addr, topic, 0), int8(codec), "sarama "+codec.String())
			cons, err := sarama.NewConsumer([]string{b.Addr}, cfg)
			if err != nil {
				t.Fatalf("NewConsumer: %v", err)
			}
			defer cons.Close()
			pc, err := cons.ConsumePartition(topic, 0, sarama.OffsetOldest)
			if err != nil {
				t.Fatalf("ConsumePartition: %v", err)
			}
			defer pc.Close()
			timeout := time.After(30 * time.Second)
			for i := 0; i < len(msgs); i++ {
				select {
				case m := <-pc.Messages():
					want, _ := msgs[i].Value.Encode()
					if m.Offset != int64(i) || string(m.Value) != string(want) {
						t.Fatalf("message %d: offset %d value %q, want %q", i, m.Offset, m.Value, want)
					}
				case err := <-pc.Errors():
					t.Fatalf("consumer error: %v", err)
				case <-timeout:
					t.Fatalf("read %d of %d messages in 30s", i, len(msgs))
				}
			}
		})
	}
}
