package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/fjordlog/fjord/broker/brokertest"
	"github.com/fjordlog/fjord/broker/config"
	"github.com/fjordlog/fjord/storage/remote"
)

// `fjord topic describe` of a tiered topic shows the local log start
// above the log start (the older records only in the store), the
// leader's local bytes and the remote bytes; a topic without tiering
// shows the local start at the start and no remote bytes.
func TestTopicDescribeTiered(t *testing.T) {
	store := remote.NewMemStore()
	c, err := brokertest.Start(brokertest.Options{Nodes: 1, Dir: t.TempDir(), RemoteStore: store, RemoteTaskInterval: 100 * time.Millisecond,
		Configure: func(_ int32, cfg *config.Config) { cfg.RetentionCheckInterval = 100 }})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.Addrs()...), kgo.ProducerBatchCompression(kgo.NoCompression()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	adm := kadm.NewClient(cl)
	if res, err := adm.CreateTopic(ctx, 1, 1, map[string]*string{
		"segment.bytes": kadm.StringPtr("1024"), "remote.storage.enable": kadm.StringPtr("true"),
		"local.retention.bytes": kadm.StringPtr("2048"), "retention.ms": kadm.StringPtr("-1"),
	}, "tiered"); err != nil || res.Err != nil {
		t.Fatalf("create: %v %v", err, res.Err)
	}
	if res, err := adm.CreateTopic(ctx, 1, 1, nil, "plain"); err != nil || res.Err != nil {
		t.Fatalf("create: %v %v", err, res.Err)
	}
	for i := 0; i < 60; i++ {
		var recs []*kgo.Record
		for _, topic := range []string{"tiered", "plain"} {
			recs = append(recs, &kgo.Record{Topic: topic, Value: []byte(fmt.Sprintf("%04d-%s", i, strings.Repeat("x", 100)))})
		}
		if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	describe := func() []topicDesc {
		t.Helper()
		var out, errOut bytes.Buffer
		if code := topicDescribe([]string{"-b", c.Addrs()[0], "--json", "tiered", "plain"}, &out, &errOut); code != exitOK {
			t.Fatalf("topic describe: exit %d: %s", code, errOut.String())
		}
		var descs []topicDesc
		if err := json.Unmarshal(out.Bytes(), &descs); err != nil {
			t.Fatalf("%v: %s", err, out.String())
		}
		return descs
	}
	var descs []topicDesc
	deadline := time.Now().Add(60 * time.Second)
	for {
		descs = describe()
		if p := descs[0].Partitions[0]; p.LocalStart > p.Start && p.RemoteBytes > 0 && p.LocalBytes <= 4096 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no tiered partition after 60s: %+v", descs[0].Partitions[0])
		}
		time.Sleep(100 * time.Millisecond)
	}
	tp, pp := descs[0].Partitions[0], descs[1].Partitions[0]
	if tp.Start != 0 || tp.End != 60 || tp.LocalBytes <= 0 || tp.LocalBytes > 4096 {
		t.Fatalf("tiered partition: %+v", tp)
	}
	if pp.Start != 0 || pp.LocalStart != 0 || pp.End != 60 || pp.RemoteBytes != 0 || pp.LocalBytes <= 60*100 {
		t.Fatalf("plain partition: %+v", pp)
	}
	t.Logf("tiered: start %d local start %d end %d, local %d B, remote %d B", tp.Start, tp.LocalStart, tp.End, tp.LocalBytes, tp.RemoteBytes)
	var out, errOut bytes.Buffer
	if code := topicDescribe([]string{"-b", c.Addrs()[0], "tiered"}, &out, &errOut); code != exitOK || !strings.Contains(out.String(), "REMOTE-BYTES") {
		t.Fatalf("table: exit %d: %s%s", code, out.String(), errOut.String())
	}
	t.Logf("\n%s", out.String())
}
