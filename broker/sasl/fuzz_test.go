package sasl

import (
	"testing"
	"time"
)

// The JAAS parser reads operator-written files, and PLAIN messages come
// from unauthenticated peers: neither may panic or loop on any input.
func FuzzParseJAAS(f *testing.F) {
	f.Add(jaasFile)
	f.Add(PlainLoginModule + ` required user_a="b";`)
	f.Add(`/* x`)
	f.Add(`a required b='c\`)
	f.Fuzz(func(t *testing.T, s string) {
		ParseJAASFile(s)
		ParseJAASConfig(s)
	})
}

func FuzzParsePlain(f *testing.F) {
	f.Add([]byte("\x00alice\x00pw"))
	f.Add([]byte("a\x00b"))
	f.Fuzz(func(t *testing.T, b []byte) {
		a, u, p, err := ParsePlain(b)
		if err == nil && (u == "" || p == "" || len(a)+len(u)+len(p)+2 != len(b)) {
			t.Fatalf("%q parsed as %q %q %q", b, a, u, p)
		}
	})
}

// SCRAM client messages come from unauthenticated peers.
func FuzzParseScramClientFirst(f *testing.F) {
	f.Add([]byte("n,,n=user,r=fyko+d2lbbFgONRv9qkxdawL"))
	f.Add([]byte("y,a=u=2Cx,n=u=3D,r=abc,tokenauth=true"))
	f.Fuzz(func(t *testing.T, b []byte) {
		cf, err := ParseClientFirst(b)
		if err == nil && (cf.User == "" || cf.Nonce == "" || len(cf.GS2Header)+len(cf.Bare) != len(b)) {
			t.Fatalf("%q parsed as %+v", b, cf)
		}
	})
}

func FuzzParseScramClientFinal(f *testing.F) {
	f.Add([]byte("c=biws,r=abcdef,p=dHpbV3uCGxnd6ndSjeekYwYXeIfR3GBxyyoxNsO1d0I="))
	f.Add([]byte("c=biws,r=a,ext=1,p=AAAA"))
	f.Add([]byte("c=biws,r=cnoncecnonceSNONCE,p=AAAA")) // librdkafka before 2.6.1
	f.Fuzz(func(t *testing.T, b []byte) {
		cf, err := ParseClientFinal(b)
		if err == nil && (len(cf.Proof) == 0 || len(cf.WithoutProof) >= len(b)) {
			t.Fatalf("%q parsed as %+v", b, cf)
		}
	})
}

// OAUTHBEARER's GS2 header and key/value list come from unauthenticated
// peers; so does the token the unsecured validator decodes.
func FuzzParseOAuthBearer(f *testing.F) {
	f.Add([]byte("n,,\x01auth=Bearer eyJhbGciOiJub25lIn0.eyJzdWIiOiJhIiwiZXhwIjo5OTk5OTk5OTk5fQ.\x01\x01"))
	f.Add([]byte("y,a=x,\x01k=v\x01auth=Bearer a.b.\x01\x01"))
	v, _ := newUnsecuredValidator(nil)
	f.Fuzz(func(t *testing.T, b []byte) {
		if tok, _, err := ParseOAuthBearer(b); err == nil {
			v.validate(tok) //nolint:errcheck
		}
	})
}

// A signed validator's token comes from unauthenticated peers, and the
// JWKS from an endpoint over the network: neither may panic, and only a
// token signed by a key of the set passes.
func FuzzOAuthBearerSigned(f *testing.F) {
	k := newECKey(f, "k")
	good := k.sign(f, map[string]any{"sub": "a", "iat": 1, "exp": 1 << 40})
	f.Add(good, jwksJSON(f, k))
	f.Add("eyJhbGciOiJub25lIn0.eyJzdWIiOiJhIn0.", []byte(`{"keys":[{"kty":"oct","k":"AA"}]}`))
	f.Add("a.b.c", []byte(`{"keys":[{"kty":"RSA","n":"AQAB","e":"AQAB"}]}`))
	j, err := newJWKS("http://127.0.0.1:1/", time.Hour, time.Millisecond, time.Millisecond)
	if err != nil {
		f.Fatal(err)
	}
	j.kidEvery, j.lastKick = time.Hour, time.Now() // no fetches
	v := &signedValidator{keys: j, subClaim: "sub", scopeClaim: "scope", now: time.Now}
	fixed, err := parseJWKS(jwksJSON(f, k))
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, tok string, set []byte) {
		if ks, err := parseJWKS(set); err == nil && len(ks.keys) == 0 {
			t.Fatal("an empty set parsed")
		}
		j.cur.Store(fixed)
		if p, _, err := v.validate(tok); err == nil && tok != good && p != "a" {
			t.Fatalf("%q accepted as %q", tok, p)
		}
	})
}
