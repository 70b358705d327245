package compattests

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/oauth"
	"github.com/twmb/franz-go/pkg/sasl/plain"
)

// saslBroker starts a node with a PLAINTEXT listener (the harness probes
// it) and a SASL_PLAINTEXT one whose PLAIN users are alice and admin,
// given as Kafka's per-listener JAAS key. It returns the SASL address.
func saslBroker(t *testing.T) (*Broker, string) {
	t.Helper()
	return saslBrokerWith(t,
		"sasl.enabled.mechanisms=PLAIN,OAUTHBEARER",
		`listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config=org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required unsecuredValidatorRequiredScope="kafka";`,
		`listener.name.sasl_plaintext.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" password="admin-secret" user_admin="admin-secret" user_alice="alice-secret";`,
	)
}

// saslBrokerWith starts a node with a PLAINTEXT listener (the harness
// probes it; ANONYMOUS there) and a SASL_PLAINTEXT one set up by
// overrides. It returns the SASL address.
func saslBrokerWith(t *testing.T, overrides ...string) (*Broker, string) {
	t.Helper()
	saslAddr := net.JoinHostPort("127.0.0.1", freePort(t))
	b := startBroker(t, t.TempDir(), append([]string{
		"listeners=PLAINTEXT://127.0.0.1:{port},SASL_PLAINTEXT://" + saslAddr,
		"listener.security.protocol.map=PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT",
		"inter.broker.listener.name=PLAINTEXT",
	}, overrides...)...)
	return b, saslAddr
}

func plainOpt(user, pass string) kgo.Opt {
	return kgo.SASL(plain.Auth{User: user, Pass: pass}.AsMechanism())
}

// TestSASLPlain: franz-go, sarama (SaslHandshake v1 and v0), kcat and
// kafka-python authenticate with PLAIN, produce and consume; a wrong
// password hears SASL_AUTHENTICATION_FAILED; nothing but ApiVersions and
// the SASL requests is served before authentication.
func TestSASLPlain(t *testing.T) {
	b, addr := saslBroker(t)
	createTopic(t, newAdmin(t, b.Addr), "sasl-t", 1, nil)

	t.Run("franz-go", func(t *testing.T) {
		cl := newClient(t, addr, plainOpt("alice", "alice-secret"), kgo.DefaultProduceTopic("sasl-t"))
		ctx := testCtx(t, 20*time.Second)
		for i := range 10 {
			if err := cl.ProduceSync(ctx, kgo.StringRecord(fmt.Sprintf("franz-%d", i))).FirstErr(); err != nil {
				t.Fatalf("produce over SASL/PLAIN: %v", err)
			}
		}
		recs := consumeAll(t, addr, "sasl-t", 10, 20*time.Second, plainOpt("admin", "admin-secret"))
		if len(recs) < 10 {
			t.Fatalf("consumed %d records", len(recs))
		}
	})

	t.Run("wrong password", func(t *testing.T) {
		for _, c := range [][2]string{{"alice", "wrong"}, {"mallory", "alice-secret"}} {
			cl, err := kgo.NewClient(kgo.SeedBrokers(addr), plainOpt(c[0], c[1]), kgo.RequestRetries(0))
			if err != nil {
				t.Fatal(err)
			}
			ctx := testCtx(t, 10*time.Second)
			err = cl.Ping(ctx)
			cl.Close()
			if !errors.Is(err, kerr.SaslAuthenticationFailed) {
				t.Errorf("%s/%s: %v, want SASL_AUTHENTICATION_FAILED", c[0], c[1], err)
			}
		}
	})

	t.Run("unauthenticated", func(t *testing.T) {
		// ApiVersions is answered, and lists the SASL keys.
		c := dialRaw(t, addr)
		av := kmsg.NewPtrApiVersionsRequest()
		av.SetVersion(0)
		if _, err := c.Write(c.frame(av)); err != nil {
			t.Fatal(err)
		}
		f, err := c.readFrame(5 * time.Second)
		if err != nil {
			t.Fatalf("ApiVersions before authentication: %v", err)
		}
		avr := kmsg.NewPtrApiVersionsResponse()
		avr.SetVersion(0)
		if err := parseResponse(f, c.corr, avr, false); err != nil {
			t.Fatal(err)
		}
		keys := map[int16]kmsg.ApiVersionsResponseApiKey{}
		for _, k := range avr.ApiKeys {
			keys[k.ApiKey] = k
		}
		if k := keys[17]; k.MaxVersion != 1 || keys[36].MaxVersion != 2 {
			t.Errorf("SaslHandshake %+v SaslAuthenticate %+v: want v0-1 and v0-2", k, keys[36])
		}
		// Metadata is not: the connection closes.
		md := kmsg.NewPtrMetadataRequest()
		md.SetVersion(1)
		c.Write(c.frame(md))
		if f, err := c.readFrame(5 * time.Second); err == nil {
			t.Errorf("Metadata before authentication answered (%d bytes)", len(f))
		}

		// An unknown mechanism: UNSUPPORTED_SASL_MECHANISM with the enabled ones.
		c = dialRaw(t, addr)
		hs := kmsg.NewPtrSASLHandshakeRequest()
		hs.SetVersion(1)
		hs.Mechanism = "SCRAM-SHA-999"
		c.Write(c.frame(hs))
		f, err = c.readFrame(5 * time.Second)
		if err != nil {
			t.Fatal(err)
		}
		hr := kmsg.NewPtrSASLHandshakeResponse()
		hr.SetVersion(1)
		if err := parseResponse(f, c.corr, hr, false); err != nil {
			t.Fatal(err)
		}
		if hr.ErrorCode != kerr.UnsupportedSaslMechanism.Code || !slices.Equal(hr.SupportedMechanisms, []string{"PLAIN", "OAUTHBEARER"}) {
			t.Errorf("handshake SCRAM-SHA-999: error %d mechanisms %v", hr.ErrorCode, hr.SupportedMechanisms)
		}

		// SaslAuthenticate without a handshake: ILLEGAL_SASL_STATE.
		c = dialRaw(t, addr)
		au := kmsg.NewPtrSASLAuthenticateRequest()
		au.SetVersion(1)
		au.SASLAuthBytes = []byte("\x00alice\x00alice-secret")
		c.Write(c.frame(au))
		f, err = c.readFrame(5 * time.Second)
		if err != nil {
			t.Fatal(err)
		}
		ar := kmsg.NewPtrSASLAuthenticateResponse()
		ar.SetVersion(1)
		if err := parseResponse(f, c.corr, ar, false); err != nil {
			t.Fatal(err)
		}
		if ar.ErrorCode != kerr.IllegalSaslState.Code {
			t.Errorf("SaslAuthenticate before a handshake: error %d", ar.ErrorCode)
		}

		// A frame above sasl.server.max.receive.size closes the connection
		// at its size prefix; a PLAINTEXT listener takes it.
		for _, a := range []struct {
			addr  string
			close bool
		}{{addr, true}, {b.Addr, false}} {
			c = dialRaw(t, a.addr)
			var hdr [4]byte
			binary.BigEndian.PutUint32(hdr[:], 600000)
			c.Write(hdr[:])
			c.SetReadDeadline(time.Now().Add(2 * time.Second))
			_, err := c.Read(make([]byte, 1))
			closed := errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed) || err != nil && strings.Contains(err.Error(), "reset")
			if closed != a.close {
				t.Errorf("%s: a 600000 byte frame announced: read %v, want closed=%v", a.addr, err, a.close)
			}
		}
	})

	t.Run("oauthbearer unsecured", func(t *testing.T) {
		jwt := func(claims string) string {
			enc := base64.RawURLEncoding.EncodeToString
			return enc([]byte(`{"alg":"none"}`)) + "." + enc([]byte(claims)) + "."
		}
		exp := time.Now().Add(time.Hour).Unix()
		good := jwt(fmt.Sprintf(`{"sub":"oliver","exp":%d,"scope":"kafka"}`, exp))
		cl := newClient(t, addr, kgo.SASL(oauth.Auth{Token: good}.AsMechanism()), kgo.DefaultProduceTopic("sasl-t"))
		if err := cl.ProduceSync(testCtx(t, 20*time.Second), kgo.StringRecord("oauth")).FirstErr(); err != nil {
			t.Fatalf("produce with an unsecured JWT: %v", err)
		}
		for what, tok := range map[string]string{
			"expired":  jwt(fmt.Sprintf(`{"sub":"oliver","exp":%d,"scope":"kafka"}`, time.Now().Add(-time.Minute).Unix())),
			"no scope": jwt(fmt.Sprintf(`{"sub":"oliver","exp":%d}`, exp)),
		} {
			// Kafka's error exchange: the JSON as a challenge, then
			// SASL_AUTHENTICATION_FAILED (franz-go stops at the challenge).
			first, second := oauthRaw(t, addr, tok)
			if string(first.SASLAuthBytes) != `{"status":"invalid_token"}` || second == nil || second.ErrorCode != kerr.SaslAuthenticationFailed.Code {
				t.Errorf("%s token: %+v then %+v, want invalid_token and SASL_AUTHENTICATION_FAILED", what, first, second)
			}
			if err := pingWith(t, addr, oauth.Auth{Token: tok}.AsMechanism()); err == nil {
				t.Errorf("%s token: franz-go connected", what)
			}
		}
	})

	t.Run("sarama", func(t *testing.T) {
		for _, v := range []int16{sarama.SASLHandshakeV1, sarama.SASLHandshakeV0} {
			cfg := sarama.NewConfig()
			cfg.Version = sarama.V2_8_0_0
			if v == sarama.SASLHandshakeV0 {
				cfg.Version = sarama.V0_11_0_0 // sarama refuses v0 with ApiVersions requests
				cfg.ApiVersionsRequest = false
			}
			cfg.Net.SASL.Enable = true
			cfg.Net.SASL.Mechanism = sarama.SASLTypePlaintext
			cfg.Net.SASL.Version = v
			cfg.Net.SASL.User, cfg.Net.SASL.Password = "alice", "alice-secret"
			cfg.Producer.Return.Successes = true
			cfg.Producer.RequiredAcks = sarama.WaitForAll
			p, err := sarama.NewSyncProducer([]string{addr}, cfg)
			if err != nil {
				t.Fatalf("handshake v%d: %v", v, err)
			}
			if _, _, err := p.SendMessage(&sarama.ProducerMessage{Topic: "sasl-t", Value: sarama.StringEncoder(fmt.Sprintf("sarama-v%d", v))}); err != nil {
				t.Errorf("handshake v%d: produce: %v", v, err)
			}
			p.Close()
			cfg.Net.SASL.Password = "wrong"
			if p, err := sarama.NewSyncProducer([]string{addr}, cfg); err == nil {
				p.Close()
				t.Errorf("handshake v%d: a wrong password connected", v)
			}
		}
	})

	t.Run("kcat", func(t *testing.T) {
		kcat := kcatPath(t)
		sasl := []string{"-X", "security.protocol=SASL_PLAINTEXT", "-X", "sasl.mechanisms=PLAIN", "-X", "sasl.username=alice", "-X", "sasl.password=alice-secret"}
		runKcat(t, kcat, "kcat-1\nkcat-2\n", append([]string{"-P", "-b", addr, "-t", "sasl-t", "-X", "acks=all"}, sasl...)...)
		out := runKcat(t, kcat, "", append([]string{"-C", "-b", addr, "-t", "sasl-t", "-o", "beginning", "-e", "-q"}, sasl...)...)
		if !strings.Contains(out, "kcat-2") {
			t.Errorf("kcat read back:\n%s", out)
		}
	})

	t.Run("kafka-python", func(t *testing.T) {
		py := "/usr/bin/python3"
		if err := exec.Command(py, "-c", "import kafka").Run(); err != nil {
			if os.Getenv("FJORD_REQUIRE_KAFKA_PYTHON") != "" {
				t.Fatalf("python3-kafka missing and FJORD_REQUIRE_KAFKA_PYTHON is set: %v", err)
			}
			t.Skipf("python3-kafka not installed (%v)", err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		createTopic(t, newAdmin(t, b.Addr), "sasl-kpy", 1, nil)
		script, _ := filepath.Abs("testdata/kafka_python_sasl.py")
		out, err := exec.CommandContext(ctx, py, script, addr, "sasl-kpy", "alice", "alice-secret").Output()
		if err != nil {
			if ee, ok := err.(*exec.ExitError); ok {
				t.Fatalf("kafka-python: %v\n%s", err, ee.Stderr)
			}
			t.Fatal(err)
		}
		var got struct {
			Acked  int      `json:"acked"`
			Values []string `json:"values"`
		}
		if err := json.Unmarshal(out, &got); err != nil {
			t.Fatalf("%v: %s", err, out)
		}
		if got.Acked != 20 || len(got.Values) != 20 {
			t.Errorf("kafka-python acked %d, read %d", got.Acked, len(got.Values))
		}
	})
}
