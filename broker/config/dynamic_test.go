package config

import (
	"testing"

	"github.com/rs/zerolog"

	"github.com/fjordlog/fjord/controller"
)

// imageWith applies SetConfig records for broker configs to an empty image.
func imageWith(t *testing.T, sets ...controller.SetConfig) *controller.Image {
	t.Helper()
	img := &controller.Image{}
	for i, s := range sets {
		next, err := img.Apply(uint64(i+1), controller.NewRecord(s))
		if err != nil {
			t.Fatalf("apply %v: %v", s, err)
		}
		img = next
	}
	return img
}

func strp(s string) *string { return &s }

// TestLiveConfigLayers: a node's own dynamic value beats the cluster
// default, which beats the static one; among synonyms the most precise
// key present anywhere wins, as in Kafka.
func TestLiveConfigLayers(t *testing.T) {
	cfg := Default()
	cfg.NodeID = 2
	cfg.RetentionMs = 5 * 3600_000
	cfg.Static = map[string]string{"log.retention.hours": "5", "num.partitions": "3"}
	cfg.NumPartitions = 3

	cases := []struct {
		name string
		sets []controller.SetConfig
		ret  int64
		np   int32
	}{
		{"static only", nil, 5 * 3600_000, 3},
		{"cluster default", []controller.SetConfig{
			{Resource: controller.ClusterResource(), Key: "log.retention.ms", Value: strp("1000")},
			{Resource: controller.ClusterResource(), Key: "num.partitions", Value: strp("6")},
		}, 1000, 6},
		{"own beats cluster", []controller.SetConfig{
			{Resource: controller.ClusterResource(), Key: "log.retention.ms", Value: strp("1000")},
			{Resource: controller.BrokerResource(2), Key: "log.retention.ms", Value: strp("2000")},
			{Resource: controller.BrokerResource(3), Key: "log.retention.ms", Value: strp("3000")},
		}, 2000, 3},
		{"the same key set dynamically beats the static one", func() []controller.SetConfig {
			return []controller.SetConfig{{Resource: controller.ClusterResource(), Key: "log.retention.hours", Value: strp("1")}}
		}(), 1 * 3600_000, 3},
		{"read-only keys stay static", []controller.SetConfig{
			{Resource: controller.ClusterResource(), Key: "log.dirs", Value: strp("/elsewhere")},
		}, 5 * 3600_000, 3},
	}
	for _, tc := range cases {
		live := Live(&cfg, imageWith(t, tc.sets...), zerolog.Nop())
		if live.RetentionMs != tc.ret || live.NumPartitions != tc.np || live.LogDirs != cfg.LogDirs {
			t.Errorf("%s: retention %d, partitions %d, log.dirs %q; want %d, %d, %q", tc.name, live.RetentionMs, live.NumPartitions, live.LogDirs, tc.ret, tc.np, cfg.LogDirs)
		}
	}

	// With log.retention.ms static, a dynamic log.retention.hours loses.
	cfg.Static = map[string]string{"log.retention.ms": "7000"}
	cfg.RetentionMs = 7000
	live := Live(&cfg, imageWith(t, controller.SetConfig{Resource: controller.ClusterResource(), Key: "log.retention.hours", Value: strp("1")}), zerolog.Nop())
	if live.RetentionMs != 7000 {
		t.Errorf("static log.retention.ms with dynamic .hours: retention %d, want 7000", live.RetentionMs)
	}
}
