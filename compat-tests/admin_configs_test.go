package compattests

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Configs that change at run time: IncrementalAlterConfigs and AlterConfigs
// through kadm, sarama's ClusterAdmin and kafka-go, DescribeConfigs sources
// and synonyms, the error paths, and that a change takes effect (retention
// deletes, min.insync.replicas refuses writes, num.partitions shapes new
// topics) and survives a restart.

// alterOne runs one incremental (or, with legacy, whole-set) change on one
// resource and returns its error.
func alterOne(t *testing.T, ctx context.Context, adm *kadm.Client, validate, legacy bool, res string, broker bool, cfgs ...kadm.AlterConfig) error {
	t.Helper()
	var rs kadm.AlterConfigsResponses
	var err error
	switch {
	case broker:
		var ids []int32
		if res != "" {
			id, _ := strconv.Atoi(res)
			ids = []int32{int32(id)}
		}
		switch {
		case legacy:
			rs, err = adm.AlterBrokerConfigsState(ctx, cfgs, ids...)
		case validate:
			rs, err = adm.ValidateAlterBrokerConfigs(ctx, cfgs, ids...)
		default:
			rs, err = adm.AlterBrokerConfigs(ctx, cfgs, ids...)
		}
	case legacy && validate:
		rs, err = adm.ValidateAlterTopicConfigsState(ctx, cfgs, res)
	case legacy:
		rs, err = adm.AlterTopicConfigsState(ctx, cfgs, res)
	case validate:
		rs, err = adm.ValidateAlterTopicConfigs(ctx, cfgs, res)
	default:
		rs, err = adm.AlterTopicConfigs(ctx, cfgs, res)
	}
	if err != nil {
		t.Fatalf("alter %s: %v", res, err)
	}
	r, err := rs.On(res, nil)
	if err != nil {
		t.Fatalf("alter %s: no answer for it: %v", res, err)
	}
	if r.Err != nil && r.ErrMessage != "" {
		t.Logf("alter %s: %v: %s", res, r.Err, r.ErrMessage)
	}
	return r.Err
}

func cfgSet(k, v string) kadm.AlterConfig {
	return kadm.AlterConfig{Op: kadm.SetConfig, Name: k, Value: kadm.StringPtr(v)}
}
func cfgDel(k string) kadm.AlterConfig { return kadm.AlterConfig{Op: kadm.DeleteConfig, Name: k} }

// describeKey is one key of a topic's or broker's configs ("" resource
// name: the cluster-wide defaults).
func describeKey(t *testing.T, ctx context.Context, adm *kadm.Client, broker bool, res, key string) (kadm.Config, bool) {
	t.Helper()
	var rcs kadm.ResourceConfigs
	var err error
	if broker {
		var ids []int32
		if res != "" {
			id, _ := strconv.Atoi(res)
			ids = []int32{int32(id)}
		}
		rcs, err = adm.DescribeBrokerConfigs(ctx, ids...)
	} else {
		rcs, err = adm.DescribeTopicConfigs(ctx, res)
	}
	if err != nil {
		t.Fatalf("describe %s: %v", res, err)
	}
	rc, err := rcs.On(res, nil)
	if err != nil || rc.Err != nil {
		t.Fatalf("describe %s: %v / %v", res, err, rc.Err)
	}
	for _, c := range rc.Configs {
		if c.Key == key {
			return c, true
		}
	}
	return kadm.Config{}, false
}

func wantKey(t *testing.T, ctx context.Context, adm *kadm.Client, broker bool, res, key, value string, src kmsg.ConfigSource) kadm.Config {
	t.Helper()
	c, ok := describeKey(t, ctx, adm, broker, res, key)
	if !ok {
		t.Fatalf("%s: %s not described", res, key)
	}
	if c.MaybeValue() != value || c.Source != src {
		t.Errorf("%s: %s = %q (%v), want %q (%v)", res, key, c.MaybeValue(), c.Source, value, src)
	}
	return c
}

func TestAdminConfigsSingleNode(t *testing.T) {
	dir := t.TempDir()
	b := startBroker(t, dir, "log.retention.check.interval.ms=300", "log.retention.hours=100")
	adm := newAdmin(t, b.Addr)
	ctx := testCtx(t, 90*time.Second)
	const topic = "live-configs"
	createTopic(t, adm, topic, 1, nil)

	t.Run("Incremental", func(t *testing.T) {
		if err := alterOne(t, ctx, adm, false, false, topic, false, cfgSet("retention.ms", "86400000")); err != nil {
			t.Fatalf("set retention.ms: %v", err)
		}
		c := wantKey(t, ctx, adm, false, topic, "retention.ms", "86400000", kmsg.ConfigSourceDynamicTopicConfig)
		// Synonyms: the override, then the broker keys it falls back to
		// (static log.retention.hours here), then the default.
		var srcs []string
		for _, s := range c.Synonyms {
			srcs = append(srcs, s.Key+"="+deref(s.Value)+"/"+s.Source.String())
		}
		want := []string{"retention.ms=86400000/DYNAMIC_TOPIC_CONFIG", "log.retention.hours=100/STATIC_BROKER_CONFIG", "log.retention.ms=604800000/DEFAULT_CONFIG"}
		if strings.Join(srcs, " ") != strings.Join(want, " ") {
			t.Errorf("retention.ms synonyms %v, want %v", srcs, want)
		}

		if err := alterOne(t, ctx, adm, false, false, topic, false, kadm.AlterConfig{Op: kadm.AppendConfig, Name: "cleanup.policy", Value: kadm.StringPtr("compact")}); err != nil {
			t.Fatalf("append cleanup.policy: %v", err)
		}
		wantKey(t, ctx, adm, false, topic, "cleanup.policy", "delete,compact", kmsg.ConfigSourceDynamicTopicConfig)
		if err := alterOne(t, ctx, adm, false, false, topic, false, kadm.AlterConfig{Op: kadm.SubtractConfig, Name: "cleanup.policy", Value: kadm.StringPtr("compact")}); err != nil {
			t.Fatalf("subtract cleanup.policy: %v", err)
		}
		wantKey(t, ctx, adm, false, topic, "cleanup.policy", "delete", kmsg.ConfigSourceDynamicTopicConfig)
		if err := alterOne(t, ctx, adm, false, false, topic, false, cfgDel("cleanup.policy"), cfgDel("retention.ms")); err != nil {
			t.Fatalf("delete: %v", err)
		}
		// Back to the broker's: 100 hours, from the static config.
		wantKey(t, ctx, adm, false, topic, "retention.ms", "360000000", kmsg.ConfigSourceStaticBrokerConfig)
		wantKey(t, ctx, adm, false, topic, "cleanup.policy", "delete", kmsg.ConfigSourceDefaultConfig)
	})

	t.Run("Errors", func(t *testing.T) {
		cases := []struct {
			name   string
			res    string
			broker bool
			cfg    kadm.AlterConfig
			want   error
		}{
			{"unknown topic key", topic, false, cfgSet("retention.msec", "1"), kerr.InvalidConfig},
			{"invalid value", topic, false, cfgSet("retention.ms", "soon"), kerr.InvalidConfig},
			{"append to a non-list", topic, false, kadm.AlterConfig{Op: kadm.AppendConfig, Name: "retention.ms", Value: kadm.StringPtr("1")}, kerr.InvalidConfig},
			{"unsafe value", topic, false, cfgSet("unclean.leader.election.enable", "true"), kerr.PolicyViolation},
			{"unknown topic", "no-such-topic", false, cfgSet("retention.ms", "1"), kerr.UnknownTopicOrPartition},
			{"read-only broker key", "1", true, cfgSet("log.dirs", "/elsewhere"), kerr.InvalidConfig},
			{"read-only default", "", true, cfgSet("broker.session.timeout.ms", "1000"), kerr.InvalidConfig},
			{"unknown broker key", "", true, cfgSet("log.retention.hour", "1"), kerr.InvalidConfig},
			{"invalid broker value", "", true, cfgSet("num.partitions", "0"), kerr.InvalidConfig},
		}
		for _, tc := range cases {
			if err := alterOne(t, ctx, adm, false, false, tc.res, tc.broker, tc.cfg); !errors.Is(err, tc.want) {
				t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
			}
		}
		// validateOnly: a valid change is accepted and not made; an
		// invalid one is refused all the same.
		if err := alterOne(t, ctx, adm, true, false, topic, false, cfgSet("retention.ms", "1234")); err != nil {
			t.Errorf("validate a valid change: %v", err)
		}
		if err := alterOne(t, ctx, adm, true, false, topic, false, cfgSet("retention.ms", "x")); !errors.Is(err, kerr.InvalidConfig) {
			t.Errorf("validate an invalid change: %v", err)
		}
		if err := alterOne(t, ctx, adm, true, true, topic, false, cfgSet("segment.bytes", "4096")); err != nil {
			t.Errorf("validate a legacy change: %v", err)
		}
		wantKey(t, ctx, adm, false, topic, "retention.ms", "360000000", kmsg.ConfigSourceStaticBrokerConfig)
		wantKey(t, ctx, adm, false, topic, "segment.bytes", "1073741824", kmsg.ConfigSourceDefaultConfig)
	})

	t.Run("Legacy", func(t *testing.T) {
		if err := alterOne(t, ctx, adm, false, false, topic, false, cfgSet("retention.bytes", "1000000")); err != nil {
			t.Fatal(err)
		}
		// AlterConfigs replaces the whole set: retention.bytes goes.
		if err := alterOne(t, ctx, adm, false, true, topic, false, cfgSet("segment.bytes", "1048576")); err != nil {
			t.Fatalf("legacy alter: %v", err)
		}
		wantKey(t, ctx, adm, false, topic, "segment.bytes", "1048576", kmsg.ConfigSourceDynamicTopicConfig)
		wantKey(t, ctx, adm, false, topic, "retention.bytes", "-1", kmsg.ConfigSourceDefaultConfig)
		if err := alterOne(t, ctx, adm, false, true, topic, false); err != nil {
			t.Fatalf("legacy clear: %v", err)
		}
		wantKey(t, ctx, adm, false, topic, "segment.bytes", "1073741824", kmsg.ConfigSourceDefaultConfig)
	})

	t.Run("BrokerLayers", func(t *testing.T) {
		// The cluster default, then this broker's own, over the static.
		if err := alterOne(t, ctx, adm, false, false, "", true, cfgSet("log.retention.ms", "7200000")); err != nil {
			t.Fatalf("cluster default: %v", err)
		}
		wantKey(t, ctx, adm, true, "", "log.retention.ms", "7200000", kmsg.ConfigSourceDynamicDefaultBrokerConfig)
		wantKey(t, ctx, adm, true, "1", "log.retention.ms", "7200000", kmsg.ConfigSourceDynamicDefaultBrokerConfig)
		wantKey(t, ctx, adm, false, topic, "retention.ms", "7200000", kmsg.ConfigSourceDynamicDefaultBrokerConfig)
		if err := alterOne(t, ctx, adm, false, false, "1", true, cfgSet("log.retention.ms", "3600000")); err != nil {
			t.Fatalf("broker 1: %v", err)
		}
		c := wantKey(t, ctx, adm, true, "1", "log.retention.ms", "3600000", kmsg.ConfigSourceDynamicBrokerConfig)
		if len(c.Synonyms) < 3 || c.Synonyms[0].Source != kmsg.ConfigSourceDynamicBrokerConfig || c.Synonyms[1].Source != kmsg.ConfigSourceDynamicDefaultBrokerConfig {
			t.Errorf("log.retention.ms synonyms %+v", c.Synonyms)
		}
		wantKey(t, ctx, adm, false, topic, "retention.ms", "3600000", kmsg.ConfigSourceDynamicBrokerConfig)
		// The "" resource lists only the dynamic defaults, as Kafka's.
		// A Kafka sizing key Fjord has no use for is stored, not refused,
		// so tools that tune it do not fail.
		if err := alterOne(t, ctx, adm, false, false, "", true, cfgSet("log.cleaner.threads", "2")); err != nil {
			t.Errorf("log.cleaner.threads: %v", err)
		}
		wantKey(t, ctx, adm, true, "1", "log.cleaner.threads", "2", kmsg.ConfigSourceDynamicDefaultBrokerConfig)
		if err := alterOne(t, ctx, adm, false, false, "", true, cfgSet("log.cleaner.threads", "two")); !errors.Is(err, kerr.InvalidConfig) {
			t.Errorf("log.cleaner.threads=two: %v, want INVALID_CONFIG", err)
		}
		if _, ok := describeKey(t, ctx, adm, true, "", "log.dirs"); ok {
			t.Errorf("the cluster-default resource lists a static key")
		}
		if c, _ := describeKey(t, ctx, adm, true, "1", "log.dirs"); c.Source != kmsg.ConfigSourceStaticBrokerConfig && c.Source != kmsg.ConfigSourceDefaultConfig {
			t.Errorf("log.dirs source %v", c.Source)
		}
	})

	t.Run("BrokerLogger", func(t *testing.T) {
		cl := newClient(t, b.Addr)
		alter := func(level string) int16 {
			req := kmsg.NewPtrIncrementalAlterConfigsRequest()
			rr := kmsg.NewIncrementalAlterConfigsRequestResource()
			rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeBrokerLogger, "1"
			c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
			c.Name, c.Op, c.Value = "root", kmsg.IncrementalAlterConfigOpSet, kmsg.StringPtr(level)
			rr.Configs = append(rr.Configs, c)
			req.Resources = append(req.Resources, rr)
			resp, err := req.RequestWith(ctx, cl)
			if err != nil || len(resp.Resources) != 1 {
				t.Fatalf("alter logger: %v", err)
			}
			return resp.Resources[0].ErrorCode
		}
		describe := func() string {
			req := kmsg.NewPtrDescribeConfigsRequest()
			rr := kmsg.NewDescribeConfigsRequestResource()
			rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeBrokerLogger, "1"
			req.Resources = append(req.Resources, rr)
			resp, err := req.RequestWith(ctx, cl)
			if err != nil || len(resp.Resources) != 1 || len(resp.Resources[0].Configs) == 0 {
				t.Fatalf("describe loggers: %v %+v", err, resp)
			}
			return *resp.Resources[0].Configs[0].Value
		}
		if got := describe(); got != "INFO" {
			t.Errorf("root logger %s, want INFO", got)
		}
		if code := alter("DEBUG"); code != 0 {
			t.Fatalf("root=DEBUG: code %d", code)
		}
		if got := describe(); got != "DEBUG" {
			t.Errorf("root logger %s, want DEBUG", got)
		}
		if code := alter("LOUD"); code != kerr.InvalidConfig.Code {
			t.Errorf("root=LOUD: code %d, want INVALID_CONFIG", code)
		}
		if code := alter("INFO"); code != 0 {
			t.Fatalf("root=INFO: code %d", code)
		}
	})

	t.Run("Effect", func(t *testing.T) {
		// Retention changed on a live topic deletes what it no longer
		// keeps: small segments, then a short retention.
		const rt = "retained"
		createTopic(t, adm, rt, 1, map[string]*string{"segment.bytes": kadm.StringPtr("1024")})
		cl := newClient(t, b.Addr, kgo.DefaultProduceTopic(rt))
		for i := range 50 {
			if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte(strings.Repeat("x", 200) + strconv.Itoa(i))}).FirstErr(); err != nil {
				t.Fatalf("produce: %v", err)
			}
		}
		start := func() int64 {
			os, err := adm.ListStartOffsets(ctx, rt)
			if err != nil {
				t.Fatalf("start offsets: %v", err)
			}
			o, _ := os.Lookup(rt, 0)
			return o.Offset
		}
		if s := start(); s != 0 {
			t.Fatalf("start offset %d before the change", s)
		}
		if err := alterOne(t, ctx, adm, false, false, rt, false, cfgSet("retention.ms", "1")); err != nil {
			t.Fatalf("retention.ms=1: %v", err)
		}
		deadline := time.Now().Add(20 * time.Second)
		for start() == 0 && time.Now().Before(deadline) {
			time.Sleep(200 * time.Millisecond)
		}
		if s := start(); s == 0 {
			t.Errorf("retention.ms=1 set on a live topic deleted nothing in 20 s")
		}
	})

	t.Run("Restart", func(t *testing.T) {
		if err := alterOne(t, ctx, adm, false, false, topic, false, cfgSet("max.message.bytes", "2000000")); err != nil {
			t.Fatal(err)
		}
		b.Stop()
		b.Restart()
		adm := newAdmin(t, b.Addr)
		ctx := testCtx(t, 30*time.Second)
		wantKey(t, ctx, adm, false, topic, "max.message.bytes", "2000000", kmsg.ConfigSourceDynamicTopicConfig)
		wantKey(t, ctx, adm, true, "1", "log.retention.ms", "3600000", kmsg.ConfigSourceDynamicBrokerConfig)
	})
}

// TestAdminConfigsCluster: three nodes; a change made through one node is
// applied by all, min.insync.replicas takes effect on the leader at once,
// and num.partitions as a dynamic default shapes the next topic.
func TestAdminConfigsCluster(t *testing.T) {
	c := startCluster(t, 3)
	adm := c.Admin(1)
	ctx := testCtx(t, 90*time.Second)
	const topic = "cluster-configs"
	rf3 := func(name string, partitions int32) {
		t.Helper()
		resp, err := adm.CreateTopic(ctx, partitions, 3, nil, name)
		if err == nil {
			err = resp.Err
		}
		if err != nil {
			t.Fatalf("create %s: %v", name, err)
		}
	}
	rf3(topic, 1)

	if err := alterOne(t, ctx, adm, false, false, topic, false, cfgSet("min.insync.replicas", "4")); err != nil {
		t.Fatalf("min.insync.replicas=4: %v", err)
	}
	for _, id := range c.IDs() {
		id := id
		// A node may not have applied the topic's creation yet: retry.
		c.Await(t, 15*time.Second, fmt.Sprintf("node %d shows the override", id), func() (bool, string) {
			rcs, err := c.Admin(id).DescribeTopicConfigs(ctx, topic)
			if err != nil {
				return false, err.Error()
			}
			rc, err := rcs.On(topic, nil)
			if err == nil {
				err = rc.Err
			}
			if err != nil {
				return false, err.Error()
			}
			for _, cfg := range rc.Configs {
				if cfg.Key == "min.insync.replicas" {
					return cfg.MaybeValue() == "4", cfg.MaybeValue()
				}
			}
			return false, "not described"
		})
	}
	// One retry only, so the broker's answer is what comes back.
	cl := newClient(t, c.Addr(1), kgo.RecordRetries(1), kgo.DisableIdempotentWrite(), kgo.RequiredAcks(kgo.AllISRAcks()))
	rec := &kgo.Record{Topic: topic, Value: []byte("v")}
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	err := cl.ProduceSync(pctx, rec).FirstErr()
	cancel()
	if !errors.Is(err, kerr.NotEnoughReplicas) {
		t.Errorf("acks=all with min.insync.replicas 4 > RF 3: %v, want NOT_ENOUGH_REPLICAS", err)
	}
	if err := alterOne(t, ctx, adm, false, false, topic, false, cfgDel("min.insync.replicas")); err != nil {
		t.Fatal(err)
	}
	if err := newClient(t, c.Addr(2), kgo.DefaultProduceTopic(topic)).ProduceSync(ctx, &kgo.Record{Value: []byte("v")}).FirstErr(); err != nil {
		t.Errorf("produce after the override went: %v", err)
	}

	// num.partitions, a dynamic cluster default, read by the controller.
	if err := alterOne(t, ctx, adm, false, false, "", true, cfgSet("num.partitions", "5")); err != nil {
		t.Fatalf("num.partitions=5: %v", err)
	}
	resp, err := c.Admin(2).CreateTopic(ctx, -1, -1, nil, "five")
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		t.Fatalf("create five: %v", err)
	}
	if resp.NumPartitions != 5 {
		t.Errorf("a topic created without a count has %d partitions, want 5 (the dynamic num.partitions)", resp.NumPartitions)
	}
	// A broker's own config goes to that broker, and only it has it.
	if err := alterOne(t, ctx, adm, false, false, "2", true, cfgSet("log.cleaner.backoff.ms", "1234")); err != nil {
		t.Fatalf("broker 2: %v", err)
	}
	// DescribeConfigs of a broker goes to that broker (c.Admin(id) is
	// pinned to node id). Node 1 forwarded the change and answered once its
	// own image showed it; node 2 applies the same record on its own time.
	c.Await(t, 10*time.Second, "broker 2 describes its dynamic log.cleaner.backoff.ms", func() (bool, string) {
		cf, ok := describeKey(t, ctx, c.Admin(2), true, "2", "log.cleaner.backoff.ms")
		return ok && cf.MaybeValue() == "1234" && cf.Source == kmsg.ConfigSourceDynamicBrokerConfig,
			fmt.Sprintf("%q (%v)", cf.MaybeValue(), cf.Source)
	})
	wantKey(t, ctx, c.Admin(3), true, "3", "log.cleaner.backoff.ms", "15000", kmsg.ConfigSourceDefaultConfig)
	if _, err := c.Admin(3).DescribeBrokerConfigs(ctx, 2); err == nil {
		rcs, _ := c.Admin(3).DescribeBrokerConfigs(ctx, 2)
		if rc, _ := rcs.On("2", nil); !errors.Is(rc.Err, kerr.InvalidRequest) {
			t.Errorf("broker 2's configs asked of node 3: %v, want INVALID_REQUEST", rc.Err)
		}
	}
}

// TestAdminConfigsSarama drives the same APIs with sarama's ClusterAdmin.
func TestAdminConfigsSarama(t *testing.T) {
	b := startBroker(t, t.TempDir())
	const topic = "sarama-configs"
	createTopic(t, newAdmin(t, b.Addr), topic, 1, nil)
	cfg := sarama.NewConfig()
	cfg.Version = sarama.V3_6_0_0
	ca, err := sarama.NewClusterAdmin([]string{b.Addr}, cfg)
	if err != nil {
		t.Fatalf("cluster admin: %v", err)
	}
	defer ca.Close()

	v := "3600000"
	if err := ca.IncrementalAlterConfig(sarama.TopicResource, topic, map[string]sarama.IncrementalAlterConfigsEntry{
		"retention.ms": {Operation: sarama.IncrementalAlterConfigsOperationSet, Value: &v},
	}, false); err != nil {
		t.Fatalf("IncrementalAlterConfig: %v", err)
	}
	entries, err := ca.DescribeConfig(sarama.ConfigResource{Type: sarama.TopicResource, Name: topic, ConfigNames: []string{"retention.ms"}})
	if err != nil || len(entries) != 1 || entries[0].Value != v || entries[0].Source != sarama.SourceTopic {
		t.Errorf("DescribeConfig: %v %+v", err, entries)
	}
	seg := "2097152"
	if err := ca.AlterConfig(sarama.TopicResource, topic, map[string]*string{"segment.bytes": &seg}, false); err != nil {
		t.Fatalf("AlterConfig: %v", err)
	}
	entries, err = ca.DescribeConfig(sarama.ConfigResource{Type: sarama.TopicResource, Name: topic})
	if err != nil {
		t.Fatalf("DescribeConfig: %v", err)
	}
	for _, e := range entries {
		switch e.Name {
		case "segment.bytes":
			if e.Value != seg || e.Source != sarama.SourceTopic {
				t.Errorf("segment.bytes %+v", e)
			}
		case "retention.ms": // AlterConfig replaced the whole set
			if e.Source == sarama.SourceTopic {
				t.Errorf("retention.ms still overridden after AlterConfig: %+v", e)
			}
		}
	}
	bad := "x"
	err = ca.IncrementalAlterConfig(sarama.TopicResource, topic, map[string]sarama.IncrementalAlterConfigsEntry{
		"retention.ms": {Operation: sarama.IncrementalAlterConfigsOperationSet, Value: &bad},
	}, false)
	if !errors.Is(err, sarama.ErrInvalidConfig) {
		t.Errorf("invalid value: %v, want INVALID_CONFIG", err)
	}
	dirs := "/x"
	err = ca.IncrementalAlterConfig(sarama.BrokerResource, "1", map[string]sarama.IncrementalAlterConfigsEntry{
		"log.dirs": {Operation: sarama.IncrementalAlterConfigsOperationSet, Value: &dirs},
	}, false)
	if !errors.Is(err, sarama.ErrInvalidConfig) {
		t.Errorf("read-only broker key: %v, want INVALID_CONFIG", err)
	}
	ret := "7200000"
	if err := ca.IncrementalAlterConfig(sarama.BrokerResource, "1", map[string]sarama.IncrementalAlterConfigsEntry{
		"log.retention.ms": {Operation: sarama.IncrementalAlterConfigsOperationSet, Value: &ret},
	}, false); err != nil {
		t.Fatalf("broker config: %v", err)
	}
	entries, err = ca.DescribeConfig(sarama.ConfigResource{Type: sarama.BrokerResource, Name: "1", ConfigNames: []string{"log.retention.ms"}})
	if err != nil || len(entries) != 1 || entries[0].Value != ret || entries[0].Source != sarama.SourceDynamicBroker {
		t.Errorf("broker DescribeConfig: %v %+v", err, entries)
	}
}

// TestAdminConfigsKafkaGo drives them with kafka-go's Client.
func TestAdminConfigsKafkaGo(t *testing.T) {
	b := startBroker(t, t.TempDir())
	const topic = "kafkago-configs"
	createTopic(t, newAdmin(t, b.Addr), topic, 1, nil)
	cl := &kafka.Client{Addr: kafka.TCP(b.Addr), Timeout: 10 * time.Second}
	ctx := testCtx(t, 30*time.Second)

	ir, err := cl.IncrementalAlterConfigs(ctx, &kafka.IncrementalAlterConfigsRequest{
		Resources: []kafka.IncrementalAlterConfigsRequestResource{{
			ResourceType: kafka.ResourceTypeTopic, ResourceName: topic,
			Configs: []kafka.IncrementalAlterConfigsRequestConfig{
				{Name: "retention.ms", Value: "3600000", ConfigOperation: kafka.ConfigOperationSet},
				{Name: "cleanup.policy", Value: "compact", ConfigOperation: kafka.ConfigOperationAppend},
			},
		}},
	})
	if err != nil || len(ir.Resources) != 1 || ir.Resources[0].Error != nil {
		t.Fatalf("IncrementalAlterConfigs: %v %+v", err, ir)
	}
	dc, err := cl.DescribeConfigs(ctx, &kafka.DescribeConfigsRequest{
		Resources:       []kafka.DescribeConfigRequestResource{{ResourceType: kafka.ResourceTypeTopic, ResourceName: topic, ConfigNames: []string{"retention.ms", "cleanup.policy"}}},
		IncludeSynonyms: true,
	})
	if err != nil || len(dc.Resources) != 1 || dc.Resources[0].Error != nil {
		t.Fatalf("DescribeConfigs: %v %+v", err, dc)
	}
	got := map[string]string{}
	for _, e := range dc.Resources[0].ConfigEntries {
		got[e.ConfigName] = e.ConfigValue
	}
	if got["retention.ms"] != "3600000" || got["cleanup.policy"] != "delete,compact" {
		t.Errorf("described %v", got)
	}
	ar, err := cl.AlterConfigs(ctx, &kafka.AlterConfigsRequest{
		Resources: []kafka.AlterConfigRequestResource{{
			ResourceType: kafka.ResourceTypeTopic, ResourceName: topic,
			Configs: []kafka.AlterConfigRequestConfig{{Name: "retention.ms", Value: "oops"}},
		}},
	})
	if err != nil || len(ar.Errors) != 1 {
		t.Fatalf("AlterConfigs: %v %+v", err, ar)
	}
	for _, e := range ar.Errors {
		if !errors.Is(e, kafka.InvalidConfiguration) {
			t.Errorf("AlterConfigs with an invalid value: %v, want INVALID_CONFIG", e)
		}
	}
}

func deref(s *string) string {
	if s == nil {
		return "<nil>"
	}
	return *s
}

// TestAdminConfigsDynamicThrottle: the replication throttle set the way
// kafka-reassign-partitions.sh --throttle sets it, at run time (the rates
// per broker or cluster-wide, the throttled replicas appended to the
// topic's lists), holds a move back, and removing it lets the move finish.
func TestAdminConfigsDynamicThrottle(t *testing.T) {
	c := startCluster(t, 3, "auto.leader.rebalance.enable=false")
	adm := c.Admin(1)
	ctx := testCtx(t, 120*time.Second)
	const topic = "throttled-move"
	create := kmsg.NewPtrCreateTopicsRequest()
	ct := kmsg.NewCreateTopicsRequestTopic()
	ct.Topic, ct.NumPartitions, ct.ReplicationFactor = topic, -1, -1
	a := kmsg.NewCreateTopicsRequestTopicReplicaAssignment()
	a.Partition, a.Replicas = 0, []int32{1}
	ct.ReplicaAssignment = append(ct.ReplicaAssignment, a)
	create.Topics = append(create.Topics, ct)
	create.TimeoutMillis = 10000
	if resp, err := create.RequestWith(ctx, c.Client(1)); err != nil || resp.Topics[0].ErrorCode != 0 {
		t.Fatalf("create: %v %+v", err, resp)
	}
	const n, size = 400, 8 << 10 // ~3.2 MB: ~12 s at 256 KB/s
	produceValues(t, c.Addrs(), topic, "d", 0, n, size)

	if err := alterOne(t, ctx, adm, false, false, "", true, cfgSet("leader.replication.throttled.rate", "262144"), cfgSet("follower.replication.throttled.rate", "262144")); err != nil {
		t.Fatalf("throttle rates: %v", err)
	}
	for _, kv := range [][2]string{{"leader.replication.throttled.replicas", "0:1"}, {"follower.replication.throttled.replicas", "0:2"}} {
		if err := alterOne(t, ctx, adm, false, false, topic, false, kadm.AlterConfig{Op: kadm.AppendConfig, Name: kv[0], Value: kadm.StringPtr(kv[1])}); err != nil {
			t.Fatalf("append %s: %v", kv[0], err)
		}
	}
	wantKey(t, ctx, adm, false, topic, "follower.replication.throttled.replicas", "0:2", kmsg.ConfigSourceDynamicTopicConfig)

	if err := alterErr(t, adm, topic, 0, []int32{2}); err != nil {
		t.Fatalf("reassign: %v", err)
	}
	start := time.Now()
	time.Sleep(2 * time.Second)
	if got := listMoves(t, adm, topic); len(got) != 1 {
		t.Fatalf("a ~3 MB move through a 256 KB/s throttle finished within 2 s: %+v", got)
	}
	// kafka-reassign-partitions.sh --verify removes the throttle.
	if err := alterOne(t, ctx, adm, false, false, "", true, cfgDel("leader.replication.throttled.rate"), cfgDel("follower.replication.throttled.rate")); err != nil {
		t.Fatalf("remove the rates: %v", err)
	}
	c.Await(t, 60*time.Second, "the move completes once unthrottled", func() (bool, string) {
		got := listMoves(t, adm, topic)
		return len(got) == 0, fmt.Sprintf("%+v", got)
	})
	t.Logf("moved ~%d MB in %v (throttled for the first 2 s)", n*size>>20, time.Since(start).Round(100*time.Millisecond))
	checkValues(t, c.Addrs(), topic, "d", n, size)
}
