package compattests

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestFranzAdmin covers CreateTopics, DeleteTopics, DescribeConfigs and
// ListOffsets through kadm (and raw kmsg where kadm would hide the answer).
func TestFranzAdmin(t *testing.T) {
	b := startBroker(t, t.TempDir())
	cl := newClient(t, b.Addr)
	adm := kadm.NewClient(cl)

	// topicNames lists topics with a raw Metadata request: kadm.ListTopics
	// answers from the client's metadata cache (MetadataMinAge, 5s), which
	// does not see a delete made a moment ago.
	topicNames := func(t *testing.T) map[string]bool {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		resp, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, cl)
		if err != nil {
			t.Fatalf("metadata: %v", err)
		}
		out := map[string]bool{}
		for _, mt := range resp.Topics {
			if mt.ErrorCode == 0 && mt.Topic != nil {
				out[*mt.Topic] = true
			}
		}
		return out
	}

	// rawCreate sends one CreateTopics request for a single topic and
	// returns the topic's error code.
	rawCreate := func(t *testing.T, name string, partitions int32, rf int16, validateOnly bool) (int16, string) {
		t.Helper()
		req := kmsg.NewPtrCreateTopicsRequest()
		req.TimeoutMillis = 10000
		req.ValidateOnly = validateOnly
		rt := kmsg.NewCreateTopicsRequestTopic()
		rt.Topic, rt.NumPartitions, rt.ReplicationFactor = name, partitions, rf
		req.Topics = append(req.Topics, rt)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			t.Fatalf("CreateTopics %q: %v", name, err)
		}
		if len(resp.Topics) != 1 {
			t.Fatalf("CreateTopics %q: %d topics in response", name, len(resp.Topics))
		}
		msg := ""
		if m := resp.Topics[0].ErrorMessage; m != nil {
			msg = *m
		}
		return resp.Topics[0].ErrorCode, msg
	}
	wantCode := func(t *testing.T, what string, got int16, msg string, want *kerr.Error) {
		t.Helper()
		if got != want.Code {
			t.Errorf("%s: error code %d (%v, %q), want %d (%s)", what, got, kerr.ErrorForCode(got), msg, want.Code, want.Message)
		}
	}

	t.Run("CreateDuplicate", func(t *testing.T) {
		ctx := testCtx(t, 15*time.Second)
		if _, err := adm.CreateTopic(ctx, 2, 1, nil, "dup"); err != nil {
			t.Fatalf("first create: %v", err)
		}
		resp, err := adm.CreateTopic(ctx, 2, 1, nil, "dup")
		if !errors.Is(err, kerr.TopicAlreadyExists) {
			t.Errorf("second create: err %v (%q), want TOPIC_ALREADY_EXISTS", err, resp.ErrMessage)
		}
		// Also with a different partition count: never merged.
		code, msg := rawCreate(t, "dup", 5, 1, false)
		wantCode(t, "create dup with 5 partitions", code, msg, kerr.TopicAlreadyExists)
	})

	t.Run("CreateInvalidNames", func(t *testing.T) {
		for _, name := range []string{"bad/name", "", strings.Repeat("a", 250), ".", ".."} {
			code, msg := rawCreate(t, name, 1, 1, false)
			wantCode(t, "create "+abbrev(name), code, msg, kerr.InvalidTopicException)
		}
		// 249 characters is the longest valid name.
		long := strings.Repeat("b", 249)
		if code, msg := rawCreate(t, long, 1, 1, false); code != 0 {
			t.Errorf("create 249-char name: error %d (%v, %q), want success", code, kerr.ErrorForCode(code), msg)
		}
		if names := topicNames(t); names["bad/name"] || names[""] || names[strings.Repeat("a", 250)] {
			t.Errorf("invalid topic was created: %v", names)
		}
	})

	t.Run("CreateInvalidPartitions", func(t *testing.T) {
		code, msg := rawCreate(t, "zero-parts", 0, 1, false)
		wantCode(t, "partitions=0", code, msg, kerr.InvalidPartitions)
		code, msg = rawCreate(t, "neg-parts", -5, 1, false)
		wantCode(t, "partitions=-5", code, msg, kerr.InvalidPartitions)
		if names := topicNames(t); names["zero-parts"] || names["neg-parts"] {
			t.Errorf("topic with invalid partitions was created")
		}
	})

	t.Run("CreateInvalidReplicationFactor", func(t *testing.T) {
		code, msg := rawCreate(t, "rf3", 1, 3, false)
		wantCode(t, "replication factor 3", code, msg, kerr.InvalidReplicationFactor)
		if topicNames(t)["rf3"] {
			t.Errorf("topic with replication factor 3 was created on a single node")
		}
	})

	t.Run("ValidateOnly", func(t *testing.T) {
		ctx := testCtx(t, 15*time.Second)
		resp, err := adm.ValidateCreateTopics(ctx, 4, 1, map[string]*string{"retention.ms": kadm.StringPtr("60000")}, "validate-only")
		if err != nil {
			t.Fatalf("validate: %v", err)
		}
		if r := resp["validate-only"]; r.Err != nil {
			t.Errorf("validate-only create: %v (%s)", r.Err, r.ErrMessage)
		} else if r.NumPartitions != 4 {
			t.Errorf("validate-only create reports %d partitions, want 4", r.NumPartitions)
		}
		if topicNames(t)["validate-only"] {
			t.Errorf("validate-only created the topic")
		}
		// Validation still catches errors.
		code, msg := rawCreate(t, "bad/validate", 1, 1, true)
		wantCode(t, "validate-only invalid name", code, msg, kerr.InvalidTopicException)
		code, msg = rawCreate(t, "dup", 1, 1, true)
		wantCode(t, "validate-only existing topic", code, msg, kerr.TopicAlreadyExists)
	})

	t.Run("DeleteTopics", func(t *testing.T) {
		ctx := testCtx(t, 15*time.Second)
		createTopic(t, adm, "to-delete", 3, nil)
		if _, err := cl.ProduceSync(ctx, &kgo.Record{Topic: "to-delete", Value: []byte("x")}).First(); err != nil {
			t.Fatalf("produce: %v", err)
		}
		resp, err := adm.DeleteTopic(ctx, "to-delete")
		if err != nil || resp.Err != nil {
			t.Fatalf("delete: %v / %v (%s)", err, resp.Err, resp.ErrMessage)
		}
		if topicNames(t)["to-delete"] {
			t.Errorf("deleted topic still listed")
		}
		resp, err = adm.DeleteTopic(ctx, "never-existed")
		if !errors.Is(err, kerr.UnknownTopicOrPartition) {
			t.Errorf("delete unknown: err %v (resp err %v), want UNKNOWN_TOPIC_OR_PARTITION", err, resp.Err)
		}
		// The name can be reused, and the new topic starts empty.
		createTopic(t, adm, "to-delete", 1, nil)
		if ends := endOffsets(t, newAdmin(t, b.Addr), "to-delete"); len(ends) != 1 || ends[0] != 0 {
			t.Errorf("recreated topic end offsets %v, want {0:0}", ends)
		}
	})

	t.Run("DescribeConfigs", func(t *testing.T) {
		ctx := testCtx(t, 15*time.Second)
		createTopic(t, adm, "with-retention", 1, map[string]*string{"retention.ms": kadm.StringPtr("12345")})
		rcs, err := adm.DescribeTopicConfigs(ctx, "with-retention")
		if err != nil {
			t.Fatalf("describe topic configs: %v", err)
		}
		rc, err := rcs.On("with-retention", nil)
		if err != nil || rc.Err != nil {
			t.Fatalf("describe with-retention: %v / %v", err, rc.Err)
		}
		found := false
		for _, c := range rc.Configs {
			switch c.Key {
			case "retention.ms":
				found = true
				if c.MaybeValue() != "12345" {
					t.Errorf("retention.ms = %q, want 12345", c.MaybeValue())
				}
				if c.Source != kmsg.ConfigSourceDynamicTopicConfig {
					t.Errorf("retention.ms source = %v, want DYNAMIC_TOPIC_CONFIG", c.Source)
				}
			case "cleanup.policy":
				if c.MaybeValue() != "delete" {
					t.Errorf("cleanup.policy = %q, want default delete", c.MaybeValue())
				}
				if c.Source == kmsg.ConfigSourceDynamicTopicConfig {
					t.Errorf("cleanup.policy was not set but has source DYNAMIC_TOPIC_CONFIG")
				}
			}
		}
		if !found {
			t.Errorf("retention.ms missing from topic configs: %+v", rc.Configs)
		}

		// No broker named: the cluster-wide dynamic defaults, none yet.
		brcs, err := adm.DescribeBrokerConfigs(ctx)
		if err != nil {
			t.Fatalf("describe broker configs: %v", err)
		}
		if len(brcs) != 1 || brcs[0].Err != nil || len(brcs[0].Configs) != 0 {
			t.Errorf("cluster-default broker configs: %+v", brcs)
		}
		md, err := adm.BrokerMetadata(ctx)
		if err != nil || len(md.Brokers) != 1 {
			t.Fatalf("broker metadata: %v %+v", err, md)
		}
		brcs, err = adm.DescribeBrokerConfigs(ctx, md.Brokers[0].NodeID)
		if err != nil {
			t.Fatalf("describe broker %d configs: %v", md.Brokers[0].NodeID, err)
		}
		if len(brcs) != 1 || brcs[0].Err != nil || len(brcs[0].Configs) == 0 {
			t.Errorf("broker %d configs: %+v", md.Brokers[0].NodeID, brcs)
		}

		rcs, err = adm.DescribeTopicConfigs(ctx, "no-such-topic")
		if err == nil {
			if rc, _ := rcs.On("no-such-topic", nil); !errors.Is(rc.Err, kerr.UnknownTopicOrPartition) {
				t.Errorf("describe unknown topic: %v, want UNKNOWN_TOPIC_OR_PARTITION", rc.Err)
			}
		}
	})

	t.Run("ListOffsets", func(t *testing.T) {
		ctx := testCtx(t, 30*time.Second)
		const topic = "timestamps"
		createTopic(t, adm, topic, 2, nil)
		// Timestamps 1000..10000, then one older record at 5000, so the
		// largest timestamp is not at the end of the log. Partition 0 gets
		// one batch per record, partition 1 one batch holding them all.
		// Max timestamp (-3, KIP-734) must name the record (offset 9) in
		// both cases, as Kafka does since KAFKA-16310 (3.7.1/3.8).
		var stamps []int64
		for i := int64(1); i <= 10; i++ {
			stamps = append(stamps, i*1000)
		}
		stamps = append(stamps, 5000)
		sep := manualPartitionClient(t, b.Addr)
		for _, ts := range stamps {
			r := &kgo.Record{Topic: topic, Partition: 0, Value: []byte("x"), Timestamp: time.UnixMilli(ts)}
			if _, err := sep.ProduceSync(ctx, r).First(); err != nil {
				t.Fatalf("produce ts %d: %v", ts, err)
			}
		}
		one := manualPartitionClient(t, b.Addr, kgo.ManualFlushing())
		var promises []chan error
		for _, ts := range stamps {
			ch := make(chan error, 1)
			promises = append(promises, ch)
			one.Produce(ctx, &kgo.Record{Topic: topic, Partition: 1, Value: []byte("x"), Timestamp: time.UnixMilli(ts)},
				func(_ *kgo.Record, err error) { ch <- err })
		}
		if err := one.Flush(ctx); err != nil {
			t.Fatalf("flush: %v", err)
		}
		for _, ch := range promises {
			if err := <-ch; err != nil {
				t.Fatalf("produce into one batch: %v", err)
			}
		}
		recs := consumeAll(t, b.Addr, topic, 2*len(stamps), 15*time.Second)
		for _, r := range recs {
			if want := stamps[r.Offset]; r.Timestamp.UnixMilli() != want {
				t.Errorf("record %d/%d has timestamp %d, want %d", r.Partition, r.Offset, r.Timestamp.UnixMilli(), want)
			}
		}

		check := func(what string, lo kadm.ListedOffsets, err error, p int32, wantOff, wantTS int64) {
			t.Helper()
			if err != nil {
				t.Errorf("%s: %v", what, err)
				return
			}
			o, ok := lo.Lookup(topic, p)
			if !ok || o.Err != nil {
				t.Errorf("%s partition %d: missing or error %v", what, p, o.Err)
				return
			}
			if o.Offset != wantOff || (wantTS != -2 && o.Timestamp != wantTS) {
				t.Errorf("%s partition %d: offset %d timestamp %d, want offset %d timestamp %d", what, p, o.Offset, o.Timestamp, wantOff, wantTS)
			}
		}
		n := int64(len(stamps))
		for _, p := range []int32{0, 1} {
			lo, err := adm.ListStartOffsets(ctx, topic)
			check("earliest", lo, err, p, 0, -2)
			lo, err = adm.ListEndOffsets(ctx, topic)
			check("latest", lo, err, p, n, -2)
			lo, err = adm.ListOffsetsAfterMilli(ctx, 2500, topic)
			check("timestamp 2500", lo, err, p, 2, 3000)
			lo, err = adm.ListOffsetsAfterMilli(ctx, 1000, topic)
			check("timestamp 1000", lo, err, p, 0, 1000)
			lo, err = adm.ListOffsetsAfterMilli(ctx, 0, topic)
			check("timestamp 0", lo, err, p, 0, 1000)
			lo, err = adm.ListOffsetsAfterMilli(ctx, 9001, topic)
			check("timestamp 9001", lo, err, p, 9, 10000)
			lo, err = adm.ListMaxTimestampOffsets(ctx, topic)
			check("max timestamp", lo, err, p, 9, 10000)
		}
		// A timestamp after every record: Kafka answers offset -1, which
		// kadm turns into the end offset.
		req := kmsg.NewPtrListOffsetsRequest()
		req.Version = 7
		rt := kmsg.NewListOffsetsRequestTopic()
		rt.Topic = topic
		for _, ts := range []int64{20000, -3} {
			rp := kmsg.NewListOffsetsRequestTopicPartition()
			rp.Partition, rp.Timestamp = 0, ts
			rt.Partitions = []kmsg.ListOffsetsRequestTopicPartition{rp}
			req.Topics = []kmsg.ListOffsetsRequestTopic{rt}
			resp, err := req.RequestWith(ctx, cl)
			if err != nil {
				t.Fatalf("ListOffsets v7 ts %d: %v", ts, err)
			}
			sp := resp.Topics[0].Partitions[0]
			switch ts {
			case 20000:
				if sp.ErrorCode != 0 || sp.Offset != -1 || sp.Timestamp != -1 {
					t.Errorf("raw ListOffsets ts 20000: error %d offset %d timestamp %d, want 0 -1 -1", sp.ErrorCode, sp.Offset, sp.Timestamp)
				}
			case -3:
				if sp.ErrorCode != 0 || sp.Offset != 9 || sp.Timestamp != 10000 {
					t.Errorf("raw ListOffsets v7 max timestamp: error %d offset %d timestamp %d, want 0 9 10000", sp.ErrorCode, sp.Offset, sp.Timestamp)
				}
			}
		}
	})
}

// manualPartitionClient is a producer that honours Record.Partition.
func manualPartitionClient(t testing.TB, addr string, opts ...kgo.Opt) *kgo.Client {
	return newClient(t, addr, append([]kgo.Opt{kgo.RecordPartitioner(kgo.ManualPartitioner())}, opts...)...)
}

func abbrev(s string) string {
	if len(s) > 20 {
		return s[:10] + "...(" + strconv.Itoa(len(s)) + " chars)"
	}
	return "\"" + s + "\""
}
