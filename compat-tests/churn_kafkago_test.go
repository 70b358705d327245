package compattests

// TestChurnSuiteKafkaGo: the suite of churn_suite_test.go written with
// segmentio/kafka-go, the way kafka-go's own tests go about it: every case
// makes a fresh topic (half of them through a Conn to the controller, as
// kafka-go's createTopic/deleteTopic helpers do, half through
// kafka.Client), writes with a Writer (RequireAll), reads each partition
// with a partition Reader and sometimes with a group Reader, lists topics
// with Conn.ReadPartitions, describes configs, lists offsets, then deletes
// the topic. Same case list, same topologies, same checks.

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	kafka "github.com/segmentio/kafka-go"
)

func TestChurnSuiteKafkaGo(t *testing.T) {
	runChurnSuite(t, "kafka-go", kafkagoChurnCase)
}

// kgoCase is one case's kafka-go state: a Transport of its own (a test
// with its own client; its metadata cache knows only this case's topics).
type kgoCase struct {
	t  *testing.T
	tg *churnTarget
	tr *kafka.Transport
	cl *kafka.Client
	// viaConn: create and delete through a Conn to the controller.
	viaConn bool
}

func newKgoCase(t *testing.T, tg *churnTarget, viaConn bool) *kgoCase {
	tr := &kafka.Transport{DialTimeout: 2 * time.Second, MetadataTTL: time.Second, ClientID: "churn-kafka-go"}
	t.Cleanup(tr.CloseIdleConnections)
	return &kgoCase{t: t, tg: tg, tr: tr, cl: &kafka.Client{Addr: kafka.TCP(tg.seeds...), Timeout: 10 * time.Second, Transport: tr}, viaConn: viaConn}
}

func kafkagoChurnCase(t *testing.T, tg *churnTarget, c churnCase) {
	ctx := tg.caseCtx(t, 45*time.Second)
	idx, _ := strconv.Atoi(c.name[:2])
	k := newKgoCase(t, tg, idx%2 == 1)
	topic := uniqueTopic("kafkago-" + c.name[:2])
	if c.quick > 0 {
		for i := range c.quick {
			name := fmt.Sprintf("%s-%d", topic, i)
			k.create(ctx, name, c.partitions)
			k.delete(ctx, name)
		}
		return
	}

	k.create(ctx, topic, c.partitions)
	w := k.writer(topic)
	acked := k.produce(ctx, w, topic, 0, c.records, c.partitions)
	partitions := c.partitions

	if c.grow > 0 {
		resp, err := k.cl.CreatePartitions(ctx, &kafka.CreatePartitionsRequest{
			Topics: []kafka.TopicPartitionsConfig{{Name: topic, Count: int32(c.grow)}},
		})
		if err == nil {
			err = resp.Errors[topic]
		}
		if err != nil {
			t.Fatalf("CreatePartitions(%s, %d): %v%s", topic, c.grow, err, cause(ctx))
		}
		tg.awaitReady(t, ctx, topic, c.grow)
		partitions = c.grow
		// A new transport from here on: the first one's metadata holds
		// the old partition count (kafka-go would send the new
		// partitions' requests to whichever broker, and not retry).
		w.Close()
		k = newKgoCase(t, tg, k.viaConn)
		w = k.writer(topic)
		for v, pos := range k.produce(ctx, w, topic, c.records, 2*c.partitions+6, partitions) {
			acked[v] = pos
		}
	}

	ends := k.ends(ctx, topic, partitions)
	if want := endsOf(acked, partitions); !sameOffsets(ends, want) {
		t.Errorf("ListOffsets %s, want %s from the acknowledgements", fmtOffsets(ends), fmtOffsets(want))
	}
	checkRead(t, "partition readers", acked, k.readDirect(ctx, topic, ends))

	var member *kafka.Reader
	group := uniqueTopic("kafkago-group-" + c.name[:2])
	if c.group {
		member = kafka.NewReader(kafka.ReaderConfig{
			Brokers: tg.seeds, GroupID: group, Topic: topic,
			MinBytes: 1, MaxBytes: 1 << 20, MaxWait: 200 * time.Millisecond,
			HeartbeatInterval: groupHeartbeat, SessionTimeout: groupSessionTimeout,
			RebalanceTimeout: 10 * time.Second, JoinGroupBackoff: 200 * time.Millisecond,
			ReadBackoffMin: 50 * time.Millisecond, ReadBackoffMax: 200 * time.Millisecond,
			StartOffset: kafka.FirstOffset, CommitInterval: 0, // synchronous commits
			Dialer: &kafka.Dialer{Timeout: 2 * time.Second},
		})
		t.Cleanup(func() { member.Close() })
		var got []readRec
		var msgs []kafka.Message
		for len(got) < len(acked) {
			m, err := member.FetchMessage(ctx)
			if err != nil {
				t.Fatalf("group reader: %d of %d records: %v%s", len(got), len(acked), err, cause(ctx))
			}
			got = append(got, readRec{string(m.Value), recPos{int32(m.Partition), m.Offset}})
			msgs = append(msgs, m)
		}
		tg.consumed.Add(int64(len(got)))
		checkRead(t, "group reader", acked, got)
		if err := member.CommitMessages(ctx, msgs...); err != nil {
			t.Fatalf("CommitMessages: %v%s", err, cause(ctx))
		}
		req := &kafka.OffsetFetchRequest{GroupID: group, Topics: map[string][]int{topic: nil}}
		for p := range partitions {
			req.Topics[topic] = append(req.Topics[topic], p)
		}
		resp, err := k.cl.OffsetFetch(ctx, req)
		if err == nil {
			err = resp.Error
		}
		if err != nil {
			t.Fatalf("OffsetFetch(%s): %v%s", group, err, cause(ctx))
		}
		committed := map[int32]int64{}
		for _, op := range resp.Topics[topic] {
			if op.Error != nil {
				t.Errorf("OffsetFetch(%s) p%d: %v", group, op.Partition, op.Error)
			}
			committed[int32(op.Partition)] = op.CommittedOffset
		}
		for p, e := range ends {
			if e > 0 && committed[p] != e {
				t.Errorf("group %s committed %s, want the ends %s", group, fmtOffsets(committed), fmtOffsets(ends))
				break
			}
		}
	}

	// List (Conn.ReadPartitions on every broker, as kafka-go users list
	// topics) and describe.
	for _, addr := range tg.seeds {
		ps := k.readPartitions(ctx, addr)
		var mine []kafka.Partition
		for _, p := range ps {
			if p.Topic == topic {
				mine = append(mine, p)
			}
		}
		if len(mine) != partitions {
			t.Errorf("%s: ReadPartitions lists %d partitions of %s, want %d", addr, len(mine), topic, partitions)
		}
		for _, p := range mine {
			if len(p.Replicas) != int(tg.rf) || p.Leader.ID < 0 {
				t.Errorf("%s: %s[%d] leader %d, %d replicas, want rf %d", addr, topic, p.ID, p.Leader.ID, len(p.Replicas), tg.rf)
			}
		}
	}
	dc, err := k.cl.DescribeConfigs(ctx, &kafka.DescribeConfigsRequest{
		Resources: []kafka.DescribeConfigRequestResource{{ResourceType: kafka.ResourceTypeTopic, ResourceName: topic}},
	})
	if err == nil && len(dc.Resources) != 1 {
		err = fmt.Errorf("%d resources in the answer", len(dc.Resources))
	}
	if err == nil {
		err = dc.Resources[0].Error
	}
	if err != nil {
		t.Errorf("DescribeConfigs(%s): %v%s", topic, err, cause(ctx))
	}

	closeAll := func() {
		w.Close()
		if member != nil {
			member.Close()
		}
	}
	if !c.deleteLive {
		closeAll()
	}
	k.delete(ctx, topic)
	if c.deleteLive {
		closeAll()
	}
	if c.group && !c.deleteLive {
		resp, err := k.cl.DeleteGroups(ctx, &kafka.DeleteGroupsRequest{GroupIDs: []string{group}})
		if err == nil {
			err = resp.Errors[group]
		}
		if err != nil {
			t.Errorf("DeleteGroups(%s): %v", group, err)
		}
	}

	if c.recreate {
		parts := c.partitions%3 + 2
		k2 := newKgoCase(t, tg, !k.viaConn)
		k2.create(ctx, topic, parts)
		w2 := k2.writer(topic)
		acked2 := k2.produce(ctx, w2, topic, 1_000_000, 20, parts)
		w2.Close()
		ends2 := k2.ends(ctx, topic, parts)
		if want := endsOf(acked2, parts); !sameOffsets(ends2, want) {
			t.Errorf("recreated %q: ListOffsets %s, want %s (the new records alone)", topic, fmtOffsets(ends2), fmtOffsets(want))
		}
		checkRead(t, "recreated topic, partition readers", acked2, k2.readDirect(ctx, topic, ends2))
		k2.delete(ctx, topic)
	}
}

// controllerConn dials the controller as kafka-go's test helpers do: ask
// any broker which one it is, then dial it.
func (k *kgoCase) controllerConn(ctx context.Context) *kafka.Conn {
	k.t.Helper()
	d := &kafka.Dialer{Timeout: 2 * time.Second}
	conn, err := d.DialContext(ctx, "tcp", k.tg.seeds[0])
	if err != nil {
		k.t.Fatalf("dial %s: %v%s", k.tg.seeds[0], err, cause(ctx))
	}
	defer conn.Close()
	ctl, err := conn.Controller()
	if err != nil {
		k.t.Fatalf("Controller(): %v%s", err, cause(ctx))
	}
	cc, err := d.DialContext(ctx, "tcp", net.JoinHostPort(ctl.Host, strconv.Itoa(ctl.Port)))
	if err != nil {
		k.t.Fatalf("dial controller %d at %s:%d: %v%s", ctl.ID, ctl.Host, ctl.Port, err, cause(ctx))
	}
	_ = cc.SetDeadline(time.Now().Add(10 * time.Second))
	return cc
}

func (k *kgoCase) create(ctx context.Context, topic string, partitions int) {
	k.t.Helper()
	cfg := kafka.TopicConfig{Topic: topic, NumPartitions: partitions, ReplicationFactor: int(k.tg.rf)}
	var err error
	if k.viaConn {
		cc := k.controllerConn(ctx)
		err = cc.CreateTopics(cfg)
		cc.Close()
	} else {
		var resp *kafka.CreateTopicsResponse
		resp, err = k.cl.CreateTopics(ctx, &kafka.CreateTopicsRequest{Topics: []kafka.TopicConfig{cfg}})
		if err == nil {
			err = resp.Errors[topic]
		}
	}
	if err != nil {
		k.t.Fatalf("CreateTopics(%s, %d partitions, rf %d, via conn %v): %v%s", topic, partitions, k.tg.rf, k.viaConn, err, cause(ctx))
	}
	k.tg.created.Add(1)
	k.tg.awaitReady(k.t, ctx, topic, partitions)
}

func (k *kgoCase) delete(ctx context.Context, topic string) {
	k.t.Helper()
	var err error
	if k.viaConn {
		cc := k.controllerConn(ctx)
		err = cc.DeleteTopics(topic)
		cc.Close()
	} else {
		var resp *kafka.DeleteTopicsResponse
		resp, err = k.cl.DeleteTopics(ctx, &kafka.DeleteTopicsRequest{Topics: []string{topic}})
		if err == nil {
			err = resp.Errors[topic]
		}
	}
	if err != nil {
		k.t.Fatalf("DeleteTopics(%s, via conn %v): %v%s", topic, k.viaConn, err, cause(ctx))
	}
	k.tg.awaitGone(k.t, ctx, topic, time.Now())
	// kafka-go asked about it by name: unknown on every broker.
	for _, addr := range k.tg.seeds {
		conn := k.dial(ctx, addr)
		_, err := conn.ReadPartitions(topic)
		conn.Close()
		if !errors.Is(err, kafka.UnknownTopicOrPartition) {
			k.t.Errorf("%s: ReadPartitions(%s) after deletion: %v, want UNKNOWN_TOPIC_OR_PARTITION", addr, topic, err)
		}
	}
}

func (k *kgoCase) dial(ctx context.Context, addr string) *kafka.Conn {
	k.t.Helper()
	conn, err := (&kafka.Dialer{Timeout: 2 * time.Second}).DialContext(ctx, "tcp", addr)
	if err != nil {
		k.t.Fatalf("dial %s: %v%s", addr, err, cause(ctx))
	}
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	return conn
}

// readPartitions lists every topic's partitions as the broker at addr sees
// them.
func (k *kgoCase) readPartitions(ctx context.Context, addr string) []kafka.Partition {
	k.t.Helper()
	conn := k.dial(ctx, addr)
	defer conn.Close()
	ps, err := conn.ReadPartitions()
	if err != nil {
		k.t.Fatalf("%s: ReadPartitions(): %v%s", addr, err, cause(ctx))
	}
	return ps
}

// writer is a synchronous RequireAll writer putting value #i on partition
// i % (partitions it knows).
func (k *kgoCase) writer(topic string) *kafka.Writer {
	return &kafka.Writer{
		Addr: kafka.TCP(k.tg.seeds...), Topic: topic, Transport: k.tr,
		RequiredAcks: kafka.RequireAll, BatchTimeout: 5 * time.Millisecond, BatchSize: 50,
		MaxAttempts: 10, WriteBackoffMin: 50 * time.Millisecond, WriteBackoffMax: 500 * time.Millisecond,
		Balancer: kafka.BalancerFunc(func(m kafka.Message, partitions ...int) int {
			i, _ := strconv.Atoi(string(m.Value[strings.LastIndexByte(string(m.Value), '#')+1:]))
			ps := slices.Sorted(slices.Values(partitions))
			return ps[i%len(ps)]
		}),
	}
}

// produce writes values #from..#from+n with w and returns where each was
// acknowledged (from the Writer's Completion).
func (k *kgoCase) produce(ctx context.Context, w *kafka.Writer, topic string, from, n, partitions int) map[string]recPos {
	k.t.Helper()
	var mu sync.Mutex
	out := map[string]recPos{}
	w.Completion = func(msgs []kafka.Message, err error) {
		if err != nil {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		for _, m := range msgs {
			out[string(m.Value)] = recPos{int32(m.Partition), m.Offset}
		}
	}
	var msgs []kafka.Message
	for i := from; i < from+n; i++ {
		msgs = append(msgs, kafka.Message{Key: []byte(churnKey(i)), Value: []byte(churnValue(topic, i))})
	}
	if err := w.WriteMessages(ctx, msgs...); err != nil {
		k.t.Fatalf("WriteMessages(%d to %s): %v%s", n, topic, err, cause(ctx))
	}
	mu.Lock()
	defer mu.Unlock()
	if len(out) != n {
		k.t.Fatalf("WriteMessages(%d to %s): %d acknowledged", n, topic, len(out))
	}
	k.tg.produced.Add(int64(n))
	return out
}

// ends lists every partition's last offset (the high watermark).
func (k *kgoCase) ends(ctx context.Context, topic string, partitions int) map[int32]int64 {
	k.t.Helper()
	req := &kafka.ListOffsetsRequest{Topics: map[string][]kafka.OffsetRequest{}}
	for p := range partitions {
		req.Topics[topic] = append(req.Topics[topic], kafka.LastOffsetOf(p))
	}
	resp, err := k.cl.ListOffsets(ctx, req)
	if err != nil {
		k.t.Fatalf("ListOffsets(%s): %v%s", topic, err, cause(ctx))
	}
	out := map[int32]int64{}
	for _, po := range resp.Topics[topic] {
		if po.Error != nil {
			k.t.Fatalf("ListOffsets(%s) p%d: %v", topic, po.Partition, po.Error)
		}
		out[int32(po.Partition)] = po.LastOffset
	}
	return out
}

// readDirect reads each non-empty partition from its first offset to its
// end with a partition Reader (no group).
func (k *kgoCase) readDirect(ctx context.Context, topic string, ends map[int32]int64) []readRec {
	k.t.Helper()
	var out []readRec
	for _, p := range slices.Sorted(func(yield func(int32) bool) {
		for p := range ends {
			if !yield(p) {
				return
			}
		}
	}) {
		if ends[p] == 0 {
			continue
		}
		r := kafka.NewReader(kafka.ReaderConfig{
			Brokers: k.tg.seeds, Topic: topic, Partition: int(p),
			MinBytes: 1, MaxBytes: 1 << 20, MaxWait: 50 * time.Millisecond,
			ReadBackoffMin: 50 * time.Millisecond, ReadBackoffMax: 200 * time.Millisecond,
			Dialer: &kafka.Dialer{Timeout: 2 * time.Second},
		})
		if err := r.SetOffset(kafka.FirstOffset); err != nil {
			k.t.Fatalf("SetOffset: %v", err)
		}
		for {
			m, err := r.ReadMessage(ctx)
			if err != nil {
				r.Close()
				k.t.Fatalf("reading %s[%d] up to %d: %v%s", topic, p, ends[p], err, cause(ctx))
			}
			out = append(out, readRec{string(m.Value), recPos{int32(m.Partition), m.Offset}})
			if m.Offset+1 >= ends[p] {
				break
			}
		}
		r.Close()
	}
	k.tg.consumed.Add(int64(len(out)))
	return out
}
