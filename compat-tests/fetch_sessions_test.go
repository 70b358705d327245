package compattests

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestFetchSessions: franz-go consumes with KIP-227 incremental fetch
// sessions (its default) while a producer writes and topics the consumer
// follows (by regex) are created and deleted, so sessions gain and forget
// partitions all along; on one node and on three at replication factor 3,
// where the followers' replica fetches use sessions too. Every record of
// the stable topic must be read exactly once and in order, every record
// read of a short-lived topic at most once and in order, and the nodes
// must really have held sessions (fjord_fetch_sessions).
func TestFetchSessions(t *testing.T) {
	for _, n := range []int{1, 3} {
		t.Run(fmt.Sprintf("%d-node", n), func(t *testing.T) { testFetchSessions(t, n) })
	}
}

func testFetchSessions(t *testing.T, n int) {
	c := startCluster(t, n, "fjord.metrics.listener=127.0.0.1:0")
	ctx := testCtx(t, 4*time.Minute)
	adm := c.Admin(1)
	rf := int16(n)
	create := func(name string, parts int32) {
		t.Helper()
		if _, err := adm.CreateTopic(ctx, parts, rf, nil, name); err != nil {
			t.Fatalf("create %s: %v", name, err)
		}
	}
	const stable, parts, rounds, perRound = "fs-stable", 6, 40, 10
	create(stable, parts)

	seeds := kgo.SeedBrokers(c.Addrs()...)
	type tp struct {
		topic string
		p     int32
	}
	var (
		mu       sync.Mutex
		next     = map[tp]int64{} // the next offset each partition must show
		problems []string
	)
	consumer := newClient(t, c.Addr(1), append(c.ClientOpts(), seeds,
		kgo.ConsumeRegex(), kgo.ConsumeTopics("^fs-"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.MetadataMinAge(250*time.Millisecond), kgo.MetadataMaxAge(time.Second), kgo.FetchMaxWait(200*time.Millisecond))...)
	cctx, stopConsumer := context.WithCancel(ctx)
	consumed := make(chan struct{})
	go func() {
		defer close(consumed)
		for cctx.Err() == nil {
			fs := consumer.PollFetches(cctx)
			fs.EachRecord(func(r *kgo.Record) {
				mu.Lock()
				defer mu.Unlock()
				k := tp{r.Topic, r.Partition}
				want, seen := next[k]
				switch {
				case r.Topic == stable && r.Offset != want:
					problems = append(problems, fmt.Sprintf("%s-%d: offset %d, want %d", r.Topic, r.Partition, r.Offset, want))
				case seen && r.Offset < want:
					problems = append(problems, fmt.Sprintf("%s-%d: offset %d again (next was %d)", r.Topic, r.Partition, r.Offset, want))
				case string(r.Value) != strconv.FormatInt(r.Offset, 10):
					problems = append(problems, fmt.Sprintf("%s-%d: offset %d holds %q", r.Topic, r.Partition, r.Offset, r.Value))
				}
				next[k] = r.Offset + 1
			})
		}
	}()

	// The producer writes offset numbers as values (one idempotent
	// producer, each partition's records in order), so a value shows where
	// a record belongs.
	producer := newClient(t, c.Addr(1), append(c.ClientOpts(), seeds, kgo.RecordPartitioner(kgo.ManualPartitioner()))...)
	produced := map[tp]int64{}
	produce := func(topic string, nparts int32, count int) {
		t.Helper()
		var rs []*kgo.Record
		for p := range nparts {
			for range count {
				k := tp{topic, p}
				rs = append(rs, &kgo.Record{Topic: topic, Partition: p, Value: []byte(strconv.FormatInt(produced[k], 10))})
				produced[k]++
			}
		}
		if err := producer.ProduceSync(ctx, rs...).FirstErr(); err != nil {
			t.Fatalf("produce to %s: %v", topic, err)
		}
	}
	var temps []string
	for round := range rounds {
		produce(stable, parts, perRound)
		if round%4 == 0 {
			name := fmt.Sprintf("fs-tmp-%d", round)
			create(name, 3)
			temps = append(temps, name)
			produce(name, 3, 5)
		}
		if len(temps) > 2 {
			if _, err := adm.DeleteTopics(ctx, temps[0]); err != nil {
				t.Fatalf("delete %s: %v", temps[0], err)
			}
			temps = temps[1:]
		}
	}

	// Sessions were held while the consumer ran: every node leads
	// partitions a session fetches (the consumer's; with three nodes, the
	// followers' too).
	for _, id := range c.IDs() {
		m, err := scrapeMetrics(c.metricsAddr(t, id), 5*time.Second)
		if err != nil {
			t.Fatalf("node %d /metrics: %v", id, err)
		}
		t.Logf("node %d: %v fetch sessions, %v partitions cached, %v evictions", id,
			m["fjord_fetch_sessions"], m["fjord_fetch_session_partitions"], m["fjord_fetch_session_evictions_total"])
		if m["fjord_fetch_sessions"] < 1 {
			t.Errorf("node %d holds no fetch session", id)
		}
	}

	c.Await(t, 60*time.Second, "the consumer reads every record of the topics left", func() (bool, string) {
		mu.Lock()
		defer mu.Unlock()
		var behind []string
		for k, n := range produced {
			if (k.topic == stable || slices.Contains(temps, k.topic)) && next[k] != n {
				behind = append(behind, fmt.Sprintf("%s-%d: %d of %d", k.topic, k.p, next[k], n))
			}
		}
		return len(behind) == 0 && len(problems) == 0, strings.Join(behind, ", ")
	})
	stopConsumer()
	<-consumed
	mu.Lock()
	defer mu.Unlock()
	if len(problems) > 0 {
		t.Fatalf("%d problems, first: %s", len(problems), strings.Join(problems[:min(10, len(problems))], "; "))
	}
}

// TestFetchSessionACLRevoked: a READ denied after a partition joined a
// fetch session stops its reads, though the incremental fetches that
// follow do not name it (the session's partitions are authorized again on
// every fetch).
func TestFetchSessionACLRevoked(t *testing.T) {
	ctx := testCtx(t, 60*time.Second)
	b := startBroker(t, t.TempDir(), stdAuthorizer, "allow.everyone.if.no.acl.found=true")
	adm := newAdmin(t, b.Addr)
	createTopic(t, adm, "fsacl.t", 1, nil)
	cl := newClient(t, b.Addr, kgo.DefaultProduceTopic("fsacl.t"))
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("secret")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	td, err := adm.ListTopics(ctx, "fsacl.t")
	if err != nil {
		t.Fatal(err)
	}
	fetch := func(id, epoch int32, named bool) *kmsg.FetchResponse {
		t.Helper()
		req := kmsg.NewPtrFetchRequest()
		req.SessionID, req.SessionEpoch, req.MaxWaitMillis = id, epoch, 10
		if named {
			rt := kmsg.NewFetchRequestTopic()
			rt.Topic, rt.TopicID = "fsacl.t", td["fsacl.t"].ID
			rp := kmsg.NewFetchRequestTopicPartition()
			rp.PartitionMaxBytes = 1 << 20
			rt.Partitions = append(rt.Partitions, rp)
			req.Topics = append(req.Topics, rt)
		}
		resp, err := direct[*kmsg.FetchResponse](ctx, cl, req)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	parts := func(resp *kmsg.FetchResponse) []kmsg.FetchResponseTopicPartition {
		var out []kmsg.FetchResponseTopicPartition
		for _, rt := range resp.Topics {
			out = append(out, rt.Partitions...)
		}
		return out
	}
	full := fetch(0, 0, true)
	if full.SessionID == 0 || len(parts(full)) != 1 || len(parts(full)[0].RecordBatches) == 0 {
		t.Fatalf("full fetch: session %d, %+v", full.SessionID, parts(full))
	}
	// The session's offset is still 0: an incremental fetch reads the
	// record again.
	if ps := parts(fetch(full.SessionID, 1, false)); len(ps) != 1 || len(ps[0].RecordBatches) == 0 {
		t.Fatalf("incremental fetch before the ACL: %+v", ps)
	}
	createACLs(t, ctx, adm, newACLs().Deny(anon).Topics("fsacl.t").Operations(kadm.OpRead))
	ps := parts(fetch(full.SessionID, 2, false))
	if len(ps) != 1 || len(ps[0].RecordBatches) != 0 || ps[0].ErrorCode != kerr.TopicAuthorizationFailed.Code {
		t.Fatalf("incremental fetch after the ACL: %+v", ps)
	}
}

// TestFetchSessionEviction: with one fetch session slot per node, a
// franz-go consumer's session on node 1 is evicted by a follower's (a
// replica's session is privileged, as Kafka's) once a topic replicated
// from node 1 appears. The consumer's next incremental fetch gets
// FETCH_SESSION_ID_NOT_FOUND, it starts over with full fetches (no slot
// is left for it), and it must still read every record exactly once and
// in order while the replicated topic takes acks=all writes.
func TestFetchSessionEviction(t *testing.T) {
	// Internal topics at RF 1: their followers would take the only slot
	// before the consumer comes.
	c := startCluster(t, 3, "fjord.metrics.listener=127.0.0.1:0", "max.incremental.fetch.session.cache.slots=1",
		"offsets.topic.replication.factor=1", "transaction.state.log.replication.factor=1")
	ctx := testCtx(t, 2*time.Minute)
	const solo, replicated = "fse-solo", "fse-replicated"
	createOn := func(topic string, replicas ...int32) {
		t.Helper()
		req := kmsg.NewPtrCreateTopicsRequest()
		ct := kmsg.NewCreateTopicsRequestTopic()
		ct.Topic, ct.NumPartitions, ct.ReplicationFactor = topic, -1, -1
		for p := range int32(3) {
			a := kmsg.NewCreateTopicsRequestTopicReplicaAssignment()
			a.Partition, a.Replicas = p, replicas
			ct.ReplicaAssignment = append(ct.ReplicaAssignment, a)
		}
		req.Topics = append(req.Topics, ct)
		req.TimeoutMillis = 10000
		resp, err := req.RequestWith(ctx, c.Client(1))
		if err != nil || len(resp.Topics) != 1 || resp.Topics[0].ErrorCode != 0 {
			t.Fatalf("create %s: %v %+v", topic, err, resp)
		}
		c.Await(t, 20*time.Second, topic+" led by node 1 with its replicas in sync", func() (bool, string) {
			tm := rawMetadata(t, c.Client(1), topic)
			if tm.ErrorCode != 0 || len(tm.Partitions) != 3 {
				return false, "not listed"
			}
			for _, p := range tm.Partitions {
				if p.Leader != 1 || len(p.ISR) != len(replicas) {
					return false, fmt.Sprintf("partition %d: leader %d, isr %v", p.Partition, p.Leader, p.ISR)
				}
			}
			return true, ""
		})
	}
	sessions := func() (held, evicted float64) {
		t.Helper()
		m, err := scrapeMetrics(c.metricsAddr(t, 1), 5*time.Second)
		if err != nil {
			t.Fatalf("node 1 /metrics: %v", err)
		}
		return m["fjord_fetch_sessions"], m["fjord_fetch_session_evictions_total"]
	}
	createOn(solo, 1)

	var (
		mu       sync.Mutex
		next     = map[int32]int64{}
		problems []string
	)
	consumer := newClient(t, c.Addr(1), append(c.ClientOpts(), kgo.SeedBrokers(c.Addrs()...),
		kgo.ConsumeTopics(solo), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(100*time.Millisecond))...)
	cctx, stopConsumer := context.WithCancel(ctx)
	consumed := make(chan struct{})
	go func() {
		defer close(consumed)
		for cctx.Err() == nil {
			consumer.PollFetches(cctx).EachRecord(func(r *kgo.Record) {
				mu.Lock()
				defer mu.Unlock()
				if want := next[r.Partition]; r.Offset != want || string(r.Value) != strconv.FormatInt(r.Offset, 10) {
					problems = append(problems, fmt.Sprintf("%s-%d: offset %d holds %q, want offset %d", r.Topic, r.Partition, r.Offset, r.Value, want))
				}
				next[r.Partition] = r.Offset + 1
			})
		}
	}()
	producer := newClient(t, c.Addr(1), append(c.ClientOpts(), kgo.SeedBrokers(c.Addrs()...), kgo.RecordPartitioner(kgo.ManualPartitioner()))...)
	produced := map[string]map[int32]int64{solo: {}, replicated: {}}
	produce := func(topic string) {
		t.Helper()
		var rs []*kgo.Record
		for p := range int32(3) {
			for range 5 {
				rs = append(rs, &kgo.Record{Topic: topic, Partition: p, Value: []byte(strconv.FormatInt(produced[topic][p], 10))})
				produced[topic][p]++
			}
		}
		if err := producer.ProduceSync(ctx, rs...).FirstErr(); err != nil {
			t.Fatalf("produce to %s: %v", topic, err)
		}
	}
	caughtUp := func() (bool, string) {
		mu.Lock()
		defer mu.Unlock()
		for p, n := range produced[solo] {
			if next[p] != n {
				return false, fmt.Sprintf("%s-%d: read %d of %d", solo, p, next[p], n)
			}
		}
		return true, ""
	}
	produce(solo)
	c.Await(t, 30*time.Second, "the consumer reads the first records", caughtUp)
	c.Await(t, 10*time.Second, "the consumer holds node 1's only session", func() (bool, string) {
		held, _ := sessions()
		return held == 1, fmt.Sprintf("%v sessions", held)
	})

	createOn(replicated, 1, 2, 3)
	for range 20 {
		produce(solo)
		produce(replicated)
	}
	c.Await(t, 30*time.Second, "a follower's session evicts the consumer's", func() (bool, string) {
		held, evicted := sessions()
		return evicted >= 1, fmt.Sprintf("%v sessions, %v evictions", held, evicted)
	})
	for range 10 {
		produce(solo)
	}
	c.Await(t, 30*time.Second, "the consumer reads every record after the eviction", caughtUp)
	stopConsumer()
	<-consumed
	mu.Lock()
	defer mu.Unlock()
	if len(problems) > 0 {
		t.Fatalf("%d problems, first: %s", len(problems), strings.Join(problems[:min(10, len(problems))], "; "))
	}
	held, evicted := sessions()
	t.Logf("node 1: %v sessions, %v evictions; %d records read from %s", held, evicted, produced[solo][0]*3, solo)
}
