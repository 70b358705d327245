package compattests

import (
	"context"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// rawTxnBatch is recordBatch with the transactional flag and a producer id,
// epoch and base sequence.
func rawTxnBatch(t *testing.T, pid int64, epoch int16, seq int32, value []byte) []byte {
	b := recordBatch(t, nil, value)
	binary.BigEndian.PutUint16(b[21:], 0x10) // transactional
	binary.BigEndian.PutUint64(b[43:], uint64(pid))
	binary.BigEndian.PutUint16(b[51:], uint16(epoch))
	binary.BigEndian.PutUint32(b[53:], uint32(seq))
	binary.BigEndian.PutUint32(b[17:], crc32.Checksum(b[21:], crc32.MakeTable(crc32.Castagnoli)))
	return b
}

// KIP-890 part 1 through raw requests: a transactional batch for a
// partition the transaction never added is refused (INVALID_TXN_STATE)
// and not written; once AddPartitionsToTxn adds it, the same batch is
// taken. Without the check, a late batch of an ended transaction opens a
// transaction no coordinator knows, and read_committed consumers stall.
// The produces go at v10, a part-1 producer's: v11 answers
// TRANSACTION_ABORTABLE, and from v12 the produce adds the partition
// itself (TestProduceV12AddsPartitionToTxn).
func TestTxnProduceVerification(t *testing.T) {
	b := startBroker(t, t.TempDir())
	cl := newClient(t, b.Addr, maxProduceVersion(10))
	adm := newAdmin(t, b.Addr)
	topic := "txn-verify"
	createTopic(t, adm, topic, 1, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	id := "verify-producer"

	// Find the coordinator (creating __transaction_state), then init.
	var pid int64
	var epoch int16
	for {
		fc := kmsg.NewPtrFindCoordinatorRequest()
		fc.CoordinatorKey, fc.CoordinatorType = id, 1
		fr, err := fc.RequestWith(ctx, cl)
		if err == nil && fr.ErrorCode == 0 {
			ip := kmsg.NewPtrInitProducerIDRequest()
			ip.TransactionalID, ip.TransactionTimeoutMillis = &id, 30000
			ir, err := ip.RequestWith(ctx, cl)
			if err == nil && ir.ErrorCode == 0 {
				pid, epoch = ir.ProducerID, ir.ProducerEpoch
				break
			}
		}
		if ctx.Err() != nil {
			t.Fatalf("no transaction coordinator: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	produce := func() int16 {
		req := kmsg.NewPtrProduceRequest()
		req.TransactionID, req.Acks, req.TimeoutMillis = &id, -1, 5000
		rt := kmsg.NewProduceRequestTopic()
		rt.Topic = topic
		rp := kmsg.NewProduceRequestTopicPartition()
		rp.Records = rawTxnBatch(t, pid, epoch, 0, []byte("v"))
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		return resp.Topics[0].Partitions[0].ErrorCode
	}
	if code := produce(); code != kerr.InvalidTxnState.Code {
		t.Fatalf("a batch for a partition not in the transaction: code %d, want INVALID_TXN_STATE", code)
	}
	if end := endOffsets(t, adm, topic)[0]; end != 0 {
		t.Fatalf("the refused batch was written: end offset %d", end)
	}
	ap := kmsg.NewPtrAddPartitionsToTxnRequest()
	ap.Version = 3
	ap.TransactionalID, ap.ProducerID, ap.ProducerEpoch = id, pid, epoch
	at := kmsg.NewAddPartitionsToTxnRequestTopic()
	at.Topic, at.Partitions = topic, []int32{0}
	ap.Topics = append(ap.Topics, at)
	ar, err := ap.RequestWith(ctx, cl)
	if err != nil || ar.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("AddPartitionsToTxn: %v %+v", err, ar)
	}
	if code := produce(); code != 0 {
		t.Fatalf("a batch for a partition in the transaction: code %d", code)
	}
	// DescribeProducers shows the open transaction holding back the LSO.
	dp := kmsg.NewPtrDescribeProducersRequest()
	dt := kmsg.NewDescribeProducersRequestTopic()
	dt.Topic, dt.Partitions = topic, []int32{0}
	dp.Topics = append(dp.Topics, dt)
	dr, err := dp.RequestWith(ctx, cl)
	if err != nil || dr.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("DescribeProducers: %v %+v", err, dr)
	}
	var found bool
	for _, ap := range dr.Topics[0].Partitions[0].ActiveProducers {
		if ap.ProducerID == pid {
			found = true
			if ap.CurrentTxnStartOffset != 0 || ap.ProducerEpoch != int32(epoch) || ap.LastSequence != 0 {
				t.Errorf("producer %+v: want the transaction open at offset 0, epoch %d, last sequence 0", ap, epoch)
			}
		}
	}
	if !found {
		t.Errorf("DescribeProducers does not list producer %d: %+v", pid, dr.Topics[0].Partitions[0].ActiveProducers)
	}
}

// A topic with fjord.transactional.writes.required=true refuses a plain
// (idempotent) producer with INVALID_RECORD and a message naming the
// config, and takes a transactional producer's records.
func TestTxnRequiredTopic(t *testing.T) {
	b := startBroker(t, t.TempDir())
	adm := newAdmin(t, b.Addr)
	topic := "settlement"
	yes := "true"
	createTopic(t, adm, topic, 1, map[string]*string{"fjord.transactional.writes.required": &yes})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	plain := newClient(t, b.Addr, kgo.RecordRetries(1), maxProduceVersion(12)) // the raw produce names its topic
	err := plain.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte("outside a transaction")}).FirstErr()
	if !errors.Is(err, kerr.InvalidRecord) {
		t.Fatalf("a non-transactional produce: %v, want INVALID_RECORD", err)
	}
	// The response's error message (Produce v8+) names the config.
	req := kmsg.NewPtrProduceRequest()
	req.Acks, req.TimeoutMillis = -1, 5000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Records = recordBatch(t, nil, []byte("raw"))
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, plain)
	if err != nil {
		t.Fatal(err)
	}
	sp := resp.Topics[0].Partitions[0]
	if sp.ErrorCode != kerr.InvalidRecord.Code || sp.ErrorMessage == nil || !strings.Contains(*sp.ErrorMessage, "fjord.transactional.writes.required") {
		t.Fatalf("raw produce: code %d message %v, want INVALID_RECORD naming the config", sp.ErrorCode, sp.ErrorMessage)
	}
	tx := newClient(t, b.Addr, kgo.TransactionalID("settler"))
	if err := tx.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := tx.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte("settled")}).FirstErr(); err != nil {
		t.Fatalf("a transactional produce: %v", err)
	}
	if err := tx.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	if got := readTopic(t, []string{b.Addr}, topic, true, 1); len(got) != 1 || got[0] != "settled" {
		t.Fatalf("read_committed: %v", got)
	}
}
