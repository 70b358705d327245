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
