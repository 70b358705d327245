package brokertest

import (
	"bufio"
	"context"
	"encoding/binary"
	"io"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/fjordlog/fjord/broker/config"
	"github.com/fjordlog/fjord/storage/recordbatch"
	"github.com/fjordlog/fjord/storage/remote"
)

// A ListOffsets by a timestamp below the local log, answered from a slow
// store's copy, does not hold up the requests pipelined after it on the
// same connection: a Produce sent right behind it is applied (another
// client sees its record) before the ListOffsets answer arrives. Kafka's
// protocol answers a connection's requests in order, so the Produce's
// own answer still follows the ListOffsets'; what must not wait is its
// handling. The ListOffsets answer is still the copied record's offset.
func TestTierListOffsetsRemoteDoesNotBlockConnection(t *testing.T) {
	store := &slowStore{Store: remote.NewMemStore()}
	const cold, hot = "tier-ts-cold", "tier-ts-hot"
	c, _, t0 := tieredOneNode(t, store, cold, 200, 60, 60, nil)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cl := producer(t, c, hot)
	adm := kadm.NewClient(cl)
	if res, err := adm.CreateTopic(ctx, 1, 1, nil, hot); err != nil || res.Err != nil {
		t.Fatalf("create: %v %v", err, res.Err)
	}
	waitTopic(t, c, hot, 1)
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("hot-0")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	store.delay.Store(int64(2 * time.Second))

	nc, err := net.Dial("tcp", c.Addrs()[0])
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	// Versions without flexible headers, so the frames are read below by
	// hand: ListOffsets v5, Produce v8.
	const wantOffset = 5
	lo := kmsg.NewPtrListOffsetsRequest()
	lo.Version, lo.ReplicaID = 5, -1
	lt := kmsg.NewListOffsetsRequestTopic()
	lt.Topic = cold
	lp := kmsg.NewListOffsetsRequestTopicPartition()
	lp.Timestamp = t0.Add(wantOffset*time.Second - 300*time.Millisecond).UnixMilli()
	lt.Partitions = append(lt.Partitions, lp)
	lo.Topics = append(lo.Topics, lt)
	pr := kmsg.NewPtrProduceRequest()
	pr.Version, pr.Acks, pr.TimeoutMillis = 8, 1, 30000
	pt := kmsg.NewProduceRequestTopic()
	pt.Topic = hot
	pp := kmsg.NewProduceRequestTopicPartition()
	pp.Records = recordbatch.Build([]recordbatch.KV{{Value: []byte("hot-1")}}, time.Now().UnixMilli())
	pt.Partitions = append(pt.Partitions, pp)
	pr.Topics = append(pr.Topics, pt)
	f := kmsg.NewRequestFormatter(kmsg.FormatterClientID("tslookup"))
	// One write: AppendRequest puts the length at dst's start, so each
	// frame is built on its own.
	frames := append(f.AppendRequest(nil, lo, 1), f.AppendRequest(nil, pr, 2)...)

	type answer struct {
		corr int32
		body []byte
		err  error
	}
	answers := make(chan answer, 2)
	firstArrived := make(chan struct{})
	go func() {
		br := bufio.NewReader(nc)
		for i := 0; i < 2; i++ {
			var size [4]byte
			if _, err := io.ReadFull(br, size[:]); err != nil {
				answers <- answer{err: err}
				return
			}
			b := make([]byte, binary.BigEndian.Uint32(size[:]))
			if _, err := io.ReadFull(br, b); err != nil || len(b) < 4 {
				answers <- answer{err: err}
				return
			}
			if i == 0 {
				close(firstArrived)
			}
			answers <- answer{corr: int32(binary.BigEndian.Uint32(b)), body: b[4:]}
		}
	}()
	start := time.Now()
	if _, err := nc.Write(frames); err != nil {
		t.Fatal(err)
	}
	// The pipelined Produce is applied while the lookup reads the store.
	eventually(t, 30*time.Second, "the pipelined produce applied", func() bool {
		res, err := adm.ListEndOffsets(ctx, hot)
		if err != nil {
			t.Fatal(err)
		}
		o, ok := res.Lookup(hot, 0)
		return ok && o.Err == nil && o.Offset == 2
	})
	applied := time.Since(start)
	select {
	case <-firstArrived:
		t.Fatalf("the ListOffsets answer arrived before the produce behind it was applied (%v): the lookup held the connection's reader",
			applied.Round(time.Millisecond))
	default:
	}

	a := <-answers
	if a.err != nil || a.corr != 1 {
		t.Fatalf("first answer: correlation %d, %v; want 1", a.corr, a.err)
	}
	lresp := lo.ResponseKind().(*kmsg.ListOffsetsResponse)
	lresp.Version = lo.Version
	if err := lresp.ReadFrom(a.body); err != nil {
		t.Fatal(err)
	}
	if p := lresp.Topics[0].Partitions[0]; p.ErrorCode != 0 || p.Offset != wantOffset {
		t.Fatalf("ListOffsets from the copy: offset %d code %d, want %d", p.Offset, p.ErrorCode, wantOffset)
	}
	answered := time.Since(start)
	a = <-answers
	if a.err != nil || a.corr != 2 {
		t.Fatalf("second answer: correlation %d, %v; want 2", a.corr, a.err)
	}
	presp := pr.ResponseKind().(*kmsg.ProduceResponse)
	presp.Version = pr.Version
	if err := presp.ReadFrom(a.body); err != nil {
		t.Fatal(err)
	}
	if p := presp.Topics[0].Partitions[0]; p.ErrorCode != 0 || p.BaseOffset != 1 {
		t.Fatalf("pipelined produce: offset %d code %d, want 1", p.BaseOffset, p.ErrorCode)
	}
	t.Logf("store Gets 2 s: pipelined produce applied after %v, ListOffsets answered after %v (store Gets %d)",
		applied.Round(time.Millisecond), answered.Round(time.Millisecond), store.gets.Load())
}

// A ListOffsets lookup in the copy takes a place in the remote reader
// pool, as a consumer's remote read does: with the pool full it is
// refused for its partition with the code Fetch gets for a refused read,
// while a lookup of the same request answered without the store (latest)
// is not.
func TestTierListOffsetsReaderPoolFull(t *testing.T) {
	store := &slowStore{Store: remote.NewMemStore()}
	const cold, other = "tier-ts-full", "tier-ts-full2"
	c, values, t0 := tieredOneNode(t, store, cold, 200, 60, 60, func(cfg *config.Config) {
		cfg.Remote.ReaderThreads, cfg.Remote.ReaderMaxPending, cfg.Remote.FetchMaxWaitMs = 1, 1, 50
	})
	rs, err := c.Broker(1).Replica(cold, 0)
	if err != nil {
		t.Fatal(err)
	}
	store.delay.Store(int64(time.Minute)) // every read stays under way
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.Addrs()...), kgo.MaxVersions(kversion.V3_0_0()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	listAt := func(timestamps ...int64) []kmsg.ListOffsetsResponseTopicPartition {
		t.Helper()
		req := kmsg.NewPtrListOffsetsRequest()
		req.ReplicaID = -1
		rt := kmsg.NewListOffsetsRequestTopic()
		rt.Topic = cold
		for _, ts := range timestamps {
			rp := kmsg.NewListOffsetsRequestTopicPartition()
			rp.Timestamp = ts
			rt.Partitions = append(rt.Partitions, rp) // the same partition, asked twice
		}
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		return resp.Topics[0].Partitions
	}
	// Two remote reads, one running and one queued, fill the pool.
	for _, off := range []int64{0, 20} {
		if p := fetchNoWait(t, ctx, cl, cold, off); p.ErrorCode != 0 {
			t.Fatalf("remote read at %d: code %d", off, p.ErrorCode)
		}
	}
	got := listAt(t0.Add(3*time.Second).UnixMilli(), -1)
	if got[0].ErrorCode != kerr.UnknownServerError.Code {
		t.Fatalf("lookup in the copy with the pool full: offset %d code %d, want UNKNOWN_SERVER_ERROR", got[0].Offset, got[0].ErrorCode)
	}
	if got[1].ErrorCode != 0 || got[1].Offset != int64(len(values)) {
		t.Fatalf("latest beside it (local log from %d): offset %d code %d, want %d", rs.LogStart, got[1].Offset, got[1].ErrorCode, len(values))
	}
}
