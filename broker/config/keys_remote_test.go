package config

import (
	"errors"
	"strings"
	"testing"

	"github.com/fjordlog/fjord/broker/config/catalogue"
)

func TestRemoteKeys(t *testing.T) {
	c := Default()
	if err := applyKeys(&c, map[string]string{"remote.log.storage.system.enable": "true"}); err != nil {
		t.Fatal(err)
	}
	err := c.Validate()
	for _, want := range []string{"remote.log.storage.manager.class.name=" + AivenRSMClass, "rsm.config.storage.backend.class=" + AivenS3BackendClass, "rsm.config.storage.s3.bucket.name"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("enabled without its keys: %v, want it to name %s", err, want)
		}
	}
	if err := applyKeys(&c, map[string]string{
		"remote.log.storage.manager.class.name":           AivenRSMClass,
		"rsm.config.storage.backend.class":                AivenS3BackendClass,
		"rsm.config.storage.s3.bucket.name":               "segments",
		"rsm.config.storage.s3.endpoint.url":              "http://127.0.0.1:8333",
		"rsm.config.storage.s3.path.style.access.enabled": "true",
		"rsm.config.storage.aws.access.key.id":            "id",
		"rsm.config.storage.aws.secret.access.key":        "secret",
		"rsm.config.chunk.size":                           "4194304",
		"remote.log.manager.copier.thread.pool.size":      "-1",
	}); err != nil {
		t.Fatal(err)
	}
	if err := c.Validate(); err != nil {
		t.Fatalf("a complete tiered-storage configuration: %v", err)
	}
	if c.Remote.S3.Bucket != "segments" || !c.Remote.S3.PathStyle || c.Remote.CopierPoolSize() != 10 {
		t.Errorf("remote = %+v", c.Remote)
	}
	c.Remote.S3.SecretAccessKey = ""
	if err := c.Validate(); err == nil {
		t.Error("an access key id without its secret was accepted")
	}
	for key, v := range map[string]string{
		"remote.log.storage.manager.class.name":      "org.apache.kafka.server.log.remote.storage.NoOpRemoteStorageManager",
		"rsm.config.storage.backend.class":           "io.aiven.kafka.tieredstorage.storage.gcs.GcsStorage",
		"remote.log.manager.copier.thread.pool.size": "0",
		"remote.log.reader.threads":                  "0",
		"log.local.retention.ms":                     "-3",
		"rsm.config.chunk.size":                      "0",
	} {
		if err := applyKeys(&c, map[string]string{key: v}); err == nil {
			t.Errorf("%s=%s accepted", key, v)
		}
	}
	if err := applyKeys(&c, map[string]string{"remote.log.storage.manager.class.name": "com.example.Other"}); err == nil || !strings.Contains(err.Error(), AivenRSMClass) {
		t.Errorf("another class: %v, want a message naming the accepted one", err)
	}
}

func TestRemoteSecretIsSensitive(t *testing.T) {
	if !Sensitive(catalogue.Broker, "rsm.config.storage.aws.secret.access.key") {
		t.Error("the S3 secret key is not sensitive")
	}
	if Sensitive(catalogue.Broker, "rsm.config.storage.aws.access.key.id") {
		t.Error("the S3 key id is sensitive")
	}
}

func TestTieringTopicConfigs(t *testing.T) {
	ok := map[string]string{"remote.storage.enable": "true", "local.retention.ms": "-2", "local.retention.bytes": "1048576"}
	if err := ValidateTopicConfigs(ok); err != nil {
		t.Fatalf("tiering topic configs: %v", err)
	}
	if len(UnsupportedTopicConfigs(ok)) != 0 {
		t.Errorf("tiering topic configs warned about: %v", UnsupportedTopicConfigs(ok))
	}
	for k, v := range map[string]string{"remote.storage.enable": "maybe", "local.retention.ms": "-3", "local.retention.bytes": "x"} {
		if err := ValidateTopicConfigs(map[string]string{k: v}); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("%s=%s: %v, want INVALID_CONFIG", k, v, err)
		}
	}
	c := Default()
	c.RetentionMs, c.RetentionBytes = 7000, -1
	if got := TieringFor(&c, ok); got.Enabled || got.LocalRetentionMs != 7000 || got.LocalRetentionBytes != 1048576 {
		t.Errorf("broker tiering off: %+v", got)
	}
	c.Remote.Enable = true
	c.Remote.LocalRetentionBytes = 4096
	if got := TieringFor(&c, map[string]string{"remote.storage.enable": "true", "retention.ms": "9000"}); !got.Enabled || got.LocalRetentionMs != 9000 || got.LocalRetentionBytes != 4096 {
		t.Errorf("tiered topic with broker defaults: %+v", got)
	}
	if got := TieringFor(&c, nil); got.Enabled {
		t.Errorf("topic without remote.storage.enable: %+v", got)
	}
}

// The tiered-storage keys Fjord does not read: accepted and ignored, or
// refused when ignoring them would do less than asked.
func TestRemoteKeysNotRead(t *testing.T) {
	for _, c := range []struct {
		key, v string
		want   catalogue.Class
	}{
		{"rsm.config.fetch.chunk.cache.class", "io.aiven.kafka.tieredstorage.fetch.cache.DiskChunkCache", catalogue.Ignored},
		{"rsm.config.fetch.chunk.cache.size", "1073741824", catalogue.Ignored},
		{"rlmm.config.remote.log.metadata.topic.replication.factor", "1", catalogue.Ignored},
		{"remote.log.metadata.manager.listener.name", "PLAINTEXT", catalogue.Ignored},
		{"rsm.config.encryption.enabled", "false", catalogue.Ignored},
		{"rsm.config.encryption.enabled", "true", catalogue.Refused},
		{"remote.log.manager.copy.max.bytes.per.second", "1048576", catalogue.Unsupported},
	} {
		v, ok := catalogue.Classify(catalogue.Broker, c.key, c.v)
		if !ok || v.Class != c.want {
			t.Errorf("%s=%s: %+v (known %v), want class %v", c.key, c.v, v, ok, c.want)
		}
	}
}
