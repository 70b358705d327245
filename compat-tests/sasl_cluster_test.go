package compattests

import (
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestSASLCluster: three nodes whose one client listener, the inter-broker
// one too, is SASL_PLAINTEXT. Followers authenticate with PLAIN (the
// login module's username and password) to replicate: a topic with
// min.insync.replicas=3 takes acks=all produces only if all three
// replicas fetch. A SCRAM user created through one node authenticates on
// every node.
func TestSASLCluster(t *testing.T) {
	c := startCluster(t, 3,
		"listener.security.protocol.map=PLAINTEXT:SASL_PLAINTEXT,CONTROLLER:PLAINTEXT",
		"sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-256",
		"sasl.mechanism.inter.broker.protocol=PLAIN",
		`listener.name.plaintext.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required username="broker" password="broker-secret" user_broker="broker-secret" user_alice="alice-secret";`,
		"compat.probe.sasl.plain=alice:alice-secret",
	)
	alice := plainOpt("alice", "alice-secret")
	admCl := newClient(t, c.Addr(1), alice)
	adm := kadm.NewClient(admCl)
	ctx := testCtx(t, 60*time.Second)
	three := "3"
	resp, err := adm.CreateTopic(ctx, 1, 3, map[string]*string{"min.insync.replicas": &three}, "sasl-rf3")
	if err != nil || resp.Err != nil {
		t.Fatalf("create sasl-rf3: %v %v", err, resp.Err)
	}
	cl := newClient(t, c.Addr(2), alice, kgo.DefaultProduceTopic("sasl-rf3"), kgo.RequiredAcks(kgo.AllISRAcks()))
	for i := range 50 {
		if err := cl.ProduceSync(ctx, kgo.StringRecord(fmt.Sprint("rf3-", i))).FirstErr(); err != nil {
			t.Fatalf("acks=all produce %d with min.insync.replicas=3: %v (followers not replicating over SASL?)", i, err)
		}
	}
	for id := 1; id <= 3; id++ {
		if recs := consumeAll(t, c.Addr(id), "sasl-rf3", 50, 20*time.Second, alice); len(recs) < 50 {
			t.Errorf("node %d: consumed %d of 50", id, len(recs))
		}
	}

	altered, err := adm.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{{User: "carol", Mechanism: kadm.ScramSha256, Iterations: 4096, Password: "carol-secret"}})
	if err != nil || altered["carol"].Err != nil {
		t.Fatalf("AlterUserSCRAMs carol: %v %+v", err, altered)
	}
	for id := 1; id <= 3; id++ {
		var err error
		for ctx.Err() == nil {
			if err = pingWith(t, c.Addr(id), scramMech("carol", "carol-secret", false)); err == nil {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		if err != nil {
			t.Errorf("node %d: carol with SCRAM-SHA-256: %v", id, err)
		}
	}
}
