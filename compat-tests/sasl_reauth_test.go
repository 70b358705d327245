package compattests

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// rawPlain authenticates c with SaslHandshake v1 and SaslAuthenticate v1
// (PLAIN) and returns the SaslAuthenticate answer.
func rawPlain(t *testing.T, c *rawConn, user, pass string) *kmsg.SASLAuthenticateResponse {
	t.Helper()
	hs := kmsg.NewPtrSASLHandshakeRequest()
	hs.SetVersion(1)
	hs.Mechanism = "PLAIN"
	if _, err := c.Write(c.frame(hs)); err != nil {
		t.Fatal(err)
	}
	f, err := c.readFrame(5 * time.Second)
	if err != nil {
		t.Fatalf("SaslHandshake: %v", err)
	}
	hr := kmsg.NewPtrSASLHandshakeResponse()
	hr.SetVersion(1)
	if err := parseResponse(f, c.corr, hr, false); err != nil || hr.ErrorCode != 0 {
		t.Fatalf("SaslHandshake: %v, error %d", err, hr.ErrorCode)
	}
	au := kmsg.NewPtrSASLAuthenticateRequest()
	au.SetVersion(1)
	au.SASLAuthBytes = []byte("\x00" + user + "\x00" + pass)
	if _, err := c.Write(c.frame(au)); err != nil {
		t.Fatal(err)
	}
	if f, err = c.readFrame(5 * time.Second); err != nil {
		t.Fatalf("SaslAuthenticate: %v", err)
	}
	ar := kmsg.NewPtrSASLAuthenticateResponse()
	ar.SetVersion(1)
	if err := parseResponse(f, c.corr, ar, false); err != nil {
		t.Fatal(err)
	}
	return ar
}

// rawMetadataV1 sends a Metadata v1 and reports whether it was answered.
func rawMetadataV1(c *rawConn) error {
	md := kmsg.NewPtrMetadataRequest()
	md.SetVersion(1)
	if _, err := c.Write(c.frame(md)); err != nil {
		return err
	}
	_, err := c.readFrame(5 * time.Second)
	return err
}

// TestSASLReauth (KIP-368): with connections.max.reauth.ms the session
// lifetime is announced; a connection that does not re-authenticate is
// closed at its first request after it ends; one that re-authenticates in
// time goes on; re-authenticating as someone else fails.
func TestSASLReauth(t *testing.T) {
	const lifetime = 3 * time.Second
	saslAddr := net.JoinHostPort("127.0.0.1", freePort(t))
	startBroker(t, t.TempDir(),
		"listeners=PLAINTEXT://127.0.0.1:{port},SASL_PLAINTEXT://"+saslAddr,
		"listener.security.protocol.map=PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT",
		"inter.broker.listener.name=PLAINTEXT",
		"sasl.enabled.mechanisms=PLAIN",
		"listener.name.sasl_plaintext.plain.connections.max.reauth.ms=3000",
		`listener.name.sasl_plaintext.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required user_alice="alice-secret" user_bob="bob-secret";`,
	)

	// franz-go re-authenticates on its own before the session ends (it
	// reads the lifetime): its connection outlives the first session.
	franz, err := kgo.NewClient(kgo.SeedBrokers(saslAddr), plainOpt("alice", "alice-secret"), kgo.RequestRetries(0))
	if err != nil {
		t.Fatal(err)
	}
	defer franz.Close()
	ping := func(what string) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		req := kmsg.NewPtrMetadataRequest()
		if _, err := franz.Broker(1).Request(ctx, req); err != nil {
			t.Errorf("franz-go %s: %v", what, err)
		}
	}
	ping("at the start")

	expiring := dialRaw(t, saslAddr)
	start := time.Now()
	if ar := rawPlain(t, expiring, "alice", "alice-secret"); ar.ErrorCode != 0 || ar.SessionLifetimeMillis != lifetime.Milliseconds() {
		t.Fatalf("authenticate: error %d, session lifetime %d ms, want %d", ar.ErrorCode, ar.SessionLifetimeMillis, lifetime.Milliseconds())
	}
	renewed := dialRaw(t, saslAddr)
	rawPlain(t, renewed, "alice", "alice-secret")
	if err := rawMetadataV1(expiring); err != nil {
		t.Fatalf("Metadata within the session: %v", err)
	}

	time.Sleep(time.Until(start.Add(lifetime / 3)))
	if ar := rawPlain(t, renewed, "alice", "alice-secret"); ar.ErrorCode != 0 || ar.SessionLifetimeMillis != lifetime.Milliseconds() {
		t.Fatalf("re-authenticate: error %d, lifetime %d", ar.ErrorCode, ar.SessionLifetimeMillis)
	}
	other := dialRaw(t, saslAddr)
	rawPlain(t, other, "alice", "alice-secret")
	if ar := rawPlain(t, other, "bob", "bob-secret"); ar.ErrorCode != kerr.SaslAuthenticationFailed.Code {
		t.Errorf("re-authenticating as another user: error %d, want SASL_AUTHENTICATION_FAILED", ar.ErrorCode)
	}

	time.Sleep(time.Until(start.Add(lifetime + 300*time.Millisecond)))
	if err := rawMetadataV1(expiring); err == nil {
		t.Error("Metadata after the session ended without re-authentication was answered")
	}
	if err := rawMetadataV1(renewed); err != nil {
		t.Errorf("Metadata on the re-authenticated connection after the first session's end: %v", err)
	}
	ping("after the first session's end")
}
