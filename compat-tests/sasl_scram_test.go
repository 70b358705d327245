package compattests

import (
	"context"
	"errors"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// scramBroker starts a node whose SASL_PLAINTEXT listener offers both
// SCRAM mechanisms (and PLAIN), with an admin bootstrapped by
// fjord.sasl.scram.bootstrap. dir keeps the data across restarts.
func scramBroker(t *testing.T, dir string) (*Broker, string) {
	t.Helper()
	saslAddr := net.JoinHostPort("127.0.0.1", freePort(t))
	b := startBroker(t, dir,
		"listeners=PLAINTEXT://127.0.0.1:{port},SASL_PLAINTEXT://"+saslAddr,
		"listener.security.protocol.map=PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT",
		"inter.broker.listener.name=PLAINTEXT",
		"sasl.enabled.mechanisms=SCRAM-SHA-512,SCRAM-SHA-256",
		"fjord.sasl.scram.bootstrap=SCRAM-SHA-256=[name=admin,password=admin-secret];SCRAM-SHA-512=[name=admin,password=admin-secret,iterations=8192]",
	)
	return b, saslAddr
}

func scramMech(user, pass string, sha512 bool) sasl.Mechanism {
	a := scram.Auth{User: user, Pass: pass}
	if sha512 {
		return a.AsSha512Mechanism()
	}
	return a.AsSha256Mechanism()
}

// pingWith connects to addr with mech and asks for metadata.
func pingWith(t *testing.T, addr string, mech sasl.Mechanism) error {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.SASL(mech), kgo.RequestRetries(0))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err = kadm.NewClient(cl).BrokerMetadata(ctx)
	return err
}

// TestSASLScram: the bootstrapped admin authenticates with both SCRAM
// mechanisms, creates a user with kadm, who then produces and consumes;
// wrong passwords and Kafka's AlterUserScramCredentials errors; sarama
// with SCRAM; and the credentials survive a restart.
func TestSASLScram(t *testing.T) {
	dir := t.TempDir()
	b, addr := scramBroker(t, dir)

	// The bootstrap runs once the node serves: wait for it (bounded).
	ctx := testCtx(t, 30*time.Second)
	var err error
	for ctx.Err() == nil {
		if err = pingWith(t, addr, scramMech("admin", "admin-secret", true)); err == nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("bootstrapped admin (SCRAM-SHA-512): %v", err)
	}
	if err := pingWith(t, addr, scramMech("admin", "admin-secret", false)); err != nil {
		t.Fatalf("bootstrapped admin (SCRAM-SHA-256): %v", err)
	}

	admCl := newClient(t, addr, kgo.SASL(scramMech("admin", "admin-secret", true)))
	adm := kadm.NewClient(admCl)
	altered, err := adm.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{
		{User: "alice", Mechanism: kadm.ScramSha256, Iterations: 4096, Password: "alice-secret"},
		{User: "alice", Mechanism: kadm.ScramSha512, Iterations: 4096, Password: "alice-secret"},
	})
	if err != nil || altered["alice"].Err != nil {
		t.Fatalf("AlterUserSCRAMs alice: %v %+v", err, altered)
	}
	for _, sha512 := range []bool{false, true} {
		if err := pingWith(t, addr, scramMech("alice", "alice-secret", sha512)); err != nil {
			t.Errorf("alice (sha512 %v): %v", sha512, err)
		}
		if err := pingWith(t, addr, scramMech("alice", "wrong", sha512)); !errors.Is(err, kerr.SaslAuthenticationFailed) {
			t.Errorf("alice with a wrong password (sha512 %v): %v, want SASL_AUTHENTICATION_FAILED", sha512, err)
		}
	}
	if err := pingWith(t, addr, scramMech("nobody", "x", false)); !errors.Is(err, kerr.SaslAuthenticationFailed) {
		t.Errorf("unknown user: %v, want SASL_AUTHENTICATION_FAILED", err)
	}

	createTopic(t, adm, "scram-t", 1, nil)
	cl := newClient(t, addr, kgo.SASL(scramMech("alice", "alice-secret", false)), kgo.DefaultProduceTopic("scram-t"))
	for i := range 5 {
		if err := cl.ProduceSync(ctx, kgo.StringRecord(fmt.Sprint("scram-", i))).FirstErr(); err != nil {
			t.Fatalf("produce as alice: %v", err)
		}
	}
	if recs := consumeAll(t, addr, "scram-t", 5, 20*time.Second, kgo.SASL(scramMech("alice", "alice-secret", true))); len(recs) < 5 {
		t.Fatalf("consumed %d", len(recs))
	}

	described, err := adm.DescribeUserSCRAMs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if d := described["admin"]; len(d.CredInfos) != 2 || len(described["alice"].CredInfos) != 2 {
		t.Errorf("described %+v", described)
	}
	for _, ci := range described["admin"].CredInfos {
		if ci.Mechanism == kadm.ScramSha512 && ci.Iterations != 8192 {
			t.Errorf("admin's SCRAM-SHA-512 has %d iterations, the bootstrap asked for 8192", ci.Iterations)
		}
	}
	if d, err := adm.DescribeUserSCRAMs(ctx, "nobody"); err != nil || !errors.Is(d["nobody"].Err, kerr.ResourceNotFound) {
		t.Errorf("describe a user without credentials: %v %+v", err, d)
	}

	// Kafka's errors.
	for _, c := range []struct {
		what string
		del  []kadm.DeleteSCRAM
		up   []kadm.UpsertSCRAM
		user string
		want error
	}{
		{"too few iterations", nil, []kadm.UpsertSCRAM{{User: "bob", Mechanism: kadm.ScramSha256, Iterations: 4095, Password: "p"}}, "bob", kerr.UnacceptableCredential},
		{"too many iterations", nil, []kadm.UpsertSCRAM{{User: "bob", Mechanism: kadm.ScramSha256, Iterations: 16385, Password: "p"}}, "bob", kerr.UnacceptableCredential},
		{"delete a missing one", []kadm.DeleteSCRAM{{User: "bob", Mechanism: kadm.ScramSha512}}, nil, "bob", kerr.ResourceNotFound},
		{"twice", []kadm.DeleteSCRAM{{User: "alice", Mechanism: kadm.ScramSha256}}, []kadm.UpsertSCRAM{{User: "alice", Mechanism: kadm.ScramSha256, Iterations: 4096, Password: "p"}}, "alice", kerr.DuplicateResource},
	} {
		res, err := adm.AlterUserSCRAMs(ctx, c.del, c.up)
		if err != nil || !errors.Is(res[c.user].Err, c.want) {
			t.Errorf("%s: %v %+v, want %v", c.what, err, res, c.want)
		}
	}
	// An unknown mechanism, by hand: kadm refuses to send one.
	res, err := adm.AlterUserSCRAMs(ctx, []kadm.DeleteSCRAM{{User: "alice", Mechanism: 3}}, nil)
	if err != nil || !errors.Is(res["alice"].Err, kerr.UnsupportedSaslMechanism) {
		t.Errorf("unknown mechanism: %v %+v", err, res)
	}

	t.Run("sarama", func(t *testing.T) {
		cfg := sarama.NewConfig()
		cfg.Version = sarama.V2_8_0_0
		cfg.Net.SASL.Enable = true
		cfg.Net.SASL.Mechanism = sarama.SASLTypeSCRAMSHA512
		cfg.Net.SASL.User, cfg.Net.SASL.Password = "alice", "alice-secret"
		cfg.Net.SASL.SCRAMClientGeneratorFunc = func() sarama.SCRAMClient { return &franzScram{sha512: true} }
		cfg.Producer.Return.Successes = true
		cfg.Producer.RequiredAcks = sarama.WaitForAll
		p, err := sarama.NewSyncProducer([]string{addr}, cfg)
		if err != nil {
			t.Fatalf("sarama SCRAM-SHA-512: %v", err)
		}
		if _, _, err := p.SendMessage(&sarama.ProducerMessage{Topic: "scram-t", Value: sarama.StringEncoder("sarama")}); err != nil {
			t.Errorf("sarama produce: %v", err)
		}
		p.Close()
		cfg.Net.SASL.Password = "wrong"
		if p, err := sarama.NewSyncProducer([]string{addr}, cfg); err == nil {
			p.Close()
			t.Error("sarama with a wrong password connected")
		}
	})

	// Deleting a credential takes effect for new connections.
	if res, err := adm.AlterUserSCRAMs(ctx, []kadm.DeleteSCRAM{{User: "alice", Mechanism: kadm.ScramSha512}}, nil); err != nil || res["alice"].Err != nil {
		t.Fatalf("delete alice's SCRAM-SHA-512: %v %+v", err, res)
	}
	if err := pingWith(t, addr, scramMech("alice", "alice-secret", true)); !errors.Is(err, kerr.SaslAuthenticationFailed) {
		t.Errorf("alice's deleted SCRAM-SHA-512: %v", err)
	}

	// The credentials are in the metadata log: a restart keeps them.
	b.Stop()
	b.Restart()
	addr2 := addr
	for ctx.Err() == nil {
		if err = pingWith(t, addr2, scramMech("alice", "alice-secret", false)); err == nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		t.Errorf("alice after a restart: %v", err)
	}
	if err := pingWith(t, addr2, scramMech("alice", "alice-secret", true)); !errors.Is(err, kerr.SaslAuthenticationFailed) {
		t.Errorf("alice's deleted SCRAM-SHA-512 after a restart: %v", err)
	}
}

// franzScram adapts franz-go's SCRAM client to sarama's SCRAMClient.
type franzScram struct {
	sha512 bool
	sess   sasl.Session
	first  []byte
	done   bool
}

func (f *franzScram) Begin(user, pass, _ string) error {
	sess, first, err := scramMech(user, pass, f.sha512).Authenticate(context.Background(), "")
	f.sess, f.first = sess, first
	return err
}

func (f *franzScram) Step(challenge string) (string, error) {
	if f.first != nil {
		m := f.first
		f.first = nil
		return string(m), nil
	}
	done, resp, err := f.sess.Challenge([]byte(challenge))
	f.done = done
	return string(resp), err
}

func (f *franzScram) Done() bool { return f.done }
