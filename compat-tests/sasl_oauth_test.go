package compattests

import (
	"bufio"
	"context"
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/oauth"
)

// oauthIssuer signs tokens with an RSA key made here and serves its JWKS
// over http on loopback, as an identity provider would.
type oauthIssuer struct {
	key *rsa.PrivateKey
	kid string
	srv *httptest.Server
}

func newOAuthIssuer(t *testing.T) *oauthIssuer {
	t.Helper()
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	iss := &oauthIssuer{key: k, kid: "test-1"}
	set, err := json.Marshal(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: k.Public(), KeyID: iss.kid, Algorithm: "RS256", Use: "sig"}}})
	if err != nil {
		t.Fatal(err)
	}
	iss.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write(set)
	}))
	t.Cleanup(iss.srv.Close)
	return iss
}

func signToken(t *testing.T, key *rsa.PrivateKey, kid, sub string) string {
	return signTokenFor(t, key, kid, sub, "fjord")
}

func signTokenFor(t *testing.T, key *rsa.PrivateKey, kid, sub, aud string) string {
	t.Helper()
	s, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.RS256, Key: jose.JSONWebKey{Key: key, KeyID: kid}}, (&jose.SignerOptions{}).WithType("JWT"))
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	tok, err := jwt.Signed(s).Claims(map[string]any{"sub": sub, "iss": "https://idp.test", "aud": aud,
		"iat": now.Unix(), "exp": now.Add(time.Hour).Unix(), "scope": "kafka"}).Serialize()
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// oauthRaw authenticates token by hand on a fresh connection and returns
// the first SaslAuthenticate response and, when it was an error
// challenge, the response to the client's %x01.
func oauthRaw(t *testing.T, addr, token string) (first, second *kmsg.SASLAuthenticateResponse) {
	t.Helper()
	c := dialRaw(t, addr)
	hs := kmsg.NewPtrSASLHandshakeRequest()
	hs.SetVersion(1)
	hs.Mechanism = "OAUTHBEARER"
	if hr := c.roundTrip(t, hs).(*kmsg.SASLHandshakeResponse); hr.ErrorCode != 0 {
		t.Fatalf("handshake: error %d", hr.ErrorCode)
	}
	au := kmsg.NewPtrSASLAuthenticateRequest()
	au.SetVersion(2)
	au.SASLAuthBytes = []byte("n,,\x01auth=Bearer " + token + "\x01\x01")
	first = c.roundTrip(t, au).(*kmsg.SASLAuthenticateResponse)
	if first.ErrorCode != 0 || len(first.SASLAuthBytes) == 0 {
		return first, nil
	}
	au = kmsg.NewPtrSASLAuthenticateRequest()
	au.SetVersion(2)
	au.SASLAuthBytes = []byte{1}
	return first, c.roundTrip(t, au).(*kmsg.SASLAuthenticateResponse)
}

// TestSASLOAuthBearerJWKS: a SASL_PLAINTEXT OAUTHBEARER listener checks
// signed tokens against a JWKS served over http (KIP-768). franz-go with a
// token of the provider's key produces and consumes; a token signed by
// another key is refused with Kafka's invalid_token exchange and audited;
// librdkafka (confluent-kafka-python) with a signed token is served too;
// with ACLs on, the principal is the sub claim.
func TestSASLOAuthBearerJWKS(t *testing.T) {
	iss := newOAuthIssuer(t)
	audit := filepath.Join(t.TempDir(), "audit.log")
	b, saslAddr := saslBrokerWith(t,
		"sasl.enabled.mechanisms=OAUTHBEARER",
		"listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config=org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required;",
		"listener.name.sasl_plaintext.oauthbearer.sasl.server.callback.handler.class=org.apache.kafka.common.security.oauthbearer.secured.OAuthBearerValidatorCallbackHandler",
		"sasl.oauthbearer.jwks.endpoint.url="+iss.srv.URL+"/jwks.json",
		"sasl.oauthbearer.expected.issuer=https://idp.test",
		"listener.name.sasl_plaintext.oauthbearer.sasl.oauthbearer.expected.audience=fjord", // the per-listener form
		stdAuthorizer, "super.users="+anon, // the PLAINTEXT listener's admin
		"fjord.audit.log.file="+audit,
	)
	adm := newAdmin(t, b.Addr)
	createTopic(t, adm, "oauth-t", 1, nil)
	ctx := testCtx(t, 60*time.Second)
	for _, acls := range []*kadm.ACLBuilder{
		newACLs().Allow("User:alice").Topics("oauth-t").Operations(kadm.OpWrite, kadm.OpRead),
		newACLs().Allow("User:alice").Groups("oauth-g").Operations(kadm.OpRead),
	} {
		if res, err := adm.CreateACLs(ctx, acls); err != nil || res[0].Err != nil {
			t.Fatalf("create ACLs: %v %+v", err, res)
		}
	}

	alice := oauth.Auth{Token: signToken(t, iss.key, iss.kid, "alice")}.AsMechanism()
	cl := newClient(t, saslAddr, kgo.SASL(alice), kgo.DefaultProduceTopic("oauth-t"))
	// The JWKS is fetched in the background: the first exchanges may come
	// before it (bounded wait).
	var err error
	for ctx.Err() == nil {
		if err = cl.ProduceSync(ctx, kgo.StringRecord("signed-0")).FirstErr(); err == nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("produce with a signed token: %v\n%s", err, b.tailLog(20))
	}
	for i := 1; i < 5; i++ {
		if err := cl.ProduceSync(ctx, kgo.StringRecord("signed")).FirstErr(); err != nil {
			t.Fatalf("produce %d: %v", i, err)
		}
	}
	if recs := consumeAll(t, saslAddr, "oauth-t", 5, 20*time.Second, kgo.SASL(alice)); len(recs) != 5 || string(recs[0].Value) != "signed-0" {
		t.Fatalf("consumed %d records", len(recs))
	}

	// librdkafka, through confluent-kafka-python's oauth_cb.
	t.Run("confluent-kafka", func(t *testing.T) {
		py := confluentPython(t)
		script, err := filepath.Abs("testdata/confluent_oauth.py")
		if err != nil {
			t.Fatal(err)
		}
		cmdCtx, cancel := context.WithTimeout(ctx, 45*time.Second)
		defer cancel()
		cmd := exec.CommandContext(cmdCtx, py, script, saslAddr, "oauth-t", "oauth-g")
		cmd.Stdin = strings.NewReader(signToken(t, iss.key, iss.kid, "alice"))
		var stderr strings.Builder
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		var got struct {
			Acked  int      `json:"acked"`
			Values []string `json:"values"`
		}
		if err != nil || json.Unmarshal(out, &got) != nil || got.Acked != 1 || !slices.Contains(got.Values, "rdkafka-oauth") {
			t.Errorf("confluent-kafka with a signed token: %v %s\n%s", err, out, stderr.String())
		}
	})

	if n := strings.Count(b.readLog(), "JWKS loaded"); n != 1 {
		t.Errorf("%d \"JWKS loaded\" log lines, want 1 (one per change)", n)
	}

	// bob's token is good, but no ACL names User:bob.
	bob := newClient(t, saslAddr, kgo.SASL(oauth.Auth{Token: signToken(t, iss.key, iss.kid, "bob")}.AsMechanism()),
		kgo.DefaultProduceTopic("oauth-t"), kgo.RecordRetries(0))
	if err := bob.ProduceSync(ctx, kgo.StringRecord("bob")).FirstErr(); !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Errorf("produce as User:bob: %v, want TOPIC_AUTHORIZATION_FAILED", err)
	}

	// Another key, same kid: refused. Kafka's exchange: the JSON error as
	// a challenge, then SASL_AUTHENTICATION_FAILED with it as the message.
	other, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	forged := signToken(t, other, iss.kid, "alice")
	first, second := oauthRaw(t, saslAddr, forged)
	if first.ErrorCode != 0 || string(first.SASLAuthBytes) != `{"status":"invalid_token"}` || second == nil ||
		second.ErrorCode != kerr.SaslAuthenticationFailed.Code || second.ErrorMessage == nil || *second.ErrorMessage != `{"status":"invalid_token"}` {
		t.Errorf("forged token: first %+v second %+v", first, second)
	}
	// The session ends with the token (exp in an hour), though
	// connections.max.reauth.ms is 0.
	if first, second := oauthRaw(t, saslAddr, signToken(t, iss.key, iss.kid, "alice")); first.ErrorCode != 0 || second != nil ||
		first.SessionLifetimeMillis <= 0 || first.SessionLifetimeMillis > time.Hour.Milliseconds() {
		t.Errorf("good token by hand: %+v %+v", first, second)
	}
	if err := pingWith(t, saslAddr, oauth.Auth{Token: forged}.AsMechanism()); err == nil {
		t.Error("franz-go with a forged token connected")
	}
	// The audience is the listener's (listener.name.<l>.oauthbearer.…).
	if first, _ := oauthRaw(t, saslAddr, signTokenFor(t, iss.key, iss.kid, "alice", "other")); string(first.SASLAuthBytes) != `{"status":"invalid_token"}` {
		t.Errorf("a token for another audience: %+v", first)
	}

	// The refusals are in the audit log, with why (and never the token):
	// the forged token twice (by hand, and franz-go's, which never
	// acknowledges the error).
	var line map[string]any
	forgedLines := 0
	for ctx.Err() == nil && forgedLines < 2 {
		forgedLines = 0
		f, err := os.Open(audit)
		if err == nil {
			sc := bufio.NewScanner(f)
			for sc.Scan() {
				var l map[string]any
				if json.Unmarshal(sc.Bytes(), &l) == nil && l["api"] == "SASLAuthenticate" && l["mechanism"] == "OAUTHBEARER" &&
					strings.Contains(fmt.Sprint(l["reason"]), "signature") {
					line = l
					forgedLines++
				}
				if strings.Contains(sc.Text(), forged) {
					t.Error("the audit log holds the token")
				}
			}
			f.Close()
		}
		if forgedLines < 2 {
			time.Sleep(50 * time.Millisecond)
		}
	}
	if forgedLines < 2 || line["outcome"] != "denied" || line["client"] != "127.0.0.1" {
		t.Errorf("audit lines for the forged token: %d, the last %v", forgedLines, line)
	}
}
