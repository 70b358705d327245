package compattests

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// tlsFixtures are keystores made the way Kafka's documentation and
// apache/kafka's docker examples make them: with keytool, JKS stores named
// as theirs (kafka01.keystore.jks, kafka.truststore.jks) with credentials
// files beside them, plus a PKCS12 copy and PEM files for the other
// formats. Client certificates are keys made here and signed by the CA
// with keytool -gencert.
type tlsFixtures struct {
	dir     string
	caDir   string // ca.p12, ca.pem
	storePW string // kafka_keystore_creds, kafka_truststore_creds
	keyPW   string // kafka_ssl_key_creds
	caPEM   []byte
	roots   *x509.CertPool
}

func keytoolPath(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("keytool")
	if err != nil {
		if os.Getenv("FJORD_REQUIRE_KEYTOOL") != "" {
			t.Fatalf("keytool not found and FJORD_REQUIRE_KEYTOOL is set: %v", err)
		}
		t.Skipf("keytool not found (%v; make deps installs default-jre-headless); set FJORD_REQUIRE_KEYTOOL to make this a failure", err)
	}
	return p
}

func keytool(t *testing.T, stdin []byte, args ...string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, keytoolPath(t), args...)
	if stdin != nil {
		cmd.Stdin = strings.NewReader(string(stdin))
	}
	out, err := cmd.Output()
	if err != nil {
		stderr := ""
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = string(ee.Stderr)
		}
		t.Fatalf("keytool %s: %v\n%s%s", strings.Join(args, " "), err, out, stderr)
	}
	return out
}

func newTLSFixtures(t *testing.T) *tlsFixtures {
	t.Helper()
	dir := t.TempDir()
	return newTLSFixturesIn(t, dir, dir)
}

// newTLSFixturesIn writes the broker's stores to dir and the CA's files
// (ca.p12, ca.pem) to caDir. The files are world-readable: a container's
// user reads them through a bind mount.
func newTLSFixturesIn(t *testing.T, dir, caDir string) *tlsFixtures {
	t.Helper()
	f := &tlsFixtures{dir: dir, caDir: caDir, storePW: "abcdefgh", keyPW: "keypass12"}
	p := func(name string) string { return filepath.Join(f.dir, name) }
	ca := filepath.Join(caDir, "ca.p12")
	keytool(t, nil, "-genkeypair", "-alias", "ca", "-keyalg", "EC", "-groupname", "secp256r1", "-dname", "CN=fjord-test-ca",
		"-ext", "bc:c", "-validity", "2", "-keystore", ca, "-storetype", "PKCS12", "-storepass", "capass12")
	f.caPEM = keytool(t, nil, "-exportcert", "-rfc", "-alias", "ca", "-keystore", ca, "-storepass", "capass12")
	os.WriteFile(filepath.Join(caDir, "ca.pem"), f.caPEM, 0o644)
	f.roots = x509.NewCertPool()
	f.roots.AppendCertsFromPEM(f.caPEM)

	// The broker's JKS keystore, its key under its own password.
	ks := p("kafka01.keystore.jks")
	keytool(t, nil, "-genkeypair", "-alias", "kafka", "-keyalg", "EC", "-groupname", "secp256r1", "-dname", "CN=localhost,OU=brokers,O=Fjord",
		"-validity", "2", "-keystore", ks, "-storetype", "JKS", "-storepass", f.storePW, "-keypass", f.keyPW)
	csr := keytool(t, nil, "-certreq", "-alias", "kafka", "-keystore", ks, "-storepass", f.storePW, "-keypass", f.keyPW)
	signed := f.sign(t, csr)
	keytool(t, f.caPEM, "-importcert", "-noprompt", "-alias", "CARoot", "-keystore", ks, "-storepass", f.storePW)
	keytool(t, signed, "-importcert", "-alias", "kafka", "-keystore", ks, "-storepass", f.storePW, "-keypass", f.keyPW)
	keytool(t, f.caPEM, "-importcert", "-noprompt", "-alias", "CARoot", "-keystore", p("kafka.truststore.jks"), "-storetype", "JKS", "-storepass", f.storePW)
	for name, v := range map[string]string{"kafka_keystore_creds": f.storePW, "kafka_ssl_key_creds": f.keyPW, "kafka_truststore_creds": f.storePW} {
		os.WriteFile(p(name), []byte(v+"\n"), 0o644)
	}
	// The same key as PKCS12 (one password for store and key, as PKCS12 has).
	keytool(t, nil, "-importkeystore", "-noprompt", "-srckeystore", ks, "-srcstorepass", f.storePW, "-srckeypass", f.keyPW, "-srcalias", "kafka",
		"-destkeystore", p("kafka.keystore.p12"), "-deststoretype", "PKCS12", "-deststorepass", f.storePW, "-destkeypass", f.storePW)
	return f
}

// jksOverrides are the broker-wide ssl.* settings of the JKS keystore
// and truststore.
func (f *tlsFixtures) jksOverrides() []string {
	p := func(name string) string { return filepath.Join(f.dir, name) }
	return []string{
		"ssl.keystore.location=" + p("kafka01.keystore.jks"), "ssl.keystore.password=" + f.storePW, "ssl.key.password=" + f.keyPW,
		"ssl.truststore.location=" + p("kafka.truststore.jks"), "ssl.truststore.password=" + f.storePW,
	}
}

// sign has the CA sign a PEM certificate request, for a server or client.
func (f *tlsFixtures) sign(t *testing.T, csr []byte) []byte {
	t.Helper()
	return keytool(t, csr, "-gencert", "-rfc", "-alias", "ca", "-keystore", filepath.Join(f.caDir, "ca.p12"), "-storepass", "capass12",
		"-validity", "2", "-ext", "SAN=dns:localhost,dns:broker,ip:127.0.0.1", "-ext", "EKU=serverAuth,clientAuth")
}

// pemPair makes a key here and has the CA sign it: the certificate chain
// (leaf, CA) and the key, PEM.
func (f *tlsFixtures) pemPair(t *testing.T, subject pkix.Name) (chain, key []byte) {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{Subject: subject}, k)
	if err != nil {
		t.Fatal(err)
	}
	leaf := f.sign(t, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der}))
	kd, _ := x509.MarshalPKCS8PrivateKey(k)
	return append(leaf, f.caPEM...), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kd})
}

// clientCert is a client certificate signed by the CA, for franz-go.
func (f *tlsFixtures) clientCert(t *testing.T, subject pkix.Name) tls.Certificate {
	t.Helper()
	chain, key := f.pemPair(t, subject)
	c, err := tls.X509KeyPair(chain, key)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// strangerCert is a client certificate of a CA the broker does not trust.
func strangerCert(t *testing.T) tls.Certificate {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(7), Subject: pkix.Name{CommonName: "mallory"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// composeTLS generates, under base laid out as apache/kafka's tree, the
// files its docker/examples/fixtures/secrets holds (kafka01.keystore.jks,
// kafka.truststore.jks and the three credentials files) for a broker
// reached as broker or localhost, and a client certificate in PEM. It
// returns the client files' names and, last, their directory.
func composeTLS(t *testing.T, base string) []string {
	t.Helper()
	secrets := filepath.Join(base, "docker", "examples", "fixtures", "secrets")
	if err := os.MkdirAll(secrets, 0o755); err != nil {
		t.Fatal(err)
	}
	f := newTLSFixturesIn(t, secrets, t.TempDir())
	clientDir := filepath.Join(base, "client-secrets")
	os.MkdirAll(clientDir, 0o755)
	chain, key := f.pemPair(t, pkix.Name{CommonName: "client"})
	os.WriteFile(filepath.Join(clientDir, "ca.pem"), f.caPEM, 0o644)
	os.WriteFile(filepath.Join(clientDir, "client.pem"), chain, 0o644)
	os.WriteFile(filepath.Join(clientDir, "client.key"), key, 0o644)
	return []string{"ca.pem", "client.pem", "client.key", clientDir}
}

// clientFlags are composeclient's TLS flags for composeTLS's files, seen
// at dir ("" = where composeTLS wrote them); none without TLS.
func clientFlags(files []string, dir string) []string {
	if files == nil {
		return nil
	}
	if dir == "" {
		dir = files[3]
	}
	return []string{"--tls-ca", filepath.Join(dir, files[0]), "--tls-cert", filepath.Join(dir, files[1]), "--tls-key", filepath.Join(dir, files[2])}
}
