package compattests

import (
	"errors"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Tiered storage's configuration through the real binary and kadm: a
// node with remote.log.storage.system.enable and Aiven's S3 keys starts
// even when the store cannot be reached (it logs it; a missing bucket
// or refused credentials stop start-up, tested against SeaweedFS in
// broker/remotestore), DescribeConfigs never shows the S3 secret, and
// the topic configs are accepted by CreateTopics, DescribeConfigs and
// IncrementalAlterConfigs.
func TestTieredStorageConfigs(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + l.Addr().String()
	l.Close()
	const secret = "tiered-secret-never-shown"
	b := startBroker(t, t.TempDir(),
		"remote.log.storage.system.enable=true",
		"remote.log.storage.manager.class.name=io.aiven.kafka.tieredstorage.RemoteStorageManager",
		"rsm.config.storage.backend.class=io.aiven.kafka.tieredstorage.storage.s3.S3Storage",
		"rsm.config.storage.s3.endpoint.url="+closed,
		"rsm.config.storage.s3.bucket.name=segments",
		"rsm.config.storage.s3.path.style.access.enabled=true",
		"rsm.config.storage.aws.access.key.id=fjord",
		"rsm.config.storage.aws.secret.access.key="+secret,
		"rsm.config.chunk.size=4194304",
		"rsm.config.fetch.chunk.cache.size=1073741824",
		"rlmm.config.remote.log.metadata.topic.replication.factor=1",
		"log.local.retention.ms=60000",
	)
	adm := newAdmin(t, b.Addr)
	ctx := testCtx(t, 90*time.Second)

	wantKey(t, ctx, adm, true, "1", "rsm.config.storage.s3.bucket.name", "segments", kmsg.ConfigSourceStaticBrokerConfig)
	c, ok := describeKey(t, ctx, adm, true, "1", "rsm.config.storage.aws.secret.access.key")
	if !ok || !c.Sensitive || c.Value != nil {
		t.Errorf("the S3 secret: described %v, sensitive %v, value %v; want sensitive with no value", ok, c.Sensitive, c.MaybeValue())
	}

	const topic = "tiered-topic"
	createTopic(t, adm, topic, 1, map[string]*string{
		"remote.storage.enable": kadm.StringPtr("true"),
		"local.retention.bytes": kadm.StringPtr("1048576"),
	})
	wantKey(t, ctx, adm, false, topic, "remote.storage.enable", "true", kmsg.ConfigSourceDynamicTopicConfig)
	wantKey(t, ctx, adm, false, topic, "local.retention.bytes", "1048576", kmsg.ConfigSourceDynamicTopicConfig)
	// Unset, local.retention.ms is the broker's log.local.retention.ms.
	wantKey(t, ctx, adm, false, topic, "local.retention.ms", "60000", kmsg.ConfigSourceStaticBrokerConfig)
	if err := alterOne(t, ctx, adm, false, false, topic, false, cfgSet("local.retention.ms", "-2")); err != nil {
		t.Fatalf("set local.retention.ms: %v", err)
	}
	wantKey(t, ctx, adm, false, topic, "local.retention.ms", "-2", kmsg.ConfigSourceDynamicTopicConfig)
	if err := alterOne(t, ctx, adm, false, false, topic, false, cfgSet("local.retention.ms", "-3")); err == nil {
		t.Error("local.retention.ms=-3 accepted")
	}

	// Kafka 3.9's rules between a tiered topic's keys, INVALID_CONFIG
	// with Kafka's messages.
	if err := alterOne(t, ctx, adm, false, false, topic, false, cfgSet("remote.storage.enable", "false")); !errors.Is(err, kerr.InvalidConfig) {
		t.Errorf("turning remote.storage.enable off: %v, want INVALID_CONFIG", err)
	}
	if err := alterOne(t, ctx, adm, false, false, topic, false, cfgSet("retention.bytes", "1000")); !errors.Is(err, kerr.InvalidConfig) {
		t.Errorf("retention.bytes below local.retention.bytes: %v, want INVALID_CONFIG", err)
	}
	resp, err := adm.CreateTopic(ctx, 1, 1, map[string]*string{"remote.storage.enable": kadm.StringPtr("true"), "cleanup.policy": kadm.StringPtr("compact")}, "tiered-compacted")
	if !errors.Is(resp.Err, kerr.InvalidConfig) || resp.ErrMessage != "Remote log storage is unsupported for the compacted topics" {
		t.Errorf("a compacted tiered topic: %v %v %q, want INVALID_CONFIG with Kafka's message", err, resp.Err, resp.ErrMessage)
	}
}
