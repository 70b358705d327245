package sasl

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"
)

func unsecuredJWT(t *testing.T, claims map[string]any) string {
	enc := func(v any) string {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		return base64.RawURLEncoding.EncodeToString(b)
	}
	return enc(map[string]any{"alg": "none"}) + "." + enc(claims) + "."
}

// runOAuth runs one OAUTHBEARER exchange as a Kafka client does: on an
// error challenge it acknowledges with %x01 and gets the failure. It
// checks the wire form of a refusal: Kafka's JSON, challenge and message.
func runOAuth(v tokenValidator, msg []byte) (string, time.Duration, error) {
	x := &oauthExchange{v: v}
	reply, done, p, life, err := x.Step(msg)
	if err != nil || done {
		return p, life, err
	}
	if string(reply) != invalidToken {
		return "", 0, fmt.Errorf("challenge %q, want %s", reply, invalidToken)
	}
	_, done, _, _, err = x.Step([]byte{1})
	var f *oauthFailure
	if done || !errors.As(err, &f) || f.ClientMessage() != invalidToken {
		return "", 0, fmt.Errorf("after the %%x01: done %v err %v, want an oauthFailure", done, err)
	}
	return "", 0, err
}

func TestOAuthBearerUnsecured(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	v, err := newUnsecuredValidator(map[string]string{"unsecuredValidatorRequiredScope": "kafka"})
	if err != nil {
		t.Fatal(err)
	}
	v.now = func() time.Time { return now }
	exp := float64(now.Unix() + 60)
	msg := func(tok string) []byte { return []byte("n,,\x01auth=Bearer " + tok + "\x01\x01") }
	for _, c := range []struct {
		what   string
		claims map[string]any
		ok     bool
	}{
		{"good", map[string]any{"sub": "alice", "exp": exp, "iat": exp - 120, "scope": "kafka other"}, true},
		{"expired", map[string]any{"sub": "alice", "exp": float64(now.Unix()), "scope": "kafka"}, false},
		{"no exp", map[string]any{"sub": "alice", "scope": "kafka"}, false},
		{"no sub", map[string]any{"exp": exp, "scope": "kafka"}, false},
		{"no scope", map[string]any{"sub": "alice", "exp": exp}, false},
		{"future iat", map[string]any{"sub": "alice", "exp": exp, "iat": exp, "scope": "kafka"}, false},
	} {
		p, _, err := runOAuth(v, msg(unsecuredJWT(t, c.claims)))
		if (err == nil) != c.ok || c.ok && p != "User:alice" {
			t.Errorf("%s: principal %q err %v", c.what, p, err)
		}
	}
	// A signed token's alg is refused.
	b, _ := json.Marshal(map[string]any{"sub": "alice", "exp": exp})
	signed := base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"RS256"}`)) + "." + base64.RawURLEncoding.EncodeToString(b) + ".sig"
	if _, _, err := runOAuth(v, msg(signed)); err == nil {
		t.Error("a signed token accepted by the unsecured validator")
	}
	for _, bad := range []string{"", "n,,", "n,,\x01auth=Bearer x\x01", "n,,\x01auth=Basic x\x01\x01", "p=x,,\x01auth=Bearer x\x01\x01", "n,,\x01k\x01\x01"} {
		if _, _, err := ParseOAuthBearer([]byte(bad)); err == nil {
			t.Errorf("ParseOAuthBearer(%q) accepted", bad)
		}
	}
}
