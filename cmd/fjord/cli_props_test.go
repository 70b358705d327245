package main

import (
	"bytes"
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

	"software.sslmate.com/src/go-pkcs12"
)

// -b (kcat) and --bootstrap-server (the Kafka tools) set the same value
// as --bootstrap, anywhere among the arguments; the last one given wins.
func TestCLIBootstrapAliases(t *testing.T) {
	t.Setenv("FJORD_BOOTSTRAP", "")
	for _, args := range [][]string{
		{"-b", "h:1"},
		{"--bootstrap-server", "h:1"},
		{"--bootstrap=h:1"},
		{"orders", "-b", "h:1"},
		{"--bootstrap", "x:9", "orders", "--bootstrap-server=h:1"},
	} {
		var errOut bytes.Buffer
		c := newCLI("fjord topic describe", &errOut, &errOut)
		if _, ok := c.parse(args, 0, 1); !ok {
			t.Errorf("%q: %s", args, errOut.String())
			continue
		}
		if *c.bootstrap != "h:1" {
			t.Errorf("%q: bootstrap %q, want h:1", args, *c.bootstrap)
		}
	}
	var errOut bytes.Buffer
	c := newCLI("x", &errOut, &errOut)
	c.parse(nil, 0, 0)
	if *c.bootstrap != "127.0.0.1:9092" {
		t.Errorf("default bootstrap %q", *c.bootstrap)
	}
}

// -X takes kcat's property names; an unknown one (or a Java client's name
// for a key it knows by librdkafka's) is a usage error naming it.
func TestCLIClientPropertyFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		code int    // 0: parses
		msg  string // in the error output
	}{
		{[]string{"-X", "security.protocol=SASL_PLAINTEXT", "-X", "sasl.mechanism=SCRAM-SHA-256", "-X", "sasl.username=alice", "-X", "sasl.password=p=w"}, 0, ""},
		{[]string{"-X", "security.protocol=sasl_plaintext", "-X", "sasl.mechanisms=plain", "-X", "sasl.username=a", "-X", "sasl.password=b"}, 0, ""},
		{[]string{"-X", "client.id=mine"}, 0, ""},
		{[]string{"-X", "security.protocol=PLAINTEXT"}, 0, ""},
		{[]string{"-X", "queue.buffering.max.ms=5"}, exitUsage, `unknown client property "queue.buffering.max.ms"`},
		{[]string{"-X", "ssl.truststore.location=/x.jks"}, exitUsage, `"ssl.truststore.location" is not supported: give the CA certificates as PEM with ssl.ca.location`},
		{[]string{"-X", "security.protocol"}, exitUsage, `"security.protocol" is not key=value`},
		{[]string{"-X", "security.protocol=TLS"}, exitUsage, `security.protocol "TLS": want PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL`},
		{[]string{"-X", "sasl.username=a", "-X", "sasl.password=b"}, exitUsage, "sasl.password is set but security.protocol is PLAINTEXT: use SASL_PLAINTEXT or SASL_SSL"},
		{[]string{"-X", "security.protocol=SASL_SSL", "-X", "sasl.username=a"}, exitUsage, "needs sasl.mechanism"},
		{[]string{"-X", "security.protocol=SASL_PLAINTEXT", "-X", "sasl.mechanism=GSSAPI", "-X", "sasl.username=a"}, exitUsage, `sasl.mechanism "GSSAPI"`},
		{[]string{"-X", "security.protocol=SASL_PLAINTEXT", "-X", "sasl.mechanism=PLAIN"}, exitUsage, "needs sasl.username"},
		{[]string{"-X", "ssl.ca.location=/nonexistent"}, exitUsage, "ssl.ca.location is set but security.protocol is PLAINTEXT"},
		{[]string{"-X", "security.protocol=SSL", "-X", "ssl.ca.location=/nonexistent/ca.pem"}, exitUsage, "ssl.ca.location: open /nonexistent/ca.pem"},
		{[]string{"-X", "security.protocol=SSL", "-X", "enable.ssl.certificate.verification=maybe"}, exitUsage, `enable.ssl.certificate.verification "maybe"`},
		{[]string{"-X", "security.protocol=SSL", "-X", "ssl.key.location=k.pem"}, exitUsage, "ssl.certificate.location and ssl.key.location go together"},
	} {
		var errOut bytes.Buffer
		c := newCLI("fjord produce", &errOut, &errOut)
		code, ok := c.parse(tc.args, 0, 0)
		if tc.code == 0 {
			if !ok {
				t.Errorf("%q: exit %d: %s", tc.args, code, errOut.String())
			}
			continue
		}
		if ok || code != tc.code || !strings.Contains(errOut.String(), tc.msg) {
			t.Errorf("%q: ok %v exit %d, want %d with %q; output:\n%s", tc.args, ok, code, tc.code, tc.msg, errOut.String())
		}
	}
}

// -F and --command-config read a properties file into the same table as
// -X, in command-line order: a later -X replaces the file's value. A Java
// client's sasl.jaas.config gives the username and password.
func TestCLIClientPropertyFile(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "client.properties")
	os.WriteFile(file, []byte("# a Kafka tool's --command-config\nsecurity.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-512\n"+
		`sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username="alice" password="s3cret";`+"\n"), 0o600)
	for _, flagName := range []string{"-F", "--command-config"} {
		var errOut bytes.Buffer
		c := newCLI("fjord topic list", &errOut, &errOut)
		if _, ok := c.parse([]string{flagName, file, "-X", "sasl.mechanism=PLAIN"}, 0, 0); !ok {
			t.Fatalf("%s: %s", flagName, errOut.String())
		}
		if c.props.get("sasl.mechanism") != "PLAIN" || c.props.get("security.protocol") != "SASL_PLAINTEXT" {
			t.Errorf("%s then -X: %v", flagName, c.props.m)
		}
		m, err := c.props.saslMechanism()
		if err != nil || m.Name() != "PLAIN" {
			t.Fatalf("mechanism %v: %v", m, err)
		}
		// PLAIN's first message is authzid NUL user NUL password.
		_, first, err := m.Authenticate(t.Context(), "h:1")
		if err != nil || string(first) != "\x00alice\x00s3cret" {
			t.Errorf("PLAIN from sasl.jaas.config: %q %v", first, err)
		}
	}
	bad := filepath.Join(dir, "bad.properties")
	os.WriteFile(bad, []byte("security.protocol=SSL\n\nlinger.ms=5\n"), 0o600)
	var errOut bytes.Buffer
	c := newCLI("fjord topic list", &errOut, &errOut)
	if code, ok := c.parse([]string{"-F", bad}, 0, 0); ok || code != exitUsage || !strings.Contains(errOut.String(), bad+`:3: unknown client property "linger.ms"`) {
		t.Errorf("a file with an unknown key: ok %v exit %d: %s", ok, code, errOut.String())
	}
}

// pki is a CA, a broker certificate for "localhost" only, and a client
// certificate, as PEM files in a directory.
type pki struct {
	dir                 string
	ca                  *x509.Certificate
	caKey               *ecdsa.PrivateKey
	server              tls.Certificate
	clientCert, clientK string // file names
}

func newPKI(t *testing.T) *pki {
	t.Helper()
	p := &pki{dir: t.TempDir()}
	p.caKey, _ = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test-ca"}, NotBefore: time.Now().Add(-time.Hour),
		NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &p.caKey.PublicKey, p.caKey)
	if err != nil {
		t.Fatal(err)
	}
	p.ca, _ = x509.ParseCertificate(der)
	p.write(t, "ca.pem", "CERTIFICATE", der)
	sk, sder := p.issue(t, "localhost", 2, x509.ExtKeyUsageServerAuth)
	p.server = tls.Certificate{Certificate: [][]byte{sder}, PrivateKey: sk}
	ck, cder := p.issue(t, "client", 3, x509.ExtKeyUsageClientAuth)
	p.write(t, "client.pem", "CERTIFICATE", cder)
	kd, _ := x509.MarshalPKCS8PrivateKey(ck)
	p.write(t, "client.key", "PRIVATE KEY", kd)
	//nolint:staticcheck // the legacy encryption ssl.key.password decrypts
	enc, err := x509.EncryptPEMBlock(rand.Reader, "EC PRIVATE KEY", mustEC(t, ck), []byte("keypw"), x509.PEMCipherAES256)
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(p.dir, "client-enc.key"), pem.EncodeToMemory(enc), 0o600)
	leaf, _ := x509.ParseCertificate(cder)
	p12, err := pkcs12.Modern.Encode(ck, leaf, []*x509.Certificate{p.ca}, "storepw")
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(p.dir, "client.p12"), p12, 0o600)
	return p
}

func mustEC(t *testing.T, k *ecdsa.PrivateKey) []byte {
	der, err := x509.MarshalECPrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	return der
}

func (p *pki) issue(t *testing.T, dns string, serial int64, usage x509.ExtKeyUsage) (*ecdsa.PrivateKey, []byte) {
	t.Helper()
	k, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: dns}, DNSNames: []string{dns},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), ExtKeyUsage: []x509.ExtKeyUsage{usage},
		KeyUsage: x509.KeyUsageDigitalSignature}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, p.ca, &k.PublicKey, p.caKey)
	if err != nil {
		t.Fatal(err)
	}
	return k, der
}

func (p *pki) write(t *testing.T, name, typ string, der []byte) {
	if err := os.WriteFile(filepath.Join(p.dir, name), pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
}

func (p *pki) path(name string) string { return filepath.Join(p.dir, name) }

// The ssl.* properties against a real TLS server that wants a client
// certificate: the CA, the client certificate from PEM files (its key
// plain or encrypted) or PKCS#12, and what the verification properties
// relax. The server's certificate names localhost and is dialled as
// 127.0.0.1, so host name checking fails it.
func TestCLIClientPropertiesTLS(t *testing.T) {
	p := newPKI(t)
	roots := x509.NewCertPool()
	roots.AddCert(p.ca)
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{p.server}, ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: roots})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { c.(*tls.Conn).Handshake(); c.Close() }()
		}
	}()
	dial := func(cfg *tls.Config, serverName string) error {
		cfg = cfg.Clone()
		cfg.ServerName = serverName // as kgo sets it from the broker's host
		c, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", ln.Addr().String(), cfg)
		if err != nil {
			return err
		}
		defer c.Close()
		// TLS 1.3: the server's verdict on the client's certificate comes
		// with the first read.
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		_, err = c.Read(make([]byte, 1))
		if err != nil && strings.Contains(err.Error(), "EOF") {
			err = nil
		}
		return err
	}
	base := []string{"security.protocol=SSL", "ssl.ca.location=" + p.path("ca.pem")}
	pemPair := []string{"ssl.certificate.location=" + p.path("client.pem"), "ssl.key.location=" + p.path("client.key")}
	for _, tc := range []struct {
		name       string
		props      []string
		serverName string
		ok         bool
	}{
		{"PEM certificate and key", append(base, pemPair...), "localhost", true},
		{"no client certificate", base, "localhost", false},
		{"host name not in the certificate", append(base, pemPair...), "127.0.0.1", false},
		{"endpoint identification none", append(append(base, pemPair...), "ssl.endpoint.identification.algorithm=none"), "127.0.0.1", true},
		{"endpoint identification empty (Java's)", append(append(base, pemPair...), "ssl.endpoint.identification.algorithm="), "127.0.0.1", true},
		{"encrypted key with ssl.key.password", append(base, "ssl.certificate.location="+p.path("client.pem"), "ssl.key.location="+p.path("client-enc.key"), "ssl.key.password=keypw"), "localhost", true},
		{"PKCS#12 keystore", append(base, "ssl.keystore.location="+p.path("client.p12"), "ssl.keystore.password=storepw"), "localhost", true},
		{"unknown CA", append([]string{"security.protocol=SSL"}, pemPair...), "localhost", false},
		{"unknown CA, none still checks the chain", append([]string{"security.protocol=SSL", "ssl.endpoint.identification.algorithm=none"}, pemPair...), "localhost", false},
		{"unknown CA, verification off", append([]string{"security.protocol=SSL", "enable.ssl.certificate.verification=false"}, pemPair...), "127.0.0.1", true},
	} {
		var props clientProps
		for _, kv := range tc.props {
			if err := props.setFlag(kv); err != nil {
				t.Fatalf("%s: %v", tc.name, err)
			}
		}
		if _, err := props.options(); err != nil {
			t.Errorf("%s: options: %v", tc.name, err)
			continue
		}
		cfg, err := props.tlsConfig()
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		err = dial(cfg, tc.serverName)
		if (err == nil) != tc.ok {
			t.Errorf("%s: handshake error %v, want success %v", tc.name, err, tc.ok)
		}
	}
	for _, tc := range []struct {
		props []string
		msg   string
	}{
		{append(base, "ssl.certificate.location="+p.path("client.pem"), "ssl.key.location="+p.path("client-enc.key")), "is encrypted: give ssl.key.password"},
		{append(base, "ssl.certificate.location="+p.path("client.pem"), "ssl.key.location="+p.path("client-enc.key"), "ssl.key.password=wrong"), "decrypting with ssl.key.password"},
		{append(base, "ssl.keystore.location="+p.path("client.p12"), "ssl.keystore.password=wrong"), "wrong ssl.keystore.password?"},
		{append(append(base, pemPair...), "ssl.keystore.location="+p.path("client.p12")), "give one"},
		{[]string{"security.protocol=SSL", "ssl.ca.location=" + p.path("client.key")}, "no PEM certificate"},
	} {
		var props clientProps
		for _, kv := range tc.props {
			props.setFlag(kv)
		}
		if _, err := props.options(); err == nil || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("%q: %v, want an error with %q", tc.props, err, tc.msg)
		}
	}
}
