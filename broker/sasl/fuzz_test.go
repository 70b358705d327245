package sasl

import "testing"

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
