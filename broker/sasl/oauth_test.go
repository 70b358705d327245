package sasl

import (
	"encoding/base64"
	"encoding/json"
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
		_, done, p, _, err := (&oauthExchange{v: v}).Step(msg(unsecuredJWT(t, c.claims)))
		if (err == nil) != c.ok || c.ok && (!done || p != "User:alice") {
			t.Errorf("%s: done %v principal %q err %v", c.what, done, p, err)
		}
	}
	// A signed token's alg is refused.
	b, _ := json.Marshal(map[string]any{"sub": "alice", "exp": exp})
	signed := base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"RS256"}`)) + "." + base64.RawURLEncoding.EncodeToString(b) + ".sig"
	if _, _, _, _, err := (&oauthExchange{v: v}).Step(msg(signed)); err == nil {
		t.Error("a signed token accepted by the unsecured validator")
	}
	for _, bad := range []string{"", "n,,", "n,,\x01auth=Bearer x\x01", "n,,\x01auth=Basic x\x01\x01", "p=x,,\x01auth=Bearer x\x01\x01", "n,,\x01k\x01\x01"} {
		if _, _, err := ParseOAuthBearer([]byte(bad)); err == nil {
			t.Errorf("ParseOAuthBearer(%q) accepted", bad)
		}
	}
}
