package sasl

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
)

// testKey is a signing key made in the test and its JWKS entry.
type testKey struct {
	kid  string
	alg  jose.SignatureAlgorithm
	priv crypto.Signer
}

func newRSAKey(t testing.TB, kid string) testKey {
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	return testKey{kid, jose.RS256, k}
}

func newECKey(t testing.TB, kid string) testKey {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return testKey{kid, jose.ES256, k}
}

func (k testKey) jwk() jose.JSONWebKey {
	return jose.JSONWebKey{Key: k.priv.Public(), KeyID: k.kid, Algorithm: string(k.alg), Use: "sig"}
}

func (k testKey) sign(t testing.TB, claims map[string]any) string {
	s, err := jose.NewSigner(jose.SigningKey{Algorithm: k.alg, Key: jose.JSONWebKey{Key: k.priv, KeyID: k.kid}}, (&jose.SignerOptions{}).WithType("JWT"))
	if err != nil {
		t.Fatal(err)
	}
	tok, err := jwt.Signed(s).Claims(claims).Serialize()
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func jwksJSON(t testing.TB, keys ...testKey) []byte {
	var set jose.JSONWebKeySet
	for _, k := range keys {
		set.Keys = append(set.Keys, k.jwk())
	}
	b, err := json.Marshal(set)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// jwksServer serves a JWKS the test changes, and counts its fetches.
type jwksServer struct {
	*httptest.Server
	mu      sync.Mutex
	body    []byte
	fetches atomic.Int64
}

func newJWKSServer(t *testing.T, body []byte) *jwksServer {
	s := &jwksServer{body: body}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.fetches.Add(1)
		s.mu.Lock()
		b := s.body
		s.mu.Unlock()
		if b == nil {
			http.Error(w, "down", http.StatusServiceUnavailable)
			return
		}
		w.Write(b)
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *jwksServer) set(b []byte) {
	s.mu.Lock()
	s.body = b
	s.mu.Unlock()
}

// signedServer builds a listener's OAUTHBEARER validator against url
// with the broker-wide keys extra.
func signedValidatorFor(t *testing.T, url string, extra map[string]string) *signedValidator {
	t.Helper()
	oauth := map[string]string{"sasl.oauthbearer.jwks.endpoint.url": url}
	for k, v := range extra {
		oauth[k] = v
	}
	srv, err := NewServer(Settings{EnabledMechanisms: "OAUTHBEARER", OAuth: oauth, Listener: map[string]string{
		"listener.name.l.oauthbearer.sasl.server.callback.handler.class": OAuthValidatorHandler,
	}}, "L", nil, Hooks{})
	if err != nil {
		t.Fatal(err)
	}
	v, ok := srv.oauth.(*signedValidator)
	if !ok {
		t.Fatalf("validator %T, want the signed one", srv.oauth)
	}
	return v
}

// runJWKS runs the key set's refresher for the test and waits (bounded)
// for its first set.
func runJWKS(t *testing.T, v *signedValidator) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { v.keys.run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	for i := 0; v.keys.cur.Load() == nil; i++ {
		if i > 500 {
			t.Fatal("JWKS not loaded")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func oauthMsg(tok string) []byte { return []byte("n,,\x01auth=Bearer " + tok + "\x01\x01") }

func TestOAuthBearerSigned(t *testing.T) {
	rsaKey, ecKey, other := newRSAKey(t, "r1"), newECKey(t, "e1"), newRSAKey(t, "r1")
	js := newJWKSServer(t, jwksJSON(t, rsaKey, ecKey))
	v := signedValidatorFor(t, js.URL, map[string]string{
		"sasl.oauthbearer.expected.issuer":   "https://idp.example",
		"sasl.oauthbearer.expected.audience": "kafka, other",
	})
	runJWKS(t, v)

	now := time.Now()
	claims := func(mod func(map[string]any)) map[string]any {
		c := map[string]any{"sub": "alice", "iss": "https://idp.example", "aud": []string{"kafka"},
			"iat": now.Add(-time.Minute).Unix(), "exp": now.Add(time.Hour).Unix(), "scope": "produce consume"}
		if mod != nil {
			mod(c)
		}
		return c
	}
	good := rsaKey.sign(t, claims(nil))
	enc := base64.RawURLEncoding.EncodeToString
	parts := strings.Split(good, ".")
	body, _ := json.Marshal(claims(nil))
	hmacKey, _ := json.Marshal(rsaKey.jwk())
	hmac := func() string {
		s, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.HS256, Key: hmacKey}, (&jose.SignerOptions{}).WithHeader("kid", "r1"))
		if err != nil {
			t.Fatal(err)
		}
		tok, _ := jwt.Signed(s).Claims(claims(nil)).Serialize()
		return tok
	}()
	flipped := []byte(parts[2])
	flipped[10] ^= 1
	if flipped[10] == parts[2][10] {
		t.Fatal("signature unchanged")
	}

	for _, c := range []struct {
		what, tok string
		ok        bool
	}{
		{"good RS256", good, true},
		{"good ES256", ecKey.sign(t, claims(nil)), true},
		{"no kid: the keys of its type are tried", testKey{"", jose.ES256, ecKey.priv}.sign(t, claims(nil)), true},
		{"kid of a key of another type", testKey{"e1", jose.RS256, rsaKey.priv}.sign(t, claims(nil)), false},
		{"second audience", rsaKey.sign(t, claims(func(c map[string]any) { c["aud"] = "other" })), true},
		{"expired", rsaKey.sign(t, claims(func(c map[string]any) { c["exp"] = now.Add(-time.Minute).Unix() })), false},
		{"expired within the skew", rsaKey.sign(t, claims(func(c map[string]any) { c["exp"] = now.Add(-10 * time.Second).Unix() })), true},
		{"no exp", rsaKey.sign(t, claims(func(c map[string]any) { delete(c, "exp") })), false},
		{"no iat", rsaKey.sign(t, claims(func(c map[string]any) { delete(c, "iat") })), false},
		{"not yet valid", rsaKey.sign(t, claims(func(c map[string]any) { c["nbf"] = now.Add(time.Hour).Unix() })), false},
		{"wrong issuer", rsaKey.sign(t, claims(func(c map[string]any) { c["iss"] = "https://evil.example" })), false},
		{"no issuer", rsaKey.sign(t, claims(func(c map[string]any) { delete(c, "iss") })), false},
		{"wrong audience", rsaKey.sign(t, claims(func(c map[string]any) { c["aud"] = []string{"web"} })), false},
		{"no audience", rsaKey.sign(t, claims(func(c map[string]any) { delete(c, "aud") })), false},
		{"no sub", rsaKey.sign(t, claims(func(c map[string]any) { delete(c, "sub") })), false},
		{"numeric scope", rsaKey.sign(t, claims(func(c map[string]any) { c["scope"] = 7 })), false},
		{"another key, same kid", other.sign(t, claims(nil)), false},
		{"bad signature", parts[0] + "." + parts[1] + "." + string(flipped), false},
		{"alg none", enc([]byte(`{"alg":"none","kid":"r1"}`)) + "." + enc(body) + ".", false},
		{"alg none signed", enc([]byte(`{"alg":"none","kid":"r1"}`)) + "." + enc(body) + "." + parts[2], false},
		{"HS256 keyed with the public JWK", hmac, false},
		{"oversized", rsaKey.sign(t, claims(func(c map[string]any) { c["pad"] = strings.Repeat("x", maxTokenBytes) })), false},
		{"garbage", "a.b.c", false},
	} {
		p, life, err := runOAuth(v, oauthMsg(c.tok))
		if (err == nil) != c.ok {
			t.Errorf("%s: principal %q err %v", c.what, p, err)
			continue
		}
		if c.ok && (p != "User:alice" || life <= 0 || life > time.Hour) {
			t.Errorf("%s: principal %q lifetime %v, want User:alice bounded by exp", c.what, p, life)
		}
	}

	// The session ends no later than the token, with
	// connections.max.reauth.ms too.
	x := &oauthExchange{v: v, lifetime: 10 * time.Minute}
	if _, _, _, life, err := x.Step(oauthMsg(good)); err != nil || life != 10*time.Minute {
		t.Errorf("reauth 10m, token 1h: lifetime %v err %v", life, err)
	}
	short := rsaKey.sign(t, claims(func(c map[string]any) { c["exp"] = now.Add(2 * time.Minute).Unix() }))
	x = &oauthExchange{v: v, lifetime: 10 * time.Minute}
	if _, _, _, life, err := x.Step(oauthMsg(short)); err != nil || life > 2*time.Minute || life < time.Minute {
		t.Errorf("reauth 10m, token 2m: lifetime %v err %v", life, err)
	}

	// A client that does not acknowledge the error still fails.
	x = &oauthExchange{v: v}
	if reply, done, _, _, err := x.Step(oauthMsg("a.b.c")); err != nil || done || string(reply) != invalidToken {
		t.Fatalf("bad token: reply %q done %v err %v", reply, done, err)
	}
	if _, done, _, _, err := x.Step(oauthMsg(good)); err == nil || done {
		t.Errorf("a second token after the error: done %v err %v", done, err)
	}
}

// A token naming a kid the set lacks refreshes the set (rate-limited):
// the provider's rotated key is taken without a restart.
func TestOAuthBearerKeyRotation(t *testing.T) {
	old, rotated := newRSAKey(t, "k1"), newECKey(t, "k2")
	js := newJWKSServer(t, jwksJSON(t, old))
	v := signedValidatorFor(t, js.URL, nil)
	runJWKS(t, v)
	claims := map[string]any{"sub": "bob", "iat": time.Now().Unix(), "exp": time.Now().Add(time.Hour).Unix()}
	tok := rotated.sign(t, claims)

	v.keys.kidEvery = time.Hour // one refresh for an unknown kid, then none for an hour
	before := js.fetches.Load()
	if _, _, err := runOAuth(v, oauthMsg(tok)); err == nil {
		t.Fatal("a token by a key not in the JWKS accepted")
	}
	if n := js.fetches.Load() - before; n != 1 {
		t.Errorf("unknown kid: %d fetches, want 1", n)
	}
	js.set(jwksJSON(t, old, rotated))
	for range 20 {
		if _, _, err := runOAuth(v, oauthMsg(tok)); err == nil {
			t.Fatal("accepted before a refresh was allowed: the rate limit did not hold")
		}
	}
	if n := js.fetches.Load() - before; n != 1 {
		t.Errorf("21 tokens with an unknown kid: %d fetches, want 1 (rate-limited)", n)
	}
	v.keys.mu.Lock()
	v.keys.lastKick = time.Time{} // the interval has passed
	v.keys.mu.Unlock()
	if p, _, err := runOAuth(v, oauthMsg(tok)); err != nil || p != "User:bob" {
		t.Fatalf("after rotation: principal %q err %v", p, err)
	}
	if _, _, err := runOAuth(v, oauthMsg(old.sign(t, claims))); err != nil {
		t.Errorf("the old key, still listed: %v", err)
	}
	// The old key leaves the set at the next refresh.
	js.set(jwksJSON(t, rotated))
	v.keys.mu.Lock()
	v.keys.lastKick = time.Time{}
	v.keys.mu.Unlock()
	if !v.keys.refreshNow() {
		t.Fatal("refresh did not end")
	}
	if _, _, err := runOAuth(v, oauthMsg(old.sign(t, claims))); err == nil {
		t.Error("a key removed from the JWKS still accepted")
	}
}

// An endpoint that is down: the fetch is retried with backoff, bounded,
// and the set is picked up once it serves; before that every token is
// refused.
func TestOAuthBearerJWKSDown(t *testing.T) {
	k := newRSAKey(t, "k")
	js := newJWKSServer(t, nil)
	v := signedValidatorFor(t, js.URL, map[string]string{
		"sasl.oauthbearer.jwks.endpoint.retry.backoff.ms":     "5",
		"sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms": "40",
	})
	if v.keys.round(context.Background()) {
		t.Fatal("a refresh against a failing endpoint succeeded")
	}
	// 5+10+20 ms of waits fit in 40, the next 40 does not: 4 attempts.
	if n := js.fetches.Load(); n != 4 {
		t.Errorf("one refresh made %d attempts, want 4", n)
	}
	tok := k.sign(t, map[string]any{"sub": "c", "iat": time.Now().Unix(), "exp": time.Now().Add(time.Hour).Unix()})
	v.keys.kidEvery = time.Hour
	v.keys.lastKick = time.Now()
	if _, _, err := runOAuth(v, oauthMsg(tok)); err == nil || !strings.Contains(err.Error(), "no JWKS") {
		t.Errorf("no JWKS yet: %v", err)
	}
	js.set(jwksJSON(t, k))
	runJWKS(t, v) // retried every backoff.max.ms while there is no set
	if _, _, err := runOAuth(v, oauthMsg(tok)); err != nil {
		t.Errorf("after the endpoint came back: %v", err)
	}
}

func TestOAuthBearerJWKSParse(t *testing.T) {
	k := newRSAKey(t, "k")
	dir := t.TempDir()
	big := append([]byte(`{"keys":[],"pad":"`), make([]byte, jwksMaxBytes)...)
	for name, c := range map[string]struct {
		body []byte
		ok   bool
	}{
		"good":           {jwksJSON(t, k), true},
		"with an HMAC":   {[]byte(`{"keys":[{"kty":"oct","k":"c2VjcmV0","kid":"h"},` + strings.TrimPrefix(string(jwksJSON(t, k)), `{"keys":[`)), true},
		"only an HMAC":   {[]byte(`{"keys":[{"kty":"oct","k":"c2VjcmV0","kid":"h"}]}`), false},
		"encryption key": {[]byte(strings.Replace(string(jwksJSON(t, k)), `"use":"sig"`, `"use":"enc"`, 1)), false},
		"empty":          {[]byte(`{"keys":[]}`), false},
		"not json":       {[]byte(`<html>`), false},
		"oversized":      {big, false},
	} {
		path := filepath.Join(dir, strings.ReplaceAll(name, " ", "_"))
		if err := os.WriteFile(path, c.body, 0o600); err != nil {
			t.Fatal(err)
		}
		// A file: URL is read when the listener is built; a bad one stops
		// start-up.
		_, err := NewServer(Settings{EnabledMechanisms: "OAUTHBEARER", OAuth: map[string]string{"sasl.oauthbearer.jwks.endpoint.url": "file://" + path}}, "L", nil, Hooks{})
		if (err == nil) != c.ok {
			t.Errorf("%s: %v", name, err)
		}
		if ks, err := parseJWKS(c.body); c.ok && (err != nil || len(ks.keys) != 1 || ks.keys[0].KeyID != "k") {
			t.Errorf("%s: parsed %+v %v", name, ks, err)
		}
	}
	for _, bad := range []map[string]string{
		{"sasl.oauthbearer.jwks.endpoint.url": "ftp://x/jwks"},
		{"sasl.oauthbearer.jwks.endpoint.url": "https:///jwks"},
		{"sasl.oauthbearer.jwks.endpoint.url": "http://x", "sasl.oauthbearer.clock.skew.seconds": "-1"},
		{"sasl.oauthbearer.jwks.endpoint.url": "http://x", "sasl.oauthbearer.jwks.endpoint.refresh.ms": "x"},
		{"sasl.oauthbearer.jwks.endpoint.url": "http://x", "sasl.oauthbearer.sub.claim.name": " "},
	} {
		if _, err := NewServer(Settings{EnabledMechanisms: "OAUTHBEARER", OAuth: bad}, "L", nil, Hooks{}); err == nil {
			t.Errorf("%v accepted", bad)
		}
	}
	// The handler class picks the validator; the JWKS one needs a URL,
	// and no class without a URL is no validator at all (oauth_rule_test.go).
	for class, want := range map[string]string{
		OAuthValidatorHandler:  "error",
		OAuthValidatorHandler3: "error",
		OAuthUnsecuredHandler:  "unsecured",
		"com.example.Mine":     "error",
		"":                     "error",
	} {
		srv, err := NewServer(Settings{EnabledMechanisms: "OAUTHBEARER", Listener: map[string]string{"listener.name.l.oauthbearer.sasl.server.callback.handler.class": class}}, "L", nil, Hooks{})
		got := "error"
		if err == nil {
			if _, ok := srv.oauth.(*unsecuredValidator); ok {
				got = "unsecured"
			}
		}
		if got != want {
			t.Errorf("class %q without a JWKS URL: %s (%v), want %s", class, got, err, want)
		}
	}
	// A per-listener URL overrides the broker-wide one.
	srv, err := NewServer(Settings{EnabledMechanisms: "OAUTHBEARER", OAuth: map[string]string{"sasl.oauthbearer.jwks.endpoint.url": "http://a/"},
		Listener: map[string]string{"listener.name.l.sasl.oauthbearer.jwks.endpoint.url": "http://b/"}}, "L", nil, Hooks{})
	if err != nil || srv.jwks == nil || srv.jwks.src.Host != "b" {
		t.Errorf("listener override: %+v %v", srv, err)
	}
	srv, err = NewServer(Settings{EnabledMechanisms: "OAUTHBEARER", OAuth: map[string]string{"sasl.oauthbearer.jwks.endpoint.url": "http://a/"},
		Listener: map[string]string{"listener.name.l.sasl.oauthbearer.jwks.endpoint.url": "http://b/",
			"listener.name.l.oauthbearer.sasl.oauthbearer.jwks.endpoint.url": "http://c/"}}, "L", nil, Hooks{})
	if err != nil || srv.jwks == nil || srv.jwks.src.Host != "c" {
		t.Errorf("listener and mechanism override: %+v %v", srv, err)
	}
}

// Hooks.Denied hears each failed authentication once, an OAUTHBEARER one
// when the token is refused (a client may never acknowledge the error).
func TestDeniedHook(t *testing.T) {
	var reasons []string
	hooks := Hooks{Denied: func(_ net.Addr, mech, reason string) { reasons = append(reasons, mech+": "+reason) }}
	srv, err := NewServer(Settings{EnabledMechanisms: "OAUTHBEARER,PLAIN", JAASConfig: PlainLoginModule + ` required user_a="pw";`,
		Listener: map[string]string{"listener.name.l.oauthbearer.sasl.server.callback.handler.class": OAuthUnsecuredHandler}}, "L", nil, hooks)
	if err != nil {
		t.Fatal(err)
	}
	bad := oauthMsg(unsecuredJWT(t, map[string]any{"sub": "a"})) // no exp
	x, _ := srv.Start("OAUTHBEARER", nil, nil)
	if reply, _, _, _, err := x.Step(bad); err != nil || string(reply) != invalidToken || len(reasons) != 1 {
		t.Fatalf("refused token: reply %q err %v reasons %q", reply, err, reasons)
	}
	if _, _, _, _, err := x.Step([]byte{1}); err == nil || len(reasons) != 1 {
		t.Errorf("acknowledged: err %v reasons %q", err, reasons)
	}
	x, _ = srv.Start("PLAIN", nil, nil)
	if _, _, _, _, err := x.Step([]byte("\x00a\x00wrong")); err == nil || len(reasons) != 2 || !strings.HasPrefix(reasons[1], "PLAIN: ") {
		t.Errorf("wrong password: err %v reasons %q", err, reasons)
	}
	x, _ = srv.Start("PLAIN", nil, nil)
	if _, done, _, _, err := x.Step([]byte("\x00a\x00pw")); err != nil || !done || len(reasons) != 2 {
		t.Errorf("good password: err %v reasons %q", err, reasons)
	}
}
