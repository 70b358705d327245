package main

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// latencyRecordSize is the value size of the paced suites (latency, e2e):
// fixed at 1 KiB so their figures compare across runs whatever -size is.
const latencyRecordSize = 1024

// paceTick is how often the paced suites release a small burst of records.
// At the default 3500 records/s a tick releases three or four records.
const paceTick = time.Millisecond

// drainWait bounds how long the e2e consumer may lag once sending is done.
const drainWait = 10 * time.Second

// bench runs the suites against one bootstrap address.
type bench struct {
	cfg     *config
	target  string
	brokers []string
	runID   string
	adm     *kadm.Client
	topics  []string // topics created, for clean-up
}

// clientOpts are the options every client of the suite shares. Producer
// settings are franz-go's defaults (idempotent, acks=all, default max in
// flight) except linger, 0 unless -linger says otherwise ("default" keeps
// the client's 10 ms), and compression (-compression).
func (b *bench) clientOpts(extra ...kgo.Opt) []kgo.Opt {
	codec, _ := compressionCodec(b.cfg.compression)
	opts := []kgo.Opt{
		kgo.SeedBrokers(b.brokers...),
		kgo.ClientID("fjord-bench"),
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.ProducerBatchCompression(codec),
	}
	if !b.cfg.lingerDefault {
		opts = append(opts, kgo.ProducerLinger(b.cfg.linger))
	}
	if b.cfg.tls != nil {
		opts = append(opts, kgo.DialTLSConfig(b.cfg.tls))
	}
	if b.cfg.txn <= 0 {
		// When -timeout fires, fail in-flight records instead of waiting
		// for their outcome, so the run stops on time (franz-go refuses
		// this for a transactional producer).
		opts = append(opts, kgo.AllowIdempotentProduceCancellation())
	}
	return append(opts, extra...)
}

// ackBeforeFsyncMessages is flush.messages for -all's control topics
// (config.ackBeforeFsync): far more records than any suite writes to a
// partition, so the only fsyncs are the broker's periodic ones.
const ackBeforeFsyncMessages = 100_000_000

// newTopic creates a fresh topic for one suite.
func (b *bench) newTopic(ctx context.Context, suite string) (string, error) {
	topic := fmt.Sprintf("fjord-bench-%s-%s", suite, b.runID)
	configs := map[string]*string{}
	if b.cfg.rf >= 3 {
		two := "2" // the usual durable setting: one failure neither loses nor stops writes
		configs["min.insync.replicas"] = &two
	}
	if b.cfg.ackBeforeFsync {
		never := strconv.Itoa(ackBeforeFsyncMessages)
		configs["flush.messages"] = &never
	}
	if _, err := b.adm.CreateTopic(ctx, int32(b.cfg.partitions), int16(b.cfg.rf), configs, topic); err != nil {
		return "", fmt.Errorf("create topic %s: %w", topic, err)
	}
	b.topics = append(b.topics, topic)
	return topic, nil
}

// warmPartitions writes one record to every partition of topic and waits
// for their acks (config.warmPartitions): every partition is then open,
// led and written once, as a topic in use is.
func (b *bench) warmPartitions(ctx context.Context, topic string) error {
	cl, err := kgo.NewClient(b.clientOpts(kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()))...)
	if err != nil {
		return err
	}
	defer cl.Close()
	recs := make([]*kgo.Record, b.cfg.partitions)
	for p := range recs {
		recs[p] = &kgo.Record{Key: []byte("warmup"), Partition: int32(p)}
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		return fmt.Errorf("warming %d partitions of %s: %w", len(recs), topic, err)
	}
	return nil
}

// key returns the record key for record i; distinct keys spread records
// over all partitions through the default (murmur2) partitioner.
func key(i int64) []byte { return strconv.AppendInt([]byte("k"), i, 10) }

// produceThroughput writes -records records of -size bytes as fast as the
// client allows and waits for every ack.
func (b *bench) produceThroughput(ctx context.Context, topic string) (*Throughput, error) {
	cl, err := kgo.NewClient(b.clientOpts(append(b.txnOpts("produce"), kgo.DefaultProduceTopic(topic))...)...)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	tx := b.newTxns(cl)
	if err := tx.begin(); err != nil {
		return nil, err
	}

	// One random (incompressible) value shared by all records: the client
	// only reads it.
	value := make([]byte, b.cfg.size)
	rand.Read(value)

	var errs atomic.Int64
	var firstErr atomic.Value
	promise := func(_ *kgo.Record, err error) {
		if err != nil && errs.Add(1) == 1 {
			firstErr.Store(err)
		}
	}
	start := time.Now()
	for i := range int64(b.cfg.records) {
		cl.Produce(ctx, &kgo.Record{Key: key(i), Value: value}, promise)
		if err := tx.sent(ctx); err != nil {
			return nil, err
		}
	}
	if err := cl.Flush(ctx); err != nil {
		return nil, fmt.Errorf("flush: %w", err)
	}
	if err := tx.end(ctx); err != nil {
		return nil, err
	}
	elapsed := time.Since(start)
	if n := errs.Load(); n > 0 {
		return nil, fmt.Errorf("%d of %d records failed, first: %v", n, b.cfg.records, firstErr.Load())
	}
	return newThroughput(int64(b.cfg.records), int64(b.cfg.records)*int64(b.cfg.size), elapsed), nil
}

// consumeThroughput reads back want records of topic with a fresh client
// consuming every partition directly (no group) from the start.
func (b *bench) consumeThroughput(ctx context.Context, topic string, want int64) (*Throughput, error) {
	parts := make(map[int32]kgo.Offset, b.cfg.partitions)
	for p := range int32(b.cfg.partitions) {
		parts[p] = kgo.NewOffset().AtStart()
	}
	cl, err := kgo.NewClient(b.clientOpts(kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: parts}))...)
	if err != nil {
		return nil, err
	}
	defer cl.Close()

	var n, bytes int64
	start := time.Now()
	for n < want {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("after %d of %d records: %w", n, want, err)
		}
		if errs := fs.Errors(); len(errs) > 0 {
			e := errs[0]
			return nil, fmt.Errorf("fetch %s[%d]: %w", e.Topic, e.Partition, e.Err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			n++
			bytes += int64(len(r.Value))
		})
	}
	return newThroughput(n, bytes, time.Since(start)), nil
}

// pace calls send(i) for i = 0, 1, ... so that rate records per second go
// out for dur: a ticker releases whatever is due since the start, so the
// offered rate stays accurate even if a tick is late. It returns how many
// it sent and the time from the start to the last send.
func pace(ctx context.Context, rate float64, dur time.Duration, send func(i int64)) (int64, time.Duration) {
	total := int64(rate * dur.Seconds())
	t := time.NewTicker(paceTick)
	defer t.Stop()
	var sent int64
	start := time.Now()
	for sent < total {
		select {
		case <-ctx.Done():
			return sent, time.Since(start)
		case <-t.C:
		}
		due := min(int64(rate*time.Since(start).Seconds()), total)
		for ; sent < due; sent++ {
			send(sent)
		}
	}
	return sent, time.Since(start)
}

// produceLatency sends 1 KiB records at -rate for -duration and measures
// each record's produce-to-ack time in its promise.
func (b *bench) produceLatency(ctx context.Context, topic string) (*Latency, error) {
	cl, err := kgo.NewClient(b.clientOpts(kgo.DefaultProduceTopic(topic))...)
	if err != nil {
		return nil, err
	}
	defer cl.Close()

	// Warm up (metadata, connection, producer ID) outside the measurement.
	if err := cl.ProduceSync(ctx, &kgo.Record{Key: []byte("warmup")}).FirstErr(); err != nil {
		return nil, fmt.Errorf("warm-up produce: %w", err)
	}

	value := make([]byte, latencyRecordSize)
	rand.Read(value)
	var (
		mu   sync.Mutex
		lats = make([]time.Duration, 0, int(b.cfg.rate*b.cfg.duration.Seconds()))
		errs int64
	)
	sent, window := pace(ctx, b.cfg.rate, b.cfg.duration, func(i int64) {
		sentAt := time.Now()
		cl.Produce(ctx, &kgo.Record{Key: key(i), Value: value}, func(_ *kgo.Record, err error) {
			d := time.Since(sentAt)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs++
				return
			}
			lats = append(lats, d)
		})
	})
	if err := cl.Flush(ctx); err != nil {
		return nil, fmt.Errorf("flush: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	mu.Lock()
	defer mu.Unlock()
	return newLatency(b.cfg.rate, sent, window, lats, errs), nil
}

// endToEnd runs a consumer on a fresh topic while a paced producer writes
// records whose value starts with the send time, as nanoseconds since a
// shared start instant (monotonic clock, same process); the consumer
// computes produce-to-receipt latency.
func (b *bench) endToEnd(ctx context.Context, topic string) (*Latency, error) {
	prod, err := kgo.NewClient(b.clientOpts(append(b.txnOpts("e2e"), kgo.DefaultProduceTopic(topic))...)...)
	if err != nil {
		return nil, err
	}
	defer prod.Close()
	tx := b.newTxns(prod)
	parts := make(map[int32]kgo.Offset, b.cfg.partitions)
	for p := range int32(b.cfg.partitions) {
		parts[p] = kgo.NewOffset().AtStart()
	}
	iso := kgo.ReadUncommitted()
	if b.cfg.txn > 0 {
		iso = kgo.ReadCommitted()
	}
	cons, err := kgo.NewClient(b.clientOpts(kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: parts}), kgo.FetchIsolationLevel(iso))...)
	if err != nil {
		return nil, err
	}
	defer cons.Close()

	t0 := time.Now()
	var (
		mu       sync.Mutex
		lats     = make([]time.Duration, 0, int(b.cfg.rate*b.cfg.duration.Seconds()))
		received atomic.Int64
		warm     = make(chan struct{})
		warmOnce sync.Once
		consErr  error
	)
	cctx, stopConsumer := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for cctx.Err() == nil {
			fs := cons.PollFetches(cctx)
			if errs := fs.Errors(); len(errs) > 0 && cctx.Err() == nil {
				consErr = fmt.Errorf("fetch %s[%d]: %w", errs[0].Topic, errs[0].Partition, errs[0].Err)
				return
			}
			now := time.Since(t0)
			mu.Lock()
			fs.EachRecord(func(r *kgo.Record) {
				if string(r.Key) == "warmup" {
					warmOnce.Do(func() { close(warm) })
					return
				}
				if len(r.Value) >= 8 {
					lats = append(lats, now-time.Duration(binary.BigEndian.Uint64(r.Value)))
					received.Add(1)
				}
			})
			mu.Unlock()
		}
	}()
	defer func() { stopConsumer(); <-done }()

	// Warm up both clients: one record must make the full trip first.
	if err := tx.begin(); err != nil {
		return nil, err
	}
	if err := prod.ProduceSync(ctx, &kgo.Record{Key: []byte("warmup")}).FirstErr(); err != nil {
		return nil, fmt.Errorf("warm-up produce: %w", err)
	}
	if err := tx.end(ctx); err != nil {
		return nil, err
	}
	if err := tx.begin(); err != nil {
		return nil, err
	}
	select {
	case <-warm:
	case <-done:
		return nil, fmt.Errorf("consumer stopped during warm-up: %w", cmp.Or(consErr, ctx.Err()))
	case <-ctx.Done():
		return nil, fmt.Errorf("warm-up: %w", ctx.Err())
	}

	// Random padding after the timestamp, like the other suites' values.
	pad := make([]byte, latencyRecordSize)
	rand.Read(pad)
	var errs atomic.Int64
	sent, window := pace(ctx, b.cfg.rate, b.cfg.duration, func(i int64) {
		v := make([]byte, latencyRecordSize)
		copy(v, pad)
		binary.BigEndian.PutUint64(v, uint64(time.Since(t0)))
		prod.Produce(ctx, &kgo.Record{Key: key(i), Value: v}, func(_ *kgo.Record, err error) {
			if err != nil {
				errs.Add(1)
			}
		})
		if err := tx.sent(ctx); err != nil {
			errs.Add(1)
		}
	})
	if err := prod.Flush(ctx); err != nil {
		return nil, fmt.Errorf("flush: %w", err)
	}
	if err := tx.end(ctx); err != nil {
		return nil, err
	}

	// Let the consumer catch up with everything that was acked.
	want := sent - errs.Load()
	deadline := time.Now().Add(drainWait)
	for received.Load() < want && time.Now().Before(deadline) && ctx.Err() == nil {
		select {
		case <-done:
			return nil, fmt.Errorf("consumer stopped: %w", cmp.Or(consErr, ctx.Err()))
		case <-time.After(10 * time.Millisecond):
		}
	}
	stopConsumer()
	<-done
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if consErr != nil {
		return nil, consErr
	}
	if got := received.Load(); got < want {
		return nil, fmt.Errorf("consumer received %d of %d records within %s of the last ack", got, want, drainWait)
	}
	return newLatency(b.cfg.rate, sent, window, lats, errs.Load()), nil
}

// txnOpts makes a suite's producer transactional under -txn.
func (b *bench) txnOpts(suite string) []kgo.Opt {
	if b.cfg.txn <= 0 {
		return nil
	}
	return []kgo.Opt{kgo.TransactionalID(fmt.Sprintf("fjord-bench-%s-%s-%s", suite, b.target, b.runID))}
}

// txns commits a transactional producer's transaction every -txn records;
// with -txn 0 it does nothing.
type txns struct {
	cl    *kgo.Client
	every int
	n     int
}

func (b *bench) newTxns(cl *kgo.Client) *txns { return &txns{cl: cl, every: b.cfg.txn} }

func (t *txns) begin() error {
	if t.every <= 0 {
		return nil
	}
	if err := t.cl.BeginTransaction(); err != nil {
		return fmt.Errorf("begin transaction: %w", err)
	}
	return nil
}

// sent counts one record; every -txn records it commits and begins anew.
func (t *txns) sent(ctx context.Context) error {
	if t.every <= 0 {
		return nil
	}
	if t.n++; t.n < t.every {
		return nil
	}
	t.n = 0
	if err := t.end(ctx); err != nil {
		return err
	}
	return t.begin()
}

// end flushes and commits the open transaction.
func (t *txns) end(ctx context.Context) error {
	if t.every <= 0 {
		return nil
	}
	if err := t.cl.Flush(ctx); err != nil {
		return fmt.Errorf("flush: %w", err)
	}
	if err := t.cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}

// compressionCodec maps the -compression flag to a codec.
func compressionCodec(name string) (kgo.CompressionCodec, error) {
	switch name {
	case "none":
		return kgo.NoCompression(), nil
	case "snappy":
		return kgo.SnappyCompression(), nil
	case "lz4":
		return kgo.Lz4Compression(), nil
	case "zstd":
		return kgo.ZstdCompression(), nil
	case "gzip":
		return kgo.GzipCompression(), nil
	}
	return kgo.CompressionCodec{}, fmt.Errorf("unknown -compression %q", name)
}
