package tlsconf

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	keystore "github.com/pavlo-v-chernykh/keystore-go/v4"
	"github.com/rs/zerolog"
	"software.sslmate.com/src/go-pkcs12"
)

type pair struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
}

func newCert(t *testing.T, subject pkix.Name, parent *pair, isCA bool) *pair {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	serial, _ := rand.Int(rand.Reader, big.NewInt(1<<62))
	tmpl := &x509.Certificate{
		SerialNumber: serial, Subject: subject,
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		IsCA:        isCA, BasicConstraintsValid: true,
		DNSNames: []string{"localhost"}, IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
	}
	signer, signerKey := tmpl, key
	if parent != nil {
		signer, signerKey = parent.cert, parent.key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, signer, &key.PublicKey, signerKey)
	if err != nil {
		t.Fatal(err)
	}
	c, _ := x509.ParseCertificate(der)
	return &pair{c, key}
}

func pemOf(p *pair, ca *pair) (chain, key []byte) {
	chain = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: p.cert.Raw})
	chain = append(chain, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ca.cert.Raw})...)
	der, _ := x509.MarshalPKCS8PrivateKey(p.key)
	return chain, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})
}

func writeJKS(t *testing.T, path string, p, ca *pair, storePass, keyPass string) {
	t.Helper()
	ks := keystore.New()
	der, _ := x509.MarshalPKCS8PrivateKey(p.key)
	err := ks.SetPrivateKeyEntry("kafka", keystore.PrivateKeyEntry{CreationTime: time.Now(), PrivateKey: der,
		CertificateChain: []keystore.Certificate{{Type: "X509", Content: p.cert.Raw}, {Type: "X509", Content: ca.cert.Raw}}}, []byte(keyPass))
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := ks.Store(&buf, []byte(storePass)); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(path, buf.Bytes(), 0o600)
}

func writeJKSTrust(t *testing.T, path string, ca *pair, pass string) {
	t.Helper()
	ks := keystore.New()
	if err := ks.SetTrustedCertificateEntry("caroot", keystore.TrustedCertificateEntry{CreationTime: time.Now(),
		Certificate: keystore.Certificate{Type: "X509", Content: ca.cert.Raw}}); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := ks.Store(&buf, []byte(pass)); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(path, buf.Bytes(), 0o600)
}

// handshake runs a TLS handshake against src's server side over loopback
// and returns the principal, or the handshake's error (either side's).
func handshake(t *testing.T, src *Source, client *tls.Config) (string, error) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	type result struct {
		principal string
		err       error
	}
	res := make(chan result, 1)
	go func() {
		nc, err := ln.Accept()
		if err != nil {
			res <- result{"", err}
			return
		}
		defer nc.Close()
		srv := tls.Server(nc, src.Server())
		srv.SetDeadline(time.Now().Add(5 * time.Second))
		if err := srv.Handshake(); err != nil {
			res <- result{"", err}
			return
		}
		st := srv.ConnectionState()
		srv.Write([]byte{1})
		res <- result{src.Principal(&st), nil}
	}()
	nc, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	cl := tls.Client(nc, client)
	cl.SetDeadline(time.Now().Add(5 * time.Second))
	cerr := cl.Handshake()
	if cerr == nil {
		// TLS 1.3: a refused client certificate shows on the client's first read.
		_, cerr = cl.Read(make([]byte, 1))
	}
	r := <-res
	if r.err != nil {
		return "", r.err
	}
	return r.principal, cerr
}

func TestStoresAndPrincipal(t *testing.T) {
	dir := t.TempDir()
	ca := newCert(t, pkix.Name{CommonName: "fjord-ca"}, nil, true)
	server := newCert(t, pkix.Name{CommonName: "localhost", Organization: []string{"Fjord"}}, ca, false)
	client := newCert(t, pkix.Name{CommonName: "alice", OrganizationalUnit: []string{"settlement"}, Organization: []string{"Fjord"}, Country: []string{"NO"}}, ca, false)
	otherCA := newCert(t, pkix.Name{CommonName: "other-ca"}, nil, true)
	stranger := newCert(t, pkix.Name{CommonName: "mallory"}, otherCA, false)

	chain, key := pemOf(server, ca)
	os.WriteFile(filepath.Join(dir, "server.pem"), append(chain, key...), 0o600)
	os.WriteFile(filepath.Join(dir, "ca.pem"), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ca.cert.Raw}), 0o600)
	p12, err := pkcs12.Modern.Encode(server.key, server.cert, []*x509.Certificate{ca.cert}, "p12pass")
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "server.p12"), p12, 0o600)
	trustP12, _ := pkcs12.Modern.EncodeTrustStore([]*x509.Certificate{ca.cert}, "trustpass")
	os.WriteFile(filepath.Join(dir, "trust.p12"), trustP12, 0o600)
	writeJKS(t, filepath.Join(dir, "server.jks"), server, ca, "storepass", "keypass")
	writeJKSTrust(t, filepath.Join(dir, "trust.jks"), ca, "trustpass")

	cases := []struct {
		name  string
		props map[string]string
	}{
		{"PEM inline", map[string]string{"ssl.keystore.type": "PEM", "ssl.keystore.key": string(key), "ssl.keystore.certificate.chain": string(chain),
			"ssl.truststore.type": "PEM", "ssl.truststore.certificates": string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ca.cert.Raw}))}},
		{"PEM files", map[string]string{"ssl.keystore.type": "PEM", "ssl.keystore.location": filepath.Join(dir, "server.pem"),
			"ssl.truststore.type": "PEM", "ssl.truststore.location": filepath.Join(dir, "ca.pem")}},
		{"PKCS12", map[string]string{"ssl.keystore.type": "PKCS12", "ssl.keystore.location": filepath.Join(dir, "server.p12"), "ssl.keystore.password": "p12pass",
			"ssl.truststore.type": "PKCS12", "ssl.truststore.location": filepath.Join(dir, "trust.p12"), "ssl.truststore.password": "trustpass"}},
		{"JKS", map[string]string{"ssl.keystore.location": filepath.Join(dir, "server.jks"), "ssl.keystore.password": "storepass", "ssl.key.password": "keypass",
			"ssl.truststore.location": filepath.Join(dir, "trust.jks"), "ssl.truststore.password": "trustpass"}},
		{"PKCS12 configured as JKS (keytool's default)", map[string]string{"ssl.keystore.location": filepath.Join(dir, "server.p12"), "ssl.keystore.password": "p12pass",
			"ssl.truststore.location": filepath.Join(dir, "trust.jks"), "ssl.truststore.password": "trustpass"}},
	}
	roots := x509.NewCertPool()
	roots.AddCert(ca.cert)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tc.props["ssl.client.auth"] = "required"
			tc.props["ssl.principal.mapping.rules"] = "RULE:^CN=([a-z]+),OU=settlement,.*$/$1-settle/U, DEFAULT"
			src, err := Load(ForListener(tc.props, "SSL"))
			if err != nil {
				t.Fatal(err)
			}
			withCert := &tls.Config{RootCAs: roots, ServerName: "localhost", Certificates: []tls.Certificate{{Certificate: [][]byte{client.cert.Raw}, PrivateKey: client.key}}}
			p, err := handshake(t, src, withCert)
			if err != nil || p != "User:ALICE-SETTLE" {
				t.Fatalf("client certificate: principal %q, %v; want User:ALICE-SETTLE", p, err)
			}
			if _, err := handshake(t, src, &tls.Config{RootCAs: roots, ServerName: "localhost"}); err == nil {
				t.Fatal("required client auth: a client without a certificate got through")
			}
			bad := &tls.Config{RootCAs: roots, ServerName: "localhost", Certificates: []tls.Certificate{{Certificate: [][]byte{stranger.cert.Raw}, PrivateKey: stranger.key}}}
			if _, err := handshake(t, src, bad); err == nil {
				t.Fatal("a certificate of another CA got through")
			}
		})
	}
	t.Run("requested and none", func(t *testing.T) {
		props := map[string]string{"ssl.keystore.type": "PEM", "ssl.keystore.location": filepath.Join(dir, "server.pem"),
			"ssl.truststore.type": "PEM", "ssl.truststore.location": filepath.Join(dir, "ca.pem"), "ssl.client.auth": "requested"}
		src, err := Load(ForListener(props, "SSL"))
		if err != nil {
			t.Fatal(err)
		}
		if p, err := handshake(t, src, &tls.Config{RootCAs: roots, ServerName: "localhost"}); err != nil || p != "" {
			t.Fatalf("requested, no certificate: %q, %v; want anonymous", p, err)
		}
		withCert := &tls.Config{RootCAs: roots, ServerName: "localhost", Certificates: []tls.Certificate{{Certificate: [][]byte{client.cert.Raw}, PrivateKey: client.key}}}
		if p, err := handshake(t, src, withCert); err != nil || p != "User:CN=alice,OU=settlement,O=Fjord,C=NO" {
			t.Fatalf("requested, with certificate: %q, %v", p, err)
		}
		props["ssl.client.auth"] = "none"
		src, _ = Load(ForListener(props, "SSL"))
		if p, err := handshake(t, src, withCert); err != nil || p != "" {
			t.Fatalf("none: %q, %v; want anonymous", p, err)
		}
	})
	t.Run("per-listener override", func(t *testing.T) {
		props := map[string]string{"ssl.keystore.location": "/nonexistent", "ssl.keystore.type": "PEM",
			"listener.name.internal.ssl.keystore.location": filepath.Join(dir, "server.pem")}
		if _, err := Load(ForListener(props, "INTERNAL")); err != nil {
			t.Fatalf("listener.name.internal.ssl.keystore.location should win: %v", err)
		}
		if _, err := Load(ForListener(props, "EXTERNAL")); err == nil {
			t.Fatal("EXTERNAL has no override and a missing keystore")
		}
	})
	t.Run("start-up refusals", func(t *testing.T) {
		for _, tc := range []struct {
			props map[string]string
			want  string
		}{
			{map[string]string{"ssl.keystore.location": filepath.Join(dir, "server.jks"), "ssl.keystore.password": "wrong"}, "wrong password"},
			{map[string]string{"ssl.keystore.location": filepath.Join(dir, "server.jks"), "ssl.keystore.password": "storepass", "ssl.key.password": "wrong"}, "wrong ssl.key.password"},
			{map[string]string{"ssl.keystore.location": filepath.Join(dir, "server.p12"), "ssl.keystore.password": "wrong"}, "wrong ssl.keystore.password"},
			{map[string]string{"ssl.keystore.location": filepath.Join(dir, "missing.jks")}, "no such file"},
			{map[string]string{}, "needs a keystore"},
			{map[string]string{"ssl.keystore.type": "PEM", "ssl.keystore.location": filepath.Join(dir, "server.pem"), "ssl.cipher.suites": "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,TLS_FOO"}, "TLS_FOO is not a cipher suite"},
			{map[string]string{"ssl.keystore.type": "PEM", "ssl.keystore.location": filepath.Join(dir, "server.pem"), "ssl.cipher.suites": "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256"}, "add TLS_AES_128_GCM_SHA256"},
			{map[string]string{"ssl.keystore.type": "PEM", "ssl.keystore.location": filepath.Join(dir, "server.pem"), "ssl.enabled.protocols": "TLSv1.1,TLSv1.3"}, "contiguous"},
			{map[string]string{"ssl.keystore.type": "PEM", "ssl.keystore.location": filepath.Join(dir, "server.pem"), "ssl.enabled.protocols": "SSLv3"}, "SSLv3"},
			{map[string]string{"ssl.keystore.type": "PEM", "ssl.keystore.location": filepath.Join(dir, "server.pem"), "ssl.client.auth": "always"}, "ssl.client.auth"},
			{map[string]string{"ssl.keystore.type": "PEM", "ssl.keystore.location": filepath.Join(dir, "server.pem"), "ssl.principal.mapping.rules": "RULE:x"}, "pattern/replacement"},
		} {
			_, err := Load(ForListener(tc.props, "SSL"))
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "listener SSL") {
				t.Errorf("%v: error %v, want one naming the listener and %q", tc.props, err, tc.want)
			}
		}
	})
	t.Run("TLS 1.2 suites honoured", func(t *testing.T) {
		props := map[string]string{"ssl.keystore.type": "PEM", "ssl.keystore.location": filepath.Join(dir, "server.pem"),
			"ssl.enabled.protocols": "TLSv1.2", "ssl.cipher.suites": "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384"}
		src, err := Load(ForListener(props, "SSL"))
		if err != nil {
			t.Fatal(err)
		}
		if got := src.Server().CipherSuites; len(got) != 1 || got[0] != tls.TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384 || src.Server().MaxVersion != tls.VersionTLS12 {
			t.Fatalf("suites %v max %x", got, src.Server().MaxVersion)
		}
	})
}

func TestReload(t *testing.T) {
	dir := t.TempDir()
	ca := newCert(t, pkix.Name{CommonName: "fjord-ca"}, nil, true)
	first := newCert(t, pkix.Name{CommonName: "first"}, ca, false)
	second := newCert(t, pkix.Name{CommonName: "second"}, ca, false)
	path := filepath.Join(dir, "server.p12")
	write := func(p *pair) {
		data, _ := pkcs12.Modern.Encode(p.key, p.cert, nil, "pw")
		os.WriteFile(path+".tmp", data, 0o600)
		os.Rename(path+".tmp", path)
	}
	write(first)
	src, err := Load(ForListener(map[string]string{"ssl.keystore.location": path, "ssl.keystore.password": "pw", "ssl.keystore.type": "PKCS12"}, "SSL"))
	if err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { src.Watch(ctx, 10*time.Millisecond, zerolog.New(&logs)); close(done) }()

	wait := func(want string) {
		t.Helper()
		for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
			if src.Server().Certificates[0].Leaf.Subject.CommonName == want {
				return
			}
		}
		t.Fatalf("served %s, want %s", src.Server().Certificates[0].Leaf.Subject.CommonName, want)
	}
	os.WriteFile(path, []byte("garbage"), 0o600) // a failed reload keeps the old certificate
	time.Sleep(100 * time.Millisecond)
	wait("first")
	write(second)
	wait("second")
	cancel()
	<-done
	if n := strings.Count(logs.String(), "do not load"); n != 1 {
		t.Errorf("%d failure lines, want 1:\n%s", n, logs.String())
	}
	if n := strings.Count(logs.String(), "reloaded"); n != 1 {
		t.Errorf("%d reload lines, want 1:\n%s", n, logs.String())
	}
}

func TestMappingRules(t *testing.T) {
	for _, tc := range []struct{ rules, dn, want string }{
		{"DEFAULT", "CN=alice,OU=eng,O=Fjord,C=NO", "CN=alice,OU=eng,O=Fjord,C=NO"},
		{"RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/L,DEFAULT", "CN=Bob,OU=Ops,O=Fjord,L=Oslo,ST=Oslo,C=NO", "bob@ops"},
		{"RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/L,DEFAULT", "CN=alice,OU=eng,O=Fjord,C=NO", "CN=alice,OU=eng,O=Fjord,C=NO"},
		{`RULE:^CN=([^,]+),.*$/u\/$1/`, "CN=x,O=y", "u/x"},
		{"RULE:^CN=([a-z]+)$/$1x/U", "CN=ab", "ABX"},
	} {
		rules, err := parseMappingRules(tc.rules)
		if err != nil {
			t.Fatalf("%s: %v", tc.rules, err)
		}
		got, err := mapPrincipal(rules, tc.dn)
		if err != nil || got != tc.want {
			t.Errorf("%s on %s: %q, %v; want %q", tc.rules, tc.dn, got, err, tc.want)
		}
	}
	rules, _ := parseMappingRules("RULE:^CN=admin$/admin/")
	if _, err := mapPrincipal(rules, "CN=other"); err == nil {
		t.Error("no rule matched, yet a principal came out")
	}
	for _, bad := range []string{"RULE:a/b", "NOPE", "DEFAULT DEFAULT", "RULE:(/x/"} {
		if _, err := parseMappingRules(bad); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}

func TestDistinguishedName(t *testing.T) {
	ca := newCert(t, pkix.Name{CommonName: "ca"}, nil, true)
	c := newCert(t, pkix.Name{CommonName: "a,b", OrganizationalUnit: []string{"x"}, Organization: []string{"O"}, Country: []string{"NO"}, SerialNumber: "7"}, ca, false)
	// Java writes SERIALNUMBER by its OID, with the value's DER in hex.
	if got, want := DistinguishedName(c.cert), `2.5.4.5=#130137,CN=a\,b,OU=x,O=O,C=NO`; got != want {
		t.Errorf("DN %q, want %q", got, want)
	}
}
