package compattests

// TestChurnSuiteFranz: a client integration suite that creates and deletes
// topics fast, written with franz-go (kgo, kadm), as such suites do: each
// case creates a fresh topic (1 to 10 partitions, RF = the topology's
// size), produces with acks=all, reads every partition back directly and
// sometimes through a consumer group, lists and describes the topic,
// deletes it and checks every broker has forgotten it; most cases run in
// parallel. It runs on one fjord process and on three (RF 3), which must
// pass the same cases, and no process may die (issue 10: a follower's
// replica fetcher panicked on a partition a deletion had just removed).
// churn_kafkago_test.go is the same suite with segmentio/kafka-go;
// churn_helpers_test.go has the case list and the runner.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

func TestChurnSuiteFranz(t *testing.T) {
	runChurnSuite(t, "franz-go", franzChurnCase)
}

// franzChurnCase runs one case with franz-go.
func franzChurnCase(t *testing.T, tg *churnTarget, c churnCase) {
	ctx := tg.caseCtx(t, 45*time.Second)
	adm := kadm.NewClient(newClient(t, tg.seeds[0], kgo.SeedBrokers(tg.seeds...)))
	topic := uniqueTopic("franz-" + c.name[:2])
	if c.quick > 0 {
		for i := range c.quick {
			name := fmt.Sprintf("%s-%d", topic, i)
			franzCreate(t, ctx, tg, adm, name, c.partitions)
			franzDelete(t, ctx, tg, adm, name)
		}
		return
	}

	franzCreate(t, ctx, tg, adm, topic, c.partitions)
	prod := newClient(t, tg.seeds[0], kgo.SeedBrokers(tg.seeds...),
		kgo.RequiredAcks(kgo.AllISRAcks()), kgo.ProduceRequestTimeout(10*time.Second),
		kgo.RecordPartitioner(kgo.ManualPartitioner()))
	acked := franzProduce(t, ctx, tg, prod, topic, 0, c.records, c.partitions)
	partitions := c.partitions

	if c.grow > 0 {
		// More partitions, then records on every partition, new ones too.
		resp, err := adm.UpdatePartitions(ctx, c.grow, topic)
		if err == nil {
			err = resp.Error()
		}
		if err != nil {
			t.Fatalf("growing %q to %d partitions: %v%s", topic, c.grow, err, cause(ctx))
		}
		tg.awaitReady(t, ctx, topic, c.grow)
		partitions = c.grow
		// A new producer: the first one's metadata holds the old count
		// (kgo refuses a manual partition it does not know yet).
		prod.Close()
		prod = newClient(t, tg.seeds[0], kgo.SeedBrokers(tg.seeds...),
			kgo.RequiredAcks(kgo.AllISRAcks()), kgo.ProduceRequestTimeout(10*time.Second),
			kgo.RecordPartitioner(kgo.ManualPartitioner()))
		for v, pos := range franzProduce(t, ctx, tg, prod, topic, c.records, 2*c.partitions+6, partitions) {
			acked[v] = pos
		}
	}

	ends := franzEnds(t, ctx, adm, topic)
	if want := endsOf(acked, partitions); !sameOffsets(ends, want) {
		t.Errorf("ListEndOffsets %s, want %s from the acknowledgements", fmtOffsets(ends), fmtOffsets(want))
	}
	read := franzReadDirect(t, ctx, tg, topic, ends)
	checkRead(t, "direct read", acked, read)

	var member *kgo.Client
	group := uniqueTopic("franz-group-" + c.name[:2])
	if c.group {
		member = newClient(t, tg.seeds[0], kgo.SeedBrokers(tg.seeds...),
			kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
			kgo.SessionTimeout(groupSessionTimeout), kgo.HeartbeatInterval(groupHeartbeat),
			kgo.DisableAutoCommit(), kgo.FetchMaxWait(200*time.Millisecond))
		got := franzPoll(t, ctx, tg, member, len(acked), "group member")
		checkRead(t, "group member", acked, got)
		if err := member.CommitUncommittedOffsets(ctx); err != nil {
			t.Fatalf("committing: %v%s", err, cause(ctx))
		}
		committed := committedOffsets(t, adm, group, topic)
		for p, e := range ends {
			if e > 0 && committed[p] != e {
				t.Errorf("group %s committed %s, want the ends %s", group, fmtOffsets(committed), fmtOffsets(ends))
				break
			}
		}
	}

	// List and describe.
	td, err := adm.ListTopics(ctx, topic)
	if err != nil {
		t.Fatalf("ListTopics(%s): %v%s", topic, err, cause(ctx))
	}
	d, ok := td[topic]
	if !ok || d.Err != nil || len(d.Partitions) != partitions {
		t.Errorf("ListTopics(%s): listed %v, err %v, %d partitions; want %d", topic, ok, d.Err, len(d.Partitions), partitions)
	}
	for _, p := range d.Partitions.Sorted() {
		if len(p.Replicas) != int(tg.rf) {
			t.Errorf("p%d replicas %v, want %d", p.Partition, p.Replicas, tg.rf)
		}
	}
	all, err := adm.ListTopics(ctx)
	if err != nil {
		t.Fatalf("ListTopics(): %v%s", err, cause(ctx))
	}
	if !all.Has(topic) {
		t.Errorf("ListTopics() does not list %q", topic)
	}
	rcs, err := adm.DescribeTopicConfigs(ctx, topic)
	if err == nil {
		_, err = rcs.On(topic, nil)
	}
	if err != nil {
		t.Errorf("DescribeTopicConfigs(%s): %v", topic, err)
	}

	// Delete: after closing the clients, as tidy suites do, or with them
	// still open (a deferred delete running before a deferred close).
	closeAll := func() {
		prod.Close()
		if member != nil {
			member.Close()
		}
	}
	if !c.deleteLive {
		closeAll()
	}
	franzDelete(t, ctx, tg, adm, topic)
	if c.deleteLive {
		closeAll()
	}
	if c.group && !c.deleteLive {
		if _, err := adm.DeleteGroup(ctx, group); err != nil {
			t.Errorf("DeleteGroup(%s): %v", group, err)
		}
	}

	if c.recreate {
		// The same name again, other partitions: nothing of the first
		// incarnation may show. New clients, as a new test would have:
		// kadm's cached partition map would still name the old ones.
		parts := c.partitions%3 + 2
		adm = kadm.NewClient(newClient(t, tg.seeds[0], kgo.SeedBrokers(tg.seeds...)))
		franzCreate(t, ctx, tg, adm, topic, parts)
		prod2 := newClient(t, tg.seeds[0], kgo.SeedBrokers(tg.seeds...),
			kgo.RequiredAcks(kgo.AllISRAcks()), kgo.RecordPartitioner(kgo.ManualPartitioner()))
		acked2 := franzProduce(t, ctx, tg, prod2, topic, 1_000_000, 20, parts)
		ends2 := franzEnds(t, ctx, adm, topic)
		if want := endsOf(acked2, parts); !sameOffsets(ends2, want) {
			t.Errorf("recreated %q: ListEndOffsets %s, want %s (the new records alone)", topic, fmtOffsets(ends2), fmtOffsets(want))
		}
		checkRead(t, "recreated topic, direct read", acked2, franzReadDirect(t, ctx, tg, topic, ends2))
		prod2.Close()
		franzDelete(t, ctx, tg, adm, topic)
	}
}

// franzCreate creates topic with RF tg.rf and waits until every broker
// lists it, led.
func franzCreate(t *testing.T, ctx context.Context, tg *churnTarget, adm *kadm.Client, topic string, partitions int) {
	t.Helper()
	resp, err := adm.CreateTopic(ctx, int32(partitions), tg.rf, nil, topic)
	if err != nil {
		t.Fatalf("CreateTopic(%s, %d partitions, rf %d): %v (%s)%s", topic, partitions, tg.rf, err, resp.ErrMessage, cause(ctx))
	}
	tg.created.Add(1)
	tg.awaitReady(t, ctx, topic, partitions)
}

// franzDelete deletes topic and waits until no broker lists it.
func franzDelete(t *testing.T, ctx context.Context, tg *churnTarget, adm *kadm.Client, topic string) {
	t.Helper()
	resp, err := adm.DeleteTopic(ctx, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		t.Fatalf("DeleteTopic(%s): %v (%s)%s", topic, err, resp.ErrMessage, cause(ctx))
	}
	tg.awaitGone(t, ctx, topic, time.Now())
	// Describing it now must say it does not exist.
	td, err := kadm.NewClient(tg.client(t, tg.seeds[len(tg.seeds)-1])).ListTopics(ctx, topic)
	if err == nil {
		if d, ok := td[topic]; ok && !errors.Is(d.Err, kerr.UnknownTopicOrPartition) {
			t.Errorf("ListTopics(%s) after deletion: err %v, want UNKNOWN_TOPIC_OR_PARTITION", topic, d.Err)
		}
	}
}

// franzProduce produces n records (values churnValue(topic, from..from+n))
// round-robin over partitions with acks=all, and returns where each was
// acknowledged.
func franzProduce(t *testing.T, ctx context.Context, tg *churnTarget, cl *kgo.Client, topic string, from, n, partitions int) map[string]recPos {
	t.Helper()
	var recs []*kgo.Record
	for i := from; i < from+n; i++ {
		recs = append(recs, &kgo.Record{Topic: topic, Partition: int32(i % partitions), Key: []byte(churnKey(i)), Value: []byte(churnValue(topic, i))})
	}
	res, unanswered := produceWithin(ctx, cl, 5*time.Second, recs...)
	if unanswered > 0 {
		t.Fatalf("producing %d records to %s: %d unanswered%s", n, topic, unanswered, cause(ctx))
	}
	if err := res.FirstErr(); err != nil {
		t.Fatalf("producing %d records to %s: %v%s", n, topic, err, cause(ctx))
	}
	out := map[string]recPos{}
	for _, r := range res {
		out[string(r.Record.Value)] = recPos{r.Record.Partition, r.Record.Offset}
	}
	tg.produced.Add(int64(n))
	return out
}

// endsOf is the end offset of every partition of 0..partitions-1 that
// acked implies (one past the highest acknowledged offset, else 0).
func endsOf(acked map[string]recPos, partitions int) map[int32]int64 {
	out := map[int32]int64{}
	for p := range int32(partitions) {
		out[p] = 0
	}
	for _, pos := range acked {
		out[pos.p] = max(out[pos.p], pos.off+1)
	}
	return out
}

func franzEnds(t *testing.T, ctx context.Context, adm *kadm.Client, topic string) map[int32]int64 {
	t.Helper()
	lo, err := adm.ListEndOffsets(ctx, topic)
	if err == nil {
		err = lo.Error()
	}
	if err != nil {
		t.Fatalf("ListEndOffsets(%s): %v%s", topic, err, cause(ctx))
	}
	out := map[int32]int64{}
	lo.Each(func(o kadm.ListedOffset) { out[o.Partition] = o.Offset })
	return out
}

// franzReadDirect reads every partition of topic from offset 0 up to ends
// with a fresh consumer assigned the partitions (no group).
func franzReadDirect(t *testing.T, ctx context.Context, tg *churnTarget, topic string, ends map[int32]int64) []readRec {
	t.Helper()
	starts := map[int32]kgo.Offset{}
	total := 0
	for p, e := range ends {
		starts[p] = kgo.NewOffset().At(0)
		total += int(e)
	}
	cl := newClient(t, tg.seeds[0], kgo.SeedBrokers(tg.seeds...),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: starts}),
		kgo.FetchMaxWait(200*time.Millisecond))
	defer cl.Close()
	return franzPoll(t, ctx, tg, cl, total, "direct read")
}

// franzPoll polls cl until it has returned n records or ctx ends.
func franzPoll(t *testing.T, ctx context.Context, tg *churnTarget, cl *kgo.Client, n int, what string) []readRec {
	t.Helper()
	var out []readRec
	var errs []string
	for len(out) < n {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("%s: %d of %d records before %v (fetch errors: %v)", what, len(out), n, context.Cause(ctx), errs)
		}
		fs.EachError(func(tp string, p int32, err error) {
			if len(errs) < 10 && !slices.Contains(errs, err.Error()) {
				errs = append(errs, fmt.Sprintf("%s[%d]: %v", tp, p, err))
			}
		})
		fs.EachRecord(func(r *kgo.Record) {
			out = append(out, readRec{string(r.Value), recPos{r.Partition, r.Offset}})
		})
	}
	tg.consumed.Add(int64(len(out)))
	return out
}
