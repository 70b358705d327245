package compattests

import (
	"crypto/tls"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestSASLSSL: a SASL_SSL listener, TLS first and SASL inside it, as
// Kafka's: franz-go with PLAIN and with SCRAM-SHA-512 (a credential made
// through the listener), kcat (librdkafka) with PLAIN; a wrong password is
// SASL_AUTHENTICATION_FAILED, and a client that skips TLS is not served.
func TestSASLSSL(t *testing.T) {
	f := newTLSFixtures(t)
	p := func(name string) string { return filepath.Join(f.dir, name) }
	_, addrs := tlsBroker(t, []string{"SASL_SSL"},
		"listener.security.protocol.map=PLAINTEXT:PLAINTEXT,SASL_SSL:SASL_SSL,CONTROLLER:PLAINTEXT",
		"inter.broker.listener.name=PLAINTEXT",
		"ssl.keystore.location="+p("kafka01.keystore.jks"), "ssl.keystore.password="+f.storePW, "ssl.key.password="+f.keyPW,
		"ssl.truststore.location="+p("kafka.truststore.jks"), "ssl.truststore.password="+f.storePW, "ssl.client.auth=none",
		"sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-512",
		`listener.name.sasl_ssl.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" password="admin-secret" user_admin="admin-secret" user_alice="alice-secret";`,
		`listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;`,
	)
	addr := addrs["SASL_SSL"]
	ctx := testCtx(t, 60*time.Second)
	tc := &tls.Config{RootCAs: f.roots}

	cl := newClient(t, addr, kgo.DialTLSConfig(tc), plainOpt("alice", "alice-secret"), kgo.AllowAutoTopicCreation())
	if err := cl.Ping(ctx); err != nil {
		t.Fatalf("PLAIN over TLS: %v", err)
	}
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "sasl-ssl-t", Value: []byte("v")}).FirstErr(); err != nil {
		t.Errorf("produce over SASL_SSL: %v", err)
	}
	if recs := consumeAll(t, addr, "sasl-ssl-t", 1, 15*time.Second, kgo.DialTLSConfig(tc), plainOpt("alice", "alice-secret")); len(recs) != 1 {
		t.Errorf("consumed %d records over SASL_SSL, want 1", len(recs))
	}

	// A SCRAM credential made through the listener itself, then used.
	adm := kadm.NewClient(newClient(t, addr, kgo.DialTLSConfig(tc), plainOpt("admin", "admin-secret")))
	if res, err := adm.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{{User: "bob", Mechanism: kadm.ScramSha512, Iterations: 4096, Password: "bob-secret"}}); err != nil || res["bob"].Err != nil {
		t.Fatalf("AlterUserSCRAMs over SASL_SSL: %v %+v", err, res)
	}
	scl := newClient(t, addr, kgo.DialTLSConfig(tc), kgo.SASL(scramMech("bob", "bob-secret", true)))
	if err := scl.Ping(ctx); err != nil {
		t.Errorf("SCRAM-SHA-512 over TLS: %v", err)
	}

	wrong, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.DialTLSConfig(tc), plainOpt("alice", "nope"), kgo.RequestRetries(0))
	if err != nil {
		t.Fatal(err)
	}
	defer wrong.Close()
	if err := wrong.Ping(ctx); !errors.Is(err, kerr.SaslAuthenticationFailed) {
		t.Errorf("a wrong password over TLS: %v, want SASL_AUTHENTICATION_FAILED", err)
	}
	// SASL without TLS on the TLS port: the handshake fails, nothing is served.
	plainOnly, err := kgo.NewClient(kgo.SeedBrokers(addr), plainOpt("alice", "alice-secret"), kgo.RequestRetries(0), kgo.DialTimeout(3*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer plainOnly.Close()
	if err := plainOnly.Ping(ctx); err == nil {
		t.Errorf("a client without TLS was served on the SASL_SSL listener")
	}

	t.Run("kcat", func(t *testing.T) {
		kcat := kcatPath(t)
		args := []string{"-X", "security.protocol=SASL_SSL", "-X", "ssl.ca.location=" + filepath.Join(f.caDir, "ca.pem"),
			"-X", "sasl.mechanisms=PLAIN", "-X", "sasl.username=alice", "-X", "sasl.password=alice-secret"}
		runKcat(t, kcat, "k-1\nk-2\n", append([]string{"-P", "-b", addr, "-t", "sasl-ssl-kcat", "-X", "acks=all"}, args...)...)
		out := runKcat(t, kcat, "", append([]string{"-C", "-b", addr, "-t", "sasl-ssl-kcat", "-o", "beginning", "-e", "-q"}, args...)...)
		if !strings.Contains(out, "k-2") {
			t.Errorf("kcat read back over SASL_SSL:\n%s", out)
		}
	})
}
